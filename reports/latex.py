"""Tables for a paper: the leaderboard and a results file as LaTeX, through pandas' Styler.

``booktabs`` rules; every figure with its 95% interval in brackets (risks in %, utilities as
fractions); significance marks with the test named in a note under the table:

- the leaderboard (:func:`leaderboard_latex`): a comparison release's figure is marked when the
  paired test against the sanitizer under test on the same documents is significant (exact
  McNemar on per-document attack outcomes, paired bootstrap of per-document utility
  differences), ``*`` p < 0.05, ``**`` p < 0.01, ``***`` p < 0.001, uncorrected;
- a results file (:func:`results_latex`): a risk is marked ``*`` when its 95% interval lies
  above the attack's chance baseline (the interval named: Wilson score, or the cluster
  bootstrap over documents), ``†`` when its attacker failed its own check.

Names come from the results and documents are untrusted: every name and source reaches the
table through pandas' LaTeX escaping (``Styler.format(escape="latex")``; the caption and the note,
which pandas does not escape, through :func:`escape`, the same rules), so a release named
``a_b & c`` cannot break the table or run a command. pandas is imported only here, when a
table is asked for (the ``[pandas]`` extra).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from audit.core.errors import AnonauditError
from reports.formatting import title_of, visible

#: What a LaTeX table needs in the preamble.
PREAMBLE = r"\usepackage{booktabs}"
#: pandas' LaTeX escaping (``Styler.format(escape="latex")``), character by character; a space
#: after a command that would swallow it is kept as ``\space``.
_SPECIAL = {"\\": r"\textbackslash ", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
            "}": r"\}", "~": r"\textasciitilde ", "^": r"\textasciicircum "}
_SPECIAL_RE = re.compile(r"([\\~^])( ?)|[&%$#_{}]")
STARS = ((0.001, "***"), (0.01, "**"), (0.05, "*"))


def escape(text: Any) -> str:
    """``text`` safe in LaTeX text mode (the rules of pandas' ``escape="latex"``; line breaks
    become spaces and bidirectional controls visible codes)."""
    def one(m: re.Match) -> str:
        return _SPECIAL[m.group(1) or m.group()] + (r"\space " if m.group(2) else "")

    return _SPECIAL_RE.sub(one, " ".join(visible(str(text)).split()))


def _pd():
    try:
        import pandas as pd
    except ImportError:
        raise AnonauditError("to_latex() needs pandas: pip install 'anonaudit[pandas]'") from None
    return pd


def _mark(symbol: str) -> str:
    return rf"$^{{{symbol}}}$" if symbol else ""


def figure(fig: dict[str, Any] | None, *, percent: bool, mark: str = "") -> str:
    """``12.5 [8.1, 17.0]`` (percent) or ``0.812 [0.790, 0.833]``, then its mark. Numbers only:
    nothing untrusted."""
    if not fig:
        return "--"
    f = (lambda x: f"{100 * x:.1f}") if percent else (lambda x: f"{x:.3f}")
    ci = fig.get("ci")
    text = f"{f(fig['value'])} [{f(ci[0])}, {f(ci[1])}]" if ci else f(fig["value"])
    if fig.get("warning"):
        mark += r"\dagger"
    return text + _mark(mark)


def stars(p: float) -> str:
    return next((s for limit, s in STARS if p < limit), "")


def _table(rows: list[dict[str, Any]], text_columns: Sequence[str], *, caption: str, label: str,
           note: str, bold: Sequence[bool] = (), header: str) -> str:
    """The table through pandas' Styler: names escaped, booktabs rules, a note under it."""
    pd = _pd()
    df = pd.DataFrame([{k: " ".join(visible(v).split()) if k in text_columns else v for k, v in r.items()}
                       for r in rows])  # a line break or a blank line would end a row or the table
    styler = df.style.hide(axis="index").format(escape="latex", subset=list(text_columns))
    styler = styler.format_index(escape="latex", axis=1)
    if any(bold):
        styler = styler.apply(lambda row: ["textbf:--rwrap;" if bold[row.name] else "" for _ in row], axis=1)
    body = styler.to_latex(hrules=True, caption=escape(caption), label=label, position="htbp",
                           position_float="centering", column_format="l" * len(text_columns) +
                           "r" * (len(df.columns) - len(text_columns)))
    notes = rf"\par\smallskip{{\footnotesize {note}}}" + "\n"
    return f"% {header}: needs {PREAMBLE}\n" + body.replace("\\end{table}", notes + "\\end{table}")


