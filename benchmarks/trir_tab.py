"""TRIR on the Text Anonymization Benchmark (TAB) test set, beside the published figures.

Quality: train the TRIR attacker on a TAB background file (``TAB_test_BK=Public``,
127 people, or ``TAB_all_BK=Public10%``, 1,268 people) and evaluate the original
texts plus the 22 sanitizations (span files applied to ``TAB_test_BK=Original``),
for several seeds; print our TRIR beside the published figures and their Spearman
rank correlation.

Speed: one training epoch of the attack vs a bare PyTorch/transformers loop on the
same windows (same model, optimizer, batch size and threads); prediction windows/s.

    python benchmarks/trir_tab.py --quick            # a subset: minutes on 2 CPU cores
    python benchmarks/trir_tab.py                    # everything (hours on CPU; use --device cuda)
    python benchmarks/trir_tab.py --estimate         # print the cost estimate and stop

Results go to ``--out`` (JSON) and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attackers.trir import TRIRAttack, make_windows, pad_batch, resolve_base  # noqa: E402
from audit.core.data import Corpus, Release, Scenario  # noqa: E402
from audit.io.loaders import load_corpus, load_release_file  # noqa: E402

from tab import TAB as DATA, cut_texts  # noqa: E402  (the benchmarks' helper module: ../shared/data/tab)
BACKGROUNDS = {"public": "TAB_test_BK=Public.json", "all10": "TAB_all_BK=Public10%.json"}
#: Published TRIR on TAB test (INTACT paper, Fig. 7 / Table 3 and the TPI paper); background unstated.
PUBLISHED = {
    "St.NER3_Entity": 0.425, "St.NER4_Entity": 0.433, "St.NER7_Entity": 0.433, "spaCy_Entity": 0.465,
    "Presidio_Supression_Ildiko": 0.394, "Presidio_Entity": 0.409, "gpt-3.5-turbo-0125_mvm-st": 0.394,
    "Manual_Supression": 0.299, "Manual_Entity": 0.354, "Manual_Presidio_gpt-3.5-turbo-0125": 0.386,
    "Manual_Dou": 0.378, "Manual_INTACT": 0.315,
}
QUICK_RELEASES = ["Manual_Supression", "Manual_Entity", "spaCy_Entity", "St.NER3_Entity", "Presidio_Entity",
                  "Manual_INTACT", "Manual_Dou"]
SECONDS_PER_BATCH = 0.85  # 16 windows x 128 tokens, MiniLM, 2 idle CPU cores (DESIGN.md)


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman rank correlation (average ranks for ties)."""
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic) if len(x) > 2 else float("nan")


def load_tab(data: Path, background: str, people: int | None, releases: list[str] | None):
    full = load_corpus(data / "bks" / "TAB_test_BK=Original.json", name="originals")
    bg = load_corpus(data / "bks" / BACKGROUNDS[background], name=background)
    keep = set(sorted(full.ids)[:people]) if people else set(full.ids)
    originals = Corpus([d for d in full if d.id in keep], name="originals")
    if people:
        # the chosen test people, plus distractors in the same proportion as the full file
        extra = [d for d in bg if d.id not in set(full.ids)]
        bg = Corpus([d for d in bg if d.id in keep] + extra[: round(len(extra) * people / len(full))],
                    name=background)
    rels = [Release("Original", originals)]
    for f in sorted((data / "anonymizations").glob("TAB_test_*.json")):
        name = f.stem.removeprefix("TAB_test_")
        if releases is None or name in releases:
            for r in load_release_file(f, name=name, originals=full):
                rels.append(Release(r.name, Corpus([d for d in r.corpus if d.id in keep], name=r.name),
                                    sanitizer=r.sanitizer, source=r.source))
    return originals, bg, rels


