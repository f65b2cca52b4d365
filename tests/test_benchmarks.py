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
}
#: Scripts not run here, and why.
NOT_RUN_HERE = {
    "tab.py": "the helper module of the TAB benchmarks, not a script",
    "compare_results.py": "compares two results files given to it: nothing to make quick",
    "bench_sanitizers.py": "its --quick takes about 30 s (tests/test_bench.py covers the command it drives)",
    "claim_linker_judge.py": "needs the embedded LLM",
    "claim_linker_tab.py": "needs the embedded LLM and the sentence embedder",
    "llm_layer.py": "needs the embedded LLM",
    "llm_sanitizer_checks.py": "needs the embedded LLM",
    "span_guess_tab.py": "needs the embedded LLM",
    "trir_tab.py": "trains a TRIR classifier",
    "utility_tab.py": "needs the LLM for information content and the sentence embedder",
    "delinker_tab.py": "needs the embedded LLM (--quick: one TAB document, the 0.5B)",
    "intact_tab.py": "needs the embedded LLM (--quick: one TAB document, the 0.5B)",
    "prompt_anonymizer_tab.py": "needs the embedded LLM (--quick: one TAB document, the 0.5B)",
    "harden_tab.py": "needs the embedded LLM (--quick: one TAB document, the 0.5B)",
    "ray_scaleout.py": "starts a local Ray and loads MiniLM (--quick: 200 short documents, 1 worker)",
    "trir_ablation.py": "trains TRIR classifiers (--quick: 4 people, 2 attackers, 1 epoch, 32-token windows)",
    "trir_compile.py": "compiles the TRIR model with torch.compile (--quick: 2 steps of 32-token windows)",
    "trir_speed.py": "trains TRIR classifiers (--quick: 3 demo people, 2 loops, 32-token windows)",
    "trir_scale.py": "trains TRIR classifiers, on Ray too",
    "trir_step.py": "loads MiniLM in three processes and times its training steps (--quick: 2 repetitions)",
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
