"""``import anonaudit``: the Python API on data in memory (issue 46), and the command line as
its thin user (summary.csv, Parquet, --text-column)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import anonaudit
from anonaudit.cli import main
from audit.core.data import Corpus, Release
from audit.core.errors import AnonauditError, DataError
from audit.core.summary import COLUMNS
from audit.io.loaders import load_corpus, save_jsonl
from audit.pipeline.gate import GateInputError

REQUIRED = ["release", "name", "value", "ci_low", "ci_high", "n", "baseline"]


@pytest.fixture(scope="module")
def data():
    return anonaudit.sample_data(n=12, seed=0)


@pytest.fixture(scope="module")
def frames(data):
    return pd.DataFrame(data["originals"]), pd.DataFrame(data["releases"]["labels"])


@pytest.fixture(scope="module")
def promised(frames, tmp_path_factory):
    """The spelling issue 46 promises, run once for the module; nothing written anywhere but the
    private temporary folder, which is gone afterwards."""
    df, df2 = frames
    cwd, tmp = tmp_path_factory.mktemp("cwd"), tmp_path_factory.mktemp("tmp")
    mp = pytest.MonkeyPatch()
    mp.chdir(cwd)
    mp.setattr(tempfile, "tempdir", str(tmp))
    try:
        results = anonaudit.audit(originals=df, releases={"labels": df2}, attacks=["phrase_search"],
                                  metrics=["rouge"], seed=0)
    finally:
        mp.undo()
    return results, cwd, tmp


def test_the_promised_spelling_gives_a_tidy_table(promised, frames):
    results, cwd, tmp = promised
    table = results.to_pandas()
    assert list(table.columns) == list(COLUMNS) and set(REQUIRED) <= set(table.columns)
    assert set(table["name"]) == {"phrase_search", "phrase_search.ngram_residual", "rouge"}
    assert (table["release"] == "labels").all() and (table["n"] == 12).all()
    assert ((table["ci_low"] <= table["value"]) & (table["value"] <= table["ci_high"])).all()
    head = table.set_index("name").loc["phrase_search"]
    assert head["kind"] == "attack" and 0 < head["baseline"] < 1 and head["beats_baseline"] in (True, False)
    assert table.set_index("name").loc["rouge", "kind"] == "utility"
    # nothing written to disk: not in the working folder, and the temporary folder removed
    assert list(cwd.iterdir()) == [] and list(tmp.iterdir()) == []
    # the provenance says the data came from memory, not from a temporary path
    assert results.provenance["inputs"]["originals"]["path"].startswith("<in memory>: originals (DataFrame)")
    assert frames[0].columns.tolist() == ["id", "text", "subject", "spans"]  # inputs untouched
    found = results.findings()
    hits = found[(found["result"] == "phrase_search")]
    assert len(hits) == 12 and hits["success"].mean() == pytest.approx(head["value"])


def test_the_seed_goes_straight_into_the_spec(frames):
    """Issue 59: the API's seed (checked as an argument) is the spec's, not passed on through the
    spec's mapping: the run records it, and a bad one is refused as an argument."""
    df, df2 = frames
    assert anonaudit.audit(originals=df, releases={"labels": df2}, metrics=["rouge"], seed=7, progress=False).provenance["seed"] == 7
    with pytest.raises(AnonauditError, match="seed"):
        anonaudit.audit(originals=df, releases={"labels": df2}, metrics=["rouge"], seed=-1, progress=False)


def test_gate_is_typed_and_judges_like_the_cli(promised):
    results = promised[0]
    outcome = results.gate(max={"phrase_search": 0.05}, min={"rouge": 0.01})
    assert outcome.status == "fail" and outcome.exit_code == 1 and not outcome
    assert [c.status for c in outcome.checks] == ["fail", "pass"]
    assert outcome.to_pandas()["status"].tolist() == ["fail", "pass"]
    assert "phrase_search <= 0.05" in str(outcome)
    assert results.gate(max={"phrase_search": 1.0}).passed
    with pytest.raises(GateInputError, match="no result named 'trir'"):
        results.gate(max={"trir": 0.1})
    with pytest.raises(GateInputError, match="between 0 and 1"):
        results.gate(max={"phrase_search": 5})


