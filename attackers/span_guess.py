"""Span guessing: can an LLM guess back what a sanitizer replaced?

The inference attack of INTACT (Pilán et al., section 3.2): the adversary reads the
sanitized document, knows which spans were replaced or masked, and asks an
instruction-tuned LLM for ``p`` guesses of the original words of each span, given
the replacement and the rest of the document. A span is *recovered* when one of
the guesses MATCHes the original. It measures whether a generalisation such as
"a European capital" still gives "Warsaw" away.

Three reusable pieces (INTACT's candidate selection reuses the first two):

* :class:`SpanGuesser` — builds the one-shot prompt (the target span marked
  ``[[...]]`` in the document, the context trimmed around it to fit the model),
  asks for a JSON array of ``p`` strings (enforced by the backend where it can be),
  and parses lists in any common format as the fallback (:func:`parse_guesses`);
* :class:`Matcher` / :func:`match` / :func:`match_reason` — the MATCH function;
* :class:`SpanGuessAttack` — the registered attack: spans from the release (its
  recorded replacements, else an alignment with the original), a seeded sample,
  recovery rate overall and per entity label with Wilson intervals, beside a
  naive context-free baseline.

MATCH, as implemented here (lowercased throughout; a guess matches when a rule fires):

``exact``      the whole guess equals the whole original (after trimming punctuation);
``date``       for dates: the guess has every lemma of the original and no other number,
               so "August 2003" does not recover "3 August 2003" (the paper asks for
               identical lemma sets; a guess adding words, "seven years' imprisonment"
               for "seven years", counts here). Numbers keep their value: "03" = "3rd";
``lemma``      the content lemmas overlap: stop words, punctuation and the most frequent
               lemmas of the corpus are left out (numbers are kept, unlike the paper, so
               codes and quantities can match);
``acronym``    the first letters of two or more title-cased words, joined, are added as a
               lemma on both sides ("European Court of Human Rights" ~ "ECHR");
``substring``  a content lemma longer than 3 characters contains another ("Yalman" in
               "Yalmanoglu");
``ngram``      for named entities only, the content lemmas share a character 4-gram
               ("Turkey" ~ "Turkish").

An original made only of stop words and punctuation cannot be matched.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import random
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from audit.core.align import UNKNOWN, replaced_spans
from audit.core.data import Span
from audit.core.errors import AnonauditError
from audit.core.files import atomic_write
from audit.core.interfaces import Attack
from audit.models.llm import LLM, ChatRequest, extract_json_list
from audit.models.resources import resources_of
from audit.core.registry import register
from audit.core.results import Finding, Highlight, Result
from audit.core.stats import risk, success_rate

if TYPE_CHECKING:
    from audit.core.data import Release, Scenario
    from audit.models.nlp import Spacy

log = logging.getLogger(__name__)

#: Labels whose spans are dates (the strict all-lemmas rule applies).
DATE_LABELS = frozenset({"DATETIME", "DATE", "TIME"})
#: Labels of named entities (the character 4-gram rule applies). TAB and spaCy names.
NE_LABELS = frozenset({"PERSON", "PER", "ORG", "LOC", "GPE", "NORP", "DEM", "FAC", "MISC", "EVENT",
                       "PRODUCT", "WORK_OF_ART", "LAW", "LANGUAGE"})

_MONTHS = ("january february march april may june july august september october november december").split()
_MONTH_ABBR = {m[:3]: m for m in _MONTHS} | {"sept": "september"}
_NUMBER = re.compile(r"^0*(\d+)(?:st|nd|rd|th)?$")
_DATE_LIKE = re.compile(
    r"\b(?:" + "|".join(_MONTHS) + r")\b|\b(?:1[5-9]|20)\d\d\b|\b\d{1,2}[./-]\d{1,2}[./-]\d{2,4}\b", re.I)


# =========================================================================== MATCH


@dataclass(frozen=True)
class _Analysis:
    """What MATCH needs to know about one string."""

    norm: str  # lowercased, whitespace collapsed, outer punctuation trimmed
    content: frozenset[str]  # lemmas of alphanumeric non-stop tokens
    acronym: str | None  # first letters of >= 2 title-cased words
    titled: bool  # has a title-cased word (a named-entity hint when no label is known)


def _normalise(text: str) -> str:
    return " ".join(text.lower().split()).strip(" \t\n.,;:!?\"'“”‘’()[]{}")


def _lemma_key(lemma: str) -> str:
    lemma = lemma.lower()
    m = _NUMBER.match(lemma)
    if m:
        return m.group(1)
    return _MONTH_ABBR.get(lemma.rstrip("."), lemma)


def _is_unknown(label: str | None) -> bool:
    return not label or label == UNKNOWN


@dataclass
class Matcher:
    """The MATCH function, with the corpus' most frequent lemmas left out of overlaps.

    ``frequent`` is the set of excluded lemmas (see :meth:`from_corpus`); ``nlp`` a
    spaCy pipeline for lemmas (created lazily, without parser and NER). Analyses of
    strings are memoised, so matching thousands of guesses stays cheap.
    """

    frequent: frozenset[str] = frozenset()
    nlp: Spacy | None = None
    ngram: int = 4
    min_substring: int = 4
    _memo: dict[str, _Analysis] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_corpus(cls, texts: Iterable[str], *, top: int = 200, nlp: Spacy | None = None, **kw: Any) -> Matcher:
        """A matcher that ignores the ``top`` most frequent content lemmas of ``texts``.

        Stop words and punctuation are not counted (they are excluded anyway), so the
        set holds the corpus' own vocabulary: in court judgments "applicant", "court",
        "article". A guess sharing only such a word with the original does not count.
        """
        matcher = cls(nlp=nlp, **kw)
        if top > 0:
            counts: Counter[str] = Counter()
            for doc in matcher._spacy.pipe(texts, batch_size=16):
                counts.update(key for key, _ in _content_tokens(doc))
            matcher.frequent = frozenset(w for w, _ in counts.most_common(top))
        return matcher

    @property
    def _spacy(self) -> Spacy:
        if self.nlp is None:
            from audit.models.nlp import Spacy

            self.nlp = Spacy(disable=("parser", "ner"))
        return self.nlp

    # ------------------------------------------------------------------ analysis

    def analyse_many(self, texts: Iterable[str]) -> None:
        """Analyse (and memoise) many strings in one spaCy pass."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._memo))
        for text, doc in zip(todo, self._spacy.pipe(todo, batch_size=256)):
            self._memo[text] = _analysis_of(text, doc)

    def _analyse(self, text: str) -> _Analysis:
        found = self._memo.get(text)
        if found is None:
            found = self._memo[text] = _analysis_of(text, self._spacy(text))
        return found

    # ------------------------------------------------------------------ MATCH

    def is_date(self, original: str, label: str | None) -> bool:
        if label in DATE_LABELS:
            return True
        return _is_unknown(label) and bool(_DATE_LIKE.search(original))

    def is_named_entity(self, original: str, label: str | None) -> bool:
        if label in NE_LABELS:
            return True
        return _is_unknown(label) and self._analyse(original).titled and not self.is_date(original, label)

    def match_reason(self, original: str, guess: str, label: str | None = None) -> str | None:
        """The name of the first MATCH rule that fires (see the module doc), or ``None``."""
        o, g = self._analyse(original), self._analyse(guess)
        if not o.content or not (g.content or g.acronym):
            return None
        if o.norm == g.norm:
            return "exact"
        if self.is_date(original, label):
            # every lemma of the original is in the guess, and the guess names no other number:
            # "August 2003" does not recover "3 August 2003", "3 or 4 August 2003" neither,
            # but "seven years' imprisonment" recovers "seven years".
            numbers = {w for w in g.content if w.isdigit()} - o.content
            return "date" if o.content <= g.content and not numbers else None
        fo, fg = o.content - self.frequent, g.content - self.frequent
        if fo & fg:
            return "lemma"
        ao = fo | ({o.acronym} if o.acronym else set())
        ag = fg | ({g.acronym} if g.acronym else set())
        if ao & ag:
            return "acronym"
        n = self.min_substring
        if any(len(a) >= n and len(b) >= n and (a in b or b in a) for a in fo for b in fg):
            return "substring"
        if self.is_named_entity(original, label) and _ngrams(fo, self.ngram) & _ngrams(fg, self.ngram):
            return "ngram"
        return None

    def match(self, original: str, guess: str, label: str | None = None) -> bool:
        """Whether ``guess`` recovers ``original`` (a span of entity type ``label``)."""
        return self.match_reason(original, guess, label) is not None

    def first_match(self, original: str, guesses: Sequence[str], label: str | None = None) -> tuple[int, str] | None:
        """``(index, rule)`` of the first guess that matches, or ``None``."""
        for i, guess in enumerate(guesses):
            reason = self.match_reason(original, guess, label)
            if reason is not None:
                return i, reason
        return None


