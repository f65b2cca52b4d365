"""Scale-out on Ray (issue #21): local against Ray with 1 and 2 workers, on a synthetic release.

Measures, in one run, on ``--docs`` synthetic documents (default 20,000, ~``--words`` words each)
and a masked release of them:

* per stage, documents/s locally and on a local Ray with each number of ``--workers``:
  the phrase index's n-gram extraction and build, the phrase-search attack's per-document
  work, and sentence embeddings (on the first ``--embed-docs`` documents: MiniLM is the slow
  one); the overhead ratio of Ray on one worker (Ray time / local time; target <= 1.3); the
  fixed cost of one Ray stage (a dataset for one tiny group: on an actor pool, and as tasks on
  the processes a task stage before it left; the index's n-gram workers run as tasks);
* that every Ray stage gives exactly the local output (index arrays, findings, vectors);
* the sharded index (``--shards``) against the single one: build time, per-document query
  time, same answers (the attack's results compared whole);
* the single-machine index: peak build memory (numpy allocations, traced) per million words
  and words/s with one and with two threads (``benchmarks/index_build.py`` compares the build
  with another checkout's, resident memory included);
* a paper projection for 1 M documents on N workers from the measured per-document costs.

The local stages run first and, unless ``--no-local-again``, once more after Ray's: Ray's time is
set against the mean of the two, since this VM's speed drifts within a run (the same local stage
took 1.5 times as long from one quarter of an hour to the next). The second local embedding
stage finds torch imported (the first pays its import, a few seconds), which only makes Ray's
ratio for that stage the less flattering.

    python benchmarks/ray_scaleout.py --docs 20000 --workers 1,2 --json ray_scaleout.json
    python benchmarks/ray_scaleout.py --docs 2000 --embed-docs 200      # a quick check
    python benchmarks/ray_scaleout.py --docs 100000 --stages index,embedding   # start-up amortised
    python benchmarks/ray_scaleout.py --quick   # a smoke run: 200 short documents, Ray with 1 worker, no cold builds

``--stages`` picks the stages measured (default all: ``index``, ``phrase_search``, ``embedding``,
``sharded``, ``single_index``); the per-document phrase search is the long one (about 5 ms a
document per worker here), so larger collections are measured without it.

Ray is started here for each worker count (``address: local``) with this machine's CPUs, as the
local run has them: one worker gets every CPU (its model's threads, its chunk's runs), two
workers share them. The figures include no cluster start and not the first stage's (Ray Data's
own start), but do include each stage's start (that is the fixed cost reported). ``--ray-cpus N`` starts Ray with N CPUs instead
(``--ray-cpus 0``: as many as workers, the setting of the runs before 2026-11-24).
The cold index build (``index_cold``) is the first index of a fresh Python process, timed in
``--cold-rounds`` fresh processes per configuration, taken in turn: locally, and on a local Ray
whose worker processes are up but have built nothing; both pay in the build what a first
index costs a process (numba's start, the kernels' load, the tokeniser's tables, memory never
touched). The in-process builds (``index``: the first on Ray's workers; ``index_warm``) follow
one made here before the figures, which loaded this process's kernels.
``--index-only`` measures only the single index and the sharded build's memory. Needs ``pip install -e '.[ray]'``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

# this checkout's package, not another one installed (an editable install of another checkout,
# when this file is run from a worktree): the driver, and Ray's workers through its sys.path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.runtime.cpu import tune_numpy  # noqa: E402

tune_numpy(os.environ)  # numpy started as the anonaudit command starts it (audit/runtime/cpu.py), and Ray's workers

import numpy as np  # noqa: E402

from attackers.phrase_search import PhraseSearchAttack  # noqa: E402
from audit.ngrams import NgramIndex  # noqa: E402
from audit.ngrams.shards import build_sharded  # noqa: E402
from audit.ngrams.storage import ARRAYS  # noqa: E402
from audit.core.data import Corpus, Document, Release, Scenario  # noqa: E402
from audit.runtime.executor import Executor, LocalExecutor  # noqa: E402
from audit.models.embed import Embedder  # noqa: E402
from audit.models.resources import Resources  # noqa: E402
from tab import load_avg  # noqa: E402  (the benchmarks' one helper module, beside this script)

#: The stages ``--stages`` can pick (see the module doc).
STAGES = ("index", "phrase_search", "embedding", "sharded", "single_index")


# --------------------------------------------------------------------------- data


def synthetic(n_docs: int, words: int, seed: int = 0) -> tuple[Corpus, Release]:
    """``n_docs`` documents of about ``words`` words (a Zipfian vocabulary of 30,000 words, a
    name, a place and numbers per document, sentences of 8-25 words) and a release that masks
    the names, places and numbers and 10% of the other words."""
    rng = random.Random(seed)
    vocab = [f"{''.join(rng.choice('bcdfghklmnprstvz') + rng.choice('aeiou') for _ in range(rng.randint(1, 4)))}"
             for _ in range(30_000)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    cum = np.cumsum(weights)
    cum /= cum[-1]
    firsts = [w.title() for w in vocab[:3000]]
    docs, released = [], []
    for i in range(n_docs):
        name = f"{rng.choice(firsts)} {rng.choice(firsts)}son"
        place = rng.choice(firsts) + "by"
        picks = np.searchsorted(cum, np.asarray([rng.random() for _ in range(words)]))
        toks = [vocab[j] for j in picks]
        text, pos = [], 0
        while pos < len(toks):
            k = rng.randint(8, 25)
            sent = toks[pos:pos + k]
            pos += k
            extra = rng.random()
            if extra < 0.3:
                sent = [name, "was", "seen", "in", place, *sent]
            elif extra < 0.5:
                sent = [*sent, "ref", str(rng.randrange(10**6))]
            sent[0] = sent[0].title()
            text.append(" ".join(sent) + ".")
        body = " ".join(text)
        docs.append(Document(f"d{i}", body, subject=f"p{i}"))
        mtoks = []
        for w in body.split(" "):
            core = w.rstrip(".")
            if core in (name.split()[0], name.split()[1], place) or core.isdigit() or rng.random() < 0.1:
                mtoks.append("[MASK]" + w[len(core):])
            else:
                mtoks.append(w)
        released.append(Document(f"d{i}", " ".join(mtoks), subject=f"p{i}"))
    return Corpus(docs, name="originals"), Release("masked", Corpus(released, name="masked"))


# --------------------------------------------------------------------------- stages


class _Noop:
    """A stage that does nothing: what a stage costs on Ray beyond its work (actors)."""

    def __call__(self, group):
        return list(group)


class _LightNoop(_Noop):
    """The same as plain tasks (a worker with ``light_setup``, as the index's n-gram workers)."""

    light_setup = True


def timed(repeat: int, make: Callable[[], Any], after: Callable[[Any], None] | None = None) -> tuple[list[float], Any]:
    """``make()`` ``repeat`` times, each after a garbage collection: the seconds of each, and what
    the last made. ``after`` (untimed) gets rid of what each made before the next."""
    secs, out = [], None
    for _ in range(repeat):
        out = None
        gc.collect()
        t0 = time.perf_counter()
        out = make()
        secs.append(time.perf_counter() - t0)
        if after is not None:
            after(out)
    return secs, out


def stage_index(texts: list[str], executor: Executor, repeat: int = 1) -> tuple[list[float], NgramIndex]:
    """The index stage ``repeat`` times in this process, whose kernels are loaded: the seconds of
    each, and the last index. On Ray the first is the workers' first index (numba's start in
    each worker process, the object store's memory touched for the first time); the later ones
    are the stage on a warm process or cluster. The first index of a fresh process on either
    side is :func:`cold_index`'s."""
    return timed(repeat, lambda: NgramIndex.build(texts, fingerprint="benchmark", executor=executor))


def stage_sharded(texts: list[str], shards: int, executor: Executor | None, repeat: int = 1) -> list[float]:
    """The sharded build ``repeat`` times: the seconds of each (the folder made anew each time)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "idx"
        return timed(repeat, lambda: build_sharded(folder, texts, shards=shards, fingerprint="benchmark",
                                                   executor=executor),
                     after=lambda _: shutil.rmtree(folder))[0]


def median(secs: list[float] | None) -> float | None:
    """The median of ``secs`` (None when there are none)."""
    return float(np.median(secs)) if secs else None


def warm(secs: list[float]) -> float | None:
    """The warm stage's seconds: the median of the repeats after the first (None with one)."""
    return median(secs[1:])


def started_ray(workers: int, cpus: int, object_store_mb: int) -> tuple[Any, dict[str, float]]:
    """A local Ray of ``cpus`` CPUs with ``workers`` workers, started, with its processes up: two
    tiny stages on actors and two as tasks (Ray Data's own start is the first). Returns the
    executor and the seconds of its start, the first stage and one more stage of each kind (the
    fixed cost of a stage)."""
    from audit.pipeline.executors import RayExecutor

    ex = RayExecutor("local", num_cpus=cpus, workers=workers, object_store_memory=object_store_mb * 2**20)
    secs = {}
    t0 = time.perf_counter()
    ex.start()
    secs["ray_start_s"] = time.perf_counter() - t0
    for key, worker in (("first_stage_s", _Noop()), ("stage_fixed_s", _Noop()), (None, _LightNoop()),
                        ("task_stage_fixed_s", _LightNoop())):  # the last on the processes of the one before
        t0 = time.perf_counter()
        ex.map(worker, [0], group=1, label="noop (tasks)" if getattr(worker, "light_setup", False) else "noop")
        if key:
            secs[key] = time.perf_counter() - t0
    return ex, secs


def cold_index(texts_file: Path, config: str, object_store_mb: int, ray_cpus: int) -> dict[str, Any]:
    """The first index a fresh process builds (run in one, by :func:`cold_indexes`): locally,
    or on a local Ray whose processes are up but have built nothing (``config`` ``ray:W``, W
    workers). Either side pays, in the build, what a process pays the first time: numba's start
    and its kernels' load from the cache (on Ray in each worker; the driver's beside them),
    the tokeniser's tables, memory touched for the first time (on Ray the object store's)."""
    texts = json.loads(texts_file.read_text())
    out: dict[str, Any] = {"config": config}
    ex: Any = LocalExecutor()
    if config != "local":
        w = int(config.split(":")[1])
        ex, secs = started_ray(w, ray_cpus or w, object_store_mb)
        out.update(secs)
    gc.collect()
    t0 = time.perf_counter()
    index = NgramIndex.build(texts, fingerprint="benchmark", executor=ex)
    out["index_cold_s"] = time.perf_counter() - t0
    out["phases"] = index.config["build_phases"]
    if config != "local":
        ex.close()
    return out


def cold_indexes(texts: list[str], configs: list[str], rounds: int, object_store_mb: int,
                 ray_cpus: int) -> dict[str, list[float]]:
    """:func:`cold_index` of each of ``configs`` in a fresh Python, ``rounds`` times in turn:
    the seconds of each build per configuration."""
    out: dict[str, list[float]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "texts.json"
        path.write_text(json.dumps(texts))
        for _ in range(rounds):
            for c in configs:
                res = subprocess.run([sys.executable, __file__, "--cold-index", c, "--cold-texts", str(path),
                                      "--object-store-mb", str(object_store_mb), "--ray-cpus", str(ray_cpus)],
                                     capture_output=True, text=True)
                if res.returncode:
                    raise SystemExit(f"the cold index build ({c}) failed:\n{res.stderr[-3000:]}")
                got = json.loads(res.stdout.strip().splitlines()[-1])
                out[c].append(got["index_cold_s"])
                print(f"cold index ({c}, a fresh process): {got['index_cold_s']:.2f} s, phases {got['phases']}",
                      flush=True)
    return out


def stage_attack(scenario: Scenario, release: Release, executor: Executor, **kw) -> tuple[float, float, list]:
    """``(fit seconds, evaluate seconds, results as dicts)``."""
    with Resources(executor=executor) as res:
        attack = PhraseSearchAttack(**kw).use(res)
        t0 = time.perf_counter()
        attack.fit(scenario)
        t1 = time.perf_counter()
        results = attack.evaluate(scenario, release)
        t2 = time.perf_counter()
        out = [r.to_dict() for r in results]
        attack.close()
    for r in out:
        r["details"].get("index", {}).pop("dir", None)
    return t1 - t0, t2 - t1, out


def stage_embed(texts: list[str], executor: Executor | None) -> tuple[float, np.ndarray]:
    """The embedding stage, its model's load included on both sides: locally in this process
    (and torch's import, the first time), on Ray in each worker (with its process's start)."""
    t0 = time.perf_counter()
    emb = Embedder(None, cache=False, **({"executor": executor} if executor is not None else {}))
    vecs = emb.encode(texts)
    return time.perf_counter() - t0, vecs


def peak_build(texts: list[str], workers: int) -> tuple[int, int]:
    """Peak traced memory of one build (bytes; numpy's allocations) and the size of the index (bytes)."""
    gc.collect()
    tracemalloc.start()
    index = NgramIndex.build(texts, fingerprint="benchmark", workers=workers)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, index.nbytes


def timed_builds(texts: list[str], workers: int, builds: int) -> list[tuple[float, dict]]:
    """``builds`` untraced builds: ``(seconds, build phases)`` of each."""
    out = []
    for _ in range(builds):
        gc.collect()
        t0 = time.perf_counter()
        index = NgramIndex.build(texts, fingerprint="benchmark", workers=workers)
        out.append((time.perf_counter() - t0, index.config["build_phases"]))
        del index
    return out


def peak_sharded(texts: list[str], shards: int) -> int:
    """Peak traced memory (bytes) of a sharded build into a temporary folder (local executor)."""
    with tempfile.TemporaryDirectory() as tmp:
        gc.collect()
        tracemalloc.start()
        build_sharded(Path(tmp) / "idx", texts, shards=shards, fingerprint="benchmark")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def single_index(texts: list[str], words: int, shards: int, builds: int = 5) -> dict[str, Any]:
    """The single index's peak traced memory and words/s with one and two threads (best and
    median of ``builds`` builds), the index's own size, and the sharded build's peak. 3 GB are
    touched once before any build: in this VM the first touch of memory costs about 2 ms a MB
    (a build allocates hundreds), which would otherwise fall on the first builds."""
    mem: dict[str, Any] = {}
    touched = np.ones(3 * 2**30 // 8, dtype=np.uint64)
    del touched
    for w in (1, 2):
        runs = timed_builds(texts, w, builds)
        peak, size = peak_build(texts, w)
        secs = [t for t, _ in runs]
        best = min(range(builds), key=lambda i: secs[i])
        row = {"peak_bytes_per_M_words": peak / words * 1e6, "index_bytes_per_M_words": size / words * 1e6,
               "words_per_s": words / secs[best], "words_per_s_median": words / float(np.median(secs)),
               "seconds": secs, "phases": [p for _, p in runs]}
        mem[f"{w} thread(s)"] = row
        print(f"single index, {w} thread(s): peak {peak / words:.0f} MB per M words (the index itself "
              f"{size / words:.0f}), {row['words_per_s'] / 1e6:.2f} M words/s best of {builds}, "
              f"{row['words_per_s_median'] / 1e6:.2f} median; best's phases {runs[best][1]}", flush=True)
    peak = peak_sharded(texts, shards)
    mem[f"sharded ({shards})"] = {"peak_bytes_per_M_words": peak / words * 1e6}
    print(f"sharded build ({shards} shards, local): peak {peak / words:.0f} MB per M words", flush=True)
    return mem


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--words", type=int, default=300, help="words per document (about)")
    ap.add_argument("--workers", default="1,2", help="Ray worker counts to measure, comma-separated")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--embed-docs", type=int, default=2000, help="documents embedded per configuration")
    ap.add_argument("--object-store-mb", type=int, default=1000)
    ap.add_argument("--ray-cpus", type=int, default=os.cpu_count() or 1,
                    help="CPUs of the local Ray (default: this machine's; 0: as many as workers)")
    ap.add_argument("--stages", default=",".join(STAGES),
                    help=f"stages to measure, comma-separated (default: all of {', '.join(STAGES)})")
    ap.add_argument("--index-repeat", type=int, default=1,
                    help="build the index, and the sharded one, this many times in each configuration "
                         "(the index's first on cold memory; warm: the median of the later ones; "
                         "sharded: the median of all)")
    ap.add_argument("--cold-rounds", type=int, default=2,
                    help="fresh processes per configuration for the cold index build (0: none)")
    ap.add_argument("--cold-index", default=None, help=argparse.SUPPRESS)  # one cold build, in this process
    ap.add_argument("--cold-texts", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--no-local-again", dest="local_again", action="store_false",
                    help="do not measure the local stages again after Ray's (see the module doc)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--index-only", action="store_true",
                    help="only the single index's memory and words/s and the sharded build's memory")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run (200 documents of 60 words, 20 embedded, 2 shards, Ray with 1 worker, "
                         "no cold builds, no single_index stage), not a measurement")
    args = ap.parse_args()
    if args.quick:
        args.docs, args.words, args.embed_docs, args.shards, args.workers = 200, 60, 20, 2, "1"
        args.cold_rounds, args.index_repeat, args.object_store_mb = 0, 1, 200
        args.stages = "index,phrase_search,embedding,sharded"
    if args.cold_index:
        print(json.dumps(cold_index(args.cold_texts, args.cold_index, args.object_store_mb, args.ray_cpus)))
        return
    workers = [int(w) for w in args.workers.split(",") if w.strip()]
    todo = {x.strip() for x in args.stages.split(",") if x.strip()}
    if todo - set(STAGES):
        ap.error(f"unknown stage(s) {', '.join(sorted(todo - set(STAGES)))} (use {', '.join(STAGES)})")
    out: dict[str, Any] = {"docs": args.docs, "stages": sorted(todo), "cpu_count": os.cpu_count(), "load_avg_start": load_avg()}

    t0 = time.perf_counter()
    originals, release = synthetic(args.docs, args.words)
    texts = [d.text for d in originals]
    if args.index_only:
        NgramIndex.build(["Warm up the tables. Done."])
        words = int(NgramIndex.build(texts).config["n_tokens"])
        out.update(words=words, single_index=single_index(texts, words, args.shards))
        if args.json:
            args.json.write_text(json.dumps(out, indent=1))
        return
    scenario = Scenario(originals=originals, releases=(release,))
    embed_texts = texts[: args.embed_docs]
    out["data_seconds"] = round(time.perf_counter() - t0, 1)
    cold: dict[str, list[float]] = {}
    if "index" in todo and args.cold_rounds:
        # memory this VM has never touched costs about 2 ms a MB the first time: touched here
        # once, so that no configuration's processes pay for it alone
        touched = np.ones(3 * 2**30 // 8, dtype=np.uint64)
        del touched
        cold = cold_indexes(texts, ["local", *(f"ray:{w}" for w in workers)], args.cold_rounds,
                            args.object_store_mb, args.ray_cpus)
    NgramIndex.build(["Warm up the tables. Done."])

    # --- local
    local = LocalExecutor()
    idx_all, index = stage_index(texts, local, args.index_repeat)
    idx_s = idx_all[0]
    words = int(index.config["n_tokens"])
    out["words"] = words
    fit_s, eval_s, local_results = (stage_attack(scenario, release, local) if "phrase_search" in todo
                                    else (None, None, None))
    emb_s, local_vecs = stage_embed(embed_texts, None) if "embedding" in todo else (None, None)
    stages = {"local": {"index_cold_s": median(cold.get("local")),
                        "index_cold_all_s": cold.get("local"),
                        "index_build_s": idx_s, "index_build_warm_s": warm(idx_all),
                        "index_build_all_s": idx_all, "index_phases_s": index.config["build_phases"],
                        "phrase_search_fit_s": fit_s, "phrase_search_documents_s": eval_s, "embedding_s": emb_s}}
    print(f"{args.docs:,} documents, {words:,} words; local: index {', '.join(f'{x:.1f}' for x in idx_all)} s, "
          f"phrase search {eval_s} s, "
          f"embedding {emb_s} s ({len(embed_texts)} docs)", flush=True)

    # --- sharded against single (local executor)
    if "sharded" in todo:
        sh_all = stage_sharded(texts, args.shards, None, args.index_repeat)
        sh_build = median(sh_all)
        stages["local"].update(sharded_build_s=sh_build, sharded_build_all_s=sh_all)
    if {"sharded", "phrase_search"} <= todo:
        with tempfile.TemporaryDirectory() as tmp:
            sh_fit, sh_eval, sh_results = stage_attack(scenario, release, local, shards=args.shards,
                                                       index_dir=str(Path(tmp) / "idx2"))
        out["sharded"] = {"shards": args.shards, "build_s": sh_build, "single_build_s": idx_s,
                          "build_ratio": sh_build / idx_s, "query_documents_s": sh_eval,
                          "single_query_documents_s": eval_s, "query_ratio": sh_eval / eval_s,
                          "same_results": sh_results == local_results}
        print(f"sharded ({args.shards}): build {sh_build:.1f} s ({sh_build / idx_s:.2f}x single), query "
              f"{sh_eval:.1f} s ({sh_eval / eval_s:.2f}x), same results: {sh_results == local_results}", flush=True)

    # --- single-machine index: memory and words/s
    if "single_index" in todo:
        out["single_index"] = single_index(texts, words, args.shards)

    # --- Ray
    for w in workers:
        ex, secs = started_ray(w, args.ray_cpus or w, args.object_store_mb)
        fixed, fixed_actors, fixed_tasks = secs["first_stage_s"], secs["stage_fixed_s"], secs["task_stage_fixed_s"]
        r_idx_all, r_index = stage_index(texts, ex, args.index_repeat)
        r_idx_s = r_idx_all[0]
        same_index = all(np.array_equal(getattr(index, a), getattr(r_index, a)) for a in ARRAYS)
        del r_index
        r_fit, r_eval, r_results = (stage_attack(scenario, release, ex) if "phrase_search" in todo
                                    else (None, None, None))
        r_emb, r_vecs = stage_embed(embed_texts, ex) if "embedding" in todo else (None, None)
        r_sh_all = stage_sharded(texts, args.shards, ex, args.index_repeat) if "sharded" in todo else []
        r_sh = median(r_sh_all)
        stages[f"ray_{w}"] = {
            "ray_cpus": args.ray_cpus or w, **secs,
            "index_cold_s": median(cold.get(f"ray:{w}")),
            "index_cold_all_s": cold.get(f"ray:{w}"),
            "index_build_s": r_idx_s, "index_build_warm_s": warm(r_idx_all),
            "index_build_all_s": r_idx_all, "phrase_search_fit_s": r_fit,
            "phrase_search_documents_s": r_eval, "embedding_s": r_emb, "sharded_build_s": r_sh,
            "sharded_build_all_s": r_sh_all,
            "same_index": same_index,
            "same_findings": r_results == local_results if "phrase_search" in todo else None,
            "same_vectors": None if r_vecs is None else bool(np.array_equal(r_vecs, local_vecs)),
            "max_vector_diff": float(np.abs(r_vecs - local_vecs).max()) if r_vecs is not None and len(r_vecs) else 0.0,
            "executor_timings": ex.timings,
        }
        ex.close()
        print(f"ray {w} worker(s): first stage {fixed:.1f} s, fixed cost of a stage {fixed_actors:.2f} s (actors), "
              f"{fixed_tasks:.2f} s (tasks); index {', '.join(f'{x:.1f}' for x in r_idx_all)} s, "
              f"phrase search {r_eval} s, "
              f"embedding {r_emb} s, sharded build {r_sh} s; same index {same_index}, findings "
              f"{stages[f'ray_{w}']['same_findings']}, vectors {stages[f'ray_{w}']['same_vectors']}", flush=True)

    # --- local again: this VM's speed drifts (the same stage took 1.5 times as long from one
    # quarter of an hour to the next), so Ray's stages are set against the mean of the local
    # ones measured before and after them
    if args.local_again and len(stages) > 1:
        a_idx_all, _ = stage_index(texts, local, args.index_repeat)
        a_eval = stage_attack(scenario, release, local)[1] if "phrase_search" in todo else None
        a_emb = stage_embed(embed_texts, None)[0] if "embedding" in todo else None
        a_sh_all = stage_sharded(texts, args.shards, None, args.index_repeat) if "sharded" in todo else []
        a_sh = median(a_sh_all)
        stages["local_after"] = {"index_build_s": a_idx_all[0], "index_build_warm_s": warm(a_idx_all),
                                 "index_build_all_s": a_idx_all, "phrase_search_documents_s": a_eval,
                                 "embedding_s": a_emb, "sharded_build_s": a_sh, "sharded_build_all_s": a_sh_all}
        print(f"local again: index {', '.join(f'{x:.1f}' for x in a_idx_all)} s, phrase search {a_eval} s, "
              f"embedding {a_emb} s, sharded build {a_sh} s", flush=True)
    out["stages"] = stages

    def local_s(key: str) -> float | None:
        """The local stage's seconds: the mean of its runs before and after Ray's."""
        runs = [s[key] for cfg, s in stages.items() if cfg in ("local", "local_after") and s.get(key)]
        return sum(runs) / len(runs) if runs else None

    # --- documents/s and overhead
    per_stage = {"index_cold": ("index_cold_s", args.docs), "index": ("index_build_s", args.docs),
                 "index_warm": ("index_build_warm_s", args.docs),
                 "phrase_search": ("phrase_search_documents_s", args.docs),
                 "embedding": ("embedding_s", len(embed_texts)), "sharded_build": ("sharded_build_s", args.docs)}
    #: the stages whose workers run as tasks (``light_setup``): their fixed cost is a task stage's
    task_stages = {"index_cold", "index", "index_warm"}
    table = {}
    for name, (key, n) in per_stage.items():
        row = {cfg: n / s[key] for cfg, s in stages.items() if s.get(key)}
        if stages.get("ray_1", {}).get(key) and local_s(key):
            row["overhead_ray1"] = stages["ray_1"][key] / local_s(key)
        if row:
            table[name] = row
    out["docs_per_s"] = table

    # --- projection: 1 M documents on N workers
    if "ray_1" in stages:
        r1 = stages["ray_1"]
        proj = {}
        for name, (key, n) in per_stage.items():
            if not local_s(key) or name == "sharded_build":  # the sharded build: two stages, measured whole
                continue
            # a worker's cost per document: Ray's time less the stage's fixed cost, and never less
            # than the same work here (on a busy machine the subtraction can undershoot)
            fixed_s = r1["task_stage_fixed_s" if name in task_stages else "stage_fixed_s"]
            per_doc = max(r1[key] - fixed_s, local_s(key)) / n
            proj[name] = {"per_doc_ms_one_worker": per_doc * 1e3,
                          **{f"workers_{N}_h": (fixed_s + 1e6 * per_doc / N) / 3600 for N in (1, 8, 32, 128)}}
        # the single index sorts on the driver; the sharded one does not
        sort_s = sum(v for k, v in index.config["build_phases"].items() if k in ("sort", "layout"))
        proj["index"]["single_index_driver_sort_h"] = sort_s * 1e6 / args.docs / 3600
        out["projection_1M_docs"] = proj

    print("\ndocuments/s per stage:")
    for name, row in table.items():
        cells = ", ".join(f"{k} {v:,.0f}" if not k.startswith("overhead") else f"{k} {v:.2f}x" for k, v in row.items())
        print(f"  {name}: {cells}")
    if "projection_1M_docs" in out:
        print("projection, 1 M documents (hours):")
        for name, row in out["projection_1M_docs"].items():
            print(f"  {name}: " + ", ".join(f"{k} {v:.3g}" for k, v in row.items()))
    out["load_avg_end"] = load_avg()
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=float))
        print(f"\nwritten: {args.json}")


if __name__ == "__main__":
    main()
