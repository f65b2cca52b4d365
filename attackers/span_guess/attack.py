"""The registered span-guessing attack: which spans to attack, the guesses, the matches,
the context-free baseline and the results per label and per document."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from attackers.span_guess.batches import guess_in_batches
from attackers.span_guess.background import Background, background_guesses, llm_rerank
from attackers.span_guess.guesser import SpanGuesser
from attackers.span_guess.matcher import Matcher, corpus_matcher, normalise
from attackers.span_guess.llm_sample import PoweredGuessing, asks_llm, interleave
from attackers.span_guess.prior import LabelPrior, combine, top
from audit.core.align import replaced_spans
from audit.core.data import Span
from audit.core.errors import AnonauditError
from audit.core.interfaces import Attack
from audit.core.registry import register
from audit.core.results import Finding, Highlight, Result
from audit.core.sequential import DEFAULT_HALF_WIDTH, check_target
from audit.core.stats import cluster_bootstrap
from audit.models.llm import LLM
from audit.models.resources import UsesLLM, resources_of
from audit.runtime.progress import say

if TYPE_CHECKING:
    from audit.core.data import Release, Scenario
    from audit.models.nlp import Spacy


@dataclass
class _Target:
    doc_id: str
    text: str  # sanitized document
    span: Span  # start/end in the sanitized text, original set, label set
    subject: str | None = None  # whose document (the auditor's knowledge, never the adversary's)


Knowledge = Literal["auto", "context", "background", "both"]
Rank = Literal["fit", "llm"]


@register("attack")
class SpanGuessAttack(PoweredGuessing, UsesLLM, Attack):
    """For every replaced or masked span, an LLM guesses the original from the sanitized document."""

    name: ClassVar[str] = "span_guess"
    description: ClassVar[str] = (
        "An adversary who knows which parts of a document were replaced (masked, generalised or deleted) "
        "guesses what was there originally, a few guesses per span. With the public background (the "
        "documents about people that TRIR's adversary also holds) it finds the person whose background best "
        "matches the document and ranks the names, dates, places and numbers of the span's type in it by how "
        "well their surroundings match the span's, and mixes them with what the baseline knows (how often each "
        "original occurs per entity type); without it (or as well), a language model reads the "
        "sanitized document and writes its guesses. A span counts as recovered when a guess matches the "
        "original by shared word lemmas, acronyms, shared word stems for names, or, for dates, the exact "
        "same date. It shows whether generalisations such as \"a European capital\" still give \"Warsaw\" "
        "away. The baseline is a context-free adversary who guesses, for every span, the most frequent "
        "originals of its entity type."
    )
    requires: ClassVar[frozenset[str]] = frozenset({"originals"})
    #: the public background documents: the adversary's knowledge about the people (``knowledge``)
    accepts: ClassVar[frozenset[str]] = frozenset({"background"})
    #: The fix the report proposes when this attack decides a release ({exposed}/{total} documents).
    remedy: ClassVar[str] = (
        "The context gives the hidden text away in {exposed} of {total} attacked documents: generalise "
        "instead of masking, choosing against this attack (`anonaudit sanitize intact --selection "
        "attack`).")

    #: The parameter that sets the interval target (what ``budget`` sets; :mod:`audit.core.sequential`).
    precision_param: ClassVar[str] = "target"

    def __init__(self, guesses: int = 5, sample: int | None = None, target: float | None = DEFAULT_HALF_WIDTH,
                 llm: str | LLM | None = None, seed: int = 0,
                 labels: Sequence[str] | None = None, frequent_lemmas: int = 200, context_tokens: int | None = None,
                 cache: bool = True, ner: bool = True, progress: bool = True, knowledge: Knowledge = "auto",
                 people: int = 5, rank: Rank = "fit", dense: bool = True, prior: bool = True,
                 dense_precision: Literal["auto", "fp32", "bf16"] = "auto"):
        """
        guesses: guesses asked for per span.
        sample: attack a seeded random sample of this many spans per release (default: all spans).
        target: attack the documents in a seeded order, in batches of 10, 20, 40, ..., until the 95% interval
            of the recovery rate is at most this wide on each side (none: every document); where the LLM
            guesses, every span is guessed without it too and the figure is prediction-powered (docs/statistics.md).
        llm: the LLM that guesses (a spec, see ``anonaudit models list``, or an LLM object).
        labels: only attack spans with these entity labels.
        frequent_lemmas: leave the N most frequent lemmas of the originals out of lemma matching.
        context_tokens: at most this many tokens of document context per prompt (default: what fits).
        cache: read and write the caches on disk (LLM answers; the background's sentence vectors and
            spaCy parses).
        ner: label spans that a release does not label with spaCy NER on their original text.
        knowledge: what the adversary knows besides the sanitized document: ``background`` (the public
            background documents: candidates from the best-matching person's background, ranked by
            context fit; no LLM unless ``rank="llm"``), ``context`` (nothing: the LLM guesses from the
            document alone), ``both`` (the two lists interleaved), ``auto`` (background when the
            scenario has one, else context).
        people: look for candidates in the background of this many best-matching people, each
            weighted by the posterior that the document is about them (a clear match takes nearly all).
        prior: the background adversary also knows what the context-free baseline knows (how often
            each original occurs per label among the release's other replaced spans) and mixes it,
            half and half, with the background's candidates: never weaker than the baseline where the
            background has nothing (``attackers.span_guess.prior``).
        rank: order background candidates by context ``fit`` (word overlap around each mention), or
            re-rank the best ``2 * guesses`` by the ``llm``'s log-probability of the candidate in the
            span's place.
        dense: find the person with the embedded MiniLM as well as BM25 (standardised scores added).
        dense_precision: MiniLM's arithmetic: ``fp32``, ``bf16`` (bfloat16 autocast) or ``auto`` (bf16 where the
            CPU or GPU computes it natively, else fp32); each precision's vectors are cached apart.
        """
        self.guesses = guesses
        self.sample = sample
        self.target = target
        check_target(target, "span_guess target")
        self.llm = llm
        self.seed = seed
        self.labels = labels
        self.frequent_lemmas = frequent_lemmas
        self.context_tokens = context_tokens
        self.cache = cache
        self.ner = ner
        self.progress = progress
        if not 1 <= guesses <= 20:
            raise AnonauditError(f"span_guess: guesses must be between 1 and 20, got {guesses!r}")
        if sample is not None and sample < 1:
            raise AnonauditError(f"span_guess: sample must be a positive number of spans, got {sample!r}")
        if context_tokens is not None and context_tokens < 16:
            raise AnonauditError(f"span_guess: context_tokens must be at least 16, got {context_tokens!r}")
        if knowledge not in ("auto", "context", "background", "both"):
            raise AnonauditError(f"span_guess: knowledge must be auto, context, background or both, got {knowledge!r}")
        if rank not in ("fit", "llm"):
            raise AnonauditError(f"span_guess: rank must be fit or llm, got {rank!r}")
        if not isinstance(people, int) or people < 1:
            raise AnonauditError(f"span_guess: people must be a positive number, got {people!r}")
        if dense_precision not in ("auto", "fp32", "bf16"):
            raise AnonauditError(f"span_guess: dense_precision must be auto, fp32 or bf16, got {dense_precision!r}")
        self.knowledge, self.people, self.rank, self.dense, self.prior = knowledge, people, rank, dense, prior
        self.dense_precision = dense_precision
        if frequent_lemmas < 0:
            raise AnonauditError(f"span_guess: frequent_lemmas must be 0 or more, got {frequent_lemmas!r}")
        self._matcher: Matcher | None = None
        self._matcher_key: str | None = None
        self._ner_nlp: Spacy | None = None
        self._background: Background | None = None
        self._background_key: str | None = None

    # ------------------------------------------------------------------ resources

    # The run's shared models (audit.models.resources), asked for on first use; the LLM through
    # UsesLLM._get_llm (with the ``cache`` setting).

    def close(self) -> None:
        self._ner_nlp = None
        self._background = None
        if self._matcher is not None:
            self._matcher.nlp = None  # a matcher outlives a close; its pipeline may not
        super().close()

    def guesser(self) -> SpanGuesser:
        return SpanGuesser(self._get_llm(), guesses=self.guesses, context_tokens=self.context_tokens, seed=self.seed)

    def matcher(self, scenario: Scenario) -> Matcher:
        """The matcher for this scenario's originals (frequent lemmas computed once, cached on disk)."""
        originals = scenario.originals
        key = f"{originals.fingerprint() if originals is not None else 'none'}:{self.frequent_lemmas}"
        if self._matcher is None or self._matcher_key != key:
            self._matcher = corpus_matcher(originals, self.frequent_lemmas,
                                            resources_of(self).spacy(disable=("parser", "ner")))
            self._matcher_key = key
        if self._matcher.nlp is None:  # lemmas from the run's shared pipeline (parser and NER left out)
            self._matcher.nlp = resources_of(self).spacy(disable=("parser", "ner"))
        return self._matcher

    def fit(self, scenario: Scenario) -> SpanGuessAttack:
        self.matcher(scenario)
        return self

    # ------------------------------------------------------------------ spans

    def targets(self, scenario: Scenario, release: Release) -> tuple[list[_Target], dict[str, int]]:
        """Every attackable replaced span of the release (before sampling), and skip counts."""
        originals = scenario.originals
        if originals is None:
            raise AnonauditError("span_guess needs the original documents (--originals)")
        if not release.aligned:
            raise AnonauditError(f"release {release.name!r} is not aligned with the originals by id: "
                                 "span guessing needs to know which original each document came from")
        wanted = None if self.labels is None else {lab.upper() for lab in self.labels}
        skipped = Counter[str]()
        targets: list[_Target] = []
        for doc in release:
            orig = originals.get(doc.id)
            if orig is None:
                skipped["no original"] += 1
                continue
            for span in replaced_spans(orig, doc, nlp=self._ner() if self.ner else None):
                if not (span.original or "").strip():
                    skipped["insertion (nothing hidden)"] += 1
                elif normalise(span.original or "") == normalise(span.replacement or ""):
                    skipped["unchanged"] += 1
                elif wanted is not None and span.label.upper() not in wanted:
                    skipped["label not selected"] += 1
                else:
                    targets.append(_Target(doc.id, doc.text, span, doc.subject or orig.subject))
        return targets, dict(skipped)

    def _ner(self) -> Spacy:
        if self._ner_nlp is None:
            self._ner_nlp = resources_of(self).spacy()
        return self._ner_nlp

    def _sample(self, targets: list[_Target]) -> list[_Target]:
        if self.sample is None or self.sample >= len(targets):
            return targets
        chosen = sorted(random.Random(self.seed).sample(range(len(targets)), self.sample))
        return [targets[i] for i in chosen]

    # ------------------------------------------------------------------ evaluate

    def knowledge_of(self, scenario: Scenario) -> str:
        """The knowledge this attack gives its adversary on ``scenario`` (``auto`` resolved)."""
        has = scenario.background is not None and len(scenario.background) > 0
        if self.knowledge == "auto":
            return "background" if has else "context"
        if self.knowledge in ("background", "both") and not has:
            raise AnonauditError(f"span_guess: knowledge={self.knowledge!r} needs public background documents "
                                 "(the audit's `background`, a TRI file's public_knowledge column); there are none")
        return self.knowledge

    def background(self, scenario: Scenario) -> Background:
        """The scenario's background, grouped by person and indexed (kept while it is the same)."""
        bg = scenario.background
        key = bg.fingerprint() if bg is not None else "none"
        if self._background is None or self._background_key != key:
            self._background = Background(bg, resources_of(self).spacy(disable=("parser", "lemmatizer")),
                                          embedder=resources_of(self).embedder(None, cache=self.cache,
                                                                               precision=self.dense_precision)
                                          if self.dense else None, progress=self.progress, cache=self.cache)
            self._background_key = key
        return self._background

    def _sources(self, scenario: Scenario, release: Release, knowledge: str, targets: list[_Target],
                 prior: LabelPrior, found: tuple | None = None) -> tuple[dict[str, list[list[str]]], str, dict[str, Any]]:
        """The guesses of each source the adversary has, per target, the name of the source its
        background guesses come from (``background`` or, with the prior, ``background_and_prior``),
        and the background's diagnostics. ``found``: the background's part for these targets,
        computed already (:meth:`_background_part`)."""
        timing: dict[str, float] = {}
        sources: dict[str, list[list[str]]] = {}
        diag: dict[str, Any] = {}
        head = "background_and_prior" if self.prior else "background"
        if knowledge in ("background", "both"):
            started = time.perf_counter()
            sources, dists, diag, seconds = found or self._background_part(scenario, targets, prior)
            sources = dict(sources)
            timing.update(seconds)
            if self.rank == "llm":  # the best 2p re-ranked by the LLM's log-probabilities
                llm = self._get_llm()
                sources[head] = [[c for c, _ in llm_rerank(llm, t.text, t.span.start, t.span.end, top(d, 2 * self.guesses))]
                                 [:self.guesses] for t, d in zip(targets, dists)]
            timing["background"] = time.perf_counter() - started
        if knowledge in ("context", "both"):
            started = time.perf_counter()
            sources["context_llm"] = self.guesser().guess_many([(t.text, t.span) for t in targets],
                                                               progress=self.progress)
            timing["llm"] = time.perf_counter() - started
        before = self.__dict__.get("timings_by_release_", {}).get(release.name, {})  # earlier batches
        self.record_timing(release.name, {k: v + before.get(k, 0.0) for k, v in timing.items()})
        return sources, head, diag

    def _background_part(self, scenario: Scenario, targets: list[_Target], prior: LabelPrior):
        """What the background gives without the LLM: ``(guesses per source, the head source's
        distributions, diagnostics, seconds per step)``; the head is ranked by context fit."""
        found = background_guesses(self.background(scenario), targets, self.guesses, people=self.people,
                                   progress=self.progress)
        sources = {"background": found.fitted, "background_person_only": found.plain}
        dists = found.dists
        if self.prior:
            priors = [prior.distribution(t.span.label, t.span.original or "") for t in targets]
            sources["prior"] = [top(d, self.guesses) for d in priors]
            seen = [prior.seen_mass(t.span.label, t.span.original or "") for t in targets]
            dists = [combine(b, q, m) for b, q, m in zip(dists, priors, seen)]
            sources["background_and_prior"] = [top(d, self.guesses) for d in dists]
        return sources, dists, found.diag, dict(found.seconds)

    def _scored(self, knowledge: str, sources: dict[str, list[list[str]]], head: str) -> list[list[str]]:
        """The guesses that count, per span: the context LLM's, the background's, or both interleaved."""
        if knowledge == "context":
            return sources["context_llm"]
        if knowledge == "background":
            return sources[head]
        return interleave(sources[head], sources["context_llm"], self.guesses)

    def _guess(self, scenario: Scenario, release: Release, knowledge: str, matcher: Matcher,
               all_targets: list[_Target], prior: LabelPrior):
        """The spans attacked, their guesses per source, the head source, the diagnostics and how
        the documents were sampled (:func:`~attackers.span_guess.batches.guess_in_batches`)."""
        self.__dict__.get("timings_by_release_", {}).pop(release.name, None)  # the batches add theirs up
        if asks_llm(knowledge, self.rank):  # prediction-powered: every span scored cheaply, the LLM on a sample
            return self._guess_powered(scenario, release, knowledge, matcher, self._sample(all_targets), prior)
        return guess_in_batches(
            self._sample(all_targets), seed=self.seed, target=self.target,
            say=lambda m: say(f"span_guess on {release.name}: {m}", enabled=self.progress),
            hits_of=lambda batch, sources, head: self._hits(knowledge, matcher, batch, sources, head),
            sources_of=lambda batch: self._sources(scenario, release, knowledge, batch, prior))

    def _hits(self, knowledge: str, matcher: Matcher, batch: list[_Target], sources: dict[str, list[list[str]]],
              head: str) -> list[bool]:
        """Which spans of ``batch`` the guesses that count recovered (between the looks)."""
        gl = self._scored(knowledge, sources, head)
        matcher.analyse_many([t.span.original or "" for t in batch] + [g for gs in gl for g in gs],
                             progress="span guess: the guesses' lemmas" if self.progress else None)
        return [matcher.first_match(t.span.original or "", gs, t.span.label) is not None for t, gs in zip(batch, gl)]

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        knowledge = self.knowledge_of(scenario)
        matcher = self.matcher(scenario)
        all_targets, skipped = self.targets(scenario, release)
        prior = LabelPrior((t.span.label, t.span.original or "") for t in all_targets)
        targets, sources, head, diag, seq = self._guess(scenario, release, knowledge, matcher, all_targets, prior)
        guesses = self._scored(knowledge, sources, head)

        matcher.analyse_many([t.span.original or "" for t in all_targets]
                             + [g for gl in sources.values() for gs in gl for g in gs],
                             progress="span guess: the guesses' lemmas" if self.progress else None)
        findings = []
        for t, gs in zip(targets, guesses):
            hit = matcher.first_match(t.span.original or "", gs, t.span.label)
            findings.append((t, gs, hit))
        per_source = {name: [matcher.first_match(t.span.original or "", gs, t.span.label) is not None
                             for t, gs in zip(targets, gl)] for name, gl in sources.items()}

        base_hits = [matcher.first_match(t.span.original or "", prior.guesses(t.span.label, t.span.original or "",
                                                                              self.guesses), t.span.label) is not None
                     for t in targets]
        n = len(targets)
        successes = sum(hit is not None for _, _, hit in findings)
        # The spans of one document share its context: resample documents, not spans.
        units = _units([(t.doc_id, hit is not None) for t, _, hit in findings])
        headline, how = self._how_made(seq, units, sum(base_hits) / n if n else None, prior, matcher,
                                       self._sample(all_targets), successes)

        rules = Counter(hit[1] for _, _, hit in findings if hit is not None)
        recovered_by = {name: {"recovered": sum(hits), "of": n, "rate": sum(hits) / n if n else None}
                        for name, hits in per_source.items()}
        details = {
            "knowledge": knowledge,
            "per_label": _per_label(findings, base_hits, self.seed),
            "recovered_by_source": recovered_by,
            "rules": dict(rules.most_common()),
            "spans_total": len(all_targets),
            "spans_attacked": n,
            "skipped": skipped,
            "guesses": self.guesses,
            "baseline_method": (f"context-free: the {self.guesses} most frequent originals of the span's label "
                                "among the release's other replaced spans"),
            "frequent_lemmas": sorted(matcher.frequent),
            "llm": (getattr(self._get_llm(), "identity", "") or type(self._get_llm()).__name__)
            if knowledge != "background" or self.rank == "llm" else "",
            "params": self.get_params(),
            **{k: v for k, v in diag.items() if k != "per_span"},
            **how,
        }
        details["prior"] = self.prior and knowledge != "context"
        details["attacker"] = _attacker_sentence(knowledge, recovered_by, diag, self.people, self.rank,
                                                 details["prior"])
        warnings = _warnings(knowledge, targets, diag) + _weak(knowledge, successes, sum(base_hits), n)
        if warnings:
            details["warning"] = "; ".join(warnings)
        per_span = diag.get("per_span") or [{} for _ in targets]
        return [Result.from_risk(self.name, release.name, headline, details=details,
                                 documents=_documents(findings, sources, per_span, per_source))]


