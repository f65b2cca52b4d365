"""The utility metrics: TPI, TPS, NMI, precision/recall, similarity, ROUGE-L.

Each is a :class:`~audit.interfaces.Metric` returning ``Result(kind="utility")``
with per-document values in ``documents`` (higher = more utility). They share one
:class:`~audit.utility.context.UtilityContext` per set of originals: pass the same
``context`` to several metrics (the CLI does), or let each metric build its own
(IC and embeddings are then shared through the disk caches).

* ``tpi`` — text preserved information: sum IC(kept terms) / sum IC(all terms).
* ``tps`` — text preserved similarity: sum IC(t) * SIM(t, replacement) / sum IC(t);
  kept terms count 1, deleted terms 0.
* ``nmi`` — agreement of the k-means clustering of released documents with the
  clustering of the originals (normalised mutual information, averaged over seeds).
* ``precision`` / ``recall`` — replaced regions against the originals' gold spans
  (TAB's definitions): token-level precision; entity-level recall (headline) and
  token-level recall; each uniform and IC-weighted.
* ``similarity`` — cosine of the document embeddings of each original and its release.
* ``rouge`` — ROUGE-L F1 between each original and its release.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from audit.data import Release, Scenario
from audit.errors import AnonauditError
from audit.interfaces import Metric
from audit.registry import register
from audit.results import Result
from audit.stats import mean_interval
from audit.text import rouge_l_text
from audit.utility.context import DELETED, KEPT, REPLACED, UtilityContext

ALL_METRICS = ("tpi", "tps", "nmi", "precision", "recall", "similarity", "rouge")


def bootstrap_ratio(num: Sequence[float], den: Sequence[float], *, seed: int = 0, reps: int = 1000,
                    confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval (over documents) of sum(num) / sum(den)."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    n = len(num)
    if n == 0:
        return (0.0, 1.0)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(reps, n))
    d = den[idx].sum(axis=1)
    r = np.where(d > 0, num[idx].sum(axis=1) / np.where(d > 0, d, 1.0), np.nan)
    r = r[~np.isnan(r)]
    if not len(r):
        return (0.0, 1.0)
    a = (1 - confidence) / 2
    return (float(np.quantile(r, a)), float(np.quantile(r, 1 - a)))


def _mean_result(name: str, release: str, values: list[float], documents: list[dict], details: dict) -> Result:
    mean, ci = mean_interval(values)
    return Result(kind="utility", name=name, release=release, value=mean, ci=ci, n=len(values),
                  details=details, documents=documents)


class UtilityMetric(Metric):
    """Base of the utility metrics: the shared context and its settings.

    ``context``: a :class:`UtilityContext` shared with other metrics (wins over the
    settings below). ``ic``: "causal" or "masked"; ``ic_model``: the masked-LM folder
    (or a causal model spec overriding ``llm``); ``llm``: the LLM spec for causal IC;
    ``embedder``: the sentence embedder spec (MiniLM by default); ``cache``: keep IC and
    embeddings on disk; ``seed``: for bootstrap intervals and clustering; ``progress``: show
    model loads and information-content scoring as they happen.
    """

    requires: ClassVar[frozenset[str]] = frozenset({"originals"})

    def __init__(self, context: UtilityContext | None = None, ic: str = "causal", ic_model: str | None = None,
                 llm: str | None = None, embedder: str | None = None, cache: bool = True, seed: int = 0,
                 progress: bool = False):
        self.context = context
        self.progress = progress
        self.ic = ic
        self.ic_model = ic_model
        self.llm = llm
        self.embedder = embedder
        self.cache = cache
        self.seed = seed

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        params.pop("context", None)  # not JSON; its settings are logged by the CLI
        return params

    def stats(self) -> dict[str, Any]:
        """Cache use of the shared context so far, for the run's provenance (never the results)."""
        return {"caches": self.context.cache_stats()} if self.context is not None else {}

    def fit(self, scenario: Scenario) -> UtilityMetric:
        self._context(scenario)
        return self

    def _context(self, scenario: Scenario) -> UtilityContext:
        if scenario.originals is None:
            raise AnonauditError(f"utility metric {self.name!r} needs the originals")
        ctx = self.context
        if ctx is None or ctx.originals is not scenario.originals:
            settings = dict(ic=self.ic, ic_model=self.ic_model, llm=self.llm, embedder=self.embedder,
                            cache=self.cache, progress=self.progress)
            if all(v is None or isinstance(v, (str, bool)) for v in settings.values()):
                ctx = UtilityContext.shared(scenario.originals, **settings)
            else:  # model objects given: not shareable by value
                ctx = UtilityContext(scenario.originals, **settings)
            self.context = ctx
        return ctx

    @staticmethod
    def _aligned_ids(ctx: UtilityContext, release: Release) -> list[str]:
        if not release.aligned:
            raise AnonauditError(f"release {release.name!r} is not aligned to the originals by id: "
                                 "this metric compares each document with its original")
        return [d.id for d in release.corpus if d.id in ctx.originals]


