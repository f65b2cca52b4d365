"""INTACT (issue 22) on TAB: our three selections beside the published INTACT releases.

On the first ``--docs`` TAB test documents (default 10) with the manual mentions as the spans to
sanitize, runs ``defenders/intact.py`` three times with the same LLM: ``most_specific`` (which
asks for the candidates), ``least_specific`` (same candidates, from the cache) and ``attack``
(same candidates plus the inference attack). Then measures, on the same documents, ours beside
the published ``TAB_test_Manual_INTACT*`` (GPT-4-era candidates, llama3 attack), ``Manual_Entity``
and ``Manual_Supression``:

* TPS, TPI (IC of the embedded 0.5B, see the utility section) and embedding similarity;
* span-guessing recovery on one seeded sample of spans, the same spans in every release;
* phrase-search linkage (k = 2, arity 1 and 3, collection: the 127 originals);
* the share of spans that fell back to the label (the paper's Fig. 4), the rank of the chosen
  candidate, LLM calls and tokens per document (comparable across machines) and seconds per
  document (not: they depend on this machine and its load, printed beside them).

    python benchmarks/intact_tab.py --docs 10 --out intact_tab.json        # embedded 1.5B, CPU
    python benchmarks/intact_tab.py --docs 127 --llm openai:MODEL@http://host:8000/v1

``--order-docs N`` first measures, on the first N documents and in one run, what the attack's
prompt order costs (the candidates are asked once and shared, so only the attack is timed):
the prompt before issue 22's change (the candidate inside the document, every prompt evaluated
whole, all candidates of a span asked at once), the same asking only until a safe candidate is
found, and the shared layout (the document once, the candidate last) with llama.cpp reusing the
evaluated document.

The LLM answer cache is a fresh file unless ``--cache`` names one, so costs are cold costs.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from defenders.intact.sanitizer import PLACEHOLDER_LABELS  # noqa: E402
from tab import (LLMCost, bench_llm, cost_cells, cost_json, first_docs, labelled_originals, linkage,  # noqa: E402
                 machine, parser, published, sample_spans, span_recovery, utility, write_out)

PUBLISHED = {
    "Manual_INTACT (selected)": "TAB_test_Manual_INTACT.json",
    "Manual_INTACT most_specific": "TAB_test_Manual_INTACT_202408_most_specific.json",
    "Manual_INTACT least_specific": "TAB_test_Manual_INTACT_202408_least_specific.json",
    "Manual_Entity": "TAB_test_Manual_Entity.json",
    "Manual_Supression": "TAB_test_Manual_Supression.json",
}
LABELS = {"PERSON", "CODE", "LOC", "ORG", "DEM", "DATETIME", "QUANTITY", "MISC"}


def label_share(release) -> float:
    """Share of recorded spans whose replacement is the label of a type that is generalised
    (``[ORG]``, ``ORG``, or numbered as the published releases write it, ``ORG_3``): the
    fallback of the paper's Fig. 4. PERSON and CODE placeholders are by design, not counted."""
    spans = [s for d in release for s in d.spans]
    bare = [re.sub(r"_\d+$", "", (s.replacement or "").strip("[] ")).upper() for s in spans]
    return sum(b in LABELS - set(PLACEHOLDER_LABELS) for b in bare) / max(1, len(spans))


ORDERS = {  # name: (layout, lookahead, reuse_prefix)
    "before: inline, all candidates, whole prompts": ("inline", 5, False),
    "inline, until a safe candidate, whole prompts": ("inline", 1, False),
    "shared layout, until a safe candidate, prefix reuse": ("shared", 1, True),
}


