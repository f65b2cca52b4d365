"""TRIR's fidelity guard (issue 70): the default attacker must re-identify as many people as the
reference attacker (every window every epoch, the paper budget's whole 15-pass schedule, the best
dev epoch kept) on the same data and seeds, or a speed-up has weakened it.

The slow test trains both on real TAB text, through ``benchmarks/trir_fidelity.py`` (the same
functions the benchmark runs): the 10 people with the shortest public judgments (4.9-6.6 k
characters, about 30 windows a person with the paper budget's masked copies), releases their
originals, spaCy's and the manual masking, and a dev release of 10 documents, which chooses the
epoch with early stopping (a small dev release, as users run it; 10-19 documents choose with a
warning). 3 seeds, 6 trainings. It fails when the default's mean TRIR is lower than the
reference's by more than the reference's seed spread (at least one document). Before it was
trusted it was shown to fail on a known-bad setting, one pass (benchmarks/README.md, "The
fidelity guard"). The model-free tests check the verdict's arithmetic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import trir_fidelity as guard  # noqa: E402

TAB = Path(__file__).resolve().parents[2] / "shared" / "data" / "tab"


def _run(config: str, seed: int, trir: dict[str, float], documents: int = 10) -> dict:
    return {"config": config, "seed": seed, "trir": trir, "documents": {k: documents for k in trir}}


def test_the_verdict_fails_a_drop_larger_than_the_seeds_spread_and_passes_one_within_it():
    reference = [_run("reference", s, {"a": v, "b": v}) for s, v in ((0, 0.8), (1, 0.7), (2, 0.9))]  # spread 0.2
    within = [_run("default", s, {"a": v, "b": v}) for s, v in ((0, 0.7), (1, 0.6), (2, 0.8))]  # 0.1 lower
    beyond = [_run("default", s, {"a": v, "b": v}) for s, v in ((0, 0.5), (1, 0.5), (2, 0.6))]  # 0.267 lower
    v = guard.verdict(reference + within)
    assert v["ok"] and v["spread"] == pytest.approx(0.2) and v["gap"] == pytest.approx(-0.1)
    v = guard.verdict(reference + beyond)
    assert not v["ok"] and v["gap"] == pytest.approx(-0.8 + 16 / 30) and v["per_release_gap"]["a"] < -0.2
    higher = [_run("default", s, {"a": 1.0, "b": 1.0}) for s in (0, 1, 2)]  # erring on the safe side passes
    assert guard.verdict(reference + higher)["ok"]


def test_identical_seeds_still_allow_one_document_and_the_verdict_needs_matching_seeds():
    reference = [_run("reference", s, {"a": 0.5}) for s in (0, 1)]
    one_less = [_run("default", s, {"a": 0.4}) for s in (0, 1)]  # one document of 10, on every seed
    two_less = [_run("default", s, {"a": 0.3}) for s in (0, 1)]
    assert guard.verdict(reference + one_less)["ok"]
    assert not guard.verdict(reference + two_less)["ok"]
    erratic = [_run("default", 0, {"a": 0.6}), _run("default", 1, {"a": 0.0})]  # its own spread does not excuse it
    assert not guard.verdict(reference + erratic)["ok"]
    with pytest.raises(ValueError, match="different seeds"):
        guard.verdict(reference + [_run("default", s, {"a": 0.5}) for s in (0, 2)])


def test_out_resumes_only_a_file_this_script_wrote_with_the_same_settings(tmp_path, capsys):
    """--out resumes the runs of a file written with the same data and settings; another file, or
    one of other settings, is refused (exit 2, naming what differs) and left as it was. Model-free:
    the refusal comes before any data is read."""
    ns = guard.argparse.Namespace(data="tab-short", people=10, dev_people=10, skip=0, threads=2, epochs=None,
                                  batch_size=None, window=None, overlap=None, cold=False, quick=False,
                                  precision="auto")
    mine = tmp_path / "runs.json"
    done = [_run("default", 0, {"a": 0.5})]
    mine.write_text(guard.json.dumps({"script": guard.SCRIPT, "settings": guard.run_settings(ns), "runs": done}))
    assert guard.resumable_runs(mine, guard.run_settings(ns)) == done
    other = guard.run_settings(guard.argparse.Namespace(**{**vars(ns), "people": 20}))
    with pytest.raises(ValueError, match="people: 10 there, 20 now"):
        guard.resumable_runs(mine, other)
    before = mine.read_text()
    assert guard.main(["--people", "20", "--out", str(mine)]) == 2 and mine.read_text() == before
    assert "people: 10 there, 20 now" in capsys.readouterr().err
    foreign = tmp_path / "notes.json"
    foreign.write_text('{"runs": []}')
    assert guard.main(["--out", str(foreign)]) == 2 and foreign.read_text() == '{"runs": []}'
    assert "not a results file of this script" in capsys.readouterr().err


def _schedule_stops(curve: list[float], patience: int, ties: bool = False) -> tuple[int, int]:
    """(passes run, pass kept) as the attack's own schedule decides them on ``curve``."""
    from attackers.trir.schedule import plan

    p = plan(1, {"epochs": len(curve), "patience": patience, "fixed_passes": 5, "patience_ties": ties}, 10)
    best, history = (-1.0, 0), []
    for epoch, accuracy in enumerate(curve, 1):
        history.append({"epoch": epoch, "dev_accuracy": accuracy})
        if p.keeps(epoch, accuracy, best[0]):
            best = (accuracy, epoch)
        if p.stop_reason(epoch, best[0], p.improved_at(history)):
            return epoch, best[1]
    return len(curve), best[1]


