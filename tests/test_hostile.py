"""Hostile input, class by class (issue 43, part A): every case must end in a clear error (exit 2,
naming the file, field or document) or a correct result; never a traceback, never an exit 0 that
left its output unchanged or wrong. Non-slow: no model is loaded (a toy registry stands in for
the attacks and metrics, and the baselines are built without their spaCy pipeline).

Classes (the README's Reliability section lists them with these tests; 5 and 6 are in
tests/test_hostile_inputs.py):
1. outputs that would destroy an input or a file of another kind;
2. one release name for two files in one results file;
3. silent no-ops (unknown labels, zero sizes, empty lists, a failing metric);
4. results files read leniently (reversed or NaN intervals, n = 0);
5. tracebacks (unwritable outputs, deep nesting, lone surrogates, bad templates, demo sizes,
   non-finite chart values, unsafe TRI method names, YAML alias bombs);
6. pipes and FIFOs.
"""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from anonaudit.cli import main
from audit.core.interfaces import Attack, Metric
from audit.core.registry import Registry
from audit.core.results import Finding, Result, ResultsFile
from audit.core.stats import mean_interval, risk
from anonaudit.demo.population import write as write_demo


class Survives(Attack):
    """Links a released document to its original when one of its long words survives."""

    name = "toy_survives"
    requires = frozenset({"originals"})

    def __init__(self, min_len: int = 6):
        """min_len: shortest word that counts."""
        self.min_len = min_len

    def evaluate(self, scenario, release):
        docs, hits = [], 0
        for d in release:
            words = {w for w in scenario.originals[d.id].text.split() if len(w) >= self.min_len}
            ok = bool(words & set(d.text.split()))
            hits += ok
            docs.append(Finding(id=d.id, success=ok, highlights=()))
        return [Result.from_risk(self.name, release.name, risk(hits, len(release), 1 / len(release)),
                                 documents=docs)]


class Crash(Attack):
    """An attack that fails while it runs (a bug in a plugin, a damaged cache)."""

    name = "toy_crash"
    requires = frozenset({"originals"})

    def evaluate(self, scenario, release):
        raise KeyError("a damaged index entry")


class Kept(Metric):
    """Share of the original's length kept."""

    name = "toy_kept"

    def evaluate(self, scenario, release):
        vals = [min(1.0, len(d.text) / len(scenario.originals[d.id].text)) for d in release]
        mean, ci = mean_interval(vals)
        return [Result("utility", self.name, release.name, mean, ci, len(vals))]


class Broken(Metric):
    """A metric that fails on every release (a corrupt cache, a bug)."""

    name = "toy_broken"

    def evaluate(self, scenario, release):
        raise ValueError("the embeddings cache is corrupt")


class Nan(Metric):
    """A metric whose figure is not a number."""

    name = "toy_nan"

    def evaluate(self, scenario, release):
        return [Result("utility", self.name, release.name, math.nan, None, len(release))]


def toy_registry() -> Registry:
    reg = Registry()
    reg._entry_points_loaded = True  # only these, not the installed plugins
    from defenders.baselines import LabelMasking, SpacyNER, Suppression

    for kind, cls in (("attack", Survives), ("attack", Crash), ("metric", Kept), ("metric", Broken), ("metric", Nan),
                      ("sanitizer", Suppression), ("sanitizer", LabelMasking), ("sanitizer", SpacyNER)):
        reg.register(kind)(cls)
    return reg


@pytest.fixture(scope="module")
def reg() -> Registry:
    return toy_registry()


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_demo(tmp_path / "demo", n=6, seed=1)
    return tmp_path


def run(reg: Registry, *args):
    return CliRunner().invoke(main, [str(a) for a in args], obj={"registry": reg})


def clear_error(res, *needles: str) -> str:
    """The command failed with exit 2 and a message (no traceback) naming each needle."""
    out = res.output
    assert res.exit_code == 2, f"exit {res.exit_code}: {out}"
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in out
    for needle in needles:
        assert needle in out, f"{needle!r} not in: {out}"
    return out


def attack(reg, *args):
    return run(reg, "attack", "toy-survives", "--originals", "demo/originals.jsonl", *args)
# --------------------------------------------------------------------------- 1. outputs that destroy inputs


