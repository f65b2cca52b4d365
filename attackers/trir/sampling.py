"""Which training windows each epoch of the TRIR attacker trains on: a per-person budget that
rotates through all of a person's windows across epochs.

A person's *pool* is every training window about them: the windows of their background
documents and of every NER-masked copy of those documents. With a rotation of ``N`` epochs
(:func:`person_budget`), each epoch takes ``ceil(n / N)`` of a person's ``n`` windows (fewer
with a cap), so an epoch costs about ``1 / N`` of all the windows, masked copies included: the
copies are drawn among the person's windows instead of multiplying the epoch. Nothing is
thrown away: the pool is cut into ``P`` interleaved shares (``P = N`` but see below; every
``P``-th window, from ``P`` different starting points), and each block of ``P`` epochs trains on
each share once, in a seeded order that changes from block to block. So every window is trained
on exactly once in epochs ``1..P``, once in ``P+1..2P``, and so on; an interleaved share spreads
over the whole text and over each of its masked copies, and never holds two neighbouring
(overlapping) windows.

The attack's default rotation is the number of versions of each text it trains on: the
background and its masked copies (paper: up to 4; fast: 2). So an epoch costs about what the
background alone would (the copies are drawn within it instead of multiplying it), and every
window, of every version, is trained on within that many epochs (at most 4, within the paper's
early-stopping patience + 1). ``N = 1`` is every window every epoch. A share holds at least a
batch of windows (the attack's ``min_share``): a person whose windows would fill less than a
batch an epoch is rotated over fewer epochs, or not at all, since rotating them would save less
than an optimizer step per epoch and take from the classifier most of what it sees of them (on
the short texts of the development population a rotation of every person cost up to 13 points
of TRIR on the spaCy-masked release: benchmarks/README.md). So the rotation bounds the cost of
long backgrounds and leaves short ones as they were.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence


def person_budget(n: int, rotation: int, cap: int | None = None, min_share: int = 1) -> tuple[int, int]:
    """For a person with ``n`` windows: at most how many windows an epoch takes, and over how
    many epochs the rotation goes round all of them: ``rotation``, fewer when a share would
    hold less than ``min_share`` windows (so a person with fewer than ``2 * min_share`` windows
    is not rotated), more when ``cap`` is smaller than the share."""
    if n < 1:
        return 0, 1
    if rotation < 1:
        raise ValueError(f"the window rotation must be at least 1 epoch, got {rotation}")
    period = max(1, min(rotation, n // max(1, min_share)))
    if cap is not None:
        if cap < 1:
            raise ValueError(f"the window cap must be at least 1, got {cap}")
        period = max(period, math.ceil(n / cap))
    return math.ceil(n / period), period


def share(pool: Sequence[int], period: int, epoch: int, seed: int, person: int) -> list[int]:
    """The windows of ``pool`` (one person's, in text order) that epoch ``epoch`` (0-based)
    trains on, in a rotation of ``period`` epochs: every ``period``-th window from an offset
    that each block of ``period`` epochs visits in its own seeded order."""
    block, k = divmod(epoch, period)
    offsets = list(range(period))
    random.Random(f"trir-rotation/{seed}/{person}/{block}").shuffle(offsets)
    return list(pool[offsets[k] :: period])


def rotation_period(y: Sequence[int], rotation: int = 1, max_per_class: int | None = None,
                    min_share: int = 1) -> int:
    """Epochs in one pass over the windows of labels ``y``: the longest rotation of any person
    (:func:`person_budget`), so that every window is trained on once in that many epochs."""
    counts: dict[int, int] = {}
    for c in y:
        counts[c] = counts.get(c, 0) + 1
    return max((person_budget(n, rotation, max_per_class, min_share)[1] for n in counts.values()), default=1)


def epoch_sampler(y: Sequence[int], seed: int, *, rotation: int = 1, max_per_class: int | None = None,
                  min_share: int = 1) -> tuple[Callable[[], list[int]], int]:
    """A function giving each epoch's order of the training windows (labels ``y``, one class per
    person), and the most windows an epoch holds. Each call is the next epoch: the windows of
    each person's share (:func:`share`; :func:`person_budget` gives its rotation from
    ``rotation``, ``max_per_class`` and ``min_share``), in a seeded random order."""
    import torch

    by_class: dict[int, list[int]] = {}
    for i, c in enumerate(y):
        by_class.setdefault(c, []).append(i)
    periods = {c: person_budget(len(pool), rotation, max_per_class, min_share)[1] for c, pool in by_class.items()}
    every = all(p == 1 for p in periods.values())
    gen = torch.Generator().manual_seed(seed)
    epoch = 0

    def epoch_order() -> list[int]:
        nonlocal epoch
        if every:  # no rotation: every window, in the order drawn before rotations existed
            chosen = list(range(len(y)))
        else:
            chosen = [i for c in sorted(by_class) for i in share(by_class[c], periods[c], epoch, seed, c)]
        epoch += 1
        perm = torch.randperm(len(chosen), generator=gen).tolist()
        return [chosen[p] for p in perm]

    per_epoch = sum(math.ceil(len(pool) / periods[c]) for c, pool in by_class.items())
    return epoch_order, per_epoch
