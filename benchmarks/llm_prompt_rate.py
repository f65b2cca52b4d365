"""Prompt tokens per second of the embedded LLM on llama.cpp (xllamacpp), setting by setting.

    python benchmarks/llm_prompt_rate.py --quick     # the 0.5B, 2 threads, one setting, 2 prompts
    python benchmarks/llm_prompt_rate.py             # the 1.5B: threads 1/2, ubatch 64/512, flash attention off/on

Each setting starts its own server (one slot, no prompt cache, idle threads sleeping: the
attack's ``LlamaCppLLM`` settings), evaluates one warm-up prompt, then ``--prompts`` fresh prompts
of ``--tokens`` tokens (no reuse between them) with one generated token each, and reports
llama.cpp's own prompt timing (``timings.prompt_per_second``; the median over the prompts) and the
wall seconds per prompt. Judge questions are 60-130 tokens; ``--tokens`` also takes a list. Say
how busy the machine was: a second process on the cores halves the rate (``uptime`` before and
after are printed). Writes --out (JSON), prints Markdown.

Run on the 1.5B for issue 69's item 5 (the ~30 against ~77 tokens/s question; 2026-12-07): the figures
and the reading are in benchmarks/README.md ("Prompt rate of the 1.5B"). Flash attention's list
starts with a minus sign: write ``--flash=-1,0,1``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = {"0.5b": "qwen2.5-coder-0.5b", "1.5b": "qwen2.5-coder-1.5b"}
WORDS = ("court applicant appeal judgment hearing government ministry lawyer decision article complaint "
         "district regional supreme evidence witness police detention prison sentence").split()


def prompt_text(n: int, k: int) -> str:
    """About ``n`` tokens of plain text (one word is about one token), different for each ``k`` from
    its first word on (no prefix shared with another prompt); llama.cpp reports the true count."""
    return f"{k} " + " ".join(WORDS[(k * 7 + i * 3) % len(WORDS)] for i in range(n - 2))


def run_setting(path: str, threads: int, ubatch: int, flash: int, tokens: list[int], prompts: int) -> dict:
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = path
    params.n_parallel = 1
    params.n_ctx = 4096
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    params.cpuparams.poll = params.cpuparams_batch.poll = 0
    params.n_batch = max(ubatch, 512)
    params.n_ubatch = ubatch
    params.flash_attn_type = flash
    params.warmup = False
    params.cache_ram_mib = 0
    params.verbosity = -1
    server = xlc.Server(params)
    body = {"max_tokens": 1, "temperature": 0.0, "cache_prompt": False}
    server.handle_completions({**body, "prompt": prompt_text(64, 999)})  # warm-up
    rows = {}
    for n in tokens:
        rates, walls, counts = [], [], []
        for k in range(prompts):
            t = time.perf_counter()
            result = server.handle_completions({**body, "prompt": prompt_text(n, 1000 * n + k)})
            walls.append(time.perf_counter() - t)
            rates.append(float(result["timings"]["prompt_per_second"]))
            counts.append(int(result["timings"]["prompt_n"]))
        rows[n] = {"prompt_tokens_per_s": round(statistics.median(rates), 1), "all": [round(r, 1) for r in rates],
                   "prompt_tokens": counts, "wall_s_per_prompt": round(statistics.median(walls), 3)}
    del server
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the 0.5B, 2 threads, ubatch 512, flash auto, 2 prompts")
    ap.add_argument("--model", default="1.5b", choices=sorted(MODELS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--ubatch", default="64,512")
    ap.add_argument("--flash", default="0,1", help="llama.cpp flash_attn_type: -1 auto, 0 off, 1 on")
    ap.add_argument("--tokens", default="120,400")
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--out", default="llm_prompt_rate.json")
    args = ap.parse_args()
    if args.quick:
        args.model, args.threads, args.ubatch, args.flash, args.tokens, args.prompts = "0.5b", "2", "512", "-1", "120", 2
    from audit.models.specs import EMBEDDED_LLMS

    path = str(EMBEDDED_LLMS[MODELS[args.model]].path)
    report = {"args": vars(args), "uptime_before": os.getloadavg(), "settings": []}
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    tokens = ints(args.tokens)
    for threads, ubatch, flash in itertools.product(ints(args.threads), ints(args.ubatch), ints(args.flash)):
        t = time.perf_counter()
        rows = run_setting(path, threads, ubatch, flash, tokens, args.prompts)
        report["settings"].append({"threads": threads, "ubatch": ubatch, "flash": flash, "rows": rows,
                                   "seconds": round(time.perf_counter() - t, 1), "load": os.getloadavg()})
        print(report["settings"][-1], file=sys.stderr)
        Path(args.out).write_text(json.dumps(report, indent=1))
    report["uptime_after"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(report, indent=1))
    print("| threads | ubatch | flash attention | " + " | ".join(f"{n} tokens: t/s (s a prompt)" for n in tokens) + " |")
    print("|---:|---:|---:|" + "---:|" * len(tokens))
    for s in report["settings"]:
        cells = " | ".join(f"{s['rows'][n]['prompt_tokens_per_s']} ({s['rows'][n]['wall_s_per_prompt']})" for n in tokens)
        print(f"| {s['threads']} | {s['ubatch']} | {s['flash']} | {cells} |")


if __name__ == "__main__":
    main()
