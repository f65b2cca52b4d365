"""Small attacks and metrics for the runner, report and demo tests (no models).

They go through the registry like the real ones. Each appends a line to ``log``
(a file) for every fit and evaluate, so tests can count what was recomputed.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from audit.core.interfaces import Attack, Metric
from audit.core.registry import Registry
from audit.core.results import Finding, Highlight, Result
from audit.core.stats import mean_interval, risk


def _log(path: str | None, line: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


class LeakAttack(Attack):
    """Succeeds on a document when a background document of its subject shares a word of 6+ letters."""

    name = "toy_leak"
    description = "A toy adversary that links a sanitized record to public posts sharing a rare long word."
    requires = frozenset({"originals", "background"})

    def __init__(self, log: str | None = None, min_len: int = 6, fail_on: str | None = None,
                 interrupt_flag: str | None = None):
        self.log = log
        self.min_len = min_len
        self.fail_on = fail_on
        self.interrupt_flag = interrupt_flag

    closes = 0  # how many times the runner released an instance

    def close(self):
        type(self).closes += 1

    def fit(self, scenario):
        _log(self.log, "fit")
        self.words = {}
        for d in scenario.background or ():
            self.words.setdefault(d.subject, set()).update(w.strip(".,") for w in d.text.split()
                                                          if len(w.strip(".,")) >= self.min_len)
        return self

    def evaluate(self, scenario, release):
        if self.interrupt_flag and Path(self.interrupt_flag).exists() and release.name == "masked":
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C during the second release
        if release.name == self.fail_on:
            raise RuntimeError("boom")
        _log(self.log, f"evaluate {release.name}")
        docs, hits = [], 0
        for d in release:
            orig = scenario.originals[d.id]
            found = None
            for w in self.words.get(orig.subject, ()):
                i = d.text.find(w)
                if i >= 0:
                    found = (i, i + len(w), w)
                    break
            hits += found is not None
            docs.append(Finding(
                id=d.id, success=found is not None,
                summary="Shares a rare word with public posts about its subject" if found else "No rare word shared",
                highlights=[Highlight(found[0], found[1], "rare word", f"also in public posts about {orig.subject}")]
                if found else (),
                facts={"linked": found is not None, "confidence": 0.9 if found else 0.1, "predicted": orig.subject,
                       "original": orig.text, "guesses": [s.original for s in d.spans if s.original]},
                private={"predicted", "original", "guesses"}))
        n_subjects = len({d.subject for d in scenario.background or ()}) or 1
        r = risk(hits, len(release), 1 / n_subjects)
        return [Result.from_risk(self.name, release.name, r, documents=docs,
                                 details={"unit": "documents",
                                          "examples": [s.original for d in release for s in d.spans][:3]})]


class KeepMetric(Metric):
    """Share of original characters kept (a crude utility)."""

    name = "toy_keep"
    description = "Share of the original text's characters still present."

    def __init__(self, log: str | None = None):
        self.log = log

    def evaluate(self, scenario, release):
        _log(self.log, f"metric {release.name}")
        vals = [min(1.0, len(d.text) / max(1, len(scenario.originals[d.id].text))) for d in release]
        mean, ci = mean_interval(vals)
        return [Result("utility", self.name, release.name, mean, ci, len(vals))]


class BrokenAttack(Attack):
    name = "toy_broken"

    def __init__(self):
        raise RuntimeError("cannot start")

    def evaluate(self, scenario, release):  # pragma: no cover
        return []


def toy_registry() -> Registry:
    reg = Registry()
    reg._entry_points_loaded = True  # only the toys, not the installed plugins
    reg.register("attack")(LeakAttack)
    reg.register("metric")(KeepMetric)
    reg.add_lazy("attack", "toy_missing", "no_such_module_for_tests:Thing")
    import defenders.baselines as b

    for cls in (b.Suppression, b.LabelMasking, b.SpacyNER, b.PresidioSanitizer):
        reg.register("sanitizer")(cls)
    return reg


def log_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


# =========================================================================== tests


import pytest
import yaml

from anonaudit.demo.population import write as write_demo
from audit.core.errors import AnonauditError, DataError
from audit.core.results import ResultsFile
from audit.pipeline.runner import Audit, load_spec, parse_spec


@pytest.fixture
def demo_dir(tmp_path):
    write_demo(tmp_path / "data", n=6, seed=1)
    return tmp_path


def make_spec(root: Path, **over) -> Path:
    data = {"title": "Toy audit", "seed": 3, "out": "out",
            "originals": "data/originals.jsonl", "background": "data/background.jsonl",
            "releases": [{"name": "suppressed", "path": "data/releases/suppressed.jsonl"},
                         {"name": "masked", "sanitizer": "labels"}],
            "attacks": [{"name": "toy_leak", "params": {"log": str(root / "calls.log")}}],
            "metrics": [{"name": "toy_keep", "log": str(root / "calls.log")}]}
    data.update(over)
    path = root / "audit.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_each_component_is_closed_once_done_even_when_it_failed(demo_dir):
    reg = toy_registry()
    LeakAttack.closes = 0
    Audit(load_spec(make_spec(demo_dir), registry=reg), registry=reg, progress=False, echo=None).run()
    assert LeakAttack.closes == 1
    failing = make_spec(demo_dir, out="out2", attacks=[{"name": "toy_leak", "params": {"fail_on": "masked"}}])
    outcome = Audit(load_spec(failing, registry=reg), registry=reg, on_error="skip", progress=False, echo=None).run()
    assert outcome.errors and LeakAttack.closes == 2
    # stopping at the failure still releases it; the failure is named, with its cause kept
    with pytest.raises(AnonauditError, match="attack 'toy_leak' failed: RuntimeError: .*boom") as info:
        Audit(load_spec(failing, registry=reg), registry=reg, progress=False, echo=None).run()
    assert isinstance(info.value.__cause__, RuntimeError)
    assert LeakAttack.closes == 3


def test_run_writes_results_provenance_and_releases(demo_dir):
    reg = toy_registry()
    spec = load_spec(make_spec(demo_dir), registry=reg)
    outcome = Audit(spec, registry=reg, progress=False, echo=None).run()
    rf = ResultsFile.load(demo_dir / "out" / "results.json")
    assert {(r.kind, r.name, r.release) for r in rf.results} == {
        ("attack", "toy_leak", "suppressed"), ("attack", "toy_leak", "masked"),
        ("utility", "toy_keep", "suppressed"), ("utility", "toy_keep", "masked")}
    prov = rf.provenance
    assert prov["seed"] == 3 and prov["version"]
    assert len(prov["inputs"]["originals"]["sha256"]) == 64
    assert prov["releases"]["masked"]["sanitizer"] == "labels"
    assert (demo_dir / "out" / prov["releases"]["masked"]["path"]).is_file()
    assert prov["components"]["attack:toy_leak"]["params"]["min_len"] == 6
    assert all(p["seconds"] >= 0 for p in prov["pairs"].values()) and len(prov["pairs"]) == 4
    # The sanitizer ran on the originals and recorded what it replaced.
    masked = (demo_dir / "out" / prov["releases"]["masked"]["path"]).read_text().splitlines()
    assert "[PERSON]" in masked[0] and '"original"' in masked[0]
    assert len(outcome.computed) == 4 and not outcome.reused


def test_the_runner_computes_in_memory_and_its_writer_alone_writes(demo_dir):
    """Issue 59: the runner writes no file of its output; it hands its results and release
    texts to its writer (the one writing step, which holds the output guard) once the releases
    are made, after every pair and at the end."""
    from audit.pipeline.bundle_writer import BundleWriter

    saves = []

    class Recording(BundleWriter):
        def save(self, merge, copies):
            saves.append((merge(None), dict(copies)))
            return saves[-1][0]

    reg = toy_registry()
    out = demo_dir / "out"
    outcome = Audit(load_spec(make_spec(demo_dir), registry=reg), registry=reg, progress=False, echo=None,
                    writer=Recording(out / "results.json")).run()
    assert [p for p in out.rglob("*") if p.is_file()] == []  # nothing written but by the writer
    # once the releases are made, then after each pair and each component, and at the end
    assert [len(rf.results) for rf, _ in saves] == [0, 1, 2, 2, 3, 4, 4, 4]
    assert len(outcome.copies) == 2 and all(k.startswith("releases/") for k in outcome.copies)
    assert all(copies == outcome.copies for _, copies in saves)  # the release texts, in memory
    with pytest.raises(AnonauditError, match="is also the command.s input"):  # the guard, before any work
        BundleWriter(demo_dir / "data" / "originals.jsonl", inputs=[("originals", demo_dir / "data" / "originals.jsonl")])


def test_interrupted_run_resumes_with_zero_recomputation(demo_dir):
    reg = toy_registry()
    log, flag = demo_dir / "calls.log", demo_dir / "interrupt"
    flag.touch()
    spec_path = make_spec(demo_dir, attacks=[{"name": "toy_leak", "log": str(log), "interrupt_flag": str(flag)}])
    with pytest.raises(KeyboardInterrupt):
        Audit(load_spec(spec_path, registry=reg), registry=reg, progress=False, echo=None).run()
    # The pair finished before the interruption is saved.
    rf = ResultsFile.load(demo_dir / "out" / "results.json")
    assert rf.get("toy_leak", "suppressed") is not None and rf.get("toy_leak", "masked") is None
    assert log_lines(log) == ["fit", "evaluate suppressed"]

    # Resume: only the missing pairs run (fit again, since the attacker is not in memory any more).
    flag.unlink()
    log.unlink()
    outcome = Audit(load_spec(spec_path, registry=reg), registry=reg, progress=False, echo=None).run()
    assert log_lines(log) == ["fit", "evaluate masked", "metric suppressed", "metric masked"]
    assert outcome.reused == ["attack:toy_leak@suppressed"]
    first = ResultsFile.load(demo_dir / "out" / "results.json")

    # Once finished, a re-run recomputes nothing at all, not even fit, and changes no result.
    log.unlink()
    outcome = Audit(load_spec(spec_path, registry=reg), registry=reg, progress=False, echo=None).run()
    assert log_lines(log) == []
    assert outcome.computed == [] and len(outcome.reused) == 4
    again = ResultsFile.load(demo_dir / "out" / "results.json")
    assert [r.to_dict() for r in again.results] == [r.to_dict() for r in first.results]


def test_resume_after_crash_recomputes_only_missing_pair(demo_dir):
    reg = toy_registry()
    log = demo_dir / "calls.log"
    spec_path = make_spec(demo_dir)
    spec = load_spec(spec_path, registry=reg)
    # Simulate a crash after the first pair: run with a release filter, then the full audit.
    full = load_spec(spec_path, registry=reg)
    first = dataclasses.replace(full, releases=full.releases[:1], metrics=())
    with pytest.raises(dataclasses.FrozenInstanceError):
        full.metrics = ()  # specs are frozen: a variant is a copy
    Audit(first, registry=reg, progress=False, echo=None).run()
    assert log_lines(log) == ["fit", "evaluate suppressed"]
    log.unlink()
    outcome = Audit(spec, registry=reg, progress=False, echo=None).run()
    assert log_lines(log) == ["fit", "evaluate masked", "metric suppressed", "metric masked"]
    assert outcome.reused == ["attack:toy_leak@suppressed"]
    # A changed input invalidates exactly what depends on it.
    log.unlink()
    bg = demo_dir / "data" / "background.jsonl"
    bg.write_text(bg.read_text().replace("a", "e", 1))
    Audit(load_spec(spec_path, registry=reg), registry=reg, progress=False, echo=None).run()
    # (every input is part of every key: a component is never trusted to declare what it reads)
    assert sorted(log_lines(log)) == ["evaluate masked", "evaluate suppressed", "fit",
                                      "metric masked", "metric suppressed"]


def test_sampling_budget_is_recorded(demo_dir):
    reg = toy_registry()
    spec = load_spec(make_spec(demo_dir, attacks=[{"name": "toy_leak", "sample": 4}]), registry=reg)
    Audit(spec, registry=reg, progress=False, echo=None).run()
    rf = ResultsFile.load(demo_dir / "out" / "results.json")
    r = rf.get("toy_leak", "suppressed")
    assert r.n == 4 and r.details["sampled"] == {"documents": 4, "of": 6, "seed": 3}
    assert rf.get("toy_keep", "suppressed").n == 6
    # Same ids sampled for every release, so releases are compared on the same documents.
    ids = [{d.id for d in rf.get("toy_leak", rel).documents} for rel in ("suppressed", "masked")]
    assert ids[0] == ids[1]


def test_a_components_own_sample_is_counted_against_the_whole_release(demo_dir, monkeypatch):
    """A component that measured a sample of the runner's sample (the claim linker's scored
    documents) keeps its own count and seed; the runner makes "of" the whole release, so the
    report's sample note says on how much of the release the figure rests."""
    evaluate = LeakAttack.evaluate

    def own_sample(self, scenario, release):
        return [dataclasses.replace(r, details={**r.details, "sampled": {"documents": 2, "of": len(release),
                                                                          "seed": 9}})
                for r in evaluate(self, scenario, release)]

    monkeypatch.setattr(LeakAttack, "evaluate", own_sample)
    reg = toy_registry()
    spec = load_spec(make_spec(demo_dir, attacks=[{"name": "toy_leak", "sample": 4}]), registry=reg)
    Audit(spec, registry=reg, progress=False, echo=None).run()
    r = ResultsFile.load(demo_dir / "out" / "results.json").get("toy_leak", "suppressed")
    assert r.details["sampled"] == {"documents": 2, "of": 6, "seed": 9}


