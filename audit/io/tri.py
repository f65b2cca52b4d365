"""The TRI dataframe layout: one row per individual, ``name``, ``public_knowledge`` and one
text column per method, as JSON records, a pandas ``to_json`` dict or a CSV."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from audit.core.data import Corpus, Document, Release, release_name_problem
from audit.core.errors import DataError, Problem, Problems
from audit.io.detect import utf8_error
from audit.io.records import as_id, id_problem
from audit.io.tables import open_csv

_TRI_SKIP = {"name", "public_knowledge", "", "index", "level_0"}
#: The column of a TRI file that holds the dev release (sanitized texts an attacker may choose
#: its settings on, as the TRI paper's code does), never a release under test.
DEV_COLUMN = "dev_abstract"


def _tri_records(source: str, data: Any) -> list[tuple[int | None, dict[str, Any]]]:
    """Rows of a TRI file as ``(line or None, record)``, whatever the layout."""
    if data is None:  # CSV
        try:
            return [(line, dict(zip(header, row))) for line, row, header in open_csv(source)]
        except UnicodeDecodeError:
            raise utf8_error(source) from None
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


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_tri(source: str, data: Any, *, need_methods: bool = False) -> tuple[Corpus, list[Release]]:
    """The background (``public_knowledge``) and one release per method column; the dev column
    (:data:`DEV_COLUMN`) is not one of them (:func:`read_tri_dev` reads it). ``need_methods``:
    the file is read for its releases, so a file without a method column is an error (an audit
    of it would audit nothing), not an empty list."""
    background, releases, _ = read_tri_all(source, data, need_methods=need_methods)
    return background, releases


def read_tri_dev(source: str, data: Any) -> Release | None:
    """The dev release of a TRI file (its :data:`DEV_COLUMN` column), or ``None``."""
    return read_tri_all(source, data)[2]


def _method_columns(rows: list[tuple[int | None, Any]], columns: list[str], problems: Problems,
                    header_line: int | None) -> list[str]:
    """The columns that hold a method's texts: any text that is not a number, not an index. A cell of
    such a column that is not a text is refused by the caller, naming its row: a column is never
    left out of the audit for one odd cell."""
    def values(col: str) -> list[Any]:
        return [r.get(col) for _, r in rows if isinstance(r, dict) and r.get(col) not in (None, "")]

    methods = []
    for col in columns:
        if col in _TRI_SKIP or str(col).startswith("Unnamed:"):
            continue
        vals = values(col)
        if any(isinstance(v, str) and not _is_number_text(v) for v in vals):
            wrong = release_name_problem(col)
            if wrong:  # a method column names a release, and files are named after releases
                problems.add(f"method column {str(col)[:80]!r}: {wrong}", line=header_line)
            methods.append(col)
    return methods


def read_tri_all(source: str, data: Any, *,
                 need_methods: bool = False) -> tuple[Corpus, list[Release], Release | None]:
    """Background, releases under test and dev release (``None`` without a dev column)."""
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
    methods = _method_columns(rows, columns, problems, header_line=1 if data is None else None)
    if need_methods and not [m for m in methods if m != DEV_COLUMN]:
        cols = ", ".join(repr(str(c)[:80]) for c in columns)
        dev = f" ({DEV_COLUMN} is the dev release, never one under test)" if DEV_COLUMN in methods else ""
        raise DataError(Problem(source, "no method column to audit: a TRI file read for its releases needs a column of "
                                        f"texts per method besides 'name' and 'public_knowledge'; its columns are {cols}"
                                        f"{dev}", line=1 if data is None else None))
    seen: dict[str, int | None] = {}
    names: list[tuple[str, int | None, dict]] = []
    for i, (line, rec) in enumerate(rows):
        where = "" if line is not None else f"row {i}: "
        if not isinstance(rec, dict):
            problems.add(f"{where}expected a record, got {type(rec).__name__}", line=line)
            continue
        name = as_id(rec.get("name"))
        wrong = "missing or empty 'name'" if name is None else id_problem(name, "name")
        if wrong or name is None:
            problems.add(f"{where}{wrong}", line=line)
            continue
        if name in seen:
            first = seen[name]
            problems.add(f"{where}duplicate name" + (f" (first at line {first})" if first else ""),
                         line=line, doc_id=name)
            continue
        seen[name] = line
        for col in ["public_knowledge", *methods]:
            v = rec.get(col)
            if v is not None and not isinstance(v, str) and not (isinstance(v, float) and math.isnan(v)):
                why = "" if col == "public_knowledge" else (" (a column that holds texts is a method's release: "
                                                            "each cell a text, or empty)")
                problems.add(f"{where}column {col!r} must be text, got {type(v).__name__} {_short(v)}{why}",
                             line=line, doc_id=name)
        names.append((name, line, rec))
    problems.raise_if_any()

    def corpus(col: str, cname: str) -> Corpus:
        docs = [Document(n, rec[col], subject=n) for n, _, rec in names
                if isinstance(rec.get(col), str) and rec[col].strip()]
        return Corpus(docs, name=cname, source=source)

    background = corpus("public_knowledge", Path(source).stem)
    releases = [Release(name=m, corpus=corpus(m, m), aligned=True, source=source) for m in methods
                if m != DEV_COLUMN]
    dev = (Release(name=DEV_COLUMN, corpus=corpus(DEV_COLUMN, DEV_COLUMN), aligned=True, source=source)
           if DEV_COLUMN in methods else None)
    return background, releases, dev
