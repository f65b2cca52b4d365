"""Compare two results.json files outside their provenance (issues 13 and 14).

    python benchmarks/compare_results.py A/results.json B/results.json [--legacy]

Prints "identical" and exits 0 when every result (kind, name, release, value, interval, n,
baseline, details and per-document findings) is the same; otherwise lists the first differences
and exits 1. ``--legacy`` compares a file written before findings were typed with one written
after: the keys a finding adds (success, summary, private, and an empty highlights list) and the
timings that moved from the results to the provenance are left out of the comparison, so what is
compared is everything both layouts hold.
"""

from __future__ import annotations

import argparse
import json
import sys

ADDED = ("success", "summary", "private")
#: Timings that results carried before they moved to the provenance (issue 13).
MOVED = ("timings", "seconds", "llm_seconds", "spans_per_minute", "ic_seconds_per_document")


def normalised(path: str, legacy: bool) -> dict[tuple[str, str, str], dict]:
    data = json.loads(open(path, encoding="utf-8").read())
    out = {}
    for r in data["results"]:
        r = dict(r)
        if legacy:
            r["details"] = {k: v for k, v in (r.get("details") or {}).items() if k not in MOVED}
            docs = []
            for d in r.get("documents") or []:
                d = {k: v for k, v in d.items() if k not in ADDED}
                if d.get("highlights") == []:
                    d.pop("highlights")
                if d.get("highlights_in", 0) is None:
                    d.pop("highlights_in")
                docs.append(d)
            r["documents"] = docs
        out[(r["kind"], r["name"], r["release"])] = r
    return out


def diff(a, b, where="", limit=20, found=None):
    found = [] if found is None else found
    if len(found) >= limit:
        return found
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                found.append(f"{where}.{k}: only in {'B' if k not in a else 'A'}")
            else:
                diff(a[k], b[k], f"{where}.{k}", limit, found)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{where}[{i}]", limit, found)
    elif a != b:
        found.append(f"{where}: {json.dumps(a)[:120]} != {json.dumps(b)[:120]}")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--legacy", action="store_true", help="A was written before findings were typed")
    args = ap.parse_args()
    a, b = normalised(args.a, args.legacy), normalised(args.b, args.legacy)
    found = diff(a and {"|".join(k): v for k, v in a.items()}, {"|".join(k): v for k, v in b.items()})
    if not found:
        print(f"identical: {len(a)} results, {sum(len(r.get('documents') or []) for r in a.values())} findings")
        return 0
    print("\n".join(found))
    return 1


if __name__ == "__main__":
    sys.exit(main())
