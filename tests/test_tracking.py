"""Experiment trackers (issue 60): ``Results.log_mlflow()`` and ``anonaudit run|bench --mlflow``
against a real local MLflow file store (a ``file:`` URI under tmp_path), read back through
MLflow's own client; a tracker that cannot be used is an error before the audit starts.

MLflow 3 keeps its file store in maintenance and refuses it unless ``MLFLOW_ALLOW_FILE_STORE`` is
set (its database stores need SQLAlchemy, which mlflow-skinny leaves out); anonaudit sets it while
it talks to a ``file:`` store the user named, and the tests read the store back with it set.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient  # the [test] extra installs mlflow-skinny

import anonaudit
from anonaudit.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data():
    return anonaudit.sample_data(n=8, seed=0)


@pytest.fixture(scope="module")
def results(data):
    return anonaudit.audit(originals=data["originals"], releases=data["releases"], attacks=["phrase_search"],
                           metrics=["rouge"], seed=0, progress=False)


def reader(uri: str, monkeypatch) -> MlflowClient:
    """MLflow's own client on the file store, to read back what anonaudit logged (anonaudit allows
    the file store only while it writes: here the test allows it for reading)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return MlflowClient(uri)


def _files(client: MlflowClient, run_id: str, path: str | None = None) -> list[str]:
    out = []
    for f in client.list_artifacts(run_id, path):
        out += _files(client, run_id, f.path) if f.is_dir else [f.path]
    return out


def test_log_mlflow_logs_spec_params_metrics_report_and_bundle(results, data, tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    uri = f"file:{tmp_path / 'mlruns'}"
    run_id = results.log_mlflow(uri, experiment="issue-60")
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ  # set only while anonaudit logs
    client = reader(uri, monkeypatch)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).name == "issue-60"
    for row in results.to_list():
        key = f"{row['release']}/{row['name']}"
        assert run.data.metrics[f"{key}/value"] == pytest.approx(row["value"])
        assert run.data.metrics[f"{key}/ci_low"] == pytest.approx(row["ci_low"])
        assert run.data.metrics[f"{key}/ci_high"] == pytest.approx(row["ci_high"])
        assert run.data.metrics[f"{key}/n"] == row["n"]
    assert run.data.params["seed"] == "0" and run.data.params["attack.phrase_search.max_n"] == "7"
    files = set(_files(client, run_id))
    assert {"spec.json", "report.html", "findings.csv", "results/results.json", "results/summary.csv"} <= files
    assert run.data.tags["anonaudit.edition"] == "shareable"
    # nothing private by default: no original text, no subject, no document id, no path
    local = Path(client.download_artifacts(run_id, "", str(tmp_path / "down")))
    shared = "".join(p.read_text(encoding="utf-8") for p in local.rglob("*") if p.is_file())
    shared += json.dumps(run.data.params)
    for doc in data["originals"]:
        assert doc["text"][:60] not in shared and doc["subject"] not in shared and f'"{doc["id"]}"' not in shared
    assert str(tmp_path) not in shared.replace(uri, "")


def test_private_logs_the_internal_edition_when_asked(results, tmp_path, monkeypatch):
    uri = f"file:{tmp_path / 'mlruns'}"
    run_id = results.log_mlflow(uri, private=True)
    client = reader(uri, monkeypatch)
    assert client.get_run(run_id).data.tags["anonaudit.edition"] == "internal"
    files = _files(client, run_id)
    assert any(f.startswith("results/releases/") for f in files)  # the release copies travel with it


def test_metric_names_mlflow_cannot_hold_are_made_safe_and_kept_apart():
    from anonaudit.tracking import _safe

    assert _safe("labels") == "labels"
    a, b = _safe("ré<1>"), _safe("ré?1?")
    assert a != b and a.startswith("r__1__") and all(c.isalnum() or c in "_-. /:" for c in a)


def test_run_and_bench_log_and_refuse_an_unusable_tracker_before_the_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, ["demo-data", "--out", "demo", "--n", "4"]).exit_code == 0
    (tmp_path / "audit.yaml").write_text(
        "title: tracked\nseed: 0\nout: out\noriginals: demo/originals.jsonl\n"
        "releases:\n  - {name: ours, path: demo/releases/labels.jsonl}\n"
        "attacks: [phrase_search]\nmetrics: [rouge]\n", encoding="utf-8")
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the store's folder would be")
    bad = runner.invoke(main, ["run", "audit.yaml", "--mlflow", f"file:{blocked / 'mlruns'}"])
    assert bad.exit_code == 2 and "MLflow tracking at" in bad.output and "Traceback" not in bad.output
    assert not (tmp_path / "out").exists()  # refused before the audit
    uri = f"file:{tmp_path / 'mlruns'}"
    ok = runner.invoke(main, ["run", "audit.yaml", "--mlflow", uri])
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "out" / "results.json").is_file() and "MLflow: run" in ok.output
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "regex_masker.py").write_text((ROOT / "examples" / "regex_masker.py").read_text())
    bench = runner.invoke(main, ["bench", "--command", f"{sys.executable} examples/regex_masker.py {{input}} {{output}}",
                                 "--name", "regex", "--demo-people", "6", "--compare", "suppression", "--attacks",
                                 "phrase_search", "--metrics", "rouge", "--out", "b", "--mlflow", uri,
                                 "--mlflow-experiment", "bench"])
    assert bench.exit_code == 0, bench.output
    client = reader(uri, monkeypatch)
    (exp,) = [e for e in client.search_experiments() if e.name == "bench"]
    (run,) = client.search_runs([exp.experiment_id])
    assert "regex/phrase_search/value" in run.data.metrics and "suppression/rouge/ci_low" in run.data.metrics
    assert {"leaderboard.md", "leaderboard.tex"} <= set(_files(client, run.info.run_id))
    assert "leaderboard.csv" not in _files(client, run.info.run_id)  # its sources may be paths


def test_mlflow_not_installed_is_a_clear_error(monkeypatch):
    import anonaudit.tracking as tracking

    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if not installed
    with pytest.raises(anonaudit.AnonauditError, match=r"pip install 'anonaudit\[mlflow\]'"):
        tracking.check_mlflow("file:/nowhere")


def test_a_release_named_after_its_file_reaches_the_tracker_by_pseudonym(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, ["demo-data", "--out", "demo", "--n", "4"]).exit_code == 0
    (tmp_path / "john_smith.jsonl").write_bytes((tmp_path / "demo" / "releases" / "labels.jsonl").read_bytes())
    made = runner.invoke(main, ["attack", "phrase-search", "--originals", "demo/originals.jsonl", "--release",
                                "john_smith.jsonl", "--out", "r.json"])
    assert made.exit_code == 0, made.output
    uri = f"file:{tmp_path / 'mlruns'}"
    run_id = anonaudit.load_results("r.json").log_mlflow(uri)
    client = reader(uri, monkeypatch)
    run = client.get_run(run_id)
    assert "R1/phrase_search/value" in run.data.metrics
    local = Path(client.download_artifacts(run_id, "", str(tmp_path / "down")))
    logged = "".join(p.read_text(encoding="utf-8") for p in local.rglob("*") if p.is_file())
    assert "john_smith" not in logged + json.dumps(run.data.params) + json.dumps(run.data.tags)
