"""TRIR's fidelity guard (issue 55): the default attacker against the rotation-off paper attacker
on the same data, with early stopping on a small dev release as users run it.

A speed-up of the attacker must not weaken it: an attacker that stops undertrained reports a
lower TRIR, telling the officer the release is safer than it is. Both attackers are the paper
budget with every default; the reference trains on every window every epoch
(``window_rotation=1``, the paper's attacker), the default rotates each person's windows over
epochs. Each seed is one attacker seed (same data). The guard: the 3-seed mean TRIR of the
default is within ``--tolerance`` points (3) of the reference's on every release; the script
exits 1 when it is not.

Data (``--data``):

* ``tab``: TAB's public judgments of the ``--people`` (50) people with the longest ones (the
  long-background case: 42-578 windows a person), releases their originals, spaCy's entity
  masking and the manual suppression; dev release: TAB's manual entity masking of the first
  ``--dev-people`` (15) of them (by id), the dev release's size that ended issue 55's training
  early;
* ``demo``: the development population (``--people`` in the releases, half as many more in the
  background only), releases originals, labels, suppressed; dev release: the label-masked second
  record of ``--dev-people`` of them. Its texts are short (about 9 windows a person), under the
  one-batch floor of the rotation at the default batch of 16, so ``--batch-size 4`` makes the
  default rotate there too.

    python benchmarks/trir_fidelity.py --data tab --people 50 --dev-people 15 --seeds 0 1 2
    python benchmarks/trir_fidelity.py --data demo --people 12 --dev-people 12 --seeds 0 1 2 --batch-size 4 \
        --window 64 --overlap 16    # the demo guard at a test's size
    python benchmarks/trir_fidelity.py --quick    # a smoke run (about a minute)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from attackers.trir import TRIRAttack  # noqa: E402
from audit.core.data import Corpus, Release, Scenario  # noqa: E402

CONFIGS = {"default": {}, "reference": {"window_rotation": 1}}


def _dev_subset(dev: Release, people: int) -> Release:
    keep = sorted({d.subject for d in dev.corpus})[:people]
    docs = [d for d in dev.corpus if d.subject in keep]
    return dataclasses.replace(dev, corpus=Corpus(docs, name=dev.name, source=dev.corpus.source))


def scenario(data: str, people: int, dev_people: int) -> Scenario:
    """The data of the run (see the module docstring)."""
    if data == "tab":
        from trir_scale import target_scenario

        sc = target_scenario(people)
    else:
        from anonaudit.demo.population import development_population

        pop = development_population(people, seed=0)
        sc = Scenario(originals=pop.originals, background=pop.background, dev=pop.releases["dev"],
                      releases=(Release("originals", pop.originals),
                                *(pop.releases[n] for n in ("labels", "suppressed"))))
    return dataclasses.replace(sc, dev=_dev_subset(sc.dev, dev_people))


def one_run(sc: Scenario, config: str, seed: int, threads: int, extra: dict) -> dict:
    """Train one attacker and score every release; what it chose and what it scored."""
    attack = TRIRAttack(budget="paper", seed=seed, num_threads=threads, device="cpu", use_cache=False,
                        progress=True, **CONFIGS[config], **extra)
    t0 = time.perf_counter()
    attack.fit(sc)
    fit_s = time.perf_counter() - t0
    trir = {r.name: attack.evaluate(sc, r)[0].value for r in sc.releases}
    info = attack.trained_.info
    sel = info["selection"]
    return {"config": config, "seed": seed, "fit_s": round(fit_s, 1), "wall_s": round(time.perf_counter() - t0, 1),
            "epochs_run": len(info["history"]), "chosen_epoch": info["chosen_epoch"],
            "chosen_passes": sel["chosen_passes"], "rotation_period": sel["rotation_period"],
            "dev_curve": [h.get("dev_accuracy") for h in info["history"]], "fit_check": info["fit_check"]["accuracy"],
            "trir": {k: round(v, 4) for k, v in trir.items()}}


def table(runs: list[dict], releases: list[str], tolerance: float) -> tuple[str, bool]:
    """The per-release Markdown table (3-seed means, each seed in brackets) and the guard's verdict."""
    by = {c: [r for r in runs if r["config"] == c] for c in CONFIGS}
    mean = {c: {rel: sum(r["trir"][rel] for r in rs) / len(rs) for rel in releases} for c, rs in by.items() if rs}
    lines = ["| attacker | " + " | ".join(releases) + " | epochs run (chosen; passes) | fit s |",
             "| --- |" + " ---: |" * len(releases) + " --- | --- |"]
    for c, rs in by.items():
        if not rs:
            continue
        cells = [f"**{mean[c][rel]:.3f}** (" + ", ".join(f"{r['trir'][rel]:.2f}" for r in rs) + ")" for rel in releases]
        epochs = ", ".join(f"{r['epochs_run']} ({r['chosen_epoch']}; {r['chosen_passes']:g})" for r in rs)
        lines.append(f"| {c} | " + " | ".join(cells) + f" | {epochs} | " + ", ".join(f"{r['fit_s']:.0f}" for r in rs)
                     + " |")
    ok = True
    if len(mean) == 2:
        gaps = {rel: mean["default"][rel] - mean["reference"][rel] for rel in releases}
        ok = all(abs(g) * 100 <= tolerance for g in gaps.values())
        lines.append("| default − reference (points) | " + " | ".join(f"{g * 100:+.1f}" for g in gaps.values())
                     + " | | |")
    return "\n".join(lines), ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", choices=["tab", "demo"], default="tab")
    ap.add_argument("--people", type=int, default=50)
    ap.add_argument("--dev-people", type=int, default=15)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=None, help="the attack's batch_size (default: its own, 16)")
    ap.add_argument("--window", type=int, default=None, help="the attack's window in tokens (default: its own)")
    ap.add_argument("--overlap", type=int, default=None, help="the attack's window overlap (default: its own)")
    ap.add_argument("--tolerance", type=float, default=3.0, help="points the default may differ from the reference")
    ap.add_argument("--out", type=Path, default=None, help="JSON of every run (written after each run)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: the demo, 6 people, one seed, 1 pass")
    args = ap.parse_args(argv)
    if args.quick:
        args.data, args.people, args.dev_people, args.seeds, args.batch_size = "demo", 6, 6, [0], 4
    sc = scenario(args.data, args.people, args.dev_people)
    extra = {k: v for k, v in (("batch_size", args.batch_size), ("window", args.window), ("overlap", args.overlap))
             if v is not None}
    if args.quick:
        extra.update(epochs=1, window=32, overlap=8)
    print(f"{args.data}: {len({d.subject for d in sc.background})} people in the background, dev release "
          f"{sc.dev.name} of {len(sc.dev.corpus)} documents, releases {', '.join(r.name for r in sc.releases)}",
          flush=True)
    runs = []
    for seed in args.seeds:
        for config in args.configs:
            runs.append(one_run(sc, config, seed, args.threads, extra))
            print(json.dumps(runs[-1]), flush=True)
            if args.out:
                args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs},
                                               indent=1))
    text, ok = table(runs, [r.name for r in sc.releases], args.tolerance)
    print(text)
    print(f"guard: the default within {args.tolerance:g} points of the reference on every release: "
          f"{'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
