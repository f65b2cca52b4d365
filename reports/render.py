"""Render a results file as one self-contained HTML audit report.

The page is built with Jinja2 with autoescaping on (documents are untrusted): every
string from the results reaches the page as escaped text, highlights are drawn by
splitting the sanitized text at their offsets (never by injecting markup), and the
charts are inline SVG whose geometry is computed here. There is no external
resource: CSS and the few lines of table-sorting script are inline, so the file
opens offline and can be attached to an e-mail.

Sections: verdict (gate checks when thresholds are given, else the highest risks in
plain words), the privacy–utility picture, one section per attack, utility, a
bounded per-document drill-down per release, provenance and limitations.

What the page shows is built as plain data by :func:`reports.context.build_context`, from
:mod:`~reports.charts` (the SVG geometry), :mod:`~reports.drilldown` (documents and their
highlighted segments) and :mod:`~reports.formatting` (how values are written); this module
renders it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from audit.core.files import atomic_write
from audit.core.errors import DataError, Problem
from audit.core.consistency import results_problems
from audit.core.results import ResultsFile, figure_problems
from reports.context import build_context
from reports.drilldown import load_release_texts, segments
from reports.formatting import visible

TEMPLATES = Path(__file__).parent / "templates"


def environment() -> Environment:
    # finalize: every value printed by the template has its bidi controls made visible.
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True,
                      finalize=lambda v: visible(v) if isinstance(v, str) else v)
    env.filters["f1"] = lambda x: f"{x:.1f}"
    return env


def render(rf: ResultsFile, **kwargs: Any) -> str:
    """The report as an HTML string (see :func:`build_context` for the options). Results whose
    figures cannot be drawn (NaN, an infinite or reversed interval, n = 0: results made in memory
    rather than read from a file, which checks them) are a :class:`DataError` naming each one."""
    problems = [Problem("results", f"result {r.name!r} on release {r.release!r}: {w}")
                for r in rf.results for w in figure_problems(r.to_dict())]
    problems = problems or [Problem("results", w) for w in results_problems(rf.results)]
    if problems:
        raise DataError(problems)
    return environment().get_template("report.html").render(**build_context(rf, **kwargs))


def write_report(path: str | os.PathLike, rf: ResultsFile, **kwargs: Any) -> Path:
    """Render and write atomically."""
    return atomic_write(path, render(rf, **kwargs))


__all__ = ["render", "write_report", "build_context", "load_release_texts", "segments"]
