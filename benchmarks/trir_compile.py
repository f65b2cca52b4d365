"""Does ``torch.compile`` pay for TRIR's training on a CPU? (issue 19)

The classifier TRIR trains (the embedded MiniLM with a classification head) takes training steps of
the attack's shape (batches of 16 windows of up to 100 tokens, lengths varying as length-bucketed
batches do), eager and compiled (``torch.compile(model, dynamic=True)``), from the same weights and
batches, in one run. Prints the first step (compilation included) and the mean of the next steps.

    python benchmarks/trir_compile.py --threads 2
    python benchmarks/trir_compile.py --quick      # a smoke run: 2 steps of 4 labels, windows of 32 tokens
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--labels", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="a smoke run (2 steps, 4 labels, 32-token windows), not a measurement")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.labels = 2, 4
    cap = 32 if args.quick else 100

    import torch

    from attackers.trir.encoder import quiet_transformers, resolve_base

    torch.set_num_threads(args.threads)
    lengths = [min(n, cap) for n in ([100, 96, 100, 88, 100, 100, 72, 100] * (1 + args.steps // 8))[:args.steps]]
    out = {}
    for name in ("eager", "compiled"):
        from transformers import AutoModelForSequenceClassification

        torch.manual_seed(0)
        with quiet_transformers():
            model = AutoModelForSequenceClassification.from_pretrained(resolve_base(None), num_labels=args.labels)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        run = torch.compile(model, dynamic=True) if name == "compiled" else model
        gen = torch.Generator().manual_seed(1)

        def step(length: int) -> None:
            ids = torch.randint(1000, 2000, (16, length), generator=gen)
            y = torch.randint(0, args.labels, (16,), generator=gen)
            run(input_ids=ids, attention_mask=torch.ones_like(ids), labels=y).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        t0 = time.perf_counter()
        step(cap)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        for length in lengths:
            step(length)
        out[name] = {"first_step_s": round(first, 2), "step_s": round((time.perf_counter() - t0) / len(lengths), 3)}
        print(name, json.dumps(out[name]), flush=True)
    print(f"compiled / eager per step: {out['compiled']['step_s'] / out['eager']['step_s']:.2f}x; "
          f"compilation: {out['compiled']['first_step_s'] - out['eager']['first_step_s']:.0f} s")


if __name__ == "__main__":
    main()
