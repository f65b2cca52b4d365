"""``anonaudit bench`` (issue 47): the sanitizer under test as a command, a registered sanitizer or
a release file; the validation of what a command returns; resuming; the leaderboard (page, CSV,
Markdown) with paired tests; TRI and TAB corpora; the reference table of published figures.

No language model is loaded: phrase search and ROUGE-L are the attack and the metric, the
comparison points are the annotation-based ones (spaCy and Presidio are real models and run in
the README's slow test).
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from anonaudit.cli import main
from audit.core.errors import AnonauditError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "regex_masker.py"
#: The shared TAB data: ``../shared/data/tab`` beside the checkout (as in CI), or ``ANONAUDIT_SHARED``.
TAB = Path(os.environ.get("ANONAUDIT_SHARED", ROOT.parent / "shared")) / "data" / "tab"
CHEAP = ["--compare", "suppression,labels", "--attacks", "phrase_search", "--metrics", "rouge"]


def bench(args, tmp_path: Path):
    return CliRunner().invoke(main, ["bench", *args], catch_exceptions=False)


def rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_example_regex_masker_runs_end_to_end_on_the_demo_corpus(tmp_path):
    out = tmp_path / "b"
    cmd = f"{sys.executable} {EXAMPLE} {{input}} {{output}}"
    res = bench(["--command", cmd, "--name", "regex", "--demo-people", "6", *CHEAP, "--out", str(out)], tmp_path)
    assert res.exit_code == 0, res.output
    table = rows(out / "leaderboard.csv")
    assert {r["release"] for r in table} == {"regex", "suppression", "labels"}
    ours = next(r for r in table if r["release"] == "regex")
    assert ours["role"] == "under test" and ours["rank"] and float(ours["rouge"]) > 0
    assert [int(r["rank"]) for r in table] == sorted(int(r["rank"]) for r in table)  # ranked by risk
    others = [r for r in table if r["role"] == "comparison"]
    # each comparison is tested against the sanitizer under test on the same documents
    assert all("phrase_search (" in r["versus_under_test"] and "rouge (" in r["versus_under_test"] for r in others)
    assert all(r["seconds_per_document"] != "" for r in table)
    page = (out / "leaderboard.html").read_text(encoding="utf-8")
    assert "anonaudit leaderboard" in page and "<svg" in page and "Pareto front" in page
    md = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert md.startswith("| # | release |") and "**regex**" in md
    # every release was written as it was made, with what made it
    rec = json.loads((out / "sanitized" / next(p.name for p in (out / "sanitized").glob("regex-*.json"))).read_text())
    assert rec["kind"] == "command" and rec["cost"]["documents"] == 6
    # the run again: the comparison points and every attack result are reused
    again = bench(["--command", cmd, "--name", "regex", "--demo-people", "6", *CHEAP, "--out", str(out)], tmp_path)
    assert again.exit_code == 0, again.output
    assert "reused suppression" in again.output and "already done, reused" in again.output
    # the page says what preparing each attack once cost, measured by the first run
    assert "Attacks prepared once" in (out / "leaderboard.html").read_text(encoding="utf-8")


BAD = {
    "missing": ("docs = docs[1:]", "missing"),
    "extra": ("docs.append(dict(docs[0], id='nobody'))", "'nobody'"),
    "duplicated": ("docs.append(docs[0])", "duplicate id"),
    "empty": ("docs[0]['text'] = '   '", "empty text"),
    "longer": ("docs[0]['text'] = docs[0]['text'] * 2", "longer than its original"),
    "spans": ("docs[0]['spans'] = [{'start': 0, 'end': 3, 'original': 'zzz', 'orig_start': 0, 'orig_end': 3}]",
              "says it replaced 'zzz'"),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_release_from_a_command_is_a_clear_error_naming_the_document(tmp_path, kind):
    change, expected = BAD[kind]
    script = tmp_path / "bad.py"
    script.write_text("import json, sys\n"
                      "docs = [json.loads(l) for l in open(sys.argv[1])]\n"
                      "for d in docs: d.pop('spans', None)\n"
                      f"{change}\n"
                      "open(sys.argv[2], 'w').write(''.join(json.dumps(d) + '\\n' for d in docs))\n")
    out = tmp_path / "b"
    res = bench(["--command", f"{sys.executable} {script} {{input}} {{output}}", "--demo-people", "4", *CHEAP,
                 "--out", str(out)], tmp_path)
    assert res.exit_code == 2, res.output
    assert expected in res.output and "document" in res.output and "Traceback" not in res.output
    # nothing of the comparison points is lost: made before the sanitizer under test, kept
    assert list((out / "sanitized").glob("suppression-*.jsonl")) and list((out / "sanitized").glob("labels-*.jsonl"))


def test_a_command_that_fails_or_writes_nothing_is_an_error_and_a_fixed_one_resumes(tmp_path):
    out = tmp_path / "b"
    fails = bench(["--command", f"{sys.executable} -c \"import sys; sys.exit(3)\" {{input}} {{output}}",
                   "--demo-people", "4", *CHEAP, "--out", str(out)], tmp_path)
    assert fails.exit_code == 2 and "exited with status 3" in fails.output
    silent = bench(["--command", f"{sys.executable} -c pass {{input}} {{output}}", "--demo-people", "4", *CHEAP,
                    "--out", str(out)], tmp_path)
    assert silent.exit_code == 2 and "wrote nothing" in silent.output
    no_placeholder = bench(["--command", "python x.py", "--out", str(out)], tmp_path)
    assert no_placeholder.exit_code == 2 and "{input}" in no_placeholder.output
    fixed = bench(["--command", f"{sys.executable} {EXAMPLE} {{input}} {{output}}", "--demo-people", "4", *CHEAP,
                   "--out", str(out)], tmp_path)
    assert fixed.exit_code == 0, fixed.output
    assert "reused suppression" in fixed.output and "reused labels" in fixed.output


def test_the_python_api_returns_a_leaderboard_and_is_deterministic(tmp_path):
    import anonaudit

    def run(out):
        return anonaudit.bench("labels", comparisons=["suppression"], demo_people=6, attacks=["phrase_search"],
                               metrics=["rouge"], seed=3, out=out,
                               progress=False)

    a, b = run(tmp_path / "a"), run(tmp_path / "b")
    frame = a.to_pandas()
    assert list(frame["release"]) == [r.name for r in a.leaderboard.rows]
    assert set(frame["role"]) == {"under test", "comparison"}
    page = a.report(tmp_path / "a" / "leaderboard.html")
    assert page.exists() and (tmp_path / "a" / "leaderboard.csv").exists() and (tmp_path / "a" / "leaderboard.md").exists()
    head = page.read_text(encoding="utf-8").split("</head>")[0]  # the page's head comes from base.html
    assert "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\"" in head
    assert "<title>" in head and "anonaudit leaderboard</title>" in head and ".wrap" in head
    originals = tmp_path / "a" / "data" / "originals.jsonl"  # an input of the bench: the page may not replace it
    held = originals.read_bytes()
    with pytest.raises(AnonauditError, match=r"originals\.jsonl: this is also the command's input \(the originals"):
        a.report(originals)
    assert originals.read_bytes() == held
    timing = [c for c in frame.columns if c.endswith("_per_document")]
    assert frame.drop(columns=timing).equals(b.to_pandas().drop(columns=timing))
    assert a.to_markdown().count("\n| ") == 2 and "labels" in repr(a)


def test_llm_points_run_on_a_document_budget_and_a_sanitizer_under_test_may_be_a_file(tmp_path):
    import anonaudit

    data = anonaudit.sample_data(n=6, seed=0)
    board = anonaudit.bench(release=data["releases"]["labels"], name="mine", originals=data["originals"],
                            spec=anonaudit.Spec(background=data["background"]), comparisons=["suppression"],
                            with_=["labels"], sanitizer_sample=3, attacks=["phrase_search"], metrics=["rouge"],
                            out=tmp_path / "b", progress=False)
    by = {r.name: r for r in board.leaderboard.rows}
    assert by["labels"].cost["documents"] == 3 and by["labels"].risks["phrase_search"]["n"] == 3
    assert by["mine"].role == "under test" and by["mine"].cost["kind"] == "release"
    tests = {t["measure"]: t for t in by["labels"].tests}
    assert tests["phrase_search"]["n"] == 3  # paired on the documents both have


def test_paired_tests_read_safer_less_safe_or_not_distinguishable():
    from audit.core.results import Finding, Result
    from audit.core.stats import paired_bootstrap
    from audit.pipeline.leaderboard import _tests

    def attack(release, hits):
        return Result(kind="attack", name="x", release=release, value=sum(hits) / len(hits), ci=(0.0, 1.0),
                      n=len(hits), documents=[Finding(str(i), success=h) for i, h in enumerate(hits)])

    def util(release, values):
        return Result(kind="utility", name="u", release=release, value=sum(values) / len(values), ci=(0.0, 1.0),
                      n=len(values), documents=[Finding(str(i), facts={"value": v}) for i, v in enumerate(values)])

    ours = attack("ours", [False] * 20)
    leaky = attack("leaky", [True] * 12 + [False] * 8)
    same = attack("same", [True] + [False] * 19)
    results = [ours, leaky, same, util("ours", [0.9] * 20), util("leaky", [0.5 + i / 100 for i in range(20)]),
               util("same", [0.9] * 20)]
    t = {r: {x["measure"]: x for x in _tests("ours", r, results, ["x"], ["u"], 0)} for r in ("leaky", "same")}
    assert t["leaky"]["x"]["statement"].startswith("is safer than leaky on x (p < 0.001")  # 12 vs 0: p = 2 * 0.5**12
    assert t["same"]["x"]["statement"].startswith("is not distinguishable from same on x (p = 1.000")
    assert t["leaky"]["u"]["statement"].startswith("keeps more than leaky on u")
    assert t["same"]["u"]["p"] == 1.0
    d = paired_bootstrap([1.0, 2.0, 3.0], [1.0, 1.0, 1.0], seed=0)
    assert d.value == 1.0 and d.ci[0] >= 0.0 and d == paired_bootstrap([1.0, 2.0, 3.0], [1.0, 1.0, 1.0], seed=0)


def test_a_tri_file_is_a_corpus_and_comparisons_that_cannot_run_are_named(tmp_path):
    import anonaudit

    data = anonaudit.sample_data(n=5, seed=1)
    bg = {}
    for d in data["background"]:
        bg[d["subject"]] = bg.get(d["subject"], "") + " " + d["text"]
    rows_ = [{"name": d["subject"], "public_knowledge": bg[d["subject"]], "original": d["text"],
              "masked": next(r["text"] for r in data["releases"]["suppressed"] if r["id"] == d["id"])}
             for d in data["originals"]]
    tri = tmp_path / "tri.json"
    tri.write_text(json.dumps(rows_), encoding="utf-8")
    out = tmp_path / "b"
    res = bench(["--tri", str(tri), "--tri-originals", "original", "--command",
                 f"{sys.executable} {EXAMPLE} {{input}} {{output}}", *CHEAP, "--out", str(out)], tmp_path)
    assert res.exit_code == 0, res.output
    table = rows(out / "leaderboard.csv")
    assert {r["release"] for r in table} == {"under_test", "masked"}  # TRI's method column is on the board
    assert "Not benchmarked: suppression" in (out / "leaderboard.html").read_text(encoding="utf-8")


def test_outputs_never_overwrite_inputs_and_documents_are_escaped(tmp_path):
    import anonaudit

    data = anonaudit.sample_data(n=4, seed=0)
    data["originals"][0]["text"] = data["originals"][0]["text"] + " <script>alert(1)</script>"
    folder = tmp_path / "b"
    folder.mkdir()
    originals = folder / "leaderboard.csv"
    originals.write_text("id,text\n" + "".join(f"{d['id']},\"{d['text']}\"\n" for d in data["originals"]),
                         encoding="utf-8")
    res = bench(["--originals", str(originals), "--sanitizer", "labels", "--out", str(folder), *CHEAP], tmp_path)
    assert res.exit_code == 2 and "leaderboard.csv" in res.output
    board = anonaudit.bench("suppression", name="<b>x<i>", originals=data["originals"], comparisons=["labels"],
                            attacks=["phrase_search"], metrics=["rouge"], progress=False, out=tmp_path / "c")
    page = board.report(tmp_path / "c" / "leaderboard.html").read_text(encoding="utf-8")
    assert "<b>x<i>" not in page and "&lt;b&gt;x&lt;i&gt;" in page and "<script>" not in page


def test_force_over_a_results_file_of_another_kind_writes_a_new_one(tmp_path):
    """``bench --force`` (and ``anonaudit.bench(force=True)``) over an OUT/results.json that is
    not a results file replaces it, as the refusal says; it used to make every release and then
    fail reading that file as results. Without force the API refuses it, as the command does."""
    import anonaudit
    from audit.core.results import ResultsFile

    data = anonaudit.sample_data(n=4, seed=0)
    originals = tmp_path / "originals.jsonl"
    originals.write_text("".join(json.dumps(d) + "\n" for d in data["originals"]), encoding="utf-8")
    out = tmp_path / "b"
    out.mkdir()
    (out / "results.json").write_text('{"mine": 1}\n', encoding="utf-8")
    res = bench(["--originals", str(originals), "--sanitizer", "labels", "--name", "labels2", "--out", str(out),
                 "--force", *CHEAP], tmp_path)
    assert res.exit_code == 0, res.output
    assert {r.name for r in ResultsFile.load(out / "results.json").results} >= {"phrase_search", "rouge"}
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "results.json").write_text("mine\n", encoding="utf-8")
    kw = dict(originals=str(originals), comparisons=["labels"], attacks=["phrase_search"], metrics=["rouge"],
              progress=False, out=tmp_path / "c")
    with pytest.raises(anonaudit.AnonauditError, match=r"results\.json: exists and is not an anonaudit results"
                                                        r"(.|\n)*force=True"):
        anonaudit.bench("suppression", **kw)
    assert (tmp_path / "c" / "results.json").read_text(encoding="utf-8") == "mine\n"
    assert anonaudit.bench("suppression", force=True, **kw).results.results


def test_the_tab_reference_table_ships_with_its_sources():
    from audit.pipeline.leaderboard import read_reference

    rows_ = read_reference("tab")
    assert len(rows_) >= 10 and all(r.source and "INTACT" in r.source for r in rows_)
    tps = {r.ours: r.value for r in rows_ if r.metric == "tps" and r.ours}
    assert tps["suppression"] < tps["labels"]  # Table 3 of the INTACT paper


@pytest.mark.skipif(not (TAB / "bks").is_dir(), reason="needs the shared TAB data in ../shared/data/tab")
def test_tab_with_a_background_and_published_rows(tmp_path):
    out = tmp_path / "b"
    res = bench(["--originals", str(TAB / "bks" / "TAB_test_BK=Original.json"), "--documents", "3",
                 "--background", str(TAB / "bks" / "TAB_test_BK=Public10%.json"),
                 "--release", str(TAB / "anonymizations" / "TAB_test_Manual_Entity.json"), "--name", "manual_entity",
                 "--compare", "none", "--also",
                 f"suppressed={TAB / 'anonymizations' / 'TAB_test_Manual_Supression.json'}",
                 "--attacks", "phrase_search", "--metrics", "rouge", "--reference", "tab", "--out", str(out)], tmp_path)
    assert res.exit_code == 0, res.output
    table = rows(out / "leaderboard.csv")
    published = [r for r in table if r["role"] == "published"]
    assert published and all("INTACT" in r["source"] for r in published)
    assert {r["release"] for r in table if r["role"] != "published"} == {"manual_entity", "suppressed"}
    assert all(r["documents"] == "3" for r in table if r["role"] != "published")


def test_the_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    import re
    import shutil

    text = (ROOT / "docs/how-to/bench.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (tmp_path / "examples").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "examples" / EXAMPLE.name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    namespace: dict = {}
    exec(compile(block, "docs/how-to/bench.md block", "exec"), namespace)  # noqa: S102
    assert "regex" in capsys.readouterr().out
    assert {p.name for p in (tmp_path / "bench-py").iterdir()} >= {"leaderboard.html", "leaderboard.csv",
                                                                  "leaderboard.md", "results.json"}


def test_an_llm_comparison_point_reports_its_requests_per_document(tmp_path):
    """``--with delinker`` on a budget, its LLM (a scripted rewriter behind the real answer cache):
    the row's cost counts the requests per document; a re-run reuses the release."""
    import re

    import anonaudit
    from audit.models.answer_cache import CachedLLM
    from audit.models.llm import ScriptedLLM

    def rewrite(req):
        marked = re.findall(r"\[\[(.+?)\]\]", req.messages[-1][1])
        return json.dumps({"reasoning": "r", "rewrites": [{"marked": m, "new": "a local thing"} for m in marked]})

    llm = CachedLLM(ScriptedLLM(rewrite), tmp_path / "answers.sqlite")
    board = anonaudit.bench("suppression", comparisons=["labels"], with_=["delinker"], sanitizer_sample=2, demo_people=5,
                            sanitizer_params={"delinker": {"llm": llm, "max_rounds": 1}}, attacks=["phrase_search"],
                            metrics=["rouge"], out=tmp_path / "b", progress=False)
    row = next(r for r in board.leaderboard.rows if r.name == "delinker")
    assert row.cost["documents"] == 2 and row.documents == 2
    assert row.cost["requests_per_document"] > 0 and llm.stats["misses"] > 0
    frame = board.to_pandas()
    assert float(frame.loc[frame["release"] == "delinker", "requests_per_document"].iloc[0]) > 0


