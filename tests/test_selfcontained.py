"""results.json is self-contained and typed (issue 45, item 1): the report renders from the
file alone (descriptions, remedies and the gate's checks the run recorded), the same with no
plugin installed; the details readers rely on and the recorded checks are typed, and a file
that breaks them is refused naming the field; older files still load."""

from __future__ import annotations

import json
import shutil
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import audit.core.registry as registry_module
from anonaudit.cli import main
from audit.core.checks import Check, Threshold
from audit.core.details import Details, Sampled
from audit.core.errors import DataError
from audit.core.registry import Registry
from audit.core.results import ResultsFile
from anonaudit.demo.population import write as write_demo
from audit.pipeline.runner import Audit, load_spec
from tests.test_runner import KeepMetric, LeakAttack, make_spec

NOTE = "Run on the toy population of eight people."
REMEDY = "Reword the rare words the toy found in {exposed} of {total} documents."


class RemedyLeak(LeakAttack):
    """The toy attack with a remedy of its own."""

    remedy = REMEDY


def _registry() -> Registry:
    reg = Registry()
    reg._entry_points_loaded = True
    reg.register("attack")(RemedyLeak)
    reg.register("metric")(KeepMetric)
    import defenders.baselines as b

    reg.register("sanitizer")(b.LabelMasking)
    return reg


def _gone(self, kind, name, *args, **kwargs):
    """The installed plugins, gone: every look-up in any registry fails."""
    raise AssertionError(f"the report asked the registry for {kind} {name!r}")


def _page(path: Path) -> str:
    """The page without its generation time."""
    return re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated T", path.read_text(encoding="utf-8"))


@pytest.fixture
def run_with_gate(tmp_path):
    write_demo(tmp_path / "data", n=8, seed=3)
    reg = _registry()
    spec = load_spec(make_spec(tmp_path, gate={"max": {"toy_leak": 0.1}, "min": {"toy_keep": 0.2}},
                                report={"notes": [NOTE]}), registry=reg)
    Audit(spec, registry=reg, progress=False, echo=None).run()
    return tmp_path / "out" / "results.json"


def test_the_report_renders_from_the_file_alone(run_with_gate, tmp_path, monkeypatch):
    path = run_with_gate
    rf = ResultsFile.load(path)
    # what the run knew is in the file: the attack's remedy and description, the gate's verdict
    about = rf.about("attack", "toy_leak")
    assert about.remedy == REMEDY and about.description == LeakAttack.description
    checks = rf.checks()
    assert [(c.title, c.release, c.status) for c in checks] == [
        ("toy_leak <= 0.1", "suppressed", "fail"), ("toy_leak <= 0.1", "masked", checks[1].status),
        ("toy_keep >= 0.2", "suppressed", checks[2].status), ("toy_keep >= 0.2", "masked", checks[3].status)]
    assert all(isinstance(c, Check) and c.result is rf.get(c.result.name, c.release, c.result.kind) for c in checks)
    runner = CliRunner()
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    first = runner.invoke(main, ["report", str(path), "--out", str(tmp_path / "a" / "report.html")])
    assert first.exit_code == 0, first.output
    # the same file rendered where no plugin is installed: the same page, remedy and gate included
    monkeypatch.setattr(Registry, "get", _gone)
    monkeypatch.setattr(Registry, "create", _gone)
    monkeypatch.setattr(registry_module, "registry", Registry())
    second = runner.invoke(main, ["report", str(path), "--out", str(tmp_path / "b" / "report.html")])
    assert second.exit_code == 0, second.output
    page = _page(tmp_path / "a" / "report.html")
    assert page == _page(tmp_path / "b" / "report.html")
    fix = REMEDY.format(exposed=sum(d.success is True for d in rf.get("toy_leak", "suppressed").documents),
                        total=sum(d.success is not None for d in rf.get("toy_leak", "suppressed").documents))
    assert fix in page and LeakAttack.description in page and NOTE in page
    assert "toy_leak &lt;= 0.1" in page and "FAIL" in page  # the gate's table, from the file


def test_details_are_typed_and_a_wrong_type_is_named(run_with_gate, tmp_path):
    rf = ResultsFile.load(run_with_gate)
    r = rf.get("toy_leak", "suppressed")
    assert isinstance(r.info, Details) and r.info.rate and r.info.successes == r.details["successes"]
    sampled = r.__class__(**{**r.__dict__, "details": {**r.details, "sampled": {"documents": 4, "of": 8, "seed": 3}}})
    assert sampled.info.sampled == Sampled(4, 8, 3)
    data = json.loads(run_with_gate.read_text(encoding="utf-8"))
    data["results"][0]["details"]["sampled"] = {"documents": "four", "of": 8}
    data["results"][1]["details"]["warning"] = 7
    data["provenance"]["gate"]["checks"][0]["status"] = "maybe"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError) as info:
        ResultsFile.load(bad)
    text = str(info.value)
    assert '"details.sampled.documents" must be a whole number' in text and "results[0]" in text
    assert '"details.warning" must be a string, not 7' in text and "results[1]" in text
    del data["results"][0]["details"]["sampled"], data["results"][1]["details"]["warning"]
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError, match=r'"provenance.gate.checks\[0\].status" must be one of pass, fail, inconclusive'):
        ResultsFile.load(bad)
    # a recorded check whose result is not in the file
    data["provenance"]["gate"]["checks"][0].update(status="fail", release="nowhere")
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError, match=r"checks\[0\]\" judges result 'toy_leak' \(attack\) on release 'nowhere'"):
        ResultsFile.load(bad)
    # a check made in memory writes what it judged
    c = Check(Threshold("toy_leak", "max", 0.1), "suppressed", r, 0.5, "upper CI", "fail")
    assert c.to_dict()["result"] == "toy_leak" and c.to_dict()["kind"] == "attack"


def test_an_older_results_file_still_loads_and_renders(run_with_gate, tmp_path):
    data = json.loads(run_with_gate.read_text(encoding="utf-8"))
    for entry in data["provenance"]["components"].values():  # written before remedies were recorded
        entry.pop("remedy", None)
    del data["provenance"]["gate"]["checks"]
    del data["provenance"]["bundle"]  # nor the record that a manifest goes with it
    old = tmp_path / "old" / "results.json"
    old.parent.mkdir()
    old.write_text(json.dumps(data), encoding="utf-8")  # no manifest: written before bundles had one
    rf = ResultsFile.load(old)
    assert rf.checks() == [] and rf.about("attack", "toy_leak").remedy == ""
    # its release copies are a part of it: without them, an error naming the first one missing
    result = CliRunner().invoke(main, ["report", str(old), "--out", str(tmp_path / "old.html")])
    assert result.exit_code == 2 and "the copy of release 'suppressed' is missing" in result.output, result.output
    shutil.copytree(run_with_gate.parent / "releases", old.parent / "releases")
    result = CliRunner().invoke(main, ["report", str(old), "--out", str(tmp_path / "old.html")])
    assert result.exit_code == 0, result.output
    assert "Reword the rare words" not in (tmp_path / "old.html").read_text(encoding="utf-8")
