import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from anonaudit.cli import main
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
    res = gate(results, "--max", "trir=0.3", "--min", "tpi=0.4")
    assert res.exit_code == 0, res.output
    assert res.output.count("PASS") == 4 and "FAIL" not in res.output


def test_one_fail_exit_1_and_release_filter(results):
    res = gate(results, "--max", "trir=0.05", "--min", "tpi=40%", "--on-point")
    assert res.exit_code == 1
    lines = [l for l in res.output.splitlines() if l.startswith("trir")]
    assert any("labels" in l and "FAIL" in l for l in lines)
    assert any("suppressed" in l and "PASS" in l for l in lines)
    # judged on the suppressed release only, the same thresholds pass
    assert gate(results, "--max", "trir=0.05", "--min", "tpi=0.4", "--release", "suppressed",
                "--on-point").exit_code == 0


def test_the_cautious_bound_is_the_default_and_on_point_the_old_reading(results):
    # trir on labels: 0.10, upper bound ~0.23: passes <= 0.15 on the point, fails on the bound
    assert gate(results, "--max", "trir=0.15", "--release", "labels", "--on-point").exit_code == 0
    res = gate(results, "--max", "trir=0.15", "--release", "labels")
    assert res.exit_code == 1 and "upper CI" in res.output
    # for --min the lower bound is compared: 0.55 >= 0.5 passes, 0.41 < 0.45 fails
    assert gate(results, "--min", "tpi=0.5", "--release", "labels").exit_code == 0
    assert gate(results, "--min", "tpi=0.45", "--release", "suppressed").exit_code == 1
    assert gate(results, "--min", "tpi=0.45", "--release", "suppressed", "--on-point").exit_code == 0
    # the old flag still runs (it is the default now)
    assert gate(results, "--max", "trir=0.15", "--release", "labels", "--on-upper-ci").exit_code == 1


def test_zero_of_eight_does_not_pass_a_ten_percent_limit(tmp_path):
    """Issue 18: span_guess <= 0.1 passed at 0/8 with an upper bound of 32%."""
    rf = ResultsFile()
    rf.add(Result.from_risk("span_guess", "r", risk(0, 8, 0.0)))
    path = rf.save(tmp_path / "results.json")
    res = gate(path, "--max", "span_guess=0.1")
    assert res.exit_code == 1 and "FAIL" in res.output


def test_an_attacker_that_failed_its_own_check_is_inconclusive_never_a_pass(tmp_path):
    rf = ResultsFile()
    weak = "the judge failed its self-consistency control"
    rf.add(Result("attack", "claim_linker.leakage", "a", 0.05, (0.0, 0.08), 20, details={"warning": weak}))
    rf.add(Result("attack", "claim_linker.leakage", "b", 0.5, (0.3, 0.7), 20, details={"warning": weak}))
    rf.add(Result.from_risk("trir", "a", risk(1, 200, 0.01)))
    path = rf.save(tmp_path / "results.json")
    junit = tmp_path / "gate.xml"
    res = gate(path, "--max", "claim_linker.leakage=0.1", "--release", "a", "--junit", junit)
    assert res.exit_code == 3, res.output
    assert "INCONCLUSIVE" in res.output and weak in res.output and "PASS" not in res.output
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("errors") == "1" and suite.get("failures") == "0"
    (case,) = suite.findall("testcase")
    assert case.find("error").get("type") == "inconclusive"
    # a failing check stays failed: the weak attacker's success is still a lower bound on the risk
    assert gate(path, "--max", "claim_linker.leakage=0.1").exit_code == 1
    # a trustworthy attacker beside it passes as before
    assert gate(path, "--max", "trir=0.1", "--release", "a").exit_code == 0


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
    res = gate(results, "--max", "trir=0.05", "--min", "tpi=0.4", "--junit", out, "--on-point")
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
