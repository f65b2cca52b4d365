"""The claim linker's leakage judge: its cost per claim, each speed-up against the path before it,
on the same questions (issue 57, item 2).

    python benchmarks/judge_speed.py --quick                  # 0.5B, small control, 2 TAB documents
    python benchmarks/judge_speed.py --paths before,one-pass  # 1.5B: the judge before and after
    python benchmarks/judge_speed.py --paths one-pass --evidence 2,1

Paths (each asks every question of a data set once, with no answer cache: cold):

* **before**: the judge as it was (two :meth:`LLM.logprobs` calls per question, one per answer,
  the slot's previous prompt reused as far as it matches);
* **one-pass**: :meth:`LLM.answer_logprobs`: both answers from one forward pass, the
  instructions evaluated in one fixed way and reused by every question, so a margin does not
  depend on what was asked before it (the attack's judge now); ``--evidence K``: K sentences of
  evidence per claim (the attack's ``evidence_sentences``, 1 by default, 3 before);
* **short**: one-pass with the compact question: the passage and the fact, without the closing
  "Does the passage state this fact? Answer Yes or No." (the instructions say it).

Data: the contrastive judge's control (``--control`` identifying claims of the ``--pool``
shortest TAB test documents, and of the demo's ``--demo-n`` people), each claim against its own
document, another one and its reference record, as the attack builds it
(``ClaimLinkerAttack._control_pairs``); and TAB releases: ``--docs`` seeded documents, up to
``--claims`` identifying claims each, against that document's own sanitized version (as
``claim_linker_judge.py`` does). The data sets run one after another, the paths interleaved
within each (A B, then B A), so outside load hits both alike. For each: seconds per claim (per
question asked), LLM calls, prompt tokens sent and evaluated, the control's own / other under the
contrastive rule, leakage per release, and how many decisions differ from the first path.
Data: ../shared/data/tab (not part of the repository). Writes --out (JSON), prints Markdown.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from attackers.claim_linker.judge import yesno_margin, yesno_prompt  # noqa: E402
from attackers.claim_linker.reference import null_threshold  # noqa: E402
from audit.core.data import Corpus, Release  # noqa: E402
from audit.io.loaders import load_corpus, load_release_file  # noqa: E402
from audit.models.embed import Embedder  # noqa: E402

from claim_linker_judge import SPECS, build_attack, demo_originals, release_questions  # noqa: E402
from tab import TAB  # noqa: E402


def margin_before(llm, evidence: str, claim: str) -> float:
    """The judge's margin as it was computed before issue 57: one forced call per answer."""
    if not evidence.strip():
        return float("-inf")
    prefix, yes, no = yesno_prompt(llm, evidence, claim)
    return sum(llm.logprobs(prefix, yes)) - sum(llm.logprobs(prefix, no))


def margin_short(llm, evidence: str, claim: str) -> float:
    """The one-pass margin with the compact question (``yesno_messages(..., compact=True)``): the
    passage and the fact only, the instructions (shared) already saying "Answer Yes or No"."""
    return yesno_margin(llm, evidence, claim, compact=True)


PATHS = {"before": margin_before, "one-pass": yesno_margin, "short": margin_short}


