"""Prediction-powered estimates: a cheap score on every document, the LLM's answer on a seeded,
sequential sample of them, and a 95% interval that is valid whatever the cheap score is.

The figure is the mean over a release's ``N`` documents of a per-document value ``y`` (a
document's leakage, its recovery rate) that only the LLM can give. A cheap predictor gives every
document a score ``f``. The LLM answers on ``n`` documents drawn in a seeded order without
replacement, and the estimate is the difference (regression) estimator of survey sampling, which
PPI++ (Angelopoulos, Duchi and Zrnic, 2023) reaches with its power tuning::

    estimate = lam * mean(f over all N) + mean(y - lam * f over the n judged)

The document is the unit: the claims of one document stand or fall together, so the LLM's
answers on them are averaged into the document's ``y`` and a draw takes a whole document; the
variance is that of documents (a cluster-level variance by construction). ``lam`` is the
regression slope of ``y`` on ``f`` on the judged documents, clipped to [0, 1] as ppi_py does:
0 is the plain sample mean (a useless or misleading score costs LLM answers, never validity), 1
trusts the score's differences fully.

The ratio form, for a figure that is a ratio of totals over documents of unequal size (span
guessing's recovered spans / attacked spans): every document's size ``m`` is known, ``y`` and
``f`` are document totals, and the estimate is the ratio estimator of survey sampling with the
same correction (``lam * F/M + sum(y - lam * f) / sum(m)`` over the judged, ``F`` and ``M`` the
release's totals). Its variance is that of the linearised residuals ``(y - lam * f - r * m) /
mean(m)``, ``lam`` their slope; with every size 1 it is the mean above, exactly.

Two questions, two intervals (:data:`ESTIMANDS`):

* ``release`` (the default, the officer's question): the mean over *this* release. The
  documents not judged are the only uncertainty, so the variance carries the finite-population
  correction ``1 - n/N`` and is zero when every document is judged (the exact figure).
* ``population`` (the researcher's: documents like these): the release is itself a sample, so
  the variance adds ``var(y) / N``.

The interval is Student's t with ``n - 2`` degrees of freedom (``n - 1`` for a fixed ``lam``),
and its residual variance is never taken below that of the judged sample with one more document
that disagreed with the score by the whole scale (``n / (n+1)^2``, times the mean squared
relative size in the ratio form): ten documents that all agree
with the score do not show that every document does. :func:`sequential_ppi` asks for labels at
10, 20, 40, ... documents and stops at the first look whose half-width reaches the target; the
rule looks at the width only, never the position, and computes its intervals at
:data:`SEQUENTIAL_CONFIDENCE` to pay for stopping. Its coverage is simulated in tests/test_ppi.py
(perfect, useful, useless and misleading scores, both questions; >= 0.94 in every case).

Why not ppi_py itself: its ``ppi_mean_ci`` takes the judged and the scored items as two
independent samples from an infinite population, while here the judged documents are part of
the release (no finite-population correction, no exact figure at ``n = N``), and its intervals
are fixed-sample ones. The test suite checks this estimator against ``ppi_mean_ci`` where the
two agree (the ``population`` question with ``N`` much larger than ``n``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.core.sequential import FIRST_LOOK, look_points, projection, seeded_order

#: The questions an interval answers: this release (finite population) or documents like these.
ESTIMANDS = {"release": "about this release", "population": "about documents like these"}
CONFIDENCE = 0.95
#: The level :func:`sequential_ppi` computes its intervals at. A sample that stops on its width
#: stops more often where its spread came out low, which costs about one point of coverage
#: (simulated: 0.940-0.947 at a 95% level for a useful or useless score on 300 or 1,000
#: documents); at 96% the stopped intervals cover 0.952-0.959 (tests/test_ppi.py), so the
#: figure's interval is a 95% one.
SEQUENTIAL_CONFIDENCE = 0.96


@dataclass(frozen=True)
class PPIEstimate:
    """A prediction-powered figure: ``value`` and its ``ci`` (``half_width`` each side) from
    ``judged`` documents the LLM answered and ``scored`` documents the predictor scored (all of
    them), for the ``estimand``. ``lam`` is the power-tuning weight, ``agreement`` the Pearson
    correlation of the score with the LLM's answer on the judged documents (``None`` when either
    is constant), ``predictor`` what scored, and ``fallback`` why no predictor was used, if so."""

    value: float
    ci: tuple[float, float]
    half_width: float
    judged: int
    scored: int
    estimand: str = "release"
    lam: float = 0.0
    agreement: float | None = None
    predictor: str = "none"
    fallback: str | None = None

    @property
    def exact(self) -> bool:
        return self.estimand == "release" and self.judged >= self.scored

    def sentence(self) -> str:
        """How the figure was made, beside it: "prediction-powered, 12 judged, 40 scored, ±0.043,
        about this release"."""
        how = "plain sample" if self.fallback or self.predictor == "none" else "prediction-powered"
        if self.exact:
            return f"every document judged ({self.scored}), exact, {ESTIMANDS[self.estimand]}"
        width = "too few judged for an interval" if self.half_width >= 1 else f"±{self.half_width:.3f}"
        return f"{how}, {self.judged} judged, {self.scored} scored, {width}, {ESTIMANDS[self.estimand]}"

    def details(self) -> dict[str, Any]:
        """The keys a result's details give every prediction-powered figure (the claim linker's
        leakage, span guessing's recovery): the estimate, how it was made, the predictor."""
        return {"estimate": self.to_dict(), "made": self.sentence(), "estimand": self.estimand,
                "predictor": self.predictor, "predictor_fallback": self.fallback,
                "predictor_agreement": self.agreement, "judged_documents": self.judged,
                "scored_documents_cheaply": self.scored}

    def to_dict(self) -> dict[str, Any]:
        return {"value": round(self.value, 6), "ci": [round(c, 6) for c in self.ci],
                "half_width": round(self.half_width, 6), "judged": self.judged, "scored": self.scored,
                "estimand": self.estimand, "lambda": round(self.lam, 4),
                "agreement": None if self.agreement is None else round(self.agreement, 4),
                "predictor": self.predictor, "fallback": self.fallback, "made": self.sentence(),
                "interval": "difference estimator over documents (PPI++ power tuning, lambda in [0, 1]); "
                            "Student t on the residuals (n - 2 df; 96% at sequential looks); "
                            + ("finite-population correction: about this release" if self.estimand == "release"
                               else "plus var(y)/N: about documents like these")}


