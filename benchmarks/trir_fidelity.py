"""TRIR's fidelity guard (issues 55 and 70): the default attacker against the reference attacker
on the same data and seeds, with early stopping on a small dev release as users run it.

A speed-up of the attacker must not weaken it: an attacker that stops undertrained reports a
lower TRIR, telling the officer the release is safer than it is. Both attackers are the paper
budget with every default; the **reference** trains every window every epoch
(``window_rotation=1``) for the budget's whole schedule (15 passes: its patience is the schedule,
so a dev plateau never ends it), every layer trained, stepping AdamW's loop over parameters,
and keeps the best dev epoch; the **default** is whatever the
attack's defaults are today (early stopping, and any speed-up made the default). Each seed is one
attacker seed (same data).

The verdict (:func:`verdict`): per seed, the mean TRIR over the releases; the guard fails when
the default's mean over the seeds is lower than the reference's by more than the seeds' spread
(the largest minus the smallest per-seed mean of the reference, at least one document of one
release). The script exits 1 when it fails. ``--configs`` adds known-bad settings
(``rotation``: the window rotation over 3 epochs; ``one-pass``: a single pass) and candidates,
each judged against the reference as the default is.

Data (``--data``):

* ``tab-short``: TAB's public judgments of the ``--people`` (10) people with the shortest ones
  (4.9-6.6 k characters: about 30 windows a person with the masked copies), releases their
  originals, spaCy's entity masking and the manual suppression; dev release: TAB's manual entity
  masking of ``--dev-people`` (10) of them (10-19 documents choose with a warning: a small dev
  release). The CI guard's data (tests/test_trir_fidelity.py);
* ``tab``: the same with the ``--people`` (50) people with the longest ones (the
  long-background case: 42-578 windows a person);
* ``demo``: the development population (``--people`` in the releases, half as many more in the
  background only), releases originals, labels, suppressed; dev release: the label-masked second
  record of ``--dev-people`` of them. Short texts (about 9 windows a person).

    python benchmarks/trir_fidelity.py --data tab-short --people 10 --dev-people 10 --seeds 0 1 2
    python benchmarks/trir_fidelity.py --data tab-short --configs default reference rotation one-pass
    python benchmarks/trir_fidelity.py --data tab --people 50 --dev-people 15 --seeds 0 1 2
    python benchmarks/trir_fidelity.py --data tab --people 50 --dev-people 15 --seeds 0 --configs one-pass --cold
        # the stages of one cold run, one pass (the stage table of benchmarks/README.md)
    python benchmarks/trir_fidelity.py --data tab-short --skip 60 --seeds 0 --configs default combined
        # another slice than the guard's: 10 people with longer judgments (13-14 k characters)
    python benchmarks/trir_fidelity.py --step [--precision fp32]    # one training step, the default's against the candidates'
    python benchmarks/trir_fidelity.py --out R --rules    # stopping rules judged on R's reference curves
    python benchmarks/trir_fidelity.py --quick    # a smoke run (about a minute)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from attackers.trir import TRIRAttack  # noqa: E402
from attackers.trir.attack import BUDGETS  # noqa: E402
from audit.core.data import Corpus, Release, Scenario  # noqa: E402

#: The reference's schedule: the paper budget's passes, none ended by a dev plateau.
LONG = BUDGETS["paper"]["epochs"]
#: Attackers by name: the default, the reference, known-bad settings the guard must catch, candidates.
CONFIGS: dict[str, dict] = {
    "default": {},
    # pinned to the slower methods a speed-up replaces: no rotation, no plateau stop, AdamW's loop
    "reference": {"window_rotation": 1, "patience": LONG, "freeze_layers": 0, "fused_adamw": False},
    # the default until issue 70 (patience 3, nothing frozen, AdamW's loop), pinned: the baseline of the speed-up
    "old-default": {"patience": 3, "freeze_layers": 0, "fused_adamw": False},
    "rotation": {"window_rotation": 3},  # known bad (issue 55): stops at a plateau the reference climbs past
    "one-pass": {"epochs": 1},  # known bad: undertrained
    # candidates (issue 70): a shorter plateau, torch's fused AdamW here (as on Ray Train), both
    # (each pinned to what it was measured with: nothing frozen unless it says so, patience 3 unless it says so)
    "patience2": {"patience": 2, "freeze_layers": 0, "fused_adamw": False},
    "fused": {"patience": 3, "freeze_layers": 0, "fused_adamw": True},
    "fused+patience2": {"patience": 2, "freeze_layers": 0, "fused_adamw": True},
    # the embeddings and 3 of 6 layers frozen every epoch; the TRI paper's patience of 3 passes
    "freeze3": {"freeze_layers": 3, "freeze_epochs": LONG, "patience": 3, "fused_adamw": False},
    "freeze3+fused": {"freeze_layers": 3, "freeze_epochs": LONG, "patience": 3, "fused_adamw": True},
    # a milder one: the embeddings and the 2 lowest layers frozen, fused AdamW
    "freeze2+fused": {"freeze_layers": 2, "freeze_epochs": LONG, "patience": 3, "fused_adamw": True},
    # issue 70's combined candidate: the three above together (bf16 autocast is on by default where
    # the CPU has AVX-512 BF16 or AMX, as on the development machine)
    "combined": {"freeze_layers": 3, "freeze_epochs": LONG, "fused_adamw": True, "patience": 2},
    # a stopping rule (2026-12-08): a dev accuracy that ties the best restarts the patience (3 passes)
    "ties": {"patience": 3, "freeze_layers": 0, "fused_adamw": False, "patience_ties": True},
}


def _dev_subset(dev: Release, people: int) -> Release:
    keep = sorted({d.subject for d in dev.corpus})[:people]
    docs = [d for d in dev.corpus if d.subject in keep]
    return dataclasses.replace(dev, corpus=Corpus(docs, name=dev.name, source=dev.corpus.source))


def scenario(data: str, people: int, dev_people: int, skip: int = 0) -> Scenario:
    """The data of the run (see the module docstring); ``skip``: TAB's people from the ranking's
    ``skip + 1``-th on (another slice than the guard's)."""
    if data in ("tab", "tab-short"):
        from tab import target_scenario

        sc = target_scenario(people, shortest=data == "tab-short", skip=skip)
    else:
        from anonaudit.demo.population import development_population

        pop = development_population(people, seed=0)
        sc = Scenario(originals=pop.originals, background=pop.background, dev=pop.releases["dev"],
                      releases=(Release("originals", pop.originals),
                                *(pop.releases[n] for n in ("labels", "suppressed"))))
    return dataclasses.replace(sc, dev=_dev_subset(sc.dev, dev_people))


def one_run(sc: Scenario, config: str, seed: int, threads: int, extra: dict) -> dict:
    """Train one attacker and score every release; what it chose, what it scored, and where the
    time went (preparation, each pass, prediction)."""
    attack = TRIRAttack(budget="paper", seed=seed, num_threads=threads, device="cpu", use_cache=False,
                        progress=True, **{**extra, **CONFIGS[config]})
    t0 = time.perf_counter()
    attack.fit(sc)
    fit_s = time.perf_counter() - t0
    trir, predict_s = {}, {}
    for r in sc.releases:
        t1 = time.perf_counter()
        trir[r.name] = attack.evaluate(sc, r)[0].value
        predict_s[r.name] = round(time.perf_counter() - t1, 1)
    info = attack.trained_.info
    sel = info["selection"]
    epochs_s = sum(h["seconds"] for h in info["history"])
    return {"config": config, "seed": seed, "fused_adamw": attack.settings()["fused_adamw"],
            "precision": attack.settings()["train_precision"],
            "fit_s": round(fit_s, 1),
            "wall_s": round(time.perf_counter() - t0, 1),
            "preparation_s": (info.get("timings") or {}).get("text_preparation_seconds", 0.0),
            "timings": info.get("timings"), "epochs_s": round(epochs_s, 1),
            "pass_s": [h["seconds"] for h in info["history"]],
            "windows": info["windows_per_epoch"], "predict_s": predict_s,
            "epochs_run": len(info["history"]), "chosen_epoch": info["chosen_epoch"],
            "chosen_passes": sel["chosen_passes"], "rotation_period": sel["rotation_period"],
            "selected_on_dev": sel["selected_on_dev"], "dev_documents": sel["dev_documents"],
            "stopped": sel["stopped"], "max_epochs": sel["max_epochs"],
            "dev_curve": [h.get("dev_accuracy") for h in info["history"]], "fit_check": info["fit_check"]["accuracy"],
            "trir": {k: round(v, 4) for k, v in trir.items()},
            "documents": {r.name: len(r.corpus) for r in sc.releases}}


def verdict(runs: list[dict], config: str = "default") -> dict:
    """``config`` against the reference on the same seeds: the gap of the seed-mean of the
    per-seed mean TRIR over the releases, the seeds' spread (the reference's largest-minus-smallest
    per-seed mean, at least one document of one release in the mean: an erratic candidate does not
    widen its own tolerance), the per-release gaps, and whether it passes (not lower by more than
    the spread)."""
    by = {c: sorted((r for r in runs if r["config"] == c), key=lambda r: r["seed"]) for c in (config, "reference")}
    if not by[config] or not by["reference"]:
        raise ValueError(f"the verdict needs runs of {config!r} and of the reference")
    seeds = [r["seed"] for r in by[config]]
    if seeds != [r["seed"] for r in by["reference"]]:
        raise ValueError(f"{config} and the reference ran different seeds")
    releases = list(by["reference"][0]["trir"])
    per_seed = {c: [statistics.fmean(r["trir"][rel] for rel in releases) for r in rs] for c, rs in by.items()}
    spread = max(per_seed["reference"]) - min(per_seed["reference"])  # the yardstick's noise, not the candidate's
    one_document = 1 / (max(by["reference"][0]["documents"].values()) * len(releases))
    tolerance = max(spread, one_document)
    gap = statistics.fmean(per_seed[config]) - statistics.fmean(per_seed["reference"])
    per_release = {rel: statistics.fmean(r["trir"][rel] for r in by[config])
                   - statistics.fmean(r["trir"][rel] for r in by["reference"]) for rel in releases}
    return {"config": config, "seeds": seeds, "mean": statistics.fmean(per_seed[config]),
            "reference_mean": statistics.fmean(per_seed["reference"]), "gap": gap, "spread": spread,
            "tolerance": tolerance, "per_release_gap": per_release, "ok": gap >= -tolerance - 1e-9}


def table(runs: list[dict], releases: list[str]) -> str:
    """The per-release Markdown table (seed means, each seed in brackets), then each attacker's
    verdict against the reference."""
    configs = [c for c in CONFIGS if any(r["config"] == c for r in runs)]
    lines = ["| attacker | " + " | ".join(releases) + " | mean | epochs run (chosen; passes) | fit s | epochs s |",
             "| --- |" + " ---: |" * (len(releases) + 1) + " --- | --- | --- |"]
    for c in configs:
        rs = sorted((r for r in runs if r["config"] == c), key=lambda r: r["seed"])
        cells = [f"**{statistics.fmean(r['trir'][rel] for r in rs):.3f}** ("
                 + ", ".join(f"{r['trir'][rel]:.2f}" for r in rs) + ")" for rel in releases]
        mean = statistics.fmean(statistics.fmean(r["trir"][rel] for rel in releases) for r in rs)
        epochs = ", ".join(f"{r['epochs_run']} ({r['chosen_epoch']}; {r['chosen_passes']:g})" for r in rs)
        lines.append(f"| {c} | " + " | ".join(cells) + f" | {mean:.3f} | {epochs} | "
                     + ", ".join(f"{r['fit_s']:.0f}" for r in rs) + " | "
                     + ", ".join(f"{r['epochs_s']:.0f}" for r in rs) + " |")
    if "reference" in configs:
        for c in configs:
            if c != "reference":
                v = verdict(runs, c)
                lines.append(f"\n{c} − reference: mean {v['gap'] * 100:+.1f} points (tolerance "
                             f"{v['tolerance'] * 100:.1f}: the seeds' spread); per release "
                             + ", ".join(f"{k} {g * 100:+.1f}" for k, g in v["per_release_gap"].items())
                             + f": {'passes' if v['ok'] else 'FAILS'}")
    return "\n".join(lines)


#: Stopping rules judged on the reference's dev curves (:func:`rules_table`): (name, patience, a tie restarts it).
RULES = (("now: patience 3", 3, False), ("patience 2", 2, False), ("a tie restarts, 3", 3, True),
         ("a tie restarts, 2", 2, True))


def stopping_rule(curve: list[float], patience: int, ties_restart: bool, min_passes: int = 2) -> tuple[int, int]:
    """(passes run, pass kept) of an attacker that reads ``curve`` (one dev accuracy a pass, no
    rotation) and stops as the schedule does (:mod:`attackers.trir.schedule`: nothing kept or
    stopped before ``min_passes``, a tie kept, every dev document named ends it), ``patience``
    passes after the last strict improvement, or after the last tie too with ``ties_restart``."""
    best, kept, since = -1.0, 0, 0
    for p, acc in enumerate(curve, 1):
        if p < min_passes:
            continue
        if acc > best + 1e-12 or (ties_restart and acc >= best):
            since = p
        if acc >= best:
            best, kept = acc, p
        if best >= 1.0 or p - since >= patience:
            return p, kept
    return len(curve), kept


def rules_table(runs: list[dict]) -> str:
    """Each stopping rule of :data:`RULES` on the reference's runs: the default trains the
    reference's path until it stops (rotation off, AdamW's loop), so a rule whose kept pass is the
    reference's keeps its TRIR exactly; another kept pass's TRIR is not known from these runs."""
    refs = sorted((r for r in runs if r["config"] == "reference"), key=lambda r: r["seed"])
    lines = ["| seed | reference kept | " + " | ".join(n for n, _, _ in RULES) + " |",
             "| --- | ---: |" + " --- |" * len(RULES)]
    total = dict.fromkeys((n for n, _, _ in RULES), 0)
    for r in refs:
        cells = []
        for name, patience, ties in RULES:
            ran, kept = stopping_rule(r["dev_curve"], patience, ties)
            total[name] += ran
            cells.append(f"{ran} ({kept}{'' if kept == r['chosen_epoch'] else ', other'})")
        lines.append(f"| {r['seed']} | {r['chosen_epoch']} | " + " | ".join(cells) + " |")
    lines.append("| passes in all | " + str(sum(len(r["dev_curve"]) for r in refs)) + " | "
                 + " | ".join(str(total[n]) for n, _, _ in RULES) + " |")
    return "\n".join(lines)


def step_costs(threads: int, reps: int = 6, precision: str = "auto") -> dict[str, float]:
    """One local training step as the attack takes it (16 windows of 100 tokens, ``threads``
    threads, in ``precision``: ``auto`` is bf16 autocast where the CPU has it natively), the
    default's and the candidates', taken in turns so that the machine's load falls on all alike:
    the median seconds of the forward and backward pass and of the AdamW step (the default: every
    layer, AdamW's loop over parameters; ``freeze3`` and ``freeze2``: the embeddings and the 3 or 2
    lowest layers frozen, torch's fused AdamW), and each candidate's step speed-up."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from attackers.trir.encoder import autocast, native_bf16, quiet_transformers, resolve_base
    from attackers.trir.training_batches import freeze_lower

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if precision == "auto":
        precision = "bf16" if native_bf16("cpu") else "fp32"
    with quiet_transformers():
        model = AutoModelForSequenceClassification.from_pretrained(resolve_base(None), num_labels=50)
    g = torch.Generator().manual_seed(1)
    ids, y = torch.randint(1000, 29000, (16, 100), generator=g), torch.randint(0, 50, (16,), generator=g)
    variants = {"default": (0, torch.optim.AdamW(model.parameters(), lr=1e-5)),
                "freeze3": (3, torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)),
                "freeze2": (2, torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True))}
    times: dict[str, list[float]] = {}
    for rep in range(reps + 1):  # the first round warms up
        for name, (frozen, opt) in variants.items():
            freeze_lower(model, frozen, frozen > 0)
            t0 = time.perf_counter()
            with autocast(precision, "cpu"):
                loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=y).loss
            loss.backward()
            t1 = time.perf_counter()
            opt.step()
            opt.zero_grad(set_to_none=True)
            freeze_lower(model, frozen, False)
            if rep:
                times.setdefault(f"{name}_forward_backward", []).append(t1 - t0)
                times.setdefault(f"{name}_adamw", []).append(time.perf_counter() - t1)
                times.setdefault(f"{name}_step", []).append(time.perf_counter() - t0)
    out: dict = {k: round(statistics.median(v), 4) for k, v in times.items()}
    out["precision"] = precision
    for name in ("freeze3", "freeze2"):
        out[f"{name}_step_speedup"] = round(out["default_step"] / out[f"{name}_step"], 2)
    return out


#: What an ``--out`` file says wrote it.
SCRIPT = "benchmarks/trir_fidelity.py"
#: The options that decide what a run computes (the seeds and configurations only add runs).
SETTINGS = ("data", "people", "dev_people", "skip", "threads", "epochs", "batch_size", "window", "overlap", "cold", "quick",
            "precision")


def run_settings(args: argparse.Namespace) -> dict:
    """The options of ``args`` that decide what each run computes, as an ``--out`` file records them."""
    return {k: getattr(args, k) for k in SETTINGS}


def resumable_runs(path: Path, settings: dict) -> list[dict]:
    """The runs of the ``--out`` file at ``path`` when this script wrote it with ``settings``; a
    ``ValueError`` saying why not otherwise (another file, or other data or settings)."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not a results file of this script ({e}); give another --out") from None
    if not isinstance(saved, dict) or saved.get("script") != SCRIPT or not isinstance(saved.get("runs"), list):
        raise ValueError("not a results file of this script; give another --out")
    differ = {k: (saved.get("settings", {}).get(k), v) for k, v in settings.items()
              if saved.get("settings", {}).get(k) != v}
    if differ:
        raise ValueError("written with other settings, so its runs are not this configuration's ("
                         + ", ".join(f"{k}: {old!r} there, {new!r} now" for k, (old, new) in differ.items())
                         + "); give another --out")
    return saved["runs"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", choices=["tab-short", "tab", "demo"], default="tab-short")
    ap.add_argument("--people", type=int, default=10)
    ap.add_argument("--dev-people", type=int, default=10)
    ap.add_argument("--skip", type=int, default=0,
                    help="TAB: the people after the first SKIP of the ranking (another slice than the guard's)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=["default", "reference"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=None,
                    help="the attack's epochs (default: the budget's 15), e.g. 1 for a run's stages and per-pass cost")
    ap.add_argument("--batch-size", type=int, default=None, help="the attack's batch_size (default: its own, 16)")
    ap.add_argument("--window", type=int, default=None, help="the attack's window in tokens (default: its own)")
    ap.add_argument("--overlap", type=int, default=None, help="the attack's window overlap (default: its own)")
    ap.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto",
                    help="the arithmetic of training and prediction (default: the attack's auto, bf16 where the CPU has it "
                         "natively); fp32 is what a CPU without native bf16 computes, as CI's may be")
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON of every run (written after each run); an existing one is resumed when this script "
                         "wrote it with the same data and settings, refused otherwise")
    ap.add_argument("--cold", action="store_true", help="each run in an empty ANONAUDIT_HOME (spaCy's parses cold)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: the demo, 6 people, one seed, 1 pass")
    ap.add_argument("--step", action="store_true", help="only time one training step (forward and backward, AdamW)")
    ap.add_argument("--rules", action="store_true",
                    help="train nothing: judge the stopping rules on the reference's dev curves in --out")
    args = ap.parse_args(argv)
    if args.rules:
        if not (args.out and args.out.is_file()):
            print("trir_fidelity.py: --rules reads the reference's runs of an --out file; give one", file=sys.stderr)
            return 2
        try:
            print(rules_table(resumable_runs(args.out, run_settings(args))))
        except ValueError as e:
            print(f"trir_fidelity.py: --out {args.out}: {e}", file=sys.stderr)
            return 2
        return 0
    if args.step:
        print(json.dumps(step_costs(args.threads, 2 if args.quick else 6, args.precision)))
        return 0
    if args.quick:
        args.data, args.people, args.dev_people, args.seeds, args.batch_size = "demo", 6, 6, [0], 4
    runs = []
    if args.out and args.out.exists():  # resume: the runs already done are not run again
        try:
            runs = resumable_runs(args.out, run_settings(args))
        except ValueError as e:
            print(f"trir_fidelity.py: --out {args.out}: {e}", file=sys.stderr)
            return 2
    sc = scenario(args.data, args.people, args.dev_people, args.skip)
    extra = {k: v for k, v in (("epochs", args.epochs), ("batch_size", args.batch_size), ("window", args.window),
                               ("overlap", args.overlap)) if v is not None}
    if args.precision != "auto":
        extra.update(train_precision=args.precision, predict_precision=args.precision)
    if args.quick:
        extra.update(epochs=1, window=32, overlap=8)
    print(f"{args.data}: {len({d.subject for d in sc.background})} people in the background, dev release "
          f"{sc.dev.name} of {len(sc.dev.corpus)} documents, releases {', '.join(r.name for r in sc.releases)}",
          flush=True)
    for seed in args.seeds:
        for config in args.configs:
            if any(r["config"] == config and r["seed"] == seed for r in runs):
                continue
            with contextlib.ExitStack() as stack:
                if args.cold:  # an empty parse cache: spaCy's time is in the run's stages
                    from tab import fresh_home

                    stack.enter_context(fresh_home())
                runs.append(one_run(sc, config, seed, args.threads, extra))
            print(json.dumps(runs[-1]), flush=True)
            if args.out:
                args.out.write_text(json.dumps({"script": SCRIPT, "settings": run_settings(args),
                                                "args": {k: str(v) for k, v in vars(args).items()}, "runs": runs},
                                               indent=1))
    runs = [r for r in runs if r["seed"] in args.seeds and r["config"] in args.configs]
    print(table(runs, [r.name for r in sc.releases]))
    ok = "reference" not in args.configs or "default" not in args.configs or verdict(runs)["ok"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
