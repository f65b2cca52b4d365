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
from audit.io.frames import check_columns, missing_columns, rename_header, rename_record
from audit.io.records import record_to_doc


def load_jsonl(source: str, columns: dict[str, str] | None = None) -> list[Document]:
    columns = check_columns(columns)
    problems = Problems(source)
    docs: list[Document] = []
    seen: dict[str, int | None] = {}
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
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.add(f"invalid JSON at column {exc.colno}: {exc.msg}", line=lineno)
            continue
        except RecursionError:  # record_to_doc checks the rest of the tree (depth, Unicode)
            problems.add(f"nested deeper than {MAX_DEPTH} levels", line=lineno)
            continue
        if columns and isinstance(rec, dict):
            rec = rename_record(rec, columns)
        doc = record_to_doc(rec, problems, line=lineno, seen=seen)
        if doc is not None:
            docs.append(doc)
    if not docs and not problems:
        problems.add("no documents in the file")
    problems.raise_if_any()
    return docs


def open_csv(source: str) -> Iterator[tuple[int, list[str], list[str]]]:
    """Yield ``(line number where the row starts, cells, header)`` for each non-blank CSV row."""
    csv.field_size_limit(max(csv.field_size_limit(), min(sys.maxsize, 2**31 - 1)))
    reader = csv.reader(io.StringIO(read_text(source), newline=""), delimiter=delimiter(source))
    header = [c.strip() for c in next(reader, [])]
    prev = reader.line_num
    for row in reader:
        start = prev + 1
        prev = reader.line_num
        if any(c.strip() for c in row):
            yield start, row, header


def load_csv(source: str, columns: dict[str, str] | None = None) -> list[Document]:
    """A CSV/TSV file; ``columns`` names the columns of the fields (``{"text": "body"}``)."""
    columns = check_columns(columns)
    problems = Problems(source)
    docs: list[Document] = []
    seen: dict[str, int | None] = {}
    try:
        header = csv_header(source)
        missing = missing_columns(header, columns) if columns else [c for c in ("id", "text") if c not in header]
        if missing:
            cols = ", ".join(repr(c) for c in header) or "(none)"
            problems.add(f"missing column(s) {', '.join(missing)}; the header has {cols}", line=1)
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
            doc = record_to_doc(rec, problems, line=lineno, seen=seen)
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
