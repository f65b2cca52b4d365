"""Which format a file is in (:data:`FORMATS`), from its extension and its content, and the
reading helpers every format shares (JSON with duplicate keys refused, CSV headers, the
errors for unreadable or non-UTF-8 files)."""

from __future__ import annotations

import csv
import functools
import io
import json
import os
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from audit.core import safejson
from audit.core.errors import AnonauditError, DataError, Problem, not_utf8_message, wide_encoding
from audit.core.files import read_input

P = ParamSpec("P")
R = TypeVar("R")

FORMATS: dict[str, str] = {
    "jsonl": "one JSON document per line: id, text, subject?, spans?",
    "csv": "CSV with columns id, text, subject?, spans (JSON string)?",
    "parquet": "Parquet with columns id, text, subject?, spans? (needs anonaudit[pandas])",
    "json-map": "a JSON object {id: text}; subject = id",
    "json-list": "a JSON list of document objects (id or doc_id, text, subject?, spans?)",
    "tab": "TAB JSON: documents with annotations per annotator",
    "tri": "TRI dataframe: name, public_knowledge, one text column per method",
    "spans": "span file {doc_id: [[start, end, replacement?], ...]} applied to originals",
}


def sniff(source: str, format: str | None = None) -> tuple[str, Any]:
    """``(format, parsed JSON or None)``; validates an explicit ``format``."""
    if format is not None and format not in FORMATS:
        raise AnonauditError(f"unknown format {format!r}; choose one of: {', '.join(FORMATS)}")
    p = Path(source)
    raw = read_bytes(source)
    head = raw[:4096]
    ext = p.suffix.lower()
    if format == "parquet" or (format is None and (ext in (".parquet", ".pq") or head.startswith(b"PAR1"))):
        return "parquet", None  # binary: none of the text checks below apply
    wide = wide_encoding(head)
    if wide:
        raise DataError(Problem(source, not_utf8_message(wide)))
    if not head.lstrip(b"\xef\xbb\xbf").strip():
        raise DataError(Problem(source, "the file is empty"))
    if format in ("jsonl", "csv"):
        return format, None
    if format == "tri" and ext in (".csv", ".tsv"):
        return "tri", None
    if format is None:
        if ext in (".jsonl", ".ndjson"):
            return "jsonl", None
        if ext in (".csv", ".tsv"):
            header = csv_header(source)
            return ("tri" if {"name", "public_knowledge"} <= set(header) else "csv"), None
        first = head.lstrip(b"\xef\xbb\xbf").lstrip()[:1]
        if ext != ".json" and first not in (b"{", b"["):
            header = csv_header(source)
            if "text" in header or {"name", "public_knowledge"} <= set(header):
                return ("tri" if "name" in header and "public_knowledge" in header else "csv"), None
            raise AnonauditError(f"{source}: cannot tell the format from the name or content; "
                                 f"pass --format ({', '.join(FORMATS)})")
        if first == b"{" and _looks_like_jsonl(source):
            return "jsonl", None
    data = _read_json(source)
    if format is not None:
        return format, data
    return _json_kind(data, source), data


#: The bytes of each input read in the current :func:`read_once` scope, by absolute path.
_READ: ContextVar[dict[str, bytes] | None] = ContextVar("anonaudit_io_read", default=None)


def read_once(fn: Callable[P, R]) -> Callable[P, R]:
    """Run ``fn`` (a loader) in a scope in which each input is opened and read once: format
    detection, the header checks and the loader all parse the same bytes, so a large file is not
    read three times and a file changed in between cannot be detected as one format and loaded
    as another. The bytes are let go when the outermost scope ends."""
    @functools.wraps(fn)
    def scoped(*args: P.args, **kwargs: P.kwargs) -> R:
        if _READ.get() is not None:
            return fn(*args, **kwargs)
        token = _READ.set({})
        try:
            return fn(*args, **kwargs)
        finally:
            _READ.reset(token)
    return scoped


