"""TRIR ablation on the synthetic development population (issue 19): what each part of the TRI
paper's attacker adds to the re-identification of masked releases, beside the unsanitized records.

Population: :func:`audit.demo.data.development_population` (``--people`` in the releases, half as
many more in the background only, 3 background documents each). Releases under test: the
originals, spaCy NER masking (``spacy_ner``), gold labels, gold suppression, generalization.
The dev release is a second, differently worded record of each person, label-masked.

Attackers (one seed; all on the embedded MiniLM, which has no MLM head, so ``pretrain`` is a
no-op unless ``--new-mlm-head``):

* ``before``: the default before issue 19 (5 epochs, no augmentation, no curation, no dev);
* ``augment``: + one NER-masked copy of the background (``--budget fast``);
* ``augment+curate``: + curation as in the paper;
* ``augment+dev``: + up to 15 epochs chosen on the dev release (patience 3);
* ``paper``: the new default (``--budget paper`` with the dev release: a masked copy per masking
  style the releases show, curation, up to 15 epochs on dev);
* ``paper+freeze``: the same with the embeddings and the lowest 3 of MiniLM's 6 layers frozen for
  the first 3 epochs (the speed-up the default leaves off until its effect is known);
* ``paper+mlm``: the same after masked-LM pre-training with a new MLM head (``--new-mlm-head``:
  the head's epoch, then the paper's 3 epochs over the background);

and phrase search over the background (``phrase_search_reid``), the second attacker.

    python benchmarks/trir_ablation.py --people 30 --threads 2 --out ablation.json
    python benchmarks/trir_ablation.py --quick    # a smoke run: 4 people, before and augment, 1 epoch, 32-token windows
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
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--people", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run (4 people, the before and augment attackers, 1 epoch, 32-token windows), "
                         "not a measurement")
    args = ap.parse_args()
    small = {}
    if args.quick:
        args.people, args.configs = 4, ["before", "augment"]
        small = dict(epochs=1, window=32, overlap=8)

    from audit.core.registry import registry
    from audit.demo.data import development_population

    data = development_population(args.people, seed=args.seed)
    ner = registry.create("sanitizer", "spacy_ner").sanitize(data.originals, name="spacy_ner")
    # the records as they are: their gold annotations are not replacements (phrase search would skip them)
    plain = Corpus([dataclasses.replace(d, spans=()) for d in data.originals], name="originals")
    releases = (Release("originals", plain), ner, data.releases["labels"], data.releases["suppressed"],
                data.releases["generalized"])
    dev = data.releases["dev"]
    report: dict = {"people": args.people, "population": len(set(data.background.subjects)),
                    "background_documents": len(data.background), "threads": args.threads, "runs": {}}
    for name in args.configs:
        cfg = dict(CONFIGS[name])
        use_dev = cfg.pop("dev")
        cfg.update(small)
        scenario = Scenario(originals=data.originals, background=data.background, releases=releases,
                            dev=dev if use_dev else None)
        attack = TRIRAttack(seed=args.seed, use_cache=False, progress=False, num_threads=args.threads, device="cpu",
                            **cfg)
        t0 = time.time()
        attack.fit(scenario)
        info = attack.trained_.info
        row = {"train_seconds": round(time.time() - t0, 1), "epochs": len(info["history"]),
               "timings": info.get("timings"), "pretrained": info.get("pretrained"),
               "chosen_epoch": info["chosen_epoch"], "windows": info["training_windows"],
               "mask_styles": info.get("mask_styles"), "trir": {}}
        for rel in releases:
            row["trir"][rel.name] = attack.evaluate(scenario, rel)[0].value
        report["runs"][name] = row
        print(name, json.dumps(row), flush=True)
    ps = PhraseSearchAttack(against="background")
    scenario = Scenario(background=data.background, releases=releases)
    report["phrase_search_reid"] = {r.name: ps.evaluate(scenario, r)[0].value for r in releases}
    print("phrase_search_reid", json.dumps(report["phrase_search_reid"]), flush=True)

    names = [r.name for r in releases]
    print(f"\n{args.people} people in the releases, {report['population']} in the background, "
          f"{args.threads} thread(s), seed {args.seed}\n")
    table = [[name, *(f"{row['trir'][n]:.2f}" for n in names), f"{row['epochs']} ({row['chosen_epoch']})",
              f"{row['train_seconds']:.0f}"] for name, row in report["runs"].items()]
    table.append(["phrase search (background)", *(f"{report['phrase_search_reid'][n]:.2f}" for n in names), "–", "–"])
    print(markdown_table(["attacker", *names, "epochs (chosen)", "train s"], table))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