def test_an_output_that_is_an_input_is_refused_even_forced(demo, reg):
    assert attack(reg, "--release", "demo/releases/labels.jsonl", "--out", "R.json").exit_code == 0
    originals = (demo / "demo/originals.jsonl").read_bytes()
    results = (demo / "R.json").read_bytes()
    cases = [
        (["report", "R.json", "--out", "R.json"], "R.json", "input"),
        (["sanitize", "suppression", "--input", "demo/originals.jsonl", "--out", "demo/originals.jsonl"],
         "originals.jsonl", "input (--input)"),
        (["data", "convert", "demo/originals.jsonl", "demo/originals.jsonl"], "originals.jsonl", "input (SRC)"),
        (["attack", "toy-survives", "--originals", "demo/originals.jsonl", "--release", "demo/releases/labels.jsonl",
          "--out", "demo/originals.jsonl"], "originals.jsonl", "input (--originals)"),
    ]
    for args, path, why in cases:
        clear_error(run(reg, *args), path, why, "give another output path")
        # no output destroys an input, --force included (it replaces files of another kind only)
        clear_error(run(reg, *args, "--force"), path, why, "--force does not change that")
    assert (demo / "demo/originals.jsonl").read_bytes() == originals
    assert (demo / "R.json").read_bytes() == results


def test_results_never_replace_an_input_and_force_replaces_a_file_of_another_kind(demo, reg):
    """Results merge into the file they go to: --force cannot make an input one (it used to be
    offered, then failed reading the input as a results file); over a file of another kind
    --force writes a new results file (it used to fail the same way)."""
    originals = (demo / "demo/originals.jsonl").read_bytes()
    for args in (["attack", "toy-survives", "--originals", "demo/originals.jsonl", "--release",
                  "demo/releases/labels.jsonl", "--out", "demo/originals.jsonl", "--force"],
                 ["utility", "--metrics", "toy_kept", "--originals", "demo/originals.jsonl", "--release",
                  "labels=demo/releases/labels.jsonl", "--out", "demo/releases/labels.jsonl", "--force"]):
        out = clear_error(run(reg, *args), "input (", "is never written over an input")
        assert "invalid JSON" not in out
    assert (demo / "demo/originals.jsonl").read_bytes() == originals
    (demo / "notes.json").write_text('{"mine": 1}\n')
    res = attack(reg, "--release", "demo/releases/labels.jsonl", "--out", "notes.json", "--force")
    assert res.exit_code == 0, res.output
    assert [r.name for r in ResultsFile.load(demo / "notes.json").results] == ["toy_survives"]


def test_an_output_over_an_existing_file_of_another_kind_is_refused(demo, reg):
    assert attack(reg, "--release", "demo/releases/labels.jsonl", "--out", "R.json").exit_code == 0
    (demo / "data.csv").write_text("name,age\nAda,36\n")
    originals = (demo / "demo/originals.jsonl").read_bytes()
    clear_error(run(reg, "report", "R.json", "--out", "demo/originals.jsonl"), "originals.jsonl",
                "is not an anonaudit HTML report")
    clear_error(run(reg, "report", "R.json", "--out", "data.html"), "data.csv", "findings CSV beside data.html",
                "not an anonaudit findings CSV")
    clear_error(run(reg, "sanitize", "suppression", "--input", "demo/originals.jsonl", "--out", "R.json"),
                "R.json", "not a JSONL file of documents")
    clear_error(run(reg, "gate", "R.json", "--max", "toy_survives=1", "--junit", "data.csv"), "data.csv",
                "not a JUnit XML file")
    assert (demo / "data.csv").read_text() == "name,age\nAda,36\n"
    assert (demo / "demo/originals.jsonl").read_bytes() == originals
    assert not (demo / "data.html").exists()
    # its own kind is replaced as before: a report over a report, results merged into results
    assert run(reg, "report", "R.json", "--out", "a.html").exit_code == 0
    assert run(reg, "report", "R.json", "--out", "a.html").exit_code == 0
    assert (demo / "a.csv").exists()
    res = run(reg, "report", "R.json", "--out", "data.html", "--force")
    assert res.exit_code == 0 and (demo / "data.csv").read_text().startswith("release,result,kind")


def test_the_files_written_beside_out_are_named_in_the_help(reg):
    report = run(reg, "report", "--help").output
    assert "findings.csv" in report and "NAME.csv" in report
    attack_help = " ".join(run(reg, "attack", "toy-survives", "--help").output.split())
    assert "X.releases/" in attack_help and ".X.json.lock" in attack_help
    run_help = " ".join(run(reg, "run", "--help").output.split())
    assert "findings.csv" in run_help and "releases/" in run_help
    for args in (["report"], ["gate"], ["run"], ["demo"], ["demo-data"], ["data", "convert"],
                 ["attack", "toy-survives"], ["utility"], ["sanitize", "suppression"], ["harden"]):
        assert "--force" in run(reg, *args, "--help").output, args

# --------------------------------------------------------------------------- 2. one name, one file