def read_bytes(source: str) -> bytes:
    """The whole content of an input: a regular file once per :func:`read_once` scope, a pipe or
    FIFO once per process (:func:`audit.core.files.read_input`); a folder, a device or a named pipe
    that nothing writes to is a :class:`DataError` naming it."""
    memo = _READ.get()
    key = os.path.abspath(source)
    if memo is not None and key in memo:
        return memo[key]
    data = _read(source)
    if memo is not None:
        memo[key] = data
    return data


def _read(source: str) -> bytes:
    try:
        return read_input(source)
    except FileNotFoundError:
        raise DataError(Problem(source, "file not found")) from None
    except IsADirectoryError:
        raise DataError(Problem(source, "is a folder, not a file")) from None
    except OSError as exc:
        raise unreadable(source, exc) from None


def read_text(source: str) -> str:
    """The UTF-8 text of an input (a leading byte order mark dropped); a :class:`DataError`
    naming the line of the first byte that is not UTF-8."""
    try:
        return read_bytes(source).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise utf8_error(source) from None


#: Keys that make a one-line JSON object a document record (JSONL), not a map {id: text}.
RECORD_KEYS = frozenset({"id", "doc_id", "text"})


def _looks_like_jsonl(source: str) -> bool:
    """True when the first line is a complete JSON object and more content follows, or when it
    is the only line and holds a record's keys (``id``, ``doc_id``, ``text``): a one-document
    JSONL file, which a map ``{id: text}`` would read as two documents named ``id`` and ``text``."""
    text = read_bytes(source)[:1 << 20].decode("utf-8-sig", errors="replace")
    first, _, rest = text.lstrip().partition("\n")
    try:
        record = json.loads(first)
    except (ValueError, RecursionError):
        return False
    if not isinstance(record, dict):
        return False
    return bool(rest[:64].strip()) or bool(RECORD_KEYS & set(record))


def _json_kind(data: Any, source: str) -> str:
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
        if any(isinstance(v, str) for v in values) and not any(isinstance(v, list) for v in values):
            return "json-map"  # texts: the loader names each value that is not one
        # Neither {id: text} nor {doc_id: [[start, end], ...]}: say so instead of guessing.
        odd = [(k, v) for k, v in data.items() if not isinstance(v, (str, list))]
        key, value = odd[0] if odd else next((k, v) for k, v in data.items() if isinstance(v, str))
        raise DataError(Problem(source, "a JSON object that is neither documents {id: text} nor a span file "
                                        "{doc_id: [[start, end, replacement?], ...]}: the value of "
                                        f"{key!r} is {_kind_of(value)}; give --format if it is one of "
                                        f"{', '.join(FORMATS)}"))
    return "json-list"  # validation reports the wrong top-level type


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return "a text, beside span lists"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def _read_json(source: str) -> Any:
    text = read_text(source)
    try:
        return safejson.loads(text, source)
    except json.JSONDecodeError as exc:
        raise DataError(Problem(source, f"invalid JSON at column {exc.colno}: {exc.msg}", line=exc.lineno)) from None


def unreadable(source: str, exc: OSError) -> DataError:
    """A DataError for a file the system refused to read (permissions, I/O)."""
    return DataError(Problem(source, f"cannot read the file: {exc.strerror or exc}"))


def utf8_error(source: str) -> DataError:
    """A DataError naming the line of the first byte that is not UTF-8."""
    raw = read_bytes(source)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        return DataError(Problem(source, f"not valid UTF-8 text (byte {col} of the line); save the file as UTF-8",
                                 line=line))
    return DataError(Problem(source, "not valid UTF-8 text; save the file as UTF-8"))


def csv_header(source: str) -> list[str]:
    try:
        row = next(csv.reader(io.StringIO(read_text(source), newline=""), delimiter=delimiter(source)), [])
    except csv.Error:
        return []
    return [c.strip() for c in row]


def delimiter(source: str) -> str:
    return "\t" if source.lower().endswith(".tsv") else ","
