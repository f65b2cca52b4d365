"""Whole-document closeness of each release to its original: embedding similarity and ROUGE-L."""

from __future__ import annotations

from audit.core.data import Release, Scenario
from audit.core.registry import register
from audit.core.results import Result
from audit.core.text import rouge_l_text
from audit.metrics.base import UtilityMetric, findings_of, mean_result, share_text


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
        docs = findings_of([{"id": i, "value": v} for i, v in zip(ids, values)],
                         lambda r: share_text(r["value"], "Embedding similarity to its original"))
        return [mean_result("similarity", release.name, values, docs, {})]


@register("metric")
class RougeMetric(UtilityMetric):
    name = "rouge"
    description = ("Lexical overlap: ROUGE-L F1 (longest common word subsequence) between each original "
                   "and its released version, averaged over documents.")

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        ctx = self._context(scenario)
        ids = self._aligned_ids(ctx, release)
        values = [rouge_l_text(ctx.originals[i].text, release.corpus[i].text) for i in ids]
        docs = findings_of([{"id": i, "value": v} for i, v in zip(ids, values)],
                         lambda r: share_text(r["value"], "ROUGE-L with its original"))
        return [mean_result("rouge", release.name, values, docs, {})]
