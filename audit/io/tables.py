"""The line formats: JSONL (read line by line, so large files stream) and CSV/TSV."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator
from typing import Any

from audit.core.data import Document
from audit.core import safejson
from audit.core.errors import DataError, Problem, Problems
from audit.core.safejson import MAX_DEPTH
from audit.io.detect import csv_header, delimiter, read_bytes, read_text, unreadable, utf8_error
from audit.io.frames import absent_columns, check_columns, columns_message, rename_header, rename_record
from audit.io.records import record_to_doc


def load_jsonl(source: str, columns: dict[str, str] | None = None) -> list[Document]:
    columns = check_columns(columns)
    problems = Problems(source)
    docs: list[Document] = []
    seen: dict[str, int | None] = {}
    keys: dict[str, None] = {}  # every key of every record, in order: the columns of the file
    data = read_bytes(source)
    for lineno, raw in enumerate(data.split(b"\n"), 1):
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
            rec = json.loads(line, object_pairs_hook=safejson.unique_keys)
        except safejson.DuplicateKey as exc:
            problems.add(safejson.duplicate_key_message(exc.key), line=lineno)
            continue
        except json.JSONDecodeError as exc:
            problems.add(f"invalid JSON at column {exc.colno}: {exc.msg}", line=lineno)
            continue
        except RecursionError:  # record_to_doc checks the rest of the tree (depth, Unicode)
            problems.add(f"nested deeper than {MAX_DEPTH} levels", line=lineno)
            continue
        if columns and isinstance(rec, dict):
            keys.update(dict.fromkeys(rec))
            rec = rename_record(rec, columns)
        doc = record_to_doc(rec, problems, line=lineno, seen=seen, columns=columns)
        if doc is not None:
            docs.append(doc)
    missing = absent_columns(keys, columns, required=False) if keys else []
    if missing:  # named for a field, in no record: one message, not one per record
        raise DataError(Problem(source, columns_message(missing, keys, "its records have")))
    if not docs and not problems:
        problems.add("no documents in the file")
    problems.raise_if_any()
    return docs


def open_csv(source: str) -> Iterator[tuple[int, list[str], list[str]]]:
    """Yield ``(line number where the row starts, cells, header)`` for each non-blank CSV row.

    Read in csv's strict mode: a quote left open swallows every row after it into one cell, so
    a quote never closed, or closed by one that does not end its field, is a :class:`DataError`
    naming the line where that row (and the quote) began; a header that names one column twice
    is one too (a row as a dict would keep only the last of the two). A quoted field that spans
    lines and closes where it should is read as it is."""
    csv.field_size_limit(max(csv.field_size_limit(), min(sys.maxsize, 2**31 - 1)))
    reader = csv.reader(io.StringIO(read_text(source), newline=""), delimiter=delimiter(source), strict=True)
    prev = 0
    try:
        header = [c.strip() for c in next(reader, [])]
        check_header(source, header)
        prev = reader.line_num
        for row in reader:
            start = prev + 1
            prev = reader.line_num
            if any(c.strip() for c in row):
                yield start, row, header
    except csv.Error as exc:
        raise DataError(Problem(source, quote_problem(str(exc), prev + 1, reader.line_num), line=prev + 1)) from None


def check_header(source: str, header: list[str]) -> None:
    """A :class:`DataError` for a CSV header that names a column twice."""
    seen: set[str] = set()
    for name in header:
        if name and name in seen:
            raise DataError(Problem(source, f"the header names the column {name[:80]!r} twice (only one of the two "
                                            "could be read); rename or remove one", line=1))
        seen.add(name)


def quote_problem(error: str, start: int, end: int) -> str:
    """What a strict CSV reader's ``error`` means for a user: the row at line ``start``."""
    if "unexpected end of data" in error:
        return (f"a quote opened in the row that starts on this line is never closed: every line after it, to the "
                f"end of the file (line {end}), would be read as one cell; close the quote, or double a quote "
                "inside a quoted field (\"\")")
    if "expected after" in error:
        span = f"lines {start}-{end}" if end > start else f"line {start}"
        return (f"a quoted cell of the row that starts on this line is closed by a quote followed by more text "
                f"({span}); a quote left open would swallow the rows after it. Close each quoted cell before "
                "its delimiter, and double a quote inside one (\"\")")
    return f"unreadable CSV: {error}"


#: The longest header the message of a missing column quotes, and the longest cell of it.
HEADER_SHOWN, CELL_SHOWN = 12, 40


def _header_problem(missing: list[str], header: list[str]) -> str:
    """The message of a header without the columns needed. The first line of a file that is not a
    CSV (a JSONL file given ``--format csv``) is a document's text: it is never quoted; a header
    is quoted only when it looks like one (few, short names), else described by its size."""
    first = ",".join(header).lstrip()
    if first.startswith(("{", "[")):
        return ("the first line is not a CSV header: it looks like JSON (a JSONL file? give --format jsonl, or "
                "leave --format out to tell the format by the content)")
    if len(header) > HEADER_SHOWN or any(len(c) > CELL_SHOWN or not c.isprintable() for c in header):
        return columns_message(missing, [f"{len(header)} cells that do not look like column names (not shown: "
                                         "they may be a document's text)"], "the first line has")
    return columns_message(missing, [repr(c) for c in header], "the header has")


def load_csv(source: str, columns: dict[str, str] | None = None) -> list[Document]:
    """A CSV/TSV file; ``columns`` names the columns of the fields (``{"text": "body"}``)."""
    columns = check_columns(columns)
    problems = Problems(source)
    docs: list[Document] = []
    seen: dict[str, int | None] = {}
    try:
        header = csv_header(source)
        missing = absent_columns(header, columns, required=True)
        if missing:
            problems.add(_header_problem(missing, header), line=1)
            problems.raise_if_any()
        for lineno, row, header in open_csv(source):
            header = rename_header(header, columns)
            if len(row) != len(header):
                problems.add(f"row has {len(row)} fields, the header has {len(header)}", line=lineno)
                continue
            rec: dict[str, Any] = {k: v for k, v in zip(header, row) if k}
            if rec.get("subject", None) == "":
                rec.pop("subject")
            spans_raw = rec.get("spans", "")
            if spans_raw.strip():
                try:
                    rec["spans"] = safejson.loads(spans_raw, source, line=lineno)
                except json.JSONDecodeError as exc:
                    problems.add(f"column {columns.get('spans', 'spans')!r} is not valid JSON ({exc.msg})", line=lineno, doc_id=rec.get("id"))
                    continue
                except DataError as exc:
                    problems.add(f"column {columns.get('spans', 'spans')!r}: {exc.problems[0].message}", line=lineno,
                                 doc_id=rec.get("id"))
                    continue
            else:
                rec.pop("spans", None)
            doc = record_to_doc(rec, problems, line=lineno, seen=seen, columns=columns)
            if doc is not None:
                docs.append(doc)
    except UnicodeDecodeError:
        raise utf8_error(source) from None
    except csv.Error as exc:
        raise DataError(Problem(source, f"unreadable CSV: {exc}")) from None
    except OSError as exc:
        raise unreadable(source, exc) from None
    if not docs and not problems:
        problems.add("no documents in the file")
    problems.raise_if_any()
    return docs
