"""TRIR training and prediction speed on CPU: each speed-up (issues 19 and 48) against the loop
without it, on the same training texts (the background plus one NER-masked copy, as the default
trains on).

Training configurations, ``--epochs`` epochs each (default 1; same seed, windows, batch size,
threads), trained ``--rounds`` times in turn (A B A B: load from elsewhere on the machine hits
both alike); a configuration's seconds per epoch are its fastest round's:

* ``before``: random batches padded to their longest window, every window (the loop before issue 19);
* ``bucket``: batches of windows of similar length (less padding);
* ``dedup``: windows repeated with the same person trained on once;
* ``freeze``: embeddings and the lowest 3 of MiniLM's 6 layers frozen (as in the first epochs
  with ``freeze_layers=3 freeze_epochs=N``);
* ``all``: bucket + dedup + freeze;
* ``fp32``: bucket + dedup in fp32 (the loop with issue 19's default speed-ups, the baseline of
  issue 48's arithmetic);
* ``bf16``: the same with the training steps under bfloat16 autocast (``train_precision=bf16``).

Prediction (``--predict``, after the training configurations, in the same run): the model trained
by the first configuration predicts every window of the training texts (batches of 64 sorted by
length, as the attack predicts; at most ``--predict-windows``) in each precision: fp32, bf16
(autocast), int8 (dynamic quantization of the linear layers); each precision ``--rounds`` times,
interleaved (A B C A B C), windows/s of the fastest pass; agreement with fp32 on each window's
top class and each text's (summed logits).

    python benchmarks/trir_speed.py --data demo --people 20          # synthetic population (short texts)
    python benchmarks/trir_speed.py --data tab --people 10           # TAB public background (long texts)
    python benchmarks/trir_speed.py --data tab --people 4 --max-windows 32 --configs fp32 bf16 --epochs 2 \
        --rounds 3 --predict fp32 bf16 int8 --predict-windows 512 --threads 1   # issue 48: bf16 / int8 vs fp32
    python benchmarks/trir_speed.py --windows-only --data tab --people 10  # padding left after bucketing
    python benchmarks/trir_speed.py --quick     # a smoke run: 3 demo people, fp32 and bf16, 1 epoch,
                                                # the three predictions, 32-token windows

Prints Markdown tables (seconds per epoch, windows, padded tokens, speed-up; windows/s and
agreement per precision) and writes ``--out``.
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
    "fp32": dict(bucket=True, dedup=True, train_precision="fp32"),
    "bf16": dict(bucket=True, dedup=True, train_precision="bf16"),
}
PRECISIONS = ("fp32", "bf16", "int8")


def background(kind: str, people: int) -> Corpus:
    if kind == "demo":
        from anonaudit.demo.population import generate

        return generate(people, seed=0, background_per_person=3).background
    from audit.io.loaders import load_corpus

    from tab import TAB

    bg = load_corpus(TAB / "bks" / "TAB_test_BK=Public.json", name="public")
    keep = sorted({d.subject for d in bg})[:people]
    return Corpus([d for d in bg if d.subject in keep], name="public")


def windows_only(bg: Corpus, styles: list[str]) -> dict:
    """Windows before and after de-duplication, and padded tokens of random vs length-bucketed
    batches of 16, for the background plus one masked copy per style; the spaCy masking time.
    Against the real (unpadded) tokens: the padding left after bucketing, in training (batches of
    16 of the de-duplicated windows) and in prediction (batches of 64 sorted by length), which is
    the most that sequence packing could save."""
    import random

    from transformers import AutoTokenizer

    from attackers.trir import make_windows, resolve_base
    from attackers.trir.training_batches import dedup_windows, length_batches
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
    return padding_left(kept, 16, 64)


def padding_left(w, train_batch: int, predict_batch: int) -> dict:
    """Padded tokens against real ones: the training's length-bucketed batches (seed 0) and the
    prediction's sorted batches, and how many windows are full (the window length)."""
    import random

    lengths = [len(x) for x in w.ids]
    real = sum(lengths)
    order = list(range(len(w)))
    random.Random(0).shuffle(order)
    train = sum(max(lengths[i] for i in b) * len(b) for b in length_batches_of(order, lengths, train_batch))
    ranked = sorted(lengths)
    predict = sum(max(ranked[b : b + predict_batch]) * len(ranked[b : b + predict_batch])
                  for b in range(0, len(ranked), predict_batch))
    full = sum(n == max(lengths) for n in lengths)
    out = {"windows": len(w), "full_windows": full, "real_tokens": real, "train_padded_tokens": train,
           "predict_padded_tokens": predict}
    print(f"{len(w)} windows, {full} of them full ({full / len(w):.1%}); real tokens {real}; padding left after "
          f"bucketing: training {train / real - 1:.2%} of the real tokens (batches of {train_batch}), prediction "
          f"{predict / real - 1:.2%} (batches of {predict_batch}): the most sequence packing could save")
    return out


def length_batches_of(order, lengths, size):
    from attackers.trir.training_batches import length_batches

    return length_batches(order, lengths, size, 0)


