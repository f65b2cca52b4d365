"""Span guessing's LLM modes, prediction-powered (:mod:`audit.core.ppi`, its ratio form).

The default adversary (the public background, candidates ranked by context fit) asks no LLM
and guesses every span. Its LLM modes ask the LLM per span: ``knowledge="context"`` or
``"both"`` (the LLM writes guesses from the document) and ``rank="llm"`` (the LLM re-ranks the
background's candidates). There every span is first guessed cheaply, by the same attack without
the LLM (the background ranker, or the context-free baseline when the scenario has no
background), and the LLM is asked on a seeded, document-level sequential sample until the
prediction-powered interval of recovered spans / spans reaches the target. The figure is the
LLM adversary's recovery rate over every span; the cheap guesser only narrows its interval, and
a poor one costs LLM calls, never validity. ``target=None`` (``--budget full``) asks the LLM
on every document: the exact figure.
"""

from __future__ import annotations

import time
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from attackers.span_guess.batches import Cheap, guess_in_batches
from audit.core.ppi import PPIRun, describe_fallback
from audit.core.sequential import SequentialSample
from audit.core.stats import Risk, SuccessRate, cluster_bootstrap, clustered_details, clustered_risk
from audit.runtime.progress import say

if TYPE_CHECKING:
    from attackers.span_guess.matcher import Matcher
    from attackers.span_guess.prior import LabelPrior
    from audit.core.data import Release, Scenario

#: What scores every span cheaply, with the background and without it.
RANKER = ("the same attack without the LLM (the background's candidates ranked by context fit{prior}): "
          "each span recovered or not")
BASELINE = "the context-free baseline (the most frequent originals of the span's label): each span recovered or not"


def asks_llm(knowledge: str, rank: str) -> bool:
    """Whether this adversary asks the LLM per span (its figure is then prediction-powered)."""
    return knowledge in ("context", "both") or (knowledge == "background" and rank == "llm")


class PoweredGuessing:
    """The LLM modes' sampling, and how each figure was made (both paths), mixed into
    :class:`~attackers.span_guess.attack.SpanGuessAttack` (it reads the attack's parameters and
    calls its ``_sources``, ``_background_part`` and ``_hits``)."""

    def _guess_powered(self, scenario: Scenario, release: Release, knowledge: str, matcher: Matcher,
                       targets: list, prior: LabelPrior):
        """Every span guessed cheaply, the LLM on documents in a seeded order until the
        prediction-powered interval is narrow enough: what ``_guess`` returns, its sample a
        :class:`~audit.core.ppi.PPIRun`."""
        started = time.perf_counter()
        if scenario.background is not None and len(scenario.background):
            found = self._background_part(scenario, targets, prior)
            head = "background_and_prior" if self.prior else "background"
            cheap_guesses, name = found[0][head], RANKER.format(prior=", mixed with the label prior" if self.prior else "")
        else:
            found, name = None, BASELINE
            cheap_guesses = [prior.guesses(t.span.label, t.span.original or "", self.guesses) for t in targets]
        matcher.analyse_many([t.span.original or "" for t in targets] + [g for gs in cheap_guesses for g in gs],
                             progress="span guess: the cheap guesses' lemmas" if self.progress else None)
        hits = [matcher.first_match(t.span.original or "", gs, t.span.label) is not None
                for t, gs in zip(targets, cheap_guesses)]
        recovered: dict[str, float] = {}
        for t, ok in zip(targets, hits):
            recovered[t.doc_id] = recovered.get(t.doc_id, 0.0) + ok
        index = {id(t): k for k, t in enumerate(targets)}
        self.record_timing(release.name, {"cheap_scores": time.perf_counter() - started})

        def sources_of(batch: list):
            part = None
            if found is not None and knowledge in ("background", "both"):
                ks = [index[id(t)] for t in batch]
                part = ({s: [g[k] for k in ks] for s, g in found[0].items()}, [found[1][k] for k in ks],
                        _slice_diag(found[2], ks), {})  # its seconds are in cheap_scores
            return self._sources(scenario, release, knowledge, batch, prior, found=part)

        chosen, sources, head, diag, run = guess_in_batches(
            targets, seed=self.seed, target=self.target,
            say=lambda m: say(f"span_guess on {release.name}: {m}", enabled=self.progress),
            hits_of=lambda batch, sources, head: self._hits(knowledge, matcher, batch, sources, head),
            sources_of=sources_of, cheap=Cheap(recovered, name))
        self.cheap_ = {"predictor": name, "recovered": int(sum(hits)), "of": len(targets)}
        if found is not None and knowledge in ("background", "both"):  # the background ran on every span
            diag = {**{k: v for k, v in found[2].items() if k != "per_span"},
                    **({"per_span": diag["per_span"]} if "per_span" in diag else {})}
        return chosen, sources, head, diag, run

    def _how_made(self, seq: SequentialSample | PPIRun, units: list[tuple[int, int]], baseline: float | None,
                  prior: LabelPrior, matcher: Matcher, every: list, successes: int):
        """The headline and how it was made: the cluster bootstrap over the documents guessed, or (LLM
        modes) the prediction-powered figure over ``every`` span (findings: the judged documents')."""
        if isinstance(seq, PPIRun):
            how = powered_details(seq, self.cheap_, sum(b for _, b in units))
            if seq.estimate.exact:
                how["value_from"] = "sum:recovered/attacked"
            return self._powered_headline(seq, prior, matcher, every, successes), how
        how = clustered_details(cluster_bootstrap(units, seed=self.seed), "spans")
        if self.target is not None or seq.documents < seq.of:
            how["sampled"] = seq.to_dict()
        how["value_from"] = "sum:recovered/attacked"  # recomputed from the findings by every reader
        return clustered_risk(units, baseline, seed=self.seed), how

    def _powered_headline(self, run: PPIRun, prior: LabelPrior, matcher: Matcher, targets: list,
                          successes: int) -> Risk:
        """The prediction-powered figure beside the context-free baseline over every span."""
        guesses = [prior.guesses(t.span.label, t.span.original or "", self.guesses) for t in targets]
        matcher.analyse_many([g for gs in guesses for g in gs], progress=None)
        base = [matcher.first_match(t.span.original or "", gs, t.span.label) is not None
                for t, gs in zip(targets, guesses)]
        return powered_risk(run, sum(base) / len(base) if base else None, successes)