def test_a_prediction_powered_figure_on_the_runners_sample_says_so(demo_dir, monkeypatch):
    """A figure "about this release" made on the runner's sample is about that sample: the line
    beside it says so (audit.core.ppi's ``made``)."""
    evaluate = LeakAttack.evaluate
    made = "prediction-powered, 2 judged, 4 scored, ±0.100, about this release"

    def powered(self, scenario, release):
        return [dataclasses.replace(r, details={**r.details, "sampled": {"documents": 2, "of": len(release),
                                                                          "seed": 9, "made": made}})
                for r in evaluate(self, scenario, release)]

    monkeypatch.setattr(LeakAttack, "evaluate", powered)
    reg = toy_registry()
    spec = load_spec(make_spec(demo_dir, attacks=[{"name": "toy_leak", "sample": 4}]), registry=reg)
    Audit(spec, registry=reg, progress=False, echo=None).run()
    r = ResultsFile.load(demo_dir / "out" / "results.json").get("toy_leak", "suppressed")
    assert r.details["sampled"]["made"] == f"{made} (the runner's seeded sample of 4 of 6 documents)"
    assert r.info.sampled.sentence() == r.details["sampled"]["made"]


def test_demo_style_run_skips_broken_components_visibly(demo_dir):
    reg = toy_registry()
    reg.register("attack")(BrokenAttack)
    data = yaml.safe_load(make_spec(demo_dir).read_text())
    data["attacks"] = ["toy_missing", "toy_broken", {"name": "toy_leak", "fail_on": "masked"}]
    spec = parse_spec(data, base=demo_dir, registry=reg, check_components=False)
    outcome = Audit(spec, registry=reg, on_error="skip", progress=False, echo=None).run()
    prov = ResultsFile.load(demo_dir / "out" / "results.json").provenance
    skipped = {s["component"]: s["reason"] for s in prov["skipped"]}
    assert "could not be loaded" in skipped["attack:toy_missing"]
    assert "cannot start" in skipped["attack:toy_broken"]
    assert prov["errors"][0]["component"] == "attack:toy_leak" and "boom" in prov["errors"][0]["reason"]
    assert len(outcome.computed) == 3  # toy_leak on suppressed + the metric on both


