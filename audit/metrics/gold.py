"""Precision and recall of the replaced regions against the originals' gold spans (TAB's
definitions)."""

from __future__ import annotations

from typing import Literal

import numpy as np

from audit.core.paramtypes import PositiveInt
from audit.core.data import Release, Scenario
from audit.core.errors import AnonauditError
from audit.core.registry import register
from audit.core.results import Result
from audit.metrics.base import UtilityMetric, bootstrap_ratio, findings_of
from audit.metrics.ic import CONTEXT_TOKENS
from audit.metrics.utility_context import UtilityContext
from audit.metrics.tae import parses, tae_row


def _gold_spans(doc) -> list:
    return [s for s in doc.spans if (s.identifier_type or "").upper() != "NO_MASK"]


class _GoldMetric(UtilityMetric):
    """Token-level and entity-level agreement of the replaced regions with gold spans.

    ``ic_weighted``: also weigh each token by its information content (``token_precision_ic``,
    ``token_recall_ic`` in the details). Off by default: it loads the information-content scorer
    (an LLM; ~12 minutes projected on 2 cores with native bf16 for a TAB-sized collection, ~40 in float32), while the headline figures are
    plain counts. The TPI/TPS metrics share the scores when they run in the same audit.
    """

    def __init__(self, context: UtilityContext | None = None, ic: Literal["causal", "masked"] = "causal",
                 ic_model: str | None = None, llm: str | None = None, embedder: str | None = None,
                 cache: bool = True, seed: int = 0, progress: bool = False,
                 context_tokens: PositiveInt = CONTEXT_TOKENS, mask_every: PositiveInt = 6, ic_weighted: bool = False,
                 ic_precision: Literal["auto", "fp32", "bf16"] = "auto"):
        """
        ic_weighted: also report IC-weighted token figures (loads the information-content scorer).
        """
        super().__init__(context=context, ic=ic, ic_model=ic_model, llm=llm, embedder=embedder, cache=cache,
                         seed=seed, progress=progress, context_tokens=context_tokens, mask_every=mask_every,
                         ic_precision=ic_precision)
        self.ic_weighted = ic_weighted

    @property
    def weighted(self) -> bool:
        return self.ic_weighted

    def _tables(self, ctx: UtilityContext, release: Release) -> list[dict]:
        key = ("gold", release.name, release.corpus.fingerprint(), self.weighted)
        if key in ctx.memo:
            return ctx.memo[key]
        ids = [i for i in self._aligned_ids(ctx, release) if ctx.originals[i].spans]
        if not ids:
            raise AnonauditError("precision/recall need gold spans on the originals (a \"spans\" list per "
                                 "document); these originals carry no gold spans")
        table = ctx.terms_ic(ids) if self.weighted else {}
        rows = []
        for i, parsed in zip(ids, parses(ctx, ids)):
            orig = ctx.originals[i]
            toks = [(t.idx, t.idx + len(t.text)) for t in parsed if not (t.is_space or t.is_punct)]
            applied = ctx.replaced(orig, release.corpus[i])
            masked_spans = [(s.orig_start, s.orig_end) for s in applied
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
                         "entities": ent_total, "entities_masked": ent_masked,
                         **tae_row(orig, release.corpus[i], applied, parsed)})
        ctx.memo[key] = rows
        return rows


def _weighted_ratio(metric: _GoldMetric, rows: list[dict], num: str, den: str) -> float | None:
    """An IC-weighted ratio, or ``None`` when the metric was not asked for one."""
    return _ratio(rows, num, den) if metric.weighted else None


def _ratio(rows: list[dict], num: str, den: str) -> float | None:
    d = sum(r[den] for r in rows)
    return sum(r[num] for r in rows) / d if d > 0 else None


@register("metric")
class PrecisionMetric(_GoldMetric):
    name = "precision"
    description = ("Token-level precision of the release against gold annotations: of the words the "
                   "sanitizer replaced, the share that the annotators marked (over-masking lowers it). "
                   "Also weighted by the words' information content; TAE's Precision (\\w+ words of each "
                   "listed span, averaged over annotators) is in the details as tae_precision.")

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        rows = self._tables(self._context(scenario), release)
        value = _ratio(rows, "tp", "masked")
        docs = findings_of([{"id": r["id"], "value": (r["tp"] / r["masked"]) if r["masked"] else None, "masked_tokens":
                           r["masked"], "true_positives": r["tp"]} for r in rows],
                         lambda r: f"{r['true_positives']} of its {r['masked_tokens']} replaced words are annotated "
                                   "as identifying" if r["masked_tokens"] else "No word of it was replaced")
        details = {"token_precision": value, "tae_precision": _ratio(rows, "tae_agreeing", "tae_counted"),
                   "token_precision_ic": _weighted_ratio(self, rows, "w_tp", "w_masked"),
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
                   "replaced; token-level recall (uniform and IC-weighted) and TAE's token-level Recall "
                   "(tae_recall: \\w+ words, all annotators, punctuation and function words aside) are in the "
                   "details.")

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        rows = self._tables(self._context(scenario), release)
        value = _ratio(rows, "entities_masked", "entities")
        docs = findings_of([{"id": r["id"], "value": r["entities_masked"] / r["entities"] if r["entities"] else None,
                           "entities": r["entities"], "entities_masked": r["entities_masked"],
                           "token_recall": r["tp"] / r["gold"] if r["gold"] else None} for r in rows],
                         lambda r: f"{r['entities_masked']} of its {r['entities']} annotated entities are replaced "
                                   "in every mention" if r["entities"] else "No annotated entity")
        details = {"entity_recall": value, "token_recall": _ratio(rows, "tp", "gold"),
                   "tae_recall": _ratio(rows, "tae_masked", "tae_to_mask"),
                   "token_recall_ic": _weighted_ratio(self, rows, "w_tp", "w_gold"),
                   "entities": sum(r["entities"] for r in rows), "gold_tokens": sum(r["gold"] for r in rows)}
        return [Result(kind="utility", name="recall", release=release.name, value=0.0 if value is None else value,
                       ci=bootstrap_ratio([r["entities_masked"] for r in rows], [r["entities"] for r in rows],
                                          seed=self.seed),
                       n=len(rows), details=details, documents=docs)]