def order_check(args, full, llm) -> list[dict]:
    """The attack's cost and choices under each prompt order of :data:`ORDERS` (see the doc)."""
    import shutil
    import sqlite3
    import tempfile

    from audit.runtime.progress import stage
    from audit.models.answer_cache import CachedLLM
    from defenders.intact import IntactSanitizer

    docs = first_docs(full, args.order_docs)
    folder = Path(tempfile.mkdtemp(prefix="intact-order-"))
    base = CachedLLM(llm.backend, folder / "candidates.sqlite")
    with stage(f"prompt order: candidates of {len(docs)} documents"):
        IntactSanitizer(selection="most_specific", llm=base, seed=args.seed, progress=False).sanitize(docs)
    rows, choices = [], {}
    for name, (layout, lookahead, reuse) in ORDERS.items():
        path = folder / f"{len(rows)}.sqlite"
        with sqlite3.connect(base.path) as src, sqlite3.connect(path) as dst:
            src.backup(dst)  # every configuration starts with the same cached candidates, no attack answer
        llm.backend.reuse_prefix = reuse
        cached = CachedLLM(llm.backend, path)
        with stage(f"prompt order: {name}"):
            spend, started = LLMCost(cached), time.perf_counter()
            san = IntactSanitizer(selection="attack", llm=cached, seed=args.seed, guesses=args.guesses,
                                  context_tokens=args.context_tokens, layout=layout, lookahead=lookahead,
                                  progress=False)
            rel = san.sanitize(docs, name=name)
            seconds = time.perf_counter() - started
        usage = {k: cached.usage[k] - spend.usage.get(k, 0) for k in cached.usage}
        choices[name] = [s.replacement for d in rel for s in d.spans]
        rows.append({"order": name, "attack_requests": san.stats()["counts"][name]["attack_requests"],
                     "usage": usage, "seconds": seconds, "machine": machine()})
        print(f"{name}: {json.dumps(rows[-1])}", flush=True)
        cached.store.close()
    llm.backend.reuse_prefix = True
    first = choices[next(iter(ORDERS))]
    for row in rows:
        same = sum(a == b for a, b in zip(choices[row["order"]], first))
        row["same_choice_as_before"] = f"{same}/{len(first)}"
    print("\n| attack prompt | attack requests | prompt tokens sent | prompt tokens evaluated | generated | s | "
          "speed-up | same replacement as before |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        u = row["usage"]
        print(f"| {row['order']} | {row['attack_requests']} | {u['prompt_tokens']:,} | {u['prompt_evaluated']:,} | "
              f"{u['completion_tokens']:,} | {row['seconds']:.0f} | {rows[0]['seconds'] / row['seconds']:.2f}x | "
              f"{row['same_choice_as_before']} |")
    shutil.rmtree(folder, ignore_errors=True)
    return rows


def main() -> None:
    ap = parser(__doc__, 10, quick={"spans": 5})
    ap.add_argument("--parallel", type=int, default=1,
                    help="llama.cpp slots; >1 decodes requests together (faster, answers cached apart)")
    ap.add_argument("--guesses", type=int, default=5, help="INTACT's attack: guesses per candidate (p)")
    ap.add_argument("--context-tokens", type=int, default=384, help="document context per attack prompt")
    ap.add_argument("--spans", type=int, default=40, help="spans sampled for the span-guessing evaluation")
    ap.add_argument("--guess-releases", default="ours most_specific,ours least_specific,ours attack,"
                    "Manual_INTACT (selected),Manual_Entity",
                    help="releases attacked by span guessing (comma-separated; each costs --spans LLM requests)")
    ap.add_argument("--order-docs", type=int, default=0,
                    help="first measure the attack's prompt orders on this many documents (see the doc)")
    ap.add_argument("--skip-main", action="store_true", help="only the prompt-order measurement")
    args = ap.parse_args()

    from audit.runtime.progress import stage
    from defenders.intact import IntactSanitizer

    full = labelled_originals(args.data)
    originals = first_docs(full, args.docs)
    ids = originals.ids
    print(f"{len(originals)} documents ({sum(len(d.text) for d in originals)} chars, "
          f"{sum(len(d.spans) for d in originals)} spans)", flush=True)
    llm = bench_llm(args, "intact-bench-", args.parallel)
    orders = order_check(args, full, llm) if args.order_docs else None
    if args.skip_main:
        write_out(args, llm, ids[:args.order_docs], orders=orders)
        return

    ours, costs = [], {}
    for selection in ("most_specific", "least_specific", "attack"):
        with stage(f"INTACT {selection}"):
            spend = LLMCost(llm)
            started = time.perf_counter()
            san = IntactSanitizer(selection=selection, llm=llm, seed=args.seed, guesses=args.guesses,
                                  context_tokens=args.context_tokens)
            rel = san.sanitize(originals, name=f"ours {selection}")
            seconds = time.perf_counter() - started
            counts = san.stats()["counts"][rel.name]
            costs[rel.name] = {"counts": counts, **spend.per_doc(len(ids), seconds),
                               "machine": machine()}
            ours.append(rel)
            print(f"{rel.name}: {seconds / len(ids):.1f} s/doc, {cost_json(costs[rel.name])}; "
                  f"counts {json.dumps(counts)}", flush=True)

    releases = ours + [published(n, f, full, ids, args.data) for n, f in PUBLISHED.items()]
    with stage("utility"):
        util = utility(originals, releases)
    with stage("phrase search"):
        links = linkage(full, releases)
    keys = sample_spans(releases[0], args.spans, args.seed)
    with stage(f"span guessing, {len(keys)} spans"):
        wanted = {x.strip() for x in args.guess_releases.split(",")}
        guessed = span_recovery(llm, full, [r for r in releases if r.name in wanted], keys, seed=args.seed)

    rows = []
    for rel in releases:
        u, link, g = util[rel.name], links[rel.name], guessed.get(rel.name)
        rows.append({"release": rel.name, "tps": u["tps"]["value"], "tpi": u["tpi"]["value"],
                     "similarity": u["similarity"]["value"], "label_share": label_share(rel),
                     "span_guess": None if g is None else {k: g[k] for k in ("recovered", "ci", "n")},
                     "linked_a1": link["a1"]["rate"], "linked_a3": link["a3"]["rate"],
                     "residual_a1": link["a1"]["residual"], **costs.get(rel.name, {})})
    print("\n| release | TPS | TPI | similarity | label share | span-guess recovered | linked a=1 | "
          "linked a≤3 | LLM requests/doc | tokens/doc (prompt + gen, cold) | s/doc |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        g = r["span_guess"]
        sg = "–" if g is None else f"{g['recovered']:.3f} [{g['ci'][0]:.2f}, {g['ci'][1]:.2f}] (n={g['n']})"
        cost = cost_cells(r)
        print(f"| {r['release']} | {r['tps']:.3f} | {r['tpi']:.3f} | {r['similarity']:.3f} | {r['label_share']:.3f} "
              f"| {sg} | {r['linked_a1']:.2f} | {r['linked_a3']:.2f} | {' | '.join(cost)} |")
    by = {r["release"]: r for r in rows}
    most, least, sel = by["ours most_specific"], by["ours least_specific"], by["ours attack"]
    print(f"\nPaper's ordering, ours: TPS least {least['tps']:.3f} < selected {sel['tps']:.3f} < most "
          f"{most['tps']:.3f}: {least['tps'] < sel['tps'] < most['tps']}; span-guess recovery selected "
          f"{sel['span_guess']['recovered']:.3f} <= most {most['span_guess']['recovered']:.3f}: "
          f"{sel['span_guess']['recovered'] <= most['span_guess']['recovered']}")
    examples = []
    for a, b, c in zip(*(sorted(ours[i].corpus, key=lambda d: d.id) for i in range(3))):
        for sa, sb, sc in zip(a.spans, b.spans, c.spans):
            if len(examples) < 25 and sa.replacement != sb.replacement:
                examples.append({"doc": a.id, "original": sa.original, "label": sa.label, "most": sa.replacement,
                                 "least": sb.replacement, "selected": sc.replacement})
    for ex in examples[:12]:
        print("  ", ex)
    write_out(args, llm, ids, rows=rows, span_guess=guessed, examples=examples, orders=orders)
    llm.close()


if __name__ == "__main__":
    main()
