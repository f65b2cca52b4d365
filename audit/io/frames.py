"""Tables in memory and in Parquet files: documents from a list of dicts, a pandas DataFrame,
a Hugging Face ``Dataset`` (or anything with ``to_list()`` / ``to_pandas()``), and from
``.parquet`` files, with the columns that hold the id, text, subject and spans named by the
caller (``columns={"text": "body", "id": "case_id"}``).

pandas and pyarrow are imported only when a table or a Parquet file is read (the
``anonaudit[pandas]`` extra); a list of dicts needs neither. Every row is validated like a
JSONL line (:func:`audit.io.records.record_to_doc`), every problem named by its row.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Collection, Mapping
from typing import Any

from audit.core.data import Corpus, Document
from audit.core.errors import AnonauditError, DataError, Problem, Problems
from audit.core.safejson import DuplicateKey, duplicate_key_message, unique_keys
from audit.io.detect import read_bytes
from audit.io.records import option_of, record_to_doc

#: The document fields a column can be named for.
FIELDS = ("id", "text", "subject", "spans")
PANDAS_HINT = "pip install 'anonaudit[pandas]' (pandas and pyarrow)"


def check_columns(columns: Mapping[str, str] | None) -> dict[str, str]:
    """``{field: column}`` for the fields whose column is not named as the field. One column
    named for two fields (``--text-column x --id-column x``, or ``--text-column id`` while the id
    is in ``id``) is refused here, before any file is read, naming both."""
    out: dict[str, str] = {}
    for field, column in (columns or {}).items():
        if field not in FIELDS:
            raise AnonauditError(f"unknown document field {field!r} for a column name (use {', '.join(FIELDS)})")
        if column is None:
            continue
        if not isinstance(column, str) or not column:
            raise AnonauditError(f"the {field} column must be named by a non-empty string, got {column!r}")
        if column != field:
            out[field] = column
    owner: dict[str, str] = {}
    for field in FIELDS:
        column = out.get(field, field)
        if column in owner:
            first = owner[column]
            how = " and ".join(f"--{f}-column {column}" if f in out else f"{column!r} is the {f} column by default"
                               for f in (first, field))
            python = ", ".join(f"Columns({f}=...)" for f in (first, field) if f in out)
            raise AnonauditError(f"one column {column!r} is named for two fields, the {first} and the {field} "
                                 f"({how}; {python} in Python); each field needs a column of its own")
        owner[column] = field
    return out


def absent_columns(present: Collection[str], columns: Mapping[str, str], *, required: bool) -> list[str]:
    """The columns missing from ``present`` (a header, or every key of a file's records): each
    column named for a field (``columns``: :func:`check_columns`' output) that is not there, with
    the option that named it; ``required``: the id and text columns too, by their default name."""
    missing = [f for f in ("id", "text") if required and f not in columns and f not in present
               and not (f == "id" and "doc_id" in present)]
    return missing + [f"{c} (named for the {f} by {option_of(f)})" for f, c in columns.items() if c not in present]


def columns_message(missing: list[str], present: Collection[str], where: str) -> str:
    """``missing column(s) ...; the table has ...`` for :func:`absent_columns`' list; ``where``:
    what has the columns, with its verb (``the table has``)."""
    has = ", ".join(str(c) for c in present) or "(none)"
    more = "" if any(" (named for " in m for m in missing) else \
        " (other names: --text-column/--id-column, or Columns(text=..., id=...) in Python)"
    return f"missing column(s) {', '.join(missing)}; {where} {has}{more}"


def rename_record(rec: dict[str, Any], columns: Mapping[str, str]) -> dict[str, Any]:
    """``rec`` with the named columns under the field names (``{"body": ...}`` -> ``{"text": ...}``);
    a column named for another field is moved out of the way, never silently mixed in."""
    if not columns:
        return rec
    out = {k: v for k, v in rec.items() if k not in columns.values() and k not in columns}
    for field, column in columns.items():
        if column in rec:
            out[field] = rec[column]
    for k in set(columns) - set(columns.values()):  # a column called "text" while the text is in "body"
        if k in rec:
            out[f"{k}_column"] = rec[k]
    return out


def rename_header(header: list[str], columns: Mapping[str, str]) -> list[str]:
    """A CSV header with the named columns under the field names."""
    if not columns:
        return header
    back = {c: f for f, c in columns.items()}
    return [back.get(h, f"{h}_column" if h in columns else h) for h in header]


def plain(value: Any) -> Any:
    """A cell as plain Python: numpy scalars and arrays (as pandas and pyarrow give them)
    unwrapped, lists and dicts inside them too; a missing cell (None, NaN, NA) is None."""
    if value is None:
        return None
    if isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy array or scalar
        return plain(value.tolist())
    if type(value).__name__ in ("NAType", "NaTType"):
        return None
    return value


def table_records(data: Any, what: str) -> list[dict[str, Any]]:
    """The rows of a table in memory as dicts: a list of dicts, a pandas DataFrame, or any
    object with ``to_list()`` (a Hugging Face ``Dataset``) or ``to_pandas()``."""
    if isinstance(data, (list, tuple)):
        rows = list(data)
    elif hasattr(data, "to_dict") and hasattr(data, "columns") and hasattr(data, "iloc"):  # pandas
        if not data.columns.is_unique:
            dup = sorted({str(c) for c in data.columns[data.columns.duplicated()]})
            raise AnonauditError(f"{what}: duplicate column name(s) {', '.join(dup)}")
        rows = data.to_dict(orient="records")
    elif callable(getattr(data, "to_list", None)):  # datasets.Dataset
        rows = data.to_list()
    elif callable(getattr(data, "to_pandas", None)):
        return table_records(data.to_pandas(), what)
    else:
        raise AnonauditError(f"{what}: expected a file path, a Corpus, a list of dicts, a pandas DataFrame or a "
                             f"Hugging Face Dataset, got {type(data).__name__}")
    return rows


def table_header(data: Any) -> list[str] | None:
    """The column names of a DataFrame or a Dataset (None for a list of dicts: rows may differ)."""
    names = getattr(data, "columns", None)
    if names is None:
        names = getattr(data, "column_names", None)
    return None if names is None or isinstance(data, (list, tuple)) else [str(c) for c in names]


def records_to_documents(rows: list[Any], source: str, columns: Mapping[str, str] | None = None, *,
                         header: list[str] | None = None) -> list[Document]:
    """Validate rows (dicts) into documents; every problem named by its row, all at once.
    Missing cells (None, NaN) are left out; a ``spans`` cell may be a JSON string (CSV).
    ``header``: a table's column names, checked first (one message for a missing column,
    not one per row)."""
    cols = check_columns(columns)
    problems = Problems(source)
    keys = header if header is not None else list(dict.fromkeys(str(k) for r in rows if isinstance(r, Mapping)
                                                              for k in r))
    missing = absent_columns(keys, cols, required=header is not None)
    if missing:  # a list of dicts: only the named columns (each row says what it lacks)
        problems.add(columns_message(missing, keys, "the table has" if header is not None else "its rows have"))
        problems.raise_if_any()
    docs: list[Document] = []
    seen: dict[str, int | None] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            problems.add(f"row {i}: expected a mapping of column: value, got {type(row).__name__}")
            continue
        rec = {str(k): plain(v) for k, v in row.items()}
        rec = {k: v for k, v in rename_record(rec, cols).items() if v is not None}
        if isinstance(rec.get("id"), float) and rec["id"].is_integer():
            rec["id"] = int(rec["id"])  # an integer id column with gaps reads as floats in pandas
        spans = rec.get("spans")
        if isinstance(spans, str):
            try:
                rec["spans"] = json.loads(spans, object_pairs_hook=unique_keys) if spans.strip() else None
            except DuplicateKey as exc:
                problems.add(f"row {i}: column {cols.get('spans', 'spans')!r}: {duplicate_key_message(exc.key)}")
                continue
            except json.JSONDecodeError as exc:
                problems.add(f"row {i}: column {cols.get('spans', 'spans')!r} is not valid JSON ({exc.msg})")
                continue
        doc = record_to_doc(rec, problems, item=i, seen=seen, columns=cols)
        if doc is not None:
            docs.append(doc)
    if not docs and not problems:
        problems.add("no documents")
    problems.raise_if_any()
    return docs


def corpus_from_table(data: Any, *, name: str, columns: Mapping[str, str] | None = None,
                      source: str | None = None) -> Corpus:
    """A :class:`Corpus` from a table in memory (see :func:`table_records`)."""
    source = source or f"<{name}: {type(data).__name__}>"
    return Corpus(records_to_documents(table_records(data, source), source, columns, header=table_header(data)),
                  name=name, source=source)


def read_parquet(source: str):
    """A Parquet file as a DataFrame (through pandas and pyarrow)."""
    try:
        import pandas as pd
    except ImportError:
        raise AnonauditError(f"{source}: reading Parquet needs pandas and pyarrow: {PANDAS_HINT}") from None
    try:
        frame = pd.read_parquet(io.BytesIO(read_bytes(source)))  # read once: a pipe works too
    except ImportError as exc:
        raise AnonauditError(f"{source}: reading Parquet needs pyarrow: {PANDAS_HINT} ({exc})") from None
    except Exception as exc:  # pyarrow's errors have no common base class worth naming
        raise DataError(Problem(source, f"unreadable Parquet file: {type(exc).__name__}: {exc}")) from None
    return frame


def load_parquet(source: str, columns: Mapping[str, str] | None = None) -> list[Document]:
    frame = read_parquet(source)
    return records_to_documents(table_records(frame, source), source, columns, header=table_header(frame))
