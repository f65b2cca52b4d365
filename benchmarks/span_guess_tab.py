"""Span guessing on TAB (ECHR): recovery rate per release, throughput, cache effect.

Compares the releases of the INTACT paper on the same seeded sample of manually
annotated spans (all five files sanitize the same 7,340 TAB spans, so each sampled
span is attacked once per release):

* Manual_Entity        — entity-type labels ([PERSON], [DATETIME], ...)
* Manual_INTACT        — INTACT's selected replacements
* INTACT most_specific — the most specific generated candidate for every span
* INTACT least_specific — the least specific candidate
* Manual_Dou           — Dou et al.'s abstractions

The paper's ordering to compare with: most-specific leaks most, INTACT-selected less,
labels least. Span labels come from TAB_test_Manual_Entity.json (its replacement is
the TAB entity type). Every release is evaluated twice: the second pass is answered
from the LLM cache (cache effect).

    python benchmarks/span_guess_tab.py --quick                # 6 spans, 0.5B model
    python benchmarks/span_guess_tab.py --sample 40 --llm qwen2.5-coder-1.5b

Numbers depend heavily on the machine's load (2 shared CPU cores here).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from attackers.span_guess import SpanGuessAttack
from audit.core.data import Corpus, Document, Release, Scenario, Span, span_order
from audit.io.loaders import load_corpus, load_release_file

TAB = Path("/work/shared/data/tab")
RELEASES = {
    "Manual_Entity": "TAB_test_Manual_Entity.json",
    "Manual_INTACT": "TAB_test_Manual_INTACT.json",
    "INTACT_most_specific": "TAB_test_Manual_INTACT_202408_most_specific.json",
    "INTACT_least_specific": "TAB_test_Manual_INTACT_202408_least_specific.json",
    "Manual_Dou": "TAB_test_Manual_Dou.json",
}


def labelled_originals(data: Path) -> Corpus:
    """TAB originals with the manual mentions as gold spans (label = TAB entity type)."""
    texts = load_corpus(data / "bks" / "TAB_test_BK=Original.json")
    entity = json.loads((data / "anonymizations" / RELEASES["Manual_Entity"]).read_text())
    docs = []
    for doc in texts:
        spans = [Span(s, e, label=lab) for s, e, lab in entity.get(doc.id, [])]
        docs.append(Document(doc.id, doc.text, subject=doc.subject, spans=tuple(sorted(spans, key=span_order))))
    return Corpus(docs, name="TAB_test", source=texts.source)


def restrict(release: Release, keys: set[tuple[str, int, int]]) -> Release:
    """The same release, with only the sampled spans recorded (the text keeps every replacement)."""
    docs = [d.with_spans([s for s in d.spans if (d.id, s.orig_start, s.orig_end) in keys]) for d in release]
    docs = [d for d in docs if d.spans]
    return Release(release.name, Corpus(docs, name=release.name), aligned=True, source=release.source)


def paired_tests(outcomes: dict[str, dict[tuple, bool]]) -> list[dict]:
    """Every pair of releases on the spans both attacked: how many spans only one of them gave
    away, and the two-sided exact sign (McNemar) test on those discordant spans. The same spans
    are attacked in every release, so this is far more sensitive than comparing two rates."""
    from audit.core.stats import sign_test

    names = list(outcomes)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            common = outcomes[a].keys() & outcomes[b].keys()
            only_a = sum(outcomes[a][k] and not outcomes[b][k] for k in common)
            only_b = sum(outcomes[b][k] and not outcomes[a][k] for k in common)
            p = sign_test(only_a, only_b)
            out.append({"a": a, "b": b, "spans": len(common), "only_a": only_a, "only_b": only_b, "p": round(p, 4)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=TAB)
    ap.add_argument("--sample", type=int, default=20, help="spans attacked per release (same spans in each)")
    ap.add_argument("--guesses", type=int, default=5)
    ap.add_argument("--context-tokens", type=int, default=384)
    ap.add_argument("--llm", default="qwen2.5-coder-0.5b")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--releases", default=",".join(RELEASES), help="comma-separated subset of " + ",".join(RELEASES))
    ap.add_argument("--quick", action="store_true", help="6 spans, 3 guesses, 256 context tokens")
    ap.add_argument("--out", type=Path, default=None, help="write the summary as JSON here")
    ap.add_argument("--cache", type=Path, default=None,
                    help="LLM answer cache (sqlite) to use; default: a fresh one, so the first pass is cold")
    args = ap.parse_args()
    if args.quick:
        args.sample, args.guesses, args.context_tokens = 6, 3, 256

    from audit.models.specs import load_llm

    t0 = time.perf_counter()
    originals = labelled_originals(args.data)
    names = [n.strip() for n in args.releases.split(",") if n.strip()]
    releases = [load_release_file(args.data / "anonymizations" / RELEASES[n], name=n, originals=originals)[0]
                for n in names]
    # the same seeded sample of (doc, original offsets) for every release, from the recorded spans
    keys = sorted({(d.id, s.orig_start, s.orig_end) for d in releases[0] for s in d.spans
                   if (s.original or "").strip()})
    sample = set(random.Random(args.seed).sample(keys, min(args.sample, len(keys))))
    load_s = time.perf_counter() - t0

    cache_path = args.cache or Path(tempfile.mkdtemp(prefix="span-guess-bench-")) / "llm.sqlite"
    print(f"LLM cache: {cache_path}", flush=True)
    llm = load_llm(args.llm, cache=True, cache_path=cache_path, n_ctx=2048, n_parallel=2)
    attack = SpanGuessAttack(llm=llm, guesses=args.guesses, context_tokens=args.context_tokens, seed=args.seed,
                             ner=False, progress=True)
    scenario = Scenario(originals=originals, releases=tuple(releases))
    t1 = time.perf_counter()
    attack.fit(scenario)
    fit_s = time.perf_counter() - t1

    rows = []
    outcomes: dict[str, dict[tuple, bool]] = {}  # release -> (doc, start, end) -> recovered
    for rel in releases:
        small = restrict(rel, sample)
        t = time.perf_counter()
        (res,) = attack.evaluate(scenario, small)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        (again,) = attack.evaluate(scenario, small)
        warm = time.perf_counter() - t
        assert again.value == res.value
        outcomes[rel.name] = {(d.id, sp["orig_start"], sp["orig_end"]): sp["recovered"]
                              for d in res.documents for sp in d.facts["spans"]}
        rows.append({"release": rel.name, "recovered": res.value, "ci": res.ci, "n": res.n,
                     "baseline": res.baseline, "per_label": {k: (v["successes"], v["n"])
                                                             for k, v in res.details["per_label"].items()},
                     "rules": res.details["rules"], "cold_s": round(cold, 1), "warm_s": round(warm, 2),
                     "spans_per_min": round(60 * res.n / cold, 2) if cold else None,
                     "examples": [(s["original"], s["replacement"], s["guesses"][:3], s["rule"])
                                  for d in res.documents for s in d.facts["spans"]][:4]})
        r = rows[-1]
        print(f"{rel.name:22s} recovered {r['recovered']:.3f} [{r['ci'][0]:.2f},{r['ci'][1]:.2f}] n={r['n']} "
              f"baseline {r['baseline']:.3f}  cold {cold:6.1f}s ({r['spans_per_min']} spans/min)  "
              f"warm {warm:5.2f}s", flush=True)

    paired = paired_tests(outcomes)
    for p in paired:
        print(f"{p['a']} vs {p['b']}: recovered only by {p['a']} {p['only_a']}, only by {p['b']} {p['only_b']}, "
              f"exact sign test p = {p['p']:.3f}", flush=True)
    summary = {"llm": llm.identity, "sample": len(sample), "guesses": args.guesses,
               "context_tokens": args.context_tokens, "seed": args.seed, "load_s": round(load_s, 1),
               "fit_s": round(fit_s, 1), "frequent_lemmas_head": sorted(attack._matcher.frequent)[:20],
               "releases": rows, "paired": paired}
    print(json.dumps({k: v for k, v in summary.items() if k != "releases"}, indent=1))
    for r in rows:
        print(r["release"], "per label (recovered, n):", r["per_label"], "rules:", r["rules"])
        for ex in r["examples"]:
            print("   ", ex)
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1, ensure_ascii=False))
    llm.close()


if __name__ == "__main__":
    main()
