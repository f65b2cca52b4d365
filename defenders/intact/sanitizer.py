"""The INTACT sanitizer: candidates from an LLM, chosen against the span-guessing attack."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from attackers.span_guess.guesser import Layout, SpanGuesser, parse_guesses
from attackers.span_guess.matcher import DATE_LABELS, Matcher, corpus_matcher, normalise
from audit.core.data import Corpus, Document, Release, Span, outermost, sanitize_corpus
from audit.core.errors import AnonauditError
from audit.core.interfaces import Sanitizer
from audit.runtime.progress import bar
from audit.core.registry import register, registry
from audit.core.templates import fill_template, template_fields
from audit.models.llm import LLM, ChatRequest
from audit.models.resources import UsesLLM, resources_of
from defenders.intact.dates import date_generalisations
from defenders.intact.prompts import (CANDIDATE_EXAMPLE, CANDIDATE_EXAMPLE_ANSWER, CANDIDATE_SYSTEM, MAX_CANDIDATE_WORDS,
                                      candidate_user)
from defenders.intact.truth import TruthCheck
from defenders.selfcheck import check_document, names_a_person, self_check, stop_words
from defenders.intact.repair import IntactRepair


Selection = Literal["attack", "most_specific", "least_specific"]
SELECTIONS = ("attack", "most_specific", "least_specific")

#: Labels replaced by numbered placeholders instead of generalisations.
PLACEHOLDER_LABELS = ("PERSON", "CODE")

# =========================================================================== bookkeeping


@dataclass
class _Entity:
    """One entity of a document: its mentions (outermost spans, in order) and its fate."""

    key: str
    label: str
    mentions: list[Span]
    original: str
    candidates: list[str] = field(default_factory=list)
    kind: str = "llm"  # "placeholder", "date" or "llm"
    choice: str | None = None
    sentence: str = ""  # its first mention's sentence, the mention marked [[...]] (LLM candidates)


#: The counts of :meth:`IntactSanitizer.stats`, per release. ``unparsable_candidates``: candidate
#: answers with no usable candidate; ``unparsable_guesses``: attack answers with no guess (the
#: candidate then counts as risky); ``fallbacks`` = ``fallbacks_no_candidate`` +
#: ``fallbacks_all_risky``; ``chosen_rank``: how often the k-th candidate (1 = most specific) won.
_COUNTS = ("documents", "entities", "mentions", "placeholders", "date_rules", "candidate_requests",
           "attack_requests", "llm_requests", "unparsable_candidates", "unparsable_guesses", "fallbacks",
           "fallbacks_no_candidate", "fallbacks_all_risky", "dropped_candidates", "truth_checked_rule",
           "truth_checked_model", "truth_unchecked", "untruthful_rule", "untruthful_model")


@register("sanitizer")
class IntactSanitizer(UsesLLM, IntactRepair, Sanitizer):
    """Truthful generalisations chosen against an LLM inference attack (INTACT)."""

    name: ClassVar[str] = "intact"
    #: ``anonaudit harden`` hands it the replacements an attack saw through (:meth:`repair`).
    repairs: ClassVar[frozenset[str]] = frozenset({"span"})
    description: ClassVar[str] = (
        "Replaces each personal detail with a truthful but more general description proposed by a language "
        "model (a city becomes \"a port city in northern Poland\", a date its month or decade), names and "
        "codes with numbered placeholders, and keeps the most specific description that the same model "
        "cannot turn back into the original when it reads the sanitized document; a detail that every "
        "description gives away is replaced by its category.")

    def __init__(self, selection: Selection = "attack", candidates: int = 5, guesses: int = 5,
                 llm: str | LLM | None = None, seed: int = 0, detector: str | None = None,
                 labels: Sequence[str] | None = None, placeholders: Sequence[str] | None = PLACEHOLDER_LABELS,
                 template: str = "[{label}]", frequent_lemmas: int = 200, context_tokens: int | None = None,
                 structured: bool | None = None, layout: Layout = "shared", lookahead: int = 1,
                 batch: int = 32, check_truth: bool = True, cache: bool = True, progress: bool = True):
        """
        selection: how a candidate is chosen: attack (the first the LLM cannot invert), most_specific or least_specific.
        candidates: generalisations asked for per entity, most specific first.
        guesses: guesses of the attack per candidate.
        llm: the LLM that proposes and attacks (a spec, see ``anonaudit models list``, or an LLM object).
        detector: a registered span detector (spacy_ner, presidio, a plugin's) instead of the annotated spans.
        labels: only sanitize spans with these labels (default: every span).
        placeholders: labels replaced by numbered placeholders such as PERSON_1.
        template: the fallback replacement, with {label} for the span's label.
        frequent_lemmas: the attack's MATCH leaves out the N most frequent lemmas of the corpus.
        context_tokens: at most this many tokens of document context per attack prompt (default: what fits).
        structured: ask for JSON by schema (default: when the backend enforces schemas).
        layout: the attack prompt: shared (the document once, the candidate in a last message, so a span's candidates reuse the evaluated document) or inline (the candidate inside the document).
        lookahead: candidates attacked at once; 1 stops at the first safe one (fewest requests), more saves round trips on a server with parallel slots (the same choice).
        batch: documents sanitized side by side (their requests go out together: concurrently on a server, to the workers on a cluster); the same release whatever it is.
        check_truth: drop candidates that are untrue of the original (years and numbers by rule, the rest by the model's log-probabilities of Yes and No).
        cache: read and write the LLM answer cache.
        """
        self.selection = selection
        self.candidates = candidates
        self.guesses = guesses
        self.llm = llm
        self.seed = seed
        self.detector = detector
        self.labels = labels
        self.placeholders = placeholders
        template_fields(template, ("label",), "template")  # refused here, naming the field
        self.template = template
        self.frequent_lemmas = frequent_lemmas
        self.context_tokens = context_tokens
        self.structured = structured
        self.layout = layout
        self.lookahead = lookahead
        self.batch = batch
        self.check_truth = check_truth
        self.cache = cache
        self.progress = progress
        if selection not in SELECTIONS:
            raise AnonauditError(f"intact: selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")
        if not 1 <= candidates <= 20:
            raise AnonauditError(f"intact: candidates must be between 1 and 20, got {candidates!r}")
        if not 1 <= guesses <= 20:
            raise AnonauditError(f"intact: guesses must be between 1 and 20, got {guesses!r}")
        if layout not in ("shared", "inline"):
            raise AnonauditError(f"intact: layout must be shared or inline, got {layout!r}")
        if not 1 <= lookahead <= 20:
            raise AnonauditError(f"intact: lookahead must be between 1 and 20, got {lookahead!r}")
        if batch < 1:
            raise AnonauditError(f"intact: batch must be at least 1, got {batch!r}")
        if detector is not None:
            try:
                registry.get("detector", detector)
            except AnonauditError as exc:
                raise AnonauditError(f"intact: detector: {exc}") from None
        self._counts: dict[str, dict[str, Any]] = {}

    def warnings(self, name: str) -> list[str]:
        """The self-check's warnings on release ``name`` (:mod:`defenders.selfcheck`)."""
        return list(self._counts.get(name, {}).get("self_check", {}).get("warnings", []))

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        if self._counts:
            out["counts"] = {k: {**v, **({"chosen_rank": dict(sorted(v["chosen_rank"].items(), key=lambda kv: int(kv[0])))}
                                         if "chosen_rank" in v else {})}
                             for k, v in self._counts.items()}
        return out

    # ------------------------------------------------------------------ spans

    def _spans(self, corpus: Corpus) -> dict[str, list[Span]]:
        if self.detector is None:
            missing = [doc.id for doc in corpus if not doc.spans]
            if missing:
                more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
                raise AnonauditError(
                    f"intact: document {missing[0]!r}{more} has no spans to sanitize: give annotated documents "
                    "or detector=spacy_ner")
            found = {doc.id: list(doc.spans) for doc in corpus}
        else:
            det = registry.create("detector", self.detector).use(resources_of(self))
            found = dict(zip(corpus.ids, det.detect([doc.text for doc in corpus])))
        wanted = None if self.labels is None else {x.upper() for x in self.labels}
        return {doc_id: [Span(s.start, s.end, s.label, s.entity_id, s.identifier_type) for s in spans
                         if wanted is None or (s.label or "").upper() in wanted]
                for doc_id, spans in found.items()}

    def _entities(self, doc: Document, spans: list[Span]) -> list[_Entity]:
        kept, _ = outermost(spans)
        entities: dict[str, _Entity] = {}
        for span in kept:
            text = doc.text[span.start:span.end]
            key = f"id:{span.entity_id}" if span.entity_id else f"text:{' '.join(text.lower().split())}"
            ent = entities.get(key)
            if ent is None:
                entities[key] = _Entity(key, span.label or "", [span], text)
            else:
                ent.mentions.append(span)
        return list(entities.values())

    def _fallback(self, label: str) -> str:
        return fill_template(self.template, {"label": (label or "REDACTED").upper()})

    # ------------------------------------------------------------------ candidates

    def _schema(self, n: int) -> dict[str, Any] | None:
        structured = self.structured
        if structured is None:
            structured = bool(getattr(self._get_llm(), "supports_schema", False))
        if not structured:
            return None
        return {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": n, "maxItems": n}

    def candidate_request(self, sentence: str, label: str) -> ChatRequest:
        """The request for the generalisations of the span marked ``[[...]]`` in ``sentence``."""
        m = self.candidates
        example = (CANDIDATE_EXAMPLE_ANSWER * (1 + m // len(CANDIDATE_EXAMPLE_ANSWER)))[:m]
        messages = [
            {"role": "system", "content": CANDIDATE_SYSTEM.format(m=m)},
            {"role": "user", "content": CANDIDATE_EXAMPLE},
            {"role": "assistant", "content": json.dumps(example, ensure_ascii=False)},
            {"role": "user", "content": candidate_user(sentence, label)},
        ]
        return ChatRequest.make(messages, temperature=0.0, max_tokens=32 + 20 * m, seed=self.seed,
                                json_schema=self._schema(m), shared=(3,))

    def _sentence(self, text: str, bounds: list[tuple[int, int]], span: Span) -> str:
        inside = [(s, e) for s, e in bounds if s < span.end and span.start < e] or [(span.start, span.end)]
        lo, hi = min(s for s, _ in inside), max(e for _, e in inside)
        lo, hi = min(lo, span.start), max(hi, span.end)
        return (text[lo:span.start] + "[[" + text[span.start:span.end] + "]]" + text[span.end:hi]).strip()

    def _candidates(self, items: list[tuple[Document, list[_Entity]]], counts: dict[str, Any]) -> None:
        """Every entity's candidates: placeholders, date rules, and one request per other entity,
        the requests of all documents ``items`` in one batch."""
        placeholder_labels = {x.upper() for x in (self.placeholders or ())}
        asked: list[tuple[int, _Entity]] = []
        requests: list[ChatRequest] = []
        for k, (doc, entities) in enumerate(items):
            numbers: dict[str, int] = {}
            mine: list[_Entity] = []
            for ent in entities:
                label = ent.label.upper()
                if label in placeholder_labels:
                    numbers[label] = numbers.get(label, 0) + 1
                    ent.kind, ent.candidates = "placeholder", [f"{label}_{numbers[label]}"]
                    counts["placeholders"] += 1
                    continue
                if label in DATE_LABELS or not label:
                    rules = date_generalisations(ent.original)
                    if rules:
                        ent.kind, ent.candidates = "date", rules
                        counts["date_rules"] += 1
                        continue
                mine.append(ent)
            if mine:
                bounds = resources_of(self).spacy(disable=("ner",)).sentences(doc.text)
                for ent in mine:
                    ent.sentence = self._sentence(doc.text, bounds, ent.mentions[0])
                requests += [self.candidate_request(ent.sentence, ent.label) for ent in mine]
                asked += [(k, ent) for ent in mine]
        if not requests:
            return
        answers = self._get_llm().complete_batch(requests, progress=self.progress)
        counts["candidate_requests"] += len(requests)
        truth = TruthCheck(self._get_llm()) if self.check_truth else None
        # every original of the document, so that no candidate names another entity in clear
        # (a small model readily proposes a person of the same sentence for an organisation)
        others = {}
        for k, (doc, entities) in enumerate(items):
            others[k] = [re.compile(rf"(?<!\w){re.escape(o)}(?!\w)")
                         for o in {normalise(doc.text[s.start:s.end]) for e in entities for s in e.mentions} if o]
        for (k, ent), answer in zip(asked, answers):
            parsed = parse_guesses(answer)
            original = normalise(ent.original)
            kept = [c for c in parsed  # no candidate repeats the original, or any other original of the document
                    if original not in normalise(c) and not any(o.search(normalise(c)) for o in others[k])
                    and len(c.split()) <= MAX_CANDIDATE_WORDS]
            counts["dropped_candidates"] += len(parsed) - len(kept)
            ent.candidates = kept[:self.candidates]
            if truth is not None:  # a generalisation must stay true of the original
                ent.candidates = truth.keep(ent.original, ent.label, ent.sentence, ent.candidates, counts)
            if not parsed:
                counts["unparsable_candidates"] += 1

    # ------------------------------------------------------------------ selection

    def _render(self, doc: Document, entities: list[_Entity], testing: _Entity | None = None,
                candidate: str = "") -> tuple[str, Span | None]:
        """The document with every entity replaced (chosen, else most specific candidate, else the
        label; ``testing`` by ``candidate``) and the offsets of ``testing``'s first mention in it."""
        by_span: list[tuple[Span, str, bool]] = []
        for ent in entities:
            if ent is testing:
                repl = candidate
            elif ent.choice is not None:
                repl = ent.choice
            else:
                repl = ent.candidates[0] if ent.candidates else self._fallback(ent.label)
            for i, span in enumerate(ent.mentions):
                by_span.append((span, repl, ent is testing and i == 0))
        by_span.sort(key=lambda t: t[0].start)
        pieces, cursor, out_len, marked = [], 0, 0, None
        for span, repl, is_target in by_span:
            gap = doc.text[cursor:span.start]
            pieces += [gap, repl]
            out_len += len(gap)
            if is_target:
                marked = Span(out_len, out_len + len(repl), span.label)
            out_len += len(repl)
            cursor = span.end
        pieces.append(doc.text[cursor:])
        return "".join(pieces), marked

    def _select(self, items: list[tuple[Document, list[_Entity]]], counts: dict[str, Any],
                guesser: SpanGuesser | None, matcher: Matcher | None) -> None:
        """Every entity's choice. The attack goes through each document's entities in order (a
        choice changes what later questions show), the documents ``items`` side by side: each
        step asks about the next ``lookahead`` candidates of every document's current entity, in
        one batch (Algorithm 1 per document, whatever runs beside it)."""
        queues: list[list[_Entity]] = []
        for _doc, entities in items:
            queue = []
            for ent in entities:
                if ent.kind == "placeholder" or (ent.candidates and self.selection == "most_specific"):
                    ent.choice = ent.candidates[0]
                elif ent.candidates and self.selection == "least_specific":
                    ent.choice = ent.candidates[-1]
                elif ent.candidates:
                    queue.append(ent)
                    continue
                self._chosen(ent, counts)
            queues.append(queue)
        if not any(queues):
            return
        assert guesser is not None and matcher is not None
        offsets = [0] * len(items)
        with bar(total=sum(len(q) for q in queues), desc="intact attack", unit="entity", enabled=self.progress) as done:
            while any(queues):
                asks = []  # (document, entity, candidate, question)
                for k, ((doc, entities), queue) in enumerate(zip(items, queues)):
                    if queue:
                        ent = queue[0]
                        asks += [(k, ent, c, self._render(doc, entities, ent, c))
                                 for c in ent.candidates[offsets[k]:offsets[k] + self.lookahead]]
                answers = guesser.guess_many([question for *_, question in asks])
                counts["attack_requests"] += len(asks)
                safe: dict[int, str] = {}
                for (k, ent, candidate, _), guesses in zip(asks, answers):
                    if k in safe:
                        continue
                    if not guesses:
                        counts["unparsable_guesses"] += 1  # an attack answer we cannot read proves nothing: not safe
                    elif matcher.first_match(ent.original, guesses, ent.label or None) is None:
                        safe[k] = candidate
                for k, queue in enumerate(queues):
                    if not queue:
                        continue
                    ent = queue[0]
                    offsets[k] += self.lookahead
                    if k in safe or offsets[k] >= len(ent.candidates):
                        ent.choice = safe.get(k)
                        self._chosen(ent, counts)
                        queue.pop(0)
                        offsets[k] = 0
                        done.update(1)

    def _chosen(self, ent: _Entity, counts: dict[str, Any]) -> None:
        """Count ``ent``'s choice; none (every candidate risky, or none proposed): the label."""
        if ent.choice is None:
            ent.choice = self._fallback(ent.label)
            counts["fallbacks"] += 1
            counts["fallbacks_all_risky" if ent.candidates else "fallbacks_no_candidate"] += 1
        elif ent.kind != "placeholder":
            rank = str(ent.candidates.index(ent.choice) + 1)
            counts["chosen_rank"][rank] = counts["chosen_rank"].get(rank, 0) + 1

    # ------------------------------------------------------------------ sanitize

    def sanitize(self, corpus: Corpus, *, name: str | None = None) -> Release:
        name = name or self.name
        started = time.perf_counter()
        spans = self._spans(corpus)
        counts: dict[str, Any] = {"selection": self.selection, **dict.fromkeys(_COUNTS, 0), "chosen_rank": {}}
        guesser = matcher = None
        if self.selection == "attack":
            nlp = resources_of(self).spacy(disable=("parser", "ner"))
            matcher = corpus_matcher(corpus, self.frequent_lemmas, nlp)
            if matcher.nlp is None:
                matcher.nlp = nlp
            guesser = SpanGuesser(self._get_llm(), guesses=self.guesses, context_tokens=self.context_tokens,
                                  seed=self.seed, structured=self.structured, layout=self.layout)
        replaced: dict[str, list[Span]] = {}
        docs = list(corpus)
        checks, ner = [], resources_of(self).spacy()
        for lo in range(0, len(docs), self.batch):
            items = [(doc, self._entities(doc, spans.get(doc.id, []))) for doc in docs[lo:lo + self.batch]]
            for _doc, entities in items:
                counts["documents"] += 1
                counts["entities"] += len(entities)
                counts["mentions"] += sum(len(e.mentions) for e in entities)
            self._candidates(items, counts)
            self._select(items, counts, guesser, matcher)
            for doc, entities in items:
                replaced[doc.id] = [Span(s.start, s.end, s.label, s.entity_id, s.identifier_type, replacement=e.choice)
                                    for e in entities for s in e.mentions]
                asked = [e for e in entities if e.kind == "llm"]  # proposed: usable, truthful candidates
                checks.append(check_document(doc.text, [(s.start, s.end) for s in replaced[doc.id]],
                                             stop_words(ner.nlp), person=names_a_person(ner(doc.text)),
                                             proposed=sum(len(e.candidates) for e in asked) if asked else None))
        counts["llm_requests"] = counts["candidate_requests"] + counts["attack_requests"]
        counts["self_check"] = self_check(checks, what="replaced")
        self._counts[name] = counts
        self.record_timing(name, {"sanitize": time.perf_counter() - started})
        return sanitize_corpus(corpus, replaced, name=name, sanitizer=self.name, source=corpus.source)

