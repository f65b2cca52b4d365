"""Prompt-based LLM anonymization: an LLM names the terms to mask, every occurrence is masked.

The four prompt families compared in the LLM-anonymization paper (``shared/papers``,
section 3), each kept to its structure, with wording of our own:

* ``mvm`` (after "Man vs the machine") — system + user, zero-shot: every token that can be
  connected to the person described (all of their attributes);
* ``sparks`` (after "Sparks of AGI") — user only, zero-shot: the eight PII types with a
  description each, the text marked as a STATEMENT;
* ``student`` (after "Student de-identification") — user only, one-shot: a short list of
  NER-like PII types of a de-identification task and one worked example inside the message;
* ``ppdp`` (the paper's own prompt, the default) — system + user + an example answer from the
  assistant (one-shot), then the document: every attribute of the person, not only named
  entities, every occurrence, the text marked as TEXT.

Each family asks for a JSON list of strings; where the backend enforces JSON schemas the list
is also asked for as one (an array of strings), and answers are parsed tolerantly either way
(:func:`parse_terms`: JSON, a Python-style list, a list cut off by the token limit, bullets).
Terms that do not occur in the document are counted and ignored: no offset is ever invented.
Masking (:func:`find_terms`) is case-insensitive and word-bounded ("Ann" never masks "Annex"),
longest match first; a shorter match inside a kept one is dropped, one that crosses a kept one
widens it to their union (so no character of a proposed term stays visible); every occurrence is
replaced by ``replacement`` ("SENSITIVE", as in the paper) and recorded on the released document
(offsets in the sanitized text, the original text and its offsets) like every sanitizer here.
Recorded spans carry no label: the LLM gives no type (an attack that wants one, such as
``span_guess``, labels them with NER).

How chunking changes the method. The paper sends each document whole. A document longer than
``chunk_tokens`` tokens (the LLM's ``count_tokens``; the base estimate is ~4 characters a token)
is cut at spaCy sentence boundaries into chunks within that budget (a sentence longer than the
budget is cut between words), and each chunk is asked about on its own, with a note saying it is
part i of n of a longer text (and about which subject, when the document has a ``subject``).
The terms of all chunks are pooled and masked over the whole document, so a term found in one
chunk is masked in every chunk. What is lost: the model no longer sees the whole document at
once, so an attribute that reads as personal only together with a distant sentence can be
missed, and a chunk without the person's name may look impersonal. Documents within the budget
get exactly the family's prompt, with no note.

Iterative variant (``rounds > 1``, not in the paper): after masking, the same model reads the
masked text as an adversary would and lists the words still in it that reveal something about
the person; those are masked too (over the original, pooled with the earlier terms), until
``rounds`` rounds were run or a round masks no new character.

All requests of one document's chunks (per round) go to the LLM in one ``complete_batch``,
seeded with ``seed`` and cached by the run's answer cache, so a re-run asks nothing again.
:meth:`PromptAnonymizer.stats` counts requests, approximate prompt/answer tokens (characters / 4),
terms proposed, terms not found in the text, repaired and unparsable answers.
"""

from __future__ import annotations

import ast
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from audit.core.data import Corpus, Document, Release, Span, apply_spans, sanitize_corpus
from audit.core.errors import AnonauditError
from audit.core.interfaces import Sanitizer
from audit.core.progress import bar
from audit.core.registry import register
from audit.models.llm import LLM, ChatRequest, extract_json_list
from audit.models.resources import resources_of

Family = Literal["mvm", "sparks", "student", "ppdp"]
FAMILIES: tuple[str, ...] = ("mvm", "sparks", "student", "ppdp")

#: JSON schema of every answer: a list of strings.
TERMS_SCHEMA: dict[str, Any] = {"type": "array", "items": {"type": "string"}}


# =========================================================================== prompts
# One small function per family: (document, note) -> messages. ``note`` is empty unless the
# document was split into chunks (then it says which part this is, and about whom).

def _with_note(note: str, text: str) -> str:
    return f"{note}\n{text}" if note else text


def mvm_messages(document: str, note: str = "") -> list[dict[str, str]]:
    """Zero-shot, system + user: every token linked to the person (all attributes)."""
    return [
        {"role": "system", "content": "You are a concise assistant. Answer briefly and never explain."},
        {"role": "user", "content": (
            "Find every token (words, dates and numbers included) of the person description below that "
            "could be tied to the person it describes, so that the text would be anonymous once those "
            "tokens are taken out. Answer with a JSON list of these tokens. "
            + (f"{note} " if note else "") + f"Person description: {document}")},
    ]


