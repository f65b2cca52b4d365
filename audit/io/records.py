"""Document records (a JSON object or a CSV row) and their annotation spans, validated into
:class:`~audit.core.data.Document` and :class:`~audit.core.data.Span`, every problem recorded."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from audit.core.data import Document, Span, span_order
from audit.core.errors import Problems
from audit.core.resultshape import control_characters
from audit.core.safejson import tree_problem

_SPAN_FIELDS = frozenset(Span.__dataclass_fields__)
_LABEL_ALIASES = ("entity_type", "type")
_IGNORED_SPAN_KEYS = frozenset({"text", "span_text"})  # span_text is checked against the text (make_span)


def as_id(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def id_problem(value: str, what: str = "id") -> str:
    """What is wrong with an id (or a subject, a TRI name) that holds control characters (a
    newline, CR, ESC, NUL, a bidirectional override...): logs, tables and CI annotations print
    ids, so one such character could forge a line there. Empty when there is none."""
    found = control_characters(value)
    if not found:
        return ""
    return (f"{what} {value[:80]!r} holds control character(s) {', '.join(repr(c) for c in found)}: an id never "
            "does (logs, tables and CI annotations print it); remove them")


def option_of(field: str) -> str:
    """How a user names the column of ``field``: the command-line option and, in Python, the
    Spec's ``Columns`` (``audit``, ``attack``, ``utility``) or ``sanitize``'s keyword (an audit
    spec file says ``columns: {field: name}``)."""
    return f"--{field}-column, Columns({field}=...) or sanitize({field}_column=...) in Python"


def field_name(field: str, columns: Mapping[str, str] | None) -> str:
    """How a message names the field ``field`` of a record: ``'text'``, or the column the user
    named for it with the option that named it."""
    column = (columns or {}).get(field)
    return repr(field) if column is None else f"{column!r} (named for the {field} by {option_of(field)})"


def record_to_doc(rec: Any, problems: Problems, *, line: int | None = None, item: int | None = None,
                  seen: dict[str, int | None], columns: Mapping[str, str] | None = None) -> Document | None:
    """One JSON/CSV record to a Document, or None with problems recorded. ``columns``: the
    columns the user named for the fields (the record is already renamed), for the messages."""
    where = "" if item is None else f"item {item}: "
    name = functools.partial(field_name, columns=columns)
    if not isinstance(rec, dict):
        problems.add(f"{where}expected a JSON object, got {type(rec).__name__}", line=line)
        return None
    wrong = tree_problem(rec)  # every loader alike (a table or a list in memory too): valid Unicode, bounded
    if wrong:
        problems.add(f"{where}{wrong}", line=line, doc_id=as_id(rec.get("id", rec.get("doc_id"))))
        return None
    id_key = "id" if "id" in rec else "doc_id" if "doc_id" in rec else None
    doc_id = _record_id(rec, id_key, problems, where=where, line=line, name=name)
    ok = doc_id is not None
    if doc_id is not None:
        if doc_id in seen:
            first = seen[doc_id]
            at = f" (first at line {first})" if first is not None else ""
            problems.add(f"{where}duplicate id{at}", line=line, doc_id=doc_id)
            ok = False
        else:
            seen[doc_id] = line
    text = rec.get("text")
    if "text" not in rec:
        problems.add(f"{where}missing field {name('text')}", line=line, doc_id=doc_id)
        ok = False
    elif not isinstance(text, str):
        problems.add(f"{where}field {name('text')} must be a string, got {type(text).__name__}", line=line,
                     doc_id=doc_id)
        ok = False
    elif not text.strip():
        problems.add(f"{where}empty text", line=line, doc_id=doc_id)
        ok = False
    subject = rec.get("subject")
    if subject is not None:
        subject = as_id(subject)
        if subject is None:
            problems.add(f"{where}field {name('subject')} must be a non-empty string, got {rec['subject']!r}",
                         line=line, doc_id=doc_id)
            ok = False
        elif id_problem(subject, "subject"):
            problems.add(f"{where}{id_problem(subject, 'subject')}", line=line, doc_id=doc_id)
            ok = False
    elif id_key == "doc_id":
        subject = doc_id
    spans: list[Span] = []
    if rec.get("spans") is not None and ok:
        spans = _parse_spans(rec["spans"], text, problems, line=line, doc_id=doc_id, where=where)
    meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    extra = {k: v for k, v in rec.items() if k not in ("id", "doc_id", "text", "subject", "spans", "meta")}
    if extra:
        meta = {**meta, **extra}
    if not ok or doc_id is None:
        return None
    return Document(doc_id, text, subject=subject, spans=tuple(sorted(spans, key=span_order)), meta=meta)


def _record_id(rec: dict[str, Any], id_key: str | None, problems: Problems, *, where: str, line: int | None,
               name: Any) -> str | None:
    """The id of a record (its ``id_key`` field), or None with the problem recorded: missing,
    empty, not a string or an integer, or holding control characters (:func:`id_problem`)."""
    if id_key is None:
        problems.add(f"{where}missing field {name('id')}", line=line)
        return None
    doc_id = as_id(rec[id_key])
    if doc_id is None:
        problems.add(f"{where}field {name(id_key)} must be a non-empty string, got {rec[id_key]!r}", line=line)
    elif id_problem(doc_id):
        problems.add(f"{where}{id_problem(doc_id)}", line=line)
        return None
    return doc_id


def _parse_spans(raw: Any, text: str, problems: Problems, *, line: int | None, doc_id: str | None,
                 where: str = "", crossing: bool = True) -> list[Span]:
    """Validate and build annotation spans (dicts or ``[start, end, label?]``)."""
    if not isinstance(raw, list):
        problems.add(f"{where}'spans' must be a list, got {type(raw).__name__}", line=line, doc_id=doc_id)
        return []
    spans: list[Span] = []
    for i, item in enumerate(raw):
        tag = f"{where}span {i}"
        if isinstance(item, list):
            if len(item) not in (2, 3):
                problems.add(f"{tag}: a list span is [start, end, label?], got {item!r}", line=line, doc_id=doc_id)
                continue
            fields: dict[str, Any] = {"start": item[0], "end": item[1]}
            if len(item) == 3:
                fields["label"] = item[2]
        elif isinstance(item, dict):
            fields = {k: v for k, v in item.items() if k not in _IGNORED_SPAN_KEYS}
            for alias in _LABEL_ALIASES:
                if alias in fields:
                    value = fields.pop(alias)
                    fields.setdefault("label", value)
            unknown = set(fields) - _SPAN_FIELDS
            if unknown:
                problems.add(f"{tag}: unknown field(s) {', '.join(sorted(unknown))}", line=line, doc_id=doc_id)
                continue
        else:
            problems.add(f"{tag}: expected an object or a list, got {item!r}", line=line, doc_id=doc_id)
            continue
        span = make_span(fields, len(text), problems, tag=tag, line=line, doc_id=doc_id, text=text,
                         span_text=item.get("span_text") if isinstance(item, dict) else None)
        if span is not None:
            spans.append(span)
    if crossing:
        for a, b in crossing_pairs(spans):
            problems.add(f"{where}spans [{a.start}, {a.end}) and [{b.start}, {b.end}) overlap without one "
                         "containing the other", line=line, doc_id=doc_id)
    return spans


def make_span(fields: dict[str, Any], n: int, problems: Problems, *, tag: str, line: int | None,
              doc_id: str | None, text: str | None = None, span_text: Any = None) -> Span | None:
    """A span from its ``fields``, or None with the problem recorded. ``span_text`` (TAB's mentions
    carry one) must be the text at the span's offsets, whitespace aside (:func:`span_text_problem`):
    offsets that disagree with it would mask the wrong words. A release record's span (one with an
    ``original``) is checked against its replacement instead (below)."""
    if "start" not in fields or "end" not in fields:
        problems.add(f"{tag}: needs 'start' and 'end'", line=line, doc_id=doc_id)
        return None
    start, end = fields["start"], fields["end"]
    for key in ("start", "end", "orig_start", "orig_end"):
        v = fields.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            problems.add(f"{tag}: {key!r} must be an integer, got {v!r}", line=line, doc_id=doc_id)
            return None
    for key in ("label", "entity_id", "identifier_type", "replacement", "original"):
        v = fields.get(key)
        if v is not None and not isinstance(v, str):
            if key in ("label", "entity_id") and isinstance(v, int) and not isinstance(v, bool):
                fields[key] = str(v)
            else:
                problems.add(f"{tag}: {key!r} must be a string, got {v!r}", line=line, doc_id=doc_id)
                return None
    if fields.get("label") is None:
        fields["label"] = ""
    if end < start:
        problems.add(f"{tag}: end {end} is before start {start}", line=line, doc_id=doc_id)
        return None
    if start < 0 or end > n:
        problems.add(f"{tag}: [{start}, {end}) is outside the text (length {n})", line=line, doc_id=doc_id)
        return None
    if span_text is not None and text is not None and fields.get("original") is None:
        wrong = span_text_problem(span_text, text, start, end)
        if wrong:
            problems.add(f"{tag}: {wrong}", line=line, doc_id=doc_id)
            return None
    if fields.get("original") is not None and text is not None:
        # A release record: what stands in the text at its offsets is the replacement ("" for a
        # suppression, which Span.to_dict leaves out). A replacement that is not there means
        # offsets gone wrong: the attacks would block the wrong words.
        actual = text[start:end]
        if fields.get("replacement") is None:
            fields["replacement"] = actual
        elif fields["replacement"] != actual:
            problems.add(f"{tag}: the replacement {fields['replacement'][:40]!r} is not the text at its offsets "
                         f"[{start}, {end}), which is {actual[:40]!r} (a release record's start and end locate "
                         "its replacement in the released text)", line=line, doc_id=doc_id)
            return None
    return Span(**fields)


def span_text_problem(expected: Any, text: str, start: int, end: int) -> str:
    """What is wrong with a span's ``span_text`` ("" when nothing): it must be a string equal to
    ``text[start:end]`` once runs of whitespace are made one space and the ends stripped (a line
    break where the annotator's copy has a space, or a space kept at one end, is the same
    mention); any other difference means offsets that point elsewhere."""
    if not isinstance(expected, str):
        return f"'span_text' must be a string, got {expected!r}"
    actual = text[start:end]
    if expected == actual or " ".join(expected.split()) == " ".join(actual.split()):
        return ""
    return (f"its span_text {expected[:60]!r} is not the text at its offsets [{start}, {end}), which is "
            f"{actual[:60]!r}: the offsets point elsewhere (fix them, or the span_text)")


def crossing_pairs(spans: Iterable[Span]) -> Iterator[tuple[Span, Span]]:
    """Pairs of spans that partially overlap (neither contains the other)."""
    stack: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        while stack and stack[-1].end <= span.start:
            stack.pop()
        if stack and span.end > stack[-1].end:
            yield stack[-1], span
            continue  # report once, do not nest it
        stack.append(span)


def top_duplicates(data: Any, problems: Problems) -> None:
    """Record the keys ``data`` (a mapping made by a parser that remembers them in
    ``duplicates``) gives twice. The JSON files read by :mod:`audit.io.detect` never have any:
    :func:`audit.core.safejson.loads` refuses a key given twice when it parses them."""
    for key in getattr(data, "duplicates", ()):
        problems.add("duplicate id (the key appears more than once)", doc_id=key)
