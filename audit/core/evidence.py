"""Evidence to repair: what the attacks used in a released document, as offsets to fix.

``anonaudit harden`` (:mod:`audit.pipeline.harden`) re-sanitizes only what an attack used. It
reads that evidence from the typed findings every attack writes (:class:`~audit.core.results.Finding`),
so it needs to know nothing about any attack: a finding that succeeded (re-identified, linked,
recovered) marks its evidence as :class:`~audit.core.results.Highlight` offsets in the released
text. Each highlight becomes one or more :class:`RepairTarget`:

* ``"span"``: the highlight lies inside a replacement the sanitizer recorded (a span the
  guesser recovered, a mask): the replacement must say less (generalised one level further,
  or to its label);
* ``"text"``: visible words the attack read (a rare phrase, a claim, the window a classifier
  decided on): the highlight minus every recorded replacement and placeholder-free words only,
  to be reworded.

A span target that its repairer leaves as it was (a replacement already at its label, ``[DATE]``,
that a guesser still recovered) cannot say less: what gave it away is its context, so it
becomes a ``"text"`` target on the words of its sentence (:func:`context_targets`, evidence kind
``"context"``).

Sanitizers that can repair a release in place say which kinds they fix
(:attr:`audit.core.interfaces.Sanitizer.repairs`) and implement
:meth:`~audit.core.interfaces.Sanitizer.repair`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from audit.core.data import REPHRASED, Document, Span, span_order
from audit.core.results import Result

TEXT = "text"
SPAN = "span"
REPAIR_KINDS = (TEXT, SPAN)

_WORD = re.compile(r"\w", re.UNICODE)
_CONTENT = re.compile(r"\w{3,}|\d", re.UNICODE)


@dataclass(frozen=True)
class RepairTarget:
    """One stretch of a released document to repair: ``[start, end)`` in its text, what kind of
    repair it needs (``"text"`` or ``"span"``), the attacks whose evidence it was and the kinds
    of evidence (highlight kinds: ``"ngram"``, ``"span"``, ``"claim"``...)."""

    doc_id: str
    start: int
    end: int
    kind: str
    attacks: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "kind": self.kind, "attacks": list(self.attacks),
                "evidence": list(self.evidence)}


def hidden_spans(doc: Document) -> list[Span]:
    """The replacements a sanitizer recorded on ``doc`` (a rephrasing, whose words stay visible,
    is not one)."""
    return [s for s in doc.spans if s.original is not None and s.label != REPHRASED]


def _minus(start: int, end: int, holes: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    pieces = [(start, end)]
    for hs, he in sorted(holes):
        out = []
        for s, e in pieces:
            if he <= s or e <= hs:
                out.append((s, e))
                continue
            if s < hs:
                out.append((s, hs))
            if he < e:
                out.append((he, e))
        pieces = out
    return pieces


def _trim(text: str, s: int, e: int) -> tuple[int, int] | None:
    """``[s, e)`` without surrounding whitespace and punctuation; None when no word is left."""
    while s < e and not _WORD.match(text[s]):
        s += 1
    while e > s and not _WORD.match(text[e - 1]):
        e -= 1
    return (s, e) if e > s else None


def targets_of(doc: Document, highlights: Iterable[tuple[int, int, str, str]],
               placeholder_pattern: str | None = None) -> list[RepairTarget]:
    """The repair targets of ``doc`` for ``highlights`` ``(start, end, attack, evidence kind)``:
    a highlight inside a recorded replacement is a ``"span"`` target on that replacement,
    anything else a ``"text"`` target on its words outside every replacement (and outside
    ``placeholder_pattern`` matches; a piece without a word of 3 letters or a digit is left). Overlapping text targets are merged; each span target
    appears once; both keep every attack and evidence kind that pointed at them, sorted."""
    hidden = hidden_spans(doc)
    holes = [(s.start, s.end) for s in hidden]
    if placeholder_pattern:
        holes += [m.span() for m in re.finditer(placeholder_pattern, doc.text)]
    spans: dict[tuple[int, int], tuple[set[str], set[str]]] = {}
    texts: list[tuple[int, int, set[str], set[str]]] = []
    n = len(doc.text)
    for start, end, attack, kind in highlights:
        start, end = max(0, min(start, n)), max(0, min(end, n))
        if end < start:
            continue
        inside = next((h for h in hidden if h.start <= start and end <= h.end
                       and (h.end > h.start or start == end)), None)
        if inside is not None:
            a, k = spans.setdefault((inside.start, inside.end), (set(), set()))
            a.add(attack)
            k.add(kind)
            continue
        for s, e in _minus(start, end, holes):
            trimmed = _trim(doc.text, s, e)
            # a piece between two masks that is one short word ("of", "in") says nothing alone
            if trimmed is not None and _CONTENT.search(doc.text[trimmed[0]:trimmed[1]]):
                texts.append((*trimmed, {attack}, {kind}))
    merged: list[list] = []
    for s, e, a, k in sorted(texts, key=lambda t: (t[0], t[1])):
        if merged and s < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
            merged[-1][2] |= a
            merged[-1][3] |= k
        else:
            merged.append([s, e, set(a), set(k)])
    out = [RepairTarget(doc.id, s, e, SPAN, tuple(sorted(a)), tuple(sorted(k))) for (s, e), (a, k) in spans.items()]
    out += [RepairTarget(doc.id, s, e, TEXT, tuple(sorted(a)), tuple(sorted(k))) for s, e, a, k in merged]
    return sorted(out, key=lambda t: (t.start, t.end, t.kind))


def targets_from_results(documents: Mapping[str, Document], results: Iterable[Result], *,
                         attacks: Sequence[str] | None = None,
                         placeholder_pattern: str | None = None) -> dict[str, list[RepairTarget]]:
    """Per document id, what the attack ``results`` used against it: the highlights of every
    finding that succeeded, when they lie in the document itself (evidence found in another
    document, e.g. a wrong link, is not this document's to repair). ``attacks``: only results
    whose name, or its part before the first dot, is one of these."""
    wanted = None if attacks is None else set(attacks)
    found: dict[str, list[tuple[int, int, str, str]]] = {}
    for r in results:
        if r.kind != "attack" or (wanted is not None and r.name not in wanted and r.name.split(".", 1)[0] not in wanted):
            continue
        for f in r.documents:
            if f.success is not True or f.id not in documents or f.highlights_in not in (None, f.id):
                continue
            found.setdefault(f.id, []).extend((h.start, h.end, r.name, h.kind) for h in f.highlights)
    out = {}
    for doc_id, hl in found.items():
        targets = targets_of(documents[doc_id], hl, placeholder_pattern)
        if targets:
            out[doc_id] = targets
    return out


_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s)|\n")


def sentence_around(text: str, start: int, end: int) -> tuple[int, int]:
    """The sentence of ``text`` that holds ``[start, end)``: from the last sentence end (a full
    stop, ``!`` or ``?`` before a space, or a newline) before ``start`` to the first one at or
    after ``end``, its final mark included. A rule, not a parser: an abbreviation's full stop
    ("No. 12") ends a sentence early, which only makes the context smaller."""
    lo = 0
    for m in _SENTENCE_END.finditer(text, 0, start):
        lo = m.end()
    m = _SENTENCE_END.search(text, end)
    return lo, (m.end() if m else len(text))


def context_targets(doc: Document, targets: Iterable[RepairTarget],
                    placeholder_pattern: str | None = None) -> list[RepairTarget]:
    """``"text"`` targets on the words of the sentences around the span ``targets`` of ``doc``
    (replacements its repairer could not make say less), keeping their attacks; evidence kind
    ``"context"``. A sentence without a word to reword gives none."""
    highlights = [(*sentence_around(doc.text, t.start, t.end), attack, "context")
                  for t in targets for attack in (t.attacks or ("unknown",))]
    return [t for t in targets_of(doc, highlights, placeholder_pattern) if t.kind == TEXT]


def unchanged_spans(before: Document, after: Document, targets: Iterable[RepairTarget]) -> list[RepairTarget]:
    """The span ``targets`` of ``before`` whose replacement ``after`` left as it was, at their
    offsets in ``after`` (which must hold the same spans with new replacements, as a span
    repair makes them: :func:`set_replacements`); none when the spans differ."""
    b_spans, a_spans = sorted(before.spans, key=span_order), sorted(after.spans, key=span_order)
    if len(b_spans) != len(a_spans):
        return []
    at = {(s.start, s.end): i for i, s in enumerate(b_spans)}
    out = []
    for t in targets:
        i = at.get((t.start, t.end))
        if t.kind == SPAN and i is not None and a_spans[i].replacement == b_spans[i].replacement \
                and after.text[a_spans[i].start:a_spans[i].end] == before.text[t.start:t.end]:
            out.append(replace(t, start=a_spans[i].start, end=a_spans[i].end))
    return out


def set_replacements(doc: Document, new: Mapping[int, str], *, label: str | None = None) -> Document:
    """``doc`` with the replacements of its spans number ``i`` (positions in ``doc.spans``) set to
    ``new[i]``: the text between spans is kept, later offsets shift, each span keeps its original
    (and, with ``label``, takes that label). Spans must not overlap."""
    spans = sorted(enumerate(doc.spans), key=lambda t: span_order(t[1]))
    pieces, out_spans, cursor, shift = [], [None] * len(doc.spans), 0, 0
    for i, s in spans:
        pieces.append(doc.text[cursor:s.start])
        repl = new.get(i, doc.text[s.start:s.end])
        pieces.append(repl)
        start = s.start + shift
        changed = {"replacement": repl} if i in new else {}
        if i in new and label:
            changed["label"] = label
        out_spans[i] = replace(s, start=start, end=start + len(repl), **changed)
        shift += len(repl) - (s.end - s.start)
        cursor = s.end
    pieces.append(doc.text[cursor:])
    return replace(doc, text="".join(pieces), spans=tuple(sorted(out_spans, key=span_order)))


def shift_position(before: Document, after: Document, pos: int) -> int:
    """Where position ``pos`` of ``before`` (outside its recorded spans) is in ``after``, when
    ``after`` differs from ``before`` only by the replacements of the same spans
    (:func:`set_replacements`)."""
    shift = 0
    for b, a in zip(sorted(before.spans, key=span_order), sorted(after.spans, key=span_order)):
        if b.end <= pos:
            shift += (a.end - a.start) - (b.end - b.start)
    return pos + shift
