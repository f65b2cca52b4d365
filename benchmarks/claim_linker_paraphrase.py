"""The attacker's paraphrases, one request a claim against one request a document (issue 69).

    python benchmarks/claim_linker_paraphrase.py --docs 10            # a seeded slice of Manual_Entity

The claim linker rewords the 3 claims of each original that the attacker knows before it
searches the release. It asked once a claim; it now asks once a document, the 3 claims
together as a JSON array, the system prompt evaluated once and reused
(:func:`attackers.claim_linker.paraphrase_documents`). On a seeded slice of ``--docs`` TAB test
judgments (the slice of ``claim_linker_ppi.py --tab``: the same seed, the same judgments), both
designs paraphrase the same aux claims (the attack's own choice of them) with the embedded 1.5B,
each from a fresh answer cache (cold), and the script gives per design:

* seconds, requests, prompt tokens evaluated and tokens generated;
* failures (no usable paraphrase, or one that only repeats the claim: the claim is then kept);
* how close each paraphrase stays to its claim (ROUGE-L, stemmed), and to the document's other
  known claims (a paraphrase that mixes claims would rise there; ``closer_to_another_claim``
  counts those that read more like another of the document's claims than like their own);
* the links: every slice document's paraphrased claims searched against the whole release
  (127 records, the attack's dense linker), correct links, and where the two designs link
  differently. The judge reads the linked record and the original's claims, never the
  paraphrases, so the same links give the same leakage figure.

Writes --out (JSON), prints Markdown. Say how busy the machine was.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attackers.claim_linker import (  # noqa: E402
    DenseLinker, SentenceSplitter, paraphrase_claims, paraphrase_documents, select_aux,
)
from audit.core.text import rouge_l_text  # noqa: E402
from audit.io.loaders import load_corpus, load_release_file  # noqa: E402
from audit.models.embed import Embedder  # noqa: E402
from audit.models.specs import load_llm  # noqa: E402

TAB = ROOT.parent / "shared" / "data" / "tab"


def per_claim(llm, groups, seed):
    flat = [c for g in groups for c in g]
    paras, failed = paraphrase_claims(llm, flat, seed=seed, progress=True)
    it = iter(paras)
    return [[next(it) for _ in g] for g in groups], failed


def per_document(llm, groups, seed):
    return paraphrase_documents(llm, groups, seed=seed, progress=True)


DESIGNS = {"per claim (before)": per_claim, "per document (now)": per_document}


def closeness(groups, paras) -> dict:
    """ROUGE-L of each paraphrase with its own claim and with the document's other claims."""
    own, other, same, closer = [], [], 0, 0
    for g, p in zip(groups, paras):
        for k, (claim, para) in enumerate(zip(g, p)):
            same += para == claim
            own.append(rouge_l_text(claim, para, stem=True))
            others = [rouge_l_text(c, para, stem=True) for j, c in enumerate(g) if j != k]
            other += others
            closer += bool(others) and max(others) > own[-1]  # reads more like another known claim
    return {"rouge_l_own": round(statistics.mean(own), 3), "rouge_l_other_claims": round(statistics.mean(other), 3),
            "closer_to_another_claim": closer, "kept_verbatim": same, "claims": len(own)}


def run_design(name, groups, seed, llm_spec) -> tuple[dict, list[list[str]]]:
    llm = load_llm(llm_spec, cache_path=str(Path(tempfile.mkdtemp()) / "llm.sqlite"))
    # one short untimed request first, so that neither design pays the model's first pages and warm-up
    llm.complete([{"role": "user", "content": "Say OK."}], max_tokens=4, seed=seed)
    before, calls = dict(llm.usage), llm.stats["backend_calls"]
    t = time.perf_counter()
    paras, failed = DESIGNS[name](llm, groups, seed)
    seconds = time.perf_counter() - t
    usage = {k: llm.usage[k] - before.get(k, 0) for k in llm.usage}
    out = {"seconds": round(seconds, 1), "seconds_a_document": round(seconds / len(groups), 2),
           "requests": llm.stats["backend_calls"] - calls, "failures": failed, **usage, **closeness(groups, paras)}
    llm.close()
    print(name, out, file=sys.stderr, flush=True)
    return out, paras


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", default="Manual_Entity")
    ap.add_argument("--docs", type=int, default=10, help="judgments in the slice (seeded as claim_linker_ppi.py --tab)")
    ap.add_argument("--llm", default=None, help="LLM spec (default: the embedded 1.5B)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--designs", default=",".join(DESIGNS), help="the designs, in the order they run")
    ap.add_argument("--out", default="claim_linker_paraphrase.json")
    args = ap.parse_args()
    originals = load_corpus(TAB / "bks" / "TAB_test_BK=Original.json", name="originals")
    (release,) = load_release_file(TAB / "anonymizations" / f"TAB_test_{args.release}.json", name=args.release,
                                   originals=originals)
    keep = sorted(random.Random(args.seed).sample([d.id for d in originals], args.docs))
    splitter = SentenceSplitter()
    t = time.perf_counter()
    sliced = [originals[i] for i in keep]
    orig_claims = splitter.split(sliced)
    docs = list(release.corpus)
    rel_claims = splitter.split(docs)
    split_seconds = time.perf_counter() - t
    groups = []
    for doc, claims in zip(sliced, orig_claims):
        idx = select_aux(claims, 3, "random", random.Random(f"{args.seed}:aux:{doc.id}"))
        groups.append([claims[i].text for i in idx])
    report = {"release": args.release, "slice": keep, "seed": args.seed, "split_seconds": round(split_seconds, 1),
              "designs": {}}
    queries = {"verbatim": groups}
    for name in args.designs.split(","):
        report["designs"][name], queries[name] = run_design(name, groups, args.seed, args.llm)
    linker = DenseLinker(Embedder())
    linker.index(docs, rel_claims)
    targets = [next(j for j, d in enumerate(docs) if d.id == o.id) for o in sliced]
    links = {name: [link.doc for link in linker.link(q)] for name, q in queries.items()}
    report["links"] = {name: {"correct": sum(a == b for a, b in zip(got, targets)), "of": len(targets)}
                       for name, got in links.items()}
    a, b = (links[n] for n in DESIGNS)
    report["links"]["designs_link_differently"] = sum(x != y for x, y in zip(a, b))
    report["paraphrases"] = [[{"claim": c, **{n: queries[n][g][k] for n in DESIGNS if n in queries}}
                              for k, c in enumerate(group)] for g, group in enumerate(groups)]
    Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False))
    print(markdown(report))


def markdown(report: dict) -> str:
    lines = ["| design | seconds (a document) | requests | prompt tokens evaluated | generated | failures | "
             "ROUGE-L own / other claims | closer to another claim | correct links |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in report["designs"].items():
        link = report["links"][name]
        lines.append(f"| {name} | {r['seconds']} ({r['seconds_a_document']}) | {r['requests']} | "
                     f"{r['prompt_evaluated']} | {r['completion_tokens']} | {r['failures']} of {r['claims']} | "
                     f"{r['rouge_l_own']} / {r['rouge_l_other_claims']} | {r.get('closer_to_another_claim')} | "
                     f"{link['correct']} of {link['of']} |")
    v = report["links"]["verbatim"]
    lines.append(f"\nverbatim claims link {v['correct']} of {v['of']}; the designs link "
                 f"{report['links']['designs_link_differently']} documents differently")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
