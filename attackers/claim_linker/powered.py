"""The leakage judge's cheap stand-in: what each claim's features say about the judge's answer.

Every claim the judge would be asked about gets features that cost no LLM call
(:func:`claim_features`): how close the claim is by meaning to the evidence the judge would read
(the dense cosine of the two), how much of its wording the evidence has (ROUGE-L, and the share
of its words found there), whether its specific details (names, dates, numbers) occur in the
evidence in so many words (the details judge's own rule, :func:`.reference.stated_details`), and
whether the evidence holds a placeholder where a detail was. A
logistic regression on the claims the judge answered turns them into a probability that the
judge says "stated" (:class:`LeakagePredictor`); a document's score is the mean over its
claims, the cheap counterpart of its leakage. The fit is cross-fitted by document: the judged
documents fall into :data:`FOLDS` folds, each fold's claims are scored by the model fitted on the
other folds, and every other document by the mean of the fold models, so no judged document is
scored by a model that saw it (the estimator in :mod:`audit.core.ppi` needs that).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from attackers.claim_linker.reference import stated_details
from audit.core.ppi import PredictorUnavailable
from audit.core.text import RougeTokenizer, rouge_l

#: Folds of the cross-fit (fewer when fewer documents are judged).
FOLDS = 5
#: Judged documents below which no model is fitted (the plain sample is used instead).
MIN_DOCUMENTS = 6
#: What the features are, in the order of :func:`claim_features`'s columns.
FEATURES = ("dense cosine of claim and evidence", "ROUGE-L of claim and evidence",
            "share of the claim's words in the evidence", "share of the claim's specific details in the evidence",
            "one of its specific details in the evidence", "the claim has a specific detail",
            "the evidence holds a placeholder")
#: What the predictor is called in results.
NAME = "logistic regression on claim features (" + "; ".join(FEATURES) + "), cross-fitted by document"

_PLACEHOLDER = re.compile(r"\[[A-Z_ ]+\]|\*{2,}|<[A-Z_]+>")


def claim_features(pairs: Sequence[tuple[str, str]], details: Sequence[Sequence[str]],
                   cosines: Sequence[float]) -> np.ndarray:
    """One row per ``(evidence, claim)`` pair (the judge's question), one column per :data:`FEATURES`.
    ``details``: each claim's specific details; ``cosines``: each claim's cosine with its evidence."""
    tok = RougeTokenizer(stem=True)
    rows = []
    for (evidence, claim), dets, cos in zip(pairs, details, cosines):
        ev_tokens, cl_tokens = tok(evidence), tok(claim)
        have = set(ev_tokens)
        share = sum(t in have for t in cl_tokens) / len(cl_tokens) if cl_tokens else 0.0
        stated = len(stated_details(dets, evidence))  # the judge's own rule: in so many words
        rows.append((float(cos), rouge_l(cl_tokens, ev_tokens), share, stated / len(dets) if dets else 0.0,
                     float(stated > 0), float(bool(dets)), float(bool(_PLACEHOLDER.search(evidence)))))
    return np.asarray(rows, dtype=float).reshape(-1, len(FEATURES))


@dataclass(frozen=True)
class LeakagePredictor:
    """Scores documents from their claims' features, fitted on the judge's answers.

    ``features``: one row per claim; ``claim_doc``: each row's document id; ``order``: the
    documents in the sampling's seeded order (it sets the folds, so the fit is seeded).
    ``claim_values``: filled per call, the judge's value of each claim of a judged document
    (1 stated, 0.5 similar, 0 not)."""

    features: np.ndarray
    claim_doc: tuple[str, ...]
    order: tuple[str, ...]

    def __call__(self, claim_values: Mapping[str, Sequence[float]]) -> dict[str, float]:
        """Every document's score, given the judge's claim values of the judged documents (in the
        row order of their claims); raises :class:`PredictorUnavailable` when no model can be fitted."""
        judged = [d for d in self.order if d in claim_values]
        if len(judged) < MIN_DOCUMENTS:
            raise PredictorUnavailable(f"only {len(judged)} documents judged (a fit needs {MIN_DOCUMENTS})")
        rows_of = {d: [] for d in self.order}
        for r, d in enumerate(self.claim_doc):
            rows_of[d].append(r)
        labels = np.full(len(self.claim_doc), np.nan)
        for d in judged:
            vals = list(claim_values[d])
            if len(vals) != len(rows_of[d]):
                raise PredictorUnavailable(f"document {d!r}: {len(vals)} answers for {len(rows_of[d])} claims")
            labels[rows_of[d]] = vals
        k = min(FOLDS, len(judged))
        fold_of = {d: n % k for n, d in enumerate(judged)}
        probs = np.zeros(len(self.claim_doc))
        unjudged = np.array([self.claim_doc[r] not in fold_of for r in range(len(self.claim_doc))])
        for f in range(k):
            train = np.array([fold_of.get(d, -1) not in (-1, f) for d in self.claim_doc])
            model = _fit(self.features[train], labels[train])
            held = np.array([fold_of.get(d) == f for d in self.claim_doc])
            if held.any():
                probs[held] = model(self.features[held])
            if unjudged.any():
                probs[unjudged] += model(self.features[unjudged]) / k
        return {d: float(probs[rows].mean()) if rows else 0.0 for d, rows in rows_of.items()}


def _fit(x: np.ndarray, y: np.ndarray):
    """A standardised logistic regression of the claim values ``y`` in [0, 1] (a value of 0.5
    counts half as each class) on ``x``; its predicted probability of "stated"."""
    from sklearn.linear_model import LogisticRegression

    pos, neg = y > 0, y < 1
    if not pos.any() or not neg.any():
        raise PredictorUnavailable("the judged claims of a fold are all stated or all not stated")
    xs = np.concatenate([x[pos], x[neg]])
    ys = np.concatenate([np.ones(pos.sum()), np.zeros(neg.sum())])
    w = np.concatenate([y[pos], 1 - y[neg]])
    mu, sd = xs.mean(axis=0), xs.std(axis=0)
    sd[sd == 0] = 1.0
    model = LogisticRegression(C=1.0, max_iter=1000).fit((xs - mu) / sd, ys, sample_weight=w)
    return lambda z: model.predict_proba((z - mu) / sd)[:, 1]