def _content_tokens(doc: Any) -> list[tuple[str, Any]]:
    """(lemma key, token) of every alphanumeric, non-stop token of a spaCy doc."""
    out = []
    for tok in doc:
        if tok.is_space or tok.is_punct or tok.is_stop or not any(c.isalnum() for c in tok.text):
            continue
        out.append((_lemma_key(tok.lemma_ or tok.text), tok))
    return out


def _analysis_of(text: str, doc: Any) -> _Analysis:
    content = frozenset(key for key, _ in _content_tokens(doc))
    titles = [tok.text[0].lower() for tok in doc if tok.is_alpha and tok.text.istitle()]
    return _Analysis(norm=_normalise(text), content=content,
                     acronym="".join(titles) if len(titles) >= 2 else None, titled=bool(titles))


def _ngrams(words: Iterable[str], n: int) -> set[str]:
    return {w[i:i + n] for w in words if len(w) >= n for i in range(len(w) - n + 1)}


@functools.lru_cache(maxsize=1)
def default_matcher() -> Matcher:
    """The matcher behind :func:`match` and :func:`match_reason`: no corpus frequencies.

    Created once per process on first use (loading spaCy takes seconds).
    """
    return Matcher()


def match(original: str, guess: str, label: str | None = None) -> bool:
    """Whether ``guess`` recovers ``original`` under the MATCH rules (no corpus frequencies)."""
    return default_matcher().match(original, guess, label)