_SPARKS_TYPES = (
    "a. names of people, with nicknames, aliases, user names and initials;",
    "b. numbers and codes that single something out: social security, telephone, passport or licence "
    "plate numbers and the like;",
    "c. places: towns, districts, regions, countries, and named infrastructure such as stations, "
    "bridges or stops;",
    "d. names of organisations: firms, schools and universities, public bodies, prisons, hospitals, "
    "charities, churches and so on;",
    "e. demographic traits: mother tongue, origin, ethnicity, job title, rank, education, looks, "
    "medical diagnosis, distinguishing marks, age;",
    "f. a particular date (such as 3 October 2018), time of day (such as 9:48 AM) or duration (such "
    "as 18 years);",
    "g. a meaningful quantity, such as a percentage or a sum of money;",
    "h. anything else that describes an individual and fits none of the types above.",
)


def sparks_messages(document: str, note: str = "") -> list[dict[str, str]]:
    """Zero-shot, user only: the eight PII types with descriptions; the text is a STATEMENT."""
    types = "\n".join(f"   {t}" for t in _SPARKS_TYPES)
    return [{"role": "user", "content": (
        "INSTRUCTIONS:\n"
        "1. In the statement given below (marked STATEMENT), find all personally identifiable "
        f"information. It covers:\n{types}\n"
        "2. Give this personally identifiable information as a JSON list of strings.\n\n"
        "TASK:\n" + _with_note(note, f'STATEMENT = """{document}"""'))}]


_STUDENT_EXAMPLE = (
    "Hi all, I made a Discord server for our study group, join here: https://discord.gg/k7Qm2xZp. "
    "We will go through the weekly problem sets of 'Statistics for Data Science' together every "
    "Thursday evening, in English. Anyone taking the course is welcome, hope to see you there!"
)
_STUDENT_ANSWER = ["https://discord.gg/k7Qm2xZp"]


def student_messages(document: str, note: str = "") -> list[dict[str, str]]:
    """One-shot, user only: NER-like PII types of a de-identification task and one example."""
    return [{"role": "user", "content": (
        "Give a JSON list of the personally identifiable information (PII) in the text you are given: "
        "names, company names, where people come from, where they live now, addresses and social media "
        "links. If the text has no PII, give an empty list.\n\n"
        f"For instance, for this input:\n\n{_STUDENT_EXAMPLE}\n\n"
        f"the output has to be:\n\n{json.dumps(_STUDENT_ANSWER)}\n\n"
        "Now do the same for this text:\n" + _with_note(note, document))}]


_PPDP_EXAMPLE = (
    "Colleagues say that Maria Keller was a better mentor than researcher. Her former student Novak "
    "credits Keller's supervision for his 2011 prize nomination. Keller left Uppsala University "
    "abruptly in 2015, and nobody knows why."
)
_PPDP_ANSWER = ["Maria Keller", "mentor", "researcher", "student", "Novak", "Keller's", "supervision",
                "2011", "prize nomination", "Keller", "left", "Uppsala University", "abruptly", "2015",
                "nobody knows why"]


def ppdp_messages(document: str, note: str = "") -> list[dict[str, str]]:
    """One-shot, system + user + example answer: every attribute (not only named entities),
    every occurrence, the text marked as TEXT."""
    task = (
        "Find every text span (words, dates and numbers included) of the TEXT below that gives an "
        "attribute of the person it is about. Answer with a JSON list of those spans, each copied "
        "verbatim from TEXT (formatting included). Be sure to list every occurrence of such spans, "
        "and also their synonyms, related words, variants and more specific forms. Do not stop at "
        "named entities: any span at all can be an attribute.\n\n"
    )
    return [
        {"role": "system", "content": "You are an expert assistant. Give no explanations, and make your "
                                      "answers as long as they need to be."},
        {"role": "user", "content": f"{task}TEXT:\n{_PPDP_EXAMPLE}"},
        {"role": "assistant", "content": json.dumps(_PPDP_ANSWER)},
        {"role": "user", "content": _with_note(note, f"TEXT:\n{document}")},
    ]


