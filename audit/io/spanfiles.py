"""Span files ``{doc_id: [[start, end, replacement?], ...]}`` (TAE's anonymization files), applied
to the original documents.

Held to the rules of JSONL spans: integer offsets inside the text, ``end`` not before ``start``.
Nested spans are allowed; the outermost is applied. Spans that cross (overlap without one
containing the other) are read as published where their meaning is unambiguous: both suppress
(no replacement, or a blank one, as TAE reads it) or both have the same replacement; they are then
applied as their union, and the release's ``notes`` say how many pairs were merged. Two crossing
spans with different replacements are refused, naming both: which replacement covers the shared
characters would depend on the order they are applied in.

Each released document keeps, in ``meta["span_file"]``, the spans as the file listed them
(``[[start, end], ...]``) when that list is not what was applied (nested, repeated or merged
spans): TAE's token-level precision counts every listed span, repeats included."""

from __future__ import annotations

from typing import Any

from audit.core.data import Corpus, Release, Span, sanitize_corpus
from audit.core.errors import DataError, Problem, Problems
from audit.io.records import crossing_pairs, top_duplicates


def _suppresses(span: Span) -> bool:
    return not (span.replacement or "").strip()


def _mergeable(a: Span, b: Span) -> bool:
    return (_suppresses(a) and _suppresses(b)) or a.replacement == b.replacement


def _parse_item(item: Any, tag: str, text_len: int) -> tuple[tuple[int, int, str | None] | None, str]:
    if not isinstance(item, list) or len(item) not in (2, 3):
        return None, f"{tag}: expected [start, end] or [start, end, replacement], got {item!r}"
    start, end = item[0], item[1]
    repl = item[2] if len(item) == 3 else None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
        return None, f"{tag}: start and end must be integers, got {item[:2]!r}"
    if repl is not None and not isinstance(repl, str):
        return None, f"{tag}: the replacement must be a string, got {repl!r}"
    if end < start:
        return None, f"{tag}: end {end} is before start {start}"
    if start < 0 or end > text_len:
        return None, f"{tag}: [{start}, {end}) is outside the original text (length {text_len})"
    return (start, end, repl), ""


def apply_span_file(source: str, data: Any, originals: Corpus, name: str) -> Release:
    problems = Problems(source)
    if not isinstance(data, dict):
        raise DataError(Problem(source, f"expected a span file {{doc_id: [[start, end, replacement?], ...]}}, "
                                        f"got a {type(data).__name__}"))
    top_duplicates(data, problems)
    spans_by_id: dict[str, list[Span]] = {}
    listed: dict[str, list[list[int]]] = {}
    merged_pairs, merged_docs = 0, 0
    for doc_id, items in data.items():
        doc = originals.get(doc_id)
        if doc is None:
            problems.add(f"id not found in the originals ({originals.source or originals.name})", doc_id=doc_id)
            continue
        if not isinstance(items, list):
            problems.add(f"expected a list of [start, end, replacement?], got {type(items).__name__}", doc_id=doc_id)
            continue
        gold = {(s.start, s.end): s for s in doc.spans}
        spans = []
        for i, item in enumerate(items):
            parsed, problem = _parse_item(item, f"span {i}", len(doc.text))
            if parsed is None:
                problems.add(problem, doc_id=doc_id)
                continue
            start, end, repl = parsed
            g = gold.get((start, end))
            spans.append(Span(start, end, label=g.label if g else "", entity_id=g.entity_id if g else None,
                              identifier_type=g.identifier_type if g else None, replacement=repl or ""))
        crossing = list(crossing_pairs(spans))
        for a, b in crossing:
            if not _mergeable(a, b):
                problems.add(f"spans [{a.start}, {a.end}) replaced by {a.replacement!r} and [{b.start}, {b.end}) "
                             f"replaced by {b.replacement!r} cross (overlap without one containing the other) "
                             "with different replacements: which one covers the characters they share is "
                             "ambiguous; give them one replacement, or nest one inside the other", doc_id=doc_id)
        merged_pairs += len(crossing)
        merged_docs += bool(crossing)
        spans_by_id[doc_id] = spans
        if len(_outer_offsets(spans)) != len(spans):
            listed[doc_id] = [[s.start, s.end] for s in spans]
    problems.raise_if_any()
    release = sanitize_corpus(originals, spans_by_id, name=name, source=source)
    for doc in release.corpus:  # read back, a document with no text is refused: refuse it now
        if not doc.text.strip():
            problems.add("the span file removes the whole text of this document (nothing but whitespace is left), "
                         "and a released document with no text cannot be read back: give the span a placeholder "
                         "(a third item such as \"[REDACTED]\"), or leave the document out of the originals",
                         doc_id=doc.id)
    problems.raise_if_any()
    if listed:
        docs = [d if d.id not in listed else _with_meta(d, listed[d.id]) for d in release.corpus]
        release = Release(release.name, Corpus(docs, name=name, source=source), aligned=True, source=source)
    notes = ()
    if merged_pairs:
        notes = (f"{merged_pairs} pair(s) of crossing spans in {merged_docs} document(s) of {source} were merged "
                 "into their union (both suppress, or both have the same replacement)",)
    return Release(release.name, release.corpus, aligned=True, source=source, notes=notes)


def _outer_offsets(spans: list[Span]) -> list[tuple[int, int]]:
    """The spans a sanitization applies: the outermost, crossing ones merged (as ``outermost``)."""
    out: list[tuple[int, int]] = []
    for s in sorted(spans, key=lambda s: (s.start, -s.end)):
        if out and s.start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], s.end))
        else:
            out.append((s.start, s.end))
    return out


def _with_meta(doc, listed: list[list[int]]):
    import dataclasses

    return dataclasses.replace(doc, meta={**doc.meta, "span_file": listed})
