"""The delinker (issue 16) on TAB: what still links after plain and guided rewriting.

Input: the first ``--docs`` documents of ``TAB_test_Manual_Entity`` (manual mentions replaced by
their entity type). The adversary searches the 127 TAB test originals. With the same LLM:

* ``plain``: the paper's baseline, whole chunks rewritten without being told what links;
* ``guided a=1``: the delinker, rewriting the uniquely-linking n-grams (k = 2, n <= 7);
* ``guided a<=3``: the same, also breaking combinations of up to 3 common n-grams.

For each (and the input) it reports the linking n-grams left at arity 1 and arity <= 3 as a share
of the input's (the paper's Table 1: plain 0.597 at arity 1, guided 0.001 / 0.002), the
phrase-search attack's linkage rate, the embedding similarity to the input, rounds used, spans
rewritten and redacted, LLM calls and tokens per document (comparable across machines) and
seconds per document (this machine and its load, printed beside them). ``guided a=1 (no
redaction)`` (``on_failure=keep``, answered from the cache of ``guided a=1``) shows what the LLM
fixed on its own, before the redaction fallback.

    python benchmarks/delinker_tab.py --docs 10 --out delinker_tab.json         # 1.5B, CPU
    python benchmarks/delinker_tab.py --docs 127 --llm openai:MODEL@http://host:8000/v1
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tab import (LLMCost, bench_llm, cost_cells, cost_json, labelled_originals, linkage, machine, parser,  # noqa: E402
                 published, utility, write_out)

#: plain rewrites each chunk once, as the paper's baseline does (the sanitizer's plain mode could
#: also re-send the chunks that still link, ``max_rounds``)
VARIANTS = {"plain": {"plain": True, "arity": 1, "max_rounds": 1}, "guided a=1": {"arity": 1},
            # the same LLM answers as "guided a=1" (from the cache): what the LLM fixed on its own
            "guided a=1 (no redaction)": {"arity": 1, "on_failure": "keep"}, "guided a<=3": {"arity": 3}}


def linking_counts(index, release, arity: int) -> int:
    """Linking n-grams (the minimal set, plus one member per linking combination) in a release."""
    from attackers.phrase_search.attack import DEFAULT_PLACEHOLDER_PATTERN
    from attackers.phrase_search.linking import blocked_ranges, linking_ngrams

    total = 0
    for doc in release:
        blocked = blocked_ranges(doc.text, doc.spans, DEFAULT_PLACEHOLDER_PATTERN)
        total += len(linking_ngrams(index, doc.text, 2, arity, blocked=blocked).to_rephrase())
    return total


def main() -> None:
    ap = parser(__doc__, 10, "the first N documents of Manual_Entity", quick={"max_rounds": 1})
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--max-rounds", type=int, default=3, help="rounds of the guided variants")
    args = ap.parse_args()

    from audit.runtime.progress import stage
    from defenders.delinker import Delinker

    full = labelled_originals(args.data)
    ids = full.ids[:args.docs]
    source = published("Manual_Entity (input)", "TAB_test_Manual_Entity.json", full, ids, args.data)
    print(f"{len(ids)} documents of Manual_Entity; collection {len(full)} originals", flush=True)
    llm = bench_llm(args, "delinker-bench-")

    releases, costs = [source], {}
    for variant in [v.strip() for v in args.variants.split(",") if v.strip()]:
        with stage(f"delinker, {variant}"):
            spend = LLMCost(llm)
            started = time.perf_counter()
            san = Delinker(collection=full, llm=llm, seed=args.seed,
                           **{"max_rounds": args.max_rounds, **VARIANTS[variant]})
            rel = san.sanitize(source.corpus, name=variant)
            seconds = time.perf_counter() - started
            costs[variant] = {"totals": san.stats()["delinker"][variant], **spend.per_doc(len(ids), seconds),
                              "machine": machine()}
            releases.append(rel)
            print(f"{variant}: {seconds / len(ids):.0f} s/doc, {cost_json(costs[variant])}, totals "
                  f"{json.dumps(costs[variant]['totals'])}", flush=True)
            index = san.index()

    with stage("linking n-grams left"):
        left = {r.name: {a: linking_counts(index, r, a) for a in (1, 3)} for r in releases}
    with stage("phrase search"):
        links = linkage(full, releases)
    with stage("similarity"):
        sims = {name: u["similarity"]["value"] for name, u in
                utility(source.corpus, releases, metrics=("similarity",)).items()}

    base = left[source.name]
    rows = []
    for rel in releases:
        c = costs.get(rel.name, {})
        rows.append({"release": rel.name, "left_a1": left[rel.name][1], "left_a3": left[rel.name][3],
                     "share_a1": left[rel.name][1] / max(1, base[1]), "share_a3": left[rel.name][3] / max(1, base[3]),
                     "linked_a1": links[rel.name]["a1"]["rate"], "linked_a3": links[rel.name]["a3"]["rate"],
                     "similarity": sims[rel.name], **c})
    print("\n| release | linking n-grams left, a=1 (share) | a≤3 (share) | linked a=1 | linked a≤3 | similarity "
          "| rounds (max) | rewritten / redacted | LLM requests/doc | tokens/doc (prompt + gen) | s/doc |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        t = r.get("totals")
        extra = ("–", "–", "–", "–", "–")
        if t:
            extra = (f"{t['max_rounds_used']}", f"{t['rewritten']} / {t['redacted']}", *cost_cells(r))
        print(f"| {r['release']} | {r['left_a1']} ({r['share_a1']:.3f}) | {r['left_a3']} ({r['share_a3']:.3f}) | "
              f"{r['linked_a1']:.2f} | {r['linked_a3']:.2f} | {r['similarity']:.3f} | {' | '.join(extra)} |")
    examples = {}
    for rel in releases[1:]:
        examples[rel.name] = [(s.original, s.replacement, s.label) for d in rel for s in d.spans
                              if s.label in ("REPHRASED", "REDACTED")][:12]
        print(f"  {rel.name}: {examples[rel.name][:6]}")
    write_out(args, llm, ids, rows=rows, examples=examples)
    llm.close()


if __name__ == "__main__":
    main()
