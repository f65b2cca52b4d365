"""Span guessing with the public background, two paths side by side on the same spans (issue 57):

* ``mention`` — every mention of the retrieved people's background read for every span (the
  per-mention loop; spaCy over each person's background in memory when first asked);
* ``table`` — each person's candidates worked out once, as arrays, and every span scored on them
  (spaCy through the parse cache on disk); run ``cold`` (an empty parse cache) and ``warm`` (the
  cache the cold run filled; the tables built again);
* ``table warm (rank_bm25)`` — the warm table path with the people found as before: BM25 scored by
  ``rank_bm25``'s ``get_scores`` (every person's term counts read for every word of the document)
  rather than each term's weights over the people worked out once (``attackers/span_guess/bm25.py``).

Sources (the default adversary: the 5 best-matching people, the label prior mixed in):

* TAB ``Manual_Entity``, a seeded sample of spans (``--sample``), background the 127 public judgments;
* TAB's longest public judgments (``--long N``): the spans of the documents of the N people whose
  public judgment is longest (50,000–200,000 characters; TAB holds no Wikipedia biographies, these
  are its Wikipedia-length backgrounds), a seeded sample of ``--long-sample``;
* the demo population (``demo-data --n 40``, seed 0, the labels release, every span);
* the TRI file (a demo population of 60 + 30 distractors, seed 7, the labels release).

Per source and path: seconds per span (the attack's evaluate over the spans) and its parts
(finding the people: per document; working out the candidates: spaCy and tables; scoring the
spans), recovery with its interval, what each source of guesses recovered, and on how many spans
the two paths' guesses (of every source) are the same. The release documents' sentence vectors are
embedded once before the paths (``vectors_s``), so no path pays for them.

    python benchmarks/span_guess_speed.py --sample 200 --long 10 --long-sample 100 --demo --tri --out speed.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from attackers.span_guess import SpanGuessAttack
from audit.core.data import Corpus, Release, Scenario
from audit.io.loaders import load_corpus, load_release_file
from span_guess_tab import RELEASES, demo_scenario, labelled_originals, tri_scenario

from tab import TAB  # noqa: E402  (the benchmarks' one helper module)

#: (label, scoring, an empty parse cache, the people found with rank_bm25's own get_scores)
PATHS = (("mention", "mention", False, False), ("table cold", "table", True, False),
         ("table warm (rank_bm25)", "table", False, True), ("table warm", "table", False, False))


def side_by_side(name: str, scenario: Scenario, release: Release, *, sample: int | None, tmp: Path,
                 seed: int = 0, ner: bool = True, dense: bool = True, paths: tuple[str, ...] | None = None) -> dict:
    """The three runs on ``release`` (see the module doc), with the same attack and index; ``ner``:
    label the spans a release does not label with spaCy (as span_guess_tab.py does for the demo
    and the TRI file; TAB's spans carry their labels)."""
    attack = SpanGuessAttack(guesses=5, sample=sample, seed=seed, ner=ner, progress=True, knowledge="background",
                             dense=dense)
    t = time.perf_counter()
    attack.fit(scenario)
    base = attack.background(scenario)  # BM25 and the background's sentence vectors, once
    if base.nlp is not None:
        base.nlp.nlp  # noqa: B018  (spaCy's NER pipeline loaded before the paths: none pays for it)
    setup = time.perf_counter() - t
    targets = attack._sample(attack.targets(scenario, release)[0])
    t = time.perf_counter()
    for text in {x.doc_id: x.text for x in targets}.values():  # the documents' sentence vectors, once
        base.rank_people(text, attack.people)
    out = {"source": name, "setup_s": round(setup, 1), "vectors_s": round(time.perf_counter() - t, 1), "paths": {}}
    parses = tmp / f"{name}-parses.sqlite"
    guesses = {}
    for label, scoring, fresh, okapi in PATHS:
        if paths is not None and label not in paths:
            continue
        if fresh:
            parses.unlink(missing_ok=True)
        attack._background = base.rescored(scoring, cache=parses)
        if okapi:
            attack._background._bm25 = base._bm25.okapi
        attack._background_key = scenario.background.fingerprint()
        attack.__dict__.pop("timings_by_release_", None)
        t = time.perf_counter()
        (res,) = attack.evaluate(scenario, release)
        seconds = time.perf_counter() - t
        parts = attack.stats()["timings"][release.name]
        by, spans = res.details["recovered_by_source"], res.details["spans_attacked"]
        out["paths"][label] = {
            "s": round(seconds, 1), "s_per_span": round(seconds / spans, 4),
            "people_s": round(parts["background_people"], 1), "candidates_s": round(parts["background_candidates"], 1),
            "people_s_per_doc": round(parts["background_people"] / res.n, 4),
            "spans_s": round(parts["background_spans"], 2),
            "spans_s_per_span": round(parts["background_spans"] / spans, 4),
            "recovered": res.value, "ci": res.ci, "spans": spans, "documents": res.n,
            "baseline": res.baseline, "by_source": {k: v["recovered"] for k, v in by.items()},
            "parses": attack._background.parse_stats}
        guesses[label] = [s["guesses_by_source"] for d in res.documents for s in d.facts["spans"]]
        row = out["paths"][label]
        print(f"{name:28s} {label:10s} {row['s_per_span']:.4f} s/span (people {row['people_s']} s, candidates "
              f"{row['candidates_s']} s, spans {row['spans_s']} s) recovered {res.value:.3f} "
              f"[{res.ci[0]:.2f}-{res.ci[1]:.2f}] {spans} spans ({res.n} documents) by source {row['by_source']}",
              flush=True)
    reference = next(iter(guesses))  # the per-mention loop when it ran
    first = guesses[reference]
    out["same_guesses_as"] = reference
    out["same_guesses"] = {label: sum(a == b for a, b in zip(first, g)) for label, g in guesses.items()}
    out["spans"] = len(first)
    print(f"   same guesses as {reference!r}: {out['same_guesses']} of {len(first)} spans", flush=True)
    return out


def longest(release: Release, background: Corpus, originals: Corpus, n: int) -> Release:
    """``release`` restricted to the documents of the ``n`` people with the longest background."""
    size: dict[str, int] = {}
    for d in background:
        size[d.subject or d.id] = size.get(d.subject or d.id, 0) + len(d.text)
    chosen = set(sorted(size, key=lambda p: (-size[p], p))[:n])
    docs = [d for d in release if (d.subject or originals.get(d.id).subject) in chosen]
    return Release(f"{release.name} (the {n} longest public judgments)", Corpus(docs, name=release.corpus.name),
                   aligned=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=TAB)
    ap.add_argument("--sample", type=int, default=200, help="TAB Manual_Entity spans (a seeded sample); 0: skip")
    ap.add_argument("--long", type=int, default=0, help="also the documents of the N people with the longest background")
    ap.add_argument("--long-sample", type=int, default=100)
    ap.add_argument("--demo", action="store_true")
    ap.add_argument("--tri", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--paths", default=",".join(p[0] for p in PATHS),
                    help="the paths to run, comma-separated, in the order of PATHS (default: all)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--quick", action="store_true", help="a smoke run: the demo population only")
    args = ap.parse_args()
    if args.quick:
        args.sample, args.long, args.demo, args.tri = 0, 0, True, False
    paths = tuple(p.strip() for p in args.paths.split(","))
    unknown = set(paths) - {p[0] for p in PATHS}
    if unknown:
        ap.error(f"--paths: unknown {sorted(unknown)}; the paths are {[p[0] for p in PATHS]}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="span-guess-speed-") as tmp:
        tmp = Path(tmp)
        if args.sample or args.long:
            originals = labelled_originals(args.data)
            release = load_release_file(args.data / "anonymizations" / RELEASES["Manual_Entity"], name="Manual_Entity",
                                        originals=originals)[0]
            background = load_corpus(args.data / "bks" / "TAB_test_BK=Public.json")
            scenario = Scenario(originals=originals, background=background, releases=(release,))
            if args.sample:
                rows.append(side_by_side("TAB Manual_Entity", scenario, release, sample=args.sample, tmp=tmp,
                                         seed=args.seed, ner=False, paths=paths))
            if args.long:
                rows.append(side_by_side(f"TAB {args.long} longest", scenario,
                                         longest(release, background, originals, args.long),
                                         sample=args.long_sample, tmp=tmp, seed=args.seed, ner=False, paths=paths))
        if args.demo:
            scenario = demo_scenario(tmp / "demo", seed=args.seed, n=40)
            rows.append(side_by_side("demo (40 people)", scenario, scenario.releases[0], sample=None, tmp=tmp, paths=paths))
        if args.tri:
            scenario, _ = tri_scenario(tmp / "tri", seed=args.seed + 7, n=60)
            rows.append(side_by_side("TRI file (60 + 30)", scenario, scenario.releases[0], sample=None, tmp=tmp, paths=paths))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
