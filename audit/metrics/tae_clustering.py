"""TAE's NMI (the Text Anonymization Evaluator of the TAB and TRI authors), by the definition its
documentation gives, beside our own ``nmi`` (:mod:`audit.metrics.clustering`).

How TAE clusters (written from its README, "Metrics: NMI", and the INTACT paper, Pilán et al.,
which proposed the metric; never from its code):

- **What is embedded.** Each original and each released document, whole, by a sentence embedder
  (TAE's default ``all-MiniLM-L6-v2``, ours too). Before a released document is embedded, its
  *mask marks* are removed (TAE's ``remove_mask_marks``, on by default): the labels a sanitizer
  writes in place of what it masked ("PERSON", "SENSITIVE"), so a release that writes entity types
  clusters as the same release with those spans deleted.
- **Which k.** K-means++ is run on the originals for k = ``min_k``, ``min_k`` x ``k_multiplier``,
  ... up to ``max_k`` (TAE: 2, 4, 8, 16, 32); the k whose clustering of the originals has the best
  silhouette is kept.
- **Which clustering.** For each k, ``n_clusterings`` clusterings (TAE: 5), each the best inertia
  of ``n_tries_per_clustering`` k-means++ starts (TAE: 50, scikit-learn's ``n_init``); of the five,
  the one with the best silhouette. The released documents are clustered the same way at the
  chosen k.
- **The figure.** The normalised mutual information (scikit-learn's, arithmetic-mean
  normalisation) between the originals' and the release's chosen clusterings.

The INTACT paper describes an earlier protocol (BERT token-mean embeddings, k = 4 by inertia, NMI
averaged over 5 clusterings): the details keep ``mean_of_runs``, the NMI of each of the release's
clusterings with the originals' chosen one, averaged, for that reading.

Where ours differs (``nmi``): k is searched 2..10 one by one, the NMI is averaged over seeded runs,
and mask marks are embedded as written. Neither tool's documentation says how a document longer
than the embedder's input is read: here, as in ``nmi``, the mean of its ~200-word chunks.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from audit.core.data import Document, Release, Scenario, Span
from audit.core.errors import AnonauditError
from audit.core.paramtypes import PositiveInt
from audit.core.registry import register
from audit.core.results import Result
from audit.metrics.base import UtilityMetric, findings_of
from audit.metrics.utility_context import UtilityContext

#: The mask marks removed by default: the entity types TAB's annotators and the sanitizers TAE
#: evaluates (spaCy, Presidio, Stanford NER) write, and the generic ones. A mark may carry an index
#: ("ORG_3", as INTACT numbers the entity types it keeps) and brackets ("[PERSON]").
MASK_MARKS = (
    "SENSITIVE", "REDACTED", "MASK", "MASKED", "UNKNOWN",
    # TAB
    "PERSON", "CODE", "LOC", "ORG", "DEM", "DATETIME", "QUANTITY", "MISC",
    # spaCy (OntoNotes)
    "NORP", "FAC", "GPE", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE", "DATE", "TIME", "PERCENT",
    "MONEY", "CARDINAL", "ORDINAL",
    # Presidio
    "LOCATION", "DATE_TIME", "NRP", "EMAIL_ADDRESS", "PHONE_NUMBER", "URL", "IP_ADDRESS", "IBAN_CODE",
    "CREDIT_CARD", "CRYPTO", "MEDICAL_LICENSE", "US_SSN", "US_PASSPORT", "US_DRIVER_LICENSE",
    "US_BANK_NUMBER", "US_ITIN", "UK_NHS",
    # Stanford NER
    "ORGANIZATION",
)


def mark_pattern(marks: Sequence[str]) -> re.Pattern[str]:
    """A replacement that is one mask mark, with an optional ``_N`` index and brackets around."""
    alts = "|".join(re.escape(m) for m in sorted(set(marks), key=len, reverse=True))
    return re.compile(rf"\s*[\[<({{]?\s*(?:{alts})(?:_\d+)?\s*[\]>)}}]?\s*")


def without_marks(doc: Document, replaced: Sequence[Span], pattern: re.Pattern[str]) -> str:
    """The released text with every replacement (``replaced``: its spans in ``doc``) that is a mask
    mark deleted; the rest of the text (a heading "THE LAW" the original had) is left alone."""
    marked = sorted((s for s in replaced if s.end > s.start and pattern.fullmatch(doc.text[s.start:s.end])),
                    key=lambda s: s.start)
    out, cursor = [], 0
    for s in marked:
        if s.start < cursor:
            continue
        out.append(doc.text[cursor:s.start])
        cursor = s.end
    out.append(doc.text[cursor:])
    return " ".join("".join(out).split()) if marked else doc.text


def k_grid(min_k: int, max_k: int, multiplier: int, n: int) -> list[int]:
    """TAE's ks: ``min_k`` times powers of ``multiplier`` up to ``max_k``, each below ``n`` documents."""
    ks, k = [], min_k
    while k <= max_k and k < n:
        ks.append(k)
        if multiplier <= 1:
            break
        k *= multiplier
    return ks


