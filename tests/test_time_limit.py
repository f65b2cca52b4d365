"""A time limit said before the work (issue 57, "Bad input and limits"): each stage calibrated on two
small slices, the estimate said, and a limit it exceeds refused before any attack runs (exit 2 on
the command line, an AnonauditError in the API), with the estimate per stage. Cheap: phrase search
and ROUGE on the demo population (no model)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import anonaudit
from anonaudit.cli import main
from anonaudit.demo.population import write
from audit.core.data import Corpus, Document, Release, Scenario
from audit.core.errors import AnonauditError
from audit.pipeline.estimate import WARM, TIMED, Estimate, StageEstimate, calibrate, check, check_limit, slices


@pytest.fixture(autouse=True)
def estimate_only(monkeypatch):
    """These tests check the estimate said before the work, with limits (60 microseconds) that the
    enforced limit would reach first during the calibration: the timer is off here; the
    enforcement's tests are tests/test_bounded_work.py's."""
    from audit.runtime import deadline

    monkeypatch.setattr(deadline, "timer_available", lambda: False)
    monkeypatch.setattr(deadline, "check_enforceable", lambda *a, **k: None)  # else "cannot be enforced here"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    write(folder, n=12, seed=0)
    return folder


def _args(demo, out, *extra):
    return ["attack", "phrase-search", "--originals", str(demo / "originals.jsonl"),
            "--release", str(demo / "releases" / "labels.jsonl"), "--out", str(out), *extra]


def test_a_limit_the_estimate_exceeds_stops_the_run_before_any_attack(demo, tmp_path, monkeypatch):
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    out = tmp_path / "results.json"
    res = CliRunner().invoke(main, _args(demo, out, "--time-limit", "0.000001"))
    assert res.exit_code == 2, res.output
    assert "time limit 1e-06 min cannot be met: estimated" in res.output
    assert "phrase_search ~" in res.output and f"calibration on {WARM + TIMED} of 12 documents" in res.output
    assert "Nothing was attacked" in res.output
    assert not out.exists() or not json.loads(out.read_text()).get("results")  # no result was computed
    res = CliRunner().invoke(main, _args(demo, out, "--time-limit", "0"))
    assert res.exit_code == 2 and "--time-limit" in res.output  # a limit must be a positive number


def test_a_limit_the_estimate_meets_is_said_and_the_audit_runs(demo, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    spec = anonaudit.Spec(originals=str(demo / "originals.jsonl"), releases=[str(demo / "releases" / "labels.jsonl")],
                          budget=anonaudit.Budget(time_limit=60))
    results = anonaudit.audit(spec, attacks=["phrase_search"], metrics=["rouge"])
    assert {r.name for r in results.results} >= {"phrase_search"}
    said = capsys.readouterr().err
    assert "time limit 60 min: estimated" in said and "phrase_search ~" in said and "rouge ~" in said
    assert "attack:phrase_search: ~" in said and "(calibrated in " in said  # each stage said as it is made
    with pytest.raises(AnonauditError, match=r"Budget\(time_limit=...\): must be a positive number of minutes"):
        anonaudit.Budget(time_limit=-1)


def _doc(i: int, n: int) -> Document:
    return Document(f"d{i}", "word " * n, subject=f"p{i}")


class _Linear:
    """A stage whose work is its characters: fit counts the originals, evaluate the release."""

    def fit(self, scenario):
        self.n = sum(len(d.text) for d in scenario.originals)
        return self

    def evaluate(self, scenario, release):
        return [sum(len(d.text) for d in release.corpus)]


def test_the_estimate_extrapolates_by_characters_and_names_what_it_could_not_calibrate(monkeypatch):
    clock = iter(range(0, 10_000)).__next__
    docs = [_doc(i, 10 * (i + 1)) for i in range(8)]
    release = Release("r", Corpus(docs), aligned=True)
    scenario = Scenario(originals=Corpus(docs), releases=(release,))
    warm, timed = slices(scenario, seed=0)
    assert len(warm.originals) == WARM and len(timed.releases[0]) == TIMED
    assert not {d.id for d in warm.originals} & {d.id for d in timed.originals}  # disjoint slices
    assert slices(scenario, 0)[1].originals.ids == timed.originals.ids  # fixed by the seed

    def broken():
        raise ValueError("needs two people")

    monkeypatch.setattr("audit.pipeline.estimate.time.perf_counter", lambda: float(clock()))
    est = calibrate([("linear", _Linear), ("broken", broken)], scenario, {"linear": [release], "broken": [release]}, 0)
    linear, bad = est.stages
    assert linear.seconds is not None and linear.seconds > 0 and bad.seconds is None and "two people" in bad.problem
    line = check(est, limit_minutes=10_000, spent=0)
    assert "not counted: broken" in line
    small = Estimate((StageEstimate("s", 120.0, 1.0),), 5, 100, 1.0)
    with pytest.raises(AnonauditError, match="time limit 1 min cannot be met: estimated 2.0 min"):
        check(small, limit_minutes=1, spent=0)
    assert "2.0 min" in check(small, limit_minutes=3, spent=10)
    with pytest.raises(AnonauditError):
        check(small, limit_minutes=3, spent=70)  # what is already spent counts
    assert check_limit(None) is None and check_limit(2) == 2.0
    for bad_value in (0, -1, True, "5", float("nan")):
        with pytest.raises(AnonauditError):
            check_limit(bad_value)


def test_a_load_the_run_keeps_is_not_counted_again_but_a_load_each_build_makes_is(monkeypatch):
    """The calibration runs on the run's resources: what the warm slice loaded there (a model) the
    run reuses, so the estimate is the timed slice's rate times the work, not that plus the load.
    A load each build of the component makes for itself is in the timed slice's rate, so it is
    still counted; work done once per fit and said (``once_seconds_``) is counted once."""
    now = [0.0]
    monkeypatch.setattr("audit.pipeline.estimate.time.perf_counter", lambda: now[0])
    docs = [_doc(i, 10 * (i + 1)) for i in range(8)]
    release = Release("r", Corpus(docs), aligned=True)
    scenario = Scenario(originals=Corpus(docs), releases=(release,))
    kept: set[str] = set()

    class Stage:
        def __init__(self, name, own_load):
            self.name, self.own_load = name, own_load

        def fit(self, sc):
            if self.own_load:
                now[0] += 50.0  # loaded again by every build, on its first fit
            if self.name not in kept:  # loaded once into the shared resources
                kept.add(self.name)
                now[0] += 100.0
            now[0] += sum(len(d.text) for d in sc.originals)
            return self

        def evaluate(self, sc, rel):
            now[0] += sum(len(d.text) for d in rel.corpus)
            if self.name == "control":  # a control asked once per fit, whatever the data, and said
                now[0] += 30.0
                self.once_seconds_ = 30.0
            return []

    makers = [(name, lambda name=name: Stage(name, name == "own")) for name in ("shared", "own", "control")]
    est = calibrate(makers, scenario, {"shared": [release], "own": [release], "control": [release, release]}, 0)
    shared, own, control = est.stages
    work = 2 * sum(len(d.text) for d in docs)  # the originals fitted, the release evaluated
    assert shared.seconds == pytest.approx(work)
    assert own.seconds > work + 50  # its own load is in the rate, extrapolated (an upper bound)
    # the control counted once for the two releases, not extrapolated by characters and releases
    assert control.seconds == pytest.approx(work + sum(len(d.text) for d in docs) + 30.0)


# -- the bench and the demo (issue 57 item 5: one budget option for run, demo, attack and bench)

BENCH = {"comparisons": ["suppression"], "attacks": ["phrase_search"], "metrics": ["rouge"], "progress": False,
         "demo_people": 8}


def _limit(minutes: float) -> anonaudit.Spec:
    return anonaudit.Spec(budget=anonaudit.Budget(time_limit=minutes))


def test_a_bench_whose_estimate_exceeds_the_limit_stops_before_any_work(tmp_path, monkeypatch):
    """The whole bench is estimated first: each sanitizer it must run, then each attack and metric
    on those sanitizers' releases of the 5 calibration documents; nothing is sanitized, attacked
    or written (the output folder stays empty)."""
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    made = []
    from audit.pipeline import bench_releases as bench_module

    real = bench_module.sanitize_with
    monkeypatch.setattr(bench_module, "sanitize_with", lambda c, docs, *a: made.append(len(docs)) or real(c, docs, *a))
    out = tmp_path / "b"
    with pytest.raises(AnonauditError) as err:
        anonaudit.bench("labels", _limit(1e-6), out=out, **BENCH)
    said = str(err.value)
    assert "time limit 1e-06 min cannot be met: estimated" in said
    for stage in ("sanitize labels ~", "sanitize suppression ~", "attack:phrase_search ~", "metric:rouge ~"):
        assert stage in said
    assert f"calibration on {WARM + TIMED} of 8 documents" in said and "--documents N" in said
    assert made and max(made) <= TIMED  # only the calibration's slices were sanitized
    assert not out.exists() or not any(out.rglob("*"))  # nothing written, not even the corpus


def test_a_bench_within_its_limit_says_the_estimate_and_gives_the_same_board(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    said: list[str] = []
    limited = anonaudit.bench("labels", _limit(60), echo=said.append, **BENCH)
    plain = anonaudit.bench("labels", **BENCH)
    line = next(m for m in said if "time limit 60 min: estimated" in m)
    assert "sanitize labels ~" in line and "attack:phrase_search ~" in line and "not counted: the leaderboard" in line
    assert [(r.rank, r.name) for r in limited.leaderboard.rows] == [(r.rank, r.name) for r in plain.leaderboard.rows]
    assert [(r.name, r.release, r.value) for r in limited.results.results] == \
        [(r.name, r.release, r.value) for r in plain.results.results]
    with pytest.raises(AnonauditError, match=r"time_limit=\.\.\.\): must be a positive number"):
        anonaudit.Budget(time_limit=0)


def test_bench_and_demo_take_time_limit_on_the_command_line(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    out = tmp_path / "bench"
    args = ["bench", "--sanitizer", "labels", "--compare", "suppression", "--attacks", "phrase_search",
            "--metrics", "rouge", "--demo-people", "6", "--out", str(out)]
    res = CliRunner().invoke(main, [*args, "--time-limit", "0.000001"])
    assert res.exit_code == 2, res.output
    assert "cannot be met: estimated" in res.output and "sanitize labels ~" in res.output
    assert not (out / "results.json").exists() and not (out / "leaderboard.html").exists()
    res = CliRunner().invoke(main, [*args, "--time-limit", "30"])
    assert res.exit_code == 0, res.output
    assert "time limit 30 min: estimated" in res.output and (out / "leaderboard.html").is_file()

    reg = _cheap_registry()
    demo_out = tmp_path / "demo"
    demo_args = ["demo", "--n", "6", "--no-presidio", "--out", str(demo_out)]
    res = CliRunner().invoke(main, [*demo_args, "--time-limit", "0.000001"], obj={"registry": reg})
    assert res.exit_code == 2, res.output
    assert "time limit 1e-06 min cannot be met: estimated" in res.output and "phrase_search ~" in res.output
    assert not (demo_out / "report.html").exists()
    results = demo_out / "results.json"
    assert not results.exists() or not json.loads(results.read_text()).get("results")  # no result computed
    res = CliRunner().invoke(main, [*demo_args, "--time-limit", "30", "--force"], obj={"registry": reg})
    assert res.exit_code == 0, res.output
    assert "time limit 30 min: estimated" in res.output and (demo_out / "report.html").is_file()


def _cheap_registry():
    """The demo's components without a model but spaCy's small pipeline: phrase search, ROUGE, and
    the spaCy sanitizer the demo runs (Presidio left out)."""
    from attackers.phrase_search import PhraseSearchAttack
    from audit.core.registry import Registry
    from audit.metrics.overlap import RougeMetric
    from defenders.baselines import SpacyNER

    reg = Registry()
    reg._entry_points_loaded = True
    reg.register("attack")(PhraseSearchAttack)
    reg.register("metric")(RougeMetric)
    reg.register("sanitizer")(SpacyNER)
    return reg


def test_a_bench_counts_a_reused_release_as_nothing_and_times_an_external_command(tmp_path, monkeypatch):
    import sys
    from pathlib import Path

    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    out = tmp_path / "b"
    anonaudit.bench("labels", out=out, **BENCH)
    said: list[str] = []
    anonaudit.bench("labels", _limit(60), out=out, echo=said.append, **BENCH)
    line = next(m for m in said if "time limit 60 min: estimated" in m)
    assert "sanitize labels (reused) ~0.0 s" in line and "sanitize suppression (reused) ~0.0 s" in line
    example = Path(__file__).resolve().parents[1] / "examples" / "regex_masker.py"
    with pytest.raises(AnonauditError, match=r"sanitize regex ~.*attack:phrase_search ~"):
        anonaudit.bench(command=f"{sys.executable} {example} {{input}} {{output}}", name="regex", spec=_limit(1e-6),
                        **BENCH)