def match_reason(original: str, guess: str, label: str | None = None) -> str | None:
    """Which MATCH rule recovers ``original`` from ``guess`` (``None``: no match)."""
    return default_matcher().match_reason(original, guess, label)


# =========================================================================== parsing

_FENCE = re.compile(r"```(?:json|python|text)?\s*(.*?)```", re.S | re.I)
_BULLET = re.compile(r"^\s*(?:[-*•–+]|\(?\d{1,2}[.):\]]|(?:guess|option|answer)\s*\d*\s*[:.)-])\s*", re.I)
_QUOTED = re.compile(r"\"([^\"\n]{1,200})\"|“([^”\n]{1,200})”")
_STRIP = " \t\"'“”‘’`*_[](),;."


def _clean(item: Any) -> str:
    if isinstance(item, dict):  # {"guess": "..."} and the like
        item = next((v for v in item.values() if isinstance(v, str)), "")
    text = str(item).strip()
    text = re.sub(r"^(?:guess|answer)\s*\d*\s*[:.-]\s*", "", text, flags=re.I)
    # trailing explanations: "Warsaw (the capital)" keeps "Warsaw"; "Warsaw - because ..." too
    text = re.split(r"\s+(?:-|–|—)\s+", text, maxsplit=1)[0]
    text = re.sub(r"\s+\([^()]*\)?$", "", text)
    return text.strip(_STRIP).strip()


