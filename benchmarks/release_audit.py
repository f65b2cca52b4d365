"""One TAB release audited whole, cold, stage by stage (issue 57, item 1): the stage table.

Every attack with its default method (phrase_search, trir, span_guess, claim_linker) and the utility
metrics (every registered metric, as ``anonaudit utility`` runs them) on one TAB release of the 127
test judgments, with the budget ``full`` (every document, every masked span, leakage on every linked
document). Each stage runs in a process of its own (``--worker``), through the runner as ``anonaudit
run`` does, with an empty ``ANONAUDIT_HOME`` of the run's own (the converted models linked from the
default home: converting a model is installation, not an audit), so it is cold. Per stage: seconds
(the stage's own parts from its provenance: preparation, each release, the claim linker's timings),
LLM requests (answer-cache misses, backend calls) and tokens (prompt, evaluated, generated), and
the peak memory of its process.

Resumable, for lock slots of a few minutes: ``--slot-minutes M`` stops a stage that is still running
after M minutes (its process killed; what it finished stays in the caches and its results file),
records the seconds it ran, and the next call of the same command goes on where it stopped; the
stage's seconds are summed over its slots (``ledger.json`` in ``--work``). ``--judge-sample N``
scores leakage on N linked documents only and extrapolates the judge's time to every linked
document (said as an extrapolation in the table).

    python benchmarks/release_audit.py --work /tmp/release --slot-minutes 11 [--stages phrase_search,trir]
    python benchmarks/release_audit.py --work /tmp/release --table       # the table so far
    python benchmarks/release_audit.py --work /tmp/A --budget standard --docs 20      # a slice, cold
    python benchmarks/release_audit.py --work /tmp/B --home /tmp/A/home --budget standard --docs 20 \
        --release Manual_Dou                                             # a second release, warm
    python benchmarks/release_audit.py --work /tmp/estimate --stages estimate  # --time-limit's estimate

Stage ``estimate`` calibrates every stage on 5 documents as ``--time-limit`` does and writes the
estimate per stage (``estimate.json`` in ``--work``), nothing else run: to set beside the measured
stages (run it in a ``--work`` of its own, so that its calibration warms no measured stage's caches).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from tab import TAB  # noqa: E402  (the benchmarks' one helper module)

STAGES = ("phrase_search", "trir", "span_guess", "claim_linker", "utility")
RELEASE = "Manual_Entity"


def _scenario_data(data: Path, release: str, docs: int | None) -> dict:
    """The spec's data: TAB's originals (gold spans), the public background, one release; with
    ``docs``, the first ``docs`` judgments, their people's background and their documents of the release."""
    from audit.core.data import Corpus
    from audit.io.loaders import load_corpus, load_release_file
    from span_guess_tab import RELEASES, labelled_originals

    from audit.core.data import Release

    originals = labelled_originals(data)
    background = load_corpus(data / "bks" / "TAB_test_BK=Public.json")
    rel = load_release_file(data / "anonymizations" / RELEASES[release], name=release, originals=originals)[0]
    if docs:  # a slice: the first judgments and their people
        originals = Corpus(list(originals)[:docs], name=originals.name)
        keep, ids = {d.subject for d in originals}, set(originals.ids)
        background = Corpus([d for d in background if d.subject in keep], name=background.name)
        rel = Release(rel.name, Corpus([d for d in rel.corpus if d.id in ids], name=rel.corpus.name), aligned=True)
    return {"originals": originals, "background": background, "release": rel}


