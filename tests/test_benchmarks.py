"""Every benchmark script has a ``--quick`` mode, and the quick modes that need no model run here.

A quick mode is a smoke test of the script on tiny data (seconds), not a measurement: the figures
in benchmarks/README.md come from full runs. Scripts whose quick mode needs a language model or a
trained classifier (minutes on this CPU), Ray, or a file to compare are listed in
:data:`NOT_RUN_HERE` with the reason; their quick modes are run by hand (benchmarks/README.md). A
new script must be put in one list or the other (:func:`test_every_script_is_classified`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
#: The shared TAB data, where the scripts read it: ``../shared/data/tab`` beside the checkout.
TAB = ROOT.parent / "shared" / "data" / "tab"

#: Quick modes that run here, in seconds (measured on the 2-core VM, busy): script -> needs TAB.
RUN_HERE = {
    "huge_document.py": False,      # ~2 s: a 0.3 MB document
    "index_build.py": False,        # ~8 s: 300 short documents, this checkout as its own baseline
    "phrase_search_tab.py": True,   # ~4 s: three published sanitizations of TAB
    "phrase_search.py": True,       # ~17 s: 150 TAB documents, no scale-up
    "sequential_coverage.py": False,  # ~2 s: 200 simulated releases per rate
}
#: Scripts not run here, and why.
NOT_RUN_HERE = {
    "tab.py": "the helper module of the TAB benchmarks, not a script",
    "compare_results.py": "compares two results files given to it: nothing to make quick",
    "bench_sanitizers.py": "its --quick takes about 30 s (tests/test_bench.py covers the command it drives)",
    "claim_linker_judge.py": "needs the embedded LLM",
    "judge_masked_twin.py": "needs the embedded LLM (--quick: ~1.5 min of CPU with the 1.5B)",
    "llm_prompt_rate.py": "needs the embedded LLM and times the CPU (run under the heavy lock)",
    "claim_linker_tab.py": "needs the embedded LLM and the sentence embedder",
    "claim_linker_ppi.py": "needs the embedded LLM and the sentence embedder (--quick: 12 demo people, one release)",
    "llm_layer.py": "needs the embedded LLM",
    "llm_sanitizer_checks.py": "needs the embedded LLM",
    "span_guess_tab.py": "needs the embedded LLM",
    "trir_fidelity.py": "trains TRIR attackers (--quick: 6 demo people, 2 attackers, 1 epoch; the guard itself is "
                        "tests/test_trir_fidelity.py, slow)",
    "judge_speed.py": "needs the embedded LLM (its --count-only needs the 1.5B's tokenizer, MiniLM and spaCy)",
    "paraphrase_speed.py": "needs the embedded LLM",
    "span_guess_speed.py": "embeds TAB's backgrounds with MiniLM and parses them with spaCy (minutes cold)",
    "trir_tab.py": "trains a TRIR classifier",
    "utility_tab.py": "needs the LLM for information content and the sentence embedder",
    "tae_tab.py": "parses 10 TAB judgments with spaCy (about a minute loaded); tests/test_tae_reproduction.py "
                  "runs its evaluation on them",
    "delinker_tab.py": "needs the embedded LLM (--quick: one TAB document, the 0.5B)",
    "intact_tab.py": "needs the embedded LLM (--quick: one TAB document, the 0.5B)",
    "prompt_anonymizer_tab.py": "needs the embedded LLM (--quick: one TAB document, the 0.5B)",
    "harden_tab.py": "needs the embedded LLM (--quick: one TAB document, the 0.5B)",
    "ray_scaleout.py": "starts a local Ray and loads MiniLM (--quick: 200 short documents, 1 worker)",
    "trir_ablation.py": "trains TRIR classifiers (--quick: 4 people, 2 attackers, 1 epoch, 32-token windows, 3 predictions each)",
    "trir_compile.py": "compiles the TRIR model with torch.compile (--quick: 2 steps of 32-token windows)",
    "trir_speed.py": "trains TRIR classifiers (--quick: 3 demo people, fp32 and bf16 loops, 3 predictions, 32-token windows)",
    "trir_scale.py": "trains TRIR classifiers, on Ray too",
    "trir_gpu.py": "trains TRIR classifiers and runs spaCy over TAB (--quick: 3 TAB people, 2 epochs of 32-token "
                   "windows, 2 configurations; 12 demo people through the command line)",
    "trir_step.py": "loads MiniLM in three processes and times its training steps (--quick: 2 repetitions)",
    "release_audit.py": "audits a TAB release with every attack and metric (hours cold; --quick: 6 judgments, "
                        "every model); its table is tested below",
    "trir_release.py": "trains TRIR classifiers, on Ray too (--quick: 12 demo people, 1 epoch, 32-token windows); "
                       "its helpers are tested below",
}


#: Scripts without a ``--quick`` (nothing to make quick): the others all have one.
NO_QUICK = {"tab.py", "compare_results.py"}


def test_every_script_is_classified():
    scripts = {p.name for p in BENCH.glob("*.py")}
    assert scripts == set(RUN_HERE) | set(NOT_RUN_HERE)
    for name in scripts - NO_QUICK:
        text = (BENCH / name).read_text(encoding="utf-8")
        assert "--quick" in text or "quick=" in text, name


@pytest.mark.parametrize("script", sorted(RUN_HERE))
def test_quick_mode_runs(script, tmp_path):
    if RUN_HERE[script] and not (TAB / "bks").is_dir():
        pytest.fail(f"{script} --quick needs the shared TAB data in {TAB} (beside the checkout, as in CI)")
    env = {**os.environ, "ANONAUDIT_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, str(BENCH / script), "--quick"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip()


def _trir_release():
    """benchmarks/trir_release.py as a module (it imports ``tab`` from beside it)."""
    import importlib

    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("trir_release")
    finally:
        sys.path.remove(str(BENCH))


def test_trir_release_reads_a_run_and_projects_it():
    tr = _trir_release()
    results = {"results": [
        {"name": "trir", "release": "labels", "value": 0.4, "ci": [0.2, 0.6], "n": 20},
        {"name": "trir.top5", "release": "labels", "value": 0.8, "ci": [0.6, 0.9], "n": 20},
        {"name": "phrase_search_reid", "release": "labels", "value": 0.3, "ci": [0.1, 0.5], "n": 20}],
        "provenance": {"components": {"attack:trir": {"stats": {
            "timings": {"labels": {"predict": 2.0}},
            "trained_attacker": {"train_seconds": 100.0, "timings": {"text_preparation_seconds": 10.0},
                                 "chosen_epoch": 2, "history": [
                                     {"epoch": 1, "seconds": 30.0, "windows": 90, "dev_accuracy": 0.1},
                                     {"epoch": 2, "seconds": 20.0, "windows": 90, "dev_accuracy": 0.3},
                                     {"epoch": 3, "seconds": 20.0, "windows": 90, "dev_accuracy": 0.2}]}}}}}}
    fig = tr.trir_figures(results)
    assert fig["trir"] == {"labels": {"value": 0.4, "ci": [0.2, 0.6], "n": 20}}
    assert fig["top5"]["labels"]["value"] == 0.8 and tr.risks(results, "phrase_search_reid")["labels"]["n"] == 20
    assert (fig["epochs_run"], fig["chosen_epoch"], fig["windows_per_epoch"]) == (3, 2, 90)
    assert (fig["preparation_s"], fig["training_s"], fig["epochs_s"], fig["prediction_s"]) == (10.0, 90.0, 70.0,
                                                                                                {"labels": 2.0})
    # 10 people (15 in the background) to 100 (150): 10x the windows, epochs after the first at 20 s
    proj = tr.projection(fig, 10, 100)
    assert proj["windows_per_epoch"] == 900 and proj["seconds_per_epoch"] == 200
    assert proj["preparation_s"] == 100 and proj["prediction_s"] == 20
    assert proj["total_s_3_epochs"] == 100 + 600 + 20 and proj["total_s_15_epochs"] == 100 + 3000 + 20
    with pytest.raises(ValueError):
        tr.projection({**fig, "epoch_seconds": []}, 10, 100)
    assert tr.spread([0.4, 0.5, 0.6]) == {"mean": 0.5, "sd": 0.1, "min": 0.4, "max": 0.6, "seeds": 3}
    assert tr.spread([0.3])["sd"] == 0.0
    assert tr.fmt_risk({"value": 0.25, "ci": [0.1, 0.5]}) == "0.250 [0.10–0.50]"


def test_release_audit_tabulates_its_ledger_and_each_stage_s_provenance(tmp_path):
    """The stage table: seconds summed over slots, the parts from the provenance, LLM requests and
    tokens, peak memory; a stage still running said as not finished."""
    import importlib
    import json

    sys.path.insert(0, str(BENCH))
    try:
        ra = importlib.import_module("release_audit")
    finally:
        sys.path.remove(str(BENCH))
    (tmp_path / "claim_linker").mkdir()
    (tmp_path / "claim_linker" / "results.json").write_text(json.dumps({"provenance": {
        "components": {"attack:claim_linker": {"fit_seconds": 40.0, "stats": {"timings": {"r": {"score": 30.0}}}}},
        "pairs": {"k": {"seconds": 50.0}}}}))
    ledger = {"claim_linker": {"seconds": 95.0, "slots": 2, "done": True, "peak_rss_mb": 3000.0,
                               "cost": {"llm": {"misses": 12, "backend_calls": 12},
                                        "tokens": {"prompt_tokens": 900, "prompt_evaluated": 700,
                                                   "completion_tokens": 80}}},
              "trir": {"seconds": 600.0, "slots": 1, "done": False}}
    text = ra.table(tmp_path, ledger)
    assert "| claim_linker | 95 (2) | claim_linker: fit 40, score 30; evaluate 50 | 12 / 12 | 900 / 700 / 80 | 3000 |" in text
    assert "| trir (not finished) | 600 (1) |" in text and "**695** (11.6 min)" in text


def test_trir_release_measures_the_memory_of_a_process_tree(tmp_path):
    """A child that holds ~200 MB and starts a grandchild holding ~200 MB more: the tree's peak is
    the sum, the largest single process one of them."""
    tr = _trir_release()
    hold = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); import time; time.sleep(1.5)"
    code = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {hold!r}]); "
            f"{hold}; p.wait()")
    m = tr.measured([sys.executable, "-c", code], dict(os.environ), tmp_path / "run.log")
    assert m["rc"] == 0 and m["wall_s"] >= 1.5
    assert 380 <= m["peak_tree_rss_mb"] < 800
    assert 190 <= m["max_process_rss_mb"] < 400


@pytest.mark.parametrize("ray", [False, True])
def test_trir_release_stops_a_run_after_a_checkpointed_epoch_and_sums_its_segments(tmp_path, ray):
    """--stop-after: a fake training ends 3 epochs (a line each, locally; none on Ray) and writes a
    checkpoint after each (on Ray a new folder each); it is killed after the first epoch that
    ends past the deadline, once its checkpoint is written, not during the epoch before it nor at
    the last epoch."""
    tr = _trir_release()
    ckpt = tmp_path / "checkpoints"
    where = "c / f'checkpoint_{e}'" if ray else "c"
    code = ("import time, pathlib, sys\n"
            f"c = pathlib.Path({str(ckpt)!r}); c.mkdir()\n"
            "for e, pause in ((1, 0.1), (2, 1.5), (3, 20)):\n"
            "    print(f'TRIR training, epoch {e}/3: 1/1', flush=True); time.sleep(pause)\n"
            + ("" if ray else "    print(f'    TRIR epoch {e}/3: loss 1.0, 1 s', flush=True)\n")
            + f"    time.sleep(0.3); d = {where}; d.mkdir(exist_ok=True); (d / 'state.pt').write_text(str(e))\n")
    m = tr.measured([sys.executable, "-c", code], dict(os.environ), tmp_path / "run.log", 1.0, ckpt, epochs=3)
    assert m["stopped_after_epoch"] == 2 and m["rc"] != 0 and m["wall_s"] < 12
    assert (ckpt / ("checkpoint_2" if ray else "") / "state.pt").read_text() == "2"
    assert not (ckpt / "checkpoint_3").exists() and m["before_training_s"] is not None
    done = {"rc": 0, "wall_s": 5.0, "peak_tree_rss_mb": 900, "max_process_rss_mb": 800,
            "before_training_s": 2.0, "stopped_after_epoch": None}
    assert tr.merge_segments([m], None)["stopped"] is True
    merged = tr.merge_segments([m, done], {"epochs_run": 3, "training_s": 1.0})
    assert merged["wall_s"] == round(m["wall_s"] + 5.0, 1) and merged["resumed_after_epochs"] == [2]
    assert merged["peak_tree_rss_mb"] == max(900, m["peak_tree_rss_mb"]) and "stopped" not in merged
