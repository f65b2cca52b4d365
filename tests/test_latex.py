"""LaTeX tables for a paper (issue 60): ``Results.to_latex()``, ``BenchResults.to_latex()`` and
``leaderboard.tex`` beside ``leaderboard.md``, through pandas' Styler. No TeX is installed here,
so each table is checked structurally as a TeX reader would take it: braces balanced,
environments closed in order, booktabs rules in place, the same number of cells in every row,
and every name from the results escaped (release names are untrusted)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd
import pytest

import anonaudit
from anonaudit.outcome import Results
from audit.core.results import Finding, Result, ResultsFile
from audit.pipeline.leaderboard import Leaderboard, ReferenceRow, Row
from reports.latex import escape

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = r"a_b & c%$#{x}~^ \input{evil}"


def structure(tex: str) -> list[list[str]]:
    """Check a table as TeX reads it and return its body rows' cells (header first)."""
    plain = re.sub(r"\\[\\{}&%$#_]", "", tex)  # escaped characters are not structure
    plain = "\n".join(line.split("%")[0] for line in plain.splitlines())  # comments
    depth = 0
    for ch in plain:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0, "a closing brace without its opening one"
    assert depth == 0, "unbalanced braces"
    stack = []
    for kind, env in re.findall(r"\\(begin|end)\{(\w+)\}", plain):
        if kind == "begin":
            stack.append(env)
        else:
            assert stack and stack.pop() == env, f"\\end{{{env}}} closes another environment"
    assert not stack, f"environments left open: {stack}"
    lines = tex.splitlines()
    rules = [i for i, line in enumerate(lines) if line.strip() in (r"\toprule", r"\midrule", r"\bottomrule")]
    assert [lines[i].strip() for i in rules] == [r"\toprule", r"\midrule", r"\bottomrule"]
    spec = re.search(r"\\begin\{tabular\}\{([lrc]+)\}", tex).group(1)
    rows = [re.split(r"(?<!\\)&", line.rstrip().removesuffix(r"\\")) for line in lines[rules[0] + 1:rules[2]]
            if line.strip() != r"\midrule"]
    assert rows and all(len(r) == len(spec) for r in rows), "a row with another number of cells than columns"
    assert r"\usepackage{booktabs}" in tex.splitlines()[0]
    return [[c.strip() for c in r] for r in rows]


def _results(release: str = HOSTILE, warning: str = "") -> Results:
    docs = [Finding(f"d{i}", i < 3) for i in range(8)]
    rf = ResultsFile(results=[
        Result("attack", "phrase_search", release, 3 / 8, (0.14, 0.69), 8, 0.01, True,
               details={"warning": warning} if warning else {}, documents=docs),
        Result("attack", "phrase_search.ngram_residual", release, 0.2, (0.1, 0.3), 8),
        Result("attack", "trir", "plain", 0.125, (0.02, 0.47), 8, 0.125, False),
        Result("utility", "rouge", release, 0.81234, (0.79, 0.83), 8)])
    return Results(rf)


def test_escape_follows_pandas_latex_escaping():
    for text in (HOSTILE, "50% of $5 #1 {a} ~b^c \\d", "plain"):
        pandas_way = pd.DataFrame([[text]]).style.format(escape="latex").to_latex().splitlines()[2]
        assert pandas_way.split(" & ", 1)[1].removesuffix(r" \\") == escape(text)


def test_results_to_latex_has_booktabs_intervals_marks_and_escapes_names():
    tex = _results().to_latex(title=f"Release {HOSTILE}")
    rows = structure(tex)
    assert rows[0] == ["Release", r"Phrase search (\%)", r"TRIR (\%)", "ROUGE-L"]  # no sub-measure
    body = {r[0]: r for r in rows[1:]}
    assert escape(HOSTILE) in body and r"\input{evil}" not in tex.replace(escape(HOSTILE), "")
    assert body[escape(HOSTILE)][1] == "37.5 [14.0, 69.0]$^{*}$"  # above chance: marked
    assert body["plain"][2] == "12.5 [2.0, 47.0]"  # not above chance: no mark
    assert body[escape(HOSTILE)][3] == "0.812 [0.790, 0.830]" and body["plain"][1] == "--"
    assert "Wilson score interval" in tex and "chance baseline" in tex
    assert r"\caption{Release " + escape(HOSTILE) + "}" in tex
    weak = _results(warning="the attacker failed its fit check").to_latex()
    structure(weak)
    assert r"$^{*\dagger}$" in weak and "failed its own check" in weak


def _leaderboard(p: float) -> Leaderboard:
    fig = {"value": 0.5, "ci": [0.3, 0.7], "n": 8, "baseline": 0.1, "beats_baseline": True, "warning": ""}
    test = {"measure": "phrase_search", "test": "exact McNemar", "p": p, "statement": "is safer than"}
    rows = (Row(HOSTILE, "under test", 8, {"attack": "phrase_search", **fig}, {"phrase_search": fig},
                {"rouge": {**fig, "value": 0.9}}, {"seconds_per_document": 0.01}, rank=1),
            Row("labels", "comparison", 8, {"attack": "phrase_search", **fig}, {"phrase_search": {**fig, "value": 0.9}},
                {"rouge": fig}, {"seconds_per_document": 0.01}, tests=(test,), rank=2))
    return Leaderboard("Benchmark", "demo & co", HOSTILE, ("phrase_search",), ("rouge",), rows,
                       published=(ReferenceRow("INTACT_x", "rouge", 0.7, "Pilán et al. 2025, Table 3 & more"),))


@pytest.mark.parametrize(("p", "mark"), [(0.003, "$^{**}$"), (0.2, "")])
def test_leaderboard_latex_marks_paired_tests_and_names_them(p, mark):
    from reports.latex import leaderboard_latex

    tex = leaderboard_latex(_leaderboard(p))
    rows = structure(tex)
    assert rows[0] == ["Rank", "Release", r"Phrase search (\%)", "ROUGE-L"]
    assert rows[1][1] == r"\textbf{" + escape(HOSTILE) + "}"  # the sanitizer under test, in bold
    assert rows[2][2] == "90.0 [30.0, 70.0]" + mark
    assert rows[3][1] == r"INTACT\_x (published)" and rows[3][3] == "0.700"
    assert ("exact McNemar" in tex) == bool(mark) and ("p<0.01" in tex) == bool(mark)
    assert r"Table 3 \& more" in tex


def test_bench_writes_leaderboard_tex_beside_the_markdown(tmp_path, monkeypatch):
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "regex_masker.py").write_text((ROOT / "examples" / "regex_masker.py").read_text())
    monkeypatch.chdir(tmp_path)
    board = anonaudit.bench(command=f"{sys.executable} examples/regex_masker.py {{input}} {{output}}", name="regex",
                            demo_people=8, comparisons=["suppression", "labels"], attacks=["phrase_search"],
                            metrics=["rouge"], out="bench", progress=False)
    board.report(tmp_path / "bench" / "leaderboard.html")
    tex = (tmp_path / "bench" / "leaderboard.tex").read_text()
    assert tex == board.to_latex()
    rows = structure(tex)
    assert [r[1] for r in rows[1:]] == [r"\textbf{regex}" if r.name == "regex" else escape(r.name)
                                        for r in board.leaderboard.rows]
    significant = any(t["p"] < 0.05 for r in board.leaderboard.rows for t in r.tests)
    assert ("$^{*" in tex) == significant == ("exact McNemar" in tex or "paired bootstrap" in tex)
