"""Options checked before the work, and the smaller classes of issue 67 (items 6 and "smaller
classes"): an MLflow experiment name no tracker holds is refused before any work; a TAE config's
``"false"`` is false and a value of the wrong type is refused naming the key; ``models prune``
removes only what anonaudit made; a reference table's impossible figures are refused naming line
and column; ``data validate --format csv`` on a JSONL file never prints a document's text.

Model-free and small: about 3 s on 2 cores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from anonaudit.cli import main
from audit.core.errors import AnonauditError

SECRET = "Ms Jane Doe, born 4 May 1961, of 12 Harbour Street"


def invoke(args: list[str]):
    return CliRunner().invoke(main, args)


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    docs = [{"id": "a", "text": f"{SECRET} lives in Oslo.", "subject": "Jane Doe"},
            {"id": "b", "text": "Bob Jones works in Bergen.", "subject": "Bob Jones"},
            {"id": "c", "text": "Carol White was born in Tromso.", "subject": "Carol White"}]
    (tmp_path / "originals.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (tmp_path / "audit.yaml").write_text("originals: originals.jsonl\nout: out\nreleases:\n"
                                         "  - {name: same, path: originals.jsonl}\nattacks: [phrase_search]\n",
                                         encoding="utf-8")
    return tmp_path


# ------------------------------------------------------------------ item 6: validate before work

@pytest.mark.parametrize("name, words", [("", "the experiment's name is empty"), ("x" * 501, "501 characters"),
                                         ("a\nb", "control character")], ids=["empty", "501", "newline"])
@pytest.mark.parametrize("command", ["run", "bench"])
def test_an_experiment_name_no_tracker_holds_is_refused_before_any_work(workspace, command, name, words):
    args = (["run", "audit.yaml"] if command == "run" else
            ["bench", "--sanitizer", "labels", "--demo-people", "3", "--compare", "none", "--out", "out"])
    res = invoke([*args, "--mlflow", "file:./mlruns", "--mlflow-experiment", name])
    assert res.exit_code == 2 and "--mlflow-experiment" in res.output and words in res.output, res.output
    assert not (workspace / "out").exists() and not (workspace / "mlruns").exists()


def test_the_api_refuses_the_experiment_name_before_reaching_mlflow():
    from anonaudit.tracking import check_experiment, log_mlflow

    assert check_experiment("x" * 500) == "x" * 500
    with pytest.raises(AnonauditError, match="experiment=: the experiment's name is empty"):
        log_mlflow(object(), "file:./nowhere", experiment=" ")


# ------------------------------------------------------------------ a TAE config's values

def _tae(tmp_path: Path, metrics: dict) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"corpus": "corpus.json", "anonymizations": {"m": "m.json"}, "metrics": metrics}))
    return path


def test_a_tae_flag_given_as_text_is_read_as_it_says(tmp_path):
    from audit.io.taeconfig import read_tae_config

    spec, notes = read_tae_config(_tae(tmp_path, {"Precision": {"token_level": "false"},
                                                  "Recall": {"include_quasi": "True"},
                                                  "TPS": {"term_alterning": "4"}}))
    assert {"name": "tae_precision", "params": {"token_level": False}} in spec["metrics"]
    assert {"name": "tae_recall", "params": {"token_level": True, "include_quasi": True}} in spec["metrics"]
    assert {"name": "tae_tps", "params": {"mask_every": 4}} in spec["metrics"]
    assert any("token_level: the text 'false' read as false" in n for n in notes), notes


@pytest.mark.parametrize("metrics, words", [
    ({"Precision": {"token_level": "maybe"}}, "metrics.Precision.token_level: expected true or false, got 'maybe'"),
    ({"Recall": {"include_direct": [True]}}, "metrics.Recall.include_direct: expected true or false"),
    ({"TPS": {"term_alterning": 2.5}}, "metrics.TPS.term_alterning: expected a whole number, got 2.5"),
    ({"NMI": {"n_clusterings": "many"}}, "metrics.NMI.n_clusterings: expected a whole number"),
    ({"TRIR": {"background_knowledge_file_path": "bk.json", "finetuning_sliding_window": 512}},
     "metrics.TRIR.finetuning_sliding_window: expected a window"),
])
def test_a_tae_value_of_the_wrong_type_is_refused_naming_the_key(tmp_path, metrics, words):
    from audit.io.taeconfig import read_tae_config

    with pytest.raises(AnonauditError, match=words.replace(".", r"\.").replace("[", r"\[")):
        read_tae_config(_tae(tmp_path, metrics))


# ------------------------------------------------------------------ models prune

def test_models_prune_leaves_the_folders_anonaudit_did_not_make(tmp_path, monkeypatch):
    from audit.core import config

    home = tmp_path / "home"
    monkeypatch.setenv("ANONAUDIT_HOME", str(home))
    monkeypatch.delenv(config.NO_CACHE_ENV, raising=False)
    copies = home / "models" / "transformers"
    mine = copies / "my-finetuned-model"  # the user's own, in the folder anonaudit keeps conversions in
    mine.mkdir(parents=True)
    (mine / "model.safetensors").write_bytes(b"weights")
    ours = copies / "0123456789abcdef01234567"  # a conversion's name: a model's key
    ours.mkdir()
    res = invoke(["models", "prune"])
    assert res.exit_code == 0, res.output
    assert (mine / "model.safetensors").read_bytes() == b"weights", "prune removed a folder it never made"
    assert f"left      {mine} (not made by anonaudit)" in res.output
    assert not ours.exists()


# ------------------------------------------------------------------ a reference table's figures

@pytest.mark.parametrize("row, line_words", [("INTACT,tps,7.5,paper", "tps"), ("Manual,trir,-1,paper", "trir"),
                                             ("NER,nmi,1.0001,paper", "nmi")])
def test_a_reference_figure_that_cannot_be_is_refused_naming_line_and_column(tmp_path, row, line_words):
    from audit.pipeline.leaderboard import read_reference

    path = tmp_path / "ref.csv"
    path.write_text(f"method,metric,value,source\nok,tps,0.5,paper\n{row}\nfine,custom_seconds,-3,paper\n",
                    encoding="utf-8")
    with pytest.raises(AnonauditError) as err:
        read_reference(path)
    assert f"ref.csv:3: column value: {row.split(',')[2]!r} is impossible for {line_words}" in str(err.value)
    assert "ref.csv:4" not in str(err.value)  # a metric it does not know may be any number


# ------------------------------------------------------------------ data validate prints no text

@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_validate_as_csv_of_a_jsonl_file_prints_no_document_text(workspace, fmt):
    name = "originals.tsv" if fmt == "tsv" else "originals.jsonl"
    if fmt == "tsv":
        (workspace / name).write_bytes((workspace / "originals.jsonl").read_bytes())
    res = invoke(["data", "validate", name, "--format", "csv"])
    assert res.exit_code == 2, res.output
    assert name in res.output and ":1:" in res.output
    for word in ("Jane", "Harbour", "1961", "Oslo"):
        assert word not in res.output, res.output
    assert len(res.output) < 400, res.output
