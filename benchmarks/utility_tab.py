"""Utility metrics (issue 7) on TAB: the 22 sanitizations of the 127 ECHR test documents.

Computes TPI, TPS (causal IC from the embedded Qwen2.5-Coder-0.5B through transformers,
one forward pass per window), NMI, document similarity, ROUGE-L, and precision/recall
against the closest thing to gold available here (the Manual_Entity spans: all of
annotator 1's mentions, NO_MASK ones included; the real TAB gold is not available), and
prints them beside the published TPI/TPS figures (BERT masked-LM IC) with Spearman rank
correlations. IC time per document is reported.

    python benchmarks/utility_tab.py --quick            # a few short documents
    python benchmarks/utility_tab.py --docs 20 --out utility_tab.json
    python benchmarks/utility_tab.py --ic-speed old,256:fp32,4096:bf16 --docs 6   # IC's cost and fidelity
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
    ap.add_argument("--quick", action="store_true", help="4 shortest documents (--docs: fewer), 5 releases")
    ap.add_argument("--docs", type=int, default=0, help="use the N shortest documents (0 = all 127)")
    ap.add_argument("--llm", default="transformers:qwen2.5-coder-0.5b")
    ap.add_argument("--context-tokens", type=int, default=256)
    ap.add_argument("--metrics", default="tpi,tps,nmi,precision,recall,similarity,rouge")
    ap.add_argument("--out", default=None, help="write all results (JSON) here")
    ap.add_argument("--ic-speed", default=None, metavar="CONFIGS",
                    help="compare IC configurations instead (e.g. old,256:fp32,4096:bf16: `old` is the scoring "
                         "before 2026-12-07, CTX:PRECISION the CausalIC of today) on --docs documents spread "
                         "over TAB's lengths: seconds, and each term's IC against the first configuration's")
    args = ap.parse_args()
    if args.ic_speed:
        return ic_speed(args)

    from audit.core.data import Corpus, Document, Scenario
    from audit.core.registry import registry
    from audit.io.loaders import load_corpus, load_release_file
    from audit.metrics import UtilityContext

    data = Path(args.data)
    full = load_corpus(data / "bks" / "TAB_test_BK=Original.json", name="TAB_test")
    n = (args.docs or 4) if args.quick else (args.docs or len(full))
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


# ----------------------------------------------------------------------------- --ic-speed

def old_one_pass(model, tok, text: str, terms, size: int = 256, batch_size: int = 4):
    """The one-pass causal IC as it was before 2026-12-07 (issue 69: "every token twice"): windows
    of ``size`` tokens every ``size // 2``, the whole output layer and a log-softmax at every
    position of every window, float32. Kept here as the reference the new scoring is timed and
    compared against."""
    import numpy as np
    import torch

    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]
    n, logp = len(ids), np.zeros(len(enc["input_ids"]))
    bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    half = max(1, size // 2)
    jobs, start = [([bos, *ids[:size]], 1, 0)], half
    while start + half < n:
        jobs.append((ids[start:start + size], half, start))
        start += half
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    for j in range(0, len(jobs), batch_size):
        batch = jobs[j:j + batch_size]
        width = max(len(w) for w, _, _ in batch)
        x = torch.tensor([w + [pad] * (width - len(w)) for w, _, _ in batch])
        m = torch.tensor([[1] * len(w) + [0] * (width - len(w)) for w, _, _ in batch])
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=x, attention_mask=m).logits.float(), dim=-1)
        for row, (w, first, abs_start) in enumerate(batch):
            shift = 1 if abs_start == 0 and first == 1 else 0
            for p in range(first, len(w)):
                logp[abs_start + p - shift] = float(lp[row, p - 1, w[p]])
    starts, ends = np.array([a for a, _ in offsets]), np.array([b for _, b in offsets])
    return np.array([max(0.0, -float(logp[(starts < t.end) & (ends > t.start)].sum())) for t in terms])


def spread(docs: list, n: int, tok) -> list:
    """``n`` documents evenly spaced in token length, the longest included."""
    by_len = sorted(docs, key=lambda d: len(tok(d.text, add_special_tokens=False)["input_ids"]))
    if n >= len(by_len):
        return by_len
    step = (len(by_len) - 1) / max(1, n - 1)
    return [by_len[round(i * step)] for i in range(n)]


def ic_speed(args) -> None:
    """Each IC configuration on the same documents: seconds per document and token, and each
    term's IC against the first configuration's (Pearson on values, Spearman on ranks)."""
    import numpy as np
    import torch
    from scipy.stats import pearsonr, spearmanr

    from audit.metrics import CausalIC
    from audit.metrics.terms import TermExtractor
    from audit.models.nlp import Spacy
    from audit.models.specs import load_llm
    from tab import labelled_originals, load_avg

    t = time.perf_counter()
    llm = load_llm(args.llm, cache=False)
    model, tok = llm.in_process
    load_s = time.perf_counter() - t
    docs = spread(list(labelled_originals(Path(args.data))), args.docs or 4, tok)
    t = time.perf_counter()
    extract = TermExtractor(Spacy())
    terms = [extract(d.text) for d in docs]
    spacy_s = time.perf_counter() - t
    tokens = [len(tok(d.text, add_special_tokens=False)["input_ids"]) for d in docs]
    print(f"{len(docs)} documents, {sum(tokens)} tokens ({min(tokens)}-{max(tokens)}), "
          f"{sum(len(x) for x in terms)} terms; model load {load_s:.1f} s, spaCy + terms {spacy_s:.1f} s; "
          f"torch threads {torch.get_num_threads()}, load {load_avg()}")
    out = {"documents": [d.id for d in docs], "tokens": tokens, "terms": [len(x) for x in terms],
           "load_s": load_s, "spacy_terms_s": spacy_s, "configs": {}, "load": [load_avg()]}
    ref = None
    for name in args.ic_speed.split(","):
        if name == "old":
            def run(text, ts):
                return old_one_pass(model, tok, text, ts)
        else:
            ctx, prec = name.split(":")
            est = CausalIC(llm, context_tokens=int(ctx), precision=prec, one_pass=True)
            run = est.estimate
        secs, values = [], []
        for d, ts in zip(docs, terms):
            t = time.perf_counter()
            values.append(np.asarray(run(d.text, ts)))
            secs.append(time.perf_counter() - t)
        flat = np.concatenate(values)
        ref = flat if ref is None else ref
        row = {"seconds": secs, "s_per_doc": sum(secs) / len(secs), "ms_per_token": 1000 * sum(secs) / sum(tokens),
               "mean_ic": float(flat.mean()), "pearson": float(pearsonr(flat, ref).statistic),
               "spearman": float(spearmanr(flat, ref).statistic),
               "max_abs_diff": float(np.abs(flat - ref).max()), "mean_abs_diff": float(np.abs(flat - ref).mean())}
        out["configs"][name] = row
        print(f"{name:12s} {row['s_per_doc']:6.1f} s/doc {row['ms_per_token']:6.2f} ms/token  mean IC "
              f"{row['mean_ic']:.3f}  vs first: r {row['pearson']:.4f} rho {row['spearman']:.4f} "
              f"|diff| mean {row['mean_abs_diff']:.3f} max {row['max_abs_diff']:.2f}  load {load_avg()}", flush=True)
    out["metrics"] = metric_seconds(args, docs, terms, values, est)
    out["load"].append(load_avg())
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))


def metric_seconds(args, docs, terms, values, est) -> dict[str, dict[str, float]]:
    """Seconds of each utility metric (``--metrics``) on two releases of ``docs`` in turn
    (``Manual_Entity``, then ``spaCy_Entity`` with what the first warmed), the information content
    given (the last configuration's, through the disk cache)."""
    import tempfile

    from audit.core.data import Corpus, Scenario
    from audit.core.registry import registry
    from audit.metrics import ICCache, UtilityContext
    from tab import labelled_originals, published

    originals = Corpus(docs, name="TAB_test")
    full = labelled_originals(Path(args.data))
    releases = [published(n, f"TAB_test_{n}.json", full, originals.ids, Path(args.data))
                for n in ("Manual_Entity", "spaCy_Entity")]
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ICCache(est.identity, tmp).put_many([(d.text, t, v, 0.0) for d, t, v in zip(docs, terms, values)])
        ctx = UtilityContext(originals, ic=est, cache_dir=tmp)
        scenario = Scenario(originals=originals, releases=tuple(releases))
        objs = [registry.create("metric", m.strip(), context=ctx) for m in args.metrics.split(",")]
        for release in releases:
            row = out.setdefault(release.name, {})
            for obj in objs:
                t = time.perf_counter()
                obj.evaluate(scenario, release)
                row[obj.name] = time.perf_counter() - t
            print(f"  {release.name}: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items())
                  + f" s; in all {sum(row.values()):.1f} s", flush=True)
    return out


if __name__ == "__main__":
    main()
