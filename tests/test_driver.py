"""The generic command-line driver: a new component is one class plus one registration, and
gets ``anonaudit attack NAME`` (typed options from its constructor), ``anonaudit run`` and a
report section with no command-line code of its own. No models; the registry is the test's
own, given to ``main`` as the click context object."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pytest
import yaml
from click.testing import CliRunner

from anonaudit.cli import main
from anonaudit.cli.param_options import flag, parameters, parse_doc
from audit.core.data import Corpus
from audit.core.interfaces import Attack, Metric
from audit.core.registry import Registry
from audit.core.results import Finding, Result, ResultsFile
from audit.core.stats import mean_interval, risk
from anonaudit.demo.population import write as write_demo


class WordsAttack(Attack):
    """Links a released document to its original when a long word of the original survives."""

    name = "toy_words"
    description = "A toy adversary that looks for long words of the original left in the released text."
    requires = frozenset({"originals"})
    cli_aliases = {"shortest": "min_len", "ignore_case": "no_use_case"}

    def __init__(self, min_len: int = 6, mode: Literal["any", "all"] = "any", labels: Sequence[str] | None = None,
                 use_case: bool = True, weight: float = 1.0, extra: Corpus | None = None,
                 notes: dict | None = None, seed: int = 0, progress: bool = False):
        """
        min_len: shortest word that counts, in letters.
        mode: whether any or all of the long words must survive.
        labels: entity labels the attacker cares about
            (recorded only).
        use_case: compare words with their case.
        weight: a number recorded in the result.
        extra: more documents the attacker holds (their number is recorded).
        """
        self.min_len = min_len
        self.mode = mode
        self.labels = labels
        self.use_case = use_case
        self.weight = weight
        self.extra = extra
        self.notes = notes
        self.seed = seed
        self.progress = progress

    def evaluate(self, scenario, release):
        def words(text):
            found = {w.strip(".,;:") for w in text.split() if len(w.strip(".,;:")) >= self.min_len}
            return found if self.use_case else {w.lower() for w in found}

        docs, hits = [], 0
        for d in release:
            long_words = words(scenario.originals[d.id].text)
            kept = long_words & words(d.text)
            ok = bool(kept) and (self.mode == "any" or kept == long_words)
            hits += ok
            docs.append(Finding(id=d.id, success=ok, summary=f"{len(kept)} long words survive"))
        r = risk(hits, len(release), 1 / max(1, len(release)))
        return [Result.from_risk(self.name, release.name, r, documents=docs, details={
            "weight": self.weight, "extra_documents": None if self.extra is None else len(self.extra)})]


class LengthMetric(Metric):
    """Share of the original's length kept."""

    name = "toy_length"
    description = "The released text's length over the original's."

    def __init__(self, cap: float = 1.0):
        """cap: the largest value a document can score."""
        self.cap = cap

    def evaluate(self, scenario, release):
        vals = [min(self.cap, len(d.text) / max(1, len(scenario.originals[d.id].text))) for d in release]
        mean, ci = mean_interval(vals)
        return [Result("utility", self.name, release.name, mean, ci, len(vals))]


def toy_registry() -> Registry:
    reg = Registry()
    reg._entry_points_loaded = True  # only these, not the installed plugins
    reg.register("attack")(WordsAttack)
    reg.register("metric")(LengthMetric)
    return reg


@pytest.fixture
def data(tmp_path):
    write_demo(tmp_path / "data", n=6, seed=1)
    return tmp_path


def invoke(reg: Registry, *args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], obj={"registry": reg})


# --------------------------------------------------------------------------- from the constructor


def test_parameters_come_from_hints_defaults_and_docstring_lines():
    by = {p.name: p for p in parameters(WordsAttack)}
    assert (by["min_len"].kind, by["min_len"].default) == ("int", 6)
    assert by["min_len"].help == "shortest word that counts, in letters."
    assert (by["mode"].kind, by["mode"].choices) == ("choice", ("any", "all"))
    assert by["labels"].kind == "list" and by["labels"].help == "entity labels the attacker cares about (recorded only)."
    assert (by["use_case"].kind, flag(by["use_case"])) == ("bool", "case")
    assert by["weight"].kind == "float" and by["extra"].kind == "corpus" and by["notes"].kind == "other"
    # the inline layout of the utility metrics' docstrings
    assert parse_doc("``k``: number of clusters; ``runs``: seeded runs averaged. More text.") == {
        "k": "number of clusters", "runs": "seeded runs averaged."}


def test_a_registered_attack_gets_its_command_and_help():
    reg = toy_registry()
    res = invoke(reg, "attack", "--help")
    assert res.exit_code == 0, res.output
    assert "toy-words" in res.output and "Links a released document to its original" in res.output
    res = invoke(reg, "attack", "toy-words", "--help")
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "A toy adversary that looks for long words" in out
    assert "--min-len, --shortest N Shortest word that counts, in letters. [default: 6]" in out
    assert "--mode [any|all]" in out and "--case / --no-case, --ignore-case" in out
    assert "--labels A,B" in out and "--extra FILE" in out and "--originals FILE" in out
    assert "--background" not in out  # it does not need any
    assert "without an option of their own: notes" in out
    assert "--llm" not in out  # it takes no LLM