PROMPTS: dict[str, Callable[[str, str], list[dict[str, str]]]] = {
    "mvm": mvm_messages, "sparks": sparks_messages, "student": student_messages, "ppdp": ppdp_messages,
}


def inference_messages(masked: str, replacement: str, note: str = "") -> list[dict[str, str]]:
    """The iterative rounds' question: what does the masked text still give away?"""
    how = (f"some words were replaced by {replacement}" if replacement.strip()
           else "some words were deleted")
    return [
        {"role": "system", "content": "You are an expert in re-identifying people from anonymized texts. "
                                      "Give no explanations."},
        {"role": "user", "content": (
            f"In the TEXT below, {how} to anonymize it. Read it as an adversary would: what can you "
            "still infer about the person it is about? Answer with a JSON list of the words and phrases, "
            "copied verbatim from TEXT, that still reveal or hint at who the person is or describe them. "
            "Answer [] if nothing is left.\n\n" + _with_note(note, f"TEXT:\n{masked}"))},
    ]


# =========================================================================== parsing

_JSON_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_BULLET = re.compile(r"^\s*(?:[-*•–+]|\d{1,3}[.)])\s+(.+?)\s*$")
_KEYS = ("text", "term", "span", "value", "pii", "entity", "word")
_QUOTES = "\"'“”‘’`"


def _flatten(items: Iterable[Any]) -> list[str]:
    out: list[str] = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, (int, float)):
            out.append(str(item))
        elif isinstance(item, (list, tuple)):
            out.extend(_flatten(item))
        elif isinstance(item, dict):
            value = next((item[k] for k in _KEYS if isinstance(item.get(k), str)), None)
            if value is None:
                value = next((v for v in item.values() if isinstance(v, str)), None)
            if value is not None:
                out.append(value)
    return out


def parse_terms(answer: str) -> tuple[list[str], str]:
    """The terms in an LLM answer and how they were read: ``"json"`` (a JSON list, maybe inside
    chatter or an object), ``"repaired"`` (a Python-style list, a JSON list cut off by the token
    limit, bulleted or numbered lines) or ``"unparsable"`` (nothing read; the terms are ``[]``)."""
    found = extract_json_list(answer)
    if found is not None:
        return _flatten(found), "json"
    start, end = answer.find("["), answer.rfind("]")
    if 0 <= start < end:
        try:
            literal = ast.literal_eval(answer[start:end + 1])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            literal = None
        if isinstance(literal, (list, tuple)):
            return _flatten(literal), "repaired"
    if start >= 0:  # a JSON list cut off by the token limit: keep its complete strings
        items = []
        for m in _JSON_STRING.finditer(answer, start):
            try:
                items.append(json.loads(f'"{m.group(1)}"'))
            except ValueError:
                continue
        if items:
            return items, "repaired"
    bullets = [m.group(1) for m in map(_BULLET.match, answer.splitlines()) if m]
    if bullets:
        return [b.strip(_QUOTES + " ,") for b in bullets], "repaired"
    return [], "unparsable"


# =========================================================================== masking

def _pattern(term: str) -> re.Pattern[str] | None:
    words = term.split()
    if not words:
        return None
    body = r"\s+".join(re.escape(w) for w in words)
    body = re.sub(r"(?:'|’)", "['’]", body)  # either apostrophe (re.escape leaves both alone)
    left = r"(?<!\w)" if re.match(r"\w", term[0]) else ""
    right = r"(?!\w)" if re.match(r"\w", term[-1]) else ""
    return re.compile(left + body + right, re.IGNORECASE)


def _variants(term: str) -> list[str]:
    """The term as given, then without enclosing quotes and trailing punctuation."""
    term = term.strip()
    cleaned = term.strip(_QUOTES).strip().rstrip(".,;:").strip()
    return [t for t in dict.fromkeys((term, cleaned)) if t and any(c.isalnum() for c in t)]