def test_spec_errors_are_clear_and_all_reported(demo_dir):
    reg = toy_registry()
    path = make_spec(demo_dir, attacks=[{"name": "nope"}, {"name": "toy_leak", "params": {"kk": 1}}],
                     releases=[{"name": "a", "path": "missing.jsonl"}, {"name": "b", "sanitizer": "zzz"},
                               {"name": "c"}], sampling={"documents": 0}, colour="red")
    with pytest.raises(DataError) as info:
        load_spec(path, registry=reg)
    msg = str(info.value)
    assert str(path) in msg
    assert "attacks[0]: unknown attack 'nope' (known: toy_leak" in msg
    assert "attacks[1].params.kk: attack 'toy_leak' has no parameter 'kk' (it takes: log, min_len" in msg
    assert "releases[0].path: file not found" in msg
    assert "releases[1].sanitizer: unknown sanitizer 'zzz' (known: labels, presidio" in msg
    assert "releases[2]: give exactly one of 'path'" in msg
    assert "sampling.documents: must be a positive integer" in msg
    assert "colour: unknown key" in msg


def test_spec_syntax_errors_and_toml(demo_dir):
    bad = demo_dir / "bad.yaml"
    bad.write_text("attacks: [toy_leak\nreleases: x\n")
    with pytest.raises(DataError, match=r"bad.yaml:\d+: invalid YAML"):
        load_spec(bad)
    with pytest.raises(AnonauditError, match="no such audit spec"):
        load_spec(demo_dir / "absent.yaml")
    toml = demo_dir / "audit.toml"
    toml.write_text('originals = "data/originals.jsonl"\nbackground = "data/background.jsonl"\nseed = 5\n'
                    '[[releases]]\nname = "s"\npath = "data/releases/suppressed.jsonl"\n'
                    '[[attacks]]\nname = "toy-leak"\nmin_len = 7\n')
    spec = load_spec(toml, registry=toy_registry())
    assert spec.seed == 5 and spec.attacks[0].params == {"min_len": 7}
    assert spec.out == (demo_dir / "audit-out")


