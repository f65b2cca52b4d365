"""Log-probabilities of the tokens of a text under an in-process causal LM, window by window.

What :class:`~audit.metrics.ic.CausalIC` reads in its one-pass mode. The text is cut into
windows of ``size`` tokens: the first starts at the beginning of the document (on the model's
BOS token) and scores all of its tokens; each later window starts ``size // 2`` tokens after
the one before and scores its second half, so every token sees between half the window and the
whole window of left context, or the whole document before it when the document fits one
window (a document of up to ``size`` tokens is read in one forward pass, every token once).

Cost. Every forward pass runs the model's body over the whole window, but the output layer (for
the 0.5B scorer a 896 x 151,936 matrix: about a quarter of the arithmetic per token) runs only
at the positions that are scored and that ``needed`` asks for (the tokens of the terms), in
float32 or in bfloat16:

* ``fp32``: exact, as a plain forward pass gives it.
* ``bf16``: the body under torch's bfloat16 autocast, the output layer's matrix product in
  bfloat16 for the normaliser (log-sum-exp) only; the scored token's own logit is an exact
  float32 dot product. Only where the CPU computes bfloat16 natively (AVX-512 BF16 or AMX; a
  GPU with bf16): elsewhere oneDNN emulates it, slower than float32, and ``auto`` stays fp32.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from audit.core.errors import AnonauditError
from audit.runtime.cpu import native_bf16

PRECISIONS = ("auto", "fp32", "bf16")
#: Rows of the output layer computed at once (the logits of 256 positions: 155 MB in float32).
HEAD_ROWS = 256


def resolve_precision(value: str | None, device: str) -> str:
    """``fp32`` or ``bf16`` for ``value`` (``auto``/None: bf16 where ``device`` computes it
    natively, else fp32)."""
    if value in (None, "auto"):
        return "bf16" if native_bf16(device) else "fp32"
    if value not in PRECISIONS:
        raise AnonauditError(f"ic_precision must be one of {', '.join(PRECISIONS)}, got {value!r}")
    return str(value)


def windows(ids: Sequence[int], size: int, bos: int) -> list[tuple[list[int], int, int]]:
    """``(window ids, first scored position in the window, absolute index of its position 0)``;
    the first window is ``[bos, *ids[:size]]`` (its position 0 is BOS, so absolute index -1)."""
    size = max(4, int(size))
    half = max(1, size // 2)
    n = len(ids)
    jobs = [([bos, *ids[:size]], 1, -1)]
    start = half
    while start + half < n:
        jobs.append((list(ids[start:start + size]), half, start))
        start += half
    return jobs


def token_logprobs(model: Any, tok: Any, ids: Sequence[int], *, size: int, batch_size: int = 4,
                   precision: str = "fp32", needed: np.ndarray | None = None) -> np.ndarray:
    """log P(token i | its left context) for every token of ``ids`` (0 where ``needed`` is
    False: not computed). ``precision``: ``fp32`` or ``bf16`` (see the module's doc)."""
    import torch

    n = len(ids)
    logp = np.zeros(n)
    if n == 0:
        return logp
    need = np.ones(n, dtype=bool) if needed is None else np.asarray(needed, dtype=bool)
    bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    jobs = windows(ids, size, bos)
    device = next(model.parameters()).device
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    head = _Head(model, precision)
    cast = (torch.autocast(device.type, dtype=torch.bfloat16) if precision == "bf16"
            else torch.autocast(device.type, enabled=False))
    with torch.no_grad(), cast:
        for j in range(0, len(jobs), max(1, batch_size)):
            batch = jobs[j:j + max(1, batch_size)]
            width = max(len(w) for w, _, _ in batch)
            x = torch.tensor([w + [pad] * (width - len(w)) for w, _, _ in batch], device=device)
            m = torch.tensor([[1] * len(w) + [0] * (width - len(w)) for w, _, _ in batch], device=device)
            hidden = head.hidden(x, m)
            rows, cols, targets, where = [], [], [], []
            for r, (w, first, at) in enumerate(batch):
                for p in range(first, len(w)):
                    if need[at + p]:
                        rows.append(r)
                        cols.append(p - 1)
                        targets.append(w[p])
                        where.append(at + p)
            if rows:
                h = hidden[torch.tensor(rows, device=device), torch.tensor(cols, device=device)]
                logp[np.array(where)] = head.logprobs(h, torch.tensor(targets, device=device))
    return logp


class _Head:
    """The model's body (hidden states) and output layer, used apart so that the output layer
    runs at the scored positions only; a model without that split gives its logits whole."""

    def __init__(self, model: Any, precision: str):
        self.model, self.precision = model, precision
        body = getattr(model, "base_model", None)
        out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        self.split = body is not None and body is not model and out is not None and \
            getattr(out, "weight", None) is not None
        self.weight = out.weight if self.split else None
        self.bias = getattr(out, "bias", None) if self.split else None
        self._w16: Any = None
        self._b16: Any = None

    def hidden(self, x: Any, mask: Any) -> Any:
        if self.split:
            return self.model.base_model(input_ids=x, attention_mask=mask).last_hidden_state
        return self.model(input_ids=x, attention_mask=mask).logits

    def logprobs(self, h: Any, targets: Any) -> np.ndarray:
        import torch

        if not self.split:  # ``h`` holds whole logits rows
            return torch.log_softmax(h.float(), dim=-1).gather(1, targets[:, None])[:, 0].double().cpu().numpy()
        out = []
        with torch.autocast(h.device.type, enabled=False):
            for a in range(0, len(h), HEAD_ROWS):
                hc, tc = h[a:a + HEAD_ROWS].float(), targets[a:a + HEAD_ROWS]
                w = self.weight.float()
                own = (hc * w[tc]).sum(-1) + (self.bias[tc].float() if self.bias is not None else 0.0)
                if self.precision == "bf16":
                    if self._w16 is None:
                        self._w16 = self.weight.to(torch.bfloat16)
                        self._b16 = self.bias.to(torch.bfloat16) if self.bias is not None else None
                    logits = torch.nn.functional.linear(hc.to(torch.bfloat16), self._w16, self._b16).float()
                else:
                    logits = torch.nn.functional.linear(hc, w, None if self.bias is None else self.bias.float())
                    own = logits.gather(1, tc[:, None])[:, 0]
                out.append((own - torch.logsumexp(logits, dim=-1)).double().cpu().numpy())
        return np.concatenate(out)
