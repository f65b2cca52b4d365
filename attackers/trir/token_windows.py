"""Token windows: cutting texts into overlapping windows, batching them, and summing their logits.

:func:`split_windows` and :func:`sum_window_logits` are pure, so they can be checked
without a model; :func:`make_windows` and :func:`predict_logits` apply them with a
tokenizer and a classifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from attackers.trir.encoder import autocast, inference_model, quiet_transformers
from audit.core.errors import AnonauditError
from audit.runtime.executor import sends_to_workers

if TYPE_CHECKING:
    import torch


# --------------------------------------------------------------------------- pure helpers


def split_windows(n_tokens: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Token ranges ``[start, end)`` of overlapping windows covering ``n_tokens`` tokens.

    Each window holds at most ``size`` tokens and shares ``overlap`` tokens with the
    previous one; the last window ends at the last token (it may be shorter). An
    empty text still gets one (empty) window, so every document gets a prediction.
    """
    if size < 1:
        raise ValueError(f"window size must be at least 1 token, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"overlap must be in [0, {size}) for windows of {size} tokens, got {overlap}")
    if n_tokens <= size:
        return [(0, n_tokens)]
    step = size - overlap
    out: list[tuple[int, int]] = []
    start = 0
    while True:
        end = min(start + size, n_tokens)
        out.append((start, end))
        if end == n_tokens:
            return out
        start += step


def sum_window_logits(logits: np.ndarray, doc_of_window: Sequence[int], n_docs: int) -> np.ndarray:
    """Sum the rows of ``logits`` (one per window) into one row per document.

    ``doc_of_window[i]`` is the document index of window ``i``. Documents with no
    window get a row of zeros.
    """
    logits = np.asarray(logits, dtype=np.float64)
    index = np.asarray(doc_of_window, dtype=np.int64)
    if logits.ndim != 2 or len(index) != logits.shape[0]:
        raise ValueError(f"need one document index per logit row: {logits.shape} rows vs {len(index)} indices")
    out = np.zeros((n_docs, logits.shape[1]), dtype=np.float64)
    np.add.at(out, index, logits)
    return out


def rank_of(scores: np.ndarray, true_index: int) -> int:
    """1-based rank of ``true_index`` in ``scores`` (ties count in its favour)."""
    return int(np.sum(scores > scores[true_index])) + 1


def softmax(row: np.ndarray) -> np.ndarray:
    z = np.asarray(row, dtype=np.float64)
    z = np.exp(z - z.max())
    return z / z.sum()


# --------------------------------------------------------------------------- windows of texts


@dataclass
class Windows:
    """Token windows of a list of texts: ``ids[i]`` with specials, from text ``doc[i]``,
    covering characters ``chars[i]`` of that text (``None`` when unknown)."""

    ids: list[list[int]] = field(default_factory=list)
    doc: list[int] = field(default_factory=list)
    chars: list[tuple[int, int] | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


def special_affixes(tokenizer) -> tuple[list[int], list[int]]:
    """The special token ids a tokenizer puts before and after one text ([CLS] ... [SEP])."""
    with quiet_transformers():
        plain = tokenizer("a", add_special_tokens=False)["input_ids"]
        full = tokenizer("a", add_special_tokens=True)["input_ids"]
    for i in range(len(full) - len(plain) + 1):
        if full[i : i + len(plain)] == plain:
            return list(full[:i]), list(full[i + len(plain):])
    return [], []


def make_windows(tokenizer, texts: Sequence[str], window: int, overlap: int) -> Windows:
    """Tokenize each text once and cut it into windows of ``window`` tokens, specials included."""
    prefix, suffix = special_affixes(tokenizer)
    n_special = len(prefix) + len(suffix)
    size = window - n_special
    if size < 1:
        raise AnonauditError(f"window={window} leaves no room for text after {n_special} special tokens")
    out = Windows()
    with quiet_transformers():
        for d, text in enumerate(texts):
            enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=tokenizer.is_fast,
                            truncation=False, verbose=False)
            ids = enc["input_ids"]
            offsets = enc.get("offset_mapping")
            for s, e in split_windows(len(ids), size, overlap):
                out.ids.append(prefix + ids[s:e] + suffix)
                out.doc.append(d)
                out.chars.append((offsets[s][0], offsets[e - 1][1]) if offsets and e > s else None)
    return out


def pad_batch(batch: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad to the longest sequence of this batch (not of the data set)."""
    import torch

    longest = max(len(x) for x in batch)
    ids = torch.full((len(batch), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), longest), dtype=torch.long)
    for i, x in enumerate(batch):
        ids[i, : len(x)] = torch.tensor(x, dtype=torch.long)
        mask[i, : len(x)] = 1
    return ids, mask


def predict_logits(model, windows: Windows, *, pad_id: int, device: str, batch_size: int = 64,
                   progress: bool = True, desc: str = "TRIR predict", executor: Any = None,
                   precision: str = "fp32") -> np.ndarray:
    """Logits of every window (batched by similar length for speed; original order returned),
    computed in ``precision`` (fp32, bf16 autocast, or int8: a dynamically quantized copy; see
    :func:`attackers.trir.encoder.inference_model`). With a distributed ``executor`` the batches
    go to its workers (:class:`WindowLogits`): the same batches, so the same numbers; a single
    batch is computed here, where the model is (a cluster's stage would start a worker and
    rebuild the model for it)."""
    import torch

    from audit.runtime.progress import bar as progress_bar

    model.eval()
    n = len(windows)
    n_labels = model.config.num_labels
    out = np.zeros((n, n_labels), dtype=np.float32)
    order = sorted(range(n), key=lambda i: len(windows.ids[i]))
    if sends_to_workers(executor, n, batch_size):
        rows = executor.map(WindowLogits(model, pad_id, precision), [windows.ids[i] for i in order], group=batch_size,
                            label="TRIR: window logits")
        if rows:
            out[order] = np.stack(rows)
        return out
    run = inference_model(model, precision)
    with torch.inference_mode(), autocast(precision, device), \
            progress_bar(total=n, desc=desc, unit="win", enabled=progress) as bar:
        for b in range(0, n, batch_size):
            idx = order[b : b + batch_size]
            ids, mask = pad_batch([windows.ids[i] for i in idx], pad_id)
            logits = run(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            out[idx] = logits.float().cpu().numpy()
            bar.update(len(idx))
    return out


class WindowLogits:
    """The classifier's logits of a batch of windows, as an executor's worker
    (:mod:`audit.runtime.executor`): pickled, it carries the model's config and weights (the
    trained attacker lives in this run's cache, which workers on other nodes cannot read) and
    rebuilds the model once per worker, on the worker's GPU when it has one, with as many torch
    threads as the worker has CPUs (``threads``, set by the executor), in ``precision`` (int8:
    quantized on the worker, which rebuilds the model from its fp32 weights)."""

    def __init__(self, model: Any, pad_id: int, precision: str = "fp32"):
        self.model, self.pad_id, self.precision = model, pad_id, precision
        self.device = "cpu"
        self.threads: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        import io

        import torch

        buf = io.BytesIO()
        torch.save({k: v.detach().cpu() for k, v in self.model.state_dict().items()}, buf)
        return {"config": self.model.config.to_dict(), "weights": buf.getvalue(), "pad_id": self.pad_id,
                "precision": self.precision}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.model, self.pad_id, self.device, self.threads = None, state["pad_id"], "cpu", None
        self.precision = state.get("precision", "fp32")
        self._state = state

    def setup(self) -> None:
        if self.model is not None:
            return
        import io

        import torch
        from transformers import AutoConfig, AutoModelForSequenceClassification

        config = dict(self._state["config"])
        model = AutoModelForSequenceClassification.from_config(AutoConfig.for_model(**config))
        model.load_state_dict(torch.load(io.BytesIO(self._state["weights"]), weights_only=True))
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        if self.threads and self.device == "cpu":
            torch.set_num_threads(self.threads)
        if self.precision == "int8" and self.device != "cpu":
            self.precision = "fp32"  # dynamic quantization is CPU-only: a GPU worker computes in fp32
        self.model = inference_model(model.to(self.device).eval(), self.precision)
        del self._state

    def __call__(self, group: list[list[int]]) -> list[np.ndarray]:
        import torch

        self.setup()
        ids, mask = pad_batch(group, self.pad_id)
        with torch.inference_mode(), autocast(self.precision, self.device):
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
        return list(logits.float().cpu().numpy())
