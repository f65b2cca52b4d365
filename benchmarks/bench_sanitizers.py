"""``anonaudit bench`` (issue 47): the TAB run of the cheap comparison points beside the published
sanitizations, and the time attack reuse saves.

    python benchmarks/bench_sanitizers.py tab --docs 20 --out /tmp/bench-tab      # TAB, ranks vs published
    python benchmarks/bench_sanitizers.py reuse --people 20 --out /tmp/bench-reuse # one bench vs 5 runs
    python benchmarks/bench_sanitizers.py --quick         # both in about a minute: 4 TAB documents and
                                                          # ROUGE-L; 6 people, 3 sanitizers, phrase search

``tab``: a seeded sample of the 127 TAB test documents (``TAB_test_BK=Original.json``) with the
manual mentions of ``TAB_test_Manual_Entity.json`` as annotations (so ``suppression`` and
``labels`` are the paper's "Suppression" and "Entity type"), the cheap comparison points, and the
published sanitizations of Table 3 of the INTACT paper as releases (span files of
``../shared/data/tab/anonymizations``); the sanitizer under test is the published INTACT
(``TAB_test_Manual_INTACT.json``). Metrics TPS (the causal 0.5B information content) and ROUGE-L,
attack phrase search. Prints the leaderboard and the Spearman correlation of our TPS with the
published TPS over the shared methods (the ``--reference tab`` rows).

``reuse``: the demo population, 5 sanitizers (the regex masker of ``examples/`` under test, and
suppression, labels, spaCy, Presidio), attacks phrase search and TRIR (``budget=fast``), ROUGE-L;
(a) one bench of the 5, (b) 5 separate benches of one sanitizer each, both with every cache off
(so each TRIR attacker is trained where it is used), and (c) the 5 separate benches with the
caches on (TRIR's trained attacker is kept on disk by the first and loaded by the others).
``ANONAUDIT_HOME``: a fresh temporary folder per arm, the embedded models linked from the default.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from tab import TAB, labelled_originals  # noqa: E402

#: Table 3 of the INTACT paper: our release name -> the published span file.
PUBLISHED = {
    "presidio_synthetic": "TAB_test_Manual_Presidio_gpt-3.5-turbo-0125.json",
    "dou": "TAB_test_Manual_Dou.json",
    "intact_least_specific": "TAB_test_Manual_INTACT_202408_least_specific.json",
    "intact_most_specific": "TAB_test_Manual_INTACT_202408_most_specific.json",
    "llama_intact": "TAB_test_Manual_INTACT_llama3.1_selected.json",
    "llama_least_specific": "TAB_test_Manual_INTACT_llama3.1_least_specific.json",
    "llama_most_specific": "TAB_test_Manual_INTACT_llama3.1_most_specific.json",
}


def _home() -> str:
    """A fresh ANONAUDIT_HOME with the machine's embedded models linked in."""
    home = tempfile.mkdtemp(prefix="bench-home-")
    models = Path(os.environ.get("ANONAUDIT_MODELS", Path.home() / ".cache" / "anonaudit" / "models"))
    if models.is_dir():
        os.symlink(models, Path(home) / "models")
    return home


def scored_documents(originals_file: Path) -> list[str] | None:
    """The TAB documents whose information content an earlier (interrupted) run already scored,
    and the IC cache of exactly those documents, written from it (IC is per document: a
    document's value depends on its own text and the estimator only; the cache is keyed by the
    whole corpus, so a subset needs its own file). None when no earlier run scored any."""
    import hashlib

    from audit.core import config
    from audit.core.data import Corpus
    from audit.core.files import atomic_write_json
    from audit.io.loaders import load_corpus
    from audit.metrics.ic import IC_VERSION

    full = load_corpus(originals_file, name="originals")
    best: dict | None = None
    for f in sorted(config.subdir("utility").glob("ic-*.json")):
        cached = json.loads(f.read_text(encoding="utf-8"))
        docs = cached.get("documents") or {}
        if docs and set(docs) <= set(full.ids) and (best is None or len(docs) > len(best["documents"])):
            best = cached
    if best is None:
        return None
    subset = Corpus([d for d in full if d.id in best["documents"]], name="originals")
    key = hashlib.sha256(f"{subset.fingerprint()}|{best['identity']}|{IC_VERSION}".encode()).hexdigest()[:24]
    target = config.subdir("utility") / f"ic-{key}.json"
    if not target.exists():
        atomic_write_json(target, {**best, "fingerprint": subset.fingerprint()})
    return subset.ids


