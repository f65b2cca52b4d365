"""The MATCH function: does a guess recover the original words of a span?

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
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from audit.core.align import UNKNOWN
from audit.core.files import atomic_write

if TYPE_CHECKING:
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


@dataclass(frozen=True)
class _Analysis:
    """What MATCH needs to know about one string."""

    norm: str  # lowercased, whitespace collapsed, outer punctuation trimmed
    content: frozenset[str]  # lemmas of alphanumeric non-stop tokens
    acronym: str | None  # first letters of >= 2 title-cased words
    titled: bool  # has a title-cased word (a named-entity hint when no label is known)


def normalise(text: str) -> str:
    """Lowercased, whitespace collapsed, outer punctuation trimmed."""
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

    def analyse_many(self, texts: Iterable[str], progress: str | None = None) -> None:
        """Analyse (and memoise) many strings in one spaCy pass; ``progress`` names its progress bar."""
        from audit.runtime.progress import bar

        todo = list(dict.fromkeys(t for t in texts if t not in self._memo))
        with bar(total=len(todo), desc=progress or "", unit="text", enabled=bool(progress) and len(todo) > 1) as shown:
            for text, doc in zip(todo, self._spacy.pipe(todo, batch_size=256)):
                self._memo[text] = _analysis_of(text, doc)
                shown.update(1)

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
    return _Analysis(norm=normalise(text), content=content,
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


def corpus_matcher(originals: Any, top: int, nlp: Spacy | None = None) -> Matcher:
    """A matcher with the frequent lemmas of ``originals``, remembered on disk by corpus fingerprint."""
    if originals is None or top <= 0:
        return Matcher(nlp=nlp)
    from audit.core import config

    if not config.cache_enabled():
        return Matcher.from_corpus((d.text for d in originals), top=top, nlp=nlp)
    key = hashlib.sha256(f"{originals.fingerprint()}:{top}".encode()).hexdigest()[:24]
    path = config.subdir("span_guess") / f"frequent-lemmas-{key}.json"
    try:
        return Matcher(frequent=frozenset(json.loads(path.read_text(encoding="utf-8"))), nlp=nlp)
    except (OSError, ValueError):
        pass
    from audit.runtime.progress import bar

    texts = bar((d.text for d in originals), total=len(originals), desc="span guessing: frequent lemmas of the originals",
                unit="doc")
    matcher = Matcher.from_corpus(texts, top=top, nlp=nlp)
    try:
        atomic_write(path, json.dumps(sorted(matcher.frequent)))
    except OSError:
        log.warning("could not cache frequent lemmas at %s", path)
    return matcher
