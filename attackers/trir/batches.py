"""How the TRIR attacker walks its training windows: each epoch's order (optionally at most N
windows per person), batches of similar length, repeated windows dropped, lower layers frozen."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from attackers.trir.windows import Windows


def epoch_sampler(y: Sequence[int], max_per_class: int | None, seed: int) -> tuple[Callable[[], list[int]], int]:
    """A function giving each epoch's order of the training windows (labels ``y``), and the
    number of windows per epoch. The order is a seeded permutation; with ``max_per_class``, of
    at most that many windows per person, drawn again every epoch."""
    import torch

    by_class: dict[int, list[int]] = {}
    for i, c in enumerate(y):
        by_class.setdefault(c, []).append(i)
    gen = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)

    def epoch_order() -> list[int]:
        if max_per_class is None:
            chosen = list(range(len(y)))
        else:
            chosen = [i for c in sorted(by_class) for i in
                      (by_class[c] if len(by_class[c]) <= max_per_class
                       else rng.sample(by_class[c], max_per_class))]
        perm = torch.randperm(len(chosen), generator=gen).tolist()
        return [chosen[p] for p in perm]

    per_epoch = len(y) if max_per_class is None else sum(min(len(v), max_per_class) for v in by_class.values())
    return epoch_order, per_epoch


#: Batches per pool when batches are bucketed by length: each pool of this many batches is
#: sorted by window length before it is cut, so a batch pads to a length close to its own.
BUCKET_POOL = 50


def length_batches(order: Sequence[int], lengths: Sequence[int], batch_size: int, seed: int) -> list[list[int]]:
    """``order`` cut into batches of windows of similar length (less padding, same windows):
    pools of :data:`BUCKET_POOL` batches are sorted by length, cut, and the batches shuffled."""
    rng = random.Random(seed)
    pool = batch_size * BUCKET_POOL
    batches: list[list[int]] = []
    for p in range(0, len(order), pool):
        chunk = sorted(order[p : p + pool], key=lambda i: lengths[i])
        batches += [chunk[b : b + batch_size] for b in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def dedup_windows(windows: Windows, y: Sequence[int]) -> tuple[Windows, list[int]]:
    """The windows with each (tokens, person) pair once: an NER-masked copy of a sentence
    without entities, or text repeated in several background documents, is trained on once."""
    seen: set[tuple[int, tuple[int, ...]]] = set()
    out, labels = Windows(), []
    for ids, d, ch, c in zip(windows.ids, windows.doc, windows.chars, y):
        key = (c, tuple(ids))
        if key in seen:
            continue
        seen.add(key)
        out.ids.append(ids)
        out.doc.append(d)
        out.chars.append(ch)
        labels.append(c)
    return out, labels


def freeze_lower(model, layers: int, frozen: bool) -> int:
    """(Un)freeze the embeddings and the lowest ``layers`` encoder layers; how many parameters
    that touched. Nothing happens for a model whose layers cannot be found."""
    base = getattr(model, getattr(model, "base_model_prefix", ""), None)
    encoder = getattr(base, "encoder", None)
    blocks = getattr(encoder, "layer", None)
    if base is None or blocks is None or layers <= 0:
        return 0
    touched = 0
    for module in [getattr(base, "embeddings", None), *list(blocks)[:layers]]:
        if module is None:
            continue
        for p in module.parameters():
            p.requires_grad_(not frozen)
            touched += p.numel()
    return touched