def find_terms(text: str, terms: Iterable[str]) -> tuple[list[tuple[int, int]], list[str]]:
    """Where the terms occur in ``text``: regions to mask (sorted, disjoint) and the terms that
    occur nowhere (as given). Case-insensitive, word-bounded, every occurrence; longest match first,
    a match inside a kept region is dropped and one crossing it widens it to their union."""
    matches: set[tuple[int, int]] = set()
    missing: list[str] = []
    for term in dict.fromkeys(t for t in terms if isinstance(t, str)):
        hits: list[tuple[int, int]] = []
        for variant in _variants(term):
            pattern = _pattern(variant)
            hits = [m.span() for m in pattern.finditer(text) if m.end() > m.start()] if pattern else []
            if hits:
                break
        if hits:
            matches.update(hits)
        elif term.strip():
            missing.append(term)
    kept: list[list[int]] = []
    for s, e in sorted(matches, key=lambda m: (-(m[1] - m[0]), m[0])):
        touching = [k for k in kept if s < k[1] and k[0] < e]
        if not touching:
            kept.append([s, e])
            continue
        if len(touching) == 1 and touching[0][0] <= s and e <= touching[0][1]:
            continue  # inside a longer match
        merged = [min([s] + [k[0] for k in touching]), max([e] + [k[1] for k in touching])]
        kept = [k for k in kept if k not in touching] + [merged]
    return sorted((s, e) for s, e in kept), missing


def _covered(regions: Iterable[tuple[int, int]]) -> set[int]:
    return {i for s, e in regions for i in range(s, e)}


# =========================================================================== chunking

def pack_chunks(sentences: Sequence[tuple[int, int]], count: Callable[[int, int], int], budget: int,
                text_length: int) -> list[tuple[int, int]]:
    """Consecutive sentences packed into chunks of at most ``budget`` tokens (``count(start, end)``);
    chunks cover the text from 0 to ``text_length`` with no gap, cut where sentences start."""
    chunks: list[tuple[int, int]] = []
    start, used = 0, 0
    cuts = [s for s, _ in sentences][1:] + [text_length]
    prev = 0
    for cut in cuts:
        size = count(prev, cut)
        if used and used + size > budget:
            chunks.append((start, prev))
            start, used = prev, 0
        used += size
        prev = cut
    chunks.append((start, text_length))
    return [c for c in chunks if c[1] > c[0]]


