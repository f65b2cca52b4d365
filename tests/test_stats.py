import math

import pytest

from audit.core.stats import describe, mean_interval, risk, success_rate, wilson_interval


def test_wilson_matches_known_values():
    # Reference: 8 of 10 at 95% -> (0.4902, 0.9433) (Wilson 1927; e.g. statsmodels proportion_confint).
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4)
    assert high == pytest.approx(0.9433, abs=1e-4)


def test_wilson_edges_are_exact_and_bounded():
    assert wilson_interval(0, 20)[0] == 0.0
    assert wilson_interval(20, 20)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(1, 1000)
    assert 0.0 < low < 0.001 < high < 0.01


def test_wilson_narrows_with_more_trials():
    w10 = wilson_interval(5, 10)
    w1000 = wilson_interval(500, 1000)
    assert (w10[1] - w10[0]) > 3 * (w1000[1] - w1000[0])


def test_wilson_rejects_impossible_counts():
    with pytest.raises(ValueError):
        wilson_interval(5, 3)
    with pytest.raises(ValueError):
        wilson_interval(1, 10, confidence=1.5)


def test_risk_beats_baseline_only_when_interval_is_above_it():
    strong = risk(30, 40, baseline=0.05)
    assert strong.beats_baseline is True
    assert strong.residual == pytest.approx((0.75 - 0.05) / 0.95)
    lucky = risk(1, 3, baseline=0.25)  # 33% > 25% but the interval is wide
    assert lucky.beats_baseline is False
    assert "not distinguishable" in describe(lucky)


def test_control_raises_the_bar():
    control = success_rate(18, 40)
    r = risk(20, 40, baseline=0.05, control=control)
    assert r.baseline == pytest.approx(0.45)
    assert r.beats_baseline is False


def test_mean_interval():
    mean, (low, high) = mean_interval([0.0, 1.0, 0.5, 0.5])
    assert mean == 0.5 and low < 0.5 < high
    assert mean_interval([]) == (0.0, (0.0, 1.0))
    assert not math.isnan(mean_interval([0.3])[0])


def test_sign_test_on_discordant_pairs():
    from audit.core.stats import sign_test

    assert sign_test(0, 0) == 1.0
    assert sign_test(3, 3) == pytest.approx(1.0)
    assert sign_test(6, 0) == pytest.approx(2 * 0.5 ** 6)  # 0.03125: all six differences one way
    assert sign_test(5, 1) == pytest.approx(0.21875)


def test_cluster_bootstrap_resamples_documents_not_trials():
    """580 n-grams from 40 documents are 40 units: the interval is that of 40 documents whose
    residual varies, far wider than Wilson over the 580 n-grams pretends."""
    from audit.core.stats import cluster_bootstrap

    rng = __import__("random").Random(1)
    units = [(k, 14) for k in (rng.choice([0, 0, 1, 3, 7, 14]) for _ in range(40))]
    c = cluster_bootstrap(units, seed=0)
    assert c.n == 40 and c.trials == 560
    wilson = wilson_interval(int(c.successes), 560)
    assert (c.ci[1] - c.ci[0]) > 1.5 * (wilson[1] - wilson[0])
    assert c.ci[0] < c.value < c.ci[1]
    assert cluster_bootstrap(units, seed=0) == c  # deterministic given the seed
    assert cluster_bootstrap(units, seed=1).ci != c.ci


def test_cluster_bootstrap_small_and_degenerate_samples_are_not_precise():
    from audit.core.stats import cluster_bootstrap, clustered_risk

    assert cluster_bootstrap([(0.5, 1)]).ci == (0.0, 1.0)  # one document says nothing
    two = cluster_bootstrap([(0.5, 1), (0.25, 1)])
    assert two.n == 2 and two.ci[0] <= 0.1 and two.ci[1] >= 0.8
    # Every document at 0 of 14: the bootstrap has no spread, the interval still does.
    zero = cluster_bootstrap([(0, 14)] * 40)
    assert zero.ci[0] == 0.0 and zero.ci[1] > 0.05
    assert cluster_bootstrap([]).ci == (0.0, 1.0)
    r = clustered_risk([(0, 2)] * 4, 0.25)
    assert r.rate.n == 4 and r.beats_baseline is False and r.rate.ci[1] > 0.3
