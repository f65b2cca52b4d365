"""A bench's leaderboard as a page (``leaderboard.html``, in the report's style), a CSV
(``leaderboard.csv``) and a Markdown table ready for a paper.

Takes the leaderboard object :func:`audit.pipeline.leaderboard.build_leaderboard` makes (read
by its attributes: reports import nothing above ``audit.core``). Documents and names are
untrusted: the page is rendered with autoescaping on, and CSV cells that a spreadsheet would
run as a formula are prefixed with a quote.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from audit.core.files import atomic_write
from reports.charts import pareto_chart
from reports.formatting import num, pct, title_of

#: The CSV's columns; per-attack and per-metric columns follow (``NAME``, ``NAME_ci_low``, ``NAME_ci_high``).
CSV_HEAD = ("rank", "release", "role", "documents", "risk", "risk_attack", "risk_ci_low", "risk_ci_high",
            "seconds_per_document", "requests_per_document", "tokens_per_document")


def _cell(fig: dict[str, Any] | None, *, percent: bool) -> str:
    """A figure with its interval, and what qualifies it: "inconclusive" when the component doubts
    it (an attacker that failed its own check), "no risk shown" when it does not beat chance."""
    if not fig:
        return "–"
    f = pct if percent else (lambda x: num(x, 3))
    ci = fig.get("ci")
    text = f"{f(fig['value'])} [{f(ci[0])}, {f(ci[1])}]" if ci else f(fig["value"])
    if fig.get("warning"):
        text += " (inconclusive)"
    elif percent and fig.get("beats_baseline") is False:
        text += " (no risk shown: not above chance)"
    return text


def _cost_text(cost: dict[str, Any]) -> str:
    if cost.get("seconds_per_document") is None:
        return "– (given as a file)"
    text = f"{cost['seconds_per_document']:.3g} s"
    if cost.get("requests_per_document"):
        text += f", {cost['requests_per_document']:g} req, {cost['tokens_per_document']:g} tok"
    return text


def _safe(value: Any) -> Any:
    """A CSV cell a spreadsheet will show as text, never run as a formula."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def published(lb: Any) -> list[dict[str, Any]]:
    """The reference rows grouped by method, in the table's order: ``method``, ``figures``
    (metric -> value), ``source``, ``ours`` (the leaderboard row that is the same method), ``note``."""
    groups: dict[str, dict[str, Any]] = {}
    for p in lb.published:
        g = groups.setdefault(p.method, {"method": p.method, "figures": {}, "sources": [], "ours": "", "notes": []})
        g["figures"][p.metric] = p.value
        g["ours"] = g["ours"] or p.ours
        for key, value in (("sources", p.source), ("notes", f"{p.metric}: {p.note}" if p.note else "")):
            if value and value not in g[key]:
                g[key].append(value)
    return [{**g, "source": _sources(g.pop("sources")), "note": "; ".join(g.pop("notes"))} for g in groups.values()]


def _sources(sources: list[str]) -> str:
    """Citations of one work written once: "Author, Title, Table 3, Section 5.5" for the
    sources "Author, Title, Table 3" and "Author, Title, Section 5.5"."""
    works: dict[str, list[str]] = {}
    for src in sources:
        work, sep, where = src.rpartition(", ")
        works.setdefault(work if sep else src, []).append(where if sep else "")
    return "; ".join(", ".join([w, *[x for x in parts if x]]) for w, parts in works.items())


def to_rows(lb: Any) -> list[dict[str, Any]]:
    """The leaderboard as flat rows (the CSV; ``to_pandas()``): ours ranked by risk, then the
    published figures, one row each (``role`` = "published", with its ``source``)."""
    rows = []
    for r in lb.rows:
        rec: dict[str, Any] = {"rank": r.rank, "release": r.name, "role": r.role, "documents": r.documents,
                               "risk": r.risk["value"] if r.risk else None,
                               "risk_attack": r.risk["attack"] if r.risk else None,
                               "risk_ci_low": (r.risk.get("ci") or [None, None])[0] if r.risk else None,
                               "risk_ci_high": (r.risk.get("ci") or [None, None])[1] if r.risk else None,
                               **{k: r.cost.get(k) for k in CSV_HEAD[8:]}}
        for name, fig in [*r.risks.items(), *r.utility.items()]:
            rec[name] = fig["value"]
            rec[f"{name}_ci_low"], rec[f"{name}_ci_high"] = (fig.get("ci") or [None, None])
        rec["versus_under_test"] = "; ".join(t["statement"] for t in r.tests)
        rec["source"] = r.source
        rows.append(rec)
    for g in published(lb):
        rows.append({"release": g["method"], "role": "published", **g["figures"], "source": g["source"],
                     "matches": g["ours"], "note": g["note"]})
    return rows


