"""The gradient exchange of TRIR's data-parallel training (:mod:`attackers.trir.steps`, on Ray Train).

What PyTorch's DDP does, for the one model it is used with here, with one difference that
matters on a CPU: of the word-embedding matrix (half of MiniLM's 22.7 M parameters) only the
rows of the tokens in the step's batch are exchanged, since every other row's gradient is zero
on every worker. The rest is DDP's scheme: the gradients are summed across workers in a few
flat buckets (a few messages instead of one per parameter, and no copy to a message and back:
each parameter's averaged gradient is a view of its bucket), and each bucket is sent, without
waiting for it, as soon as the backward pass has produced every gradient in it (a hook per
parameter), so that the exchange of the upper layers overlaps the backward pass of the lower
ones. The buckets are sent in the same fixed order on every worker (a bucket waits for the
ones before it), as collective operations require.

Each worker's loss is its slice's share of the whole batch's mean, so the sum is the whole
batch's gradient: the numbers of one exchange are those of another (a sum of the same terms,
per element), with or without overlap and whatever the buckets.

Measured in ``benchmarks/trir_scale.py ray`` (see benchmarks/README.md, "Training on Ray Train").
"""

from __future__ import annotations

from typing import Any

#: DDP's default bucket size (its first bucket is smaller: here every bucket is this size).
BUCKET_BYTES = 16 * 2**20


class GradientExchange:
    """Sums the gradients of ``model`` across the ``torch.distributed`` workers, each step.

    ``exchange.start(rows)`` before the backward pass (``rows``: the word-embedding rows the
    whole batch touches, every worker the same), ``exchange.finish()`` after it. ``overlap``
    off sends every bucket after the backward pass (the benchmark's ablation); ``layout()``
    again whenever which parameters train changes (frozen layers)."""

    def __init__(self, model, embedding=None, *, overlap: bool = True, bucket_bytes: int = BUCKET_BYTES):
        self.model, self.embedding, self.overlap, self.bucket_bytes = model, embedding, overlap, bucket_bytes
        self._hooks = [p.register_post_accumulate_grad_hook(self._ready) for p in model.parameters()
                       if p is not embedding] if overlap else []
        self._rows = None
        self.layout()

    def layout(self) -> None:
        """Buckets of the trainable parameters, in the reverse of the model's order (about the
        order in which the backward pass produces their gradients), each one flat buffer."""
        import torch

        params = [p for p in self.model.parameters() if p.requires_grad and p is not self.embedding][::-1]
        self.buckets: list[dict[str, Any]] = []
        self._where: dict[int, tuple[int, int]] = {}
        current: list = []
        for p in [*params, None]:
            size = sum(q.numel() for q in current) * 4
            if current and (p is None or size + p.numel() * 4 > self.bucket_bytes):
                flat = torch.zeros(sum(q.numel() for q in current), dtype=torch.float32,
                                   device=current[0].device)
                offsets, at = [], 0
                for q in current:
                    self._where[id(q)] = (len(self.buckets), len(offsets))
                    offsets.append(at)
                    at += q.numel()
                self.buckets.append({"params": current, "offsets": offsets, "flat": flat})
                current = []
            if p is not None:
                current.append(p)

    def start(self, rows) -> None:
        """Before a backward pass: nothing sent yet; ``rows``, the embedding rows to exchange."""
        self._rows = rows
        self._sent: list = []
        self._filled = [0] * len(self.buckets)

    def _ready(self, param) -> None:
        """A parameter's gradient is final (hook): into its bucket; send every full bucket whose
        predecessors are sent."""
        where = self._where.get(id(param))
        if where is None or param.grad is None:
            return
        b, i = where
        bucket = self.buckets[b]
        n = param.numel()
        bucket["flat"][bucket["offsets"][i] : bucket["offsets"][i] + n].copy_(param.grad.reshape(-1))
        self._filled[b] += 1
        self._send_ready()

    def _send_ready(self) -> None:
        import torch.distributed as dist

        while len(self._sent) < len(self.buckets) and \
                self._filled[len(self._sent)] == len(self.buckets[len(self._sent)]["params"]):
            self._sent.append(dist.all_reduce(self.buckets[len(self._sent)]["flat"], async_op=True))

    def finish(self) -> None:
        """After the backward pass: send what is left (every bucket, without overlap; a
        parameter that got no gradient, on every worker alike, is sent as zeros and keeps
        none), then the embedding rows; wait; each
        parameter's gradient becomes the sum, a view of its bucket."""
        import torch
        import torch.distributed as dist

        none = {id(p) for p in self.model.parameters() if p.grad is None}  # the same on every worker
        for b, bucket in enumerate(self.buckets):
            if self._filled[b] == len(bucket["params"]):
                continue
            for p, at in zip(bucket["params"], bucket["offsets"]):
                view = bucket["flat"][at : at + p.numel()]
                if id(p) in none:
                    view.zero_()
                elif not self.overlap:
                    view.copy_(p.grad.reshape(-1))
            self._filled[b] = len(bucket["params"])
        self._send_ready()
        part = rows = None
        grad = None if self.embedding is None else self.embedding.grad
        if grad is not None and self._rows is not None:
            rows = self._rows.to(grad.device)
            part = grad.index_select(0, rows)
            self._sent.append(dist.all_reduce(part, async_op=True))
        for work in self._sent:
            work.wait()
        with torch.no_grad():
            for bucket in self.buckets:
                for p, at in zip(bucket["params"], bucket["offsets"]):
                    if id(p) not in none:  # no gradient stays none: the optimizer leaves it be
                        p.grad = bucket["flat"][at : at + p.numel()].view_as(p)
            if part is not None:  # the other rows are zero on every worker
                grad.index_copy_(0, rows, part)

    def close(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []
