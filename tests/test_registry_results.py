import json

import pytest

from audit.core.errors import AnonauditError, DataError
from audit.core.interfaces import Attack
from audit.core.registry import Registry
from audit.core.results import Finding, Highlight, Result, ResultsFile, SCHEMA
from audit.core.stats import risk


class Dummy(Attack):
    name = "dummy-attack"

    def __init__(self, k: int = 2, seed: int = 0):
        self.k = k
        self.seed = seed

    def evaluate(self, scenario, release):
        return [Result.from_risk("dummy", release.name, risk(1, 2, 0.5))]


def test_register_get_and_params():
    reg = Registry()
    reg.register("attack")(Dummy)
    assert reg.get("attack", "dummy_attack") is Dummy
    assert reg.get("attack", "Dummy-Attack") is Dummy
    obj = reg.create("attack", "dummy-attack", k=3)
    assert obj.get_params() == {"k": 3, "seed": 0}
    with pytest.raises(AnonauditError, match="no parameter"):
        reg.create("attack", "dummy-attack", q=1)
    with pytest.raises(AnonauditError, match="unknown attack 'nope'"):
        reg.get("attack", "nope")


def test_register_type_checked():
    reg = Registry()
    with pytest.raises(TypeError):
        reg.register("metric")(Dummy)
    with pytest.raises(ValueError):
        reg.register("widget")


def test_lazy_entries_load_on_demand():
    reg = Registry()
    reg.add_lazy("attack", "later", "tests.test_registry_results:Dummy")
    assert "later" in reg.names("attack")
    assert reg.get("attack", "later") is Dummy
    reg.add_lazy("attack", "broken", "no_such_module_xyz:Thing")
    with pytest.raises(AnonauditError, match="could not be loaded"):
        reg.get("attack", "broken")
    reg.add_lazy("metric", "wrong", "tests.test_registry_results:Dummy")
    with pytest.raises(AnonauditError, match="not a Metric"):
        reg.get("metric", "wrong")


def test_results_roundtrip_and_replace(tmp_path):
    rf = ResultsFile(provenance={"seed": 1})
    r = Result.from_risk("x", "rel", risk(3, 4, 0.25), documents=[Finding("a", True, facts={"linked": True})])
    rf.add(r)
    rf.add(Result("utility", "tpi", "rel", 0.8, (0.7, 0.9), 4))
    rf.add(Result.from_risk("x", "rel", risk(4, 4, 0.25)))  # replaces the first
    path = rf.save(tmp_path / "out" / "results.json")
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA and len(data["results"]) == 2
    back = ResultsFile.load(path)
    assert back.get("x", "rel").value == 1.0
    assert back.get("tpi", "rel", kind="utility").ci == (0.7, 0.9)
    assert back.provenance == {"seed": 1, "bundle": "anonaudit.bundle/1"}  # saved with its manifest
    # no temporary files left; the flat table (summary.csv) and the bundle's manifest beside it
    assert sorted(tmp_path.joinpath("out").iterdir()) == [path, path.with_name("results.manifest.json"),
                                                          path.with_name("summary.csv")]


def test_findings_round_trip_through_dict_and_file(tmp_path):
    findings = [
        Finding("a", True, "Linked to its source by 2 rare phrases",
                highlights=[Highlight(3, 9, "ngram", "found in 1 document(s): a"), Highlight(12, 15, "ngram")],
                facts={"outcome": "linked", "rare_ngrams": 2, "evidence": [{"docs": ["a"]}], "guess": "a"},
                private={"guess", "evidence"}),
        Finding("b", False, highlights_in="c", highlights=[Highlight(0, 4, "claim")], facts={"linked": "c"}),
        Finding("d"),  # not scored: success None, no summary, no facts
    ]
    r = Result.from_risk("x", "rel", risk(1, 2, 0.25), details={"k": 3}, documents=findings)
    assert isinstance(r.documents, tuple) and r.documents == tuple(findings)
    data = r.to_dict()
    # facts are flat keys of the document, beside the finding's own fields
    assert data["documents"][0] == {
        "id": "a", "success": True, "summary": "Linked to its source by 2 rare phrases", "outcome": "linked",
        "rare_ngrams": 2, "evidence": [{"docs": ["a"]}], "guess": "a",
        "highlights": [{"start": 3, "end": 9, "kind": "ngram", "note": "found in 1 document(s): a"},
                       {"start": 12, "end": 15, "kind": "ngram"}], "private": ["evidence", "guess"]}
    assert data["documents"][1]["highlights_in"] == "c" and "private" not in data["documents"][1]
    assert data["documents"][2] == {"id": "d", "success": None, "highlights": []}
    back = Result.from_dict(json.loads(json.dumps(data)))
    assert back == r
    rf = ResultsFile()
    rf.add(r)
    assert ResultsFile.load(rf.save(tmp_path / "r.json")).results == [r]


def test_documents_written_before_typed_findings_still_load():
    old = {"kind": "attack", "name": "trir", "release": "rel", "value": 0.5, "ci": [0.1, 0.9], "n": 2,
           "baseline": 0.1, "beats_baseline": True, "details": {},
           "documents": [{"id": "a", "subject": "p1", "predicted": "p1", "correct": True,
                          "highlights": [{"start": 0, "end": 4, "kind": "trir_evidence", "note": "x"}]},
                         {"id": "b", "correct": False}]}
    r = Result.from_dict(old)
    a, b = r.documents
    assert a.success is None and b.success is None  # no guessing from key names
    assert a.facts == {"subject": "p1", "predicted": "p1", "correct": True} and a.private == frozenset()
    assert a.highlights == (Highlight(0, 4, "trir_evidence", "x"),)
    # written back with the same keys and values, plus "success" (and an empty "highlights" list)
    assert [{k: v for k, v in d.items() if k != "success"} for d in r.to_dict()["documents"]] == \
        [old["documents"][0], {**old["documents"][1], "highlights": []}]


def test_results_are_frozen_and_refuse_untyped_documents():
    import dataclasses

    r = Result.from_risk("x", "rel", risk(1, 2, 0.25))
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.value = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError, match="documents must be Finding objects"):
        Result.from_risk("x", "rel", risk(1, 2, 0.25), documents=[{"id": "a"}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="reserved key"):
        Finding("a", facts={"success": True})


def test_results_load_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "anonaudit.results/1",\n "results": [}')
    with pytest.raises(DataError, match=r"bad.json:2"):
        ResultsFile.load(bad)
    other = tmp_path / "other.json"
    other.write_text("{}")
    with pytest.raises(DataError, match="not an anonaudit results file"):
        ResultsFile.load(other)
    with pytest.raises(AnonauditError, match="no such results file"):
        ResultsFile.load(tmp_path / "missing.json")
    untyped = tmp_path / "untyped.json"
    untyped.write_text(json.dumps({"schema": SCHEMA, "results": [
        {"kind": "attack", "name": "x", "release": "r", "value": 0.5, "documents": [{"id": "a"}, "b"]}]}))
    with pytest.raises(DataError, match=r"results\[0\]: documents\[1\]: must be a finding"):
        ResultsFile.load(untyped)


def test_a_figure_that_says_nothing_is_never_written(tmp_path):
    # NaN (saved as null), n = 0: a reader would take them for a verdict (issue 43, class 4)
    rf = ResultsFile()
    rf.add(Result("utility", "tpi", "empty", float("nan"), None, 0))
    with pytest.raises(DataError, match=r"'tpi' on release 'empty': \"value\" is null.*\n.*\"n\" must be at least 1"):
        rf.save(tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()


def test_terminal_summary_repeats_a_components_warning_once(capsys):
    from anonaudit.cli.common import echo_summary
    from audit.core.results import Result

    weak = "the attacker is under-trained"
    echo_summary([Result("attack", "trir", "a", 0.0, None, 10, details={"warning": weak}),
                  Result("attack", "trir", "b", 0.1, None, 10, details={"warning": weak}),
                  Result("attack", "trir.top5", "a", 0.2, None, 10)])
    out, err = capsys.readouterr()
    assert "trir.top5" in out and weak not in out
    assert err.count(weak) == 1 and "WARNING trir on a, b: the attacker is under-trained" in err