def ask(llm, path: str, questions: list[tuple[str, str]]) -> dict:
    """Every distinct question once, in order, as the attack's judge asks them; the margins in
    the questions' order, seconds, calls and tokens. ``path`` may end in ``@pollN`` (``--polls``):
    ``llm`` is then a dict of backends by that suffix."""
    fn = PATHS[path.split("@")[0]]
    if isinstance(llm, dict):
        llm = llm[path.split("@")[1]]
    used0, calls0 = dict(llm.usage), _calls(llm)
    memo: dict[tuple[str, str], float] = {}
    print(f"  {path}: asking {len(set(questions))} questions", file=sys.stderr, flush=True)
    t = time.perf_counter()
    for q in questions:
        if q not in memo:
            memo[q] = fn(llm, *q)
            if len(memo) % 8 == 0:  # partial figures, for a run cut short
                print(f"  {path}: {len(memo)} questions, {time.perf_counter() - t:.1f} s, {_calls(llm) - calls0} calls, "
                      f"{llm.usage['prompt_evaluated'] - used0.get('prompt_evaluated', 0)} tokens evaluated",
                      file=sys.stderr, flush=True)
    seconds = time.perf_counter() - t
    used = {key: llm.usage[key] - used0.get(key, 0) for key in llm.usage}
    n = len(memo)
    return {"margins": [memo[q] for q in questions], "questions": n, "passages": len({ev for ev, _ in memo}),
            "seconds": round(seconds, 2),
            "s_per_claim": round(seconds / max(1, n), 3), "calls": _calls(llm) - calls0,
            "prompt_tokens_per_claim": round(used.get("prompt_tokens", 0) / max(1, n), 1),
            "evaluated_per_claim": round(used.get("prompt_evaluated", 0) / max(1, n), 1)}


def _calls(llm) -> int:
    """Requests the llama.cpp server answered so far (counted on its handler)."""
    return getattr(llm, "_bench_calls", 0)


def count_calls(llm) -> None:
    """Count every request to the llama.cpp server (the prefix calls of shared parts too)."""
    server = llm._server
    handler = server.handle_completions

    def counted(body):
        llm._bench_calls = getattr(llm, "_bench_calls", 0) + 1
        return handler(body)

    class Counted:
        handle_completions = staticmethod(counted)
        handle_chat_completions = staticmethod(getattr(server, "handle_chat_completions", None))

    llm._server = Counted()


class DryServer:
    """Stands in for ``xllamacpp.Server`` in ``--count-only`` runs: one slot whose KV cache is
    reused as llama.cpp reuses it (the longest common prefix of its tokens and the prompt, all but
    the last token when the whole prompt is held, with ``cache_prompt``), so the calls and the
    prompt tokens evaluated are those of a real run, without the model (log-probabilities 0)."""

    def __init__(self, params):
        self.tokens: list[int] = []
        self.known: list[int] = []  # the fixed answers' tokens, reported beside the forced one

    def handle_completions(self, body: dict) -> dict:
        ids = list(body["prompt"])
        keep = 0
        if body.get("cache_prompt", True):
            while keep < min(len(ids), len(self.tokens)) and self.tokens[keep] == ids[keep]:
                keep += 1
            keep = min(keep, len(ids) - 1)
        self.tokens = ids
        forced = [int(t) for t in re.findall(r"<\[(\d+)\]>", body.get("grammar", ""))]
        content = [{"id": t, "logprob": 0.0, "top_logprobs": [{"id": k, "logprob": 0.0} for k in self.known]}
                   for t in forced]
        return {"choices": [{"text": "", "logprobs": {"content": content}}],
                "timings": {"prompt_n": len(ids) - keep}, "usage": {"prompt_tokens": len(ids), "completion_tokens": 0}}


def dry_llm(spec: str):
    """The llama.cpp backend of ``spec`` on :class:`DryServer` (its tokenizer, no model)."""
    import xllamacpp

    from audit.models.llamacpp import LlamaCppLLM
    from audit.models.specs import embedded_llm_path, parse_llm_spec, spec_identity

    real, xllamacpp.Server = xllamacpp.Server, DryServer
    try:
        parsed = parse_llm_spec(spec)
        llm = LlamaCppLLM(embedded_llm_path(parsed.name), identity=spec_identity(parsed))
    finally:
        xllamacpp.Server = real
    llm._server.known = [llm.tokenizer(a, add_special_tokens=False)["input_ids"][0] for a in ("Yes", "No")]
    return llm


