"""The JSON document formats: a map ``{id: text}``, a list of document objects, and TAB
(documents with entity mentions per annotator)."""

from __future__ import annotations

import dataclasses
from typing import Any

from audit.core.data import Document, Span
from audit.core.errors import DataError, Problem, Problems
from audit.io.records import id_problem, make_span, record_to_doc


def load_json_map(source: str, data: Any) -> list[Document]:
    problems = Problems(source)
    if not isinstance(data, dict):
        raise DataError(Problem(source, f"expected a JSON object {{id: text}}, got a {type(data).__name__}"))
    docs = []
    for doc_id, text in data.items():
        if not isinstance(text, str):
            problems.add(f"the value must be a text string, got {type(text).__name__}", doc_id=doc_id)
        elif not doc_id.strip():
            problems.add("empty id")
        elif id_problem(doc_id):
            problems.add(id_problem(doc_id))
        elif not text.strip():
            problems.add("empty text", doc_id=doc_id)
        else:
            docs.append(Document(doc_id, text, subject=doc_id))
    if not docs and not problems:
        problems.add("no documents in the file")
    problems.raise_if_any()
    return docs


def load_json_list(source: str, data: Any) -> list[Document]:
    problems = Problems(source)
    if not isinstance(data, list):
        raise DataError(Problem(source, f"expected a JSON list of documents, got a {type(data).__name__}"))
    seen: dict[str, int | None] = {}
    docs = []
    for i, rec in enumerate(data):
        doc = record_to_doc(rec, problems, item=i, seen=seen)
        if doc is not None:
            docs.append(doc)
    if not docs and not problems:
        problems.add("no documents in the file")
    problems.raise_if_any()
    return docs


def load_tab(source: str, data: Any, annotator: str | None) -> list[Document]:
    problems = Problems(source)
    if not isinstance(data, list):
        raise DataError(Problem(source, f"expected a TAB JSON list of documents, got a {type(data).__name__}"))
    seen: dict[str, int | None] = {}
    docs: list[Document] = []
    annotators_seen: set[str] = set()
    for i, rec in enumerate(data):
        base = {k: v for k, v in rec.items() if k != "annotations"} if isinstance(rec, dict) else rec
        doc = record_to_doc(base, problems, item=i, seen=seen)
        if doc is None:
            continue
        where = f"item {i}: "
        annotations = rec.get("annotations") or {}
        if not isinstance(annotations, dict):
            problems.add(f"{where}'annotations' must be an object {{annotator: ...}}", doc_id=doc.id)
            continue
        annotators_seen.update(annotations)
        chosen = [annotator] if annotator is not None else list(annotations)
        spans: list[Span] = []
        gold: list[dict[str, Any]] = []  # every annotator's mentions, for TAE's per-annotator counts
        offsets: set[tuple[int, int]] = set()
        for ann in chosen:
            block = annotations.get(ann)
            if block is None:
                continue
            mentions = block.get("entity_mentions") if isinstance(block, dict) else None
            if not isinstance(mentions, list):
                problems.add(f"{where}annotator {ann!r} has no 'entity_mentions' list", doc_id=doc.id)
                continue
            for j, m in enumerate(mentions):
                tag = f"{where}annotator {ann!r} mention {j}"
                if not isinstance(m, dict):
                    problems.add(f"{tag}: expected an object", doc_id=doc.id)
                    continue
                fields = {"start": m.get("start_offset"), "end": m.get("end_offset"),
                          "label": m.get("entity_type") or "", "entity_id": m.get("entity_id"),
                          "identifier_type": m.get("identifier_type")}
                bad = _tae_mention_problem(m)
                if bad:
                    problems.add(f"{tag}: {bad}", doc_id=doc.id)
                    continue
                span = make_span(fields, len(doc.text), problems, tag=tag, line=None, doc_id=doc.id, text=doc.text,
                                 span_text=m.get("span_text"))
                if span is not None:
                    gold.append({"annotator": ann, "start": span.start, "end": span.end, "entity_type": span.label,
                                 "entity_id": span.entity_id, "identifier_type": span.identifier_type})
                if span is not None and (span.start, span.end) not in offsets:
                    offsets.add((span.start, span.end))
                    spans.append(span)
        doc = doc.with_spans(spans)
        docs.append(dataclasses.replace(doc, meta={**doc.meta, "annotations": gold}) if gold else doc)
    if annotator is not None and annotator not in annotators_seen:
        names = ", ".join(sorted(annotators_seen)) or "(none)"
        problems.add(f"no annotations by annotator {annotator!r}; annotators in this file: {names}")
    if not docs and not problems:
        problems.add("no documents in the file")
    problems.raise_if_any()
    return docs


#: The identifier types of TAE's (and TAB's) annotations.
TAE_IDENTIFIER_TYPES = ("DIRECT", "QUASI", "NO_MASK")


def _tae_mention_problem(m: dict[str, Any]) -> str | None:
    """What is wrong with a TAE mention's fields, named as the file names them (None: nothing)."""
    if m.get("start_offset") is None or m.get("end_offset") is None:
        return "needs 'start_offset' and 'end_offset'"
    for key in ("start_offset", "end_offset"):
        if not isinstance(m[key], int) or isinstance(m[key], bool):
            return f"{key!r} must be an integer, got {m[key]!r}"
    for key in ("entity_type", "entity_id", "identifier_type"):
        v = m.get(key)
        if v is not None and not isinstance(v, str) and not (key == "entity_id" and isinstance(v, int)):
            return f"{key!r} must be a string, got {v!r}"
    kind = m.get("identifier_type")
    if kind is not None and kind not in TAE_IDENTIFIER_TYPES:
        return f"'identifier_type' must be one of {', '.join(TAE_IDENTIFIER_TYPES)}, got {kind!r}"
    return None
