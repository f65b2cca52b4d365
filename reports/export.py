"""Exports beside the HTML report: every per-document finding as CSV.

One row per (release, result, document): whether the attack succeeded, its one-sentence
summary, how many marks it left and in which document. The CSV holds every document, where
the HTML shows a bounded number. Render it from :func:`reports.shareable.shareable`'s output
for the shareable edition. Cells that a spreadsheet would read as a formula (``=``, ``+``,
``-``, ``@``, tab, carriage return) are prefixed with an apostrophe: documents are untrusted.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from audit.core.files import atomic_write
from audit.core.results import ResultsFile
from audit.core.summary import FINDINGS_COLUMNS as COLUMNS
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA) else text


def findings_csv(rf: ResultsFile) -> str:
    """Every finding of every result as CSV text (header first)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rf.results:
        for d in r.documents:
            success = "" if d.success is None else ("hit" if d.success else "miss")
            w.writerow([_cell(v) for v in (r.release, r.name, r.kind, d.id, success, d.summary, len(d.highlights),
                                           d.highlights_in or (d.id if d.highlights else ""))])
    return buf.getvalue()


def write_findings_csv(path: str | os.PathLike, rf: ResultsFile) -> Path:
    return atomic_write(path, findings_csv(rf))