def predict_speed(attack: TRIRAttack, texts: list[str], threads: int, precisions: list[str], rounds: int,
                  most: int | None) -> dict:
    """Windows/s of the trained attacker's prediction over ``texts`` (at most ``most`` windows) in
    each precision (``rounds`` passes each, interleaved; the fastest counts), and agreement with
    fp32 on each window's and each text's top class."""
    import numpy as np
    import torch

    from attackers.trir import make_windows, predict_logits, sum_window_logits

    t = attack.trained_
    windows = make_windows(t.tokenizer, texts, attack.window, attack.overlap)
    if most is not None and len(windows) > most:
        keep = slice(0, most)
        windows = type(windows)(ids=windows.ids[keep], doc=windows.doc[keep], chars=windows.chars[keep])
        texts = texts[: max(windows.doc) + 1]
    torch.set_num_threads(threads)
    seconds: dict[str, float] = {}
    logits: dict[str, np.ndarray] = {}
    for _ in range(rounds):
        for p in precisions:
            t0 = time.time()
            logits[p] = predict_logits(t.model, windows, pad_id=t.tokenizer.pad_token_id or 0, device="cpu",
                                       batch_size=64, progress=False, precision=p)
            seconds[p] = min(seconds.get(p, float("inf")), time.time() - t0)
    ref = logits.get("fp32")
    rows = {}
    for p in precisions:
        row = {"windows": len(windows), "seconds": round(seconds[p], 2),
               "windows_per_second": round(len(windows) / seconds[p], 1)}
        if ref is not None:
            docs = sum_window_logits(logits[p], windows.doc, len(texts)).argmax(1)
            ref_docs = sum_window_logits(ref, windows.doc, len(texts)).argmax(1)
            row.update(window_top1_agreement=round(float(np.mean(logits[p].argmax(1) == ref.argmax(1))), 4),
                       text_top1_agreement=round(float(np.mean(docs == ref_docs)), 4),
                       max_abs_logit_difference=round(float(np.abs(logits[p] - ref).max()), 4))
        rows[p] = row
        print("predict", p, row, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", choices=["demo", "tab"], default="demo")
    ap.add_argument("--people", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1,
                    help="epochs per configuration; with more than 1, s / epoch is the mean of epochs 2.. (the "
                         "first carries the kernels' warm-up)")
    ap.add_argument("--max-windows", type=int, default=None, help="at most this many windows per person per epoch")
    ap.add_argument("--rounds", type=int, default=2,
                    help="train each configuration (and predict in each precision) this many times, in turn; "
                         "the fastest counts")
    ap.add_argument("--predict-windows", type=int, default=None, help="predict at most this many windows")
    ap.add_argument("--predict", nargs="*", choices=PRECISIONS, default=[],
                    help="then time the first configuration's attacker predicting the training texts in each "
                         "precision")
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
        args.data, args.people, args.configs, args.epochs, args.rounds = "demo", 3, ["fp32", "bf16"], 1, 1
        args.predict = list(PRECISIONS)
        small = dict(window=32, overlap=8)
    bg = background(args.data, args.people)
    if args.windows_only:
        padding = windows_only(bg, args.copies)
        if args.out:
            args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                            "padding": padding}, indent=1))
        return
    scenario = Scenario(background=bg)
    rows, first = {}, None
    for name in [c for _ in range(args.rounds) for c in args.configs]:
        attack = TRIRAttack(budget="fast", epochs=args.epochs, mask_style="label", use_cache=False, progress=False,
                            num_threads=args.threads, device="cpu", seed=0, max_windows_per_class=args.max_windows,
                            **small, **CONFIGS[name])
        t0 = time.time()
        attack.fit(scenario)
        info = attack.trained_.info
        hist = info["history"]
        timed = hist[1:] or hist
        seconds = round(sum(h["seconds"] for h in timed) / len(timed), 2)
        rounds = rows.get(name, {}).get("rounds", []) + [[h["seconds"] for h in hist]]
        rows[name] = {"epoch_seconds": min(seconds, rows.get(name, {}).get("epoch_seconds", seconds)),
                      "rounds": rounds, "windows": hist[0]["windows"],
                      "padded_tokens": hist[0]["padded_tokens"], "windows_before_dedup": info["windows_before_dedup"],
                      "fit_seconds": round(time.time() - t0, 1), "loss": [h["loss"] for h in hist],
                      "train_precision": info["settings"]["train_precision"]}
        print(name, rows[name], flush=True)
        first = first or attack
    base = rows.get("before") or rows.get("fp32")
    print(f"\n{args.data}, {args.people} people, {len(bg)} documents, {args.threads} thread(s), "
          f"{args.epochs} epoch(s), fastest of {args.rounds} round(s)\n")
    print(markdown_table(["loop", "s / epoch", "windows", "padded tokens", "loss per epoch", "speed-up"],
                         [[name, f"{r['epoch_seconds']:.1f}", r["windows"], r["padded_tokens"],
                           " ".join(f"{v:.3f}" for v in r["loss"]),
                           f"{base['epoch_seconds'] / r['epoch_seconds']:.2f}×" if base else "–"]
                          for name, r in rows.items()]))
    predicted = {}
    if args.predict and first is not None:
        texts = first._training_texts(bg, [])[0]
        predicted = predict_speed(first, texts, args.threads, args.predict, args.rounds, args.predict_windows)
        ref = predicted.get("fp32")
        print(f"\nprediction by the {args.configs[0]} attacker, {next(iter(predicted.values()))['windows']} windows\n")
        print(markdown_table(["precision", "windows / s", "speed-up", "same top class: windows", "texts",
                              "max |logit difference|"],
                             [[p, r["windows_per_second"],
                               f"{r['windows_per_second'] / ref['windows_per_second']:.2f}×" if ref else "–",
                               r.get("window_top1_agreement", "–"), r.get("text_top1_agreement", "–"),
                               r.get("max_abs_logit_difference", "–")] for p, r in predicted.items()]))
    if args.out:
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows,
                                        "predict": predicted}, indent=1))


if __name__ == "__main__":
    main()
