"""Which spans of a document did a sanitizer replace? Token-level alignment.

Attacks and utility metrics need, for every released document, the list of
replaced regions: what the sanitized text says there (the replacement), what the
original said (the original), and where both are. When the sanitizer recorded its
replacements (``Document.spans`` with ``original`` set, as every release made by
:func:`audit.core.data.sanitize_corpus` does) those records are used as they are.
Otherwise the two texts are aligned word by word:

* both texts are split into word and punctuation tokens, keeping character offsets;
* :class:`difflib.SequenceMatcher` (``autojunk`` off, so frequent tokens such as
  "the" still anchor the alignment) compares the lowercased tokens; case-only
  changes are not replacements;
* every changed region becomes one :class:`~audit.core.data.Span`: ``start``/``end``
  in the sanitized text, ``replacement`` the sanitized text there, ``original``
  and ``orig_start``/``orig_end`` the original region. Deletions give an empty
  replacement (suppression); insertions give an empty original;
* two changed regions are merged into one when they are separated by at most
  ``max_gap`` (2) unchanged content words ("the European Commission of Human
  Rights" -> "a European human rights body" is one replaced region, not three),
  or by one unchanged token when one of them only swaps function words or
  punctuation; "in Warsaw on 3 May" -> "in a city on a day in May" stays two
  regions, since "on" separates them.

Labels come from the recorded span, else from spaCy NER on the original document
(the entity overlapping the original region most), else ``"UNKNOWN"``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace
from collections.abc import Callable, Sequence
from typing import Any

from audit.core.data import Document, Span, span_order

#: A spaCy pipeline (e.g. :class:`audit.models.nlp.Spacy`): text in, a doc with ``.ents`` out.
#: Typed loosely so that the core does not depend on the models layer.
Spacy = Callable[[str], Any]

UNKNOWN = "UNKNOWN"

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)

#: Words whose swap alone ("the" -> "a") is not a replacement worth its own span.
_FUNCTION_WORDS = frozenset(
    "a an the this that these those some any its his her their our your my of in on at to for "
    "by with from as and or".split()
)

Token = tuple[str, int, int]  # (lowercased text, start, end)


def tokenize(text: str) -> list[Token]:
    """Word and punctuation tokens of ``text`` (lowercased) with their character offsets."""
    return [(m.group().lower(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _is_minor(tokens: list[Token]) -> bool:
    """Only function words or punctuation (or nothing)."""
    return all(t in _FUNCTION_WORDS or not t[0].isalnum() for t, _, _ in tokens)


def _changed_regions(a: list[Token], b: list[Token], max_gap: int) -> list[tuple[int, int, int, int]]:
    """Changed token regions ``(i1, i2, j1, j2)`` (original a[i1:i2] -> sanitized b[j1:j2]), merged."""
    matcher = difflib.SequenceMatcher(None, [t[0] for t in a], [t[0] for t in b], autojunk=False)
    regions = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
    merged: list[tuple[int, int, int, int]] = []
    for region in regions:
        if merged:
            p1, p2, q1, q2 = merged[-1]
            i1, i2, j1, j2 = region
            gap = a[p2:i1]  # unchanged tokens between the two regions (same on both sides)
            shared_words = all(t[0].isalnum() and t not in _FUNCTION_WORDS for t, _, _ in gap)
            minor_neighbour = (_is_minor(a[p1:p2]) and _is_minor(b[q1:q2])) or (
                _is_minor(a[i1:i2]) and _is_minor(b[j1:j2]))
            if len(gap) <= max_gap and (shared_words or (len(gap) <= 1 and minor_neighbour)):
                merged[-1] = (p1, i2, q1, j2)
                continue
        merged.append(region)
    return merged


def _bounds(tokens: list[Token], i1: int, i2: int, text_len: int) -> tuple[int, int]:
    """Character range of tokens[i1:i2]; an empty range sits where the next token starts."""
    if i1 < i2:
        return tokens[i1][1], tokens[i2 - 1][2]
    if i1 < len(tokens):
        pos = tokens[i1][1]
        # Put an empty region right after the previous token when there is one, so that
        # "Mr Galip Yalman lodged" -> "Mr  lodged" places the suppression after "Mr".
        if i1 > 0:
            pos = tokens[i1 - 1][2]
        return pos, pos
    pos = tokens[-1][2] if tokens else text_len
    return pos, pos


def align(original: str, sanitized: str, *, max_gap: int = 2) -> list[Span]:
    """Every replaced region of ``original`` in ``sanitized``, as spans in the sanitized text.

    Spans are sorted by position, unlabelled (``label=""``), with ``replacement``,
    ``original``, ``orig_start`` and ``orig_end`` set. Identical texts give ``[]``.
    ``max_gap`` is the largest number of unchanged content words across which two
    changed regions are merged into one (0 disables merging).
    """
    if original == sanitized:
        return []
    a, b = tokenize(original), tokenize(sanitized)
    spans: list[Span] = []
    for i1, i2, j1, j2 in _changed_regions(a, b, max_gap):
        os_, oe = _bounds(a, i1, i2, len(original))
        ss, se = _bounds(b, j1, j2, len(sanitized))
        spans.append(Span(start=ss, end=se, replacement=sanitized[ss:se], original=original[os_:oe],
                          orig_start=os_, orig_end=oe))
    return spans


def _ner_labels(doc: Document, spans: list[Span], nlp: Spacy) -> list[str]:
    """For each span, the label of the spaCy entity overlapping its original region most."""
    return _overlap_labels([(e.start_char, e.end_char, e.label_) for e in nlp(doc.text).ents], spans)


def _overlap_labels(ents: list[tuple[int, int, str]], spans: list[Span]) -> list[str]:
    """For each span, the label of the entity ``(start, end, label)`` overlapping its original
    region most (``UNKNOWN`` when none does)."""
    labels = []
    for s in spans:
        best, best_overlap = UNKNOWN, 0
        lo, hi = s.orig_start or 0, s.orig_end or 0
        for es, ee, lab in ents:
            overlap = min(hi, ee) - max(lo, es)
            if overlap > best_overlap:
                best, best_overlap = lab, overlap
        labels.append(best)
    return labels


def replaced_spans(original: Document, released: Document, *, nlp: Spacy | None = None,
                   max_gap: int = 2, detect: Callable[[str], Sequence[Span]] | None = None) -> list[Span]:
    """The replaced spans of ``released`` (a sanitized version of ``original``).

    Uses the release's recorded spans when it has them (spans with ``original`` set),
    otherwise :func:`align`. Every returned span has a label: its recorded label, else the label
    of what ``detect`` (a detector on one text) finds in its original region when given, else
    the spaCy NER label there when ``nlp`` is given (either runs only if some span needs it),
    else ``"UNKNOWN"``.
    """
    recorded = [s for s in released.spans if s.original is not None]
    spans = sorted(recorded, key=span_order) if recorded else align(original.text, released.text, max_gap=max_gap)
    need = [i for i, s in enumerate(spans) if not s.label]
    if not need:
        return spans
    needed = [spans[i] for i in need]
    if detect is not None:
        ner = _overlap_labels([(s.start, s.end, s.label or UNKNOWN) for s in detect(original.text)], needed)
    else:
        ner = _ner_labels(original, needed, nlp) if nlp is not None else [UNKNOWN] * len(need)
    out = list(spans)
    for i, label in zip(need, ner):
        out[i] = replace(out[i], label=label)
    return out