def run_tab(args) -> dict:
    import anonaudit
    from audit.io.loaders import save_jsonl

    data = Path(args.data)
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    originals = folder / "tab_annotated.jsonl"
    save_jsonl(labelled_originals(data, outer=True), originals)
    anon = data / "anonymizations"
    metrics = ["rouge"] if args.quick else ["tps", "rouge"]
    documents = min(4, args.docs) if args.quick else args.docs
    if args.scored_only:
        documents = scored_documents(originals) or documents
        print(f"the documents an earlier run scored: {documents}", flush=True)
    t0 = time.time()
    board = anonaudit.bench(release=str(anon / "TAB_test_Manual_INTACT.json"), name="intact",
                            originals=str(originals), documents=documents, seed=args.seed,
                            spec=anonaudit.Spec(releases={k: str(anon / v) for k, v in PUBLISHED.items()}),
                            attacks=["phrase_search"], metrics=metrics, reference="tab", out=folder / "bench")
    board.report(folder / "bench" / "leaderboard.html")
    print(board.to_markdown())
    return {"seconds": round(time.time() - t0, 1), "documents": documents,
            "agreement": list(board.leaderboard.agreement), "leaderboard": board.to_list()}


def _one(name: str, *, command: str | None, compare: list[str], out: Path, people: int, quick: bool,
         caches: bool, home: str) -> float:
    """One ``anonaudit bench`` as a user runs it: its own process (models loaded by it)."""
    import subprocess

    attacks = ["--attacks", "phrase_search"] if quick else \
        ["--attacks", "phrase_search,trir", "--component-param", "trir.budget=fast"]
    under = ["--command", command] if command else ["--sanitizer", name]
    argv = [sys.executable, "-c", "from anonaudit.cli import main; main()", "bench", *under, "--name", name,
            "--compare", ",".join(compare) or "none", "--demo-people", str(people), *attacks, "--metrics", "rouge",
            "--out", str(out), *([] if caches else ["--no-cache"])]
    env = {**os.environ, "ANONAUDIT_HOME": home, "ANONAUDIT_PROGRESS_SECONDS": "600"}
    t0 = time.perf_counter()
    res = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if res.returncode:
        raise SystemExit(f"failed ({res.returncode}): {' '.join(argv)}\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
    return time.perf_counter() - t0


def run_reuse(args) -> dict:
    cmd = f"{sys.executable} {ROOT / 'examples' / 'regex_masker.py'} {{input}} {{output}}"
    # --quick: three sanitizers that load no model (spaCy's and Presidio's loads dominate a tiny run)
    points = ["suppression", "labels"] if args.quick else ["suppression", "labels", "spacy_ner", "presidio"]
    people = 6 if args.quick else args.people
    base = Path(args.out)
    out: dict = {"people": people, "attacks": "phrase_search" if args.quick else "phrase_search, trir (budget fast)"}
    out["one_bench_s"] = round(_one("regex", command=cmd, compare=points, out=base / "one", people=people,
                                    quick=args.quick, caches=False, home=_home()), 1)
    print(f"one bench of 5: {out['one_bench_s']} s", flush=True)
    for arm, caches in (("separate_no_cache", False), ("separate_cached", True)):
        home = _home()
        times = {}
        for name in ["regex", *points]:
            times[name] = round(_one(name, command=cmd if name == "regex" else None, compare=[],
                                     out=base / arm / name, people=people, quick=args.quick, caches=caches,
                                     home=home), 1)
            print(f"{arm}: {name} {times[name]} s", flush=True)
        out[arm] = {"per_run_s": times, "total_s": round(sum(times.values()), 1)}
    out["saved_vs_no_cache"] = round(out["separate_no_cache"]["total_s"] - out["one_bench_s"], 1)
    out["saved_vs_cached"] = round(out["separate_cached"]["total_s"] - out["one_bench_s"], 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", choices=["tab", "reuse", "both"], default="both")
    ap.add_argument("--data", default=str(TAB))
    ap.add_argument("--docs", type=int, default=20, help="TAB: a seeded sample of this many test documents")
    ap.add_argument("--people", type=int, default=20, help="reuse: people in the demo population")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="about a minute")
    ap.add_argument("--scored-only", action="store_true",
                    help="tab: bench the documents whose information content an earlier, interrupted run scored "
                         "(their IC reused; IC is 20-60 s per TAB document on 2 cores)")
    ap.add_argument("--out", default=None, help="working folder (default: a temporary one)")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args()
    args.out = args.out or tempfile.mkdtemp(prefix=f"bench-{args.what}-")
    t0 = time.time()
    if args.what == "both":
        base = Path(args.out)
        args.out = str(base / "tab")
        figures = {"tab": {k: v for k, v in run_tab(args).items() if k != "leaderboard"}}
        args.out = str(base / "reuse")
        figures["reuse"] = run_reuse(args)
    else:
        figures = run_tab(args) if args.what == "tab" else run_reuse(args)
    figures.update({"command": " ".join(sys.argv), "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "wall_s": round(time.time() - t0, 1), "load": os.getloadavg()})
    text = json.dumps(figures, indent=1, default=str)
    if args.json:
        Path(args.json).write_text(text, encoding="utf-8")
    print(json.dumps({k: v for k, v in figures.items() if k != "leaderboard"}, indent=1, default=str))


if __name__ == "__main__":
    main()
