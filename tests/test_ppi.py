"""Prediction-powered estimates (audit.core.ppi): coverage simulated over thousands of releases
for four kinds of cheap score, a hand-computed case, the cross-check against ppi_py, the
fallback to the plain sample and determinism. Model-free; the simulation takes ~4 s on 2 cores."""

from __future__ import annotations

import numpy as np
import pytest

from audit.core.ppi import (SEQUENTIAL_CONFIDENCE, PPIEstimate, PredictorUnavailable, ppi_batch, ppi_mean,
                            sequential_ppi)
from audit.core.sequential import look_points

RELEASES = 1500
#: E[y] of the simulated documents: claims stated with a per-document propensity ~ Beta(0.7, 1.3).
MEAN = 0.35


def _releases(rng: np.random.Generator, n_docs: int) -> np.ndarray:
    """Per-document values of ``RELEASES`` releases: each document's claims (1-8 of them) share
    the document's own propensity, so claims cluster in documents; ``y`` is the share stated."""
    m = rng.integers(1, 9, size=(RELEASES, n_docs))
    return rng.binomial(m, rng.beta(0.7, 1.3, size=(RELEASES, n_docs))) / m


def _score(kind: str, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if kind == "perfect":
        return y.copy()
    if kind == "useful":  # correlation ~0.7 with y
        return np.clip(y + rng.normal(0, y.std() * np.sqrt(1 / 0.49 - 1), y.shape), 0, 1)
    if kind == "useless":
        return rng.uniform(0, 1, y.shape)
    return np.clip(0.9 - 0.8 * y + rng.normal(0, 0.1, y.shape), 0, 1)  # misleading: biased, anti-correlated


def _simulate(kind: str, n_docs: int, estimand: str, target: float = 0.05, seed: int = 7):
    """Coverage of the sequential rule's interval and the mean number of documents judged: the
    documents are judged in a random order (columns are exchangeable), the interval looked at
    after 10, 20, 40, ... of them, stopped at the first look within ``target``."""
    rng = np.random.default_rng(seed)
    y = _releases(rng, n_docs)
    f = _score(kind, y, rng)
    truth = y.mean(axis=1) if estimand == "release" else np.full(RELEASES, MEAN)
    done = np.zeros(RELEASES, bool)
    low, high, judged = np.zeros(RELEASES), np.zeros(RELEASES), np.zeros(RELEASES)
    for k in look_points(n_docs):
        out = ppi_batch(y[:, :k], f[:, :k], f, estimand=estimand, confidence=SEQUENTIAL_CONFIDENCE)
        stop = ~done & ((out["half"] <= target) | (k == n_docs))
        low[stop], high[stop], judged[stop] = out["low"][stop], out["high"][stop], k
        done |= stop
    corr = float(np.mean([np.corrcoef(y[i], f[i])[0, 1] for i in range(100)]))
    return float(((low <= truth) & (truth <= high)).mean()), float(judged.mean()), corr


@pytest.mark.parametrize("estimand,n_docs", [("release", 300), ("release", 1000), ("population", 300)])
def test_every_kind_of_score_keeps_coverage_and_a_good_one_saves_llm_answers(estimand, n_docs):
    # 1,500 releases per case, four scores, with clustering and sequential stopping: the interval
    # covers the truth (this release's mean, or E[y] for documents like these) >= 0.94 of the time
    # whatever the score; a misleading score costs LLM answers against a useful one, never coverage.
    got = {kind: _simulate(kind, n_docs, estimand) for kind in ("perfect", "useful", "useless", "misleading")}
    for kind, (coverage, _, _) in got.items():
        assert coverage >= 0.94, (kind, got)
    assert 0.6 < got["useful"][2] < 0.8 and abs(got["useless"][2]) < 0.1 and got["misleading"][2] < -0.8
    assert got["perfect"][1] <= got["useful"][1] < got["useless"][1]
    # about documents like these, 300 documents barely reach ±0.05 at all (var(y)/N alone is ±0.04)
    assert got["misleading"][1] > got["useful"][1] * (1.2 if estimand == "release" else 1.1)


def test_a_fixed_sample_covers_at_the_nominal_level():
    # Without stopping, the plain 95% interval on 40 of 300 documents covers ~0.95 (the t
    # interval with the finite-population correction).
    rng = np.random.default_rng(11)
    y = _releases(rng, 300)
    f = _score("useful", y, rng)
    out = ppi_batch(y[:, :40], f[:, :40], f)
    truth = y.mean(axis=1)
    assert 0.935 <= float(((out["low"] <= truth) & (truth <= out["high"])).mean()) <= 0.97


def test_a_hand_computed_case():
    # N = 5, n = 3 judged; lam = cov(y, f) / var(f) on the judged = 1 (y = f + const there).
    y, f_judged, f_all = [0.5, 1.0, 0.0], [0.4, 0.9, -0.1], [0.4, 0.9, -0.1, 0.3, 0.5]
    est = ppi_mean(y, f_judged, f_all)
    assert est.lam == pytest.approx(1.0)
    # estimate = mean(f_all) + mean(y - f) = 0.4 + 0.1
    assert est.value == pytest.approx(0.5)
    # residuals all 0.1: the variance is the floor n/(n+1)^2 = 3/16; (1 - 3/5) * 3/16 / 3 = 0.025;
    # t(0.975, df=1) = 12.706
    assert est.half_width == pytest.approx(12.7062 * np.sqrt(0.025), rel=1e-4)
    assert (est.judged, est.scored, est.estimand) == (3, 5, "release")


def test_every_document_judged_is_exact_about_this_release():
    y = [0.0, 1.0, 0.5, 0.5]
    est = ppi_mean(y, [0.2, 0.7, 0.1, 0.9], [0.2, 0.7, 0.1, 0.9])
    assert est.value == 0.5 and est.ci == (0.5, 0.5) and est.half_width == 0 and est.exact
    assert "exact" in est.sentence() and "about this release" in est.sentence()
    pop = ppi_mean(y, [0.2, 0.7, 0.1, 0.9], [0.2, 0.7, 0.1, 0.9], estimand="population")
    assert pop.half_width > 0.2 and "documents like these" in pop.sentence()


def test_it_agrees_with_ppi_py_where_the_two_answer_the_same_question():
    # ppi_py takes the judged and the scored items as independent samples of an infinite
    # population: ours answers that question with estimand="population" when N >> n.
    import ppi_py  # the [test] extra's ppi-python: a test-only cross-check
    rng = np.random.default_rng(5)
    n, big = 400, 400_000
    y_all = rng.beta(0.7, 1.3, size=big)
    f_all = np.clip(y_all + rng.normal(0, 0.2, big), 0, 1)
    y, fj = y_all[:n], f_all[:n]
    ours = ppi_mean(y, fj, f_all, estimand="population")
    lo, hi = ppi_py.ppi_mean_ci(y, fj, f_all[n:], alpha=0.05)
    theirs = ppi_py.ppi_mean_pointestimate(y, fj, f_all[n:])
    assert ours.value == pytest.approx(float(np.ravel(theirs)[0]), abs=2e-3)
    assert ours.ci[0] == pytest.approx(float(np.ravel(lo)[0]), abs=2e-3)
    assert ours.ci[1] == pytest.approx(float(np.ravel(hi)[0]), abs=2e-3)


def _run(scores, values, target, predict_raises=None, seed=0):
    ids = list(values)
    asked: list[str] = []

    def label(batch):
        asked.extend(batch)
        return {i: values[i] for i in batch}

    def predict(labels):
        if predict_raises:
            raise PredictorUnavailable(predict_raises)
        return scores

    return sequential_ppi(ids, seed=seed, salt="t", target=target, label=label, predict=predict,
                          predictor="test score"), asked


def _population(n=200, seed=1):
    rng = np.random.default_rng(seed)
    y = rng.binomial(4, rng.beta(0.7, 1.3, n)) / 4
    ids = [f"d{i}" for i in range(n)]
    values = dict(zip(ids, y.tolist()))
    good = dict(zip(ids, np.clip(y + rng.normal(0, 0.08, n), 0, 1).tolist()))
    return values, good


def test_a_good_score_stops_sooner_and_the_same_seed_gives_the_same_figure():
    values, good = _population()
    run, asked = _run(good, values, 0.05)
    assert run.reached and run.estimate.judged == len(asked) < 200
    assert run.estimate.predictor == "test score" and run.estimate.fallback is None
    assert run.estimate.agreement is not None and run.estimate.agreement > 0.8
    again, asked2 = _run(good, values, 0.05)
    assert again.estimate == run.estimate and asked2 == asked
    other, _ = _run(good, values, 0.05, seed=1)
    assert other.estimate.value != run.estimate.value
    assert run.sampled()["documents"] == run.estimate.judged and run.sampled()["of"] == 200


def test_a_failing_predictor_falls_back_to_the_plain_sample_and_says_why():
    values, good = _population()
    run, asked = _run(good, values, 0.05, predict_raises="the cross-encoder is not installed")
    plain, _ = _run({i: 0.0 for i in values}, values, 0.05)
    assert run.estimate.fallback == "the cross-encoder is not installed" and run.estimate.predictor == "none"
    assert "plain sample" in run.estimate.sentence()
    assert run.estimate.value == plain.estimate.value and run.estimate.judged == plain.estimate.judged
    assert len(asked) > _run(good, values, 0.05)[0].estimate.judged  # the predictor saved LLM answers


def test_no_target_judges_every_document_and_is_exact():
    values, good = _population(n=35)
    run, asked = _run(good, values, None)
    assert sorted(asked) == sorted(values) and run.estimate.exact
    assert run.estimate.value == pytest.approx(float(np.mean(list(values.values()))))
    assert isinstance(run.estimate, PPIEstimate) and run.estimate.half_width == 0


# ---------------------------------------------------------------- the ratio form (span guessing)

def _span_releases(kind: str, n_docs: int, rng: np.random.Generator):
    """Span counts ``m`` (1-80, mean ~8, a long right tail as in TAB), the LLM's recovered spans
    ``y`` (per-document propensity ~ Beta(0.7, 1.3), so E[rate] = 0.35) and the cheap ranker's
    ``f``: perfect, useful (finds 70% of the LLM's recoveries plus a few others), useless
    (recovers 30% of any document's spans at random) or misleading (recovers what the LLM does not)."""
    m = np.minimum(1 + rng.negative_binomial(1, 0.12, size=(RELEASES, n_docs)), 80)
    y = rng.binomial(m, rng.beta(0.7, 1.3, size=(RELEASES, n_docs)))
    f = {"perfect": lambda: y,
         "useful": lambda: rng.binomial(y, 0.7) + rng.binomial(m - y, 0.15),
         "useless": lambda: rng.binomial(m, 0.3),
         "misleading": lambda: rng.binomial(m - y, 0.9) + rng.binomial(y, 0.1)}[kind]()
    return m.astype(float), y.astype(float), np.asarray(f, dtype=float)


def _simulate_ratio(kind: str, n_docs: int, estimand: str, target: float = 0.05, seed: int = 3):
    rng = np.random.default_rng(seed)
    m, y, f = _span_releases(kind, n_docs, rng)
    truth = y.sum(axis=1) / m.sum(axis=1) if estimand == "release" else np.full(RELEASES, MEAN)
    done = np.zeros(RELEASES, bool)
    low, high, judged = np.zeros(RELEASES), np.zeros(RELEASES), np.zeros(RELEASES)
    for k in look_points(n_docs):
        out = ppi_batch(y[:, :k], f[:, :k], f, estimand=estimand, confidence=SEQUENTIAL_CONFIDENCE,
                        m_judged=m[:, :k], m_all=m)
        stop = ~done & ((out["half"] <= target) | (k == n_docs))
        low[stop], high[stop], judged[stop] = out["low"][stop], out["high"][stop], k
        done |= stop
    return float(((low <= truth) & (truth <= high)).mean()), float(judged.mean())


@pytest.mark.parametrize("estimand", ["release", "population"])
def test_the_ratio_form_keeps_coverage_over_documents_of_unequal_size(estimand):
    # Span guessing's figure is recovered spans / attacked spans, and documents hold 1 to 80
    # spans: 1,500 releases of 300 documents per score, sequential looks at ±0.05. Coverage of
    # this release's ratio (or of E[rate] for documents like these) >= 0.94 whatever the score;
    # a useful score saves LLM answers, a misleading one costs them. ~2.5 s on 2 cores.
    got = {kind: _simulate_ratio(kind, 300, estimand) for kind in ("perfect", "useful", "useless", "misleading")}
    for kind, (coverage, _) in got.items():
        assert coverage >= 0.94, (kind, got)
    assert got["perfect"][1] <= got["useful"][1] < got["useless"][1]
    if estimand == "release":
        assert got["useful"][1] < 0.7 * got["misleading"][1], got


def test_the_ratio_form_is_the_ratio_estimator_and_exact_when_every_document_is_judged():
    y, f, m = [2.0, 0.0, 5.0], [1.0, 1.0, 4.0], [4.0, 2.0, 10.0]
    f_all, m_all = f + [3.0, 0.0], m + [6.0, 3.0]
    # a fixed lam = 0 is the classical ratio estimator: the judged documents' spans recovered / spans
    est = ppi_mean(y, f, f_all, lam=0.0, m_judged=m, m_all=m_all)
    assert est.value == pytest.approx(7 / 16)
    # lam = 1: the ranker's ratio over the release, corrected by the judged documents' disagreement
    est1 = ppi_mean(y, f, f_all, lam=1.0, m_judged=m, m_all=m_all)
    assert est1.value == pytest.approx(9 / 25 + (7 - 6) / 16)
    every = ppi_mean(y + [1.0, 3.0], f_all, f_all, m_judged=m_all, m_all=m_all)
    assert every.exact and every.half_width == 0 and every.value == pytest.approx(11 / 25)
    # every size 1: the mean form, exactly
    ones = ppi_mean([0.5, 1.0, 0.0], [0.4, 0.9, -0.1], [0.4, 0.9, -0.1, 0.3, 0.5], m_judged=[1, 1, 1],
                    m_all=[1] * 5)
    assert ones == ppi_mean([0.5, 1.0, 0.0], [0.4, 0.9, -0.1], [0.4, 0.9, -0.1, 0.3, 0.5])
