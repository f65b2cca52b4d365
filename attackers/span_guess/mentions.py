"""What a person's background names: the candidates for a hidden span, each with its words around.

A person's background is cut into passages (:func:`passages`); in each, spaCy's entities, codes
such as ``36110/97`` (by pattern) and capitalised sequences NER left untyped become
:class:`Mention` objects with up to ``WINDOW`` words on each side (:func:`mentions_of`). Which
mentions are candidates for a span depends on the span's label (:func:`tier`: of its type first,
for name-like labels other names second), and spellings of one name count together under one
key (:func:`key`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from audit.core.text import word_tokens

#: Entity labels a release may use (TAB's, Presidio's, spaCy's own) -> the spaCy NER labels
#: (and ``CODE`` for the pattern) whose entities are candidates for it.
_DATES = frozenset({"DATE", "TIME"})
_PLACES = frozenset({"GPE", "LOC", "FAC"})
_NUMBERS = frozenset({"CARDINAL", "QUANTITY", "MONEY", "PERCENT", "ORDINAL", "DATE"})
_OTHER = frozenset({"EVENT", "LAW", "PRODUCT", "WORK_OF_ART", "LANGUAGE", "NORP", "FAC"})
TYPE_MAP: dict[str, frozenset[str]] = {
    "PERSON": frozenset({"PERSON"}), "PER": frozenset({"PERSON"}),
    "ORG": frozenset({"ORG"}), "ORGANIZATION": frozenset({"ORG"}),
    "LOC": _PLACES, "LOCATION": _PLACES, "GPE": _PLACES, "FAC": _PLACES, "ADDRESS": _PLACES,
    "DATETIME": _DATES, "DATE": _DATES, "DATE_TIME": _DATES, "TIME": _DATES,
    "DEM": frozenset({"NORP", "GPE"}), "NRP": frozenset({"NORP", "GPE"}), "NORP": frozenset({"NORP", "GPE"}),
    "QUANTITY": _NUMBERS, "CARDINAL": _NUMBERS, "MONEY": _NUMBERS, "PERCENT": _NUMBERS, "ORDINAL": _NUMBERS,
    "CODE": frozenset({"CODE"}), "ID": frozenset({"CODE"}),
    "MISC": _OTHER, "EVENT": _OTHER, "LAW": _OTHER, "PRODUCT": _OTHER, "WORK_OF_ART": _OTHER,
}
#: application numbers (36110/97), record numbers (MRN-7615008), case codes (A-12/2004)
_CODE = re.compile(r"\b(?:[A-Z]{1,6}[-‐ ]?)?\d+(?:[-/.]\d+)+\b|\b[A-Z]{2,6}-?\d{4,}\b")
#: capitalised word sequences (names NER missed, "TAMPERE —" datelines): second-tier candidates of
#: the name-like labels, after the entities of the span's type
_PROPN = re.compile(r"\b[A-Z][\w'’.-]*[A-Za-z](?:\s+(?:(?:of|and|de|la|van|von|der|the)\s+)?[A-Z][\w'’.-]*[A-Za-z])*")
_NAME_LABELS = frozenset({"PERSON", "PER", "ORG", "ORGANIZATION", "LOC", "LOCATION", "GPE", "FAC", "ADDRESS",
                          "DEM", "NRP", "NORP", "MISC", "EVENT", "PRODUCT", "WORK_OF_ART"})
_NAME_MENTIONS = frozenset({"PERSON", "ORG", "GPE", "LOC", "FAC", "NORP", "PRODUCT", "EVENT", "WORK_OF_ART",
                            "LAW", "LANGUAGE", "PROPN"})
#: words of context read on each side of a span (fit) and a mention
EDGE = 4
WINDOW = 30
_PASSAGE = re.compile(r"\n\s*\n")
_MAX_PASSAGE = 2000


def allowed_types(label: str) -> frozenset[str] | None:
    """The candidate types for a span's label; ``None`` (any entity) for an unknown label."""
    return TYPE_MAP.get((label or "").upper())


def tier(label: str, mention: str) -> int | None:
    """0: a mention of the span's type; 1, for a name-like label: a name of another type (the
    small NER model mistypes names: a city tagged as a person) or a capitalised sequence it left
    untyped; None: not a candidate (dates, numbers and codes keep to their type)."""
    types = allowed_types(label)
    if types is None or mention in types:
        return 0
    return 1 if (label or "").upper() in _NAME_LABELS and mention in _NAME_MENTIONS else None


def key(text: str) -> str:
    """The words of a candidate, lower-cased: spellings with the same words count as one."""
    return " ".join(word_tokens(text))


@dataclass(frozen=True)
class Mention:
    """One entity in a person's background, with the words around it."""

    text: str
    label: str
    left: tuple[str, ...]  # up to WINDOW words before, nearest last
    right: tuple[str, ...]  # up to WINDOW words after, nearest first


def passages(texts: Iterable[str]) -> list[str]:
    """A person's background texts cut into the passages spaCy reads (paragraphs, at most
    ``_MAX_PASSAGE`` characters each)."""
    return [p[i:i + _MAX_PASSAGE] for t in texts for p in _PASSAGE.split(t) if p.strip()
            for i in range(0, len(p), _MAX_PASSAGE)]


def mentions_of(text: str, ents: Sequence[tuple[int, int, str]]) -> list[Mention]:
    """The mentions of one passage: spaCy's entities ``ents`` (``(start, end, label)``), the codes
    and the capitalised sequences that overlap none of them, each with its words around."""
    spans = list(ents) + [(m.start(), m.end(), "CODE") for m in _CODE.finditer(text)]
    taken = [(s, e) for s, e, _ in spans]
    spans += [(m.start(), m.end(), "PROPN") for m in _PROPN.finditer(text)
              if not any(s < m.end() and m.start() < e for s, e in taken) and not _initial(text, m)]
    out = [Mention(text[s:e].strip(), label, tuple(word_tokens(text[max(0, s - 400):s])[-WINDOW:]),
                   tuple(word_tokens(text[e:e + 400])[:WINDOW])) for s, e, label in spans]
    return [m for m in out if m.text]


def _initial(text: str, m: re.Match) -> bool:
    """A single capitalised word that starts a sentence ("Friends say ...", "Counsel: ..."): capital
    because of where it stands, not because it is a name."""
    before = text[:m.start()].rstrip()
    return " " not in m.group() and m.group().istitle() and (not before or before[-1] in ".:!?;\n\"“(")
