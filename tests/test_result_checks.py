"""Results that hold together: floating-point noise at the [0, 1] bounds is clamped and recorded,
never refused (issue 56, the identity release), and results that contradict themselves are refused
wherever they are read (``audit.core.consistency``)."""

from __future__ import annotations

import json

import pytest
import yaml

from audit.core.errors import DataError
from audit.core.results import SHARE_TOLERANCE, Result, ResultsFile
from anonaudit.demo.population import write as write_demo


@pytest.fixture
def demo_dir(tmp_path):
    write_demo(tmp_path / "data", n=6, seed=1)
    return tmp_path


# --------------------------------------------------------------------------- noise at the bounds


@pytest.mark.parametrize("computed, bound", [(1.0000000432612823, 1.0), (1 + SHARE_TOLERANCE, 1.0),
                                             (-1e-12, 0.0), (-SHARE_TOLERANCE, 0.0)])
def test_noise_outside_the_bounds_is_clamped_and_recorded(tmp_path, computed, bound):
    r = Result("utility", "similarity", "original", computed, (0.9 if bound else 0.0, min(1.0, computed)), 3,
               baseline=computed)
    assert r.value == bound and r.baseline == bound and r.details["clamped"]["value"] == computed
    assert r.info.clamped["baseline"] == computed
    again = ResultsFile.load(ResultsFile([r]).save(tmp_path / "results.json")).results[0]
    assert again.value == bound and again.details["clamped"] == r.details["clamped"]


def test_noise_in_a_written_file_is_clamped_on_read(tmp_path):
    data = {"schema": "anonaudit.results/1", "provenance": {}, "results": [
        {"kind": "utility", "name": "tps", "release": "r", "value": 1.0000003, "ci": [0.98, 1.0000003], "n": 4}]}
    (tmp_path / "old.json").write_text(json.dumps(data))
    r = ResultsFile.load(tmp_path / "old.json").results[0]
    assert (r.value, r.ci[1]) == (1.0, 1.0) and r.details["clamped"] == {"value": 1.0000003, "ci_high": 1.0000003}


@pytest.mark.parametrize("value", [1.0 + 2 * SHARE_TOLERANCE, 1.2, -0.001])
def test_a_real_figure_outside_the_bounds_is_still_refused(tmp_path, value):
    r = Result("utility", "similarity", "original", value, None, 3)
    assert r.value == value and "clamped" not in r.details
    with pytest.raises(DataError, match="must lie between 0 and 1"):
        ResultsFile([r]).save(tmp_path / "results.json")


def _identity_spec(demo_dir, **extra):
    spec = {"seed": 0, "out": str(demo_dir / "out"), "originals": "data/originals.jsonl",
            "releases": [{"name": "original", "path": "data/originals.jsonl"}], "metrics": ["similarity", "rouge"],
            **extra}
    path = demo_dir / "audit.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.slow
def test_an_identity_release_is_audited_by_the_command_line_and_the_api(demo_dir):
    """The "original" row of every TRI-style evaluation: the release is the originals. The real
    embedder's cosine of a document with itself is 1 within float32 rounding (1.0000000432612823
    was seen): the audit exits 0, with the figure clamped to 1 and recorded."""
    from click.testing import CliRunner

    import anonaudit
    from anonaudit.cli import main

    res = CliRunner().invoke(main, ["run", str(_identity_spec(demo_dir, gate={"min": {"similarity": 0.99}})),
                                    "--no-report"])
    assert res.exit_code == 0, res.output
    saved = {r.name: r for r in ResultsFile.load(demo_dir / "out" / "results.json").results}
    assert saved["similarity"].value == pytest.approx(1.0, abs=SHARE_TOLERANCE) and saved["rouge"].value == 1.0
    assert saved["similarity"].value <= 1.0 and saved["similarity"].ci[1] <= 1.0
    originals = [json.loads(line) for line in (demo_dir / "data" / "originals.jsonl").read_text().splitlines()]
    results = anonaudit.audit(originals=originals, releases={"original": originals}, attacks=[],
                              metrics=["similarity"], seed=0)
    sim = results.results[0]
    assert sim.value == pytest.approx(1.0, abs=SHARE_TOLERANCE) and sim.value <= 1.0
    assert sim.details == saved["similarity"].details  # the same clamp, recorded the same way (or none)
    assert results.gate(min={"similarity": 0.99}).exit_code == 0


# --------------------------------------------------------------------------- results that contradict themselves


@pytest.fixture
def audited(demo_dir):
    """A real phrase-search audit (no model) written to results.json, with its data as read back."""
    import anonaudit

    data = demo_dir / "data"
    out = demo_dir / "results.json"
    anonaudit.attack("phrase_search", originals=str(data / "originals.jsonl"),
                     releases={"suppressed": str(data / "releases" / "suppressed.jsonl")}, out=str(out),
                     progress=False)
    return out, json.loads(out.read_text())


def _edited(path, data, edit):
    """The results file edited, and its bundle's manifest sealed again over the edit (as a
    forger would: the manifest alone refuses an unsealed edit first, tests/test_hostile_bundle.py),
    so that what is judged here is the edit itself."""
    from audit.core.bundle import write_manifest

    head = next(r for r in data["results"] if r["name"] == "phrase_search")
    edit(head)
    path.write_text(json.dumps(data))
    write_manifest(path, data["provenance"])
    return head


