"""The prompt-based LLM anonymizer (issue 15) on TAB: the four prompt families side by side.

On the first ``--docs`` TAB test documents (default 20), each family of
``defenders/prompt_anonymizer.py`` (mvm, sparks, student, ppdp) masks the originals with the same
LLM; then, on the same documents, each release and the published
``TAB_test_gpt-3.5-turbo-0125_mvm-st`` and ``spaCy_Entity`` get:

* precision / recall of the masked characters against the manual TAB mentions
  (``TAB_test_Manual_Entity.json``; the real TAB gold with its masking decisions is not here);
* TPI (IC of the embedded 0.5B, cached per document) and embedding similarity;
* phrase-search linkage (k = 2, arity 1 and 3, collection: the 127 originals);
* TRIR with ``--trir`` (the attacker trained once on the 127-person public background and kept
  in the attacker cache; 30–45 min of training on 2 CPU cores the first time);
* LLM calls and tokens per document (prompt + generation, the paper's Table 2; comparable across
  machines) and seconds per document (this machine and its load, printed beside them).

    python benchmarks/prompt_anonymizer_tab.py --docs 20 --out prompt_tab.json      # 1.5B, CPU
    python benchmarks/prompt_anonymizer_tab.py --docs 127 --llm openai:MODEL@http://host:8000/v1

The LLM answer cache is a fresh file unless ``--cache`` names one, so costs are cold costs.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tab import (LLMCost, bench_llm, cost_cells, cost_json, first_docs, labelled_originals, linkage,  # noqa: E402
                 machine, parser, published, utility, write_out)

FAMILIES = ("mvm", "sparks", "student", "ppdp")
PUBLISHED = {"gpt-3.5-turbo-0125_mvm-st": "TAB_test_gpt-3.5-turbo-0125_mvm-st.json",
             "spaCy_Entity": "TAB_test_spaCy_Entity.json"}


def masked_chars(release) -> dict[str, set[int]]:
    """Per document, the original character offsets that the release replaced."""
    out = {}
    for doc in release:
        chars: set[int] = set()
        for s in doc.spans:
            if s.orig_start is not None and s.orig_end is not None:
                chars.update(range(s.orig_start, s.orig_end))
        out[doc.id] = chars
    return out


def precision_recall(release, gold) -> dict[str, float]:
    """Micro-averaged precision and recall of masked characters (whitespace left out)."""
    masked = masked_chars(release)
    tp = fp = fn = 0
    for doc in gold:
        text = doc.text
        want = {i for s in doc.spans for i in range(s.start, s.end) if not text[i].isspace()}
        got = {i for i in masked.get(doc.id, set()) if i < len(text) and not text[i].isspace()}
        tp, fp, fn = tp + len(want & got), fp + len(got - want), fn + len(want - got)
    return {"precision": tp / max(1, tp + fp), "recall": tp / max(1, tp + fn)}


def trir_attack(seed: int, windows: int | None, threads: int | None):
    """The attacker of the 127-person public background (trained once, then from the cache)."""
    from attackers.trir import TRIRAttack

    # The attacker before issue 19 (5 epochs, no augmentation), at most ``windows`` windows per
    # person per epoch as in the TRIR section's 127-person table: the paper budget on this
    # background of long judgments would train for many hours on 2 CPU cores (benchmarks/README.md).
    return TRIRAttack(seed=seed, use_cache=True, budget="fast", augment_ner=False,
                      max_windows_per_class=windows, num_threads=threads)


def trir_rates(releases, data: Path, seed: int, windows: int | None = 24,
               threads: int | None = None) -> dict[str, dict]:
    """TRIR of each release with the attacker trained on the 127-person public background."""
    from audit.core.data import Scenario
    from audit.io.loaders import load_corpus

    background = load_corpus(data / "bks" / "TAB_test_BK=Public.json")
    originals = labelled_originals(data)
    attack = trir_attack(seed, windows, threads)
    scenario = Scenario(originals=originals, releases=tuple(releases), background=background)
    attack.fit(scenario)
    out = {}
    for rel in releases:
        head = attack.evaluate(scenario, rel)[0]
        out[rel.name] = {"trir": head.value, "ci": list(head.ci), "n": head.n}
    return out


def main() -> None:
    ap = parser(__doc__, 20, quick={"families": "mvm"})
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--chunk-tokens", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=1, help="1 = the paper's method; more = the iterative variant")
    ap.add_argument("--trir", action="store_true", help="also run TRIR (trains the attacker once if not cached)")
    ap.add_argument("--trir-windows", type=int, default=24,
                    help="TRIR: at most this many training windows per person per epoch (0: all)")
    ap.add_argument("--trir-threads", type=int, default=None, help="TRIR: torch threads")
    ap.add_argument("--trir-only", action="store_true",
                    help="only train (and cache) the TRIR attacker, e.g. on one core beside the LLM run")
    args = ap.parse_args()
    windows = args.trir_windows or None

    from audit.runtime.progress import stage

    if args.trir_only:
        from audit.core.data import Scenario
        from audit.io.loaders import load_corpus

        background = load_corpus(args.data / "bks" / "TAB_test_BK=Public.json")
        with stage("TRIR attacker"):
            trir_attack(args.seed, windows, args.trir_threads).fit(Scenario(background=background))
        return
    from defenders.prompt_anonymizer import PromptAnonymizer

    full = labelled_originals(args.data, outer=True)
    originals = first_docs(full, args.docs)
    ids = originals.ids
    bare = first_docs(labelled_originals(args.data), args.docs)  # what the LLM reads: no spans needed
    print(f"{len(originals)} documents ({sum(len(d.text) for d in originals)} chars)", flush=True)
    llm = bench_llm(args, "prompt-bench-")

    ours, costs = [], {}
    for family in [f.strip() for f in args.families.split(",") if f.strip()]:
        with stage(f"prompt anonymizer, {family}"):
            spend = LLMCost(llm)
            started = time.perf_counter()
            san = PromptAnonymizer(family=family, llm=llm, seed=args.seed, chunk_tokens=args.chunk_tokens,
                                   rounds=args.rounds)
            rel = san.sanitize(bare, name=f"ours {family}" + (f" ({args.rounds} rounds)" if args.rounds > 1 else ""))
            seconds = time.perf_counter() - started
            costs[rel.name] = {"counts": san.stats().get("counts", {}), **spend.per_doc(len(ids), seconds),
                               "machine": machine()}
            ours.append(rel)
            print(f"{rel.name}: {seconds / len(ids):.1f} s/doc, {cost_json(costs[rel.name])}, counts "
                  f"{json.dumps(costs[rel.name]['counts'])}", flush=True)

    releases = ours + [published(n, f, full, ids, args.data) for n, f in PUBLISHED.items()]
    with stage("utility"):
        util = utility(originals, releases, metrics=("tpi", "similarity"))
    with stage("phrase search"):
        links = linkage(full, releases)
    trir = {}
    if args.trir:
        with stage("TRIR"):
            trir = trir_rates(releases, args.data, args.seed, windows, args.trir_threads)

    rows = []
    for rel in releases:
        u, link = util[rel.name], links[rel.name]
        rows.append({"release": rel.name, **precision_recall(rel, originals), "tpi": u["tpi"]["value"],
                     "similarity": u["similarity"]["value"], "linked_a1": link["a1"]["rate"],
                     "linked_a3": link["a3"]["rate"], "residual_a1": link["a1"]["residual"],
                     "masked_spans_per_doc": sum(len(d.spans) for d in rel) / len(ids),
                     "trir": trir.get(rel.name), **costs.get(rel.name, {})})
    print("\n| release | precision | recall | TPI | similarity | linked a=1 | linked a≤3 | TRIR | masked spans/doc "
          "| LLM requests/doc | tokens/doc (prompt + gen) | s/doc |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        cost = cost_cells(r)
        tr = "–" if not r["trir"] else f"{r['trir']['trir']:.3f}"
        print(f"| {r['release']} | {r['precision']:.3f} | {r['recall']:.3f} | {r['tpi']:.3f} | {r['similarity']:.3f} "
              f"| {r['linked_a1']:.2f} | {r['linked_a3']:.2f} | {tr} | {r['masked_spans_per_doc']:.1f} | "
              f"{' | '.join(cost)} |")
    examples = {rel.name: sorted({s.original for d in rel for s in d.spans if s.original})[:30] for rel in ours}
    for name, terms in examples.items():
        print(f"  {name} masked e.g.: {terms[:15]}")
    write_out(args, llm, ids, rows=rows, examples=examples)
    llm.close()


if __name__ == "__main__":
    main()
