"""A released document being rewritten: current text, protected spans and recorded edits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from audit.core.data import REPHRASED, Document, Span, span_order
from audit.core.errors import AnonauditError
from defenders.delinker.prompts import REDACTED_LABEL, merge_ranges

# --------------------------------------------------------------------------- the draft


@dataclass
class Edit:
    """One rewritten region: ``[start, end)`` in the current text, ``[src_start, src_end)`` in
    the input (de-identified) text; ``redacted`` when it is one redaction and nothing else."""

    start: int
    end: int
    src_start: int
    src_end: int
    redacted: bool = False


def covers_part(start: int, end: int, span: Any) -> bool:
    """Whether ``[start, end)`` overlaps ``span`` (with ``start`` and ``end``) without covering it whole."""
    return span.start < end and start < span.end and not (start <= span.start and span.end <= end)


class Draft:
    """A released document being rewritten: its current text, the de-identifier's spans
    (shifted to the current text, never touched) and the rewritten regions so far.

    ``movable_labels``: recorded spans with these labels (earlier rephrasings, when a hardening
    round rewrites a release that was rewritten before) are not protected: a rewrite that covers
    one whole absorbs it, and its record then says what the original text was."""

    def __init__(self, doc: Document, *, movable_labels: tuple[str, ...] = ()):
        self.doc = doc
        self.text = doc.text
        self.protected = [s for s in doc.spans if s.label not in movable_labels]
        self.movable = [s for s in doc.spans if s.label in movable_labels]
        self.edits: list[Edit] = []

    def _to_src(self, pos: int) -> int:
        shift = 0
        for e in self.edits:
            if e.end <= pos:
                shift = e.src_end - e.end
            else:
                break
        return pos + shift

    def replace(self, start: int, end: int, new: str, *, redaction: bool = False) -> None:
        """Put ``new`` in place of ``text[start:end]`` (outside every protected span). Apply
        several replacements right to left so that the offsets of the others stay valid."""
        for p in self.protected:
            if p.start < end and start < p.end:
                raise AnonauditError(f"delinker: internal error, a rewrite [{start}, {end}) overlaps the "
                                     f"de-identifier's span [{p.start}, {p.end}) of document {self.doc.id!r}")
        for m in self.movable:  # taken whole or left alone: a part would leave its record at the wrong place
            if covers_part(start, end, m):
                raise AnonauditError(f"delinker: internal error, a rewrite [{start}, {end}) covers part of the "
                                     f"earlier rephrasing [{m.start}, {m.end}) of document {self.doc.id!r}")
        over = [e for e in self.edits if e.start < end and start < e.end]
        ms = min([start] + [e.start for e in over])
        me = max([end] + [e.end for e in over])
        src_s = over[0].src_start if over and over[0].start == ms else self._to_src(ms)
        src_e = over[-1].src_end if over and over[-1].end == me else self._to_src(me)
        delta = len(new) - (end - start)
        self.text = self.text[:start] + new + self.text[end:]
        kept = [e for e in self.edits if e not in over]
        for e in kept:
            if e.start >= end:
                e.start += delta
                e.end += delta
        kept.append(Edit(ms, me + delta, src_s, src_e, redacted=redaction and not over))
        self.edits = sorted(kept, key=lambda e: e.start)
        self.protected = [replace(p, start=p.start + delta, end=p.end + delta) if p.start >= end else p
                          for p in self.protected]
        # an earlier rephrasing inside the rewrite is absorbed by it; later ones move
        self.movable = [replace(m, start=m.start + delta, end=m.end + delta) if m.start >= end else m
                        for m in self.movable if not (start <= m.start and m.end <= end and (m.end > m.start or start < end))]

    def _source_original(self, src_start: int, src_end: int) -> str:
        """The input text of ``[src_start, src_end)`` with each earlier rephrasing it covers put
        back to the text that rephrasing replaced."""
        src = self.doc.text
        pieces, cur = [], src_start
        for m in sorted(self.doc.spans, key=span_order):
            if m.label == REPHRASED and m.original is not None and src_start <= m.start and m.end <= src_end \
                    and m.start >= cur:
                pieces += [src[cur:m.start], m.original]
                cur = m.end
        pieces.append(src[cur:src_end])
        return "".join(pieces)

    def _orig_offset(self, src_pos: int) -> int | None:
        """Offset in the original document of a position of the input text outside its spans."""
        before = [s for s in self.doc.spans if s.end <= src_pos]
        if not before:
            return src_pos
        last = max(before, key=lambda s: s.end)
        return None if last.orig_end is None else last.orig_end + (src_pos - last.end)

    def document(self, meta: dict[str, Any]) -> Document:
        spans = list(self.protected) + list(self.movable)
        for e in self.edits:
            o_s, o_e = self._orig_offset(e.src_start), self._orig_offset(e.src_end)
            spans.append(Span(e.start, e.end, REDACTED_LABEL if e.redacted else REPHRASED,
                              replacement=self.text[e.start:e.end],
                              original=self._source_original(e.src_start, e.src_end),
                              orig_start=o_s if o_e is not None else None,
                              orig_end=o_e if o_s is not None else None))
        return Document(self.doc.id, self.text, subject=self.doc.subject,
                        spans=tuple(sorted(spans, key=span_order)),
                        meta={**dict(self.doc.meta), "delinker": meta})


def cuts(a: int, b: int, bs: int, be: int) -> bool:
    """Whether the blocked range ``[bs, be)`` cuts the range ``[a, b)``: it overlaps it, or, empty
    (a suppression), lies strictly inside it."""
    return (bs < b and a < be) or a < bs == be < b


def whole_rephrasings(targets: Sequence[tuple[int, int]], movable: Sequence[Any],
                      blocked: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``targets`` (sorted, not overlapping) made to take each earlier rephrasing (``movable``
    spans) whole or leave it alone: a target that reaches into part of one (after the cuts around
    the masks, or the trimming of its punctuation) grows to cover it, or, where covering it would
    reach a ``blocked`` range, gives that part up. Rewriting part of a rephrasing would leave two
    records crossing each other, which no release may hold."""
    def reaches_blocked(s: int, e: int) -> bool:
        return any(cuts(s, e, bs, be) for bs, be in blocked)

    out = []
    for a, b in targets:
        for _ in range(2 * len(movable) + 1):  # each pass covers or gives up one rephrasing
            part = next((m for m in movable if covers_part(a, b, m)), None)
            if part is None:
                break
            s, e = min(a, part.start), max(b, part.end)
            if not reaches_blocked(s, e):
                a, b = s, e
            elif part.start <= a:
                a = part.end
            else:
                b = part.start
            if b <= a:
                break
        if b > a:
            out.append((a, b))
    return merge_ranges(out)
