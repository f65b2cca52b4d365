"""Inline HTML for notebooks: what ``Results``, ``BenchResults`` and ``GateOutcome`` show as
their ``_repr_html_``, as pandas' DataFrame does.

The verdict comes first, then the risk table with intervals and chance baselines, utility, the
privacy-utility chart, and the per-document evidence collapsed (``<details>``); a bench shows its
leaderboard with its Pareto chart; the gate its verdict and checks. The data is the report's and
the leaderboard's own (:func:`reports.context.build_context`, :func:`reports.leaderboard_page.context`),
rendered by ``templates/notebook.html`` with autoescaping on: documents and names are untrusted.
This is the internal edition (the notebook's user holds the data): evidence quotes the sanitized
text, never the originals.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from audit.core.checks import Check
from audit.core.results import ResultsFile
from reports.context import build_context, gate_view

#: Documents per release in the collapsed evidence (the report shows 50).
MAX_DOCUMENTS = 10
_ids = itertools.count(1)  # a chart's own id in the page (its arrow marker), distinct per output


def _render(**ctx: Any) -> str:
    from reports.leaderboard_page import environment

    return environment().get_template("notebook.html").render(chart_id=f"c{next(_ids)}", **ctx)


def results_html(rf: ResultsFile, *, texts: Mapping[str, Mapping[str, str]] | None = None,
                 checks: Sequence[Check] | None = None, max_documents: int = MAX_DOCUMENTS) -> str:
    """A results file as a notebook cell: verdicts, risks, utility, the chart, evidence."""
    ctx = build_context(rf, checks=checks, texts=texts, max_documents=max_documents)
    risks = [{**row, "attack": s["title"]} for s in ctx["sections"] for row in s["rows"]]
    pareto = ctx["pareto"]
    chart = None
    if pareto:
        first = pareto["charts"][0]
        chart = {"chart": first["chart"], "title": "Privacy and utility (the Pareto front dashed)",
                 "chart_id": f"r{next(_ids)}"}
    return _render(kind="results", verdicts=ctx["verdicts"], gate=ctx["gate"], risks=risks,
                   util_rows=ctx["util_rows"], chart=chart, drill=ctx["drill"], notes=ctx["notes"])


def leaderboard_html(lb: Any) -> str:
    """A bench's leaderboard as a notebook cell: the ranked table and its Pareto chart."""
    from reports.leaderboard_page import context

    return _render(kind="leaderboard", **context(lb))


def gate_html(checks: Sequence[Check], status: str, exit_code: int) -> str:
    """The gate's verdict and its checks as a notebook cell."""
    return _render(kind="gate", gate={**gate_view(checks), "status": status, "exit_code": exit_code})