def test_cli_run_and_rerun(demo_dir):
    from click.testing import CliRunner

    from anonaudit.cli import main

    reg = {"registry": toy_registry()}  # the command line's registry, as its context object
    path = make_spec(demo_dir, gate={"max": {"toy_leak": 0.0}})
    res = CliRunner().invoke(main, ["run", str(path)], obj=reg)
    assert res.exit_code == 1, res.output  # the spec's gate fails: risk > 0
    assert "toy_leak" in res.output and "FAIL" in res.output and "report:" in res.output
    assert (demo_dir / "out" / "report.html").is_file()
    res = CliRunner().invoke(main, ["run", str(path), "--no-report"], obj=reg)
    assert "0 pair(s) computed, 4 reused" in res.output


def test_params_that_are_not_a_mapping_are_reported_not_raised(tmp_path):
    from audit.core.errors import DataError
    from audit.pipeline.runner import parse_spec

    orig = tmp_path / "o.jsonl"
    orig.write_text('{"id": "a", "text": "x", "subject": "s"}\n')
    data = {"originals": str(orig), "releases": [{"sanitizer": "suppression", "params": [1]}],
            "attacks": [{"name": "phrase_search", "params": "x"}]}
    with pytest.raises(DataError) as err:
        parse_spec(data, base=tmp_path, source="a.yaml")
    msg = str(err.value)
    assert "attacks[0].params: must be a mapping" in msg and "releases[0].params: must be a mapping" in msg


