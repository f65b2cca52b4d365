"""Each epoch's training windows (issue 48, "smarter windows"): a per-person budget that rotates
through all of a person's windows across epochs. Pure functions, no model."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from attackers.trir import TRIRAttack
from attackers.trir.sampling import epoch_sampler, person_budget, share

# 3 people: 10, 7 and 1 windows; windows 0-9 of person 0 are its background (0-4) and a masked copy (5-9)
Y = [0] * 10 + [1] * 7 + [2]


def _epochs(y, n, **kw):
    nxt, per_epoch = epoch_sampler(y, kw.pop("seed", 0), **kw)
    return [nxt() for _ in range(n)], per_epoch


def _per_person(order, y):
    return Counter(y[i] for i in order)


def test_every_window_is_seen_once_in_each_block_of_the_rotation():
    epochs, per_epoch = _epochs(Y, 8, rotation=4)
    for order in epochs:
        assert len(order) == len(set(order))  # no window twice in an epoch
    for block in (epochs[:4], epochs[4:]):
        seen = Counter(i for order in block for i in order)
        # each window exactly once in epochs 1-4, and in 5-8; a person's only window every epoch
        assert seen == Counter({**dict.fromkeys(range(17), 1), 17: 4})
    # 5 windows over 4 epochs: shares of 2, 1, 1 and 1
    assert person_budget(5, 4) == (2, 4)
    five, _ = _epochs([0] * 5, 4, rotation=4)
    assert sorted(len(o) for o in five) == [1, 1, 1, 2] and sorted(i for o in five for i in o) == list(range(5))
    assert per_epoch == 3 + 2 + 1 and max(len(o) for o in epochs) <= per_epoch


def test_the_budget_is_respected_and_a_cap_lengthens_the_rotation():
    epochs, _ = _epochs(Y, 4, rotation=4)
    for order in epochs:
        counts = _per_person(order, Y)
        assert counts[0] <= math.ceil(10 / 4) and counts[1] <= math.ceil(7 / 4) and counts[2] == 1
    assert person_budget(10, 4) == (3, 4) and person_budget(10, 4, cap=2) == (2, 5)
    assert person_budget(1, 4) == (1, 1) and person_budget(0, 4) == (0, 1)
    capped, per_epoch = _epochs(Y, 5, rotation=4, max_per_class=2)
    assert per_epoch == 2 + 2 + 1
    assert all(_per_person(order, Y)[0] == 2 for order in capped)
    assert {i for order in capped for i in order if Y[i] == 0} == set(range(10))  # all 10 in 5 epochs
    with pytest.raises(ValueError, match="at least 1 epoch"):
        person_budget(5, 0)


def test_a_share_holds_at_least_a_batch_so_short_backgrounds_are_not_rotated():
    assert person_budget(10, 4, min_share=16) == (10, 1)  # fewer windows than a batch: all, every epoch
    assert person_budget(40, 4, min_share=16) == (20, 2)  # two shares of at least a batch
    assert person_budget(200, 4, min_share=16) == (50, 4)
    assert person_budget(200, 4, cap=10, min_share=16) == (10, 20)  # a cap still bounds the epoch
    short, per_epoch = _epochs([0] * 9 + [1] * 6, 2, rotation=3, min_share=16)
    assert per_epoch == 15 and all(sorted(o) == list(range(15)) for o in short)


def test_the_masked_copies_are_drawn_within_the_budget_and_spread_over_the_text():
    # person 0's pool: background windows 0-4, its masked copy 5-9. A share is every 4th window:
    # it never holds two neighbouring (overlapping) windows and takes from the text and the copy
    for epoch in range(4):
        part = share(list(range(10)), 4, epoch, seed=0, person=0)
        assert len(part) <= 3 and all(b - a == 4 for a, b in zip(part, part[1:]))
    parts = [set(share(list(range(10)), 4, e, seed=0, person=0)) for e in range(4)]
    assert sum(bool(p & set(range(5))) and bool(p & set(range(5, 10))) for p in parts) >= 2
    # a second masked copy adds to the pool, not to the epoch's share of it
    with_copies, _ = _epochs([0] * 15, 3, rotation=4)
    assert all(len(o) == 4 for o in with_copies[:3])


def test_the_rotation_is_deterministic_given_the_seed():
    a, _ = _epochs(Y, 6, rotation=3, seed=7)
    b, _ = _epochs(Y, 6, rotation=3, seed=7)
    c, _ = _epochs(Y, 6, rotation=3, seed=8)
    assert a == b and a != c
    # the blocks visit the shares in different orders
    firsts = [tuple(share(list(range(12)), 3, e, seed=7, person=0)) for e in range(0, 30, 3)]
    assert len(set(firsts)) > 1


def test_no_rotation_is_every_window_every_epoch():
    epochs, per_epoch = _epochs(Y, 2, rotation=1)
    assert per_epoch == len(Y) and all(sorted(o) == list(range(len(Y))) for o in epochs)
    assert epochs[0] != epochs[1]  # a new order each epoch


def test_the_default_rotation_is_none_and_the_rotation_is_in_the_cache_key():
    """Every window every epoch by default (the paper's attacker): the rotated attacker stopped
    early at a dev plateau (issue 55), so it is an option, never the default."""
    from attackers.trir import resolve_base
    from audit.core.data import Corpus, Document

    def rotation(attack, styles=()):
        attack._mask_styles = tuple(styles)
        return attack.settings()["window_rotation"]

    assert rotation(TRIRAttack(), ("label", "suppress", "token:SENSITIVE")) == 1
    assert rotation(TRIRAttack(budget="fast"), ("label",)) == 1
    assert rotation(TRIRAttack(augment_ner=False)) == 1
    assert rotation(TRIRAttack(window_rotation=5), ("label",)) == 5
    bg = Corpus([Document("a", "Ann lives in Oslo.", subject="ann")], name="bg")
    base = resolve_base(None)

    def key(attack, styles=("label",)):
        attack._mask_styles = styles
        return attack.cache_key(bg, base, None)

    assert key(TRIRAttack()) == key(TRIRAttack(window_rotation=1))
    assert key(TRIRAttack()) != key(TRIRAttack(window_rotation=2))


def test_the_attacker_line_says_rotating_only_when_an_epoch_takes_a_share():
    from attackers.trir.findings import _attacker_sentence

    d = {"budget": "paper", "base": "b", "pretrained": False, "window_rotation": 3}
    assert "1153 of 3370 windows an epoch, rotating over 3 epochs" in _attacker_sentence(
        {**d, "windows_per_epoch": 1153, "training_windows": 3370})
    line = _attacker_sentence({**d, "windows_per_epoch": 268, "training_windows": 268})  # the demo: under the floor
    assert "rotating" not in line and "all 268 windows every epoch" in line
