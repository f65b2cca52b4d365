"""The gate in CI systems' own formats (issue 60): GitHub Actions annotations and job summary,
GitLab's Code Quality report; and the example workflows in examples/ci/, parsed as YAML and
their anonaudit commands run on demo data (the install step is the only one not run: it needs
the network)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from audit.core.checks import FAIL, INCONCLUSIVE, PASS, Check, Threshold
from audit.core.results import Finding, Result
from reports.ci import github_annotations, gitlab_codequality, markdown_summary

ROOT = Path(__file__).resolve().parents[1]
GITHUB = ROOT / "examples" / "ci" / "github-audit.yml"
GITLAB = ROOT / "examples" / "ci" / "gitlab-ci.yml"
#: GitLab's Code Quality issue fields (docs.gitlab.com, "Code Quality report format").
GITLAB_FIELDS = {"description", "check_name", "fingerprint", "severity", "location"}


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("anonaudit")
    return [str(script)] if script.exists() else [sys.executable, "-c", "from anonaudit.cli import main; main()"]


def _check(release: str, status: str, *, warning: str = "", hits: int = 2) -> Check:
    docs = [Finding(f"Jane Doe case {i}", i < hits) for i in range(4)]
    r = Result("attack", "phrase_search", release, hits / 4, (0.1, 0.9), 4, 0.25, True,
               details={"warning": warning} if warning else {}, documents=docs)
    return Check(Threshold("phrase_search", "max", 0.1), release, r, 0.9, "upper CI", status, warning)


def test_annotations_one_per_failing_or_inconclusive_check_escaped():
    hostile = "r%1:a,b <script>"  # a release name may hold these (not '=' '/' or control characters)
    checks = [_check(hostile, FAIL), _check("ok", PASS, hits=0),
              _check("weak", INCONCLUSIVE, warning="the attacker failed its fit check", hits=0)]
    lines = github_annotations(checks)
    assert len(lines) == 2
    assert lines[0].startswith("::error title=") and lines[1].startswith("::warning title=")
    props, _, message = lines[0][len("::error "):].partition("::")
    # a property may not hold ':' or ',' (they would end it) and '%' is escaped everywhere
    assert "r%251%3Aa%2Cb <script>" in props and ":" not in props.partition("=")[2]
    assert "r%251:a,b" in message and "2 of 4 documents exposed" in message
    assert "fit check" in lines[1]
    assert not any("Jane Doe" in line for line in lines)


def test_the_summary_names_documents_by_pseudonym_and_escapes_names():
    checks = [_check("a|b<img src=x>", FAIL), _check("ok", PASS, hits=0)]
    names = {f"Jane Doe case {i}": f"D0{i + 1}" for i in range(4)}
    text = markdown_summary(checks, names=names)
    assert text.startswith("## anonaudit gate: :x: FAIL")
    assert "a\\|b&lt;img src=x&gt;" in text and "<img" not in text
    assert "D01, D02" in text and "Jane Doe" not in text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) == 3 and all(row.count(" | ") == 5 for row in rows)  # no pipe broke a row
    kept = markdown_summary(checks, names=None)
    assert "Jane Doe case 0" in kept


def test_codequality_issues_have_gitlabs_fields_and_stable_fingerprints():
    checks = [_check("a", FAIL), _check("b", INCONCLUSIVE, warning="weak", hits=0), _check("c", PASS, hits=0)]
    issues = gitlab_codequality(checks, path="audit/results.json")
    assert len(issues) == 2
    for issue in issues:
        assert GITLAB_FIELDS <= set(issue)
        assert issue["location"] == {"path": "audit/results.json", "lines": {"begin": 1}}
        assert re.fullmatch(r"[0-9a-f]{64}", issue["fingerprint"])
    assert [i["severity"] for i in issues] == ["critical", "minor"]
    assert issues[0]["fingerprint"] != issues[1]["fingerprint"]
    assert gitlab_codequality(checks, path="x.json")[0]["fingerprint"] == issues[0]["fingerprint"]
    assert not any("Jane Doe" in json.dumps(i) for i in issues)


# --------------------------------------------------------------------------- the examples, run


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ci")
    subprocess.run([*_cli(), "demo-data", "--out", "demo", "--n", "6"], cwd=folder, check=True,
                   capture_output=True)
    return folder


def _anonaudit_lines(script: list[str]) -> list[str]:
    """The anonaudit commands of a job's script lines (the install line needs the network)."""
    lines = [ln for block in script for ln in block.splitlines() if ln.strip()]
    return [ln.strip() for ln in lines if ln.strip().startswith("anonaudit ")]


def _run_lines(lines: list[str], folder: Path, env: dict[str, str]) -> list[subprocess.CompletedProcess]:
    out = []
    cli = shlex.join(_cli())
    for line in lines:
        res = subprocess.run(["bash", "-c", cli + line[len("anonaudit"):]], cwd=folder, env=env,
                             capture_output=True, text=True, timeout=300)
        allowed = {0, 1, 3} if line.startswith("anonaudit gate") else {0}
        assert res.returncode in allowed and "Traceback" not in res.stderr, (line, res.stdout, res.stderr)
        out.append(res)
    return out


def _private_words(folder: Path) -> set[str]:
    """Document ids and subjects of the demo originals: none may reach a CI summary."""
    docs = [json.loads(ln) for ln in (folder / "demo" / "originals.jsonl").read_text().splitlines() if ln]
    return {d["id"] for d in docs} | {d["subject"] for d in docs}