def _t(df: np.ndarray, confidence: float = CONFIDENCE) -> np.ndarray:
    from scipy.stats import t

    return t.ppf(0.5 + confidence / 2, np.maximum(df, 1))


def ppi_batch(y: np.ndarray, f_judged: np.ndarray, f_all: np.ndarray, *, estimand: str = "release",
              lam: float | None = None, confidence: float = CONFIDENCE, m_judged: np.ndarray | None = None,
              m_all: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The estimator on ``R`` releases at once (the simulation's form; :func:`ppi_mean` is one).
    ``y`` and ``f_judged``: ``(R, n)``, the LLM's values and the scores of the judged documents;
    ``f_all``: ``(R, N)``, the scores of every document (the judged ones included, with the same
    scores). ``lam`` None tunes it. Returns arrays ``value``, ``low``, ``high``, ``half``, ``lam``.

    ``m_judged``, ``m_all`` (the ratio form, see the module docstring): each document's size (its spans),
    known for every document; ``y`` and ``f`` are then totals (recovered spans) and the figure is
    total / size over the release. Without them every size is 1 and the figure is the mean."""
    if estimand not in ESTIMANDS:
        raise ValueError(f"estimand must be one of {', '.join(ESTIMANDS)}, got {estimand!r}")
    y, fj, fa = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (y, f_judged, f_all))
    mj = np.ones_like(y) if m_judged is None else np.atleast_2d(np.asarray(m_judged, dtype=float))
    ma = np.ones_like(fa) if m_all is None else np.atleast_2d(np.asarray(m_all, dtype=float))
    n, big_n = y.shape[1], fa.shape[1]
    if n < 1 or fj.shape != y.shape or n > big_n or mj.shape != y.shape or ma.shape != fa.shape:
        raise ValueError(f"need 1 <= n <= N judged documents with one score each, got {y.shape}, {fa.shape}")
    if (mj <= 0).any() or (ma <= 0).any():
        raise ValueError("every document's size must be positive")
    size_j, size_a = mj.sum(axis=1), ma.sum(axis=1)
    ry, rf = y.sum(axis=1) / size_j, fj.sum(axis=1) / size_j  # the judged documents' ratios (means)
    mbar = (size_a / big_n)[:, None]  # the mean size over the release, known
    ly, lf = (y - ry[:, None] * mj) / mbar, (fj - rf[:, None] * mj) / mbar  # linearised: centred when sizes are 1
    if lam is None and n > 1:
        var = (lf ** 2).sum(axis=1)
        lam_v = np.clip(np.where(var > 1e-12, (ly * lf).sum(axis=1) / np.where(var > 1e-12, var, 1.0), 0.0), 0.0, 1.0)
        ddof = np.where(var > 1e-12, 2, 1)  # a slope fitted costs a degree of freedom; a constant score none
    else:
        lam_v = np.full(len(y), 0.0 if lam is None else float(lam))
        ddof = np.ones(len(y), dtype=int)
    # all judged: the plain ratio (mean), exactly
    value = ry if n == big_n else lam_v * fa.sum(axis=1) / size_a + ry - lam_v * rf
    # one more document, off by the whole scale (its size, relative to the mean size)
    floor = n / (n + 1) ** 2 * ((ma / mbar) ** 2).mean(axis=1)
    e = ly - lam_v[:, None] * lf
    s2 = np.maximum((e ** 2).sum(axis=1) / np.maximum(n - ddof, 1), floor)
    var = (1 - n / big_n) * s2 / n
    if estimand == "population":
        var = var + np.maximum((ly ** 2).sum(axis=1) / max(n - 1, 1), floor) / big_n
    half = _t(n - ddof, confidence) * np.sqrt(var)
    if n < 3 and not (estimand == "release" and n == big_n):
        half = np.full(len(y), 1.0)  # too few documents to say anything about the others
    value = np.clip(value, 0.0, 1.0)
    return {"value": value, "low": np.clip(value - half, 0.0, 1.0), "high": np.clip(value + half, 0.0, 1.0),
            "half": half, "lam": lam_v}


def agreement(y: Sequence[float], f: Sequence[float]) -> float | None:
    """Pearson correlation of the score with the LLM's values (``None`` when either is constant)."""
    a, b = np.asarray(y, dtype=float), np.asarray(f, dtype=float)
    if len(a) < 2 or a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def ppi_mean(y: Sequence[float], f_judged: Sequence[float], f_all: Sequence[float], *, estimand: str = "release",
             lam: float | None = None, predictor: str = "none", fallback: str | None = None,
             confidence: float = CONFIDENCE, m_judged: Sequence[float] | None = None,
             m_all: Sequence[float] | None = None) -> PPIEstimate:
    """One release's prediction-powered mean (see the module docstring): ``y`` the LLM's values on
    the judged documents, ``f_judged`` their scores, ``f_all`` the score of every document
    (``m_judged``, ``m_all``: the documents' sizes for a ratio, :func:`ppi_batch`)."""
    sizes = {} if m_judged is None or m_all is None else {
        "m_judged": np.asarray(m_judged, float)[None], "m_all": np.asarray(m_all, float)[None]}
    out = ppi_batch(np.asarray(y, float)[None], np.asarray(f_judged, float)[None], np.asarray(f_all, float)[None],
                    estimand=estimand, lam=lam, confidence=confidence, **sizes)
    v, lo, hi, h = (float(out[k][0]) for k in ("value", "low", "high", "half"))
    return PPIEstimate(v, (lo, hi), h, len(y), len(f_all), estimand, float(out["lam"][0]),
                       agreement(y, f_judged), predictor, fallback)


class PredictorUnavailable(Exception):
    """Raised by a predictor that cannot score (a missing optional model, too few labels of one
    kind): the estimate falls back to the plain sample (a score of 0 everywhere), saying why."""


#: ``predict(labels)``: the score of every document, given the LLM's values so far (a predictor
#: fitted on them must give each judged document a score from a fit that did not see it).
Predict = Callable[[Mapping[str, float]], Mapping[str, float]]


@dataclass(frozen=True)
class PPIRun:
    """What :func:`sequential_ppi` did: the ``estimate``, the LLM's ``labels`` and the final
    ``scores`` by document, the looks taken, the target and whether it was reached."""

    estimate: PPIEstimate
    labels: Mapping[str, float]
    scores: Mapping[str, float]
    looks: tuple[int, ...]
    target: float | None
    reached: bool
    seed: int

    def sampled(self) -> dict[str, Any]:
        """The result's ``details["sampled"]`` note (:class:`audit.core.details.Sampled`)."""
        e = self.estimate
        return {"documents": e.judged, "of": e.scored, "seed": self.seed, "target": self.target,
                "half_width": round(e.half_width, 4), "reached": self.reached, "looks": list(self.looks),
                "made": e.sentence(),
                "rule": "every document scored by the predictor; documents judged by the LLM in a seeded order, "
                        "the prediction-powered 95% interval looked at after 10, 20, 40, ... documents; stopped "
                        "at the first look whose half-width is at most the target, or at the last document"}


def _scores(predict: Predict | None, labels: Mapping[str, float], ids: Sequence[str],
            why: list[str]) -> tuple[dict[str, float], str | None]:
    """Every document's score, or zeros (the plain sample) and the reason when the predictor fails."""
    if predict is None:
        return dict.fromkeys(ids, 0.0), why[0] if why else "no predictor"
    try:
        got = predict(labels)
        return {i: float(got[i]) for i in ids}, None
    except PredictorUnavailable as exc:
        return dict.fromkeys(ids, 0.0), str(exc)


def sequential_ppi(ids: Sequence[str], *, seed: int, salt: str, target: float | None,
                   label: Callable[[list[str]], Mapping[str, float]], predict: Predict | None,
                   predictor: str = "predictor", estimand: str = "release", limit: int | None = None,
                   first: int = FIRST_LOOK, say: Callable[[str], None] | None = None,
                   sizes: Mapping[str, float] | None = None) -> PPIRun:
    """Judge the documents ``ids`` in the seeded order, one batch per look (``label`` returns the
    LLM's value of each document of the batch), re-score every document with ``predict`` on the
    labels so far, and stop at the first look whose prediction-powered half-width is at most
    ``target`` (``None``: every document, the exact figure). ``limit``: at most this many judged.
    A predictor that raises :class:`PredictorUnavailable` at the last look leaves the plain sample
    (its reason in ``estimate.fallback``). ``sizes`` (the ratio form): each document's size; the
    LLM's values and the scores are then document totals and the figure total / size."""
    order = seeded_order(ids, seed, salt)
    cap = len(order) if limit is None else min(limit, len(order))
    labels: dict[str, float] = {}
    taken: list[int] = []
    est, scores, started = None, {}, time.perf_counter()
    for k in look_points(cap, first):
        batch = [i for i in order[:k] if i not in labels]
        got = label(batch)
        labels.update({i: float(got[i]) for i in batch if i in got})
        taken.append(k)
        judged = [i for i in order[:k] if i in labels]
        scores, fell = _scores(predict, labels, order, [])
        est = ppi_mean([labels[i] for i in judged], [scores[i] for i in judged], [scores[i] for i in order],
                       estimand=estimand, predictor=predictor if fell is None else "none", fallback=fell,
                       confidence=CONFIDENCE if target is None else SEQUENTIAL_CONFIDENCE,
                       m_judged=None if sizes is None else [sizes[i] for i in judged],
                       m_all=None if sizes is None else [sizes[i] for i in order])
        if target is not None and est.half_width <= target:
            return PPIRun(est, labels, scores, tuple(taken), target, True, seed)
        if say is not None and len(taken) == 1 and k < cap:
            say(projection(k, cap, time.perf_counter() - started, est.half_width, target))
    if est is None:
        est = PPIEstimate(0.0, (0.0, 1.0), 1.0, 0, len(order), estimand, predictor=predictor)
    return PPIRun(est, labels, scores, tuple(taken), target,
                  target is not None and est.half_width <= target, seed)


def describe_fallback(est: PPIEstimate) -> str:
    """A line for a result's note on how the figure was made."""
    line = est.sentence()
    if est.fallback:
        line += f" (no predictor: {est.fallback})"
    elif est.agreement is not None:
        line += f"; the predictor's correlation with the LLM on the judged documents: {est.agreement:.2f}"
    return line