def test_sanitize_bad_param_is_a_message_not_a_traceback(tmp_path):
    from click.testing import CliRunner

    from anonaudit.cli import main

    src = tmp_path / "o.jsonl"
    src.write_text('{"id": "a", "text": "x"}\n')
    res = CliRunner().invoke(main, ["sanitize", "labels", "--input", str(src), "--out", str(tmp_path / "r.jsonl"),
                                    "--param", "x=[oops"])
    assert res.exit_code == 2 and "not valid YAML" in res.output and "Traceback" not in res.output


# --------------------------------------------------------------------------- shared resources, releases


def test_sanitizers_get_the_spec_seed_llm_and_the_run_resources_and_are_closed(demo_dir, monkeypatch):
    from audit.core.data import sanitize_corpus
    from audit.core.interfaces import Sanitizer
    from audit.models.resources import Resources

    seen = []
    monkeypatch.setattr("audit.models.specs.check_llm_spec", lambda spec: None)  # "some-llm" is never loaded

    class Seeded(Sanitizer):
        name = "toy_seeded"
        closes = 0

        def __init__(self, seed: int = 0, llm: str | None = None, progress: bool = False):
            self.seed, self.llm, self.progress = seed, llm, progress

        def sanitize(self, corpus, *, name=None):
            seen.append((self.seed, self.llm, self.resources))
            self.record_timing(name or self.name, {"llm": 1.5})
            return sanitize_corpus(corpus, {}, name=name or self.name, sanitizer=self.name, source=corpus.source)

        def close(self):
            type(self).closes += 1
            super().close()

    class Probe(LeakAttack):
        name = "toy_probe"

        def evaluate(self, scenario, release):
            seen.append(("attack", self.resources))
            return super().evaluate(scenario, release)

    reg = toy_registry()
    reg.register("sanitizer")(Seeded)
    reg.register("attack")(Probe)
    path = make_spec(demo_dir, releases=[{"name": "s", "sanitizer": "toy_seeded"}], metrics=[],
                     attacks=["toy_probe"], models={"llm": "some-llm"})
    Audit(load_spec(path, registry=reg), registry=reg, progress=False, echo=None).run()
    (seed, llm, res), (_, attack_res) = seen
    assert (seed, llm, Seeded.closes) == (3, "some-llm", 1)
    assert isinstance(res, Resources) and res is attack_res and res.seed == 3  # one set for the whole run
    prov = ResultsFile.load(demo_dir / "out" / "results.json").provenance
    assert prov["releases"]["s"]["params"] == {"seed": 3, "llm": "some-llm"}  # what decides the output
    assert prov["releases"]["s"]["stats"] == {"timings": {"s": {"llm": 1.5}}}  # what it says of its run


