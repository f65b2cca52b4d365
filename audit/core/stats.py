"""Success rates with Wilson intervals, judged against a naive baseline.

Modelled on anonymeter's ``stats/confidence.py``: every attack reports how often it
succeeded, with a 95% Wilson score interval, beside the success rate of a naive
baseline (chance, or a control attack). An attack whose interval does not lie
above its baseline has not shown a risk, and is reported as such.

Trials are often not independent: the n-grams, spans or claims of one document stand or
fall together. Their intervals come from :func:`cluster_bootstrap`, which resamples
*documents* (the independent units), so ``n`` is the number of documents, not of n-grams;
a figure from fewer than :data:`TINY_SAMPLE` units is marked as a tiny sample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

#: Below this many independent units (documents) a figure is marked as a tiny sample.
TINY_SAMPLE = 10
#: Bootstrap resamples: enough for a stable 95% percentile interval.
BOOTSTRAP_RESAMPLES = 2000


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


def is_tiny(n: int) -> bool:
    """True when ``n`` independent units are too few for an interval to mean much."""
    return n < TINY_SAMPLE


class ClusteredRate(NamedTuple):
    """A ratio of sums over documents: ``value`` = sum(numerators) / sum(denominators), with a
    cluster-bootstrap interval. ``n`` counts the documents (the independent units) and
    ``trials`` what was attacked inside them (spans, n-grams, claims)."""

    value: float
    ci: tuple[float, float]
    n: int
    trials: float
    successes: float

    @property
    def tiny(self) -> bool:
        return is_tiny(self.n)


def cluster_bootstrap(units: Sequence[tuple[float, float]], *, seed: int = 0, confidence: float = 0.95,
                      resamples: int = BOOTSTRAP_RESAMPLES) -> ClusteredRate:
    """The ratio ``sum(num) / sum(den)`` over ``units`` = ``[(num, den), ...]``, one pair per
    document, with a percentile interval from resampling whole documents with replacement.

    A success rate over the spans of several documents is ``[(recovered, attacked), ...]``;
    a mean of per-document scores is ``[(score, 1), ...]``. Deterministic given ``seed``.
    The interval is never narrower than a Wilson interval on the number of documents when
    there are fewer than :data:`TINY_SAMPLE` of them, or when every document has the same
    ratio (the bootstrap then has no spread to show, e.g. 0 of 580 n-grams in 40 documents):
    a handful of documents cannot claim the precision of their many trials.
    Documents with a zero denominator count as units but carry no trials.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    arr = np.asarray([(float(a), float(b)) for a, b in units], dtype=float).reshape(-1, 2)
    n = len(arr)
    num, den = arr[:, 0], arr[:, 1]
    if np.any(den < 0) or np.any(num < 0):
        raise ValueError("cluster_bootstrap needs non-negative numerators and denominators")
    total_num, total_den = float(num.sum()), float(den.sum())
    if n == 0 or total_den <= 0:
        return ClusteredRate(0.0, (0.0, 1.0), n, total_den, total_num)
    value = total_num / total_den
    if n == 1:  # one document: nothing to say about the next one
        return ClusteredRate(value, (0.0, max(1.0, value)), n, total_den, total_num)
    rng = np.random.default_rng(seed)
    stats: list[np.ndarray] = []
    chunk = max(1, min(resamples, 2_000_000 // max(n, 1)))  # bounded memory for large corpora
    done = 0
    while done < resamples:
        k = min(chunk, resamples - done)
        idx = rng.integers(0, n, size=(k, n))
        d = den[idx].sum(axis=1)
        s = num[idx].sum(axis=1)
        stats.append(np.where(d > 0, s / np.where(d > 0, d, 1.0), np.nan))
        done += k
    boot = np.concatenate(stats)
    boot = boot[np.isfinite(boot)]
    alpha = (1.0 - confidence) / 2
    lo, hi = (float(np.quantile(boot, alpha)), float(np.quantile(boot, 1 - alpha))) if len(boot) else (0.0, 1.0)
    ratios = num[den > 0] / den[den > 0]
    if is_tiny(n) or float(ratios.max() - ratios.min()) == 0.0:
        wlo, whi = _wilson_real(min(value, 1.0) * n, n, confidence) if value <= 1.0 else (lo, hi)
        lo, hi = min(lo, wlo), max(hi, whi)
    lo, hi = max(0.0, min(lo, value)), max(hi, value)
    if value <= 1.0:
        hi = min(1.0, hi)
    return ClusteredRate(value, (lo, hi), n, total_den, total_num)


def _wilson_real(successes: float, n: int, confidence: float) -> tuple[float, float]:
    """Wilson interval for a proportion ``successes / n`` where ``successes`` may be fractional."""
    if n == 0:
        return (0.0, 1.0)
    z = _z(confidence)
    p = min(1.0, max(0.0, successes / n))
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (0.0 if p == 0 else max(0.0, centre - half), 1.0 if p == 1 else min(1.0, centre + half))


def clustered_risk(units: Sequence[tuple[float, float]], baseline: float | None, *, seed: int = 0,
                   confidence: float = 0.95) -> Risk:
    """:func:`risk` for trials clustered in documents: the rate and its interval from
    :func:`cluster_bootstrap`; ``rate.n`` is the number of documents and ``rate.successes``
    the successful trials (use :func:`cluster_bootstrap` for the number of trials)."""
    c = cluster_bootstrap(units, seed=seed, confidence=confidence)
    rate = SuccessRate(c.value, c.ci, c.n, int(round(c.successes)))
    if baseline is None or c.n == 0 or c.trials == 0:
        return Risk(rate, baseline, None, None, None)
    beats = rate.ci[0] > baseline
    return Risk(rate, baseline, beats, _residual(rate.value, baseline),
                (_residual(rate.ci[0], baseline), _residual(rate.ci[1], baseline)))


def clustered_details(c: ClusteredRate, trial_unit: str) -> dict:
    """What a result built from :func:`cluster_bootstrap` says about its units, for ``details``."""
    return {"unit": "documents", "trials": c.trials if c.trials != int(c.trials) else int(c.trials),
            "trial_unit": trial_unit, "interval": "cluster bootstrap over documents",
            "tiny_sample": is_tiny(c.n)}


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


class PairedDifference(NamedTuple):
    """The mean of per-unit differences ``a - b`` on the same units, with a paired bootstrap
    interval and a two-sided bootstrap p-value for "no difference"."""

    value: float
    ci: tuple[float, float]
    n: int
    p: float


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, seed: int = 0, confidence: float = 0.95,
                     reps: int = BOOTSTRAP_RESAMPLES) -> PairedDifference:
    """Paired bootstrap of ``mean(a - b)``: resamples the units (documents) with their two values
    together, so what the units share cancels. ``p`` is twice the share of resampled means on the
    far side of zero (capped at 1): a percentile-bootstrap test of "no difference"."""
    if len(a) != len(b):
        raise ValueError("paired_bootstrap needs two sequences of the same length")
    d = np.asarray(a, float) - np.asarray(b, float)
    n = len(d)
    if n == 0:
        return PairedDifference(0.0, (0.0, 0.0), 0, 1.0)
    means = d[np.random.default_rng(seed).integers(0, n, size=(reps, n))].mean(axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = (float(x) for x in np.quantile(means, [alpha, 1 - alpha]))
    if np.all(d == 0):
        p = 1.0
    else:
        p = min(1.0, 2 * min(float((means <= 0).mean()), float((means >= 0).mean())))
    return PairedDifference(float(d.mean()), (lo, hi), n, p)
