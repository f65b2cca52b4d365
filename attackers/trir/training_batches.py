"""How the TRIR attacker walks its training windows: batches of similar length, repeated windows
dropped, lower layers frozen (each epoch's windows: :mod:`attackers.trir.sampling`)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from attackers.trir.token_windows import Windows


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