def test_the_seed_has_one_representation_the_spec_s_handed_to_each_component_as_its_keyword(demo_dir):
    """Issue 71: the audit's seed goes from the spec to each component's keyword ``seed``, never
    through the parameters the runner completes; a seed among a component's parameters (a second
    seed) is refused where it is written, naming the place; the record of what a component was
    given (resume key, provenance) still names the seed, in the same place as before."""
    from audit.pipeline.calls import as_given, component_params, seed_keyword

    made = []

    class Keyed(LeakAttack):
        name = "toy_keyed"

        def __init__(self, seed: int = 0, k: int = 1):
            super().__init__()
            made.append({"seed": seed, "k": k})
            self.seed, self.k = seed, k

    reg = toy_registry()
    reg.register("attack")(Keyed)
    spec = load_spec(make_spec(demo_dir, attacks=[{"name": "toy_keyed", "k": 2}], metrics=[]), registry=reg)
    assert "seed" not in component_params(spec, Keyed.param_names(), {"k": 2}, progress=False)
    assert seed_keyword(spec.seed, Keyed.param_names()) == {"seed": 3} and seed_keyword(3, ["k"]) == {}
    assert list(as_given({"k": 2}, {"seed": 3}, {"k": 2, "progress": False})) == ["k", "seed", "progress"]
    Audit(spec, registry=reg, progress=False, echo=None).run()
    assert made and all(m == {"seed": 3, "k": 2} for m in made)
    pairs = ResultsFile.load(demo_dir / "out" / "results.json").provenance["pairs"]
    assert {json.dumps(p["params"]) for p in pairs.values()} == {'{"k": 2, "seed": 3}'}
    for where, entry in (("attacks[0].params.seed", {"attacks": [{"name": "toy_keyed", "params": {"seed": 5}}]}),
                         ("attacks.toy_keyed.params.seed", {"attacks": {"toy_keyed": {"seed": 5}}}),
                         ("releases[0].params.seed", {"releases": [{"sanitizer": "suppression", "params": {"seed": 5}}]})):
        with pytest.raises(AnonauditError, match=rf"{re.escape(where)}: 5: the seed is the audit's"):
            load_spec(make_spec(demo_dir, **entry), registry=reg)
    with pytest.raises(AnonauditError, match=r"seed=5 among a component's parameters"):
        component_params(spec, Keyed.param_names(), {"seed": 5}, progress=False)