def _attacker_sentence(knowledge: str, by: dict[str, dict], diag: dict[str, Any], people: int, rank: str,
                       prior: bool = False) -> str:
    """What the adversary knew and what each source of guesses recovered (shown in the report)."""
    def got(name: str) -> str:
        s = by.get(name)
        return f"{s['recovered']} of {s['of']} spans" if s else "not run"

    if knowledge == "context":
        return f"knew only the sanitized document (an LLM guessed from the context): recovered {got('context_llm')}"
    what = (f"knew the public background ({diag.get('background_documents', 0)} documents about "
            f"{diag.get('background_people', 0)} people) and the sanitized document"
            + (", and how often each original occurs per label among the release's other replaced spans (what the "
               "context-free baseline knows)" if prior else "")
            + f"; it looked in the background of the {people} best-matching {'person' if people == 1 else 'people'} "
            f"({diag.get('retrieval', 'BM25')} over each person's documents"
            + (", each weighted by how likely the document is about them" if people > 1 else "")
            + "), ranking entities of the span's type by "
            + ("the LLM log-probability of each in the span's place" if rank == "llm" else "context fit"))
    out = (f"{what}. Background candidates recovered {got('background')} (the same people's most frequent "
           f"candidates, without the span's context: {got('background_person_only')})")
    if prior:
        out += (f"; the label prior alone {got('prior')}; the two mixed half and half (the guesses scored) "
                f"{got('background_and_prior')}")
    if knowledge == "both":
        out += f"; the context-only LLM guesser {got('context_llm')}"
    return out + "."