def columns(lb: Any) -> list[str]:
    cols = list(CSV_HEAD)
    for name in [*lb.attacks, *lb.metrics]:
        cols += [name, f"{name}_ci_low", f"{name}_ci_high"]
    extra = [m for m in dict.fromkeys(p.metric for p in lb.published) if m not in cols]
    return cols + extra + ["versus_under_test", "source", "matches", "note"]


def write_csv(lb: Any, path: str | os.PathLike) -> Path:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns(lb), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for rec in to_rows(lb):
        w.writerow({k: _safe(v) for k, v in rec.items()})
    return atomic_write(path, buf.getvalue())


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(lb: Any) -> str:
    """A Markdown table ready for a paper: rank, release, each attack's risk and each metric
    with its 95% interval, the cost per document; then the published rows, each with its source."""
    head = ["#", "release", *[title_of(a) for a in lb.attacks], *[title_of(m) for m in lb.metrics], "s/doc",
            "vs " + lb.under_test]
    lines = ["| " + " | ".join(_md(h) for h in head) + " |", "|" + "---|" * len(head)]
    for r in lb.rows:
        tests = "; ".join(t["statement"].split(" (")[0] for t in r.tests) or ("(under test)" if
                                                                            r.role == "under test" else "")
        cells = [r.rank or "", f"**{r.name}**" if r.role == "under test" else r.name,
                 *[_cell(r.risks.get(a), percent=True) for a in lb.attacks],
                 *[_cell(r.utility.get(m), percent=False) for m in lb.metrics],
                 f"{r.cost['seconds_per_document']:.3g}" if r.cost.get("seconds_per_document") is not None else "–",
                 tests]
        lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    for g in published(lb):
        figs = g["figures"]
        other = ", ".join(f"{title_of(k)} {v:g}" for k, v in figs.items() if k not in lb.attacks and k not in lb.metrics)
        cells = ["", f"{g['method']} (published)",
                 *[(pct(figs[a]) if a in figs else "") for a in lb.attacks],
                 *[(num(figs[m], 3) if m in figs else "") for m in lb.metrics], "",
                 (other + "; " if other else "") + g["source"]]
        lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    lines.append("")
    lines.append(f"Risks are attack success rates (lower is safer), utilities higher is better; 95% intervals in "
                 f"brackets. Paired tests against {lb.under_test} on the same documents: exact McNemar (attacks), "
                 "paired bootstrap (utility), 5% level, uncorrected.")
    for a in lb.agreement:
        lines.append(_agreement_text(a))
    return "\n".join(lines) + "\n"


def _agreement_text(a: dict[str, Any]) -> str:
    methods = ", ".join(a["methods"])
    if a["spearman"] is not None:
        return (f"Agreement with the published {title_of(a['metric'])}: Spearman rho = {a['spearman']:.2f} over "
                f"{a['n']} methods ({methods}).")
    order = "the same order" if a["same_order"] else "a different order"
    return (f"Agreement with the published {title_of(a['metric'])}: only {a['n']} shared method(s) ({methods}), too "
            f"few for a rank correlation; ours and the published figures put them in {order}.")


def _chart(lb: Any) -> Any:
    heads = [r for r in lb.results if r.kind == "attack" and "." not in r.name]
    util = [r for r in lb.results if r.kind == "utility"]
    for m in lb.metrics:
        c = pareto_chart(heads, util, m, None, [r.name for r in lb.rows])
        if c is not None:
            return c
    return None


def context(lb: Any, *, notes: list[str] | None = None) -> dict[str, Any]:
    """What the leaderboard's templates show (the page, and a notebook's :mod:`reports.notebook`);
    each part links its explanation in the user guide built beside the page (as the report's)."""
    from reports.context import GUIDE, guide_page

    return {"lb": lb, "guide": guide_page(GUIDE), "chart": _chart(lb), "title": lb.title, "rows": lb.rows, "notes": notes or [],
            "cell": _cell, "cost": _cost_text, "title_of": title_of, "published": published(lb),
            "agreement": [_agreement_text(a) for a in lb.agreement]}


def environment() -> Any:
    """The report's Jinja2 environment (autoescaping on) with the leaderboard's filters."""
    from reports.render import environment as report_environment

    env = report_environment()
    env.filters["pct"] = pct
    env.filters["num"] = lambda x: num(x, 3)
    return env


def render(lb: Any, *, notes: list[str] | None = None) -> str:
    return environment().get_template("leaderboard.html").render(**context(lb, notes=notes))


def write_html(lb: Any, path: str | os.PathLike, *, notes: list[str] | None = None) -> Path:
    return atomic_write(path, render(lb, notes=notes))