def polled_llm(spec: str, poll: int, threads: int | None):
    """The llama.cpp backend of ``spec`` with its idle threads waiting at ``poll``."""
    from audit.models.llamacpp import LlamaCppLLM
    from audit.models.specs import embedded_llm_path, parse_llm_spec, spec_identity

    parsed = parse_llm_spec(spec)
    return LlamaCppLLM(embedded_llm_path(parsed.name), identity=spec_identity(parsed), n_threads=threads, poll=poll)


def control_set(attack, corpus) -> tuple[list[tuple[str, str]], int]:
    """The control's questions, own then other then reference, and its claim count."""
    own, other, _masked, refs, _ = attack._control_pairs(corpus, dense=True, references=True)
    return own + other + [(r, c) for r, (_, c) in zip(refs, own)], len(own)


def control_result(margins: list[float], n: int) -> dict:
    own, other, ref = margins[:n], margins[n:2 * n], margins[2 * n:]
    thr = null_threshold(ref)
    return {"claims": n, "threshold": round(thr, 3), "own": _mean(m > thr for m in own),
            "other": _mean(m > thr for m in other)}


def _mean(xs) -> float | None:
    xs = list(xs)
    return round(sum(xs) / len(xs), 3) if xs else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="0.5B, 6 control claims, 2 documents x 2 claims")
    ap.add_argument("--data", default=str(TAB))
    ap.add_argument("--model", default="1.5b", choices=sorted(SPECS))
    ap.add_argument("--paths", default="before,one-pass")
    ap.add_argument("--skip", default="", help="evidence/path pairs not to run, comma-separated (3/short)")
    ap.add_argument("--evidence", default="3",
                    help="sentences of evidence per claim, comma-separated")
    ap.add_argument("--sets", default="tab,demo,releases")
    ap.add_argument("--releases", default="Manual_Entity,Manual_Supression")
    ap.add_argument("--pool", type=int, default=30)
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--claims", type=int, default=3)
    ap.add_argument("--control", type=int, default=16)
    ap.add_argument("--demo-n", type=int, default=40)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--count-only", action="store_true",
                    help="no model: count the calls and tokens each path evaluates (llama.cpp's prompt reuse, simulated)")
    ap.add_argument("--polls", default="",
                    help="llama.cpp poll levels to compare, comma-separated (50: llama.cpp's default, "
                         "0: the backend's): each path runs on one backend per level, interleaved")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="judge_speed.json")
    args = ap.parse_args()
    if args.quick:
        args.model, args.control, args.docs, args.claims, args.releases = "0.5b", 6, 2, 2, "Manual_Entity"
    from audit.models.specs import load_llm

    if args.polls:
        llm = {f"poll{v}": polled_llm(SPECS[args.model], int(v), args.threads) for v in args.polls.split(",")}
        for one in llm.values():
            count_calls(one)
    else:
        llm = (dry_llm(SPECS[args.model]) if args.count_only else
               load_llm(SPECS[args.model], cache=False, n_threads=args.threads).backend)  # every question asked
        count_calls(llm)
    embedder = Embedder()
    data = Path(args.data)
    everyone = load_corpus(data / "bks" / "TAB_test_BK=Original.json", name="originals")
    keep = {d.id for d in sorted(everyone, key=lambda d: len(d.text))[: args.pool]}
    tab = Corpus([d for d in everyone if d.id in keep], name="originals")
    corpora = {"tab": tab, "demo": demo_originals(args.demo_n, args.seed)}
    report: dict = {"args": vars(args), "model": next(iter(llm.values())).identity if args.polls else llm.identity,
                    "runs": []}
    paths = [f"{p}@poll{v}" if args.polls else p for p in args.paths.split(",") for v in (args.polls.split(",") or [""])]
    flip = False
    for k in args.evidence.split(","):
        for name in args.sets.split(","):
            questions, info = build_set(name, k, args, corpora, everyone, data, embedder)
            kept = [p for p in paths if f"{k}/{p}" not in args.skip.split(",")]
            order = kept[::-1] if flip else kept
            flip = not flip
            runs = {}
            for p in order:
                runs[p] = ask(llm, p, questions)
                print(name, k, p, {x: v for x, v in runs[p].items() if x != "margins"}, file=sys.stderr, flush=True)
            for p in kept:
                row = {"set": name, "evidence": k, "path": p, **{x: v for x, v in runs[p].items() if x != "margins"}}
                row.update(score(name, runs[p]["margins"], info, report.setdefault("thresholds", {}), f"{k}/{p}"))
                base = runs[kept[0]]["margins"]
                row["decisions_differ"] = sum((a > 0) != (b > 0) for a, b in zip(base, runs[p]["margins"]))
                row["max_margin_change"] = round(max((abs(a - b) for a, b in zip(base, runs[p]["margins"])
                                                      if abs(a) != float("inf")), default=0.0), 4)
                report["runs"].append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
            Path(args.out).write_text(json.dumps(report, indent=1))
    print(markdown(report))


