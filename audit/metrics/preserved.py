"""The metrics built on information content: TPI (text preserved information) and TPS (text
preserved similarity)."""

from __future__ import annotations

import numpy as np

from audit.core.data import Release, Scenario
from audit.core.registry import register
from audit.core.results import Result
from audit.metrics.base import UtilityMetric, bootstrap_ratio, findings_of, mean_result, share_text
from audit.metrics.utility_context import DELETED, KEPT, REPLACED, UtilityContext


class _TermMetric(UtilityMetric):
    #: What a replaced term is compared with (TPS): the term with the touching spans swapped for
    #: their replacements ("counterpart": "Mr Galip Yalman" -> "Mr PERSON"), or, as TAE does, the
    #: replacements alone ("replacement": "PERSON"; nothing for a suppression, so TPS = TPI there).
    compare = "counterpart"

    def _per_document(self, ctx: UtilityContext, release: Release, tps: bool) -> list[dict]:
        ids = self._aligned_ids(ctx, release)
        table = ctx.terms_ic(ids)
        rows = []
        pairs_by_doc = {}
        for i in ids:
            terms, _ = table[i]
            fates = ctx.fates(release, i)
            pairs_by_doc[i] = [(t.text, getattr(f, self.compare)) for t, f in zip(terms, fates) if f.status == REPLACED]
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
        if secs:
            self.record_timing(release.name, {"ic_per_document": float(np.mean(secs))})
        details = {"pooled": pooled, "pooled_ci": list(bootstrap_ratio(num, den, seed=self.seed)),
                   "estimator": ctx.estimator.identity,
                   "terms": {s: sum(r[s] for r in rows) for s in (KEPT, REPLACED, DELETED)}}
        if tps:
            details["compared_with"] = self.compare
        what = "Information kept (TPS, replacements by similarity)" if tps else "Information kept (TPI)"
        return [mean_result(self.name, release.name, values, findings_of(rows, lambda r: share_text(r["value"], what)),
                             details)]


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


@register("metric")
class TAETPSMetric(TPSMetric):
    name = "tae_tps"
    description = ("TAE's TPS: TPS with each replaced term compared with the replacement of the masking that "
                   "touched it, not with the term so changed (\"PERSON\", not \"Mr PERSON\"): a term a suppression "
                   "touched keeps nothing, so a suppression's TPS is its TPI.")
    compare = "replacement"
