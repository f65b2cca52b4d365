"""The prompt-based anonymizer: ask, mask every occurrence, ask again (rounds)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from audit.core.data import Corpus, Document, Release, Span, apply_spans, sanitize_corpus
from audit.core.errors import AnonauditError
from audit.core.interfaces import Sanitizer
from audit.runtime.progress import bar
from audit.core.registry import register
from audit.models.llm import LLM, ChatRequest
from audit.models.resources import UsesLLM, resources_of
from defenders.prompt_anonymizer.prompts import FAMILIES, Family, PROMPTS, TERMS_SCHEMA, inference_messages
from defenders.prompt_anonymizer.parsing import covered, split_long, find_terms, pack_chunks, parse_terms
from defenders.prompt_anonymizer.validate import common_words, name_parts, person_names, proper_words, validate_terms
from defenders.selfcheck import check_document, names_a_person, self_check, stop_words

# =========================================================================== the sanitizer

@dataclass
class DocumentResult:
    """What the LLM proposed for one document and where it was masked (not released)."""

    terms: list[str]
    regions: list[tuple[int, int]]
    missing: list[str]
    rounds: int
    chunks: int
    proposed: int = 0  # distinct terms the model proposed (before validation)
    rejected: dict[str, list[str]] = field(default_factory=dict)  # by reason (validate=True)
    person: bool = False  # spaCy NER finds a person's name in the document


@register("sanitizer")
class PromptAnonymizer(UsesLLM, Sanitizer):
    """An LLM lists the terms to mask (one of four prompt families); every occurrence is masked."""

    name: ClassVar[str] = "prompt"
    llm_role: ClassVar[str] = "the anonymizing LLM"
    description: ClassVar[str] = (
        "Asks a language model which words of each document say something about the person it is about "
        "(one of four published prompt styles: mvm, sparks, student, ppdp), then masks every occurrence "
        "of those words with SENSITIVE. The ppdp prompt asks for every attribute, not only names, "
        "places and dates.")

    def __init__(self, family: Family = "ppdp", llm: str | LLM | None = None, replacement: str = "SENSITIVE",
                 chunk_tokens: int = 1500, rounds: int = 1, max_answer_tokens: int = 1024,
                 temperature: float = 0.0, seed: int = 0, structured: bool = True, batch: int = 32,
                 validate: bool = True, frequency_corpus: Corpus | None = None, cache: bool = True,
                 progress: bool = True):
        """
        family: the prompt family (mvm, sparks, student, ppdp).
        llm: the LLM that reads the documents (a spec, see ``anonaudit models list``, or an LLM object).
        replacement: what replaces every masked occurrence.
        chunk_tokens: longer documents are cut at sentence boundaries into chunks of at most this many tokens.
        rounds: rounds of asking; after the first, the model lists what the masked text still reveals.
        max_answer_tokens: the longest answer asked for.
        temperature: sampling temperature (0: greedy).
        seed: the seed of every request.
        structured: ask for a JSON array of strings through the backend's structured output when it has one.
        batch: documents asked about together (their requests go out at once: concurrently on a server, to the workers on a cluster); the same results whatever it is.
        validate: reject proposed terms that are stop words, punctuation, a single word found in most documents of the corpus, or absent from the document (off: mask whatever the model proposes, as the paper does).
        frequency_corpus: the documents whose word frequencies say which words are very common (default: the corpus sanitized; useful when sanitizing a few documents of a larger collection).
        cache: read and write the LLM answer cache.
        """
        if family not in FAMILIES:
            raise AnonauditError(f"prompt: family must be one of {', '.join(FAMILIES)}, got {family!r}")
        if chunk_tokens < 32:
            raise AnonauditError(f"prompt: chunk_tokens must be at least 32, got {chunk_tokens!r}")
        if rounds < 1:
            raise AnonauditError(f"prompt: rounds must be at least 1, got {rounds!r}")
        if max_answer_tokens < 1:
            raise AnonauditError(f"prompt: max_answer_tokens must be positive, got {max_answer_tokens!r}")
        if batch < 1:
            raise AnonauditError(f"prompt: batch must be at least 1, got {batch!r}")
        self.family = family
        self.llm = llm
        self.replacement = replacement
        self.chunk_tokens = chunk_tokens
        self.rounds = rounds
        self.max_answer_tokens = max_answer_tokens
        self.temperature = temperature
        self.seed = seed
        self.structured = structured
        self.batch = batch
        self.validate = validate
        if frequency_corpus is not None and not isinstance(frequency_corpus, Corpus):
            raise AnonauditError("prompt: frequency_corpus must be a loaded corpus (on the command line: "
                                 "--frequency-corpus FILE)")
        self.frequency_corpus = frequency_corpus
        self.cache = cache
        self.progress = progress
        self.counts: Counter[str] = Counter()
        self._common: frozenset[str] = frozenset()
        self._checks: dict[str, dict[str, Any]] = {}

    def stats(self) -> dict[str, Any]:
        """Timings, and counts of requests, approximate tokens, terms proposed and not found,
        repaired and unparsable answers (for the provenance, never a result)."""
        out = super().stats()
        if self.counts:
            out["counts"] = dict(sorted(self.counts.items()))
        if self._checks:
            out["self_check"] = {k: dict(v) for k, v in self._checks.items()}
        return out

    def warnings(self, name: str) -> list[str]:
        """The self-check's warnings on release ``name`` (:mod:`defenders.selfcheck`)."""
        return list(self._checks.get(name, {}).get("warnings", []))

    # ------------------------------------------------------------------ resources

    def sentences(self, text: str) -> list[tuple[int, int]]:
        """Sentence offsets (the run's shared spaCy pipeline)."""
        return resources_of(self).spacy().sentences(text)

    # ------------------------------------------------------------------ requests
    def messages(self, document: str, note: str = "") -> list[dict[str, str]]:
        return PROMPTS[self.family](document, note)

    def _request(self, messages: list[dict[str, str]]) -> ChatRequest:
        llm = self._get_llm()
        schema = TERMS_SCHEMA if self.structured and getattr(llm, "supports_schema", False) else None
        # what comes before the document (a family's instructions and example) is the same in
        # every request: evaluated once (shared)
        return ChatRequest.make(messages, temperature=self.temperature, max_tokens=self.max_answer_tokens,
                                seed=self.seed, json_schema=schema,
                                shared=(len(messages) - 1,) if len(messages) > 1 else ())

    def _count_tokens(self, text: str) -> int:
        count = getattr(self._get_llm(), "count_tokens", None)
        return int(count(text)) if callable(count) else max(1, len(text) // 4)

    def chunks(self, text: str) -> list[tuple[int, int]]:
        """Character ranges of the chunks of ``text`` (one when it fits in ``chunk_tokens``)."""
        budget = self.chunk_tokens
        if len(text) <= budget or self._count_tokens(text) <= budget:  # a token is at least a character
            return [(0, len(text))]
        pieces: list[tuple[int, int]] = []
        for s, e in self.sentences(text) or [(0, len(text))]:
            n = self._count_tokens(text[s:e])
            pieces.extend(split_long(text, s, e, -(-n // budget)) if n > budget else [(s, e)])
        return pack_chunks(pieces, lambda s, e: self._count_tokens(text[s:e]), budget, len(text))

    def _note(self, doc: Document, i: int, n: int) -> str:
        if n <= 1:
            return ""
        about = f" about the person identified as {doc.subject!r}" if doc.subject else ""
        return f"(This is part {i + 1} of {n} of a longer text{about}.)"

    def _ask(self, jobs: list[tuple[Document, str, bool]]) -> list[tuple[list[str], int]]:
        """One round for several documents (``(document, text to show, first round?)``): every
        chunk of every text in one batch; per document the pooled terms and its chunk count."""
        reqs: list[ChatRequest] = []
        owner: list[int] = []
        n_chunks: list[int] = []
        for j, (doc, text, first) in enumerate(jobs):
            texts = [chunk for chunk in (text[s:e].strip() for s, e in self.chunks(text)) if chunk]
            n_chunks.append(len(texts))
            for i, chunk in enumerate(texts):
                note = self._note(doc, i, len(texts))
                msgs = self.messages(chunk, note) if first else inference_messages(chunk, self.replacement, note)
                reqs.append(self._request(msgs))
                owner.append(j)
        answers = self._get_llm().complete_batch(reqs, progress=self.progress) if reqs else []
        terms: list[list[str]] = [[] for _ in jobs]
        for req, answer, j in zip(reqs, answers, owner):
            found, how = parse_terms(answer)
            self.counts["requests"] += 1
            self.counts["prompt_tokens_approx"] += sum(len(c) for _, c in req.messages) // 4
            self.counts["answer_tokens_approx"] += len(answer) // 4
            if how != "json":
                self.counts[f"answers_{how}"] += 1
            terms[j].extend(found)
        return list(zip(terms, n_chunks))

    def anonymize(self, doc: Document) -> DocumentResult:
        """The terms the LLM proposes for ``doc`` and the regions of ``doc.text`` they mask."""
        return self.anonymize_many([doc])[0]

    def anonymize_many(self, docs: list[Document]) -> list[DocumentResult]:
        """:meth:`anonymize` for several documents, their requests of each round sent together
        (concurrently on a server, to the workers on a cluster). The same results: every request
        is answered on its own."""
        results: list[DocumentResult | None] = [None] * len(docs)
        live = []
        for k, doc in enumerate(docs):
            self.counts["documents"] += 1
            if doc.text.strip():
                live.append(k)
            else:  # nothing to ask about
                results[k] = DocumentResult([], [], [], 0, 0)
        state: dict[int, DocumentResult] = {}
        parsed = {k: resources_of(self).spacy()(docs[k].text) for k in live}
        stops = stop_words(resources_of(self).spacy().nlp)
        for k, (proposed, n_chunks) in zip(live, self._ask([(docs[k], docs[k].text, True) for k in live])):
            pool = list(dict.fromkeys(t.strip() for t in proposed if t.strip()))
            self.counts["terms_proposed"] += len(pool)
            if not pool:
                self.counts["documents_nothing_proposed"] += 1
            st = state[k] = DocumentResult([], [], [], 1, n_chunks, len(pool), person=names_a_person(parsed[k]))
            self._admit(docs[k].text, st, pool, stops, parsed[k])
        active = list(live)
        for _ in range(1, self.rounds):
            if not active:
                break
            masked = [apply_spans(docs[k], self._spans(state[k].regions)).text for k in active]
            still = []
            for k, (more, _n) in zip(active, self._ask([(docs[k], m, False) for k, m in zip(active, masked)])):
                st = state[k]
                st.rounds += 1
                new = [t for t in dict.fromkeys(t.strip() for t in more if t.strip()) if t not in st.terms]
                self.counts["terms_proposed"] += len(new)
                st.proposed += len(new)
                before = covered(st.regions)
                self._admit(docs[k].text, st, new, stops, parsed[k])
                if covered(st.regions) > before:  # something new masked: ask again
                    still.append(k)
            active = still
        for k in live:
            st = state[k]
            self.counts["terms_not_found"] += len(st.missing)
            for why, terms in st.rejected.items():
                self.counts[f"rejected_{why}"] += len(terms)
            self.counts["chunks"] += st.chunks
            self.counts["rounds"] += st.rounds
            results[k] = st
        return [r for r in results if r is not None]

    def _admit(self, text: str, st: DocumentResult, new: list[str], stops: frozenset[str], parsed: Any) -> None:
        """Add the proposed terms ``new`` to ``st`` (validated first when :attr:`validate`, with
        the words of a person's name they overlap): its terms, the regions of ``text`` they mask
        and the terms found nowhere (``parsed``: ``text`` parsed by spaCy)."""
        if self.validate:
            kept, rejected = validate_terms(text, new, stops, self._common, proper_words(parsed))
            for why, terms in rejected.items():
                st.rejected.setdefault(why, []).extend(terms)
            missing = rejected["not_found"]
            parts = [w for w in name_parts(kept, person_names(parsed), stops) if w not in st.terms and w not in kept]
            self.counts["name_parts_added"] += len(parts)
            kept += parts
        else:
            kept, missing = new, find_terms(text, new)[1]
        st.terms += [t for t in kept if t not in st.terms]
        st.missing += missing
        st.regions = find_terms(text, st.terms)[0]

    def _spans(self, regions: Iterable[tuple[int, int]]) -> list[Span]:
        return [Span(s, e, replacement=self.replacement) for s, e in regions]

    def sanitize(self, corpus: Corpus, *, name: str | None = None) -> Release:
        started = time.perf_counter()
        spans: dict[str, list[Span]] = {}
        docs = list(corpus)
        reference = self.frequency_corpus if self.frequency_corpus is not None else docs
        self._common = common_words(d.text for d in reference) if self.validate else frozenset()
        stops = stop_words(resources_of(self).spacy().nlp)
        checks = []
        with bar(total=len(docs), desc=f"prompt ({self.family})", unit="doc", enabled=self.progress) as done:
            for i in range(0, len(docs), self.batch):
                group = docs[i:i + self.batch]
                for doc, result in zip(group, self.anonymize_many(group)):
                    spans[doc.id] = self._spans(result.regions)
                    asked = result.proposed if doc.text.strip() else None
                    checks.append(check_document(doc.text, result.regions, stops, proposed=asked,
                                                 person=result.person))
                done.update(len(group))
        name = name or self.name
        self._checks[name] = self_check(checks, what="masked")
        self.record_timing(name, {"sanitize": time.perf_counter() - started})
        return sanitize_corpus(corpus, spans, name=name, sanitizer=self.name, source=corpus.source)
