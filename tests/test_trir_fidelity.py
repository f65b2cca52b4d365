"""TRIR's fidelity guard (issue 70): the default attacker must re-identify as many people as the
reference attacker (every window every epoch, the paper budget's whole 15-pass schedule, the best
dev epoch kept) on the same data and seeds, or a speed-up has weakened it.

Here, the verdict's arithmetic (``benchmarks/trir_fidelity.py``'s :func:`verdict`), model-free.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import trir_fidelity as guard  # noqa: E402



def _run(config: str, seed: int, trir: dict[str, float], documents: int = 10) -> dict:
    return {"config": config, "seed": seed, "trir": trir, "documents": {k: documents for k in trir}}


def test_the_verdict_fails_a_drop_larger_than_the_seeds_spread_and_passes_one_within_it():
    reference = [_run("reference", s, {"a": v, "b": v}) for s, v in ((0, 0.8), (1, 0.7), (2, 0.9))]  # spread 0.2
    within = [_run("default", s, {"a": v, "b": v}) for s, v in ((0, 0.7), (1, 0.6), (2, 0.8))]  # 0.1 lower
    beyond = [_run("default", s, {"a": v, "b": v}) for s, v in ((0, 0.5), (1, 0.5), (2, 0.6))]  # 0.267 lower
    v = guard.verdict(reference + within)
    assert v["ok"] and v["spread"] == pytest.approx(0.2) and v["gap"] == pytest.approx(-0.1)
    v = guard.verdict(reference + beyond)
    assert not v["ok"] and v["gap"] == pytest.approx(-0.8 + 16 / 30) and v["per_release_gap"]["a"] < -0.2
    higher = [_run("default", s, {"a": 1.0, "b": 1.0}) for s in (0, 1, 2)]  # erring on the safe side passes
    assert guard.verdict(reference + higher)["ok"]


def test_identical_seeds_still_allow_one_document_and_the_verdict_needs_matching_seeds():
    reference = [_run("reference", s, {"a": 0.5}) for s in (0, 1)]
    one_less = [_run("default", s, {"a": 0.4}) for s in (0, 1)]  # one document of 10, on every seed
    two_less = [_run("default", s, {"a": 0.3}) for s in (0, 1)]
    assert guard.verdict(reference + one_less)["ok"]
    assert not guard.verdict(reference + two_less)["ok"]
    with pytest.raises(ValueError, match="different seeds"):
        guard.verdict(reference + [_run("default", s, {"a": 0.5}) for s in (0, 2)])
