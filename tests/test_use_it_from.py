"""The guide's page docs/how-to/notebook-paper-tracker.md: its Python blocks run here, in order, in
one namespace (its bash blocks run in tests/test_readme.py; the CI files of docs/tutorials/ci.md in
tests/test_ci.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def section_blocks() -> list[str]:
    text = (ROOT / "docs/how-to/notebook-paper-tracker.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_sections_python_blocks_run(tmp_path, monkeypatch, capsys):
    blocks = section_blocks()
    assert len(blocks) >= 1
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/how-to/notebook-paper-tracker.md block {i + 1}", "exec"), namespace)  # noqa: S102
    printed = capsys.readouterr().out
    # the notebook: what the cell shows
    html = namespace["results"]._repr_html_()
    assert html.index('class="verdict"') < html.index("Risk (attack success rate") and "Per-document evidence" in html
    assert "exit code" in namespace["outcome"]._repr_html_()
    # the tracker: one MLflow run in ./mlruns, its figures read back through MLflow's client
    import os

    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # reading a file store back (see test_tracking)
    run = MlflowClient(f"file:{tmp_path / 'mlruns'}").get_run(namespace["run_id"])
    assert len([k for k in run.data.metrics if k.endswith("/value")]) == len(namespace["results"].results)
    assert os.path.isdir(tmp_path / "mlruns")
    # the paper: a booktabs table with every release of the audit
    assert "\\toprule" in printed and "\\bottomrule" in printed and "\\label{tab:audit}" in printed
    assert all(f"\n{name} &" in printed for name in namespace["results"].releases)