def leaderboard_latex(lb: Any, *, label: str = "tab:leaderboard") -> str:
    """The leaderboard (ranked rows, then the published figures) as a LaTeX table."""
    rows, bold, used = [], [], False
    for r in lb.rows:
        p = {t["measure"]: t["p"] for t in r.tests}
        used = used or any(stars(v) for v in p.values())
        rec: dict[str, Any] = {"Rank": str(r.rank or ""), "Release": r.name}
        for a in lb.attacks:
            rec[f"{title_of(a)} (%)"] = figure(r.risks.get(a), percent=True, mark=stars(p.get(a, 1.0)))
        for m in lb.metrics:
            rec[title_of(m)] = figure(r.utility.get(m), percent=False, mark=stars(p.get(m, 1.0)))
        rows.append(rec)
        bold.append(r.role == "under test")
    sources = []
    for g in _published(lb):
        rec = {"Rank": "", "Release": f"{g['method']} (published)"}
        for a in lb.attacks:
            rec[f"{title_of(a)} (%)"] = f"{100 * g['figures'][a]:.1f}" if a in g["figures"] else ""
        for m in lb.metrics:
            rec[title_of(m)] = f"{g['figures'][m]:.3f}" if m in g["figures"] else ""
        rows.append(rec)
        bold.append(False)
        sources.append(f"{escape(g['method'])}: {escape(g['source'])}")
    under = escape(lb.under_test)
    note = (f"Risks are attack success rates in \\% (lower is safer), utilities fractions (higher keeps more); "
            f"95\\% intervals in brackets. {under} (in bold) is the sanitizer under test.")
    if used:
        note += (f" Marks: the release differs from {under} on the same documents, paired test "
                 "(exact McNemar test on per-document attack outcomes; paired bootstrap of per-document utility "
                 "differences, 2,000 resamples): $^{*}$ $p<0.05$, $^{**}$ $p<0.01$, $^{***}$ $p<0.001$; "
                 "uncorrected for the number of tests.")
    if any(f.get("warning") for r in lb.rows for f in [*r.risks.values(), *r.utility.values()]):
        note += r" $^{\dagger}$ inconclusive: the attacker failed its own check (a lower bound on the risk)."
    if sources:
        note += " Published figures, on their own setting (compare ranks, not levels): " + "; ".join(sources) + "."
    return _table(rows, ["Rank", "Release"], caption=f"{lb.title} on {lb.corpus}", label=label, note=note,
                  bold=bold, header="anonaudit leaderboard")


def _published(lb: Any) -> list[dict[str, Any]]:
    from reports.leaderboard_page import published

    return published(lb)


def results_latex(results: Sequence[Any], *, title: str = "Audit results", label: str = "tab:audit") -> str:
    """Results (typed :class:`~audit.core.results.Result`) as a LaTeX table: one row per
    release, one column per attack (its headline risk, no sub-measures) and utility metric."""
    heads = [r for r in results if r.kind == "utility" or "." not in r.name]
    if not heads:
        raise AnonauditError("to_latex(): there are no results to put in a table")
    names = list(dict.fromkeys(r.name for r in sorted(heads, key=lambda r: r.kind)))
    releases = list(dict.fromkeys(r.release for r in heads))
    by = {(r.release, r.name): r for r in heads}
    labels = {n: f"{title_of(n)} (%)" if _is_attack(heads, n) else title_of(n) for n in names}
    intervals: dict[str, None] = {}
    rows = []
    for rel in releases:
        rec: dict[str, Any] = {"Release": rel}
        for n in names:
            r = by.get((rel, n))
            attack = r is not None and r.kind == "attack"
            if attack:
                intervals[str(r.details.get("interval") or "Wilson score interval")] = None
            fig = None if r is None else {"value": r.value, "ci": r.ci, "warning": r.info.warning}
            rec[labels[n]] = figure(fig, percent=attack, mark="*" if attack and r.beats_baseline else "")
        rows.append(rec)
    note = ("Risks are attack success rates in \\% (lower is safer), utilities fractions (higher keeps more); "
            "95\\% intervals in brackets.")
    if intervals:
        note += (" $^{*}$ the risk's 95\\% interval lies above the attack's chance baseline (" +
                 "; ".join(escape(i) for i in intervals) + "): the attack beats chance at the 5\\% level.")
    if any(r.info.warning for r in heads):
        note += r" $^{\dagger}$ inconclusive: the attacker failed its own check (a lower bound on the risk)."
    return _table(rows, ["Release"], caption=title, label=label, note=note, header="anonaudit results")


def _is_attack(results: Sequence[Any], name: str) -> bool:
    return any(r.name == name and r.kind == "attack" for r in results)