def test_one_release_name_means_one_file_whichever_command_wrote_it(demo, reg):
    assert attack(reg, "--release", "x=demo/releases/labels.jsonl", "--out", "R.json").exit_code == 0
    before = (demo / "R.json").read_bytes()
    copies = {p.name: p.read_bytes() for p in (demo / "R.releases").iterdir()}
    res = run(reg, "utility", "--metrics", "toy_kept", "--originals", "demo/originals.jsonl",
              "--release", "x=demo/releases/suppressed.jsonl", "--out", "R.json")
    clear_error(res, "release 'x'", "labels.jsonl", "suppressed.jsonl", "one release name must mean one file")
    assert (demo / "R.json").read_bytes() == before  # nothing written: results nor release copies
    assert {p.name: p.read_bytes() for p in (demo / "R.releases").iterdir()} == copies
    # the same file again (or the same texts from another path) is no conflict
    (demo / "copy.jsonl").write_bytes((demo / "demo/releases/labels.jsonl").read_bytes())
    res = run(reg, "utility", "--metrics", "toy_kept", "--originals", "demo/originals.jsonl",
              "--release", "x=copy.jsonl", "--out", "R.json")
    assert res.exit_code == 0, res.output
    assert {r.name for r in ResultsFile.load(demo / "R.json").results} == {"toy_survives", "toy_kept"}


def test_the_writer_refuses_a_conflict_that_appears_under_its_lock(tmp_path):
    # a parallel command wrote the name for another file after this one read the results file
    from audit.core.errors import AnonauditError
    from audit.pipeline.provenance import merge_provenance

    current = {"command": "attack x", "releases": {"r": {"source": "/a.jsonl", "fingerprint": "1"}}}
    mine = {"command": "utility", "releases": {"r": {"source": "/b.jsonl", "fingerprint": "2"}}}
    with pytest.raises(AnonauditError, match=r"release 'r' is already in this results file from /a.jsonl.*/b.jsonl"):
        merge_provenance(current, mine)

# --------------------------------------------------------------------------- 3. silent no-ops


def test_a_metric_that_fails_makes_the_command_fail_with_its_reason(demo, reg):
    res = run(reg, "utility", "--metrics", "toy_kept,toy_broken", "--originals", "demo/originals.jsonl",
              "--release", "demo/releases/labels.jsonl", "--out", "R.json")
    clear_error(res, "toy_broken", "the embeddings cache is corrupt", "1 of 2 metric(s) did not run")
    assert ResultsFile.load(demo / "R.json").get("toy_kept", "labels") is not None  # the others are kept


def test_an_attack_that_fails_exits_non_zero_with_its_reason_not_a_traceback(demo, reg):
    res = run(reg, "attack", "toy-crash", "--originals", "demo/originals.jsonl", "--release",
              "demo/releases/labels.jsonl", "--out", "R.json")
    clear_error(res, "attack 'toy_crash' failed: KeyError", "a damaged index entry")
    (demo / "a.yaml").write_text("originals: demo/originals.jsonl\nreleases: [demo/releases/labels.jsonl]\n"
                                 "attacks: [toy_survives, toy_crash]\n")
    clear_error(run(reg, "run", "a.yaml", "--no-report"), "attack 'toy_crash' failed: KeyError")
    assert ResultsFile.load(demo / "audit-out/results.json").get("toy_survives", "labels") is not None


def test_a_metric_whose_figure_is_nan_fails_instead_of_writing_it(demo, reg):
    res = run(reg, "utility", "--metrics", "toy_nan", "--originals", "demo/originals.jsonl",
              "--release", "demo/releases/labels.jsonl", "--out", "R.json")
    clear_error(res, "toy_nan", "not finite")
    assert not ResultsFile.load(demo / "R.json").results

def test_spec_fields_are_validated_by_type_and_empty_lists_are_errors(demo, reg):
    base = "originals: demo/originals.jsonl\nattacks: [toy_survives]\n"
    cases = [
        ("title: [a, b]\nreleases: [demo/releases/labels.jsonl]\n", "title: must be a non-empty text, got a list of 2"),
        ("releases: []\n", "releases: is empty"),
        ("releases: [demo/releases/labels.jsonl]\nreport: {max_documents: -1}\n", "report.max_documents"),
        ("releases: [demo/releases/labels.jsonl]\ngate: {on_point: 'yes'}\n", "gate.on_point: must be true or false"),
        ("releases: [demo/releases/labels.jsonl]\nattacks: [{name: toy_survives, min_len: 0}]\n", None),
    ]
    for i, (extra, message) in enumerate(cases):
        spec = demo / f"s{i}.yaml"
        spec.write_text(extra + (base if "attacks" not in extra else "originals: demo/originals.jsonl\n"))
        res = run(reg, "run", spec)
        if message is None:  # min_len has no bound in its type: it runs
            assert res.exit_code == 0, res.output
        else:
            clear_error(res, f"s{i}.yaml", message)