def evidence_attack(corpus: Corpus, k: str, args, embedder):
    """The attack that builds the questions, with ``k`` sentences of evidence per claim."""
    attack = build_attack(corpus, embedder, args.seed, args.control, True)
    attack.evidence_sentences = int(k)
    return attack


def build_set(name: str, k: str, args, corpora: dict, everyone: Corpus, data: Path, embedder):
    """The questions of one data set with evidence ``k``, and what scoring them needs."""
    if name in ("tab", "demo"):
        attack = evidence_attack(corpora[name], k, args, embedder)
        questions, n = control_set(attack, corpora[name])
        return questions, {"n": n}
    attack = evidence_attack(corpora["tab"], k, args, embedder)
    keep = set(corpora["tab"].ids)
    releases = [Release("identity", corpora["tab"])]
    for rel_name in args.releases.split(","):
        rel = load_release_file(data / "anonymizations" / f"TAB_test_{rel_name}.json", name=rel_name,
                                originals=everyone)[0]
        releases.append(Release(rel_name, Corpus([d for d in rel.corpus if d.id in keep], name=rel_name)))
    import random

    ids = sorted(random.Random(f"{args.seed}:docs").sample(corpora["tab"].ids, args.docs))
    rows = release_questions(attack, corpora["tab"], releases, ids, args.claims, args.seed)
    questions = [(ev, c) for name_ in rows for _, _, ev, c, _ in rows[name_]]
    return questions, {"rows": rows}


def score(name: str, margins: list[float], info: dict, thresholds: dict, variant: str) -> dict:
    """The control's own / other (the TAB threshold noted for the releases of the same evidence and
    path) or leakage per release."""
    if name in ("tab", "demo"):
        out = control_result(margins, info["n"])
        thresholds[f"{name} {variant}"] = out["threshold"]
        return out
    thr = thresholds.get(f"tab {variant}", 0.0)
    out, pos = {}, 0
    for rel, rows in info["rows"].items():
        part = margins[pos:pos + len(rows)]
        pos += len(rows)
        per_doc: dict[str, list[int]] = {}
        for (doc_id, *_), m in zip(rows, part):
            per_doc.setdefault(doc_id, []).append(int(m > thr))
        out[f"leakage {rel}"] = _mean(_mean(v) for v in per_doc.values())
    return out


def markdown(report: dict) -> str:
    lines = ["| set | evidence | path | questions | distinct passages | s/claim | calls | prompt tokens / claim | evaluated / claim | "
             "own / other or leakage | decisions differ |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in report["runs"]:
        figs = (f"{r['own']} / {r['other']} (threshold {r['threshold']})" if "own" in r else
                ", ".join(f"{k[8:]} {v}" for k, v in r.items() if k.startswith("leakage ")))
        lines.append(f"| {r['set']} | {r['evidence']} | {r['path']} | {r['questions']} | {r.get('passages', '-')} | "
                     f"{r['s_per_claim']} | "
                     f"{r['calls']} | {r['prompt_tokens_per_claim']} | {r['evaluated_per_claim']} | {figs} | "
                     f"{r['decisions_differ']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