def test_release_paths_may_contain_equals_signs_and_names_may_not(demo_dir):
    """A name must be writable as --release NAME=FILE (split at the first '='); a file name is free."""
    reg = toy_registry()
    src = demo_dir / "data" / "releases" / "suppressed.jsonl"
    odd = src.with_name("a=b.jsonl")
    odd.write_bytes(src.read_bytes())
    bad = make_spec(demo_dir, releases=[{"name": "x=y", "path": "data/releases/a=b.jsonl"}], metrics=[])
    with pytest.raises(DataError, match=r"releases\[0\]\.name: release name 'x=y' contains '='"):
        load_spec(bad, registry=reg)
    path = make_spec(demo_dir, releases=[{"name": "xy", "path": "data/releases/a=b.jsonl"},
                                         {"path": "data/releases/a=b.jsonl"}], metrics=[])
    spec = load_spec(path, registry=reg)
    assert spec.releases[0].name == "xy" and spec.releases[0].path == odd
    outcome = Audit(spec, registry=reg, progress=False, echo=None).run()
    assert set(outcome.releases) == {"xy", "a=b"}
    assert len(outcome.releases["xy"]) == len(outcome.releases["a=b"]) == 6


def test_demo_says_when_presidio_is_not_installed(tmp_path, monkeypatch, capsys):
    """The README promises a Presidio release in the demo; without the extra the demo must say
    that it skipped it (on stderr and in the report), not silently run one release fewer."""
    import importlib.util

    from anonaudit.demo.demo_audit import run_demo

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("presidio") else real(name, *a))
    report = run_demo(tmp_path / "demo", n=4, seed=0, registry=toy_registry(), attacks=["toy_leak"],
                      metrics=["toy_keep"], progress=False)
    err = capsys.readouterr().err
    assert "The Presidio release was skipped: Presidio is not installed (pip install 'anonaudit[presidio]')" in err
    html = report.read_text(encoding="utf-8")
    assert "The Presidio release was skipped" in html
    releases = json.loads((tmp_path / "demo" / "results.json").read_text())["provenance"]["releases"]
    assert "presidio" not in releases and "spacy_ner" in releases
    # Re-running the demo's audit.yaml keeps the notes on what the demo left out or weakened.
    from click.testing import CliRunner

    from anonaudit.cli import main

    report.unlink()
    res = CliRunner().invoke(main, ["run", str(tmp_path / "demo" / "audit.yaml")], obj={"registry": toy_registry()})
    assert res.exit_code == 0, res.output
    assert "The Presidio release was skipped" in report.read_text(encoding="utf-8")