def test_report_save_and_load_round_trip(promised, tmp_path):
    results = promised[0]
    html = results.report(tmp_path / "report.html", gate=results.gate(max={"phrase_search": 0.5}))
    assert html.is_file() and (tmp_path / "findings.csv").is_file()
    assert "phrase_search" in html.read_text(encoding="utf-8")
    head = html.read_text(encoding="utf-8").split("</head>")[0]  # from base.html, with the report's script allowed
    assert "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:" in head and "anonaudit report</title>" in head
    path = results.save(tmp_path / "results.json")
    assert (tmp_path / "summary.csv").is_file() and len(list((tmp_path / "releases").iterdir())) == 1
    with open(tmp_path / "summary.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["name"] for r in rows] == results.to_pandas()["name"].tolist()
    back = anonaudit.load_results(path)
    pd.testing.assert_frame_equal(back.to_pandas(), results.to_pandas())
    assert back.texts() == results.texts() and back.texts()["labels"]
    # the CLI renders the saved file with the release texts (one code path: Results.report)
    out = CliRunner().invoke(main, ["report", str(path), "--out", str(tmp_path / "again.html")])
    assert out.exit_code == 0, out.output
    with pytest.raises(AnonauditError, match="exists"):
        results.save(path)
    results.save(path, force=True)


def test_report_refuses_to_overwrite_an_input_unless_forced(data, tmp_path):
    """The API's report has the command line's guard: neither the page nor the findings CSV
    beside it may replace an input the run read, the results file or a release copy, nor an
    existing file of another kind; ``force=True`` writes anyway."""
    originals, release = tmp_path / "originals.jsonl", tmp_path / "labels.jsonl"
    for path, rows in ((originals, data["originals"]), (release, data["releases"]["labels"])):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    held = {p: p.read_bytes() for p in (originals, release)}
    results = anonaudit.audit(originals=str(originals), releases={"labels": str(release)},
                              attacks=["phrase_search"], metrics=[], seed=0, out=tmp_path / "results.json")
    for target, named in ((originals, "the originals input"), (release, "release labels"),
                          (results.path, "the results file")):
        with pytest.raises(AnonauditError, match=f"{target.name}: this is also the command's input \\({named}\\)"):
            results.report(target)
    copy = next((tmp_path / "releases").iterdir())
    with pytest.raises(AnonauditError, match="copy of release labels"):
        results.report(copy)
    assert all(p.read_bytes() == b for p, b in held.items())
    # the CSV beside NAME.html is NAME.csv: here an existing file of another kind
    (tmp_path / "mine.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(AnonauditError, match=r"mine\.csv: exists and is not an anonaudit findings CSV(.|\n)*force=True"):
        results.report(tmp_path / "mine.html")
    assert (tmp_path / "mine.csv").read_text(encoding="utf-8") == "a,b\n1,2\n"
    assert results.report(tmp_path / "mine.html", force=True).is_file()
    assert (tmp_path / "mine.csv").read_text(encoding="utf-8").startswith("release,")
    # the gate's JUnit file has the same guard
    outcome = results.gate(max={"phrase_search": 0.5})
    with pytest.raises(AnonauditError, match=r"originals\.jsonl: this is also the command's input"):
        outcome.write_junit(originals)
    assert all(p.read_bytes() == b for p, b in held.items())
    assert "<testsuite" in outcome.write_junit(tmp_path / "gate.xml").read_text(encoding="utf-8")


def _rouge(results):
    return results.to_pandas().set_index("release").loc["labels", "value"]


def test_audit_and_run_refuse_an_out_that_is_an_input_even_forced(data, tmp_path):
    """``audit(out=...)`` and ``run(..., out=...)`` have the command line's guard before any work:
    an ``out`` that is an input is an error naming both (results merge into their file, so even
    ``force=True`` may not write there), an existing file of another kind is refused unless
    ``force=True``, which then replaces it with a results file, as ``--force`` does."""
    originals, release = tmp_path / "originals.jsonl", tmp_path / "labels.jsonl"
    for path, rows in ((originals, data["originals"]), (release, data["releases"]["labels"])):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    held = {p: p.read_bytes() for p in (originals, release)}
    kw = dict(attacks=["phrase_search"], seed=0, progress=False)
    for force in (False, True):
        for target, named in ((originals, "originals"), (release, "release labels")):
            with pytest.raises(AnonauditError, match=f"out {target}: this is also the command's input \\({named}\\)"):
                anonaudit.audit(originals=str(originals), releases={"labels": str(release)}, out=target, force=force, **kw)
    spec = {"originals": str(originals), "releases": [{"name": "labels", "path": str(release)}],
            "attacks": ["phrase_search"]}
    (tmp_path / "in").mkdir()
    moved = tmp_path / "in" / "results.json"
    moved.write_bytes(held[release])
    with pytest.raises(AnonauditError, match=r"results\.json: this is also the command's input \(release labels\)"):
        anonaudit.run({**spec, "releases": [{"name": "labels", "path": str(moved)}]}, out=tmp_path / "in",
                      force=True, progress=False)
    assert all(p.read_bytes() == b for p, b in held.items()) and moved.read_bytes() == held[release]
    (tmp_path / "notes.json").write_text("mine\n", encoding="utf-8")
    for out in (tmp_path / "notes.json", tmp_path / "notes.json" / "r.json"):
        with pytest.raises(AnonauditError, match=r"notes\.json"):
            anonaudit.audit(originals=str(originals), releases={"labels": str(release)}, out=out, **kw)
    assert (tmp_path / "notes.json").read_text(encoding="utf-8") == "mine\n"
    forced = anonaudit.audit(originals=str(originals), releases={"labels": str(release)}, out=tmp_path / "notes.json",
                             force=True, **kw)
    assert anonaudit.load_results(tmp_path / "notes.json").results == forced.results
    # Results.save: force=True replaced any file, an input too (its own message suggested it)
    for target in (originals, tmp_path / "notes.json" / "r.json"):
        with pytest.raises(AnonauditError, match=f"the results file {target}: "):
            forced.save(target, force=True)
    copy = next((tmp_path / "notes.releases").iterdir())
    with pytest.raises(AnonauditError, match="copy of release labels"):
        forced.save(copy, force=True)
    assert all(p.read_bytes() == b for p, b in held.items())
    again = anonaudit.run(spec, out=tmp_path / "o", progress=False)  # and run() writes as before
    assert again.path == tmp_path / "o" / "results.json"


def test_every_kind_of_input_gives_the_same_figure(data, frames, tmp_path):
    """A list of dicts with other column names, a Corpus, a Release, files (JSONL, Parquet) and a
    Hugging Face-like Dataset (duck-typed: to_list) are the same documents."""
    df, df2 = frames
    base = _rouge(anonaudit.utility(df, {"labels": df2}, metrics=["rouge"], progress=False))

    renamed = [{"doc": r["id"], "body": r["text"], "person": r["subject"], "marks": r.get("spans")}
               for r in data["originals"]]
    rel = [{"doc": r["id"], "body": r["text"], "person": r["subject"], "marks": r.get("spans")}
           for r in data["releases"]["labels"]]
    cols = anonaudit.Spec(columns=anonaudit.Columns(text="body", id="doc", subject="person", spans="marks"))
    assert _rouge(anonaudit.utility(renamed, {"labels": rel}, metrics=["rouge"], progress=False, spec=cols)) == base

    save_jsonl(load_corpus_from(data["originals"], tmp_path / "o.jsonl"), tmp_path / "o.jsonl")
    df2.to_parquet(tmp_path / "labels.parquet")
    from_files = anonaudit.utility(str(tmp_path / "o.jsonl"), {"labels": tmp_path / "labels.parquet"},
                                   metrics=["rouge"], progress=False)
    assert _rouge(from_files) == base

    class Dataset:  # what datasets.Dataset offers
        def __init__(self, rows):
            self.rows = rows

        def to_list(self):
            return list(self.rows)

    corpus = load_corpus(tmp_path / "o.jsonl")
    release = Release("labels", load_corpus(tmp_path / "labels.parquet"), aligned=True)
    assert _rouge(anonaudit.utility(corpus, [release], metrics={"rouge": {}}, progress=False)) == base
    assert _rouge(anonaudit.audit(originals=Dataset(data["originals"]), releases={"labels": Dataset(data["releases"]["labels"])},
                                  metrics=[{"name": "rouge", "params": {}}], progress=False)) == base


def load_corpus_from(rows, path):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return load_corpus(path)


def test_bad_tables_are_named_errors(data, frames):
    df, df2 = frames
    broken = df.copy()
    broken.loc[3, "text"] = None
    with pytest.raises(DataError, match=r"item 3: missing field 'text'"):
        anonaudit.utility(broken, {"labels": df2}, metrics=["rouge"], progress=False)
    with pytest.raises(AnonauditError, match="name it: releases="):
        anonaudit.utility(df, data["releases"]["labels"], metrics=["rouge"], progress=False)
    with pytest.raises(AnonauditError, match="expected a file path, a Corpus"):
        anonaudit.utility(df, {"labels": 42}, metrics=["rouge"], progress=False)
    with pytest.raises(AnonauditError, match="unknown key|no metric|not registered|unknown metric"):
        anonaudit.utility(df, {"labels": df2}, metrics=["nope"], progress=False)
    body = anonaudit.Spec(columns=anonaudit.Columns(text="body"))
    with pytest.raises(DataError, match=r"<labels: DataFrame>: missing column\(s\) body \(named for the text by "
                                        r"--text-column, Columns\(text=...\) or sanitize\(text_column=...\) in Python\); the table has id, text"):
        anonaudit.utility(df, {"labels": df2}, metrics=["rouge"], spec=body, progress=False)
    with pytest.raises(DataError, match=r"missing column\(s\) body \(named for the text by --text-column, "
                                        r"Columns\(text=...\) or sanitize\(text_column=...\) in Python\); its rows have id, text"):  # a list of dicts
        anonaudit.utility(data["originals"], {"labels": data["releases"]["labels"]}, metrics=["rouge"],
                          spec=body, progress=False)
    stranger = df2.copy()
    stranger.loc[0, "id"] = "nobody"
    with pytest.raises(DataError, match=r"releases\['labels'\] \(DataFrame\) \(document 'nobody'\): id not found "
                                        r"in the originals \(originals \(DataFrame\)\)") as caught:
        anonaudit.utility(df, {"labels": stranger}, metrics=["rouge"], progress=False)
    assert "anonaudit-" not in str(caught.value)  # no temporary path the caller never saw


def test_sanitize_returns_the_kind_it_was_given(data, frames, tmp_path):
    df = frames[0]
    before = df.copy()
    out = anonaudit.sanitize("labels", df)
    assert isinstance(out, pd.DataFrame) and out.columns.tolist()[:4] == ["id", "text", "subject", "spans"]
    pd.testing.assert_frame_equal(df, before)  # the input is untouched
    assert out["id"].tolist() == df["id"].tolist() and (out["text"] != df["text"]).all()
    assert all(s and "original" in s[0] for s in out["spans"])
    rows = anonaudit.sanitize("labels", data["originals"])
    assert isinstance(rows, list) and [r["text"] for r in rows] == out["text"].tolist()
    path = tmp_path / "o.jsonl"
    load_corpus_from(data["originals"], path)
    release = anonaudit.sanitize("labels", path)
    assert isinstance(release, Release) and [d.text for d in release.corpus] == out["text"].tolist()
    # a release made in memory is audited as it is
    res = anonaudit.utility(df, {"masked": out}, metrics=["rouge"], progress=False)
    assert res.to_pandas()["release"].tolist() == ["masked"]
    with pytest.raises(AnonauditError, match="no_such_parameter"):
        anonaudit.sanitize("labels", df, no_such_parameter=1)


def test_import_anonaudit_loads_no_model():
    code = ("import sys, anonaudit; r = anonaudit.Results; "
            "bad = [m for m in ('torch', 'spacy', 'transformers', 'sentence_transformers', 'xllamacpp', 'faiss', "
            "'pandas', 'attackers', 'defenders') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    root = Path(__file__).resolve().parents[1]  # the checkout's package, whatever the venv has installed
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------- the command line


def _write_csv(path, rows, header):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in rows:
            w.writerow([r["id"], r["text"], r["subject"], json.dumps(r.get("spans") or [])])


def test_cli_columns_parquet_and_summary_csv(data, tmp_path):
    _write_csv(tmp_path / "orig.csv", data["originals"], ["case", "body", "person", "spans"])
    pd.DataFrame(data["releases"]["labels"]).rename(columns={"id": "case", "text": "body", "subject": "person"}) \
        .to_parquet(tmp_path / "labels.parquet")
    out = tmp_path / "res" / "results.json"
    args = ["utility", "--metrics", "rouge", "--originals", str(tmp_path / "orig.csv"),
            "--release", f"labels={tmp_path / 'labels.parquet'}", "--out", str(out)]
    cols = ["--text-column", "body", "--id-column", "case", "--subject-column", "person"]
    bad = CliRunner().invoke(main, args)
    assert bad.exit_code == 2 and "missing column(s) id, text" in bad.output
    bad = CliRunner().invoke(main, ["data", "validate", str(tmp_path / "labels.parquet")])
    assert bad.exit_code == 2 and "missing column(s) id, text; the table has case, body" in bad.output
    ok = CliRunner().invoke(main, ["data", "convert", str(tmp_path / "labels.parquet"), str(tmp_path / "l.jsonl"),
                                   "--originals", str(tmp_path / "orig.csv"), *cols])
    assert ok.exit_code == 0, ok.output
    assert load_corpus(tmp_path / "l.jsonl").ids == [r["id"] for r in data["releases"]["labels"]]
    ok = CliRunner().invoke(main, args + cols)
    assert ok.exit_code == 0, ok.output
    table = pd.read_csv(out.with_name("summary.csv"))
    assert table["name"].tolist() == ["rouge"] and table.columns.tolist() == list(COLUMNS)
    assert table.loc[0, "value"] == pytest.approx(anonaudit.load_results(out).to_pandas().loc[0, "value"])


@pytest.mark.parametrize("command", [["attack", "phrase-search"], ["attack", "trir"], ["attack", "span-guess"],
                                     ["attack", "claim-linker"], ["utility"], ["run"], ["demo"], ["harden"]])
def test_every_command_that_writes_results_names_summary_csv(command):
    helped = CliRunner().invoke(main, [*command, "--help"])
    assert helped.exit_code == 0 and "summary.csv" in helped.output
    if command[0] in ("attack", "utility"):
        assert all(f"--{f}-column" in helped.output for f in ("text", "id", "subject"))


def test_a_foreign_summary_csv_is_never_written_over(data, tmp_path):
    load_corpus_from(data["originals"], tmp_path / "o.jsonl")
    load_corpus_from(data["releases"]["labels"], tmp_path / "labels.jsonl")
    (tmp_path / "summary.csv").write_text("my,own,data\n1,2,3\n", encoding="utf-8")
    out = CliRunner().invoke(main, ["utility", "--metrics", "rouge", "--originals", str(tmp_path / "o.jsonl"),
                                    "--release", str(tmp_path / "labels.jsonl"),
                                    "--out", str(tmp_path / "results.json")])
    assert out.exit_code == 2 and "not one anonaudit wrote" in out.output
    assert (tmp_path / "summary.csv").read_text(encoding="utf-8") == "my,own,data\n1,2,3\n"
    assert not (tmp_path / "results.json").exists()


def test_run_from_a_mapping_stays_in_memory(data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    load_corpus_from(data["originals"], tmp_path / "o.jsonl")
    before = sorted(p.name for p in tmp_path.iterdir())
    results = anonaudit.run({"originals": "o.jsonl", "releases": [{"name": "self", "path": "o.jsonl"}],
                             "metrics": ["rouge"]}, progress=False)
    assert results.to_pandas().loc[0, "value"] == pytest.approx(1.0) and results.path is None
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert isinstance(load_corpus(tmp_path / "o.jsonl"), Corpus)


def test_a_hugging_face_dataset_in_and_out(data, frames):
    datasets = pytest.importorskip("datasets", reason="pip install datasets (in the [test] extra)")
    ds = datasets.Dataset.from_list(data["originals"])
    masked = anonaudit.sanitize("labels", ds)
    assert isinstance(masked, datasets.Dataset) and masked.column_names[:4] == ["id", "text", "subject", "spans"]
    assert masked["text"] == anonaudit.sanitize("labels", frames[0])["text"].tolist()
    res = anonaudit.utility(ds, {"masked": masked}, metrics=["rouge"], progress=False)
    same = anonaudit.utility(frames[0], {"masked": anonaudit.sanitize("labels", frames[0])}, metrics=["rouge"],
                             progress=False)
    pd.testing.assert_frame_equal(res.to_pandas(), same.to_pandas())


# --------------------------------------------------------------------------- the README's examples


def readme_python_blocks() -> list[str]:
    """The ```python blocks of the guide's page docs/how-to/python-api.md, in order."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs/how-to/python-api.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_readme_python_examples_run(tmp_path, monkeypatch, capsys):
    blocks = readme_python_blocks()
    assert len(blocks) >= 4 and "anonaudit.audit(originals=df" in blocks[0]
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/how-to/python-api.md block {i + 1}", "exec"), namespace)  # noqa: S102
    printed = capsys.readouterr().out
    assert "phrase_search" in printed and "ci_low" in printed
    assert {p.name for p in tmp_path.iterdir()} >= {"report.html", "findings.csv", "results.json", "summary.csv",
                                                     "releases", "cases.parquet"}
    # what the examples promise
    assert namespace["outcome"].status in ("pass", "fail", "inconclusive")
    assert list(namespace["table"].columns[:7]) == ["release", "kind", "name", "value", "ci_low", "ci_high", "n"]
    assert set(namespace["results"].to_pandas()["release"]) == {"labels", "suppressed", "ner"}
    assert (namespace["results"].to_pandas()["n"] == 10).all()
    assert namespace["kept"].to_pandas()["release"].tolist() == ["masked"]
    assert "phrase_search_reid" in set(namespace["reid"].to_pandas()["name"])
    pd.testing.assert_frame_equal(namespace["again"].to_pandas(), namespace["table"])


def test_run_a_spec_file_writes_its_out_folder_and_resumes(data, tmp_path):
    load_corpus_from(data["originals"], tmp_path / "o.jsonl")
    load_corpus_from(data["releases"]["labels"], tmp_path / "labels.jsonl")
    spec = tmp_path / "audit.yaml"
    spec.write_text("originals: o.jsonl\nreleases: [{name: labels, path: labels.jsonl}]\nmetrics: [rouge]\n"
                    "out: audit-out\n", encoding="utf-8")
    first = anonaudit.run(spec, progress=False)
    assert first.path == tmp_path / "audit-out" / "results.json" and first.computed == ["metric:rouge@labels"]
    assert (tmp_path / "audit-out" / "summary.csv").is_file()
    again = anonaudit.run(spec, progress=False)
    assert again.computed == [] and again.reused == ["metric:rouge@labels"]
    pd.testing.assert_frame_equal(again.to_pandas(), first.to_pandas())


def test_summary_rows_and_csv():
    from audit.core.results import Result
    from audit.core.summary import summary_csv, summary_path, summary_rows

    results = [Result("utility", "rouge", "b", 0.5, (0.4, 0.6), 3),
               Result("attack", "trir", "-a", 0.2, (0.1, 0.3), 10, 0.1, True, {"warning": "=weak attacker"}),
               Result("attack", "phrase_search", "b", 0.0, None, 0)]
    rows = summary_rows(results)
    assert [(r["release"], r["name"]) for r in rows] == [("b", "rouge"), ("b", "phrase_search"), ("-a", "trir")]
    assert rows[2]["inconclusive"] is True and rows[0]["inconclusive"] is False and rows[1]["ci_low"] is None
    text = summary_csv(results)
    assert text.splitlines()[0] == ",".join(COLUMNS)
    assert "'-a,attack,trir,0.2,0.1,0.3,10,0.1,True,True,'=weak attacker" in text  # no formula for a spreadsheet
    assert summary_path("x/results.json").name == "summary.csv" and summary_path("x/r2.json").name == "r2.summary.csv"


@pytest.mark.slow
def test_the_api_on_the_real_model_path(frames):
    """llm= reaches the component: span guessing by the embedded 0.5B model, through the API."""
    df, df2 = frames
    res = anonaudit.attack("span_guess", originals=df, releases={"labels": df2}, llm="qwen2.5-coder-0.5b",
                           params={"sample": 3, "guesses": 2, "context_tokens": 120, "frequent_lemmas": 0},
                           seed=0, progress=False)
    row = res.to_pandas().set_index("name").loc["span_guess"]
    assert row["release"] == "labels" and row["n"] >= 1 and 0.0 <= row["value"] <= 1.0
    assert res.results[0].details["trials"] == 3
    used = res.provenance["components"]["attack:span_guess"]
    assert used["params"]["llm"] == "qwen2.5-coder-0.5b" and used["stats"]["llm_cache"]["misses"] >= 1


def test_a_damaged_older_copy_fails_the_report_not_the_next_command(data, tmp_path):
    load_corpus_from(data["originals"], tmp_path / "o.jsonl")
    load_corpus_from(data["releases"]["labels"], tmp_path / "labels.jsonl")
    load_corpus_from(data["releases"]["suppressed"], tmp_path / "suppressed.jsonl")
    out = tmp_path / "results.json"
    base = ["utility", "--metrics", "rouge", "--originals", str(tmp_path / "o.jsonl"), "--out", str(out)]
    assert CliRunner().invoke(main, [*base, "--release", str(tmp_path / "labels.jsonl")]).exit_code == 0
    (copy,) = (tmp_path / "releases").glob("labels-*.jsonl")
    copy.write_text(copy.read_text(encoding="utf-8").replace("[", "(", 1), encoding="utf-8")
    second = CliRunner().invoke(main, [*base, "--release", str(tmp_path / "suppressed.jsonl")])
    assert second.exit_code == 0, second.output
    assert set(pd.read_csv(tmp_path / "summary.csv")["release"]) == {"labels", "suppressed"}
    with pytest.raises(AnonauditError, match="changed after the audit wrote it"):
        anonaudit.load_results(out)
