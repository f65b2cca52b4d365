"""Span files ``{doc_id: [[start, end, replacement?], ...]}``, applied to the original documents.

Held to the rules of JSONL spans: integer offsets inside the text, ``end`` not before
``start``, and no two spans crossing (overlapping without one containing the other: which
characters are hidden would depend on the order they are applied in). Nested spans are
allowed; the outermost is applied."""

from __future__ import annotations

from typing import Any

from audit.core.data import Corpus, Release, Span, sanitize_corpus
from audit.core.errors import DataError, Problem, Problems
from audit.io.records import crossing_pairs, top_duplicates


def apply_span_file(source: str, data: Any, originals: Corpus, name: str) -> Release:
    problems = Problems(source)
    if not isinstance(data, dict):
        raise DataError(Problem(source, f"expected a span file {{doc_id: [[start, end, replacement?], ...]}}, "
                                        f"got a {type(data).__name__}"))
    top_duplicates(data, problems)
    spans_by_id: dict[str, list[Span]] = {}
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
            tag = f"span {i}"
            if not isinstance(item, list) or len(item) not in (2, 3):
                problems.add(f"{tag}: expected [start, end] or [start, end, replacement], got {item!r}", doc_id=doc_id)
                continue
            start, end = item[0], item[1]
            repl = item[2] if len(item) == 3 else None
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
                problems.add(f"{tag}: start and end must be integers, got {item[:2]!r}", doc_id=doc_id)
                continue
            if repl is not None and not isinstance(repl, str):
                problems.add(f"{tag}: the replacement must be a string, got {repl!r}", doc_id=doc_id)
                continue
            if end < start:
                problems.add(f"{tag}: end {end} is before start {start}", doc_id=doc_id)
                continue
            if start < 0 or end > len(doc.text):
                problems.add(f"{tag}: [{start}, {end}) is outside the original text (length {len(doc.text)})",
                             doc_id=doc_id)
                continue
            g = gold.get((start, end))
            spans.append(Span(start, end, label=g.label if g else "", entity_id=g.entity_id if g else None,
                              identifier_type=g.identifier_type if g else None, replacement=repl or ""))
        for a, b in crossing_pairs(spans):
            problems.add(f"spans [{a.start}, {a.end}) and [{b.start}, {b.end}) overlap without one containing the "
                         "other (characters of one would stay unmasked); merge them or nest one inside the other",
                         doc_id=doc_id)
        spans_by_id[doc_id] = spans
    problems.raise_if_any()
    return sanitize_corpus(originals, spans_by_id, name=name, source=source)
