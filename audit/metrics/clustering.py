"""NMI: how much of the corpus' cluster structure a release keeps."""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np

from audit.core.paramtypes import PositiveInt
from audit.core.data import Release, Scenario
from audit.core.errors import AnonauditError
from audit.core.registry import register
from audit.core.results import Result
from audit.metrics.base import UtilityMetric, findings_of
from audit.metrics.ic import CONTEXT_TOKENS
from audit.metrics.utility_context import UtilityContext

#: Below this agreement between the originals' own k-means runs, NMI carries a warning.
NMI_STABLE_MIN = 0.8


@register("metric")
class NMIMetric(UtilityMetric):
    """``k``: number of clusters (None: best silhouette on the originals for k in
    2..``max_k``); ``max_k``: the largest number of clusters tried; ``runs``: seeded k-means
    runs averaged; ``n_init``: k-means restarts."""

    name = "nmi"
    description = ("Clustering utility: the documents are embedded and clustered with k-means; the "
                   "normalised mutual information between the clusters of the released documents and "
                   "those of the originals says how much of the corpus' topical structure survives.")

    def __init__(self, context: UtilityContext | None = None, ic: Literal["causal", "masked"] = "causal",
                 ic_model: str | None = None, llm: str | None = None, embedder: str | None = None,
                 cache: bool = True, seed: int = 0, k: PositiveInt | None = None, max_k: PositiveInt = 10, runs: PositiveInt = 5,
                 n_init: PositiveInt = 10, progress: bool = False, context_tokens: PositiveInt = CONTEXT_TOKENS,
                 mask_every: PositiveInt = 6, ic_precision: Literal["auto", "fp32", "bf16"] = "auto"):
        super().__init__(context, ic, ic_model, llm, embedder, cache, seed, progress, context_tokens=context_tokens,
                         mask_every=mask_every, ic_precision=ic_precision)
        self.k = k
        self.max_k = max_k
        self.runs = runs
        self.n_init = n_init

    def _reference(self, ctx: UtilityContext) -> dict[str, Any]:
        key = ("nmi", self.k, self.max_k, self.runs, self.n_init, self.seed)
        if key in ctx.memo:
            return ctx.memo[key]
        from sklearn.cluster import KMeans
        from sklearn.metrics import normalized_mutual_info_score, silhouette_score

        # k-means (and so the chosen k) depends on the order of the points: cluster in id order,
        # so that the same documents give the same figure however the input file is ordered.
        docs = sorted(ctx.originals, key=lambda d: d.id)
        x = ctx.document_embeddings(docs, "originals")
        n = len(docs)
        if n < 3:
            raise AnonauditError(f"NMI needs at least 3 documents, the originals have {n}")
        silhouettes = {}
        if self.k is None:
            for k in range(2, min(self.max_k, n - 1) + 1):
                labels = KMeans(k, n_init=self.n_init, random_state=self.seed).fit_predict(x)
                if len(set(labels)) > 1:
                    silhouettes[k] = float(silhouette_score(x, labels))
            k = max(silhouettes, key=silhouettes.get) if silhouettes else 2
        else:
            k = int(self.k)
            if not 2 <= k < n:
                raise AnonauditError(f"k must be between 2 and {n - 1} (documents - 1), got {k}")
        labels = {s: KMeans(k, n_init=self.n_init, random_state=s).fit_predict(x)
                  for s in range(self.seed, self.seed + self.runs)}
        # How well the originals' own clusterings agree across seeds: the ceiling of what NMI
        # can tell. On corpora without cluster structure this is far below 1, and differences
        # between releases are then mostly k-means noise.
        runs = list(labels.values())
        pairs = [normalized_mutual_info_score(a, b) for i, a in enumerate(runs) for b in runs[i + 1:]]
        stability = float(np.mean(pairs)) if pairs else None
        ref = {"k": k, "labels": labels, "ids": [d.id for d in docs], "silhouettes": silhouettes,
               "stability": stability}
        ctx.memo[key] = ref
        return ref

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        from sklearn.cluster import KMeans
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.metrics import normalized_mutual_info_score

        ctx = self._context(scenario)
        ids = sorted(self._aligned_ids(ctx, release))
        ref = self._reference(ctx)
        pos = {i: j for j, i in enumerate(ref["ids"])}
        rows = [pos[i] for i in ids]
        k = ref["k"]
        if len(ids) <= k:
            raise AnonauditError(f"release {release.name!r} has {len(ids)} documents: too few for {k} clusters")
        x = ctx.document_embeddings([release.corpus[i] for i in ids], f"{release.name}:{release.corpus.fingerprint()}")
        scores, last = [], None
        for s, orig_labels in ref["labels"].items():
            with warnings.catch_warnings():  # a release of near-identical documents has fewer clusters
                warnings.simplefilter("ignore", ConvergenceWarning)
                labels = KMeans(k, n_init=self.n_init, random_state=s).fit_predict(x)
            scores.append(float(normalized_mutual_info_score(orig_labels[rows], labels)))
            last = (orig_labels[rows], labels)
        docs = findings_of([{"id": i, "cluster_original": int(a), "cluster_release": int(b)}
                          for i, a, b in zip(ids, *last)] if last else [],
                         lambda r: f"In cluster {r['cluster_release']} of the release; its original is in "
                                   f"cluster {r['cluster_original']} of the originals (last seeded run)")
        details = {"k": k, "runs": scores, "std": float(np.std(scores)),
                   # keyed by k as JSON writes it, so the result reads back as it was made
                   "silhouettes": {str(k): v for k, v in ref["silhouettes"].items()},
                   "min": min(scores), "max": max(scores),
                   "reference_stability": ref["stability"]}
        if ref["stability"] is not None and ref["stability"] < NMI_STABLE_MIN:
            details["warning"] = (f"k-means on the originals is unstable (NMI between its own {len(ref['labels'])} "
                                  f"seeded runs: {ref['stability']:.2f}), so NMI differences between releases "
                                  "are mostly clustering noise; give k for a corpus with known topics")
        return [Result(kind="utility", name="nmi", release=release.name, value=float(np.mean(scores)),
                       ci=None, n=len(ids), details=details, documents=docs)]
