"""Utility metrics (issue 7) on TAB: the 22 sanitizations of the 127 ECHR test documents.

Computes TPI, TPS (causal IC from the embedded Qwen2.5-Coder-0.5B through transformers,
one forward pass per window), NMI, document similarity, ROUGE-L, and precision/recall
against the closest thing to gold available here (the Manual_Entity spans: all of
annotator 1's mentions, NO_MASK ones included; the real TAB gold is not available), and
prints them beside the published TPI/TPS figures (BERT masked-LM IC) with Spearman rank
correlations. IC time per document is reported.

    python benchmarks/utility_tab.py --quick            # a few short documents
    python benchmarks/utility_tab.py --docs 20 --out utility_tab.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from tab import TAB as DATA  # noqa: E402  (the benchmarks' one helper module, beside this script)

PUBLISHED_TPI = {"St.NER3_Entity": .882, "St.NER4_Entity": .837, "St.NER7_Entity": .794, "spaCy_Entity": .732,
                 "Presidio_Entity": .861, "gpt-3.5-turbo-0125_mvm-st": .831, "Manual_Supression": .777}
PUBLISHED_TPS = {"St.NER3_Entity": .915, "St.NER4_Entity": .883, "St.NER7_Entity": .871, "spaCy_Entity": .826,
                 "Presidio_Supression_Ildiko": .861, "Presidio_Entity": .918, "Manual_Supression": .777,
                 "Manual_Entity": .848, "Manual_Presidio_gpt-3.5-turbo-0125": .858, "Manual_Dou": .884,
                 "Manual_INTACT": .885}


def spearman(pairs: list[tuple[float, float]]) -> float | None:
    from scipy.stats import spearmanr

    if len(pairs) < 3 or len({a for a, _ in pairs}) < 2 or len({b for _, b in pairs}) < 2:
        return None  # undefined for constant inputs
    return float(spearmanr([a for a, _ in pairs], [b for _, b in pairs]).statistic)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--quick", action="store_true", help="4 shortest documents, 5 releases")
    ap.add_argument("--docs", type=int, default=0, help="use the N shortest documents (0 = all 127)")
    ap.add_argument("--llm", default="transformers:qwen2.5-coder-0.5b")
    ap.add_argument("--context-tokens", type=int, default=256)
    ap.add_argument("--metrics", default="tpi,tps,nmi,precision,recall,similarity,rouge")
    ap.add_argument("--out", default=None, help="write all results (JSON) here")
    args = ap.parse_args()

    from audit.core.data import Corpus, Document, Scenario
    from audit.core.registry import registry
    from audit.io.loaders import load_corpus, load_release_file
    from audit.metrics import UtilityContext

    data = Path(args.data)
    full = load_corpus(data / "bks" / "TAB_test_BK=Original.json", name="TAB_test")
    n = 4 if args.quick else (args.docs or len(full))
    docs = sorted(full, key=lambda d: len(d.text))[:n]
    # gold for precision/recall: the Manual_Entity spans (see module doc)
    gold_spans = json.loads((data / "anonymizations" / "TAB_test_Manual_Entity.json").read_text())
    from audit.core.data import Span, outermost

    def with_gold(d: Document) -> Document:
        kept, _ = outermost([Span(s, e, lab) for s, e, lab in gold_spans[d.id]])
        return d.with_spans(kept)

    originals = Corpus([with_gold(d) for d in docs], name="TAB_test")
    files = sorted((data / "anonymizations").glob("TAB_test_*.json"))
    if args.quick:
        keep = ("St.NER3_Entity", "spaCy_Entity", "Manual_Supression", "Manual_Entity", "Manual_INTACT")
        files = [f for f in files if f.stem.removeprefix("TAB_test_") in keep]
    releases = []
    for f in files:
        name = f.stem.removeprefix("TAB_test_")
        for r in load_release_file(f, name=name, originals=full):
            sub = Corpus([r.corpus[d.id] for d in docs], name=r.name)
            releases.append(dataclasses.replace(r, corpus=sub))
    metrics = [m.strip() for m in args.metrics.split(",")]
    print(f"{len(originals)} documents ({sum(len(d.text) for d in originals)} chars), {len(releases)} releases")

    t0 = time.time()
    ctx = UtilityContext(originals, llm=args.llm, context_tokens=args.context_tokens, progress=True)
    if {"tpi", "tps", "precision", "recall"} & set(metrics):
        t = time.time()
        ctx.terms_ic()
        ic_wall = time.time() - t
        secs = ctx.ic_seconds()
        print(f"IC: {ctx.estimator.identity}")
        print(f"IC wall {ic_wall:.1f}s (incl. model load); per document {sum(secs) / max(1, len(secs)):.1f}s "
              f"(cached runs: from disk); terms {sum(len(t) for t, _ in ctx.terms_ic().values())}")
    scenario = Scenario(originals=originals, releases=tuple(releases))
    objs = [registry.create("metric", m, context=ctx) for m in metrics]
    table: dict[str, dict[str, float]] = {}
    all_results = []
    for rel in releases:
        row = {}
        for obj in objs:
            res = obj.evaluate(scenario, rel)[0]
            all_results.append(res.to_dict())
            row[obj.name] = res.value
        table[rel.name] = row
    print(f"metrics wall {time.time() - t0:.1f}s\n")

    cols = metrics
    print(f"{'release':38s} " + " ".join(f"{c:>9s}" for c in cols) + "   pubTPI   pubTPS")
    for name, row in table.items():
        pub = (f"{PUBLISHED_TPI[name]:8.3f}" if name in PUBLISHED_TPI else "       -") + \
              (f" {PUBLISHED_TPS[name]:8.3f}" if name in PUBLISHED_TPS else "        -")
        print(f"{name:38s} " + " ".join(f"{row[c]:9.3f}" for c in cols) + "  " + pub)
    for metric, pub in (("tpi", PUBLISHED_TPI), ("tps", PUBLISHED_TPS)):
        if metric in cols:
            pairs = [(table[k][metric], v) for k, v in pub.items() if k in table]
            rho = spearman(pairs)
            print(f"Spearman({metric}, published {metric.upper()}) over {len(pairs)} releases: "
                  f"{'n/a' if rho is None else f'{rho:.3f}'}")
    if "tps" in cols and "nmi" in cols:
        rho = spearman([(r["tps"], r["nmi"]) for r in table.values()])
        print(f"Spearman(TPS, NMI) over all releases: {'n/a' if rho is None else f'{rho:.3f}'}")
    if args.out:
        Path(args.out).write_text(json.dumps({"table": table, "results": all_results}, indent=1))


if __name__ == "__main__":
    main()
