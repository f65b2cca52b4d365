"""TRIR at release scale (issue 48, item 4): a synthetic population of N people made by
``anonaudit demo-data --n N``, attacked with the TRI paper's attacker (the default ``--budget
paper``) locally on 2 threads and on a local Ray (Ray Train, 2 workers of 1 thread), beside phrase
search over the same background (``phrase_search_reid``: the same question, no training).

Everything runs through the command line, as a user would: ``anonaudit demo-data`` (records, a
background of 3 public documents for each of the N people and N/2 more, the gold-masked
``labels`` and ``suppressed`` releases), ``anonaudit run SPEC`` (local, and with ``--executor ray
--ray-address local --ray-workers 2``), ``anonaudit attack phrase-search --background``.
``demo-data`` writes no dev release (the paper budget then runs all 15 epochs), so the script adds
``dev.jsonl``, the dev release of :func:`anonaudit.demo.population.development_population` for the same N and
seed (a second, differently worded record of each person, label-masked; checked to share
``demo-data``'s background and records), as TRIR's ``dev`` (``--no-dev``: without it).

Recorded per run: wall time, split into preparation, training and prediction from the run's
provenance; the peak memory of the process tree (psutil, every 0.2 s: the command and all its
descendants, Ray's raylet, GCS and workers included) and of its largest process; epochs run and
chosen; TRIR per release with its 95% Wilson interval; phrase_search_reid per release. ``--seeds 0
1 2`` gives the seed spread (locally); ``--project N`` projects the time of N people from the
measured seconds per training window. Each run has a fresh ANONAUDIT_HOME under ``--work`` (the
embedded models linked from the default home).

    python benchmarks/trir_release.py --n 100 --modes local ray phrase --project 1000 --out r.json
    python benchmarks/trir_release.py --n 40 --seeds 0 1 2 --modes local phrase
    python benchmarks/trir_release.py --quick    # a smoke run: 12 people, 1 epoch, 32-token windows

A run longer than one sitting is cut with the attacker's own checkpoints: ``--stop-after MIN`` kills
each TRIR run (its whole process tree) after the first epoch that ends past MIN minutes, and
``--resume`` (same ``--out``) resumes it from that epoch; its figures then sum the segments.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tab import load_avg, markdown_table  # noqa: E402  (the benchmarks' one helper module)

RELEASES = ("labels", "suppressed")


# ----------------------------------------------------------------------------- measuring a command


def _tree_rss(proc) -> tuple[int, int]:
    """Resident bytes of ``proc`` and all its descendants, and of the largest of them (0 once gone)."""
    import psutil

    sizes = []
    with contextlib.suppress(psutil.NoSuchProcess):
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                sizes.append(p.memory_info().rss)
    return sum(sizes), max(sizes, default=0)


EPOCH_LINE = re.compile(r"TRIR epoch (\d+)/(\d+):")
TRAINING_LINES = ("TRIR training, epoch", "TRIR: training on Ray Train")  # training has begun


class Stopper:
    """Watches a TRIR run: when its training began (its first batch line, or Ray Train's start)
    and, with ``after`` seconds, when to stop it: after the first epoch that ends past ``after``
    (not the last, of ``epochs``), once its checkpoint is written (no file under ``checkpoints``
    changed for 3 s; 60 s at most). An epoch ends at its log line, or on Ray (whose workers print
    none) when a new checkpoint folder appears. A stopped run resumes from it (``--resume``)."""

    def __init__(self, log: Path, after: float | None, checkpoints: Path | None, epochs: int = 15):
        self.log, self.after, self.checkpoints, self.epochs = log, after, checkpoints, epochs
        self.training_at: float | None = None
        self.epochs_at_deadline: int | None = None
        self.epoch_done: tuple[int, float] | None = None  # (epoch, when its end was seen)
        self.before_line = 0.0  # the newest checkpoint file's time before that end was seen
        self.seen: set[str] = set()  # Ray Train's checkpoint folders seen so far

    def _epochs(self, text: str) -> tuple[int, int]:
        """The last epoch ended and the epochs at most: from the log's lines, else from the
        checkpoints Ray Train wrote in this run."""
        found = EPOCH_LINE.findall(text)
        if found:
            return int(found[-1][0]), int(found[-1][1])
        if self.checkpoints and self.checkpoints.exists():
            self.seen |= {f.parent.name for f in self.checkpoints.rglob("state.pt") if f.parent.name.startswith("checkpoint")}
        return len(self.seen), self.epochs

    def _newest(self) -> float:
        files = [f for f in self.checkpoints.rglob("*")] if self.checkpoints and self.checkpoints.exists() else []
        return max((f.stat().st_mtime for f in files if f.exists()), default=0.0)

    def poll(self, elapsed: float) -> bool:
        """Look at the run (``elapsed``: seconds since the start); True when it should stop now."""
        text = self.log.read_text(encoding="utf-8", errors="replace")
        if self.training_at is None and any(line in text for line in TRAINING_LINES):
            self.training_at = elapsed
        epoch, of = self._epochs(text)
        if self.after is None or elapsed < self.after:
            return False
        newest = self._newest()
        if self.epochs_at_deadline is None:
            self.epochs_at_deadline = epoch
        if self.epoch_done is None:
            if epoch > self.epochs_at_deadline and epoch < of:
                self.epoch_done = (epoch, time.time())
            else:  # a checkpoint written after this poll belongs to an epoch whose end comes later
                self.before_line = newest
                return False
        waited = time.time() - self.epoch_done[1]
        return waited >= 60 or (newest > self.before_line and time.time() - newest >= 3)


def measured(cmd: list[str], env: dict[str, str], log: Path, stop_after: float | None = None,
             checkpoints: Path | None = None, epochs: int = 15) -> dict[str, Any]:
    """Run ``cmd`` (its output to ``log``): wall time, exit status, the peaks of its process tree's
    summed resident set and of its largest process, sampled every 0.2 s (not ``ru_maxrss``, which
    on Linux starts at the parent's size at the fork), and the seconds before its training began.
    With ``stop_after`` (s), its whole tree is killed (``kill -9``) after the first epoch that ends
    past it, once the checkpoint in ``checkpoints`` is written (:class:`Stopper`)."""
    import psutil

    peak = [0, 0]
    stopper = Stopper(log, stop_after, checkpoints, epochs)
    with open(log, "w", encoding="utf-8") as out:
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)
        watched = psutil.Process(child.pid)
        done = threading.Event()
        stopped: list[int] = []

        def kill_tree() -> None:
            for p in [*watched.children(recursive=True), watched]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.kill()

        def sample() -> None:
            ticks = 0
            while not done.is_set():
                tree, largest = _tree_rss(watched)
                peak[0], peak[1] = max(peak[0], tree), max(peak[1], largest)
                ticks += 1
                if ticks % 5 == 0 and not stopped and stopper.poll(time.perf_counter() - t0):
                    stopped.append(stopper.epoch_done[0])
                    kill_tree()
                done.wait(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            _, status = os.waitpid(child.pid, 0)
        except BaseException:  # stopped (SIGTERM, Ctrl-C): take the command's whole tree down with it
            kill_tree()
            raise
        finally:
            done.set()
        wall = time.perf_counter() - t0
        sampler.join()
        child.returncode = os.waitstatus_to_exitcode(status)
    stopper.poll(wall)
    before = stopper.training_at
    return {"rc": child.returncode, "wall_s": round(wall, 1), "peak_tree_rss_mb": round(peak[0] / 2**20),
            "max_process_rss_mb": round(peak[1] / 2**20), "before_training_s": None if before is None else round(before, 1),
            "stopped_after_epoch": stopped[0] if stopped else None}


def fresh_home(folder: Path) -> Path:
    """An empty ANONAUDIT_HOME whose ``models`` link to the default home's assembled models."""
    from audit.core.config import home

    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    if (home() / "models").is_dir():
        os.symlink(home() / "models", folder / "models")
    return folder


# ----------------------------------------------------------------------------- the population


def population(work: Path, n: int, seed: int, dev: bool) -> dict[str, Any]:
    """``anonaudit demo-data --n N --seed S`` into ``work/data`` (and ``dev.jsonl``: see the module
    doc); the files and their sizes."""
    data = work / "data"
    if data.exists():
        shutil.rmtree(data)
    t0 = time.perf_counter()
    subprocess.run(["anonaudit", "demo-data", "--out", str(data), "--n", str(n), "--seed", str(seed)],
                   check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    files = {"background": data / "background.jsonl", **{r: data / "releases" / f"{r}.jsonl" for r in RELEASES}}
    if dev:
        files["dev"] = write_dev(data, n, seed)
    lines = {k: sum(1 for _ in open(p, encoding="utf-8")) for k, p in files.items()}
    chars = sum(len(json.loads(line)["text"]) for line in open(files["background"], encoding="utf-8"))
    return {"files": {k: str(p) for k, p in files.items()}, "documents": lines, "background_characters": chars,
            "people_in_background": n + n // 2, "demo_data_seconds": round(seconds, 2)}


def write_dev(data: Path, n: int, seed: int) -> Path:
    """The dev release of the development population of the same N and seed, after checking that
    its background and records are the ones ``demo-data`` wrote."""
    from anonaudit.demo.population import development_population
    from audit.io.loaders import load_corpus, save_jsonl

    dp = development_population(n, seed)
    for name, corpus in (("background", dp.background), ("originals", dp.originals)):
        written = load_corpus(str(data / f"{name}.jsonl"), name=name)
        if written.fingerprint() != corpus.fingerprint():
            raise SystemExit(f"demo-data's {name}.jsonl is not the development population's: no dev release")
    save_jsonl(dp.releases["dev"].corpus, data / "dev.jsonl")
    return data / "dev.jsonl"


# ----------------------------------------------------------------------------- the runs


def trir_spec(pop: dict[str, Any], seed: int, params: dict[str, Any]) -> str:
    """The audit spec (YAML) of a TRIR run on the population's releases."""
    files = pop["files"]
    params = dict(params)
    spec: dict[str, Any] = {"title": "TRIR at release scale", "seed": seed, "background": files["background"],
                            "releases": [{"name": r, "path": files[r]} for r in RELEASES],
                            "attacks": [{"name": "trir", "params": params}]}
    if "dev" in files:
        spec["corpora"] = {"dev": files["dev"]}
        params["dev"] = "corpus:dev"
    import yaml

    return yaml.safe_dump(spec, sort_keys=False)


def run_trir(work: Path, pop: dict[str, Any], mode: str, seed: int, params: dict[str, Any],
             workers: int, stop_after: float | None = None, earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """``anonaudit run`` of the TRIR spec, locally or on a local Ray; its figures. ``stop_after``:
    see :func:`measured`; ``earlier``: this run's stopped segments, which this call resumes (same
    folder and ANONAUDIT_HOME, so the training resumes from its checkpoint)."""
    folder = work / f"{mode}-seed{seed}"
    segments = (earlier or {}).get("segments", [])
    if not segments:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / "audit.yaml").write_text(trir_spec(pop, seed, params), encoding="utf-8")
        fresh_home(folder / "home")
    env = {**os.environ, "ANONAUDIT_HOME": str(folder / "home")}
    cmd = ["anonaudit", "run", "audit.yaml", "--out", "out", "--no-report"]
    if mode == "ray":
        cmd += ["--executor", "ray", "--ray-address", "local", "--ray-workers", str(workers)]
    log = folder / ("run.log" if not segments else f"run-{len(segments) + 1}.log")
    print(f"  {mode}, seed {seed}{f', segment {len(segments) + 1}' if segments else ''}: {' '.join(cmd)}", flush=True)
    m = measured(cmd, env, log, stop_after, folder / "home" / "trir" / "checkpoints", int(params.get("epochs", 15)))
    segments = [*segments, m]
    if m["stopped_after_epoch"] is not None:
        print(f"  stopped after epoch {m['stopped_after_epoch']} ({m['wall_s']} s): resume with --resume", flush=True)
        m["checkpoint_history"] = checkpoint_history(folder / "home" / "trir" / "checkpoints")
        return merge_segments(segments, None)
    if m["rc"] != 0:
        raise SystemExit(f"{mode} run failed (exit {m['rc']}); see {log}")
    return merge_segments(segments, trir_figures(json.loads((folder / "out" / "results.json").read_text())))


def checkpoint_history(root: Path) -> list[dict[str, Any]]:
    """The epochs (seconds, loss, dev accuracy) in the newest checkpoint under ``root``."""
    import torch

    states = sorted(root.rglob("state.pt"), key=lambda f: f.stat().st_mtime)
    history = torch.load(states[-1], map_location="cpu", weights_only=True)["history"] if states else "[]"
    return json.loads(history) if isinstance(history, str) else history


def merge_segments(segments: list[dict[str, Any]], figures: dict[str, Any] | None) -> dict[str, Any]:
    """One run's figures from its segments: wall time summed, peak memory the greatest, the
    training's ``figures`` (the last segment's results: its history holds every epoch); without
    ``figures`` the run is not finished (``stopped``)."""
    out: dict[str, Any] = {"rc": segments[-1]["rc"], "wall_s": round(sum(m["wall_s"] for m in segments), 1),
                           "peak_tree_rss_mb": max(m["peak_tree_rss_mb"] for m in segments),
                           "max_process_rss_mb": max(m["max_process_rss_mb"] for m in segments),
                           "segments": segments}
    if figures is None:
        return {**out, "stopped": True}
    if len(segments) > 1:  # the provenance times only the last segment; the history has every epoch
        figures = {**figures, "resumed_after_epochs": [m["stopped_after_epoch"] for m in segments[:-1]],
                   "last_segment_only": ["preparation_s", "training_s", "prediction_s"]}
    return {**out, **figures}


def run_phrase(work: Path, pop: dict[str, Any], seed: int) -> dict[str, Any]:
    """``anonaudit attack phrase-search --background`` on the same releases; its figures."""
    folder = work / f"phrase-seed{seed}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    files = pop["files"]
    cmd = ["anonaudit", "attack", "phrase-search", "--background", files["background"], "--seed", str(seed),
           "--out", "results.json"]
    for r in RELEASES:
        cmd += ["--release", f"{r}={files[r]}"]
    env = {**os.environ, "ANONAUDIT_HOME": str(fresh_home(folder / "home"))}
    print(f"  phrase search, seed {seed}", flush=True)
    m = measured(cmd, env, folder / "run.log")
    if m["rc"] != 0:
        raise SystemExit(f"phrase search failed (exit {m['rc']}); see {folder / 'run.log'}")
    data = json.loads((folder / "results.json").read_text())
    return {**m, "reid": risks(data, "phrase_search_reid")}


# ----------------------------------------------------------------------------- reading results


def risks(results: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    """``{release: {value, ci, n}}`` of the results called ``name`` (their 95% Wilson interval,
    as the attack computed it)."""
    return {r["release"]: {"value": r["value"], "ci": r.get("ci"), "n": r.get("n")}
            for r in results["results"] if r["name"] == name}


def trir_figures(results: dict[str, Any]) -> dict[str, Any]:
    """TRIR per release, epochs run and chosen, the dev curve and the time split, from a results
    file's results and provenance."""
    stats = results["provenance"]["components"]["attack:trir"]["stats"]
    t = stats["trained_attacker"]
    timings = t.get("timings") or {}
    prep = timings.get("text_preparation_seconds", 0.0) + timings.get("mlm_pretraining_seconds", 0.0)
    history = t.get("history") or []
    predict = {rel: round(sum(v.values()), 1) for rel, v in (stats.get("timings") or {}).items()}
    return {"trir": risks(results, "trir"), "top5": risks(results, "trir.top5"),
            "epochs_run": len(history), "chosen_epoch": t.get("chosen_epoch"),
            "epoch_seconds": [round(h.get("seconds", 0.0), 1) for h in history],
            "dev_accuracy": [h.get("dev_accuracy") for h in history],
            "windows_per_epoch": history[0].get("windows") if history else None,
            "epochs_s": round(sum(h.get("seconds", 0.0) for h in history), 1),
            "preparation_s": round(prep, 1), "training_s": round(t["train_seconds"] - prep, 1),
            "prediction_s": predict, "notes": t.get("notes")}


# ----------------------------------------------------------------------------- summaries


def spread(values: list[float]) -> dict[str, float]:
    """Mean, sample standard deviation, least and greatest of one figure over seeds."""
    if not values:
        raise ValueError("no values")
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": round(statistics.fmean(values), 3), "sd": round(sd, 3), "min": min(values), "max": max(values),
            "seeds": len(values)}


def projection(run: dict[str, Any], n: int, target_n: int) -> dict[str, Any]:
    """The time of ``run`` (a TRIR run on ``n`` people) projected to ``target_n``: every part scales
    with the population (3 background documents per person, each a window or two in every copy,
    one record per person in each release), training at the measured seconds per window (the
    median epoch after the first, which carries the workers' warm-up, when there are several: on
    a shared machine an epoch slowed by another job is an outlier on one side) for the epochs this
    run ran and for the budget's 15. The head's growth with the population is a small part of a
    MiniLM step and is left out."""
    if n <= 0 or target_n <= 0 or not run.get("epoch_seconds"):
        raise ValueError("a run with epochs, on a positive population, is needed")
    ratio = (target_n + target_n // 2) / (n + n // 2)  # people in the background
    epochs = run["epoch_seconds"][1:] or run["epoch_seconds"]
    per_epoch = statistics.median(epochs) * ratio
    prep = run["preparation_s"] * ratio
    predict = sum(run["prediction_s"].values()) * target_n / n
    out = {"n": target_n, "windows_per_epoch": round(run["windows_per_epoch"] * ratio),
           "seconds_per_epoch": round(per_epoch), "preparation_s": round(prep), "prediction_s": round(predict)}
    for e in sorted({run["epochs_run"], 15}):
        out[f"total_s_{e}_epochs"] = round(prep + per_epoch * e + predict)
    return out


def fmt_risk(r: dict[str, Any] | None) -> str:
    if not r:
        return "–"
    ci = r.get("ci") or (None, None)
    return f"{r['value']:.3f} [{ci[0]:.2f}–{ci[1]:.2f}]" if ci[0] is not None else f"{r['value']:.3f}"


def report(runs: dict[str, dict[str, Any]]) -> str:
    """One Markdown table: a row per run (mode, seed)."""
    rows = []
    for label, r in runs.items():
        figures = r.get("trir") or r.get("reid") or {}
        pred = r.get("prediction_s") or {}
        rows.append([label, r["wall_s"], r.get("preparation_s", "–"), r.get("training_s", "–"),
                     round(sum(pred.values()), 1) if pred else "–",
                     f"{r['epochs_run']} ({r['chosen_epoch']})" if "epochs_run" in r else "–",
                     r["peak_tree_rss_mb"], r["max_process_rss_mb"], *[fmt_risk(figures.get(x)) for x in RELEASES]])
    return markdown_table(["run", "wall s", "prep s", "train s", "predict s", "epochs run (chosen)",
                           "peak RSS tree MB", "largest process MB", *RELEASES], rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="people in the release (demo-data --n)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--modes", nargs="+", choices=["local", "ray", "phrase"], default=["local", "ray", "phrase"])
    ap.add_argument("--threads", type=int, default=2, help="local: torch threads")
    ap.add_argument("--workers", type=int, default=2, help="ray: Ray Train workers of one thread each")
    ap.add_argument("--no-dev", action="store_true", help="no dev release (the paper budget runs 15 epochs)")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a TRIR parameter (YAML value)")
    ap.add_argument("--project", type=int, default=None, metavar="N", help="project the training time of N people")
    ap.add_argument("--stop-after", type=float, default=None, metavar="MIN",
                    help="stop each TRIR run after the first epoch that ends past MIN minutes (it is checkpointed)")
    ap.add_argument("--resume", action="store_true",
                    help="go on from --out: resume the stopped TRIR runs from their checkpoints, run the runs not run")
    ap.add_argument("--work", type=Path, default=Path("trir-release"))
    ap.add_argument("--quick", action="store_true", help="a smoke run: 12 people, 1 epoch, 32-token windows")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    args.work = args.work.resolve()
    if args.resume and (args.out is None or not args.out.is_file()):
        ap.error("--resume goes on from the results of --out: give the file an earlier run wrote")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout`: stop the command being measured too
    import yaml

    params: dict[str, Any] = {k: yaml.safe_load(v) for k, v in (p.split("=", 1) for p in args.param)}
    if args.quick:
        args.n = 12
        params = {"epochs": 1, "window": 32, "overlap": 8, **params}
    if args.resume:
        out = json.loads(args.out.read_text())
        out.setdefault("resumed", []).append(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        params = out["params"]
    else:
        out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_before": load_avg(),
               "n": args.n, "commit": _commit(), "params": params, "runs": {}}
    for seed in args.seeds:
        run_seed(out, args, seed, params)
    summarise(out, args)
    save(out, args.out)
    return out


def run_seed(out: dict[str, Any], args: argparse.Namespace, seed: int, params: dict[str, Any]) -> None:
    """The population of ``seed`` and each mode's run on it (``--resume``: the population of the
    earlier run, and only the runs it did not finish), saved after each run."""
    pops = out.setdefault("population", {})
    if not (args.resume and str(seed) in pops):
        pops[str(seed)] = population(args.work, args.n, seed, not args.no_dev)
    pop = pops[str(seed)]
    print(f"seed {seed}: {args.n} people in the release, {pop['people_in_background']} in the background, "
          f"documents {pop['documents']}, background {pop['background_characters']:,} characters", flush=True)
    for mode in args.modes:
        threads = args.threads if mode == "local" else 1
        label = {"phrase": "phrase search", "local": f"TRIR local {threads} threads",
                 "ray": f"TRIR Ray Train {args.workers}x1 thread"}[mode] + f", seed {seed}"
        earlier = out["runs"].get(label)
        if earlier is not None and not earlier.get("stopped"):
            continue  # finished in an earlier call (--resume)
        if mode == "phrase":
            out["runs"][label] = run_phrase(args.work, pop, seed)
        else:
            stop = None if args.stop_after is None else args.stop_after * 60
            out["runs"][label] = run_trir(args.work, pop, mode, seed, {**params, "num_threads": threads},
                                          args.workers, stop, earlier)
            print(json.dumps(out["runs"][label], default=str)[:600], flush=True)
        save(out, args.out)  # after every run: a run cut short keeps what finished


def save(out: dict[str, Any], path: Path | None) -> None:
    if path is not None:
        path.write_text(json.dumps(out, indent=1, default=str))


def summarise(out: dict[str, Any], args: argparse.Namespace) -> None:
    """Print the table, the seed spread and the projection; keep them in ``out``."""
    out["load_after"] = load_avg()
    print(report(out["runs"]))
    for kind, key in (("TRIR local", "trir"), ("phrase search", "reid")):
        per = [r[key] for label, r in out["runs"].items() if label.startswith(kind) and key in r]
        if len(per) > 1:
            out.setdefault("spread", {})[kind] = {rel: spread([p[rel]["value"] for p in per]) for rel in RELEASES}
            print(f"{kind}, spread over {len(per)} seeds: {out['spread'][kind]}")
    if args.project:
        for label, r in out["runs"].items():
            if label.startswith("TRIR") and not r.get("stopped"):
                out.setdefault("projection", {})[label] = projection(r, args.n, args.project)
                print(f"{label}, projected to n = {args.project}: {out['projection'][label]}")
    print(f"load before {out['load_before']}, after {out['load_after']}; commit {out['commit']}")


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