def _weak(knowledge: str, successes: int, baseline_hits: int, n: int) -> list[str]:
    """An attacker that does worse than guessing each label's most frequent originals without
    reading the document is too weak for its "no risk" to mean anything."""
    if not n or successes >= baseline_hits:
        return []
    return [f"the guesser is weaker than its own context-free baseline ({successes} of {n} spans recovered, "
            f"{baseline_hits} by guessing the most frequent originals of each label): a low figure here says little "
            "about the release; " + ("use a stronger --llm or more --guesses" if knowledge == "context"
                                      else "give the adversary more background or more --guesses")]


def _warnings(knowledge: str, targets: list[_Target], diag: dict[str, Any]) -> list[str]:
    """Limits of the adversary's knowledge that make the figure a lower bound, said, never silent."""
    out = []
    no_ctx = sum(not t.text[:t.span.start].strip() and not t.text[t.span.end:].strip() for t in targets)
    if no_ctx:
        out.append(f"{no_ctx} of {len(targets)} attacked spans have no context at all (the document is only "
                   "the span): nothing could be guessed from it")
    if knowledge in ("background", "both"):
        missing = diag.get("documents_without_background", 0)
        if missing:
            out.append(f"{missing} of {diag.get('documents_attacked', 0)} attacked documents are about people with "
                       "no passage in the background: their spans could only be guessed from other people's "
                       "background, so the figure is a lower bound")
        if targets and diag.get("spans_without_candidates", 0) == len(targets):
            out.append("the background held no candidate of the attacked spans' types")
    return out


