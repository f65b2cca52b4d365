"""Success rates with Wilson intervals, judged against a naive baseline.

Modelled on anonymeter's ``stats/confidence.py``: every attack reports how often it
succeeded, with a 95% Wilson score interval, beside the success rate of a naive
baseline (chance, or a control attack). An attack whose interval does not lie
above its baseline has not shown a risk, and is reported as such.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import NamedTuple


class SuccessRate(NamedTuple):
    """An estimated success rate: ``value`` = successes / n, with a confidence interval."""

    value: float
    ci: tuple[float, float]
    n: int
    successes: int


class Risk(NamedTuple):
    """An attack's success rate beside its baseline.

    ``beats_baseline`` is true only when the lower end of the interval lies above
    the baseline, so a lucky attack on a handful of documents is not called a risk.
    ``residual`` is anonymeter's normalised risk ``(rate - baseline) / (1 - baseline)``
    with its interval, clipped at 0.
    """

    rate: SuccessRate
    baseline: float | None
    beats_baseline: bool | None
    residual: float | None
    residual_ci: tuple[float, float] | None


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    With ``n == 0`` nothing is known and the interval is ``(0, 1)``.
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    z = _z(confidence)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = max(0.0, centre - half)
    high = min(1.0, centre + half)
    # Exact at the edges (floating point can leave 1e-17 residue).
    if successes == 0:
        low = 0.0
    if successes == n:
        high = 1.0
    return (low, high)


def success_rate(successes: int, n: int, confidence: float = 0.95) -> SuccessRate:
    value = successes / n if n else 0.0
    return SuccessRate(value, wilson_interval(successes, n, confidence), n, successes)


def mean_interval(values: list[float], confidence: float = 0.95) -> tuple[float, tuple[float, float]]:
    """Mean of per-item scores in [0, 1] with a normal-approximation interval (clipped).

    For scores that are not successes/failures (e.g. semantic leakage per document).
    """
    n = len(values)
    if n == 0:
        return 0.0, (0.0, 1.0)
    mean = sum(values) / n
    if n == 1:
        return mean, (0.0, 1.0)
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = _z(confidence) * math.sqrt(var / n)
    return mean, (max(0.0, mean - half), min(1.0, mean + half))


def _residual(rate: float, baseline: float) -> float:
    if baseline >= 1.0:
        return 0.0
    return max(0.0, (rate - baseline) / (1.0 - baseline))


def risk(
    successes: int,
    n: int,
    baseline: float | None,
    *,
    control: SuccessRate | None = None,
    confidence: float = 0.95,
) -> Risk:
    """Judge an attack's success rate against a baseline.

    ``baseline`` is the naive (chance) success rate. When a ``control`` success rate
    is given (the same attack on records it should not be able to link, as in
    anonymeter), the larger of the two is the bar to beat.
    """
    rate = success_rate(successes, n, confidence)
    bar = baseline
    if control is not None:
        bar = control.value if bar is None else max(bar, control.value)
    if bar is None or n == 0:
        return Risk(rate, baseline, None, None, None)
    beats = rate.ci[0] > bar
    residual = _residual(rate.value, bar)
    residual_ci = (_residual(rate.ci[0], bar), _residual(rate.ci[1], bar))
    return Risk(rate, bar, beats, residual, residual_ci)


def describe(r: Risk) -> str:
    """One plain-language sentence about a risk, for terminals and reports."""
    pct = f"{100 * r.rate.value:.1f}%"
    ci = f"{100 * r.rate.ci[0]:.1f}–{100 * r.rate.ci[1]:.1f}%"
    if r.rate.n == 0:
        return "No trials: nothing could be attacked."
    if r.baseline is None:
        return f"Succeeded on {pct} of {r.rate.n} trials (95% CI {ci})."
    base = f"{100 * r.baseline:.2g}%"
    if r.beats_baseline:
        return f"Succeeded on {pct} of {r.rate.n} trials (95% CI {ci}), above the {base} baseline."
    return (
        f"Succeeded on {pct} of {r.rate.n} trials (95% CI {ci}): not distinguishable from the "
        f"{base} baseline, so no risk is shown by this attack."
    )


def sign_test(only_a: int, only_b: int) -> float:
    """Two-sided exact sign (McNemar) test on paired outcomes: ``only_a`` items succeeded under
    A only, ``only_b`` under B only (the concordant ones carry no information). 1.0 when none differ."""
    from scipy.stats import binomtest

    return float(binomtest(only_a, only_a + only_b).pvalue) if only_a + only_b else 1.0
