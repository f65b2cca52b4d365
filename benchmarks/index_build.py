"""The single-machine phrase index (issue #21): this checkout's build against a baseline checkout's, in one run.

    python benchmarks/index_build.py --docs 20000 --baseline ../anonaudit-before --json index_build.json
    python benchmarks/index_build.py --quick     # 300 short documents against this checkout: a smoke test

``--baseline`` is another checkout of anonaudit (e.g. ``git worktree add ../anonaudit-before
f1eebc4``). The synthetic release of ``benchmarks/ray_scaleout.py`` (``--docs`` documents of
about 300 words) is made once; then, ``--rounds`` times, each checkout in turn runs a fresh
Python process (the other's code is never imported beside it) that measures:

* words/s of the build with 1 and 2 threads, best and median of ``--builds`` builds;
* peak resident memory of one build over the process's memory before it (``VmHWM`` reset
  through ``/proc/self/clear_refs``), and what stays resident after it, taken first, before
  any other build has left memory the C heap keeps for reuse; this is what the machine must
  have;
* peak traced memory (``tracemalloc``: numpy's live allocations) of one build, the measure of
  the figures before 2026-11-25; memory a build has freed but the C heap keeps is not in it,
  nor, since the second session of 2026-11-25, the chunks' pairs, which live in memory maps
  numpy does not allocate (:class:`~audit.ngrams.build.MappedRuns`): compare
  builds on the resident figure;
* the index's own size;
* the phrase-search attack on the first ``--query-docs`` released documents (its per-document
  work, the index already built) and a digest of its results, so that the two checkouts'
  answers are compared whole (but for the number of hash bits the index keeps, which the
  results report and which may differ between versions).

Both checkouts run with the same Python environment (this one's), with torch imported first
(as in an audit that embeds or trains; the build before 2026-11-25 sorted with torch then), and
with numpy started as the ``anonaudit`` command starts it on this machine (``--numpy cli``; on
AMD Zen 4 without its AVX-512 sort, see ``audit/runtime/cpu.py``) or as numpy starts by itself
(``--numpy default``).
Take the figures on a quiet machine: the rounds interleave the checkouts so that a change in
the machine falls on both.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parents[1]

# The measuring process: runs with PYTHONPATH=<checkout>, reads the pickled data, prints JSON.
CHILD = r'''
import gc, hashlib, json, pickle, sys, time, tracemalloc
import numpy as np
import torch  # loaded, as in an audit that embeds or trains: a build that can use torch's sort does
from attackers.phrase_search import PhraseSearchAttack
from audit.ngrams import NgramIndex
from audit.core.data import Scenario

data, builds, query_docs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
originals, release = pickle.load(open(data, "rb"))
texts = [d.text for d in originals]
NgramIndex.build(texts[:200], fingerprint="warm")  # the code-point tables, once
words = None

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

def size(index):
    names = ("directory", "keys", "first", "multi_offsets", "multi_docs", "offsets", "posting_docs")
    return sum(np.asarray(getattr(index, n)).nbytes for n in names if isinstance(getattr(index, n, None), np.ndarray))

out = {}
# first, on a process that has built nothing big yet: what the build makes resident is its own
gc.collect()
base = status("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")  # resets VmHWM to the current resident size
index = NgramIndex.build(texts, fingerprint="benchmark", workers=2)
out["peak_rss_bytes"] = status("VmHWM:") - base
out["rss_after_bytes"] = status("VmRSS:") - base
out["index_bytes"] = size(index)
del index
gc.collect()
tracemalloc.start()
index = NgramIndex.build(texts, fingerprint="benchmark", workers=2)
out["peak_traced_bytes"] = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
del index
for workers in (1, 2):
    secs = []
    for _ in range(builds):
        gc.collect()
        t0 = time.perf_counter()
        index = NgramIndex.build(texts, fingerprint="benchmark", workers=workers)
        secs.append(time.perf_counter() - t0)
        words = int(index.config["n_tokens"])
        del index
    out[f"seconds_{workers}"] = secs
gc.collect()
docs = list(release.corpus)[:query_docs]
sub = type(release)(release.name, type(release.corpus)(docs, name=release.corpus.name))
scenario = Scenario(originals=originals, releases=(sub,))
attack = PhraseSearchAttack().fit(scenario)
t0 = time.perf_counter()
results = attack.evaluate(scenario, sub)
out["query_seconds"] = time.perf_counter() - t0
def strip(x):  # the run's timing, and the hash bits the index keeps (which its config reports), left out
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in ("seconds", "hash_bits")}
    return [strip(v) for v in x] if isinstance(x, list) else x
rows = [strip(r.to_dict()) for r in results]
out["results_sha256"] = hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()
out["words"] = words
print(json.dumps(out))
'''


def run_child(checkout: Path, data: Path, builds: int, query_docs: int, numpy_as_cli: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    if numpy_as_cli:
        from audit.runtime.cpu import tune_numpy

        tune_numpy(env, here=False)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(data), str(builds), str(query_docs)], env=env,
                          cwd=str(checkout), capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{checkout}: the measuring process failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    words = runs[0]["words"]
    row: dict[str, Any] = {"words": words}
    for w in (1, 2):
        secs = [s for r in runs for s in r[f"seconds_{w}"]]
        row[f"words_per_s_{w}_best"] = words / min(secs)
        row[f"words_per_s_{w}_median"] = words / float(np.median(secs))
    for key in ("peak_rss_bytes", "rss_after_bytes", "peak_traced_bytes", "index_bytes"):
        vals = [r[key] for r in runs]
        row[key.replace("_bytes", "_MB_per_M_words")] = [v / words for v in vals]  # bytes per word = MB per M words
    row["query_seconds"] = [r["query_seconds"] for r in runs]
    row["results_sha256"] = sorted({r["results_sha256"] for r in runs})
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--words", type=int, default=300)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout of anonaudit (required but with --quick)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--builds", type=int, default=3, help="timed builds per thread count in each process")
    ap.add_argument("--query-docs", type=int, default=1000)
    ap.add_argument("--numpy", choices=("cli", "default"), default="cli",
                    help="start numpy as the anonaudit command does on this machine, or as it starts by itself")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--quick", action="store_true",
                    help="300 short documents, one round and build, this checkout as its own baseline (a smoke test)")
    args = ap.parse_args()
    if args.quick:
        args.docs, args.words, args.rounds, args.builds, args.query_docs = 300, 100, 1, 1, 20
        args.baseline = args.baseline or HERE
    if args.baseline is None:
        ap.error("--baseline is required (another checkout of anonaudit), except with --quick")
    sys.path.insert(0, str(HERE / "benchmarks"))
    sys.path.insert(0, str(HERE))
    from ray_scaleout import synthetic

    checkouts = {"baseline": args.baseline.resolve(), "this": HERE}
    from audit.runtime.cpu import numpy_dispatch_setting

    out: dict[str, Any] = {"docs": args.docs, "checkouts": {k: str(v) for k, v in checkouts.items()},
                           "numpy_disabled_features": os.environ.get("NPY_DISABLE_CPU_FEATURES")
                           or (numpy_dispatch_setting(os.environ, here=False) if args.numpy == "cli" else None),
                           "load_avg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.pkl"
        with open(data, "wb") as fh:
            pickle.dump(synthetic(args.docs, args.words), fh)
        runs: dict[str, list] = {k: [] for k in checkouts}
        for r in range(args.rounds):
            for name, path in checkouts.items():
                res = run_child(path, data, args.builds, args.query_docs, args.numpy == "cli")
                runs[name].append(res)
                print(f"round {r + 1}, {name}: {res['words'] / min(res['seconds_2']) / 1e6:.2f} M words/s (2 threads, "
                      f"best), peak RSS {res['peak_rss_bytes'] / res['words']:.1f} MB per M words, traced "
                      f"{res['peak_traced_bytes'] / res['words']:.1f}, index {res['index_bytes'] / res['words']:.1f}, "
                      f"query {res['query_seconds']:.2f} s", flush=True)
    out["runs"] = runs
    out["summary"] = {k: summary(v) for k, v in runs.items()}
    out["same_results"] = out["summary"]["baseline"]["results_sha256"] == out["summary"]["this"]["results_sha256"]
    out["load_avg_end"] = os.getloadavg()
    print(json.dumps(out["summary"], indent=1))
    print("same attack results:", out["same_results"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
