"""Quality of the phrase-search attack on TAB: linkage rate of each sanitization.

For each of the 22 span files in ``../shared/data/tab/anonymizations`` (applied to
the 127 TAB test originals), k=2, arity 1 and 3, two collections: the 127
originals alone, and the originals plus ``TAB_all_BK=Public10%.json`` (1,268
public judgment prefixes: a superset collection in which each test case's
public text competes with its original). Prints a Markdown table and writes
the raw figures as JSON.

    python benchmarks/phrase_search_tab.py [--quick] [--data DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from attackers.phrase_search import PhraseSearchAttack
from audit.core.data import Scenario
from audit.io.loaders import load_corpus, load_release_file

from tab import TAB as DEFAULT_DATA  # noqa: E402  (the benchmarks' one helper module, beside this script)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--quick", action="store_true", help="3 sanitizations only")
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="write raw figures here")
    args = ap.parse_args()

    originals = load_corpus(args.data / "bks" / "TAB_test_BK=Original.json")
    background = load_corpus(args.data / "bks" / "TAB_all_BK=Public10%.json")
    files = sorted((args.data / "anonymizations").glob("TAB_test_*.json"))
    if args.quick:
        files = [f for f in files if any(s in f.name for s in ("Manual_Entity", "Presidio_Entity.json", "spaCy"))]
    releases = [load_release_file(f, name=f.stem.removeprefix("TAB_test_"), originals=originals)[0] for f in files]
    scenario = Scenario(originals=originals, releases=tuple(releases))

    rows: dict[str, dict[str, object]] = {r.name: {} for r in releases}
    for coll_name, extra in (("orig", None), ("orig+bk", background)):
        for arity in (1, 3):
            attack = PhraseSearchAttack(k=args.k, arity=arity, extra_corpus=extra)
            t0 = time.perf_counter()
            attack.fit(scenario)
            fit_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            for rel in releases:
                head, residual = attack.evaluate(scenario, rel)
                d = head.details
                rows[rel.name][f"{coll_name}/a{arity}"] = {
                    "linked": d["linked"], "n": head.n, "rate": head.value, "ci": list(head.ci),
                    "wrong": d["wrong_links"], "by_combination": d["linked_by_combination_only"],
                    "residual": residual.value}
            print(f"# {coll_name} arity {arity}: collection {attack.index_.n_docs} docs, index "
                  f"{fit_s:.1f} s, {len(releases)} releases {time.perf_counter() - t0:.1f} s", flush=True)

    cols = ["orig/a1", "orig/a3", "orig+bk/a1", "orig+bk/a3"]
    print()
    print("| sanitization | orig, a=1 | orig, a=3 | orig+bk, a=1 | orig+bk, a=3 | wrong links (max) "
          "| n-gram residual (orig / orig+bk) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, r in rows.items():
        cells = [f"{r[c]['linked']}/{r[c]['n']}" for c in cols]
        wrong = max(r[c]["wrong"] for c in cols)
        print(f"| {name} | " + " | ".join(cells) + f" | {wrong} | {100 * r['orig/a1']['residual']:.1f}% / "
              f"{100 * r['orig+bk/a1']['residual']:.1f}% |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