def test_a_figure_says_when_it_is_inconclusive_or_not_above_chance():
    from reports.leaderboard_page import _cell

    fig = {"value": 0.1, "ci": [0.05, 0.2], "beats_baseline": True, "warning": ""}
    assert _cell(fig, percent=True) == "10.0% [5.0%, 20.0%]"
    assert _cell({**fig, "warning": "the attacker failed its fit check"}, percent=True).endswith("(inconclusive)")
    assert _cell({**fig, "beats_baseline": False}, percent=True).endswith("(no risk shown: not above chance)")


def test_a_release_file_given_beside_the_others_must_load(tmp_path):
    res = bench(["--sanitizer", "labels", "--name", "lab", "--demo-people", "4", *CHEAP, "--also", f"x={tmp_path / 'missing.jsonl'}",
                 "--out", str(tmp_path / "b")], tmp_path)
    assert res.exit_code == 2 and "missing.jsonl" in res.output and "Traceback" not in res.output


@pytest.mark.slow
def test_an_llm_comparison_point_on_the_real_small_model(tmp_path):
    """``with_=["delinker"]`` on the embedded 0.5B (the real llama.cpp path): one document of the
    budget is rewritten, and its row carries what it cost (seconds, requests and tokens per
    document); the attack and metric ran on it like on the others."""
    import anonaudit

    board = anonaudit.bench("suppression", comparisons=["labels"], with_=["delinker"], sanitizer_sample=1, demo_people=4,
                            sanitizer_params={"delinker": {"max_rounds": 1}}, attacks=["phrase_search"],
                            metrics=["rouge"], spec=anonaudit.Spec(models=anonaudit.Models(llm="qwen2.5-coder-0.5b")),
                            out=tmp_path / "b", progress=False)
    row = next(r for r in board.leaderboard.rows if r.name == "delinker")
    assert row.documents == 1 and row.cost["documents"] == 1
    assert row.cost["requests_per_document"] > 0 and row.cost["tokens_per_document"] > 0
    assert row.cost["seconds_per_document"] > 0
    frame = board.to_pandas()
    assert set(frame["release"]) >= {"suppression", "labels", "delinker"}