def estimate(bg: Corpus, window: int, overlap: int, epochs: int, seeds: int, max_wpc: int | None) -> dict:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve_base(None))
    wins = make_windows(tok, [d.text for d in bg], window, overlap)
    per_epoch = len(wins) if max_wpc is None else sum(min(max_wpc, wins.doc.count(i)) for i in range(len(bg)))
    batches = math.ceil(per_epoch / 16)
    return {"windows": len(wins), "windows_per_epoch": per_epoch, "batches_per_epoch": batches,
            "est_seconds_per_epoch": round(batches * SECONDS_PER_BATCH * window / 128),
            "est_seconds_training": round(batches * SECONDS_PER_BATCH * window / 128 * epochs * seeds)}


def speed(bg: Corpus, args) -> dict:
    """Epoch time of TRIRAttack's loop vs a bare loop on the same windows; best of two each."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from attackers.trir import quiet_transformers

    threads = args.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    base = resolve_base(None)
    tok = AutoTokenizer.from_pretrained(base)
    all_wins = make_windows(tok, [d.text for d in bg], args.window, args.overlap)
    docs, total = [], 0
    for i, d in enumerate(bg):  # whole documents until about --speed-windows windows
        if total >= args.speed_windows:
            break
        docs.append(d)
        total += all_wins.doc.count(i)
    sub = Corpus(docs, name="speed")
    labels = sorted({d.subject for d in sub})
    wins = make_windows(tok, [d.text for d in sub], args.window, args.overlap)
    keep = list(range(len(wins)))
    y = torch.tensor([labels.index(sub[wins.doc[k]].subject) for k in keep])

    def bare() -> float:
        torch.manual_seed(0)
        with quiet_transformers():
            model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=len(labels))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
        model.train()
        order = torch.randperm(len(keep)).tolist()
        t0 = time.time()
        for b in range(0, len(order), 16):
            idx = order[b : b + 16]
            ids, mask = pad_batch([wins.ids[keep[i]] for i in idx], tok.pad_token_id)
            loss = model(input_ids=ids, attention_mask=mask, labels=y[idx]).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return time.time() - t0

    def ours() -> tuple[float, int]:
        a = TRIRAttack(budget="fast", augment_ner=False, bucket=False, window=args.window, overlap=args.overlap,
                       epochs=1, use_cache=False, num_threads=threads, progress=False, device="cpu")
        a.fit(Scenario(background=sub))
        h = a.trained_.info["history"][0]
        return h["seconds"], h["windows"]

    b1 = bare()
    o1, n_ours = ours()
    b2 = bare()
    o2, _ = ours()
    return {"threads": threads, "windows_bare": len(keep), "windows_ours": n_ours,
            "bare_seconds": round(min(b1, b2), 2), "ours_seconds": round(min(o1, o2), 2),
            "ours_per_window_vs_bare": round((min(o1, o2) / n_ours) / (min(b1, b2) / len(keep)), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--quick", action="store_true", help="20 people, 7 sanitizations + originals, 1 seed, public BK")
    ap.add_argument("--backgrounds", nargs="+", choices=sorted(BACKGROUNDS), default=None)
    ap.add_argument("--people", type=int, default=None, help="first N test people only")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1 "
                    "(to run seeds in separate processes; merge with --merge)")
    ap.add_argument("--merge", type=Path, nargs="+", default=None,
                    help="print the table of these result files together (their seeds pooled) and stop")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--budget", choices=["paper", "fast"], default="paper",
                    help="TRIR's budget (issue 19); the figures before it were taken with what is now "
                         "--budget fast --no-augment")
    ap.add_argument("--no-augment", action="store_true", help="no NER-masked background copies")
    ap.add_argument("--freeze-layers", type=int, default=0,
                    help="freeze the embeddings and this many lowest layers ... (issue 19's speed-up)")
    ap.add_argument("--freeze-epochs", type=int, default=0, help="... for the first this many epochs")
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--overlap", type=int, default=25)
    ap.add_argument("--learning-rate", type=float, default=None)
    ap.add_argument("--max-windows-per-class", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default=None)
    ap.add_argument("--speed-windows", type=int, default=160, help="windows timed in the speed comparison")
    ap.add_argument("--releases", choices=["all", "published"], default="all",
                    help="'published': only the 12 sanitizations with a published figure, plus the originals")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--max-chars", type=int, default=None,
                    help="cut each background text to its first N characters (a smoke size, not a measurement)")
    ap.add_argument("--cache", action="store_true",
                    help="keep each trained attacker in the attacker cache (a later run with the same settings "
                         "loads it and only predicts, e.g. to add releases)")
    ap.add_argument("--estimate", action="store_true", help="print the cost estimate and stop")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/trir_tab_results.json"))
    args = ap.parse_args()
    if args.merge:
        merged: dict = {"runs": {}}
        for f in args.merge:
            rep = json.loads(f.read_text())
            for bg, run in rep["runs"].items():
                into = merged["runs"].setdefault(bg, {**run, "seeds": {}})
                into["seeds"].update(run["seeds"])
            if "speed" in rep:
                merged["speed"] = rep["speed"]
        print(table(merged))
        return
    q = args.quick
    backgrounds = args.backgrounds or (["public"] if q else ["public", "all10"])
    people = args.people or (20 if q else None)
    seeds = args.seeds or (1 if q else 3)
    from attackers.trir.attack import BUDGETS

    epochs = args.epochs or (4 if q else BUDGETS[args.budget]["epochs"])
    lr = args.learning_rate or 2e-4
    max_wpc = args.max_windows_per_class or (16 if q else None)
    chosen = QUICK_RELEASES if q else (sorted(PUBLISHED) if args.releases == "published" else None)

    report: dict = {"args": {k: str(v) for k, v in vars(args).items()}, "people": people, "seeds": seeds,
                    "epochs": epochs, "learning_rate": lr, "max_windows_per_class": max_wpc, "runs": {}}
    for bgname in backgrounds:
        originals, bg, rels = load_tab(args.data, bgname, people, chosen)
        bg = cut_texts(bg, args.max_chars)
        est = estimate(bg, args.window, args.overlap, epochs, seeds, max_wpc)
        print(f"[{bgname}] {len(set(bg.subjects))} people, {len(rels)} releases; estimate: {est}", flush=True)
        report["runs"][bgname] = {"estimate": est, "population": len(set(bg.subjects)), "seeds": {}}
        if args.estimate:
            continue
        scenario = Scenario(originals=originals, background=bg, releases=tuple(rels))
        for seed in range(args.first_seed, args.first_seed + seeds):
            attack = TRIRAttack(budget=args.budget, window=args.window, overlap=args.overlap, epochs=epochs,
                                learning_rate=lr, seed=seed, max_windows_per_class=max_wpc, num_threads=args.threads,
                                device=args.device, use_cache=args.cache, freeze_layers=args.freeze_layers,
                                freeze_epochs=args.freeze_epochs, **({"augment_ner": False} if args.no_augment else {}))
            attack.fit(scenario)
            info = attack.trained_.info
            row = {"train_seconds": info["train_seconds"], "threads": info["threads"],
                   "epochs_trained": len(info["history"]), "timings": info.get("timings"),
                   "mask_styles": info.get("mask_styles"), "training_windows": info.get("training_windows"),
                   "epoch_seconds": [h["seconds"] for h in info["history"]],
                   "loss": [h["loss"] for h in info["history"]], "trir": {}, "top5": {}, "predict_wps": {},
                   "correct": {}}
            for rel in rels:
                head, top5 = attack.evaluate(scenario, rel)
                row["trir"][rel.name] = head.value
                row["top5"][rel.name] = top5.value
                row["correct"][rel.name] = {d.id: d.success for d in head.documents if d.success is not None}
                predict_s = attack.stats()["timings"][rel.name]["predict"]
                row["predict_wps"][rel.name] = round(head.details["prediction_windows"] / max(1e-9, predict_s), 1)
                print(f"  seed {seed} {rel.name:45s} TRIR {head.value:.3f}  top5 {top5.value:.3f}", flush=True)
                report["runs"][bgname]["seeds"][seed] = row  # written after every release: a cut run keeps its rows
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(report, indent=1))
    if not args.estimate and not args.no_speed:
        _, bg, _ = load_tab(args.data, backgrounds[0], people, [])
        report["speed"] = speed(bg, args)
        print("speed:", report["speed"], flush=True)
    args.out.write_text(json.dumps(report, indent=1))
    if not args.estimate:
        print(table(report))


def paired_vs_original(seeds: dict) -> list[tuple[str, int, int, float]]:
    """Per release: documents re-identified in the original but not in the release (a), the
    reverse (b), and the two-sided exact sign test p-value, pooled over seeds with per-document rows."""
    from audit.core.stats import sign_test

    rows = [s["correct"] for s in seeds.values() if s.get("correct", {}).get("Original")]
    names = list(dict.fromkeys(n for c in rows for n in c if n != "Original"))
    out = []
    for n in names:
        a = b = 0
        for c in rows:
            if n not in c:
                continue
            for doc, hit in c[n].items():
                orig = c["Original"].get(doc)
                a += bool(orig and not hit)
                b += bool(hit and orig is False)
        out.append((n, a, b, sign_test(a, b)))
    return out


def table(report: dict) -> str:
    lines = []
    for bgname, run in report["runs"].items():
        seeds = run["seeds"]
        if not seeds:
            continue
        names = list(dict.fromkeys(n for s in seeds.values() for n in s["trir"]))  # seeds may cover different releases
        lines.append(f"\n### background {bgname} ({run['population']} people, {len(seeds)} seed(s))\n")
        lines.append("| release | published TRIR | ours (mean) | ours per seed | top-5 (mean) |")
        lines.append("| --- | ---: | ---: | --- | ---: |")
        ours, pub = [], []
        for n in names:
            vals = [s["trir"].get(n) for s in seeds.values()]
            got = [v for v in vals if v is not None]
            t5 = [s["top5"][n] for s in seeds.values() if n in s["top5"]]
            p = PUBLISHED.get(n)
            if p is not None:
                ours.append(float(np.mean(got)))
                pub.append(p)
            lines.append(f"| {n} | {'' if p is None else f'{p:.3f}'} | {np.mean(got):.3f} | "
                         f"{', '.join('—' if v is None else f'{v:.3f}' for v in vals)} | {np.mean(t5):.3f} |")
        ep = [e for s in seeds.values() for e in s["epoch_seconds"]]
        wps = [w for s in seeds.values() for w in s["predict_wps"].values()]
        lines.append(f"\nSpearman rank correlation with the published figures ({len(pub)} releases): "
                     f"{spearman(ours, pub):.3f}. Epoch time: mean {np.mean(ep):.1f} s "
                     f"({run['estimate']['windows_per_epoch']} windows/epoch). Prediction: median "
                     f"{np.median(wps):.1f} windows/s.")
        paired = paired_vs_original(seeds)
        if paired:
            lines.append("\nPaired exact sign test, each release against the unsanitized originals (same seed, same "
                         "document; discordant documents pooled over the seeds that saved them): "
                         + "; ".join(f"{n} {a}/{b} p={pv:.2g}" for n, a, b, pv in paired)
                         + " (a = re-identified only in the original, b = only in the release).")
    if "speed" in report:
        s = report["speed"]
        lines.append(f"\nSpeed: TRIRAttack epoch {s['ours_seconds']} s for {s['windows_ours']} windows vs bare loop "
                     f"{s['bare_seconds']} s for {s['windows_bare']} windows ({s['threads']} thread(s)); "
                     f"per-window ratio {s['ours_per_window_vs_bare']}x.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