# --------------------------------------------------------------------------- TPI / TPS


class _TermMetric(UtilityMetric):
    def _per_document(self, ctx: UtilityContext, release: Release, tps: bool) -> list[dict]:
        ids = self._aligned_ids(ctx, release)
        table = ctx.terms_ic(ids)
        rows = []
        pairs_by_doc = {}
        for i in ids:
            terms, _ = table[i]
            fates = ctx.fates(release, i)
            pairs_by_doc[i] = [(t.text, f.counterpart) for t, f in zip(terms, fates) if f.status == REPLACED]
        if tps:
            ctx.similarity([p for ps in pairs_by_doc.values() for p in ps])
        for i in ids:
            terms, ic = table[i]
            fates = ctx.fates(release, i)
            if tps:
                sims = iter(ctx.similarity(pairs_by_doc[i]))
                weight = np.array([1.0 if f.status == KEPT else (next(sims) if f.status == REPLACED else 0.0)
                                   for f in fates])
            else:
                weight = np.array([1.0 if f.status == KEPT else 0.0 for f in fates])
            total = float(ic.sum())
            kept = float((ic * weight).sum()) if len(ic) else 0.0
            counts = {s: sum(f.status == s for f in fates) for s in (KEPT, REPLACED, DELETED)}
            rows.append({"id": i, "value": kept / total if total > 0 else None, "ic_total": round(total, 4),
                         "ic_preserved": round(kept, 4), "terms": len(terms), **counts})
        return rows

    def _result(self, ctx: UtilityContext, release: Release, tps: bool) -> list[Result]:
        rows = self._per_document(ctx, release, tps)
        values = [r["value"] for r in rows if r["value"] is not None]
        num = [r["ic_preserved"] for r in rows]
        den = [r["ic_total"] for r in rows]
        pooled = sum(num) / sum(den) if sum(den) > 0 else 0.0
        secs = ctx.ic_seconds()
        details = {"pooled": pooled, "pooled_ci": list(bootstrap_ratio(num, den, seed=self.seed)),
                   "estimator": ctx.estimator.identity,
                   "ic_seconds_per_document": float(np.mean(secs)) if secs else None,
                   "terms": {s: sum(r[s] for r in rows) for s in (KEPT, REPLACED, DELETED)}}
        return [_mean_result(self.name, release.name, values, rows, details)]


@register("metric")
class TPIMetric(_TermMetric):
    name = "tpi"
    description = ("Text preserved information: the share of the originals' information content "
                   "(IC = -log probability of each term under a language model) carried by the terms "
                   "the release left untouched. Replaced and deleted terms count as lost.")

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        return self._result(self._context(scenario), release, tps=False)


@register("metric")
class TPSMetric(_TermMetric):
    name = "tps"
    description = ("Text preserved similarity: like TPI, but a replaced term keeps the share of its "
                   "information content given by the semantic similarity (sentence-embedding cosine, "
                   "floored at 0) of its replacement: a good generalisation keeps utility, a label less, "
                   "a deletion none.")

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        return self._result(self._context(scenario), release, tps=True)


# --------------------------------------------------------------------------- NMI


#: Below this agreement between the originals' own k-means runs, NMI carries a warning.
NMI_STABLE_MIN = 0.8