def _units(outcomes: list[tuple[str, bool]]) -> list[tuple[int, int]]:
    """``(recovered, attacked)`` per document, in first-seen order, from ``(doc id, recovered)``."""
    per_doc: dict[str, list[int]] = {}
    for doc_id, ok in outcomes:
        per_doc.setdefault(doc_id, [0, 0])
        per_doc[doc_id][0] += ok
        per_doc[doc_id][1] += 1
    return [(a, b) for a, b in per_doc.values()]


def _per_label(findings: list, base_hits: list[bool], seed: int = 0) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[tuple[str, bool, bool]]] = {}
    for (t, _, hit), base in zip(findings, base_hits):
        groups.setdefault(t.span.label, []).append((t.doc_id, hit is not None, base))
    out = {}
    for label in sorted(groups):
        rows = groups[label]
        rate = cluster_bootstrap(_units([(d, h) for d, h, _ in rows]), seed=seed)
        out[label] = {"rate": rate.value, "ci": list(rate.ci), "n": rate.n, "spans": len(rows),
                      "successes": int(rate.successes), "baseline": sum(b for _, _, b in rows) / len(rows)}
    return out


def _documents(findings: list, sources: dict[str, list[list[str]]], per_span: list[dict],
               per_source: dict[str, list[bool]]) -> list[Finding]:
    """One finding per document: it succeeds when a guess recovered at least one of its spans.
    ``spans`` is private (originals, guesses of each source, the matching guess, the background
    person looked at)."""
    docs: dict[str, dict[str, Any]] = {}
    for i, (t, gs, hit) in enumerate(findings):
        entry = docs.setdefault(t.doc_id, {"attacked": 0, "recovered": 0, "spans": [], "highlights": []})
        s = t.span
        entry["attacked"] += 1
        record = {"start": s.start, "end": s.end, "label": s.label, "original": s.original,
                  "replacement": s.replacement if s.replacement is not None else t.text[s.start:s.end],
                  "guesses": gs, "recovered": hit is not None,
                  "matched_guess": gs[hit[0]] if hit else None, "rule": hit[1] if hit else None,
                  "guesses_by_source": {name: gl[i] for name, gl in sources.items()},
                  "recovered_by_source": sorted(name for name, hits in per_source.items() if hits[i]), **per_span[i]}
        if s.orig_start is not None:
            record["orig_start"], record["orig_end"] = s.orig_start, s.orig_end
        entry["spans"].append(record)
        if hit is not None:
            entry["recovered"] += 1
            entry["highlights"].append(Highlight(s.start, s.end, "span",
                                                 f"{s.label}: guessed {gs[hit[0]]!r} for {s.original!r} ({hit[1]})"))
    out = []
    for doc_id, entry in docs.items():
        highlights = entry.pop("highlights")
        rec, att = entry["recovered"], entry["attacked"]
        summary = (f"{rec} of {att} replaced span{'s' if att != 1 else ''} recovered by the guesses" if rec
                   else "Its replaced span was not recovered by the guesses" if att == 1
                   else f"None of its {att} replaced spans was recovered by the guesses")
        out.append(Finding(id=doc_id, success=rec > 0, summary=summary, highlights=highlights, facts=entry,
                           private={"spans"}))
    return out