def parse_guesses(text: str, limit: int | None = None) -> list[str]:
    """The guesses in an LLM answer, in order, without duplicates.

    Reads a JSON array (also inside a code fence or an object, with chatter around),
    numbered or bulleted lines, quoted strings, or a single comma- or
    semicolon-separated line; lines that introduce the list ("Here are my
    guesses:") are dropped.
    """
    fence = _FENCE.search(text)
    body = fence.group(1) if fence else text
    items: list[Any] | None = extract_json_list(body) or None  # [] reads as no JSON: try the lines
    if items is None:
        lines = [ln for ln in body.splitlines() if ln.strip()]
        bullets = [ln for ln in lines if _BULLET.match(ln)]
        if bullets:
            items = [_BULLET.sub("", ln, count=1) for ln in bullets]
        else:
            quoted = [a or b for a, b in _QUOTED.findall(body)]
            if len(quoted) >= 2:
                items = quoted
            else:
                kept = [ln for ln in lines if not ln.rstrip().endswith(":")]
                if len(kept) == 1:
                    line = re.sub(r"^[^:]{0,40}:\s*", "", kept[0]) if ":" in kept[0] else kept[0]
                    sep = ";" if ";" in line else ("," if "," in line else None)
                    items = line.split(sep) if sep else [line]
                else:
                    items = kept
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        guess = _clean(item)
        key = guess.lower()
        if guess and key not in seen:
            seen.add(key)
            out.append(guess)
    return out[:limit] if limit else out


# =========================================================================== guessing

_SYSTEM = (
    "You test whether a sanitized document still gives away what was hidden in it. One span of the "
    "document is marked with double square brackets [[...]]: the original words there were replaced by "
    "the text inside the brackets (a more general description, a placeholder or category label, or "
    "nothing at all if they were deleted). Using the replacement and everything else the document says, "
    "guess the original words of the marked span.\n"
    "Give exactly {p} different guesses, the most likely first. Each guess must be a concrete value that "
    "could have stood in the original text (a name, a place, an organisation, a number, a date...), not a "
    "description. For dates, always guess an exact date with the day, the month in letters and the year, "
    "for example \"3 September 1981\".\n"
    "Answer with a JSON array of {p} strings and nothing else."
)
_EXAMPLE_DOC = (
    "The applicant, PERSON_1, was born in 1962 and lives in [[a city in northern Italy]]. In March 2004 "
    "she was dismissed by ORG_1, the municipal transport company of her home town, after criticising its "
    "managers in an interview with Corriere della Sera, a daily newspaper published in the same city."
)
_EXAMPLE_SPAN = "a city in northern Italy"
_EXAMPLE_GUESSES = ["Milan", "Turin", "Bergamo", "Brescia", "Monza", "Como", "Varese", "Genoa", "Verona", "Pavia"]
_ELLIPSIS = "…"


def _user_message(context: str, replacement: str) -> str:
    return f"Document:\n{context}\n\nGuesses for [[{replacement}]] in this document:"