def test_the_attack_runs_from_its_typed_options_and_merges_results(data):
    reg = toy_registry()
    out = data / "results.json"
    (data / "more.jsonl").write_text('{"id": "m1", "text": "More text."}\n{"id": "m2", "text": "Other."}\n')
    res = invoke(reg, "attack", "toy-words", "--originals", data / "data/originals.jsonl",
                 "--release", f"supp={data / 'data/releases/suppressed.jsonl'}", "--shortest", "7",
                 "--ignore-case", "--labels", "PERSON, LOC", "--weight", "0.5", "--extra", data / "more.jsonl",
                 "--param", "notes={why: test}", "--out", out)
    assert res.exit_code == 0, res.output
    assert "toy_words" in res.output and "supp" in res.output  # the summary table
    rf = ResultsFile.load(out)
    r = rf.get("toy_words", "supp")
    assert r is not None and r.n == 6
    assert r.details["weight"] == 0.5 and r.details["extra_documents"] == 2
    comp = rf.provenance["components"]["attack:toy_words"]
    assert comp["params"] == {"min_len": 7, "mode": "any", "labels": ["PERSON", "LOC"], "use_case": False,
                              "weight": 0.5, "extra": {"corpus": "more", "fingerprint": comp["params"]["extra"][
                                  "fingerprint"]}, "notes": {"why": "test"}, "seed": 0, "progress": True}
    assert rf.provenance["command"] == "attack toy-words" and (data / rf.provenance["releases"]["supp"]["path"]).is_file()
    assert rf.provenance["releases"]["supp"]["path"].startswith("releases/supp-")
    # a second command merges into the same file: both releases are there
    res = invoke(reg, "attack", "toy-words", "--originals", data / "data/originals.jsonl", "--release",
                 f"labels={data / 'data/releases/labels.jsonl'}", "--mode", "all", "--sample", "3", "--out", out)
    assert res.exit_code == 0, res.output
    rf = ResultsFile.load(out)
    assert rf.get("toy_words", "supp") is not None and rf.get("toy_words", "labels").n == 3
    assert set(rf.provenance["releases"]) == {"supp", "labels"}


def test_user_errors_are_one_line(data):
    reg = toy_registry()
    base = ["attack", "toy-words", "--originals", data / "data/originals.jsonl", "--release",
            data / "data/releases/suppressed.jsonl", "--out", data / "r.json"]
    res = invoke(reg, *base, "--mode", "some")
    assert res.exit_code == 2 and "'some' is not one of 'any', 'all'" in res.output
    res = invoke(reg, *base, "--min-len", "4", "--param", "min_len=5")
    assert res.exit_code == 2 and "given twice" in res.output
    res = invoke(reg, *base, "--param", "colour=red")
    assert res.exit_code == 2 and "no parameter" in res.output and "colour" in res.output
    res = invoke(reg, "attack", "toy-words", "--release", data / "data/releases/suppressed.jsonl",
                 "--out", data / "r.json")
    assert res.exit_code == 2 and "--originals" in res.output and "Traceback" not in res.output


def test_utility_takes_the_metrics_of_the_registry(data):
    reg = toy_registry()
    res = invoke(reg, "utility", "--help")
    assert res.exit_code == 0 and "--cap X" in res.output and "toy_length" in res.output
    out = data / "u.json"
    res = invoke(reg, "utility", "--originals", data / "data/originals.jsonl", "--release",
                 data / "data/releases/suppressed.jsonl", "--cap", "0.5", "--out", out)
    assert res.exit_code == 0, res.output
    r = ResultsFile.load(out).get("toy_length", "suppressed", "utility")
    assert r is not None and r.value <= 0.5
    copy = ResultsFile.load(out).provenance["releases"]["suppressed"]["path"]
    assert copy.startswith("u.releases/suppressed-") and (data / copy).is_file()  # u.json's own copies
    res = invoke(reg, "utility", "--originals", data / "data/originals.jsonl", "--release",
                 data / "data/releases/suppressed.jsonl", "--metrics", "bleu", "--out", out)
    assert res.exit_code == 2 and "bleu" in res.output


def test_the_same_attack_through_an_audit_spec_and_the_report(data):
    reg = toy_registry()
    spec = {"title": "Toy", "out": "out", "originals": "data/originals.jsonl",
            "releases": [{"name": "labels", "path": "data/releases/labels.jsonl"}],
            "attacks": [{"name": "toy_words", "params": {"min_len": 7}}]}
    path = data / "audit.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    res = invoke(reg, "run", path)
    assert res.exit_code == 0, res.output
    results = json.loads((data / "out" / "results.json").read_text())
    assert [(r["name"], r["release"]) for r in results["results"]] == [("toy_words", "labels")]
    html = Path(data / "out" / "report.html").read_text(encoding="utf-8")
    assert "toy_words" in html or "toy-words" in html
    assert "A toy adversary that looks for long words" in html


def test_a_missing_input_file_is_named_by_its_option(tmp_path):
    """A user typed --release, not releases[0].path: the error names the option and the file."""
    from click.testing import CliRunner

    from anonaudit.cli import main

    runner = CliRunner()
    orig = tmp_path / "orig.jsonl"
    orig.write_text('{"id": "a", "text": "Alice went home."}\n')
    result = runner.invoke(main, ["attack", "phrase-search", "--originals", str(orig),
                                  "--release", f"x={tmp_path / 'nope.jsonl'}", "--out", str(tmp_path / "r.json")])
    assert result.exit_code == 2
    assert f"--release {tmp_path / 'nope.jsonl'}: file not found" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "r.json").exists()