@register("metric")
class NMIMetric(UtilityMetric):
    """``k``: number of clusters (None: best silhouette on the originals for k in
    2..``max_k``); ``runs``: seeded k-means runs averaged; ``n_init``: k-means restarts."""

    name = "nmi"
    description = ("Clustering utility: the documents are embedded and clustered with k-means; the "
                   "normalised mutual information between the clusters of the released documents and "
                   "those of the originals says how much of the corpus' topical structure survives.")

    def __init__(self, context: UtilityContext | None = None, ic: str = "causal", ic_model: str | None = None,
                 llm: str | None = None, embedder: str | None = None, cache: bool = True, seed: int = 0,
                 k: int | None = None, max_k: int = 10, runs: int = 5, n_init: int = 10, progress: bool = False):
        super().__init__(context, ic, ic_model, llm, embedder, cache, seed, progress)
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
        docs = [{"id": i, "cluster_original": int(a), "cluster_release": int(b)}
                for i, a, b in zip(ids, *last)] if last else []
        details = {"k": k, "runs": scores, "std": float(np.std(scores)),
                   "silhouettes": ref["silhouettes"], "min": min(scores), "max": max(scores),
                   "reference_stability": ref["stability"]}
        if ref["stability"] is not None and ref["stability"] < NMI_STABLE_MIN:
            details["warning"] = (f"k-means on the originals is unstable (NMI between its own {len(ref['labels'])} "
                                  f"seeded runs: {ref['stability']:.2f}), so NMI differences between releases "
                                  "are mostly clustering noise; give k for a corpus with known topics")
        return [Result(kind="utility", name="nmi", release=release.name, value=float(np.mean(scores)),
                       ci=None, n=len(ids), details=details, documents=docs)]


# --------------------------------------------------------------------------- precision / recall


def _gold_spans(doc) -> list:
    return [s for s in doc.spans if (s.identifier_type or "").upper() != "NO_MASK"]


class _GoldMetric(UtilityMetric):
    """Token-level and entity-level agreement of the replaced regions with gold spans."""

    def _tables(self, ctx: UtilityContext, release: Release) -> list[dict]:
        key = ("gold", release.name, release.corpus.fingerprint())
        if key in ctx.memo:
            return ctx.memo[key]
        ids = [i for i in self._aligned_ids(ctx, release) if ctx.originals[i].spans]
        if not ids:
            raise AnonauditError("precision/recall need gold spans on the originals (a \"spans\" list per "
                                 "document); these originals have none")
        table = ctx.terms_ic(ids) if self.weighted else {}
        rows = []
        for i, parsed in zip(ids, ctx.spacy.pipe([ctx.originals[i].text for i in ids])):
            orig = ctx.originals[i]
            toks = [(t.idx, t.idx + len(t.text)) for t in parsed if not (t.is_space or t.is_punct)]
            masked_spans = [(s.orig_start, s.orig_end) for s in ctx.replaced(orig, release.corpus[i])
                            if s.orig_start is not None and s.orig_end > s.orig_start]
            gold = _gold_spans(orig)

            def inside(tok, spans):
                return any(a < tok[1] and tok[0] < b for a, b in spans)

            masked = np.array([inside(t, masked_spans) for t in toks], bool)
            is_gold = np.array([inside(t, [(g.start, g.end) for g in gold]) for t in toks], bool)
            weight = np.zeros(len(toks))
            if self.weighted:
                terms, ic = table[i]
                for term, v in zip(terms, ic):
                    covered = [j for j, t in enumerate(toks) if t[0] < term.end and term.start < t[1]]
                    for j in covered:
                        weight[j] += v / len(covered)
            entities: dict[str, list] = {}
            for n, g in enumerate(gold):
                entities.setdefault(g.entity_id or f"mention-{n}", []).append(g)
            ent_total = ent_masked = 0
            for mentions in entities.values():
                idx = [j for j, t in enumerate(toks) if inside(t, [(g.start, g.end) for g in mentions])]
                if idx:
                    ent_total += 1
                    ent_masked += bool(masked[idx].all())
            rows.append({"id": i, "tp": int((masked & is_gold).sum()), "masked": int(masked.sum()),
                         "gold": int(is_gold.sum()), "w_tp": float(weight[masked & is_gold].sum()),
                         "w_masked": float(weight[masked].sum()), "w_gold": float(weight[is_gold].sum()),
                         "entities": ent_total, "entities_masked": ent_masked})
        ctx.memo[key] = rows
        return rows

    weighted = True


