"""Compare two results.json files outside their provenance (issues 13 and 14), or two recordings of
the model-free path made before and after a refactoring (issue 71).

    python benchmarks/compare_results.py A/results.json B/results.json [--legacy]
    PYTHONPATH=CHECKOUT python benchmarks/compare_results.py --record OUT   # once per side
    python benchmarks/compare_results.py --trees A B

``--record`` runs the model-free path with the code first on ``PYTHONPATH`` into the new folder
``OUT``: the demo (12 people, phrase search, rouge, precision, recall), ``audit`` with a Spec and
with its shortcuts, ``attack`` (a sample; parameters both ways), ``utility`` (the default columns and
renamed ones), ``bench`` and the command line's ``attack`` and ``utility``, each writing its bundle.
``--trees`` compares two recordings file by file: byte-identical, identical once the measured
times, timestamps, the recording's own folder and the checksums and sizes they change are masked,
or different (the first differing line).

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
import re
import sys
from pathlib import Path

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


def record(out: str) -> None:
    """The model-free path recorded into the new folder ``out`` (see the module docstring). Long
    because it is one script of calls, each writing its own bundle."""
    import inspect
    import os
    import subprocess

    import anonaudit
    from anonaudit.demo.demo_audit import run_demo

    print("anonaudit from", anonaudit.__file__, file=sys.stderr)
    root = Path(out).resolve()
    root.mkdir(parents=True)
    data = anonaudit.sample_data(n=12, seed=1)
    orig, rels = data["originals"], data["releases"]
    d = root / "data"
    d.mkdir()
    for name, rows in (("originals", orig), *rels.items()):
        (d / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    body = [{**{k: v for k, v in r.items() if k != "text"}, "body": r["text"]} for r in orig]
    body_rel = [{**{k: v for k, v in r.items() if k != "text"}, "body": r["text"]} for r in rels["labels"]]

    run_demo(root / "demo", n=12, seed=0, attacks=["phrase_search"], metrics=["rouge", "precision", "recall"],
             presidio=False)
    anonaudit.audit(anonaudit.Spec(originals=orig, releases={k: v for k, v in rels.items()}, attacks=["phrase_search"],
                                   metrics=["rouge", "precision"], seed=3, budget=anonaudit.Budget("full")),
                    out=root / "audit" / "results.json", progress=False)
    anonaudit.audit(originals=orig, releases={"labels": rels["labels"]}, attacks=["phrase_search"], seed=4,
                    out=root / "audit_short" / "results.json", progress=False)
    anonaudit.attack("phrase_search", {"labels": rels["labels"], "suppressed": rels["suppressed"]}, originals=orig, seed=2,
                     sample=6, out=root / "attack" / "results.json", progress=False)
    anonaudit.attack("phrase_search", {"labels": rels["labels"]}, originals=orig, params={"max_n": 5}, k=2,
                     out=root / "attack_params" / "results.json", progress=False)
    anonaudit.utility(orig, {"labels": rels["labels"]}, metrics=["rouge", "precision", "recall"],
                      out=root / "utility" / "results.json", progress=False)
    if "spec" in inspect.signature(anonaudit.utility).parameters:
        anonaudit.utility(body, {"labels": body_rel}, metrics=["rouge"], spec=anonaudit.Spec(
            columns=anonaudit.Columns(text="body")), out=root / "utility_columns" / "results.json", progress=False)
    else:
        anonaudit.utility(body, {"labels": body_rel}, metrics=["rouge"], text_column="body",
                          out=root / "utility_columns" / "results.json", progress=False)
    anonaudit.bench("suppression", anonaudit.Spec(originals=orig, attacks=["phrase_search"], metrics=["rouge"], seed=5),
                    comparisons=["labels"], out=root / "bench", progress=False)
    cli = [sys.executable, "-c", "import sys; from anonaudit.cli import main; sys.exit(main())"]
    for args in (["attack", "phrase_search", "--originals", str(d / "originals.jsonl"), "--release", str(d / "labels.jsonl"),
                  "--seed", "6", "--out", str(root / "cli_attack" / "results.json")],
                 ["utility", "--originals", str(d / "originals.jsonl"), "--release", str(d / "labels.jsonl"), "--metrics", "rouge",
                  "--out", str(root / "cli_utility" / "results.json")]):
        subprocess.run(cli + args, check=True, env=os.environ, capture_output=True)
    print("recorded", root)


#: Keys whose values are measured times (or sizes that change with them): masked by --trees.
TIME = re.compile(r"second|started|finished|wall|per_minute|elapsed|took|duration|timings|_s$|load|^bytes$")
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?")


def mask(x, key=""):
    if isinstance(x, dict):
        return {k: ("T" if TIME.search(str(k)) and not isinstance(v, (dict, list)) else
                    mask(v, k) if not TIME.search(str(k)) else mask_all(v)) for k, v in x.items()}
    if isinstance(x, list):
        return [mask(v, key) for v in x]
    return x


def mask_all(x):
    if isinstance(x, dict):
        return {k: mask_all(v) for k, v in x.items()}
    if isinstance(x, list):
        return [mask_all(v) for v in x]
    return "T" if isinstance(x, (int, float)) and not isinstance(x, bool) else x


def text(p: Path, root: Path) -> str:
    """The file as compared by --trees: the recording's folder, timestamps, times and checksums masked."""
    t = p.read_text(errors="replace").replace(str(root), "OUT")
    t = ISO.sub("ISO", t)
    t = re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated ISO", t)
    t = re.sub(r"took \d+(\.\d+)? s", "took T s", t)
    t = re.sub(r"<dt>seconds</dt><dd class=\"iso\">[0-9.]+", "<dt>seconds</dt>T", t)
    t = re.sub(r"[0-9a-f]{64}", "SHA", t)  # checksums (of files compared themselves)
    if p.suffix == ".html":  # the report shows the provenance's times: every decimal masked (figures: results.json)
        t = re.sub(r"\d+\.\d+", "D", re.sub(r"took \d+ s", "took T s", t))
    if p.suffix == ".json":
        try:
            return json.dumps(mask(json.loads(t)), indent=1, sort_keys=True)
        except ValueError:
            pass
    return t