def test_the_stopping_rules_judged_offline_are_the_schedules_own():
    """--rules judges stopping rules on the reference's dev curves: without the tie rule its
    simulation must stop and keep where the attack's schedule does (500 seeded curves, patience
    2-4), and with it a tie restarts the patience (the guard's fp32 seed 1 curve, 2026-12-08)."""
    import random

    rng = random.Random(0)
    for _ in range(500):
        curve = [rng.choice([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]) for _ in range(15)]
        for patience in (2, 3, 4):
            assert guard.stopping_rule(curve, patience, False) == _schedule_stops(curve, patience), (curve, patience)
    seed1 = [0.3, 0.3, 0.6, 0.6, 0.5, 0.6, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7]
    assert guard.stopping_rule(seed1, 3, False) == (6, 6)  # the default: stopped one pass before 0.7
    assert guard.stopping_rule(seed1, 3, True) == (15, 15)  # ties restart: the reference's epoch
    for _ in range(200):  # patience_ties in the attack's schedule is the rule judged offline
        curve = [rng.choice([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]) for _ in range(15)]
        assert guard.stopping_rule(curve, 3, True) == _schedule_stops(curve, 3, ties=True), curve
    runs = [{"config": "reference", "seed": 1, "dev_curve": seed1, "chosen_epoch": 15}]
    assert "| 1 | 15 | 6 (6, other) | 5 (4, other) | 15 (15) | 15 (15) |" in guard.rules_table(runs)


def test_patience_ties_is_off_by_default_and_in_the_key_only_when_on(tmp_path):
    """The stopping rule is an option: the paper and fast budgets keep the patience counted from the
    last strictly better epoch, and the attackers cached before the option keep their keys."""
    from attackers.trir import TRIRAttack
    from attackers.trir.encoder import resolve_base
    from audit.core.data import Corpus, Document

    bg = Corpus([Document(id="a", text="Ann lives in Oslo.", subject="ann")], name="bg")
    base = resolve_base(None)
    paper, ties = TRIRAttack(), TRIRAttack(patience_ties=True)
    assert not paper.settings()["patience_ties"] and not TRIRAttack(budget="fast").settings()["patience_ties"]
    assert ties.settings()["patience_ties"]
    assert TRIRAttack(patience_ties=False).cache_key(bg, base, None) == paper.cache_key(bg, base, None)
    assert ties.cache_key(bg, base, None) != paper.cache_key(bg, base, None)


@pytest.mark.slow
def test_the_default_attacker_keeps_the_reference_attackers_trir_on_tab():
    """Costly: ~9-10 min on 2 quiet cores (projected; under load 2-3 on 2026-12-07 it had run 5 of
    its 6 trainings after 690 s, ~13.5 min in all): 6 trainings of 250 windows a pass, the
    reference's 15 passes (~8 s each quiet) and the default's 6-10 (~8-9 s each), ~10 s of spaCy over
    the 10 judgments once. The default passed (-2.2 points, tolerance 3.3), issue 70's faster
    candidate (3 frozen layers, fused AdamW) only at the edge (-3.3: not made the default), and
    one pass failed it (-28.9): benchmarks/README.md, "The fidelity guard". In fp32 (a CPU without
    native bf16, which runs this test in fp32) the default measured -5.6 against a tolerance of 3.3 on
    this EPYC's fp32 kernels (2026-12-08): a failure here on such a CPU is that finding, not noise."""
    if not (TAB / "bks" / "TAB_test_BK=Public.json").is_file():
        pytest.skip(f"the TAB data is not at {TAB} (CI has it): the fidelity guard needs real judgments")
    sc = guard.scenario("tab-short", 10, 10)
    runs = [guard.one_run(sc, config, seed, 2, {}) for seed in (0, 1, 2) for config in ("default", "reference")]
    text = guard.table(runs, [r.name for r in sc.releases])
    print(text)  # the per-release table (pytest -s), as the benchmark prints it
    # what broke last time is exercised: a small dev release chose the epoch, the reference ran its schedule
    assert all(r["selected_on_dev"] and 10 <= r["dev_documents"] < 20 for r in runs), text
    assert all(r["epochs_run"] == r["max_epochs"] for r in runs if r["config"] == "reference"), text
    assert guard.verdict(runs)["ok"], text
