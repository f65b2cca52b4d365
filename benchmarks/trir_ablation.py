"""TRIR ablation on the synthetic development population (issue 19): what each part of the TRI
paper's attacker adds to the re-identification of masked releases, beside the unsanitized records.

Population: :func:`anonaudit.demo.population.development_population` (``--people`` in the releases, half as
many more in the background only, 3 background documents each). Releases under test: the
originals, spaCy NER masking (``spacy_ner``), gold labels, gold suppression, generalization.
The dev release is a second, differently worded record of each person, label-masked.

Attackers (one seed; all on the embedded MiniLM, which has no MLM head, so ``pretrain`` is a
no-op unless ``--new-mlm-head``):

* ``before``: the default before issue 19 (5 epochs, no augmentation, no curation, no dev);
* ``augment``: + one NER-masked copy of the background (``--budget fast``);
* ``augment+curate``: + curation as in the paper;
* ``augment+dev``: + up to 15 epochs chosen on the dev release (patience 3);
* ``paper``: the default budget (``--budget paper`` with the dev release: a masked copy per
  masking style the releases show, curation, up to 15 epochs on dev), in fp32;
* ``paper+freeze``: the same with the embeddings and the lowest 3 of MiniLM's 6 layers frozen for
  the first 3 epochs (the speed-up the default leaves off until its effect is known);
* ``paper+mlm``: the same after masked-LM pre-training with a new MLM head (``--new-mlm-head``:
  the head's epoch, then the paper's 3 epochs over the background);
* ``paper+bf16``: the paper's attacker trained and predicting under bfloat16 autocast
  (``train_precision=bf16 predict_precision=bf16``; issue 48: the default on a CPU with native
  bf16, such as this one, and on a GPU);
* ``paper+bf16-train``: trained in bf16, predicting in fp32;
* ``paper+int8``: trained in fp32, predicting (the dev release each epoch, the releases) with the
  linear layers dynamically quantized to int8 (``predict_precision=int8``);
* ``augment+all-windows``, ``paper+all-windows``: ``augment`` and ``paper`` training on every
  window every epoch (``window_rotation=1``), as both did before issue 48's rotating window
  budget (the default: each person's windows rotate over as many epochs as the text has
  versions, the background and its masked copies; not below a batch of windows an epoch);

every configuration in fp32 unless it says otherwise. Each trained attacker also predicts the
releases in every precision (``trir_by_prediction``: the same weights, only prediction's
arithmetic changed; the dev-chosen epoch stays the configuration's own);

and phrase search over the background (``phrase_search_reid``), the second attacker.

    python benchmarks/trir_ablation.py --people 30 --threads 2 --out ablation.json
    python benchmarks/trir_ablation.py --people 20 --seeds 0 1 2 --threads 2 \
        --configs paper paper+bf16 paper+bf16-train paper+int8          # issue 48's fidelity ablation
    python benchmarks/trir_ablation.py --quick    # a smoke run: 4 people, before and paper+bf16, 1 epoch, 32-token windows

With several ``--seeds`` (a seed is one population and one attacker seed) the table gives the
mean over seeds, each seed's value, and the spread (largest minus smallest) of each cell.
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

from attackers.phrase_search import PhraseSearchAttack  # noqa: E402
from attackers.trir import TRIRAttack  # noqa: E402
from audit.core.data import Corpus, Release, Scenario  # noqa: E402
from tab import markdown_table  # noqa: E402  (the benchmarks' one helper module, beside this script)

CONFIGS = {
    "before": dict(budget="fast", augment_ner=False, bucket=False, dedup=False, dev=False),
    "augment": dict(budget="fast", dev=False),
    "augment+curate": dict(budget="fast", curate=True, dev=False),
    "augment+dev": dict(budget="fast", epochs=15, patience=3, dev=True),
    "paper": dict(budget="paper", dev=True),
    "paper+freeze": dict(budget="paper", dev=True, freeze_layers=3, freeze_epochs=3),
    "paper+mlm": dict(budget="paper", dev=True, new_mlm_head=True),
    "paper+bf16": dict(budget="paper", dev=True, train_precision="bf16", predict_precision="bf16"),
    "paper+bf16-train": dict(budget="paper", dev=True, train_precision="bf16"),
    "paper+int8": dict(budget="paper", dev=True, predict_precision="int8"),
    "augment+all-windows": dict(budget="fast", dev=False, window_rotation=1),
    "paper+all-windows": dict(budget="paper", dev=True, window_rotation=1),
}
PRECISIONS = ("fp32", "bf16", "int8")


def run_seed(seed: int, people: int, configs: list[str], threads: int, small: dict) -> dict:
    """Every configuration on the population of ``seed`` (and phrase search over its background)."""
    from audit.core.registry import registry
    from anonaudit.demo.population import development_population

    data = development_population(people, seed=seed)
    ner = registry.create("sanitizer", "spacy_ner").sanitize(data.originals, name="spacy_ner")
    # the records as they are: their gold annotations are not replacements (phrase search would skip them)
    plain = Corpus([dataclasses.replace(d, spans=()) for d in data.originals], name="originals")
    releases = (Release("originals", plain), ner, data.releases["labels"], data.releases["suppressed"],
                data.releases["generalized"])
    dev = data.releases["dev"]
    report: dict = {"seed": seed, "people": people, "population": len(set(data.background.subjects)),
                    "background_documents": len(data.background), "threads": threads, "runs": {}}
    for name in configs:
        cfg = {"train_precision": "fp32", "predict_precision": "fp32", **CONFIGS[name]}
        use_dev = cfg.pop("dev")
        cfg.update(small)
        scenario = Scenario(originals=data.originals, background=data.background, releases=releases,
                            dev=dev if use_dev else None)
        attack = TRIRAttack(seed=seed, use_cache=False, progress=False, num_threads=threads, device="cpu", **cfg)
        t0 = time.time()
        attack.fit(scenario)
        info = attack.trained_.info
        row = {"train_seconds": round(time.time() - t0, 1), "epochs": len(info["history"]),
               "timings": info.get("timings"), "pretrained": info.get("pretrained"),
               "chosen_epoch": info["chosen_epoch"], "windows": info["training_windows"],
               "windows_per_epoch": info["windows_per_epoch"],
               "mask_styles": info.get("mask_styles"), "precision": [cfg["train_precision"], cfg["predict_precision"]],
               "dev_accuracy": [h.get("dev_accuracy") for h in info["history"]], "trir": {}, "predict_seconds": 0.0,
               "epoch_seconds": round(sum(h["seconds"] for h in info["history"]) / len(info["history"]), 2)}
        for rel in releases:
            t1 = time.time()
            row["trir"][rel.name] = attack.evaluate(scenario, rel)[0].value
            row["predict_seconds"] += time.time() - t1
        row["predict_seconds"] = round(row["predict_seconds"], 2)
        own = attack.predict_precision
        row["trir_by_prediction"] = {}
        for p in PRECISIONS:  # the same weights, only prediction's arithmetic changed
            attack.predict_precision = p
            row["trir_by_prediction"][p] = {rel.name: attack.evaluate(scenario, rel)[0].value for rel in releases}
        attack.predict_precision = own
        report["runs"][name] = row
        print(f"seed {seed}", name, json.dumps(row), flush=True)
    ps = PhraseSearchAttack(against="background")
    scenario = Scenario(background=data.background, releases=releases)
    report["phrase_search_reid"] = {r.name: ps.evaluate(scenario, r)[0].value for r in releases}
    report["releases"] = [r.name for r in releases]
    print(f"seed {seed}", "phrase_search_reid", json.dumps(report["phrase_search_reid"]), flush=True)
    return report


def cell(values: list[float]) -> str:
    """The mean in bold, each seed's value and the spread (several seeds); the value (one)."""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    mean = sum(values) / len(values)
    return f"**{mean:.2f}** ({', '.join(f'{v:.2f}' for v in values)}; ±{max(values) - min(values):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--people", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="several seeds in one run (overrides --seed)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run (4 people, the before and paper+bf16 attackers, 1 epoch, 32-token windows), "
                         "not a measurement")
    args = ap.parse_args()
    small = {}
    if args.quick:
        args.people, args.configs = 4, ["before", "paper+bf16"]
        small = dict(epochs=1, window=32, overlap=8)
    seeds = args.seeds or [args.seed]
    reports = [run_seed(seed, args.people, args.configs, args.threads, small) for seed in seeds]

    first = reports[0]
    names = first["releases"]
    print(f"\n{args.people} people in the releases, {first['population']} in the background, "
          f"{args.threads} thread(s), seed(s) {', '.join(map(str, seeds))}\n")
    table = []
    for name in args.configs:
        runs = [r["runs"][name] for r in reports]
        table.append([name, *(cell([run["trir"][n] for run in runs]) for n in names),
                      ", ".join(f"{run['epochs']} ({run['chosen_epoch']})" for run in runs),
                      ", ".join(f"{run['train_seconds']:.0f}" for run in runs),
                      ", ".join(f"{run['epoch_seconds']:.1f}" for run in runs),
                      ", ".join(f"{run['predict_seconds']:.1f}" for run in runs)])
    table.append(["phrase search (background)", *(cell([r["phrase_search_reid"][n] for r in reports]) for n in names),
                  "–", "–", "–", "–"])
    print(markdown_table(["attacker", *names, "epochs (chosen)", "train s", "s / epoch (training steps)",
                          "predict s (5 releases)"], table))
    print("\nthe same trained attackers, predicting in each precision (mean over seeds; the configuration's own "
          "precision is its row above)\n")
    rows = []
    for name in args.configs:
        for p in PRECISIONS:
            vals = [[r["runs"][name]["trir_by_prediction"][p][n] for r in reports] for n in names]
            rows.append([f"{name}, predicting in {p}", *(cell(v) for v in vals)])
    print(markdown_table(["attacker", *names], rows))
    if args.out:
        args.out.write_text(json.dumps({"seeds": seeds, "reports": reports}, indent=1))


if __name__ == "__main__":
    main()