def test_run_shareable_writes_a_folder_of_its_own_without_originals(demo_dir):
    """Issue 17.4: `run --shareable` puts the shareable report (and its CSV) in OUT/shareable/,
    a folder that may leave the data owner, and says which files beside it hold originals."""
    import json

    from click.testing import CliRunner

    from anonaudit.cli import main

    reg = {"registry": toy_registry()}
    path = make_spec(demo_dir)
    res = CliRunner().invoke(main, ["run", str(path), "--shareable"], obj=reg)
    assert res.exit_code == 0, res.output
    shared = demo_dir / "out" / "shareable"
    assert sorted(p.name for p in shared.iterdir()) == ["findings.csv", "report.html"]
    assert "shareable report:" in res.output and "hold original text" in res.output
    html = (shared / "report.html").read_text(encoding="utf-8")
    assert "shareable edition" in html and 'href="findings.csv"' in html
    originals = [json.loads(line)["text"] for line in (demo_dir / "data/originals.jsonl").read_text().splitlines()]
    assert not any(t in html for t in originals)
    assert (demo_dir / "out" / "report.html").is_file()  # the internal edition stays beside the results
    # `report --shareable` beside the results says loudly which files there hold originals
    res = CliRunner().invoke(main, ["report", str(demo_dir / "out" / "results.json"), "--shareable"])
    assert res.exit_code == 0 and "WARNING" in res.output and "results.json" in res.output
    assert (demo_dir / "out" / "findings.shareable.csv").is_file()


def test_spec_gate_judges_the_cautious_bound_unless_on_point(demo_dir):
    from click.testing import CliRunner

    from anonaudit.cli import main

    reg = {"registry": toy_registry()}
    first = CliRunner().invoke(main, ["run", str(make_spec(demo_dir)), "--no-report"], obj=reg)
    assert first.exit_code == 0, first.output
    rf = ResultsFile.load(demo_dir / "out" / "results.json")
    leak = [r for r in rf.results if r.name == "toy_leak"]
    top = max(r.value for r in leak)
    assert top < max(r.ci[1] for r in leak)  # so the two readings differ
    limit = round(top + 0.001, 4)
    cautious = CliRunner().invoke(main, ["run", str(make_spec(demo_dir, gate={"max": {"toy_leak": limit}})),
                                         "--no-report"], obj=reg)
    assert cautious.exit_code == 1 and "upper CI" in cautious.output
    on_point = make_spec(demo_dir, gate={"max": {"toy_leak": limit}, "on_point": True})
    res = CliRunner().invoke(main, ["run", str(on_point), "--no-report"], obj=reg)
    assert res.exit_code == 0, res.output


def test_a_sanitizer_warning_reaches_the_release_provenance_and_survives_reuse(demo_dir):
    """Issue 49: what a sanitizer's self-check finds degenerate is written into the release's
    provenance (``self_check``, and among its ``warnings``), also when the release is reused."""
    from audit.core.data import sanitize_corpus
    from audit.core.interfaces import Sanitizer

    class Doubtful(Sanitizer):
        name = "toy_doubtful"

        def __init__(self, progress: bool = False):
            self.progress = progress

        def sanitize(self, corpus, *, name=None):
            return sanitize_corpus(corpus, {}, name=name or self.name, sanitizer=self.name, source=corpus.source)

        def warnings(self, name):
            return [f"degenerate release: nothing masked in {name}"]

    reg = toy_registry()
    reg.register("sanitizer")(Doubtful)
    path = make_spec(demo_dir, releases=[{"name": "d", "sanitizer": "toy_doubtful"}], metrics=[], attacks=["toy_leak"])
    lines: list[str] = []
    for _ in range(2):  # made, then reused
        Audit(load_spec(path, registry=reg), registry=reg, progress=False, echo=lines.append).run()
        prov = ResultsFile.load(demo_dir / "out" / "results.json").provenance["releases"]["d"]
        assert prov["self_check"] == ["degenerate release: nothing masked in d"]
        assert "release 'd': degenerate release: nothing masked in d" in prov["warnings"]
    assert sum("warning: release 'd': degenerate release" in line for line in lines) == 2
    assert any("reused" in line for line in lines)