def _split_long(text: str, start: int, end: int, pieces: int) -> list[tuple[int, int]]:
    """[start, end) cut between words into about ``pieces`` parts of similar length."""
    out, lo = [], start
    step = max(1, (end - start) // max(1, pieces))
    while end - lo > step:
        cut = text.rfind(" ", lo + 1, lo + step)
        cut = cut if cut > lo else lo + step
        out.append((lo, cut))
        lo = cut
    out.append((lo, end))
    return out


# =========================================================================== the sanitizer

@dataclass
class DocumentResult:
    """What the LLM proposed for one document and where it was masked (not released)."""

    terms: list[str]
    regions: list[tuple[int, int]]
    missing: list[str]
    rounds: int
    chunks: int


@register("sanitizer")
class PromptAnonymizer(Sanitizer):
    """An LLM lists the terms to mask (one of four prompt families); every occurrence is masked."""

    name: ClassVar[str] = "prompt"
    description: ClassVar[str] = (
        "Asks a language model which words of each document say something about the person it is about "
        "(one of four published prompt styles: mvm, sparks, student, ppdp), then masks every occurrence "
        "of those words with SENSITIVE. The ppdp prompt asks for every attribute, not only names, "
        "places and dates.")

    def __init__(self, family: Family = "ppdp", llm: str | LLM | None = None, replacement: str = "SENSITIVE",
                 chunk_tokens: int = 1500, rounds: int = 1, max_answer_tokens: int = 1024,
                 temperature: float = 0.0, seed: int = 0, structured: bool = True, cache: bool = True,
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
        self.family = family
        self.llm = llm
        self.replacement = replacement
        self.chunk_tokens = chunk_tokens
        self.rounds = rounds
        self.max_answer_tokens = max_answer_tokens
        self.temperature = temperature
        self.seed = seed
        self.structured = structured
        self.cache = cache
        self.progress = progress
        self._llm: LLM | None = None
        self.counts: Counter[str] = Counter()

    def stats(self) -> dict[str, Any]:
        """Timings, and counts of requests, approximate tokens, terms proposed and not found,
        repaired and unparsable answers (for the provenance, never a result)."""
        out = super().stats()
        if self.counts:
            out["counts"] = dict(sorted(self.counts.items()))
        return out

    # ------------------------------------------------------------------ resources
    def _get_llm(self) -> LLM:
        if self._llm is None:
            self._llm = resources_of(self).llm(self.llm, cache=self.cache, what="the anonymizing LLM")
        return self._llm

    def close(self) -> None:
        self._llm = None
        super().close()

    def sentences(self, text: str) -> list[tuple[int, int]]:
        """Sentence offsets (the run's shared spaCy pipeline)."""
        return resources_of(self).spacy().sentences(text)

    # ------------------------------------------------------------------ requests
    def messages(self, document: str, note: str = "") -> list[dict[str, str]]:
        return PROMPTS[self.family](document, note)

    def _request(self, messages: list[dict[str, str]]) -> ChatRequest:
        llm = self._get_llm()
        schema = TERMS_SCHEMA if self.structured and getattr(llm, "supports_schema", False) else None
        return ChatRequest.make(messages, temperature=self.temperature, max_tokens=self.max_answer_tokens,
                                seed=self.seed, json_schema=schema)

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
            pieces.extend(_split_long(text, s, e, -(-n // budget)) if n > budget else [(s, e)])
        return pack_chunks(pieces, lambda s, e: self._count_tokens(text[s:e]), budget, len(text))

    def _note(self, doc: Document, i: int, n: int) -> str:
        if n <= 1:
            return ""
        about = f" about the person identified as {doc.subject!r}" if doc.subject else ""
        return f"(This is part {i + 1} of {n} of a longer text{about}.)"

    def _ask(self, doc: Document, text: str, first: bool) -> tuple[list[str], int]:
        """One round for one document: every chunk of ``text`` in one batch; the pooled terms."""
        ranges = self.chunks(text)
        texts = [chunk for chunk in (text[s:e].strip() for s, e in ranges) if chunk]
        reqs = []
        for i, chunk in enumerate(texts):
            note = self._note(doc, i, len(texts))
            msgs = self.messages(chunk, note) if first else inference_messages(chunk, self.replacement, note)
            reqs.append(self._request(msgs))
        answers = self._get_llm().complete_batch(reqs)
        terms: list[str] = []
        for req, answer in zip(reqs, answers):
            found, how = parse_terms(answer)
            self.counts["requests"] += 1
            self.counts["prompt_tokens_approx"] += sum(len(c) for _, c in req.messages) // 4
            self.counts["answer_tokens_approx"] += len(answer) // 4
            if how != "json":
                self.counts[f"answers_{how}"] += 1
            terms.extend(found)
        return terms, len(texts)

    def anonymize(self, doc: Document) -> DocumentResult:
        """The terms the LLM proposes for ``doc`` and the regions of ``doc.text`` they mask."""
        self.counts["documents"] += 1
        if not doc.text.strip():  # nothing to ask about
            return DocumentResult([], [], [], 0, 0)
        proposed, n_chunks = self._ask(doc, doc.text, first=True)
        pool = list(dict.fromkeys(t.strip() for t in proposed if t.strip()))
        regions, missing = find_terms(doc.text, pool)
        self.counts["terms_proposed"] += len(pool)
        rounds = 1
        while rounds < self.rounds:
            masked = apply_spans(doc, self._spans(regions)).text
            more, _ = self._ask(doc, masked, first=False)
            rounds += 1
            new = [t for t in dict.fromkeys(t.strip() for t in more if t.strip()) if t not in pool]
            self.counts["terms_proposed"] += len(new)
            grown, grown_missing = find_terms(doc.text, pool + new)
            pool += new
            if _covered(grown) <= _covered(regions):
                missing = grown_missing
                break
            regions, missing = grown, grown_missing
        self.counts["terms_not_found"] += len(missing)
        self.counts["chunks"] += n_chunks
        self.counts["rounds"] += rounds
        return DocumentResult(pool, regions, missing, rounds, n_chunks)

    def _spans(self, regions: Iterable[tuple[int, int]]) -> list[Span]:
        return [Span(s, e, replacement=self.replacement) for s, e in regions]

    def sanitize(self, corpus: Corpus, *, name: str | None = None) -> Release:
        started = time.perf_counter()
        spans: dict[str, list[Span]] = {}
        for doc in bar(corpus, desc=f"prompt ({self.family})", unit="doc", enabled=self.progress):
            spans[doc.id] = self._spans(self.anonymize(doc).regions)
        name = name or self.name
        self.record_timing(name, {"sanitize": time.perf_counter() - started})
        return sanitize_corpus(corpus, spans, name=name, sanitizer=self.name, source=corpus.source)
