"""Benchmark of the LLM layer (issue 2).

1. Overhead: generated tokens/s through ``audit.models.specs.load_llm`` (llama.cpp backend +
   sqlite cache, cache empty) vs calling ``xllamacpp.Server.handle_chat_completions``
   directly on the same prompts with the same settings (same threads, same slots, same
   concurrency). Target: layer / direct >= 0.8.
2. Cache: the same batch again through a fresh ``CachedLLM`` on the same cache file
   (what a re-run of an audit does) vs the first run. Target: >= 100x faster.

    python benchmarks/llm_layer.py --quick          # 4 prompts, 24 tokens each
    python benchmarks/llm_layer.py --llm qwen2.5-coder-1.5b --prompts 12 --max-tokens 64
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TOPICS = ["a court hearing", "a hospital visit", "a train journey", "a tax audit", "a birthday party",
          "a job interview", "a football match", "a house move", "a school exam", "a bank loan",
          "a storm at sea", "a museum visit", "a car accident", "a wedding", "a town election", "a fire drill"]


def prompts(n: int) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": f"Write three sentences about {TOPICS[i % len(TOPICS)]} (variant {i})."}]
            for i in range(n)]


class Direct:
    """xllamacpp called directly: same model file, slots, threads and concurrency as the layer."""

    def __init__(self, model_path: str, n_ctx: int, n_parallel: int):
        import xllamacpp as xlc

        p = xlc.CommonParams()
        p.model.path = model_path
        p.n_parallel = n_parallel
        p.n_ctx = n_ctx * n_parallel
        p.cpuparams.n_threads = p.cpuparams_batch.n_threads = os.cpu_count() or 1
        p.warmup = False
        p.verbosity = -1
        self.server = xlc.Server(p)
        self.n_parallel = n_parallel

    def run(self, msgs, max_tokens: int) -> tuple[float, int]:
        body = lambda m: {"messages": m, "max_tokens": max_tokens, "temperature": 0.0, "seed": 0}  # noqa: E731
        t = time.perf_counter()
        with ThreadPoolExecutor(self.n_parallel) as pool:
            results = list(pool.map(lambda m: self.server.handle_chat_completions(body(m)), msgs))
        return time.perf_counter() - t, sum(r["usage"]["completion_tokens"] for r in results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llm", default="qwen2.5-coder-0.5b", help="an embedded model name or .gguf path")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--parallel", type=int, default=2, help="llama.cpp slots = concurrent requests")
    ap.add_argument("--rounds", type=int, default=4, help="interleaved direct/layer rounds")
    ap.add_argument("--quick", action="store_true", help="4 prompts x 24 tokens, 2 rounds")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    if args.quick:
        args.prompts, args.max_tokens, args.rounds = 4, 24, 2

    from audit.models.llm import ChatRequest
    from audit.models.answer_cache import CachedLLM
    from audit.models.specs import embedded_llm_path, load_llm, parse_llm_spec

    spec = parse_llm_spec(args.llm)
    if spec.backend != "llamacpp":
        raise SystemExit("this benchmark compares against xllamacpp: give an embedded model or a .gguf file")
    if spec.name:
        embedded_llm_path(spec.name)
    msgs = prompts(args.prompts)
    n_ctx = 2048
    direct = Direct(spec.target, n_ctx, args.parallel)
    direct.server.handle_chat_completions({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
    reqs = [ChatRequest.make(m, max_tokens=args.max_tokens, temperature=0.0, seed=0) for m in msgs]
    with tempfile.TemporaryDirectory() as tmp:
        llm = load_llm(args.llm, cache_path=Path(tmp) / "warm.sqlite", n_ctx=n_ctx, n_parallel=args.parallel)
        llm.complete([{"role": "user", "content": "Hi"}], max_tokens=4)  # warm-up
        llm.count_tokens("warm up the tokenizer")
        # interleave A B B A ... so that load from other processes hits both sides alike
        d_s = d_tok = l_s = l_tok = 0.0
        first_s = cached_s = 0.0
        for r in range(args.rounds):
            for side in (("direct", "layer") if r % 2 == 0 else ("layer", "direct")):
                if side == "direct":
                    s_, n_ = direct.run(msgs, args.max_tokens)
                    d_s, d_tok = d_s + s_, d_tok + n_
                    continue
                cache = Path(tmp) / f"round{r}.sqlite"  # empty cache: every request reaches the model
                layer = CachedLLM(llm.backend, cache)
                t = time.perf_counter()
                answers = layer.complete_batch(reqs)
                elapsed = time.perf_counter() - t
                l_s, l_tok = l_s + elapsed, l_tok + sum(llm.count_tokens(a) for a in answers)
                again = CachedLLM(llm.backend, cache)  # a re-run: new cache object, same file
                t = time.perf_counter()
                assert again.complete_batch(reqs) == answers and again.stats["backend_calls"] == 0
                first_s, cached_s = first_s + elapsed, cached_s + time.perf_counter() - t
        llm.close()

    figures = {
        "model": args.llm, "prompts": args.prompts, "max_tokens": args.max_tokens, "parallel": args.parallel,
        "rounds": args.rounds, "cpu_cores": os.cpu_count(), "load_avg_1min_end": round(os.getloadavg()[0], 2),
        "direct_s": round(d_s, 2), "direct_tokens": int(d_tok), "direct_tokens_per_s": round(d_tok / d_s, 2),
        "layer_s": round(l_s, 2), "layer_tokens": int(l_tok), "layer_tokens_per_s": round(l_tok / l_s, 2),
        "layer_over_direct": round((l_tok / l_s) / (d_tok / d_s), 3),
        "first_run_s": round(first_s, 2), "cached_rerun_s": round(cached_s, 5),
        "cache_speedup": round(first_s / cached_s, 1),
    }
    print(json.dumps(figures, indent=2))
    print(f"layer/direct throughput = {figures['layer_over_direct']} (target >= 0.8); "
          f"cached re-run {figures['cache_speedup']}x faster (target >= 100)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
