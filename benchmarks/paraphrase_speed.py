"""The claim linker's paraphrasing: its cost per claim and the linkage it leaves, the requests as
they were against the requests with their instructions shared (issue 57, item 2).

    python benchmarks/paraphrase_speed.py --docs 10                # 1.5B, 10 TAB documents x 3 claims
    python benchmarks/paraphrase_speed.py --docs 4 --model 0.5b    # quick

Paths, on the same aux claims (3 random claims, seed 0, of ``--docs`` seeded TAB test documents,
the draw of ``claim_linker_tab.py --paraphrase-docs``), with no answer cache (cold), interleaved
(A B then B A, half the documents each):

* **whole**: each claim's request evaluated whole (the attack's paraphraser);
* **shared**: the instructions declared shared (``ChatRequest.shared=(1,)``), evaluated once by
  llama.cpp in one fixed way and reused by every claim (the candidate speed-up).

For each: seconds per claim, prompt tokens sent and evaluated, generated tokens, unusable answers
(kept verbatim), answers identical to the other path; then the dense linker (the attack's) with
each path's paraphrases and with the verbatim claims on ``--releases`` of TAB (127 documents
each): correct-linkage rate. Data: ../shared/data/tab. Writes --out (JSON), prints Markdown.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from attackers.claim_linker import DenseLinker, SentenceSplitter, select_aux  # noqa: E402
from attackers.claim_linker.auxiliary import paraphrase_request, parse_paraphrase  # noqa: E402
from audit.core.text import word_tokens  # noqa: E402
from audit.io.loaders import load_corpus, load_release_file  # noqa: E402
from audit.models.embed import Embedder  # noqa: E402

from tab import TAB  # noqa: E402

SPECS = {"0.5b": "qwen2.5-coder-0.5b", "1.5b": "qwen2.5-coder-1.5b"}


def requests(claims: list[str], path: str, seed: int):
    reqs = [paraphrase_request(c, seed) for c in claims]
    return [dataclasses.replace(r, shared=(1,) if path.split("@")[0] == "shared" else ()) for r in reqs]


def run(llm, path: str, claims: list[str], seed: int) -> tuple[list[str], dict]:
    """The paraphrases of ``claims`` on ``path`` (``whole@poll0``: ``llm`` is a dict of backends by
    poll level, ``--polls``) and their cost."""
    if isinstance(llm, dict):
        llm = llm[path.split("@")[1]]
    used0 = dict(llm.usage)
    t = time.perf_counter()
    answers = llm.complete_batch(requests(claims, path, seed))
    seconds = time.perf_counter() - t
    used = {k: llm.usage[k] - used0.get(k, 0) for k in llm.usage}
    paras, failed = [], 0
    for claim, answer in zip(claims, answers):
        para = parse_paraphrase(answer)
        if not para or word_tokens(para) == word_tokens(claim):
            failed += 1
            para = claim
        paras.append(para)
    n = max(1, len(claims))
    return paras, {"seconds": seconds, "claims": len(claims), "failed": failed,
                   **{f"{k}_per_claim": used.get(k, 0) / n for k in ("prompt_tokens", "prompt_evaluated",
                                                                      "completion_tokens")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(TAB))
    ap.add_argument("--model", default="1.5b", choices=sorted(SPECS))
    ap.add_argument("--docs", type=int, default=10)
    ap.add_argument("--releases", default="Manual_Entity,Manual_Supression,spaCy_Entity")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="paraphrase_speed.json")
    ap.add_argument("--quick", action="store_true", help="a smoke run: the 0.5B, 2 documents of one release")
    ap.add_argument("--polls", default="", help="compare llama.cpp poll levels (50,0) on the whole path instead")
    args = ap.parse_args()
    if args.quick:
        args.model, args.docs, args.releases = "0.5b", 2, "Manual_Entity"
    from audit.models.specs import load_llm

    data = Path(args.data)
    originals = load_corpus(data / "bks" / "TAB_test_BK=Original.json", name="originals")
    splitter = SentenceSplitter(clauses=False)
    trials = sorted(random.Random(f"{args.seed}:para").sample(range(len(originals)), args.docs))
    claims_of = {t: splitter.split([originals[t]])[0] for t in trials}
    aux = {t: [claims_of[t][i].text for i in select_aux(claims_of[t], 3, "random",
                                                         random.Random(f"{args.seed}:aux:{originals[t].id}"))]
           for t in trials}
    if args.polls:
        from judge_speed import polled_llm

        llm = {f"poll{v}": polled_llm(SPECS[args.model], int(v), None) for v in args.polls.split(",")}
        names = tuple(f"whole@{k}" for k in llm)
    else:
        llm, names = load_llm(SPECS[args.model], cache=False).backend, ("whole", "shared")
    half = len(trials) // 2
    out: dict = {"args": vars(args), "model": SPECS[args.model], "paths": {}}
    paras: dict[str, dict[int, list[str]]] = {name: {} for name in names}
    for part, order in ((trials[:half], names), (trials[half:], names[::-1])):
        flat = [c for t in part for c in aux[t]]
        for path in order:
            got, stats = run(llm, path, flat, args.seed)
            it = iter(got)
            paras[path].update({t: [next(it) for _ in aux[t]] for t in part})
            acc = out["paths"].setdefault(path, {"seconds": 0.0, "claims": 0, "failed": 0})
            for k, v in stats.items():
                acc[k] = acc.get(k, 0) + (v * stats["claims"] if k.endswith("_per_claim") else v)
            print(path, stats, file=sys.stderr, flush=True)
    for acc in out["paths"].values():
        for k in [k for k in acc if k.endswith("_per_claim")]:
            acc[k] = round(acc[k] / max(1, acc["claims"]), 1)
        acc["s_per_claim"] = round(acc["seconds"] / max(1, acc["claims"]), 2)
    first, second = names
    out["identical_answers"] = sum(a == b for t in trials for a, b in zip(paras[first][t], paras[second][t]))
    out["examples"] = [[aux[t][0], paras[first][t][0], paras[second][t][0]] for t in trials[:3]]
    out["linkage"] = linkage(args, data, originals, trials, aux, paras, splitter)
    Path(args.out).write_text(json.dumps(out, indent=1, ensure_ascii=False))
    print(markdown(out))


def linkage(args, data: Path, originals, trials: list[int], aux: dict, paras: dict, splitter) -> dict:
    """Correct-linkage rate of the dense linker per release with each set of queries."""
    embedder = Embedder()
    rows: dict = {}
    for name in filter(None, args.releases.split(",")):
        rel = load_release_file(data / "anonymizations" / f"TAB_test_{name}.json", name=name, originals=originals)[0]
        docs = list(rel.corpus)
        linker = DenseLinker(embedder)
        linker.index(docs, splitter.split(docs))
        rows[name] = {}
        for qname, qs in (("verbatim", aux), *paras.items()):
            links = linker.link([qs[t] for t in trials])
            ok = sum(lk.doc >= 0 and docs[lk.doc].id == originals[t].id for lk, t in zip(links, trials))
            rows[name][qname] = round(ok / len(trials), 3)
        print(name, rows[name], file=sys.stderr, flush=True)
    if rows:
        rows["mean"] = {q: round(sum(r[q] for r in rows.values()) / len(rows), 3) for q in ("verbatim", *paras)}
    return rows


def markdown(out: dict) -> str:
    lines = ["| path | claims | s/claim | prompt tokens / claim | evaluated / claim | generated / claim | unusable |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for path, a in out["paths"].items():
        lines.append(f"| {path} | {a['claims']} | {a['s_per_claim']} | {a['prompt_tokens_per_claim']} | "
                     f"{a['prompt_evaluated_per_claim']} | {a['completion_tokens_per_claim']} | {a['failed']} |")
    lines += ["", f"identical answers: {out['identical_answers']}", "",
              "| release | " + " | ".join(out["linkage"].get("mean", ())) + " |", "|---|---:|---:|---:|"]
    for name, r in out["linkage"].items():
        lines.append(f"| {name} | " + " | ".join(str(v) for v in r.values()) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