def interleave(first: list[list[str]], second: list[list[str]], p: int) -> list[list[str]]:
    """Per span: the two guess lists alternately (first's best first), without repeats, cut at ``p``."""
    out = []
    for a, b in zip(first, second):
        merged: list[str] = []
        for pair in zip_longest(a, b):
            for g in pair:
                if g and g.lower() not in {m.lower() for m in merged}:
                    merged.append(g)
        out.append(merged[:p])
    return out


def _slice_diag(diag: dict[str, Any], ks: list[int]) -> dict[str, Any]:
    """The background's diagnostics with its per-span entries cut to the spans ``ks``."""
    out = dict(diag)
    if diag.get("per_span"):
        out["per_span"] = [diag["per_span"][k] for k in ks]
    return out


def powered_risk(run: PPIRun, baseline: float | None, successes: int) -> Risk:
    """The headline of a prediction-powered figure, beside the context-free baseline (over every
    span): a risk only when the interval's lower end lies above it."""
    est = run.estimate
    rate = SuccessRate(est.value, est.ci, est.judged, successes)
    if baseline is None:
        return Risk(rate, None, None, None, None)

    def residual(r: float) -> float:
        return 0.0 if baseline >= 1.0 else max(0.0, (r - baseline) / (1.0 - baseline))

    return Risk(rate, baseline, est.ci[0] > baseline, residual(est.value), (residual(est.ci[0]), residual(est.ci[1])))


def powered_details(run: PPIRun, cheap: dict[str, Any], spans_judged: int) -> dict[str, Any]:
    """What a prediction-powered result says about how its figure was made (the claim linker's keys)."""
    est = run.estimate
    return {"sampled": run.sampled(), **est.details(), "cheap_recovered": cheap, "unit": "documents",
            "trials": spans_judged, "trial_unit": "spans",
            "interval": est.to_dict()["interval"] + "; ratio form: recovered spans / spans, documents of unequal size",
            "tiny_sample": est.judged < 10 and not est.exact,
            "note": "recovery rate of the LLM adversary over every span: " + describe_fallback(est)}