def test_counts_and_sizes_are_validated_by_type(demo, reg):
    from audit.core.paramtypes import check_params
    from defenders.baselines import SpacyNER

    res = run(reg, "sanitize", "spacy-ner", "--input", "demo/originals.jsonl", "--out", "o.jsonl", "--batch-size", "0")
    clear_error(res, "batch_size", "must be a whole number of at least 1, got 0")
    assert not (demo / "o.jsonl").exists()
    assert check_params(SpacyNER, {"batch_size": 1}) == {}
    # a float is a finite number, on the command line and in a spec
    clear_error(run(reg, "llm", "chat", "hi", "--temperature", "nan"), "'nan' is not a finite number")
    from defenders.baselines import PresidioSanitizer

    assert "must be a finite number, got inf" in check_params(PresidioSanitizer, {"score_threshold": math.inf})[
        "score_threshold"]


def test_labels_are_checked_against_what_the_annotations_or_the_detector_know(demo, reg):
    res = run(reg, "sanitize", "suppression", "--input", "demo/originals.jsonl", "--out", "o.jsonl",
              "--labels", "NOSUCHLABEL")
    out = clear_error(res, "unknown label(s) NOSUCHLABEL", "originals.jsonl", "PERSON")
    res = run(reg, "sanitize", "spacy-ner", "--input", "demo/originals.jsonl", "--out", "o.jsonl",
              "--labels", "PERSN,DATEE")
    out = clear_error(res, "unknown label(s) PERSN, DATEE", "spaCy model")
    assert "PERSON" in out and "DATE" in out
    res = run(reg, "sanitize", "suppression", "--input", "demo/originals.jsonl", "--out", "o.jsonl",
              "--param", "labels=[]")
    clear_error(res, "labels is empty")
    assert not (demo / "o.jsonl").exists()
    # known labels, in any case, work
    res = run(reg, "sanitize", "suppression", "--input", "demo/originals.jsonl", "--out", "o.jsonl",
              "--labels", "person")
    assert res.exit_code == 0, res.output

def test_a_format_in_a_spec_is_checked_with_the_rest(demo, reg):
    (demo / "f.yaml").write_text("originals: {path: demo/originals.jsonl, format: 5}\nattacks: [toy_survives]\n"
                                 "releases: [{path: demo/releases/labels.jsonl, format: jsonx}]\n")
    clear_error(run(reg, "run", "f.yaml"), "originals.format: must be one of", "releases[0].format: must be one of")


# --------------------------------------------------------------------------- 4. results read strictly

GOOD = {"kind": "attack", "name": "trir", "release": "r", "value": 0.5, "ci": [0.25, 0.75], "n": 12}


@pytest.mark.parametrize("change, field", [
    ({"ci": [0.9, 0.1]}, '"ci" must be ordered'),
    ({"ci": [0.1, 1.5]}, '"ci[1]" must lie between 0 and 1'),
    ({"value": "NaN"}, '"value" must be a finite number'),
    ({"ci": [0.1, "Infinity"]}, '"ci[1]" must be a finite number'),
    ({"value": None}, '"value" is null'),
    ({"n": 0}, '"n" must be at least 1'),
    ({"n": None}, '"n" must be a whole number'),
    ({"baseline": -0.5}, '"baseline" must lie between 0 and 1'),
])
def test_results_files_are_validated_on_read(tmp_path, change, field):
    item = {**GOOD, **change}
    text = json.dumps({"schema": "anonaudit.results/1", "results": [item]})
    text = text.replace('"NaN"', "NaN").replace('"Infinity"', "Infinity")  # JSON as Python writes them
    (tmp_path / "R.json").write_text(text)
    for args in (["gate", "R.json", "--max", "trir=0.9"], ["report", "R.json"]):
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(tmp_path)
            res = CliRunner().invoke(main, args)
        clear_error(res, "R.json", "results[0]", field)
    assert not (tmp_path / "report.html").exists()


def test_utility_with_its_default_metrics_fails_when_none_of_them_could_run(demo, reg, monkeypatch):
    from audit.core.errors import AnonauditError

    def unsuited(self, scenario, release):
        raise AnonauditError("these originals carry no gold spans")

    monkeypatch.setattr(Kept, "evaluate", unsuited)
    slim = Registry()
    slim._entry_points_loaded = True
    slim.register("metric")(Kept)
    res = run(slim, "utility", "--originals", "demo/originals.jsonl", "--release", "demo/releases/labels.jsonl",
              "--out", "R.json")
    clear_error(res, "no gold spans", "1 of 1 metric(s) did not run")
