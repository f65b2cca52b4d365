"""Notebooks (issue 60): ``Results``, ``BenchResults`` and ``GateOutcome`` render inline as HTML
(autoescaped), progress is tqdm's notebook widget inside a kernel, and ``examples/audit.ipynb``
runs top to bottom on a real Jupyter kernel (nbclient + ipykernel: the ``[test]`` extra)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import anonaudit
from anonaudit.outcome import Results
from audit.core.results import Finding, Highlight, Result, ResultsFile

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "audit.ipynb"
EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def results():
    data = anonaudit.sample_data(n=8, seed=0)
    return anonaudit.audit(originals=data["originals"], releases=data["releases"], attacks=["phrase_search"],
                           metrics=["rouge"], seed=0, progress=False)


def test_results_show_the_verdict_first_then_risks_utility_chart_and_collapsed_evidence(results):
    html = results._repr_html_()
    order = [html.index(x) for x in ('class="verdict"', "Risk (attack success rate", "Utility (95% interval)",
                                     "<svg", "<details><summary>Per-document evidence")]
    assert order == sorted(order)
    assert html.count('<details><summary>Per-document evidence') == len(results.releases)
    for row in results.to_list():
        if row["kind"] == "attack" and "." not in row["name"]:
            assert f"{100 * row['ci_low']:.1f}% – {100 * row['ci_high']:.1f}%" in html  # the interval
            assert f"{100 * row['baseline']:.2f}%" in html  # and the chance baseline
    assert "<html" not in html and "<body" not in html  # a fragment for a cell, not a page
    assert all(line.startswith(".anonaudit-nb") for line in html.split("<style>")[1].split("</style>")[0].split("\n")
               if line.strip())  # styles scoped: the notebook is never restyled


def test_untrusted_names_and_texts_are_escaped(results):
    doc = Finding("d1", True, summary=EVIL, highlights=(Highlight(0, 5, "rare n-gram", note=EVIL),))
    rf = ResultsFile(results=[Result("attack", "phrase_search", EVIL, 1.0, (0.2, 1.0), 1, 0.0, True,
                                     documents=[doc]), Result("utility", "rouge", EVIL, 0.5, (0.4, 0.6), 1)])
    res = Results(rf)
    gate = res.gate(max={"phrase_search": 0.1})
    for html in (res._repr_html_(), gate._repr_html_()):
        assert EVIL not in html and "&lt;script&gt;" in html
    assert gate._repr_html_().index("FAIL") < gate._repr_html_().index("<table")
    assert "exit code 1" in gate._repr_html_()


def test_the_bench_shows_its_leaderboard_with_its_pareto_chart(tmp_path, monkeypatch):
    import sys

    shutil.copy(ROOT / "examples" / "regex_masker.py", tmp_path)
    monkeypatch.chdir(tmp_path)
    board = anonaudit.bench(command=f"{sys.executable} regex_masker.py {{input}} {{output}}", name="regex",
                            demo_people=8, comparisons=["suppression"], attacks=["phrase_search"],
                            metrics=["rouge"], progress=False)
    html = board._repr_html_()
    assert "regex" in html and "suppression" in html and "Pareto front" in html and "<svg" in html
    assert html.index("<table") < html.index("<svg")


def test_progress_is_a_notebook_widget_in_a_kernel_and_lines_elsewhere(monkeypatch):
    from tqdm.auto import tqdm as auto

    from audit.runtime import progress

    assert not progress.in_notebook()
    assert isinstance(progress.bar(total=1, enabled=False), progress.LineProgress)
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    # tqdm's auto mode: the notebook widget in a kernel (it decides when imported there; the
    # example notebook's test sees the widget itself), the plain bar here
    assert type(progress.bar(total=1, enabled=False)) is auto


@pytest.mark.timeout(600)
def test_the_example_notebook_runs_on_a_real_kernel(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    shutil.copy(NOTEBOOK, tmp_path)
    shutil.copy(ROOT / "examples" / "regex_masker.py", tmp_path)
    nb = nbformat.read(tmp_path / NOTEBOOK.name, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = {c.source.splitlines()[-1]: c.outputs for c in nb.cells if c.cell_type == "code"}
    html = {line: "".join(o.get("data", {}).get("text/html", "") for o in outs) for line, outs in outputs.items()}
    assert "Risk (attack success rate" in html["results"] and "Per-document evidence" in html["results"]
    assert "exit code" in html["outcome"]
    assert "Pareto front" in html["board  # the leaderboard with its Pareto chart"]
    assert "\\toprule" in "".join(o.get("text", "") for o in outputs["print(board.to_latex())  # the same "
                                                                       "leaderboard for a paper (booktabs)"])
    widgets = [o for outs in outputs.values() for o in outs
               if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widgets, "progress inside the notebook is tqdm's widget"
    assert not [o for outs in outputs.values() for o in outs if o.output_type == "error"]
