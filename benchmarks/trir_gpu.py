"""TRIR on a GPU (issue 48): ``--device auto`` through the command line, TAB's 127 people with the
paper budget, and the fidelity ablation of the speed-ups on TAB (bf16 and the window rotation,
each on and off, several seeds).

Parts (``--parts``, in this order; each one's figures are written to ``--out`` as soon as it ends,
so a run cut short keeps what finished):

* ``cli``: what a user types. ``anonaudit demo-data --n N`` and ``anonaudit attack trir`` with
  the defaults (``--device auto``, the paper budget, precisions ``auto``), twice, each with a
  fresh ``ANONAUDIT_HOME`` (so the second run trains again): the device and the arithmetic the
  result records, TRIR, seconds, and whether the two trainings gave the same curve (determinism).
* ``warm``: spaCy's parses of every TAB text the other parts need (the background, its masked
  copies, the dev release, the releases) computed by ``--parse-workers`` processes at once into
  the run's parse cache (``ANONAUDIT_HOME/parses``, keyed by content, as the attack keeps them):
  the attack then finds them there, as it would on its second run. Its seconds are the
  preparation's share that a GPU does not speed up.
* ``tab``: the attack as a user starts it (``TRIRAttack()``: paper budget, device and precisions
  ``auto``, the window rotation, a checkpoint each epoch) on TAB's public background of
  ``--people`` people (all 127 by default), the dev release TAB's manual entity masking
  (``Manual_Entity``, only to choose the epoch, as ``tab.target_scenario`` does), every other
  published sanitization and the originals under test: time per stage, the curve, TRIR per release.
* ``ablation``: the same scenario (``--ablation-people``; releases: the originals, ``spaCy_Entity``,
  ``Manual_Supression``) with each speed-up on and off, for each of ``--seeds``: ``default``
  (bf16 where native, the rotation), ``fp32`` (the rotation, fp32), ``all-windows`` (bf16, every
  window every epoch), ``fp32-all-windows`` (neither: the attacker before issue 48). Each trained
  attacker also predicts the releases in fp32 and in bf16 (the same weights: prediction's
  arithmetic alone). The trainings run as ``--parallel`` processes at once (one GPU can hold many
  MiniLM trainings; their seconds are then shared, so only the ``tab`` part's are timings).

    python benchmarks/trir_gpu.py --parts warm --people 127 --ablation-people 20     # spaCy, 15 processes: 74 s
    python benchmarks/trir_gpu.py --parts cli tab ablation --people 127 --ablation-people 20 \
        --parallel 12 --out gpu.json        # one H100: ~6.5 min (benchmarks/README.md, "GPU (one H100)")
    python benchmarks/trir_gpu.py --quick --out quick.json       # a smoke run of every part on any machine
    python benchmarks/trir_gpu.py --one --config fp32 --seed 0 --ablation-people 20 --row row.json  # one training

By default ``--ablation-people 20 127`` (the 127-person grid was not measured: the session's
device time ran out).

``--data`` is TAB's folder (default ``../shared/data/tab`` beside the checkout). ``ANONAUDIT_HOME``:
``--home`` (default a fresh temporary folder; the ``cli`` part makes its own inside it). On a
machine without a GPU everything runs on the CPU (``auto``), so ``--quick`` checks the script here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attackers.trir import TRIRAttack  # noqa: E402
from audit.core.data import Corpus, Release, Scenario  # noqa: E402

from tab import TAB, cut_texts  # noqa: E402  (the benchmarks' one helper module, beside this script)

DEV = ("Manual_Entity", "TAB_test_Manual_Entity.json")
ABLATION_RELEASES = ("spaCy_Entity", "Manual_Supression")
#: The speed-ups, each on and off: the attack's parameters of each configuration.
CONFIGS = {
    "default": dict(train_precision="auto", predict_precision="auto"),
    "fp32": dict(train_precision="fp32", predict_precision="fp32"),
    "all-windows": dict(train_precision="auto", predict_precision="auto", window_rotation=1),
    "fp32-all-windows": dict(train_precision="fp32", predict_precision="fp32", window_rotation=1),
}
#: ``--quick``: a smoke run of every part's code path (one pass of 32-token windows, no masked copies
#: and no masked-LM pre-training, so one epoch is the pass; the curation kept: it shortens the texts
#: to predict), not a measurement.
QUICK = dict(epochs=1, window=32, overlap=8, augment_ner=False, pretrain=False)


def device_info() -> dict:
    import torch

    info = {"torch": torch.__version__, "cuda": torch.cuda.is_available(), "cpus": os.cpu_count()}
    if info["cuda"]:
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


# --------------------------------------------------------------------------- the TAB scenario


def tab_scenario(data: Path, people: int, releases: tuple[str, ...] | None) -> Scenario:
    """TAB's public background of the first ``people`` test people (sorted ids, as
    ``trir_tab.py --people``), their originals, the dev release ``Manual_Entity`` (their manual
    entity masking), and the releases ``releases`` (``None``: every published sanitization but the
    dev release's), with the originals first."""
    from audit.io.loaders import load_corpus

    from tab import published

    originals = load_corpus(data / "bks" / "TAB_test_BK=Original.json", name="originals")
    ids = sorted(originals.ids)[:people]
    keep = set(ids)
    bg = load_corpus(data / "bks" / "TAB_test_BK=Public.json", name="public")
    background = Corpus([d for d in bg if d.id in keep], name="public")
    mine = Corpus([originals[i] for i in ids], name="Original")
    if releases is None:
        files = sorted((data / "anonymizations").glob("TAB_test_*.json"))
        named = [(f.stem.removeprefix("TAB_test_"), f.name) for f in files]
        named = [(n, f) for n, f in named if n != DEV[0]]
    else:
        named = [(n, f"TAB_test_{n}.json") for n in releases]
    rels = (Release("Original", mine), *(published(n, f, originals, ids, data) for n, f in named))
    return Scenario(originals=mine, background=background, releases=rels,
                    dev=published(*DEV, originals, ids, data))


# --------------------------------------------------------------------------- cli


def run_cli(work: Path, n: int, quick: bool, timeout: float | None) -> dict:
    """``anonaudit demo-data`` and ``anonaudit attack trir`` (defaults), twice, each cold."""
    exe = [sys.executable, "-c", "from anonaudit.cli import main; main()"] if os.environ.get("TRIR_GPU_NO_SCRIPT") \
        else ["anonaudit"]
    demo = work / "demo"
    subprocess.run([*exe, "demo-data", "--out", str(demo), "--n", str(n)], check=True, timeout=timeout,
                   stdout=subprocess.DEVNULL)
    out: dict = {"people": n, "runs": []}
    for k in range(2):
        home = work / f"home{k}"
        env = {**os.environ, "ANONAUDIT_HOME": str(home)}
        cmd = [*exe, "attack", "trir", "--background", str(demo / "background.jsonl"),
               "--release", str(demo / "releases" / "labels.jsonl"),
               "--release", str(demo / "releases" / "suppressed.jsonl"), "--out", str(work / f"results{k}.json")]
        if quick:
            cmd += ["--param", "epochs=2"]
        print("$", " ".join(cmd[len(exe):]), flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run([*exe, *cmd[len(exe):]], env=env, timeout=timeout, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        print(proc.stdout[-2000:], proc.stderr[-3000:], sep="\n", flush=True)
        run = {"exit": proc.returncode, "wall_s": round(wall, 1)}
        if proc.returncode == 0:
            res = json.loads((work / f"results{k}.json").read_text())
            for r in res["results"]:
                if r["name"] != "trir":
                    continue
                d = r["details"]
                run.setdefault("trir", {})[r["release"]] = r["value"]
                run.update(device=d.get("device"), precision=d.get("precision"), budget=d.get("budget"),
                           epochs=d.get("epochs"), chosen_epoch=d.get("chosen_epoch"),
                           curve=[c.get("loss") for c in d.get("curve", [])],
                           fit_check=d.get("fit_check_accuracy"), attacker=d.get("attacker"))
        out["runs"].append(run)
        print(f"cli run {k}: " + json.dumps({x: v for x, v in run.items() if x != "attacker"}), flush=True)
    a, b = (out["runs"] + [{}, {}])[:2]
    out["same_curve"] = bool(a.get("curve")) and a.get("curve") == b.get("curve")
    out["same_trir"] = bool(a.get("trir")) and a.get("trir") == b.get("trir")
    return out


# --------------------------------------------------------------------------- warm: spaCy in parallel


def _parse_chunk(texts: list[str]) -> list[tuple[str, str]]:
    """(key, parse as JSON) of each text: one spaCy pipeline per worker process."""
    from attackers.trir.parse_settings import DISABLED_PIPES, Parse
    from audit.models.parses import text_key as _key
    from audit.models.nlp import Spacy

    nlp = Spacy(disable=DISABLED_PIPES)
    stop = nlp.nlp.Defaults.stop_words
    return [(_key(t), Parse.of_doc(doc, stop).to_json()) for t, doc in zip(texts, nlp.pipe(texts))]


def _parse_all(cache, texts: list[str], workers: int) -> int:
    """Parse the ``texts`` that ``cache`` lacks with ``workers`` processes; store them there."""
    import multiprocessing as mp

    from attackers.trir.parse_settings import Parse
    from audit.models.parses import text_key as _key

    keys = dict.fromkeys(_key(t) for t in texts)
    known = cache._lookup(list(keys))
    todo = list({_key(t): t for t in texts if _key(t) not in known}.values())
    if not todo:
        return 0
    todo.sort(key=len, reverse=True)  # longest first, dealt round-robin: even chunks, 4 per worker (stored as they come)
    k = min(len(todo), 4 * workers)
    chunks = [todo[i::k] for i in range(k)]
    with mp.get_context("spawn").Pool(min(workers, k)) as pool:
        for rows in pool.imap_unordered(_parse_chunk, chunks):
            cache._store({k: Parse.from_json(p) for k, p in rows})
    return len(todo)


def warm(scenarios: list[Scenario], workers: int) -> dict:
    """Every text the attack will parse for ``scenarios`` (paper budget), parsed in parallel into
    the parse cache: first the background, the dev release and the releases, then the masked
    copies (made from the background's parses, as the attack makes them)."""
    from attackers.trir.parse_settings import DISABLED_PIPES, ParseCache
    from attackers.trir.texts import masked_from_parses
    from audit.models.nlp import Spacy

    t0 = time.perf_counter()
    cache = ParseCache(Spacy(disable=DISABLED_PIPES))
    first: list[str] = []
    for sc in scenarios:
        first += [d.text for d in sc.background] + [d.text for d in sc.dev.corpus]
        first += [d.text for r in sc.releases for d in r.corpus]
    n1 = _parse_all(cache, first, workers)
    copies: list[str] = []
    for sc in scenarios:
        attack = TRIRAttack(budget="paper")
        styles = list(attack._choose_mask_styles(sc, sc.dev))
        texts = [d.text for d in sc.background]
        copies += [t for copy in masked_from_parses(texts, cache.parse(texts), styles) for t in copy]
    n2 = _parse_all(cache, copies, workers)
    out = {"workers": workers, "texts": len(set(first)) + len(set(copies)), "parsed": n1 + n2,
           "characters": sum(len(t) for t in set(first) | set(copies)),
           "seconds": round(time.perf_counter() - t0, 1), "identity": cache.identity}
    print("warm: " + json.dumps(out), flush=True)
    return out


# --------------------------------------------------------------------------- one training


def train_and_predict(scenario: Scenario, small: dict, seed: int = 0, **params) -> dict:
    """Fit ``TRIRAttack(**params)`` on ``scenario`` and predict every release: the times, the
    curve, TRIR and top-5 per release, and which documents it named (for paired comparisons)."""
    import torch

    attack = TRIRAttack(seed=seed, **small, **params)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    attack.fit(scenario)
    fit_s = time.perf_counter() - t0
    info = attack.trained_.info
    row: dict = {"seed": seed, "params": {k: v for k, v in params.items()}, "device": info.get("device"),
                 "precision": [info["settings"]["train_precision"], attack.prediction_precision(attack.torch_device())],
                 "window_rotation": info["settings"]["window_rotation"], "training_windows": info["training_windows"],
                 "windows_per_epoch": info["windows_per_epoch"], "epochs_run": len(info["history"]),
                 "chosen_epoch": info["chosen_epoch"], "max_epochs": info["max_epochs"],
                 "fit_check": info["fit_check"]["accuracy"], "fit_s": round(fit_s, 1),
                 "preparation_s": (info.get("timings") or {}).get("text_preparation_seconds"),
                 "epochs_s": round(sum(h["seconds"] for h in info["history"]), 1),
                 "curve": [[h["epoch"], h["loss"], h.get("dev_accuracy"), h["seconds"]] for h in info["history"]],
                 "trir": {}, "top5": {}, "correct": {}, "predict_s": {}}
    for rel in scenario.releases:
        t1 = time.perf_counter()
        head, top5 = attack.evaluate(scenario, rel)
        row["predict_s"][rel.name] = round(time.perf_counter() - t1, 2)
        row["trir"][rel.name], row["top5"][rel.name] = round(head.value, 4), round(top5.value, 4)
        row["correct"][rel.name] = "".join("1" if d.success else "0" for d in head.documents if d.success is not None)
    row["parses"] = dict(attack._parses.stats) if attack._parses is not None else None  # found / parsed
    own = attack.predict_precision
    row["trir_by_prediction"] = {}
    for p in ("fp32", "bf16"):  # the same weights, only prediction's arithmetic changed
        attack.predict_precision = p
        row["trir_by_prediction"][p] = {r.name: round(attack.evaluate(scenario, r)[0].value, 4)
                                        for r in scenario.releases}
    attack.predict_precision = own
    if torch.cuda.is_available():
        row["gpu_peak_mb"] = round(torch.cuda.max_memory_allocated() / 2**20)
    return row


def run_tab(data: Path, people: int, small: dict, releases: tuple[str, ...] | None,
            max_chars: int | None = None) -> dict:
    scenario = tab_scenario(data, people, releases)
    scenario = dataclasses.replace(scenario, background=cut_texts(scenario.background, max_chars))
    chars = sum(len(d.text) for d in scenario.background)
    print(f"tab: {people} people, background {chars:,} characters, dev {scenario.dev.name}, "
          f"{len(scenario.releases)} releases", flush=True)
    row = train_and_predict(scenario, small, progress=True)
    row.update(people=people, characters=chars, dev=scenario.dev.name)
    row["wall_s"] = round(row["fit_s"] + sum(row["predict_s"].values()), 1)
    print("tab: " + json.dumps({k: v for k, v in row.items() if k not in ("correct", "curve")}), flush=True)
    return row


def run_one(args) -> None:
    """One training of the ablation (a worker process): its row to ``--row``."""
    scenario = tab_scenario(args.data, args.ablation_people[0], ABLATION_RELEASES)
    row = train_and_predict(scenario, QUICK if args.quick else {}, seed=args.seed, progress=False,
                            use_cache=False, **CONFIGS[args.config])
    row["config"] = args.config
    args.row.write_text(json.dumps(row))


def run_ablation(args, people: int, work: Path, deadline: float) -> dict:
    """Every configuration and seed on the first ``people`` people, each training a process of
    its own, ``--parallel`` at a time."""
    jobs = [(c, s) for s in args.seeds for c in args.configs]
    pending, running, rows = list(jobs), [], {}
    t0 = time.perf_counter()
    while pending or running:
        while pending and len(running) < args.parallel:
            c, s = pending.pop(0)
            out = work / f"row-{people}-{c}-{s}.json"
            cmd = [sys.executable, __file__, "--one", "--config", c, "--seed", str(s), "--row", str(out),
                   "--data", str(args.data), "--ablation-people", str(people)]
            log = open(work / f"row-{people}-{c}-{s}.log", "w")
            # the trainings share the CPU cores (their torch threads split them)
            env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // args.parallel))}
            running.append((c, s, out, subprocess.Popen(cmd + (["--quick"] if args.quick else []), env=env,
                                                        stdout=log, stderr=subprocess.STDOUT), log))
        time.sleep(1)
        for job in list(running):
            c, s, out, proc, log = job
            if proc.poll() is None and time.time() < deadline:
                continue
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            log.close()
            running.remove(job)
            if out.exists():
                rows[f"{c}/{s}"] = json.loads(out.read_text())
                r = rows[f"{c}/{s}"]
                print(f"ablation {people} people, {c} seed {s}: TRIR {r['trir']}, by prediction {r['trir_by_prediction']}, epochs "
                      f"{r['epochs_run']} ({r['chosen_epoch']}), fit {r['fit_s']} s", flush=True)
            else:
                tail = (work / f"row-{people}-{c}-{s}.log").read_text()[-1500:]
                print(f"ablation {people} people, {c} seed {s}: FAILED (exit {proc.returncode})\n{tail}", flush=True)
    return {"people": people, "seeds": args.seeds, "configs": args.configs,
            "parallel": args.parallel, "seconds": round(time.perf_counter() - t0, 1), "rows": rows}


def ablation_table(ab: dict) -> str:
    """Mean over seeds (each seed's value) per configuration and release, and the documents that
    differ from the ``fp32-all-windows`` attacker of the same seed."""
    rows = ab["rows"]
    rels = list(next(iter(rows.values()))["trir"]) if rows else []
    lines = ["| attacker | " + " | ".join(rels) + " | epochs run (chosen) | documents differing from "
             "fp32-all-windows, same seed |", "| --- |" + " ---: |" * len(rels) + " --- | --- |"]
    for c in ab["configs"]:
        seeds = [s for s in ab["seeds"] if f"{c}/{s}" in rows]
        if not seeds:
            continue
        cells = []
        for rel in rels:
            vals = [rows[f"{c}/{s}"]["trir"][rel] for s in seeds]
            cells.append(f"**{sum(vals) / len(vals):.3f}** ({', '.join(f'{v:.3f}' for v in vals)})")
        ep = ", ".join(f"{rows[f'{c}/{s}']['epochs_run']} ({rows[f'{c}/{s}']['chosen_epoch']})" for s in seeds)
        diff = []
        for s in seeds:
            base = rows.get(f"fp32-all-windows/{s}")
            if base is None:
                continue
            n = sum(a != b for rel in rels for a, b in zip(rows[f"{c}/{s}"]["correct"][rel], base["correct"][rel]))
            diff.append(str(n))
        lines.append(f"| {c} | " + " | ".join(cells) + f" | {ep} | {', '.join(diff)} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", nargs="+", choices=["cli", "warm", "tab", "ablation"],
                    default=["cli", "warm", "tab", "ablation"])
    ap.add_argument("--data", type=Path, default=TAB)
    ap.add_argument("--people", type=int, default=127, help="tab: the first N test people (127: all)")
    ap.add_argument("--ablation-people", type=int, nargs="+", default=[20, 127],
                    help="ablation: the first N test people, for each N in turn")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--parallel", type=int, default=6, help="ablation: trainings at once")
    ap.add_argument("--parse-workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--cli-people", type=int, default=20)
    ap.add_argument("--budget-s", type=float, default=None,
                    help="stop starting parts, and kill the ablation's trainings, this many seconds after the start")
    ap.add_argument("--home", type=Path, default=None, help="ANONAUDIT_HOME (default: a fresh temporary folder)")
    ap.add_argument("--quick", action="store_true", help="3 TAB people, 1 pass of 32-token windows (QUICK), 1 seed, "
                    "2 configurations, 12 demo people: a smoke run, not a measurement")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--max-chars", type=int, default=None,
                    help="tab: cut each background text to its first N characters (a smoke size)")
    # one training of the ablation, in a process of its own (used by the ablation part)
    ap.add_argument("--one", action="store_true", help="one training of the ablation (--config, --seed, "
                    "the first of --ablation-people), its row to --row")
    ap.add_argument("--config", choices=list(CONFIGS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--row", type=Path)
    args = ap.parse_args(argv)
    if args.one:
        run_one(args)
        return
    if args.quick:
        args.people, args.ablation_people, args.cli_people = 3, [3], 12
        args.seeds, args.configs = args.seeds[:1], ["default", "fp32-all-windows"]
        args.parse_workers = min(args.parse_workers, 2)
    start = time.time()
    deadline = start + (args.budget_s or 1e9)
    small = QUICK if args.quick else {}
    tab_releases = ABLATION_RELEASES if args.quick else None  # quick: fewer texts to parse
    work = Path(tempfile.mkdtemp(prefix="trir-gpu-"))
    home = args.home or work / "home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["ANONAUDIT_HOME"] = str(home)
    results: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": device_info(),
                     "args": {k: str(v) for k, v in vars(args).items()}}
    print("machine: " + json.dumps(results["machine"]), flush=True)

    def save() -> None:
        if args.out:
            args.out.write_text(json.dumps(results, indent=1))

    for part in args.parts:
        if time.time() > deadline:
            print(f"{part}: skipped (past --budget-s)", flush=True)
            results.setdefault("skipped", []).append(part)
            continue
        t0 = time.perf_counter()
        try:
            if part == "cli":
                results["cli"] = run_cli(work / "cli", args.cli_people, args.quick,
                                         None if args.budget_s is None else max(60.0, deadline - time.time()))
            elif part == "warm":
                scenarios = [tab_scenario(args.data, args.people, tab_releases)]
                if "ablation" in args.parts:
                    scenarios += [tab_scenario(args.data, n, ABLATION_RELEASES) for n in args.ablation_people
                                  if n > args.people]
                results["warm"] = warm(scenarios, args.parse_workers)
            elif part == "tab":
                results["tab"] = run_tab(args.data, args.people, small, tab_releases, args.max_chars)
            elif part == "ablation":
                for n in args.ablation_people:
                    if time.time() > deadline:
                        break
                    ab = results.setdefault("ablation", {})[str(n)] = run_ablation(args, n, work, deadline)
                    print(ablation_table(ab), flush=True)
                    save()
        except Exception as exc:  # a benchmark: record the failure, go on with the next part
            import traceback

            traceback.print_exc()
            results.setdefault("failed", {})[part] = f"{type(exc).__name__}: {exc}"
        results.setdefault("part_seconds", {})[part] = round(time.perf_counter() - t0, 1)
        save()
    results["seconds"] = round(time.time() - start, 1)
    save()
    print(json.dumps({k: results.get(k) for k in ("part_seconds", "failed", "skipped", "seconds")}), flush=True)
    if results.get("failed"):  # recorded and the other parts run, but the run fails
        raise SystemExit(f"failed: {', '.join(results['failed'])}")


if __name__ == "__main__":
    main()