def test_the_github_workflow_parses_and_its_commands_run(demo, tmp_path):
    flow = yaml.safe_load(GITHUB.read_text(encoding="utf-8"))
    triggers = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers
    steps = flow["jobs"]["audit"]["steps"]
    assert any(s.get("uses", "").startswith("actions/checkout") for s in steps)
    assert any(s.get("uses", "").startswith("actions/upload-artifact") and s.get("if") == "always()" for s in steps)
    lines = _anonaudit_lines([s["run"] for s in steps if "run" in s])
    gate = [ln for ln in lines if ln.startswith("anonaudit gate")]
    assert len(gate) == 1 and "--format github" in gate[0]
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    env = {**os.environ, **flow["env"], "ORIGINALS": "demo/originals.jsonl",
           "RELEASE": "demo/releases/labels.jsonl", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true"}
    results = _run_lines(lines, demo, env)
    gate_out = results[-1].stdout
    annotations = [ln for ln in gate_out.splitlines() if ln.startswith("::")]
    junit = (demo / "audit" / "gate.xml").read_text()
    failures = junit.count("<failure") + junit.count("<error")
    assert results[-1].returncode == (1 if "::error" in gate_out else 3 if annotations else 0)
    assert len(annotations) == failures
    text = summary.read_text()
    assert text.startswith("earlier step\n## anonaudit gate")  # appended, never replaced
    assert (demo / "audit" / "shareable" / "report.html").is_file()
    for word in _private_words(demo):
        assert word not in text and word not in gate_out


def test_the_gitlab_job_parses_and_its_commands_run(demo):
    job = yaml.safe_load(GITLAB.read_text(encoding="utf-8"))["audit-release"]
    report = job["artifacts"]["reports"]["codequality"]
    lines = _anonaudit_lines(job["script"])
    gate = [ln for ln in lines if ln.startswith("anonaudit gate")]
    assert len(gate) == 1 and "--format gitlab" in gate[0] and f"--codequality {report}" in gate[0]
    env = {**os.environ, **job["variables"], "ORIGINALS": "demo/originals.jsonl",
           "RELEASE": "demo/releases/labels.jsonl"}
    results = _run_lines(lines, demo, env)
    issues = json.loads((demo / report).read_text())
    assert isinstance(issues, list) and (len(issues) > 0) == (results[-1].returncode != 0)
    for issue in issues:
        assert GITLAB_FIELDS <= set(issue) and issue["location"]["path"] == "audit/results.json"
    if results[-1].returncode == 1:
        assert any(i["severity"] == "critical" for i in issues)
    for word in _private_words(demo):
        assert word not in json.dumps(issues)


def test_the_readme_holds_both_examples_verbatim():
    """The CI maintainer's tutorial shows both files as they are in examples/ci/."""
    text = (ROOT / "docs/tutorials/ci.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    for path in (GITHUB, GITLAB):
        assert path.read_text(encoding="utf-8") in blocks, f"docs/tutorials/ci.md lacks {path.name} as a yaml block"


def test_a_job_summary_that_is_the_results_file_is_refused(demo):
    results = demo / "own.json"
    subprocess.run([*_cli(), "attack", "phrase-search", "--originals", "demo/originals.jsonl", "--release",
                    "demo/releases/labels.jsonl", "--out", str(results)], cwd=demo, check=True, capture_output=True)
    before = results.read_bytes()
    res = subprocess.run([*_cli(), "gate", str(results), "--max", "phrase_search=0.1", "--format", "github"],
                         env={**os.environ, "GITHUB_STEP_SUMMARY": str(results)}, capture_output=True, text=True)
    assert res.returncode == 2 and "GITHUB_STEP_SUMMARY" in res.stderr
    assert results.read_bytes() == before


def test_a_release_named_after_its_file_is_named_by_pseudonym_unless_keep_ids(demo, tmp_path):
    """``--release john_smith.jsonl`` names its release john_smith: the shareable edition calls it
    R1, and so do the annotations, the job summary and the Code Quality report."""
    results = tmp_path / "named.json"
    shutil.copy(demo / "demo" / "releases" / "labels.jsonl", tmp_path / "john_smith.jsonl")
    subprocess.run([*_cli(), "attack", "phrase-search", "--originals", str(demo / "demo" / "originals.jsonl"),
                    "--release", "john_smith.jsonl", "--out", str(results)], cwd=tmp_path, check=True,
                   capture_output=True)
    summary = tmp_path / "summary.md"
    outputs = {}
    for keep in ([], ["--keep-ids"]):
        summary.write_text("")
        res = subprocess.run([*_cli(), "gate", str(results), "--max", "phrase_search=0.1", "--format", "github",
                              "--codequality", "cq.json", *keep], cwd=tmp_path, capture_output=True, text=True,
                             env={**os.environ, "GITHUB_STEP_SUMMARY": str(summary)})
        assert res.returncode == 1, res.stderr
        annotations = "\n".join(ln for ln in res.stdout.splitlines() if ln.startswith("::"))
        outputs[bool(keep)] = annotations + summary.read_text() + (tmp_path / "cq.json").read_text()
    assert "john\\_smith" not in outputs[False] and "john_smith" not in outputs[False] and "R1" in outputs[False]
    assert "john_smith" in outputs[True]