@dataclass
class SpanGuesser:
    """Asks an LLM for ``guesses`` guesses of the original words of a marked span.

    ``context_tokens`` caps the tokens of document context shown (``None``: as much as
    the model's context window allows after the instructions and the answer). The
    context is trimmed around the span, keeping it centred. ``structured`` asks the
    backend for a JSON array of exactly ``guesses`` strings (``None``: when the
    backend says it enforces schemas); answers are parsed tolerantly either way.
    Requests are deterministic (temperature 0 by default), so the LLM cache makes
    re-runs free.
    """

    llm: LLM
    guesses: int = 5
    context_tokens: int | None = None
    temperature: float = 0.0
    seed: int = 0
    structured: bool | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.guesses < 1:
            raise ValueError("guesses must be at least 1")

    # ------------------------------------------------------------------ prompt

    @property
    def answer_tokens(self) -> int:
        return self.max_tokens or 24 + 16 * self.guesses

    def _messages(self, context: str, replacement: str) -> list[dict[str, str]]:
        p = self.guesses
        example = (_EXAMPLE_GUESSES * (1 + p // len(_EXAMPLE_GUESSES)))[:p]
        return [
            {"role": "system", "content": _SYSTEM.format(p=p)},
            {"role": "user", "content": _user_message(_EXAMPLE_DOC, _EXAMPLE_SPAN)},
            {"role": "assistant", "content": json.dumps(example, ensure_ascii=False)},
            {"role": "user", "content": _user_message(context, replacement)},
        ]

    def _schema(self) -> dict[str, Any] | None:
        structured = self.structured
        if structured is None:
            structured = bool(getattr(self.llm, "supports_schema", False))
        if not structured:
            return None
        return {"type": "array", "items": {"type": "string", "minLength": 1},
                "minItems": self.guesses, "maxItems": self.guesses}

    def context_budget(self) -> int:
        """Tokens left for the document context."""
        overhead = sum(self.llm.count_tokens(m["content"]) + 8 for m in self._messages("", ""))
        budget = int(getattr(self.llm, "context_size", 4096)) - overhead - self.answer_tokens - 32
        if self.context_tokens is not None:
            budget = min(budget, self.context_tokens)
        if budget < 16:
            raise AnonauditError(
                f"the model's context ({getattr(self.llm, 'context_size', '?')} tokens) is too small for the "
                "span-guessing prompt")
        return budget

    def context(self, document_text: str, span: Span, budget: int | None = None) -> str:
        """The document with the span marked ``[[...]]``, trimmed around it to ``budget`` tokens."""
        budget = self.context_budget() if budget is None else budget
        text, s, e = document_text, span.start, span.end
        if not 0 <= s <= e <= len(text):
            raise ValueError(f"span [{s}, {e}) lies outside the document (length {len(text)})")
        marked = f"{text[:s]}[[{text[s:e]}]]{text[e:]}"
        total = self.llm.count_tokens(marked)
        if total <= budget:
            return marked
        chars = int(len(marked) * budget / total)
        while True:
            piece = _window(marked, s, e + 4, chars)
            if self.llm.count_tokens(piece) <= budget or chars <= (e + 4 - s):
                return piece
            chars = int(chars * 0.85)

    def request(self, document_text: str, span: Span, budget: int | None = None) -> ChatRequest:
        context = self.context(document_text, span, budget)
        replacement = document_text[span.start:span.end]
        return ChatRequest.make(self._messages(context, replacement), temperature=self.temperature,
                                max_tokens=self.answer_tokens, seed=self.seed, json_schema=self._schema())

    # ------------------------------------------------------------------ asking

    def guess(self, document_text: str, span: Span) -> list[str]:
        """Up to ``guesses`` guesses of the original of ``span`` (offsets in ``document_text``)."""
        return self.guess_many([(document_text, span)])[0]

    def guess_many(self, items: Sequence[tuple[str, Span]], *, progress: bool = False) -> list[list[str]]:
        """Guesses for many (document text, span) pairs, sent to the LLM as one batch."""
        if not items:
            return []
        budget = self.context_budget()
        requests = [self.request(text, span, budget) for text, span in items]
        answers = self.llm.complete_batch(requests, progress=progress)
        return [parse_guesses(a, self.guesses) for a in answers]


def _window(marked: str, s: int, e: int, chars: int) -> str:
    """About ``chars`` characters of ``marked`` around [s, e), cut at spaces, with ellipses."""
    room = max(0, chars - (e - s))
    left = room // 2
    right = room - left
    if s - left < 0:  # give what the start cannot use to the end, and vice versa
        right += left - s
        left = s
    if e + right > len(marked):
        left += e + right - len(marked)
        right = len(marked) - e
    lo, hi = max(0, s - left), min(len(marked), e + right)
    if lo > 0:
        cut = marked.find(" ", lo, s)
        lo = cut + 1 if cut >= 0 else lo
    if hi < len(marked):
        cut = marked.rfind(" ", e, hi)
        hi = cut if cut >= 0 else hi
    return (_ELLIPSIS + " " if lo > 0 else "") + marked[lo:hi] + (" " + _ELLIPSIS if hi < len(marked) else "")


# =========================================================================== the attack


@dataclass
class _Target:
    doc_id: str
    text: str  # sanitized document
    span: Span  # start/end in the sanitized text, original set, label set


@register("attack")
class SpanGuessAttack(Attack):
    """For every replaced or masked span, an LLM guesses the original from the sanitized document."""

    name: ClassVar[str] = "span_guess"
    description: ClassVar[str] = (
        "An adversary who knows which parts of a document were replaced (masked, generalised or deleted) "
        "shows the sanitized document to a language model, one replaced span at a time, and asks for a few "
        "guesses of what was there originally. A span counts as recovered when a guess matches the "
        "original by shared word lemmas, acronyms, shared word stems for names, or, for dates, the exact "
        "same date. It shows whether generalisations such as \"a European capital\" still give \"Warsaw\" "
        "away. The baseline is a context-free adversary who guesses, for every span, the most frequent "
        "originals of its entity type."
    )
    requires: ClassVar[frozenset[str]] = frozenset({"originals"})

    def __init__(self, guesses: int = 5, sample: int | None = None, llm: str | LLM | None = None, seed: int = 0,
                 labels: Sequence[str] | None = None, frequent_lemmas: int = 200, context_tokens: int | None = None,
                 cache: bool = True, ner: bool = True, progress: bool = True):
        """
        guesses: guesses asked for per span.
        sample: attack a seeded random sample of this many spans per release (default: all spans).
        llm: the LLM that guesses (a spec, see ``anonaudit models list``, or an LLM object).
        labels: only attack spans with these entity labels.
        frequent_lemmas: leave the N most frequent lemmas of the originals out of lemma matching.
        context_tokens: at most this many tokens of document context per prompt (default: what fits).
        cache: read and write the LLM answer cache.
        ner: label spans that a release does not label with spaCy NER on their original text.
        """
        self.guesses = guesses
        self.sample = sample
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
        if frequent_lemmas < 0:
            raise AnonauditError(f"span_guess: frequent_lemmas must be 0 or more, got {frequent_lemmas!r}")
        self._llm: LLM | None = None
        self._matcher: Matcher | None = None
        self._matcher_key: str | None = None
        self._ner_nlp: Spacy | None = None

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        if isinstance(params.get("llm"), LLM):
            params["llm"] = params["llm"].identity or type(params["llm"]).__name__
        if params.get("labels") is not None:
            params["labels"] = list(params["labels"])
        return params

    # ------------------------------------------------------------------ resources

    # The run's shared models (audit.models.resources), asked for on first use.

    def _get_llm(self) -> LLM:
        if self._llm is None:
            self._llm = resources_of(self).llm(self.llm, cache=self.cache)
        return self._llm

    def close(self) -> None:
        self._llm = None
        self._ner_nlp = None
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
            self._matcher = _corpus_matcher(originals, self.frequent_lemmas,
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
                elif _normalise(span.original or "") == _normalise(span.replacement or ""):
                    skipped["unchanged"] += 1
                elif wanted is not None and span.label.upper() not in wanted:
                    skipped["label not selected"] += 1
                else:
                    targets.append(_Target(doc.id, doc.text, span))
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

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        matcher = self.matcher(scenario)
        all_targets, skipped = self.targets(scenario, release)
        targets = self._sample(all_targets)
        started = time.perf_counter()
        guesses = self.guesser().guess_many([(t.text, t.span) for t in targets], progress=self.progress)
        llm_seconds = time.perf_counter() - started

        matcher.analyse_many([t.span.original or "" for t in all_targets] + [g for gs in guesses for g in gs])
        findings = []
        for t, gs in zip(targets, guesses):
            hit = matcher.first_match(t.span.original or "", gs, t.span.label)
            findings.append((t, gs, hit))

        base_hits = _baseline_hits(matcher, all_targets, targets, self.guesses)
        n = len(targets)
        successes = sum(hit is not None for _, _, hit in findings)
        baseline = sum(base_hits) / n if n else None
        headline = risk(successes, n, baseline)

        per_label = _per_label(findings, base_hits)
        rules = Counter(hit[1] for _, _, hit in findings if hit is not None)
        details = {
            "per_label": per_label,
            "rules": dict(rules.most_common()),
            "spans_total": len(all_targets),
            "spans_attacked": n,
            "skipped": skipped,
            "guesses": self.guesses,
            "baseline_method": (f"context-free: the {self.guesses} most frequent originals of the span's label "
                                "among the release's other replaced spans"),
            "frequent_lemmas": sorted(matcher.frequent),
            "llm": getattr(self._get_llm(), "identity", "") or type(self._get_llm()).__name__,
            "llm_seconds": round(llm_seconds, 3),
            "spans_per_minute": round(60 * n / llm_seconds, 2) if llm_seconds > 0 and n else None,
            "params": self.get_params(),
        }
        return [Result.from_risk(self.name, release.name, headline, details=details,
                                 documents=_documents(findings))]


def _corpus_matcher(originals: Any, top: int, nlp: Spacy | None = None) -> Matcher:
    """A matcher with the frequent lemmas of ``originals``, remembered on disk by corpus fingerprint."""
    if originals is None or top <= 0:
        return Matcher(nlp=nlp)
    from audit.core import config

    key = hashlib.sha256(f"{originals.fingerprint()}:{top}".encode()).hexdigest()[:24]
    path = config.subdir("span_guess") / f"frequent-lemmas-{key}.json"
    try:
        return Matcher(frequent=frozenset(json.loads(path.read_text(encoding="utf-8"))), nlp=nlp)
    except (OSError, ValueError):
        pass
    matcher = Matcher.from_corpus((d.text for d in originals), top=top, nlp=nlp)
    try:
        atomic_write(path, json.dumps(sorted(matcher.frequent)))
    except OSError:
        log.warning("could not cache frequent lemmas at %s", path)
    return matcher


def _baseline_hits(matcher: Matcher, all_targets: list[_Target], attacked: list[_Target], p: int) -> list[bool]:
    """For each attacked span: do the ``p`` most frequent *other* originals of its label match it?"""
    counts: dict[str, Counter[str]] = {}
    for t in all_targets:
        counts.setdefault(t.span.label, Counter())[(t.span.original or "").strip()] += 1
    tops = {lab: c.most_common(p + 1) for lab, c in counts.items()}
    hits = []
    for t in attacked:
        own = (t.span.original or "").strip()
        ranked = sorted(((cnt - (w == own), w) for w, cnt in tops[t.span.label]), key=lambda x: (-x[0], x[1]))
        guesses = [w for cnt, w in ranked if cnt > 0][:p]
        hits.append(matcher.first_match(own, guesses, t.span.label) is not None)
    return hits


def _per_label(findings: list, base_hits: list[bool]) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[tuple[bool, bool]]] = {}
    for (t, _, hit), base in zip(findings, base_hits):
        groups.setdefault(t.span.label, []).append((hit is not None, base))
    out = {}
    for label in sorted(groups):
        rows = groups[label]
        rate = success_rate(sum(h for h, _ in rows), len(rows))
        out[label] = {"rate": rate.value, "ci": list(rate.ci), "n": rate.n, "successes": rate.successes,
                      "baseline": sum(b for _, b in rows) / len(rows)}
    return out


def _documents(findings: list) -> list[Finding]:
    """One finding per document: it succeeds when a guess recovered at least one of its spans.
    ``spans`` is private (originals, guesses, the matching guess)."""
    docs: dict[str, dict[str, Any]] = {}
    for t, gs, hit in findings:
        entry = docs.setdefault(t.doc_id, {"attacked": 0, "recovered": 0, "spans": [], "highlights": []})
        s = t.span
        entry["attacked"] += 1
        record = {"start": s.start, "end": s.end, "label": s.label, "original": s.original,
                  "replacement": s.replacement if s.replacement is not None else t.text[s.start:s.end],
                  "guesses": gs, "recovered": hit is not None,
                  "matched_guess": gs[hit[0]] if hit else None, "rule": hit[1] if hit else None}
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