def _refused(path, *fields):
    """The file is refused by load_results, the gate and the report, each naming the result,
    its release and ``fields``; on the command line with exit 2."""
    from click.testing import CliRunner

    import anonaudit
    from anonaudit.cli import main

    with pytest.raises(anonaudit.AnonauditError) as info:
        anonaudit.load_results(str(path))
    for text in ("'phrase_search'", "'suppressed'", *fields):
        assert text in str(info.value), str(info.value)
    for argv in (["gate", str(path), "--max", "phrase_search=1"],
                 ["report", str(path), "--out", str(path.parent / "report.html")]):
        res = CliRunner().invoke(main, argv)
        assert res.exit_code == 2 and all(f in res.output for f in fields), res.output
        assert "Traceback" not in res.output
    assert not (path.parent / "report.html").exists()
    return str(info.value)


def test_the_audit_holds_together_and_declares_how_its_value_follows_from_its_findings(audited):
    path, data = audited
    head = next(r for r in data["results"] if r["name"] == "phrase_search")
    assert head["details"]["value_from"] == "success"
    scored = [d for d in head["documents"] if d["success"] is not None]
    assert head["n"] == len(scored) and head["value"] == sum(d["success"] for d in scored) / len(scored)
    import anonaudit

    assert anonaudit.load_results(str(path)).gate(max={"phrase_search": 1.0}).exit_code == 0


def test_a_value_outside_its_own_interval_is_refused(audited):
    path, data = audited
    _edited(path, data, lambda r: r.update(ci=[0.0, r["value"] / 2] if r["value"] > 0 else [0.5, 0.9]))
    _refused(path, '"value"', '"ci"', "outside its own interval")


def test_a_risk_of_zero_beside_documents_hit_is_refused(audited):
    """Issue 56: value 0 beside every document hit was reported LOW RISK."""
    path, data = audited

    def zero(r):
        for d in r["documents"]:
            d["success"] = True
        r.update(value=0.0, ci=[0.0, 0.3], beats_baseline=False)
        r["details"]["successes"] = 0

    head = _edited(path, data, zero)
    message = _refused(path, '"value"', "disagrees with its findings", '"documents"')
    assert f"{head['n']} of {head['n']} scored findings" in message


def test_an_edited_success_count_is_refused(audited):
    path, data = audited
    _edited(path, data, lambda r: r["details"].update(successes=r["details"]["successes"] + 1))
    _refused(path, '"details.successes"', '"value"')


def test_an_edited_beats_baseline_is_refused_and_a_missing_one_recomputed(audited):
    path, data = audited
    import anonaudit

    head = next(r for r in data["results"] if r["name"] == "phrase_search")
    truth = head["ci"][0] > head["baseline"]
    _edited(path, data, lambda r: r.update(beats_baseline=not truth))
    _refused(path, '"beats_baseline"', '"baseline"', '"ci[0]"')
    del data["provenance"]["bundle"]  # a file from before beats_baseline: written before manifests too
    _edited(path, data, lambda r: r.update(beats_baseline=None))
    path.with_name("results.manifest.json").unlink()
    again = next(r for r in anonaudit.load_results(str(path)).results if r.name == "phrase_search")
    assert again.beats_baseline is truth


def test_a_finding_count_that_disagrees_with_n_is_refused(audited):
    path, data = audited
    _edited(path, data, lambda r: r.update(documents=r["documents"][:-1]))
    _refused(path, '"n"', "disagrees with its findings")


def test_figures_that_are_not_a_share_of_their_findings_are_left_alone(tmp_path):
    """Only a declared relation is recomputed: a leakage score averaged over documents may be
    above 0 with no document "successful", and a mean skips documents it could not measure."""
    from audit.core.results import Finding

    leak = Result("attack", "claim_linker.leakage", "r", 0.4, (0.2, 0.6), 2,
                  documents=[Finding("a", success=False), Finding("b", success=False)])
    tpi = Result("utility", "tpi", "r", 0.5, (0.3, 0.7), 2, details={"value_from": "mean:value"},
                 documents=[Finding("a", facts={"value": 0.4}), Finding("b", facts={"value": 0.6}),
                            Finding("c", facts={"value": None})])
    spans = Result("attack", "span_guess", "r", 0.25, (0.1, 0.5), 2, details={"value_from": "sum:recovered/attacked"},
                   documents=[Finding("a", True, facts={"recovered": 1, "attacked": 2}),
                              Finding("b", False, facts={"recovered": 0, "attacked": 2})])
    path = ResultsFile([leak, tpi, spans]).save(tmp_path / "results.json")
    assert len(ResultsFile.load(path).results) == 3
    wrong = Result("attack", "span_guess", "r", 0.25, (0.1, 0.5), 2, details={"value_from": "sum:recovered/attacked"},
                   documents=[Finding("a", True, facts={"recovered": 2, "attacked": 2}),
                              Finding("b", False, facts={"recovered": 0, "attacked": 2})])
    with pytest.raises(DataError, match="sum to 2 recovered of 4 attacked"):
        ResultsFile([wrong]).save(tmp_path / "wrong.json")
    with pytest.raises(DataError, match=r'"details.value_from" must be'):
        ResultsFile([Result("utility", "x", "r", 0.5, None, 1, details={"value_from": "median"})]).save(
            tmp_path / "odd.json")
