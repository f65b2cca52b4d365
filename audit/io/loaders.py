"""Read corpora and releases from the file formats people actually have.

Formats (:data:`FORMATS`), detected from the extension and the content, or named
explicitly (``--format``):

``jsonl``
    One JSON object per line: ``id`` (``doc_id`` accepted), ``text``, optional
    ``subject`` and ``spans``. A span is ``{"start", "end", "label", ...}`` (any
    field of :class:`~audit.core.data.Span`; ``entity_type``/``type`` are read as
    ``label``) or a list ``[start, end, label?]``. Other keys go to ``meta``.
    Read line by line, so large files stream.
``csv``
    The same columns in a CSV file (``.tsv``: tab-separated); ``spans`` is a JSON
    string column.
``json-map``
    ``{id: text}`` (e.g. TAB background files); subject = id.
``json-list``
    A JSON list of document objects, as in JSONL (TAB's text-only corpus uses
    ``doc_id``; a record with ``doc_id`` and no ``subject`` gets subject = doc_id,
    because each TAB document is about one individual).
``tab``
    TAB JSON: ``[{doc_id, text, annotations: {annotator: {entity_mentions: [...]}}}]``.
    Mentions become spans (label = ``entity_type``, with ``entity_id`` and
    ``identifier_type``). ``annotator=NAME`` keeps one annotator; by default the
    annotators are merged, identical offsets kept once (first annotator wins).
    Overlaps between mentions are kept as they are (TAB has nested mentions and
    annotators disagree); sanitizing keeps the outermost. Subject = doc_id.
``tri``
    The TRI dataframe layout: one row per individual with ``name`` (= subject and
    id), ``public_knowledge`` (background text) and one text column per method.
    A JSON list of records, a pandas ``to_json`` dict (orient ``columns``,
    ``index``, ``split`` or ``table``) or a CSV. :func:`load_tri` returns the
    background corpus and one release per method (one document per individual
    with a non-empty cell); :func:`load_corpus` returns the background corpus.
``spans``
    A span file ``{doc_id: [[start, end, replacement?], ...]}`` applied to
    original documents with :func:`audit.core.data.sanitize_corpus` (sorted by start,
    outermost of nested spans kept, no or empty replacement = suppression). Each
    released document records its applied spans (offsets in the sanitized text,
    ``original``, ``orig_start``/``orig_end``). Span files carry no labels: an
    applied span's ``label``/``entity_id``/``identifier_type`` are copied from
    the original's gold span with the same offsets when there is one, else the
    label is ``""`` (in TAB's ``*_Entity`` files the label is in ``replacement``).

Every problem in an input is collected into one :class:`~audit.core.errors.DataError`
naming the file, the line (JSONL, CSV, invalid JSON) or the document.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from audit.core.data import Corpus, Document, Release, Span, sanitize_corpus, span_order
from audit.core.errors import AnonauditError, DataError, Problem, Problems
from audit.core.files import atomic_open

FORMATS: dict[str, str] = {
    "jsonl": "one JSON document per line: id, text, subject?, spans?",
    "csv": "CSV with columns id, text, subject?, spans (JSON string)?",
    "json-map": "a JSON object {id: text}; subject = id",
    "json-list": "a JSON list of document objects (id or doc_id, text, subject?, spans?)",
    "tab": "TAB JSON: documents with annotations per annotator",
    "tri": "TRI dataframe: name, public_knowledge, one text column per method",
    "spans": "span file {doc_id: [[start, end, replacement?], ...]} applied to originals",
}

_SPAN_FIELDS = frozenset(Span.__dataclass_fields__)
_LABEL_ALIASES = ("entity_type", "type")
_IGNORED_SPAN_KEYS = frozenset({"text", "span_text"})
_TRI_SKIP = {"name", "public_knowledge", "", "index", "level_0"}


# --------------------------------------------------------------------------- public API


def parse_release_spec(spec: str) -> tuple[str | None, str]:
    """Split ``NAME=PATH`` into ``(NAME, PATH)``; a plain ``PATH`` gives ``(None, PATH)``.

    File names may contain ``=`` (``TAB_test_BK=Original.json``): a spec that is an
    existing file, or whose part before ``=`` contains a path separator, is a path.
    """
    if os.path.exists(spec) or "=" not in spec:
        return None, spec
    name, path = spec.split("=", 1)
    if "/" in name or os.sep in name or not name.strip():
        return None, spec
    return name.strip(), path


def detect_format(path: str | os.PathLike) -> str:
    """The format of ``path`` (one of :data:`FORMATS`), from its extension and content."""
    return _sniff(str(path))[0]


def load_corpus(path: str | os.PathLike, format: str | None = None, *, name: str | None = None,
                annotator: str | None = None) -> Corpus:
    """Load documents from ``path`` (format detected unless given).

    A TRI file gives its background corpus (``public_knowledge``); a span file
    cannot be loaded alone (it needs originals: use :func:`load_releases`).
    """
    source = str(path)
    fmt, data = _sniff(source, format)
    name = name or Path(source).stem
    if fmt == "spans":
        raise AnonauditError(
            f"{source}: this is a span file {{doc_id: [[start, end, replacement?], ...]}}; it is applied "
            "to the original documents: pass them with --originals FILE")
    if annotator is not None and fmt != "tab":
        raise AnonauditError(f"{source}: --annotator applies to TAB files only (this file is {fmt})")
    if fmt == "tri":
        return _load_tri(source, data)[0].rename(name)
    return Corpus(_load_documents(source, fmt, data, annotator), name=name, source=source)


def _load_documents(source: str, fmt: str, data: Any, annotator: str | None = None) -> list[Document]:
    if fmt == "jsonl":
        return _load_jsonl(source)
    if fmt == "csv":
        return _load_csv(source)
    if fmt == "json-map":
        return _load_json_map(source, data)
    if fmt == "json-list":
        return _load_json_list(source, data)
    return _load_tab(source, data, annotator)


def load_releases(spec: str, *, originals: Corpus | None = None, format: str | None = None) -> list[Release]:
    """Load the release(s) named by a command-line ``spec`` (``NAME=PATH`` or ``PATH``; see
    :func:`parse_release_spec`). Code that has the name and the path apart calls
    :func:`load_release_file`, which never splits a string."""
    name, path = parse_release_spec(spec)
    return load_release_file(path, name=name, originals=originals, format=format)


def load_release_file(path: str | os.PathLike, *, name: str | None = None, originals: Corpus | None = None,
                      format: str | None = None) -> list[Release]:
    """Load the release(s) in the file ``path``, named ``name`` (default: the file stem).

    A span file is applied to ``originals``. A TRI file gives one release per
    method column (``name`` selects the column of that name); its releases are
    aligned when every name is an id of ``originals``. Other formats give one
    release; when ``originals`` are given, its ids must all be among them.
    Name and path are separate arguments, so either may contain ``=``.
    """
    path = str(path)
    fmt, data = _sniff(path, format)
    if fmt == "tri":
        _, releases = _load_tri(path, data)
        if name is not None:
            chosen = [r for r in releases if r.name == name]
            if not chosen:
                cols = ", ".join(r.name for r in releases) or "(none)"
                raise AnonauditError(f"{path}: no method column {name!r} in this TRI file; columns: {cols}")
            releases = chosen
        if originals is not None:
            releases = [Release(r.name, r.corpus, aligned=all(d.id in originals for d in r.corpus),
                                source=path) for r in releases]
        return releases
    name = name or Path(path).stem
    if fmt == "spans":
        if originals is None:
            raise AnonauditError(
                f"{path}: this is a span file {{doc_id: [[start, end, replacement?], ...]}}; it is applied "
                "to the original documents: pass them with --originals FILE")
        return [_apply_span_file(path, data, originals, name)]
    corpus = Corpus(_load_documents(path, fmt, data), name=name, source=path)
    if originals is not None:
        problems = Problems(path)
        for doc in corpus:
            if doc.id not in originals:
                problems.add(f"id not found in the originals ({originals.source or originals.name})",
                             doc_id=doc.id)
        problems.raise_if_any()
    return [Release(name=name, corpus=corpus, aligned=True, source=path)]


def load_tri(path: str | os.PathLike) -> tuple[Corpus, list[Release]]:
    """Load a TRI dataframe file: ``(background corpus, one release per method)``."""
    source = str(path)
    fmt, data = _sniff(source, "tri")
    return _load_tri(source, data)


def save_jsonl(corpus: Iterable[Document], path: str | os.PathLike) -> Path:
    """Write documents as JSONL (one per line, spans included), atomically."""
    path = Path(path)
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as fh:
        for doc in corpus:
            fh.write(json.dumps(doc.to_dict(), ensure_ascii=False))
            fh.write("\n")
    return path


# --------------------------------------------------------------------------- detection


def _sniff(source: str, format: str | None = None) -> tuple[str, Any]:
    """``(format, parsed JSON or None)``; validates an explicit ``format``."""
    if format is not None and format not in FORMATS:
        raise AnonauditError(f"unknown format {format!r}; choose one of: {', '.join(FORMATS)}")
    p = Path(source)
    if not p.exists():
        raise DataError(Problem(source, "file not found"))
    if p.is_dir():
        raise DataError(Problem(source, "is a folder, not a file"))
    try:
        with open(p, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise _unreadable(source, exc) from None
    if not head.lstrip(b"\xef\xbb\xbf").strip():
        raise DataError(Problem(source, "the file is empty"))
    ext = p.suffix.lower()
    if format in ("jsonl", "csv"):
        return format, None
    if format == "tri" and ext in (".csv", ".tsv"):
        return "tri", None
    if format is None:
        if ext in (".jsonl", ".ndjson"):
            return "jsonl", None
        if ext in (".csv", ".tsv"):
            header = _csv_header(source)
            return ("tri" if {"name", "public_knowledge"} <= set(header) else "csv"), None
        first = head.lstrip(b"\xef\xbb\xbf").lstrip()[:1]
        if ext != ".json" and first not in (b"{", b"["):
            header = _csv_header(source)
            if "text" in header or {"name", "public_knowledge"} <= set(header):
                return ("tri" if "name" in header and "public_knowledge" in header else "csv"), None
            raise AnonauditError(f"{source}: cannot tell the format from the name or content; "
                                 f"pass --format ({', '.join(FORMATS)})")
        if first == b"{" and _looks_like_jsonl(source):
            return "jsonl", None
    data = _read_json(source)
    if format is not None:
        return format, data
    return _json_kind(data), data


def _looks_like_jsonl(source: str) -> bool:
    """True when the first line is a complete JSON object and more content follows."""
    with open(source, encoding="utf-8-sig", errors="replace") as fh:
        first = fh.readline()
        rest = fh.read(64)
    if not rest.strip():
        return False
    try:
        return isinstance(json.loads(first), dict)
    except ValueError:
        return False


def _json_kind(data: Any) -> str:
    if isinstance(data, list):
        records = [r for r in data[:50] if isinstance(r, dict)]
        if any("annotations" in r for r in records):
            return "tab"
        if records and all("name" in r and "public_knowledge" in r for r in records):
            return "tri"
        return "json-list"
    if isinstance(data, dict):
        if not data:
            return "json-map"
        if isinstance(data.get("data"), list) and ("columns" in data or "schema" in data):
            return "tri"  # pandas orient="split" / "table"
        if "name" in data and "public_knowledge" in data and isinstance(data["name"], (dict, list)):
            return "tri"  # pandas orient="columns"
        values = list(data.values())
        if all(isinstance(v, dict) and "name" in v for v in values):
            return "tri"  # pandas orient="index"
        if all(isinstance(v, list) for v in values):
            return "spans"
        return "json-map"
    return "json-list"  # validation reports the wrong top-level type


def _read_json(source: str) -> Any:
    try:
        with open(source, encoding="utf-8-sig") as fh:
            return json.load(fh, object_pairs_hook=_DupDict.from_pairs)
    except json.JSONDecodeError as exc:
        raise DataError(Problem(source, f"invalid JSON at column {exc.colno}: {exc.msg}", line=exc.lineno)) from None
    except UnicodeDecodeError:
        raise _utf8_error(source) from None
    except OSError as exc:
        raise _unreadable(source, exc) from None


def _unreadable(source: str, exc: OSError) -> DataError:
    """A DataError for a file the system refused to read (permissions, I/O)."""
    return DataError(Problem(source, f"cannot read the file: {exc.strerror or exc}"))


def _utf8_error(source: str) -> DataError:
    """A DataError naming the line of the first byte that is not UTF-8."""
    with open(source, "rb") as fh:
        raw = fh.read()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        return DataError(Problem(source, f"not valid UTF-8 text (byte {col} of the line); save the file as UTF-8",
                                 line=line))
    return DataError(Problem(source, "not valid UTF-8 text; save the file as UTF-8"))


class _DupDict(dict):
    """A JSON object that remembers keys given twice (json keeps only the last)."""

    duplicates: tuple[str, ...] = ()

    @classmethod
    def from_pairs(cls, pairs: list[tuple[str, Any]]) -> dict:
        out = cls(pairs)
        if len(out) != len(pairs):
            seen: set[str] = set()
            out.duplicates = tuple(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        return out


def _csv_header(source: str) -> list[str]:
    try:
        with open(source, encoding="utf-8-sig", newline="") as fh:
            row = next(csv.reader(fh, delimiter=_delimiter(source)), [])
    except UnicodeDecodeError:
        raise _utf8_error(source) from None
    except (OSError, csv.Error):
        return []
    return [c.strip() for c in row]


def _delimiter(source: str) -> str:
    return "\t" if source.lower().endswith(".tsv") else ","


# --------------------------------------------------------------------------- records


def _as_id(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _record_to_doc(rec: Any, problems: Problems, *, line: int | None = None, item: int | None = None,
                   seen: dict[str, int | None]) -> Document | None:
    """One JSON/CSV record to a Document, or None with problems recorded."""
    where = "" if item is None else f"item {item}: "
    if not isinstance(rec, dict):
        problems.add(f"{where}expected a JSON object, got {type(rec).__name__}", line=line)
        return None
    id_key = "id" if "id" in rec else "doc_id" if "doc_id" in rec else None
    if id_key is None:
        problems.add(f"{where}missing field 'id'", line=line)
        doc_id = None
    else:
        doc_id = _as_id(rec[id_key])
        if doc_id is None:
            problems.add(f"{where}field '{id_key}' must be a non-empty string, got {rec[id_key]!r}", line=line)
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
        problems.add(f"{where}missing field 'text'", line=line, doc_id=doc_id)
        ok = False
    elif not isinstance(text, str):
        problems.add(f"{where}field 'text' must be a string, got {type(text).__name__}", line=line, doc_id=doc_id)
        ok = False
    elif not text.strip():
        problems.add(f"{where}empty text", line=line, doc_id=doc_id)
        ok = False
    subject = rec.get("subject")
    if subject is not None:
        subject = _as_id(subject)
        if subject is None:
            problems.add(f"{where}field 'subject' must be a non-empty string, got {rec['subject']!r}",
                         line=line, doc_id=doc_id)
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
        span = _make_span(fields, len(text), problems, tag=tag, line=line, doc_id=doc_id, text=text)
        if span is not None:
            spans.append(span)
    if crossing:
        for a, b in _crossing_pairs(spans):
            problems.add(f"{where}spans [{a.start}, {a.end}) and [{b.start}, {b.end}) overlap without one "
                         "containing the other", line=line, doc_id=doc_id)
    return spans


def _make_span(fields: dict[str, Any], n: int, problems: Problems, *, tag: str, line: int | None,
               doc_id: str | None, text: str | None = None) -> Span | None:
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
    if fields.get("original") is not None and fields.get("replacement") is None and text is not None:
        # A release record: what stands in the text is the replacement ("" for a
        # suppression, which Span.to_dict leaves out).
        fields["replacement"] = text[start:end]
    return Span(**fields)


def _crossing_pairs(spans: Iterable[Span]) -> Iterator[tuple[Span, Span]]:
    """Pairs of spans that partially overlap (neither contains the other)."""
    stack: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        while stack and stack[-1].end <= span.start:
            stack.pop()
        if stack and span.end > stack[-1].end:
            yield stack[-1], span
            continue  # report once, do not nest it
        stack.append(span)


# --------------------------------------------------------------------------- formats


def _load_jsonl(source: str) -> list[Document]:
    problems = Problems(source)
    docs: list[Document] = []
    seen: dict[str, int | None] = {}
    try:
        with open(source, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    problems.add(f"not valid UTF-8 text (byte {exc.start + 1} of the line)", line=lineno)
                    continue
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    problems.add(f"invalid JSON at column {exc.colno}: {exc.msg}", line=lineno)
                    continue
                doc = _record_to_doc(rec, problems, line=lineno, seen=seen)
                if doc is not None:
                    docs.append(doc)
    except OSError as exc:
        raise _unreadable(source, exc) from None
    if not docs and not problems:
        problems.add("no documents in the file")
    problems.raise_if_any()
    return docs


def _open_csv(source: str) -> Iterator[tuple[int, list[str], list[str]]]:
    """Yield ``(line number where the row starts, cells, header)`` for each non-blank CSV row."""
    csv.field_size_limit(max(csv.field_size_limit(), min(sys.maxsize, 2**31 - 1)))
    with open(source, encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh, delimiter=_delimiter(source))
        header = [c.strip() for c in next(reader, [])]
        prev = reader.line_num
        for row in reader:
            start = prev + 1
            prev = reader.line_num
            if any(c.strip() for c in row):
                yield start, row, header


def _load_csv(source: str) -> list[Document]:
    problems = Problems(source)
    docs: list[Document] = []
    seen: dict[str, int | None] = {}
    try:
        header = _csv_header(source)
        missing = [c for c in ("id", "text") if c not in header]
        if missing:
            cols = ", ".join(repr(c) for c in header) or "(none)"
            problems.add(f"missing column(s) {', '.join(missing)}; the header has {cols}", line=1)
            problems.raise_if_any()
        for lineno, row, header in _open_csv(source):
            if len(row) != len(header):
                problems.add(f"row has {len(row)} fields, the header has {len(header)}", line=lineno)
                continue
            rec: dict[str, Any] = {k: v for k, v in zip(header, row) if k}
            if rec.get("subject", None) == "":
                rec.pop("subject")
            spans_raw = rec.get("spans", "")
            if spans_raw.strip():
                try:
                    rec["spans"] = json.loads(spans_raw)
                except json.JSONDecodeError as exc:
                    problems.add(f"column 'spans' is not valid JSON ({exc.msg})", line=lineno, doc_id=rec.get("id"))
                    continue
            else:
                rec.pop("spans", None)
            doc = _record_to_doc(rec, problems, line=lineno, seen=seen)
            if doc is not None:
                docs.append(doc)
    except UnicodeDecodeError:
        raise _utf8_error(source) from None
    except csv.Error as exc:
        raise DataError(Problem(source, f"unreadable CSV: {exc}")) from None
    except OSError as exc:
        raise _unreadable(source, exc) from None
    if not docs and not problems:
        problems.add("no documents in the file")
    problems.raise_if_any()
    return docs


def _top_duplicates(data: Any, problems: Problems) -> None:
    for key in getattr(data, "duplicates", ()):
        problems.add("duplicate id (the key appears more than once)", doc_id=key)


def _load_json_map(source: str, data: Any) -> list[Document]:
    problems = Problems(source)
    if not isinstance(data, dict):
        raise DataError(Problem(source, f"expected a JSON object {{id: text}}, got a {type(data).__name__}"))
    _top_duplicates(data, problems)
    docs = []
    for doc_id, text in data.items():
        if not isinstance(text, str):
            problems.add(f"the value must be a text string, got {type(text).__name__}", doc_id=doc_id)
        elif not doc_id.strip():
            problems.add("empty id")
        elif not text.strip():
            problems.add("empty text", doc_id=doc_id)
        else:
            docs.append(Document(doc_id, text, subject=doc_id))
    if not docs and not problems:
        problems.add("no documents in the file")
    problems.raise_if_any()
    return docs


def _load_json_list(source: str, data: Any) -> list[Document]:
    problems = Problems(source)
    if not isinstance(data, list):
        raise DataError(Problem(source, f"expected a JSON list of documents, got a {type(data).__name__}"))
    seen: dict[str, int | None] = {}
    docs = []
    for i, rec in enumerate(data):
        doc = _record_to_doc(rec, problems, item=i, seen=seen)
        if doc is not None:
            docs.append(doc)
    if not docs and not problems:
        problems.add("no documents in the file")
    problems.raise_if_any()
    return docs


def _load_tab(source: str, data: Any, annotator: str | None) -> list[Document]:
    problems = Problems(source)
    if not isinstance(data, list):
        raise DataError(Problem(source, f"expected a TAB JSON list of documents, got a {type(data).__name__}"))
    seen: dict[str, int | None] = {}
    docs: list[Document] = []
    annotators_seen: set[str] = set()
    for i, rec in enumerate(data):
        base = {k: v for k, v in rec.items() if k != "annotations"} if isinstance(rec, dict) else rec
        doc = _record_to_doc(base, problems, item=i, seen=seen)
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
                if fields["start"] is None or fields["end"] is None:
                    problems.add(f"{tag}: needs 'start_offset' and 'end_offset'", doc_id=doc.id)
                    continue
                span = _make_span(fields, len(doc.text), problems, tag=tag, line=None, doc_id=doc.id)
                if span is not None and (span.start, span.end) not in offsets:
                    offsets.add((span.start, span.end))
                    spans.append(span)
        docs.append(doc.with_spans(spans))
    if annotator is not None and annotator not in annotators_seen:
        names = ", ".join(sorted(annotators_seen)) or "(none)"
        problems.add(f"no annotations by annotator {annotator!r}; annotators in this file: {names}")
    if not docs and not problems:
        problems.add("no documents in the file")
    problems.raise_if_any()
    return docs


# --------------------------------------------------------------------------- TRI


def _tri_records(source: str, data: Any) -> list[tuple[int | None, dict[str, Any]]]:
    """Rows of a TRI file as ``(line or None, record)``, whatever the layout."""
    if data is None:  # CSV
        try:
            return [(line, dict(zip(header, row))) for line, row, header in _open_csv(source)]
        except UnicodeDecodeError:
            raise _utf8_error(source) from None
        except (csv.Error, OSError) as exc:
            raise DataError(Problem(source, f"unreadable CSV: {exc}")) from None
    if isinstance(data, list):
        return [(None, r) for r in data]
    if isinstance(data, dict):
        if isinstance(data.get("data"), list):
            if "columns" in data:  # orient="split"
                cols = data["columns"]
                return [(None, dict(zip(cols, row)) if isinstance(row, list) else row) for row in data["data"]]
            return [(None, r) for r in data["data"]]  # orient="table"
        if "name" in data and isinstance(data["name"], (dict, list)):  # orient="columns"
            columns = {k: (v if isinstance(v, dict) else dict(enumerate(v))) for k, v in data.items()
                       if isinstance(v, (dict, list))}
            index = list(columns["name"])
            return [(None, {c: col.get(i) for c, col in columns.items()}) for i in index]
        if all(isinstance(v, dict) for v in data.values()):  # orient="index"
            return [(None, v) for v in data.values()]
    raise DataError(Problem(source, "not a TRI table: expected records with 'name', 'public_knowledge' and "
                                    "one column per method (JSON records, a pandas to_json dict, or CSV)"))


def _is_number_text(v: Any) -> bool:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return True
    if isinstance(v, str):
        try:
            float(v)
            return True
        except ValueError:
            return False
    return False


def _load_tri(source: str, data: Any) -> tuple[Corpus, list[Release]]:
    problems = Problems(source)
    rows = _tri_records(source, data)
    columns: list[str] = []
    for _, rec in rows:
        if isinstance(rec, dict):
            columns += [c for c in rec if c not in columns]  # first-seen order
    missing = [c for c in ("name", "public_knowledge") if c not in columns]
    if missing:
        cols = ", ".join(map(str, columns)) or "(none)"
        raise DataError(Problem(source, f"not a TRI table: missing column(s) {', '.join(missing)}; columns: {cols}",
                                line=1 if data is None else None))

    def values(col: str) -> list[Any]:
        return [r.get(col) for _, r in rows if isinstance(r, dict) and r.get(col) not in (None, "")]

    methods = []
    for col in columns:
        if col in _TRI_SKIP or str(col).startswith("Unnamed:"):
            continue
        vals = values(col)
        if vals and all(isinstance(v, str) for v in vals) and not all(_is_number_text(v) for v in vals):
            methods.append(col)
    seen: dict[str, int | None] = {}
    names: list[tuple[str, int | None, dict]] = []
    for i, (line, rec) in enumerate(rows):
        where = "" if line is not None else f"row {i}: "
        if not isinstance(rec, dict):
            problems.add(f"{where}expected a record, got {type(rec).__name__}", line=line)
            continue
        name = _as_id(rec.get("name"))
        if name is None:
            problems.add(f"{where}missing or empty 'name'", line=line)
            continue
        if name in seen:
            first = seen[name]
            problems.add(f"{where}duplicate name" + (f" (first at line {first})" if first else ""),
                         line=line, doc_id=name)
            continue
        seen[name] = line
        for col in ["public_knowledge", *methods]:
            v = rec.get(col)
            if v is not None and not isinstance(v, str):
                problems.add(f"{where}column {col!r} must be text, got {type(v).__name__}", line=line, doc_id=name)
        names.append((name, line, rec))
    problems.raise_if_any()

    def corpus(col: str, cname: str) -> Corpus:
        docs = [Document(n, rec[col], subject=n) for n, _, rec in names
                if isinstance(rec.get(col), str) and rec[col].strip()]
        return Corpus(docs, name=cname, source=source)

    background = corpus("public_knowledge", Path(source).stem)
    releases = [Release(name=m, corpus=corpus(m, m), aligned=True, source=source) for m in methods]
    return background, releases


# --------------------------------------------------------------------------- span files


def _apply_span_file(source: str, data: Any, originals: Corpus, name: str) -> Release:
    problems = Problems(source)
    if not isinstance(data, dict):
        raise DataError(Problem(source, f"expected a span file {{doc_id: [[start, end, replacement?], ...]}}, "
                                        f"got a {type(data).__name__}"))
    _top_duplicates(data, problems)
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
        spans_by_id[doc_id] = spans
    problems.raise_if_any()
    return sanitize_corpus(originals, spans_by_id, name=name, source=source)