def trees(a_dir: str, b_dir: str) -> int:
    """Two recordings compared file by file (see the module docstring)."""
    A, B = Path(a_dir).resolve(), Path(b_dir).resolve()
    counts = {"byte-identical": 0, "identical outside times": 0, "different": 0}
    fa = sorted(p.relative_to(A) for p in A.rglob("*") if p.is_file())
    fb = sorted(p.relative_to(B) for p in B.rglob("*") if p.is_file())
    if fa != fb:
        print("only in one:", sorted(set(fa) ^ set(fb)))
    for rel in fa:
        a, b = A / rel, B / rel
        if not b.exists():
            continue
        if a.read_bytes() == b.read_bytes():
            counts["byte-identical"] += 1
        elif text(a, A) == text(b, B):
            counts["identical outside times"] += 1
        else:
            counts["different"] += 1
            ta, tb = text(a, A).splitlines(), text(b, B).splitlines()
            first = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
            print(f"different: {rel}: line {first}: {ta[first][:160] if first < len(ta) else '<end>'!r} | "
                  f"{tb[first][:160] if first < len(tb) else '<end>'!r}")
    print(f"{len(fa)} files: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 1 if counts["different"] else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--legacy", action="store_true", help="A was written before findings were typed")
    if sys.argv[1:2] == ["--record"] and len(sys.argv) == 3:
        record(sys.argv[2])
        return 0
    if sys.argv[1:2] == ["--trees"] and len(sys.argv) == 4:
        return trees(sys.argv[2], sys.argv[3])
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
