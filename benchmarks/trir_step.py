"""Where the time of one data-parallel TRIR step goes (issue 48): MiniLM on one thread per
process, full 100-token windows (as TAB's long texts give), batch 16 (the attack's).

One process alone: forward and backward of the whole batch and of half of it; one AdamW step
over the 22.7 M parameters, as a loop over parameters (torch's default on a CPU), ``foreach``,
and ``fused``. Then two processes joined by gloo, as two Ray Train workers are: forward and
backward of half the batch each, at the same time (against half the batch alone: what the two
cores give two independent jobs, the ceiling of any data-parallel scheme); the all-reduce of the
11 M dense gradients in fp32, in bf16 (with the conversions), in 8 messages sent at once, and of
the ~1,200 word-embedding rows a batch touches; the all-reduce sent while the backward pass runs;
and the whole step as :mod:`attackers.trir.raytrain` takes it (half the batch,
:class:`~attackers.trir.exchange.GradientExchange`, a fused AdamW step) against the one-process
step (the whole batch, a fused AdamW step). Each figure: the fastest and the mean of a few
repetitions, in seconds.

    python benchmarks/trir_step.py            # about a minute
    python benchmarks/trir_step.py --quick    # fewer repetitions

Random token ids (the timing does not depend on them); the embedded MiniLM from ANONAUDIT_HOME.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _model_and_batch(n: int):
    import torch
    from transformers import AutoModelForSequenceClassification

    from attackers.trir.encoder import quiet_transformers, resolve_base

    torch.manual_seed(0)
    with quiet_transformers():
        model = AutoModelForSequenceClassification.from_pretrained(resolve_base(None), num_labels=4)
    g = torch.Generator().manual_seed(1)
    return model, torch.randint(1000, 29000, (n, 100), generator=g), torch.randint(0, 4, (n,), generator=g)


def _fb(model, ids, y) -> None:
    import torch

    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=y)
    out.loss.backward()


def _time(f, reps: int) -> list[float]:
    """The fastest and the mean of ``reps`` runs of ``f`` (after one warm-up run)."""
    f()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return [round(min(ts), 4), round(sum(ts) / len(ts), 4)]


def _alone(q, reps: int) -> None:
    import torch

    torch.set_num_threads(1)
    model, ids, y = _model_and_batch(16)
    model.train()
    r = {"fb16": _time(lambda: (_fb(model, ids, y), model.zero_grad(set_to_none=True)), reps - 1),
         "fb8": _time(lambda: (_fb(model, ids[:8], y[:8]), model.zero_grad(set_to_none=True)), reps)}
    _fb(model, ids[:8], y[:8])
    for name, kw in (("opt_loop", {}), ("opt_foreach", {"foreach": True}), ("opt_fused", {"fused": True})):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, **kw)
        r[name] = _time(opt.step, reps)
    model.zero_grad(set_to_none=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, fused=True)
    r["step16_fused"] = _time(lambda: (_fb(model, ids, y), opt.step(), opt.zero_grad(set_to_none=True)), reps - 1)
    q.put(("alone", r))


def _pair(rank: int, q, port: int, reps: int) -> None:
    import torch
    import torch.distributed as dist

    from attackers.trir.exchange import GradientExchange

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    model, ids, y = _model_and_batch(16)
    model.train()
    r = {}
    dist.barrier()
    r["fb8_two_at_once"] = _time(lambda: (_fb(model, ids[:8], y[:8]), model.zero_grad(set_to_none=True)), reps)
    emb = model.get_input_embeddings().weight
    n = sum(p.numel() for p in model.parameters() if p is not emb)
    flat = torch.randn(n)
    r["dense_parameters"] = n

    def bf16():
        h = flat.to(torch.bfloat16)
        dist.all_reduce(h)
        flat.copy_(h)

    chunks = list(flat.tensor_split(8))

    def eight():
        for w in [dist.all_reduce(c, async_op=True) for c in chunks]:
            w.wait()

    rows = torch.randn(1200, 384)

    def overlapped():
        w = dist.all_reduce(flat, async_op=True)
        _fb(model, ids[:8], y[:8])
        model.zero_grad(set_to_none=True)
        w.wait()

    for name, f in (("allreduce_fp32", lambda: dist.all_reduce(flat)), ("allreduce_bf16", bf16),
                    ("allreduce_fp32_8_messages", eight), ("allreduce_rows", lambda: dist.all_reduce(rows)),
                    ("fb8_with_allreduce_overlapped", overlapped)):
        dist.barrier()
        r[name] = _time(f, reps)
    exchange = GradientExchange(model, emb)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, fused=True)
    mine = slice(rank * 8, rank * 8 + 8)
    batch_rows = torch.unique(ids)

    def step():
        exchange.start(batch_rows)
        (torch.nn.functional.cross_entropy(model(input_ids=ids[mine]).logits, y[mine], reduction="sum") / 16).backward()
        exchange.finish()
        opt.step()
        opt.zero_grad(set_to_none=True)

    dist.barrier()
    r["step8_exchange_fused"] = _time(step, reps - 1)
    dist.barrier()
    q.put((f"worker {rank}", r))
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    import torch.multiprocessing as mp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 repetitions instead of 4")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    reps = 2 if args.quick else 4
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": os.getloadavg()}
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_alone, args=(q, reps))
    p.start()
    k, v = q.get()
    p.join()
    out[k] = v
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [ctx.Process(target=_pair, args=(r, q, port, reps)) for r in range(2)]
    for p in procs:
        p.start()
    for _ in procs:
        k, v = q.get()
        out[k] = v
    for p in procs:
        p.join()
    out["load_after"] = os.getloadavg()
    alone, pair = out["alone"], [out["worker 0"], out["worker 1"]]
    fb8_pair = max(w["fb8_two_at_once"][1] for w in pair)
    step_pair = max(w["step8_exchange_fused"][1] for w in pair)
    out["ceiling"] = round(alone["fb16"][1] / fb8_pair, 3)
    out["step_speedup"] = round(alone["step16_fused"][1] / step_pair, 3)
    print(json.dumps(out, indent=1))
    print(f"ceiling (half the batch each, two at once, against the whole batch alone; means): {out['ceiling']:.2f}x; "
          f"the whole step (exchange, fused AdamW) with 2 workers against 1: {out['step_speedup']:.2f}x")
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
