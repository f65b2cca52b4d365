"""The flat table of a results file: one row per release x result, with its interval, n and
baseline. ``summary.csv`` is written beside every ``results.json`` (``X.summary.csv`` beside
any other ``X.json``), and :meth:`anonaudit.Results.to_pandas` returns the same table, so a
spreadsheet or an experiment tracker needs nothing else.

Columns (:data:`COLUMNS`): ``release``, ``kind`` (attack: a risk, higher = more risk;
utility: higher = more utility), ``name``, ``value``, ``ci_low``/``ci_high`` (the 95%
interval), ``n`` (trials), ``baseline`` (the naive success rate an attack must beat),
``beats_baseline``, ``inconclusive`` (the component doubts its own figure: the gate never
passes it) and ``warning`` (why).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from audit.core.errors import AnonauditError
from audit.core.files import atomic_write

COLUMNS = ("release", "kind", "name", "value", "ci_low", "ci_high", "n", "baseline", "beats_baseline",
           "inconclusive", "warning")
#: The columns of the findings CSV beside a report (one row per release x result x document,
#: written by :mod:`reports.export`). They live here, in the ground layer, so that the output
#: guard (:mod:`audit.pipeline.outputs`) recognises a findings CSV without importing the reports
#: a floor above it.
FINDINGS_COLUMNS = ("release", "result", "kind", "document", "success", "summary", "marks", "marks_in")


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def summary_rows(results: Iterable[Any]) -> list[dict[str, Any]]:
    """One dict per result (:data:`COLUMNS`), releases in first-seen order, each release's
    results in the order they were written."""
    results = list(results)
    order: dict[str, int] = {}
    for r in results:
        order.setdefault(r.release, len(order))
    rows = []
    for r in sorted(results, key=lambda r: order[r.release]):
        warning = r.info.warning
        rows.append({"release": r.release, "kind": r.kind, "name": r.name, "value": _num(r.value),
                     "ci_low": None if r.ci is None else _num(r.ci[0]),
                     "ci_high": None if r.ci is None else _num(r.ci[1]), "n": int(r.n),
                     "baseline": _num(r.baseline), "beats_baseline": r.beats_baseline,
                     "inconclusive": bool(warning), "warning": warning or None})
    return rows


def summary_path(results_path: str | os.PathLike[str]) -> Path:
    """``summary.csv`` beside ``results.json``; ``X.summary.csv`` beside any other ``X.json``."""
    path = Path(results_path)
    return path.with_name("summary.csv" if path.name == "results.json" else f"{path.stem}.summary.csv")


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    """A cell a spreadsheet would read as a formula (a release name or a warning starting with
    ``=``, ``+``, ``-``, ``@``...) gets an apostrophe first, as in the report's findings CSV."""
    if value is None:
        return ""
    return "'" + value if isinstance(value, str) and value.startswith(_FORMULA) else value


def summary_csv(results: Iterable[Any]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in summary_rows(results):
        writer.writerow({k: _csv_cell(v) for k, v in row.items()})
    return buf.getvalue()


def check_summary_target(results_path: str | os.PathLike[str]) -> Path:
    """The summary's path, refused when a file there is not a summary anonaudit wrote (an input
    called ``summary.csv`` beside ``--out results.json`` is never written over)."""
    target = summary_path(results_path)
    if target.is_dir():
        raise AnonauditError(f"{target}: the summary of {Path(results_path).name} goes there, but it is a folder")
    if target.exists():
        try:
            with open(target, encoding="utf-8", errors="replace") as fh:
                first = fh.readline().strip()
        except OSError as exc:
            raise AnonauditError(f"{target}: cannot read it ({exc})") from None
        if first != ",".join(COLUMNS):
            raise AnonauditError(f"{target}: the summary of {Path(results_path).name} goes there, but this file is "
                                 "not one anonaudit wrote; move it, or write the results elsewhere")
    return target


def write_summary(results_path: str | os.PathLike[str], results: Iterable[Any]) -> Path:
    """Write the summary beside ``results_path`` (atomically)."""
    return atomic_write(check_summary_target(results_path), summary_csv(results))