def _ratio(rows: list[dict], num: str, den: str) -> float | None:
    d = sum(r[den] for r in rows)
    return sum(r[num] for r in rows) / d if d > 0 else None


@register("metric")
class PrecisionMetric(_GoldMetric):
    name = "precision"
    description = ("Token-level precision of the release against gold annotations: of the words the "
                   "sanitizer replaced, the share that the annotators marked (over-masking lowers it). "
                   "Also weighted by the words' information content.")

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        rows = self._tables(self._context(scenario), release)
        value = _ratio(rows, "tp", "masked")
        docs = [{"id": r["id"], "value": (r["tp"] / r["masked"]) if r["masked"] else None, "masked_tokens":
                 r["masked"], "true_positives": r["tp"]} for r in rows]
        details = {"token_precision": value, "token_precision_ic": _ratio(rows, "w_tp", "w_masked"),
                   "masked_tokens": sum(r["masked"] for r in rows)}
        return [Result(kind="utility", name="precision", release=release.name,
                       value=0.0 if value is None else value,
                       ci=bootstrap_ratio([r["tp"] for r in rows], [r["masked"] for r in rows], seed=self.seed),
                       n=len(rows), details=details, documents=docs)]


@register("metric")
class RecallMetric(_GoldMetric):
    name = "recall"
    description = ("Recall of the release against gold annotations (TAB's definitions): the headline is "
                   "entity-level recall, the share of annotated entities all of whose mentions were "
                   "replaced; token-level recall (uniform and IC-weighted) is in the details.")

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        rows = self._tables(self._context(scenario), release)
        value = _ratio(rows, "entities_masked", "entities")
        docs = [{"id": r["id"], "value": r["entities_masked"] / r["entities"] if r["entities"] else None,
                 "entities": r["entities"], "entities_masked": r["entities_masked"],
                 "token_recall": r["tp"] / r["gold"] if r["gold"] else None} for r in rows]
        details = {"entity_recall": value, "token_recall": _ratio(rows, "tp", "gold"),
                   "token_recall_ic": _ratio(rows, "w_tp", "w_gold"),
                   "entities": sum(r["entities"] for r in rows), "gold_tokens": sum(r["gold"] for r in rows)}
        return [Result(kind="utility", name="recall", release=release.name, value=0.0 if value is None else value,
                       ci=bootstrap_ratio([r["entities_masked"] for r in rows], [r["entities"] for r in rows],
                                          seed=self.seed),
                       n=len(rows), details=details, documents=docs)]


# --------------------------------------------------------------------------- similarity / ROUGE-L


@register("metric")
class SimilarityMetric(UtilityMetric):
    name = "similarity"
    description = ("Document similarity: cosine of the sentence embeddings (mean over chunks) of each "
                   "original and its released version, averaged over documents.")

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        ctx = self._context(scenario)
        ids = self._aligned_ids(ctx, release)
        a = ctx.document_embeddings([ctx.originals[i] for i in ids], "originals")
        b = ctx.document_embeddings([release.corpus[i] for i in ids], f"{release.name}:{release.corpus.fingerprint()}")
        values = [float(x) for x in (a * b).sum(axis=1)]
        docs = [{"id": i, "value": v} for i, v in zip(ids, values)]
        return [_mean_result("similarity", release.name, values, docs, {})]


@register("metric")
class RougeMetric(UtilityMetric):
    name = "rouge"
    description = ("Lexical overlap: ROUGE-L F1 (longest common word subsequence) between each original "
                   "and its released version, averaged over documents.")

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        ctx = self._context(scenario)
        ids = self._aligned_ids(ctx, release)
        values = [rouge_l_text(ctx.originals[i].text, release.corpus[i].text) for i in ids]
        docs = [{"id": i, "value": v} for i, v in zip(ids, values)]
        return [_mean_result("rouge", release.name, values, docs, {})]


METRIC_CLASSES: dict[str, type[UtilityMetric]] = {
    c.name: c for c in (TPIMetric, TPSMetric, NMIMetric, PrecisionMetric, RecallMetric, SimilarityMetric,
                        RougeMetric)
}
