import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from audit.cli import main
from audit.pipeline.gate import GateInputError, parse_threshold
from audit.core.results import Result, ResultsFile
from audit.core.stats import risk


@pytest.fixture
def results(tmp_path):
    rf = ResultsFile()
    rf.add(Result.from_risk("trir", "labels", risk(4, 40, 0.025)))  # 0.10, CI up to ~0.23
    rf.add(Result.from_risk("trir", "suppressed", risk(1, 40, 0.025)))  # 0.025
    rf.add(Result("utility", "tpi", "labels", 0.62, (0.55, 0.69), 40))
    rf.add(Result("utility", "tpi", "suppressed", 0.48, (0.41, 0.55), 40))
    return rf.save(tmp_path / "results.json")


def gate(*args):
    return CliRunner().invoke(main, ["gate", *map(str, args)])


def test_all_pass_exit_0(results):
    res = gate(results, "--max", "trir=0.2", "--min", "tpi=0.4")
    assert res.exit_code == 0, res.output
    assert res.output.count("PASS") == 4 and "FAIL" not in res.output


def test_one_fail_exit_1_and_release_filter(results):
    res = gate(results, "--max", "trir=0.05", "--min", "tpi=40%")
    assert res.exit_code == 1
    lines = [l for l in res.output.splitlines() if l.startswith("trir")]
    assert any("labels" in l and "FAIL" in l for l in lines)
    assert any("suppressed" in l and "PASS" in l for l in lines)
    # judged on the suppressed release only, the same thresholds pass
    assert gate(results, "--max", "trir=0.05", "--min", "tpi=0.4", "--release", "suppressed").exit_code == 0


def test_on_upper_ci_is_cautious(results):
    assert gate(results, "--max", "trir=0.15", "--release", "labels").exit_code == 0
    res = gate(results, "--max", "trir=0.15", "--release", "labels", "--on-upper-ci")
    assert res.exit_code == 1 and "upper CI" in res.output
    # for --min the lower bound is compared: 0.55 >= 0.5 passes, 0.41 < 0.45 fails
    assert gate(results, "--min", "tpi=0.5", "--release", "labels", "--on-upper-ci").exit_code == 0
    assert gate(results, "--min", "tpi=0.45", "--release", "suppressed", "--on-upper-ci").exit_code == 1


@pytest.mark.parametrize("args, message", [
    (["--max", "trir"], "expected NAME=VALUE"),
    (["--max", "trir=high"], "is not a number"),
    (["--max", "nosuch=0.1"], "no result named 'nosuch'"),
    (["--max", "trir=0.1", "--release", "other"], "release 'other' is not in the results"),
    ([], "no thresholds"),
])
def test_unusable_input_exit_2(results, args, message):
    res = gate(results, *args)
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_missing_or_broken_file_exit_2(tmp_path):
    res = gate(tmp_path / "absent.json", "--max", "trir=0.1")
    assert res.exit_code == 2 and "no such results file" in res.output
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert gate(bad, "--max", "trir=0.1").exit_code == 2


def test_junit_xml(results, tmp_path):
    out = tmp_path / "junit" / "gate.xml"
    res = gate(results, "--max", "trir=0.05", "--min", "tpi=0.4", "--junit", out)
    assert res.exit_code == 1
    root = ET.parse(out).getroot()
    suite = root.find("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    failed = [c for c in cases if c.find("failure") is not None]
    assert [(c.get("classname"), c.get("name")) for c in failed] == [("anonaudit.labels", "trir <= 0.05")]
    assert "0.1" in failed[0].find("failure").get("message")


def test_parse_threshold_forms():
    assert parse_threshold("trir=10%", "max").value == pytest.approx(0.1)
    assert parse_threshold(" span-guess = .25 ", "max").name == "span-guess"
    with pytest.raises(GateInputError):
        parse_threshold("x=nan", "max")