def run_stage(stage: str, out: Path, data: Path, release: str, judge_sample: int | None, docs: int | None,
              budget: str = "full") -> dict:
    """One stage, in this process, through the runner (resumes from ``out``); what it cost. Stage
    ``estimate``: every stage at once, only calibrated (``--time-limit``'s estimate, nothing run)."""
    from anonaudit.inputs import component_entries, input_entry, release_entries
    from audit.core.registry import registry
    from audit.models.resources import Resources
    from audit.pipeline.estimate import Whole, chars
    from audit.pipeline.executors import make_executor
    from audit.pipeline.runner import Audit, parse_spec

    d = _scenario_data(data, release, docs)
    columns = {}
    spec_data: dict = {"originals": input_entry(d["originals"], "originals", columns),
                       "background": input_entry(d["background"], "background", columns),
                       "releases": release_entries([d["release"]], columns), "budget": budget,
                       "out": str(out), "title": f"TAB {release}, {stage}"}
    attacks = [s for s in STAGES if s != "utility"] if stage == "estimate" else [stage]
    if stage in ("utility", "estimate"):
        spec_data["metrics"] = component_entries(registry.names("metric"), "metrics")
    if stage != "utility":
        params = {"score_sample": judge_sample, "score_target": None} if stage == "claim_linker" and judge_sample else {}
        spec_data["attacks"] = component_entries([{"name": a, "params": params if a == stage else {}}
                                                  for a in attacks], "attacks")
    spec = parse_spec(spec_data, base=Path.cwd(), source="release_audit.py", registry=registry, in_memory=True)
    spec = __import__("dataclasses").replace(spec, out=out)
    whole = (Whole(chars(d["originals"]) + chars(d["background"]), {release: chars(d["release"])})
             if stage == "estimate" else None)
    executor = make_executor(spec.executor)
    executor.start()
    t = time.perf_counter()
    with Resources(seed=spec.seed, progress=True, executor=executor) as res:
        outcome = Audit(spec, progress=True, whole=whole).run(resources=res)
        if whole is not None:
            est = outcome.estimate
            print(est.describe(), flush=True)
            (out.parent / "estimate.json").write_text(json.dumps(
                {"stages": {s.component: s.seconds for s in est.stages},
                 "problems": {s.component: s.problem for s in est.stages if s.problem},
                 "calibration_seconds": est.seconds, "documents": est.documents, "of": est.of}, indent=1))
        usage: dict[str, int] = {}
        for llm in list(getattr(res, "_llms", {}).values()):  # tokens the backends spent (cache hits: none)
            for k, v in (getattr(llm, "usage", None) or {}).items():
                usage[k] = usage.get(k, 0) + int(v)
        stats = res.llm_stats()
    executor.close()
    return {"seconds": time.perf_counter() - t, "llm": stats, "tokens": usage,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _ledger(work: Path) -> dict:
    path = work / "ledger.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _save_ledger(work: Path, ledger: dict) -> None:
    tmp = work / "ledger.json.tmp"
    tmp.write_text(json.dumps(ledger, indent=1))
    tmp.replace(work / "ledger.json")


def drive(args: argparse.Namespace) -> None:
    """Each stage not done yet, in a process of its own, stopped after ``--slot-minutes`` in all."""
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    home = args.home.resolve() if args.home else work / "home"
    if not home.exists():
        home.mkdir(mode=0o700)
        models = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "anonaudit" / "models"
        if models.is_dir():
            (home / "models").symlink_to(models)
    ledger = _ledger(work)
    deadline = time.time() + args.slot_minutes * 60 if args.slot_minutes else None
    for stage in args.stages:
        entry = ledger.setdefault(stage, {"seconds": 0.0, "slots": 0, "done": False})
        if entry["done"]:
            continue
        left = None if deadline is None else deadline - time.time()
        if left is not None and left < 30:
            break
        report = work / f"{stage}.cost.json"
        report.unlink(missing_ok=True)
        cmd = [sys.executable, __file__, "--worker", stage, "--work", str(work), "--release", args.release,
               *(["--judge-sample", str(args.judge_sample)] if args.judge_sample else []),
               *(["--docs", str(args.docs)] if args.docs else []), "--budget", args.budget]
        env = {**os.environ, "ANONAUDIT_HOME": str(home), "PYTHONPATH": str(Path(__file__).parent)}
        t = time.time()
        print(f"== {stage}: slot {entry['slots'] + 1}" + (f", {left / 60:.1f} min left" if left else ""), flush=True)
        stopped = False
        with subprocess.Popen(cmd, env=env) as proc:
            try:
                proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                stopped = True
        if not stopped and proc.returncode:
            raise SystemExit(f"== {stage} failed (exit {proc.returncode}); the ledger is unchanged")
        entry["seconds"] += time.time() - t
        entry["slots"] += 1
        entry["load"] = os.getloadavg()
        if report.exists():
            cost = json.loads(report.read_text())
            entry.update(done=True, cost=cost, finished=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
            entry["peak_rss_mb"] = max(entry.get("peak_rss_mb", 0), cost["peak_rss_mb"])
        _save_ledger(work, ledger)
        if not entry["done"]:
            print(f"== {stage}: stopped after {entry['seconds']:.0f} s in all; run the command again to go on",
                  flush=True)
            break
    print(table(work, ledger))


def _provenance(work: Path, stage: str) -> dict:
    path = work / stage / "results.json"
    return json.loads(path.read_text()).get("provenance", {}) if path.exists() else {}


def table(work: Path, ledger: dict) -> str:
    """The stage table (Markdown) from the ledger and each stage's provenance."""
    rows = ["| stage | seconds (slots) | parts (s) | LLM requests (misses / calls) | tokens: prompt / evaluated / "
            "generated | peak memory (MB) |", "| --- | ---: | --- | ---: | ---: | ---: |"]
    total = 0.0
    for stage, e in ledger.items():
        prov = _provenance(work, stage)
        parts = []
        for label, comp in (prov.get("components") or {}).items():
            timings = (comp.get("stats") or {}).get("timings") or {}
            parts.append(f"{label.split(':')[-1]}: fit {comp.get('fit_seconds', 0):.0f}"
                         + "".join(f", {k} {v:.0f}" for t in timings.values() if isinstance(t, dict)
                                   for k, v in t.items() if isinstance(v, (int, float))))
        evaluated = sum(p.get("seconds", 0) for p in (prov.get("pairs") or {}).values() if isinstance(p, dict))
        parts.append(f"evaluate {evaluated:.0f}")
        cost = e.get("cost", {})
        llm, tok = cost.get("llm", {}), cost.get("tokens", {})
        total += e["seconds"]
        rows.append(f"| {stage}{'' if e['done'] else ' (not finished)'} | {e['seconds']:.0f} ({e['slots']}) | "
                    f"{'; '.join(parts) or '-'} | {llm.get('misses', '-')} / {llm.get('backend_calls', '-')} | "
                    f"{tok.get('prompt_tokens', '-')} / {tok.get('prompt_evaluated', '-')} / "
                    f"{tok.get('completion_tokens', '-')} | {e.get('peak_rss_mb', 0):.0f} |")
    rows.append(f"| **all** | **{total:.0f}** ({total / 60:.1f} min) | | | | |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="the run's folder (results, ledger, its ANONAUDIT_HOME)")
    ap.add_argument("--data", type=Path, default=TAB)
    ap.add_argument("--release", default=RELEASE)
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--slot-minutes", type=float, default=None, help="stop after this many minutes (resume later)")
    ap.add_argument("--judge-sample", type=int, default=None, help="leakage judged on N linked documents only")
    ap.add_argument("--budget", default="full", choices=("quick", "standard", "full"),
                    help="the audit's budget (full: every document, the stage table's)")
    ap.add_argument("--table", action="store_true", help="print the table so far and stop")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 6 judgments, their people (--docs 6)")
    ap.add_argument("--docs", type=int, default=None, help="a slice: the first N judgments, their people")
    ap.add_argument("--home", type=Path, default=None,
                    help="the ANONAUDIT_HOME to use (default: --work's own, empty at first: cold); another run's "
                         "home measures a second release warm")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    if args.quick:
        args.docs = args.docs or 6
    if unknown := set(args.stages) - {*STAGES, "estimate"}:
        ap.error(f"unknown stage(s) {sorted(unknown)}; the stages: {', '.join(STAGES)}")
    if args.worker:
        cost = run_stage(args.worker, args.work / args.worker, args.data, args.release, args.judge_sample, args.docs,
                         args.budget)
        (args.work / f"{args.worker}.cost.json").write_text(json.dumps(cost))
    elif args.table:
        print(table(args.work, _ledger(args.work)))
    else:
        drive(args)


if __name__ == "__main__":
    main()
