"""Validation of the terms an LLM proposes to mask, before any is applied.

A small model asked for "every attribute of the person" readily lists "and", "her", "the" or a
comma; masked everywhere, those make a release unreadable and hide nothing. A proposed term is
rejected, with its reason counted, when it is:

* ``punctuation``: it holds no letter or digit;
* ``stop_word``: every word of it is a stop word of the spaCy pipeline's language ("and",
  "of her"), unless the document uses one of them as a proper noun (a person called "Will");
* ``common_word``: a single word found in more than half of the corpus's documents
  (:func:`common_words`: document frequency, only where the corpus has at least
  :data:`MIN_DOCUMENTS` documents, so that a frequency means something), unless the document
  uses it as a proper noun or inside a named entity (alone, a word found in most documents
  singles no one out; a multi-word term that holds it, such as a full name, is kept);
* ``not_found``: it occurs nowhere in the document as whole words (matching is word-bounded and
  case-insensitive, :func:`~defenders.prompt_anonymizer.parsing.find_terms`).

A person's name the model proposes is masked in all its mentions (:func:`name_parts`): when a kept
term overlaps a name spaCy's NER finds ("Edith Varga"), each word of that name (not an honorific
nor a stop word) is masked too, so "Varga has taught" does not keep the surname the full name
hid. Those are counted as ``name_parts_added``.

The rules are the same for every corpus: a stop list of the language, a majority of the
corpus's own documents, and the document's own text; no threshold is fitted to a benchmark.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from defenders.prompt_anonymizer.parsing import find_terms

#: Document frequency is only used on a corpus of at least this many documents.
MIN_DOCUMENTS = 10
#: A single word found in more than this share of the documents is "very common".
COMMON_SHARE = 0.5
REASONS = ("punctuation", "stop_word", "common_word", "not_found")

_WORD = re.compile(r"\w+")
_NAMED = frozenset({"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "PRODUCT", "EVENT", "WORK_OF_ART"})


def common_words(texts: Iterable[str], *, share: float = COMMON_SHARE,
                 min_documents: int = MIN_DOCUMENTS) -> frozenset[str]:
    """Lowercase words found in more than ``share`` of the documents ``texts`` (none when there
    are fewer than ``min_documents``: a handful of documents gives no frequency)."""
    df: Counter[str] = Counter()
    n = 0
    for text in texts:
        n += 1
        df.update({w.lower() for w in _WORD.findall(text)})
    if n < min_documents:
        return frozenset()
    return frozenset(w for w, c in df.items() if c > share * n)


def proper_words(doc: Any) -> frozenset[str]:
    """Lowercase words a parsed spaCy document uses as a proper noun (not at a sentence's start,
    where any word is capitalised) or inside a named entity (stop words only when capitalised
    inside a person's name)."""
    out = set()
    for tok in doc:
        if tok.pos_ == "PROPN" and tok.text[:1].isupper() and not tok.is_sent_start:
            out.add(tok.text.lower())
        elif tok.ent_type_ in _NAMED and (not tok.is_stop or tok.ent_type_ == "PERSON" and tok.text[:1].isupper()):
            out.add(tok.text.lower())  # (a stop word only as a capitalised part of a person's name: Will)
    return frozenset(out)


def reject_reason(term: str, stops: frozenset[str], common: frozenset[str], proper: frozenset[str]) -> str | None:
    """Why ``term`` must not be masked (one of :data:`REASONS` but ``not_found``), or None."""
    words = [w.lower() for w in _WORD.findall(term)]
    if not words:
        return "punctuation"
    if any(w in proper for w in words):
        return None
    if all(w in stops for w in words):
        return "stop_word"
    if len(words) == 1 and words[0] in common:
        return "common_word"
    return None


def validate_terms(text: str, terms: Iterable[str], stops: frozenset[str], common: frozenset[str],
                   proper: frozenset[str]) -> tuple[list[str], dict[str, list[str]]]:
    """The proposed ``terms`` that may be masked in ``text`` (in order) and the rejected ones
    by reason (:data:`REASONS`)."""
    rejected: dict[str, list[str]] = {r: [] for r in REASONS}
    candidates = []
    for term in terms:
        why = reject_reason(term, stops, common, proper)
        if why:
            rejected[why].append(term)
        else:
            candidates.append(term)
    _, missing = find_terms(text, candidates)
    gone = set(missing)
    rejected["not_found"] = [t for t in candidates if t in gone]
    return [t for t in candidates if t not in gone], rejected


#: Lowercase words inside names ("Ludwig van Beethoven").
PARTICLES = frozenset("van von der den de du da di del della la le bin ibn al el ter ten".split())
#: Words before a name that are not part of it.
HONORIFICS = frozenset("mr mrs ms miss mx dr prof professor sir madam dame lord lady judge justice rev".split())


def person_names(doc: Any) -> list[str]:
    """The texts of the ``PERSON`` entities of a parsed spaCy document."""
    return [ent.text for ent in doc.ents if ent.label_ == "PERSON"]


def name_parts(terms: Iterable[str], persons: Iterable[str], stops: frozenset[str]) -> list[str]:
    """The words of each person's name (``persons``) that shares a word with one of ``terms``,
    so that the name is masked in its shorter mentions too (honorifics, stop words and initials
    left out). Only a name written as one (its words capitalised but for particles such as "van")
    counts: NER sometimes calls other words a person."""
    said = {w.lower() for t in terms for w in _WORD.findall(t) if len(w) > 1 and w.lower() not in stops}
    out: list[str] = []
    for name in persons:
        words = [w for w in _WORD.findall(name) if len(w) > 1 and w.lower() not in stops | HONORIFICS]
        if not words or not said & {w.lower() for w in words}:
            continue
        if any(not w[0].isupper() and w.lower() not in PARTICLES for w in words):
            continue
        out += [w for w in words if w[0].isupper() and w not in out]
    return out
