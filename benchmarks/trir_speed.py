"""TRIR training speed on CPU: each speed-up of issue 19 against the loop as it was, on the same
training texts (the background plus one NER-masked copy, as the default trains on).

Configurations, one training epoch each (same seed, windows, batch size, threads):

* ``before``: random batches padded to their longest window, every window (the loop before issue 19);
* ``bucket``: batches of windows of similar length (less padding);
* ``dedup``: windows repeated with the same person trained on once;
* ``freeze``: embeddings and the lowest 3 of MiniLM's 6 layers frozen (as in the first epochs
  with ``freeze_layers=3 freeze_epochs=N``);
* ``all``: bucket + dedup + freeze.

    python benchmarks/trir_speed.py --data demo --people 20          # synthetic population (short texts)
    python benchmarks/trir_speed.py --data tab --people 10           # TAB public background (long texts)
    python benchmarks/trir_speed.py --quick     # a smoke run: 3 demo people, before and all, 32-token windows

Prints a Markdown table (seconds per epoch, windows, padded tokens, speed-up) and writes ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attackers.trir import TRIRAttack  # noqa: E402
from audit.core.data import Corpus, Scenario  # noqa: E402
from tab import markdown_table  # noqa: E402  (the benchmarks' one helper module, beside this script)

CONFIGS = {
    "before": dict(bucket=False, dedup=False),
    "bucket": dict(bucket=True, dedup=False),
    "dedup": dict(bucket=False, dedup=True),
    "freeze": dict(bucket=False, dedup=False, freeze_layers=3, freeze_epochs=1),
    "all": dict(bucket=True, dedup=True, freeze_layers=3, freeze_epochs=1),
}


def background(kind: str, people: int) -> Corpus:
    if kind == "demo":
        from audit.demo.data import generate

        return generate(people, seed=0, background_per_person=3).background
    from audit.io.loaders import load_corpus

    from tab import TAB

    bg = load_corpus(TAB / "bks" / "TAB_test_BK=Public.json", name="public")
    keep = sorted({d.subject for d in bg})[:people]
    return Corpus([d for d in bg if d.subject in keep], name="public")


def windows_only(bg: Corpus, styles: list[str]) -> None:
    """Windows before and after de-duplication, and padded tokens of random vs length-bucketed
    batches of 16, for the background plus one masked copy per style; the spaCy masking time."""
    import random

    from transformers import AutoTokenizer

    from attackers.trir import make_windows, resolve_base
    from attackers.trir.batches import dedup_windows, length_batches
    from attackers.trir.texts import masked_copies
    from audit.models.nlp import Spacy

    texts = [d.text for d in bg]
    t0 = time.time()
    copies = masked_copies(Spacy(), texts, styles)
    print(f"spaCy masking: {time.time() - t0:.1f} s for {sum(map(len, texts))} characters")
    tok = AutoTokenizer.from_pretrained(resolve_base(None))
    people = sorted({d.subject for d in bg})
    all_texts = texts + [t for c in copies for t in c]
    subjects = [d.subject for d in bg] * (1 + len(copies))
    w = make_windows(tok, all_texts, 100, 25)
    y = [people.index(subjects[i]) for i in w.doc]
    kept, _ = dedup_windows(w, y)
    lengths = [len(x) for x in w.ids]
    order = list(range(len(w)))
    random.Random(0).shuffle(order)
    plain = sum(max(lengths[i] for i in order[b : b + 16]) * len(order[b : b + 16]) for b in range(0, len(order), 16))
    bucketed = sum(max(lengths[i] for i in b) * len(b) for b in length_batches(order, lengths, 16, 0))
    print(f"windows {len(w)} -> {len(kept)} after de-duplication ({1 - len(kept) / len(w):.1%} fewer); padded "
          f"tokens: random batches {plain}, length-bucketed {bucketed} ({1 - bucketed / plain:.1%} fewer)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", choices=["demo", "tab"], default="demo")
    ap.add_argument("--people", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--windows-only", action="store_true",
                    help="no training: what de-duplication and length bucketing do to the windows")
    ap.add_argument("--copies", nargs="+", default=["label"], help="masking styles of the copies (--windows-only)")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run (3 demo people, the before and all loops, 32-token windows), not a measurement")
    args = ap.parse_args()
    small = {}
    if args.quick:
        args.data, args.people, args.configs = "demo", 3, ["before", "all"]
        small = dict(window=32, overlap=8)
    bg = background(args.data, args.people)
    if args.windows_only:
        windows_only(bg, args.copies)
        return
    scenario = Scenario(background=bg)
    rows = {}
    for name in args.configs:
        attack = TRIRAttack(budget="fast", epochs=1, mask_style="label", use_cache=False, progress=False,
                            num_threads=args.threads, device="cpu", seed=0, **small, **CONFIGS[name])
        t0 = time.time()
        attack.fit(scenario)
        info = attack.trained_.info
        h = info["history"][0]
        rows[name] = {"epoch_seconds": h["seconds"], "windows": h["windows"], "padded_tokens": h["padded_tokens"],
                      "windows_before_dedup": info["windows_before_dedup"], "fit_seconds": round(time.time() - t0, 1),
                      "loss": h["loss"]}
        print(name, rows[name], flush=True)
    base = rows.get("before")
    print(f"\n{args.data}, {args.people} people, {len(bg)} documents, {args.threads} thread(s)\n")
    print(markdown_table(["loop", "s / epoch", "windows", "padded tokens", "speed-up"],
                         [[name, f"{r['epoch_seconds']:.1f}", r["windows"], r["padded_tokens"],
                           f"{base['epoch_seconds'] / r['epoch_seconds']:.2f}×" if base else "–"]
                          for name, r in rows.items()]))
    if args.out:
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