@register("metric")
class TAENMIMetric(UtilityMetric):
    """``min_k``, ``max_k``, ``k_multiplier``: the ks tried (min_k, min_k x multiplier, ... up to
    max_k); ``n_clusterings``: clusterings per k, the best silhouette kept; ``n_tries_per_clustering``:
    k-means++ starts of each (the best inertia kept); ``remove_mask_marks``: delete the replacements
    that are mask marks before embedding a release; ``mask_marks``: those marks (None: MASK_MARKS)."""

    name = "tae_nmi"
    description = ("TAE's NMI: originals and release embedded whole (mask marks removed) and clustered by "
                   "k-means++ at the k of best silhouette on the originals (2, 4, ..., 32), each corpus's "
                   "best-silhouette clustering of 5 kept; the normalised mutual information between the two.")

    def __init__(self, context: UtilityContext | None = None, embedder: str | None = None, cache: bool = True,
                 seed: int = 0, progress: bool = False, min_k: PositiveInt = 2, max_k: PositiveInt = 32,
                 k_multiplier: PositiveInt = 2, n_clusterings: PositiveInt = 5,
                 n_tries_per_clustering: PositiveInt = 50, remove_mask_marks: bool = True,
                 mask_marks: list[str] | None = None):
        super().__init__(context=context, embedder=embedder, cache=cache, seed=seed, progress=progress)
        if min_k < 2:
            raise AnonauditError(f"min_k must be at least 2, got {min_k}")
        self.min_k, self.max_k, self.k_multiplier = min_k, max_k, k_multiplier
        self.n_clusterings, self.n_tries_per_clustering = n_clusterings, n_tries_per_clustering
        self.remove_mask_marks = remove_mask_marks
        self.mask_marks = list(mask_marks) if mask_marks is not None else None

    def _clusterings(self, x: np.ndarray, k: int) -> tuple[np.ndarray, float, list[np.ndarray]]:
        """``(best labels, their silhouette, every clustering)`` of ``n_clusterings`` seeded runs."""
        import warnings

        from sklearn.cluster import KMeans
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.metrics import silhouette_score

        runs, scores = [], []
        for s in range(self.seed, self.seed + self.n_clusterings):
            with warnings.catch_warnings():  # near-identical documents give fewer distinct clusters
                warnings.simplefilter("ignore", ConvergenceWarning)
                labels = KMeans(k, init="k-means++", n_init=self.n_tries_per_clustering, random_state=s).fit_predict(x)
            runs.append(labels)
            scores.append(float(silhouette_score(x, labels)) if len(set(labels)) > 1 else -1.0)
        best = int(np.argmax(scores))
        return runs[best], scores[best], runs

    def _reference(self, ctx: UtilityContext) -> dict[str, Any]:
        key = ("tae_nmi", self.min_k, self.max_k, self.k_multiplier, self.n_clusterings,
               self.n_tries_per_clustering, self.seed)
        if key not in ctx.memo:
            docs = sorted(ctx.originals, key=lambda d: d.id)  # k-means depends on the order of the points
            ks = k_grid(self.min_k, self.max_k, self.k_multiplier, len(docs))
            if not ks:
                raise AnonauditError(f"TAE's NMI needs more documents than min_k ({self.min_k}); the originals "
                                     f"have {len(docs)}")
            x = ctx.document_embeddings(docs, "originals")
            tried = {k: self._clusterings(x, k)[:2] for k in ks}
            k = max(tried, key=lambda k: tried[k][1])
            ctx.memo[key] = {"k": k, "labels": tried[k][0], "ids": [d.id for d in docs],
                             "silhouettes": {str(k): round(v[1], 6) for k, v in tried.items()}}
        return ctx.memo[key]

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        from sklearn.metrics import normalized_mutual_info_score

        ctx = self._context(scenario)
        ids = sorted(self._aligned_ids(ctx, release))
        ref = self._reference(ctx)
        k = ref["k"]
        if len(ids) <= k:
            raise AnonauditError(f"release {release.name!r} has {len(ids)} documents: too few for {k} clusters")
        docs = [release.corpus[i] for i in ids]
        marks = 0
        if self.remove_mask_marks:
            pattern = mark_pattern(self.mask_marks if self.mask_marks is not None else MASK_MARKS)
            texts = [without_marks(d, ctx.replaced(ctx.originals[d.id], d), pattern) for d in docs]
            marks = sum(t != d.text for t, d in zip(texts, docs))
            docs = [Document(d.id, t) for d, t in zip(docs, texts)]
        key = f"tae_nmi:{release.name}:{hashlib.sha256(''.join(d.text for d in docs).encode()).hexdigest()}"
        x = ctx.document_embeddings(docs, key)
        labels, silhouette, runs = self._clusterings(x, k)
        pos = {i: j for j, i in enumerate(ref["ids"])}
        orig = ref["labels"][[pos[i] for i in ids]]
        value = float(normalized_mutual_info_score(orig, labels))
        each = [float(normalized_mutual_info_score(orig, r)) for r in runs]
        rows = [{"id": i, "cluster_original": int(a), "cluster_release": int(b)} for i, a, b in zip(ids, orig, labels)]
        found = findings_of(rows, lambda r: f"In cluster {r['cluster_release']} of the release; its original is in "
                                            f"cluster {r['cluster_original']} of the originals")
        details = {"tae_name": "NMI", "k": k, "silhouettes": ref["silhouettes"], "release_silhouette": silhouette,
                   "runs": each, "mean_of_runs": float(np.mean(each)),
                   "mask_marks_removed_in": marks if self.remove_mask_marks else None}
        return [Result(kind="utility", name=self.name, release=release.name, value=value, ci=None, n=len(ids),
                       details=details, documents=found)]
