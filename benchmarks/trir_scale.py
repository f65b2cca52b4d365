"""TRIR at scale (issue 48): the text preparation before and after the parse cache, and the
training on Ray Train (2 workers of one thread against 1) beside a local run.

``prep``: the paper budget's preparation of a small TAB public background (NER-masked copies in 3
masking styles, curation of the background and of the copies). ``before``: as the code did it
until issue 48 (spaCy's full pipeline once to mask, then once more over the background and every
copy to curate); ``cold``: the parse cache empty (each text parsed once); ``warm``: the parse cache full (a second run, or a second configuration). The three
must give the same training texts (checked).

``ray``: the same training (demo population, fast budget, MiniLM, a dev release) locally on one
thread, alone and then twice at once in two processes (the hardware's ceiling: what two
independent trainings get from the 2 cores, which no data-parallel scheme can pass), and on a
local Ray through Ray Train with 1 and 2 workers of one thread each (``--ablation``: also 2
workers without each speed-up of the exchange); seconds per epoch (the mean over the epochs
after the first, which carries the workers' warm-up), wall time with the Ray start, and what
the attacker re-identifies on the demo's releases.

    python benchmarks/trir_scale.py prep --people 5          # TAB, 5 people (~90k characters)
    python benchmarks/trir_scale.py ray --people 20 --epochs 3
    python benchmarks/trir_scale.py ray --data tab --people 4 --max-windows 64 --epochs 3 --ablation  # long texts
    python benchmarks/trir_scale.py --quick                   # both, tiny (about a minute)
    python benchmarks/trir_scale.py target --budgets paper fast --threads 2   # the issue's time target
    python benchmarks/trir_scale.py target --quick            # a smoke run of it (3 short judgments, 1 epoch)

``target`` (issue 48's time target): the paper budget against the fast one on a background like
the issue's user had (50 people, ~1.7 MB of long texts, a dev column): TAB's public background of
the 50 people with the longest public judgments (1.81 MB), TAB's manual entity masking of their
originals as the dev release (only to choose the epoch), their originals, spaCy's entity masking
and the manual suppression as the releases under test (masking styles: labels and suppression).
Each budget runs cold (parse cache empty, nothing trained): wall time of the preparation,
training and prediction, each epoch's line, the chosen epoch, TRIR per release, and what the
same epochs would cost on every window (``window_rotation=1``), from the seconds per window.

ANONAUDIT_HOME: a fresh temporary folder per measurement (the parse cache starts empty; the
embedded models are linked from the default home).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attackers.trir import TRIRAttack  # noqa: E402
from audit.core.data import Corpus, Release, Scenario  # noqa: E402


def tab_background(people: int) -> Corpus:
    from audit.io.loaders import load_corpus

    from tab import TAB  # the benchmarks' one helper module: ../shared/data/tab beside the checkout

    bg = load_corpus(TAB / "bks" / "TAB_test_BK=Public.json", name="public")
    keep = sorted({d.subject for d in bg})[:people]
    return Corpus([d for d in bg if d.subject in keep], name="public")


@contextlib.contextmanager
def fresh_home(keep: Path | None = None):
    """A fresh ANONAUDIT_HOME whose ``models`` link to the default home's assembled models
    (``keep``: that folder instead, created if needed and kept, so a stopped run resumes)."""
    from audit.core.config import home

    models = home() / "models"
    old = os.environ.get("ANONAUDIT_HOME")
    with contextlib.ExitStack() as stack:
        if keep is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="trir-scale-"))
        else:
            keep.mkdir(parents=True, exist_ok=True)
            tmp = str(keep)
        if models.is_dir() and not (Path(tmp) / "models").exists():
            os.symlink(models, Path(tmp) / "models")
        os.environ["ANONAUDIT_HOME"] = tmp
        try:
            yield Path(tmp)
        finally:
            if old is None:
                os.environ.pop("ANONAUDIT_HOME", None)
            else:
                os.environ["ANONAUDIT_HOME"] = old


STYLES = ("label", "suppress", "token:SENSITIVE")


def prep_before(bg: Corpus) -> tuple[list[str], float]:
    """The preparation as it was before issue 48: spaCy (full pipeline) to mask, then to curate."""
    from attackers.trir.texts import curated, masked_copies
    from audit.models.nlp import Spacy

    spacy = Spacy()
    spacy.nlp  # loaded before the clock starts, as in the other two
    t0 = time.perf_counter()
    texts = [d.text for d in bg]
    copies = masked_copies(spacy, texts, list(STYLES))
    out = curated(spacy, texts + [t for c in copies for t in c])
    return out, time.perf_counter() - t0


def prep_now(bg: Corpus) -> tuple[list[str], float, dict]:
    """The preparation as the attack does it now (through the parse cache)."""
    attack = TRIRAttack(budget="paper", progress=False)
    attack._mask_styles = STYLES
    attack._timings = {}
    attack._parse(["warm-up"], "")  # spaCy loaded before the clock starts
    attack._parses.stats = {"cached": 0, "parsed": 0}
    t0 = time.perf_counter()
    texts, _ = attack._training_texts(bg, [])
    return texts, time.perf_counter() - t0, dict(attack._parses.stats)


def run_prep(people: int) -> dict:
    bg = tab_background(people)
    chars = sum(len(d.text) for d in bg)
    print(f"prep: TAB public background, {people} people, {len(bg)} documents, {chars:,} characters, "
          f"{len(STYLES)} masking styles + curation", flush=True)
    before, t_before = prep_before(bg)
    with fresh_home():
        cold, t_cold, s_cold = prep_now(bg)
        warm, t_warm, s_warm = prep_now(bg)
    assert before == cold == warm, "the preparation changed the training texts"
    rows = {"before": t_before, "cold": t_cold, "warm": t_warm}
    print("| preparation | seconds | vs before |\n| --- | ---: | ---: |")
    for k, v in rows.items():
        print(f"| {k} | {v:.1f} | {t_before / v:.1f}x |")
    print(f"parse cache: cold {s_cold}, warm {s_warm}; identical training texts: yes")
    return {"people": people, "documents": len(bg), "characters": chars, "seconds": rows,
            "cold_stats": s_cold, "warm_stats": s_warm}


def demo_scenario(people: int) -> Scenario:
    """The development population: its records, gold-suppressed and gold-labelled releases, and
    its dev release (a second record of each person, label-masked)."""
    from anonaudit.demo.population import development_population

    data = development_population(people, seed=0)
    releases = tuple(r for name, r in data.releases.items() if name in ("suppressed", "labels"))
    return Scenario(originals=data.originals, background=data.background, releases=releases,
                    dev=data.releases["dev"])


def tab_scenario(people: int) -> Scenario:
    """TAB's public background of ``people`` people (long texts: nearly every window full), no
    release (the figure is the training's speed)."""
    return Scenario(background=tab_background(people))


def _params(epochs: int, max_windows: int | None) -> dict:
    return dict(budget="fast", epochs=epochs, patience=epochs + 1, seed=0, progress=False, use_cache=False,
                max_windows_per_class=max_windows)


def _scenario(data: str, people: int) -> Scenario:
    return demo_scenario(people) if data == "demo" else tab_scenario(people)


def _record(attack, scenario: Scenario, wall: float) -> dict:
    hist = attack.trained_.info["history"]
    secs = [h["seconds"] for h in hist]
    steady = secs[1:] or secs
    trir = {r.name: round(attack.evaluate(scenario, r)[0].value, 3) for r in scenario.releases}
    return {"windows_per_epoch": attack.trained_.info["windows_per_epoch"], "epoch_seconds": secs,
            "steady_epoch_seconds": sum(steady) / len(steady), "wall": wall,
            "dev_accuracy": [h.get("dev_accuracy") for h in hist], "trir": trir}


def run_local(people: int, epochs: int, data: str, max_windows: int | None) -> dict:
    """One local training on one thread (a process of its own: the ceiling runs two at once)."""
    scenario = _scenario(data, people)
    t0 = time.perf_counter()
    attack = TRIRAttack(num_threads=1, **_params(epochs, max_windows)).fit(scenario)
    return _record(attack, scenario, time.perf_counter() - t0)


def _locals(n: int, people: int, epochs: int, data: str, max_windows: int | None, home: Path) -> list[dict]:
    """``n`` local trainings on one thread each, in processes of their own started together."""
    import subprocess

    outs = [home / f"local-{n}-{i}.json" for i in range(n)]
    cmd = [sys.executable, str(Path(__file__).resolve()), "local", "--data", data, "--people", str(people),
           "--epochs", str(epochs)] + (["--max-windows", str(max_windows)] if max_windows else [])
    procs = [subprocess.Popen([*cmd, "--out", str(o)], env={**os.environ, "ANONAUDIT_HOME": str(home)})
             for o in outs]
    if any(p.wait() for p in procs):
        raise SystemExit("a local training failed")
    return [json.loads(o.read_text())["local"] for o in outs]


#: The Ray runs: (name, workers, overlap, fused AdamW); the ablation adds the last two.
RAY_RUNS = [("Ray Train, 1 worker of 1 thread", 1, True, True), ("Ray Train, 2 workers of 1 thread", 2, True, True)]
ABLATION = [("2 workers, exchange after the backward pass", 2, False, True),
            ("2 workers, AdamW's loop over parameters (1.52x version's optimizer)", 2, True, False)]


def run_ray(people: int, epochs: int, data: str = "demo", max_windows: int | None = None,
            ablation: bool = False) -> dict:
    """The ceiling (one local training alone, then two at once), then Ray Train with 1 and 2
    workers of one thread (and, with ``ablation``, 2 workers without each speed-up)."""
    from attackers.trir import raytrain
    from audit.models.resources import Resources
    from audit.pipeline.executors import RayExecutor

    scenario = _scenario(data, people)
    print(f"ray: {data}, {people} people, {len(scenario.background)} background documents, "
          f"{epochs} epochs, at most {max_windows} windows per person and epoch", flush=True)
    out = {}

    def show(name, rec):
        out[name] = rec
        print(f"{name}: {rec['windows_per_epoch']} windows per epoch, epochs {rec['epoch_seconds']} s, wall "
              f"{rec['wall']:.0f} s, dev {rec['dev_accuracy']}, TRIR {rec['trir']}", flush=True)

    with fresh_home() as home:
        (alone,) = _locals(1, people, epochs, data, max_windows, home)  # also fills the parse cache
        show("local, 1 thread, alone", alone)
        for i, rec in enumerate(_locals(2, people, epochs, data, max_windows, home)):
            show(f"local, 1 thread, two at once ({i + 1})", rec)
        ex = RayExecutor("local", num_cpus=2, workers=1)
        try:
            for name, workers, overlap, fused in RAY_RUNS + (ABLATION if ablation else []):
                ex.workers, raytrain.OVERLAP, raytrain.FUSED_ADAMW = workers, overlap, fused
                t0 = time.perf_counter()
                with Resources(executor=ex) as res:
                    attack = TRIRAttack(num_threads=1, **_params(epochs, max_windows)).use(res).fit(scenario)
                    show(name, _record(attack, scenario, time.perf_counter() - t0))
        finally:
            raytrain.OVERLAP = raytrain.FUSED_ADAMW = True
            ex.close()
    one = out[RAY_RUNS[0][0]]["steady_epoch_seconds"]
    two = out[RAY_RUNS[1][0]]["steady_epoch_seconds"]
    base = out["local, 1 thread, alone"]["steady_epoch_seconds"]
    pair = [v["steady_epoch_seconds"] for k, v in out.items() if "two at once" in k]
    ceiling = 2 * base / (sum(pair) / len(pair))  # the throughput of two at once against one alone
    print("| training | s / epoch (after the first) | wall s | vs Ray Train 1 worker |\n| --- | ---: | ---: | ---: |")
    for k, v in out.items():
        print(f"| {k} | {v['steady_epoch_seconds']:.1f} | {v['wall']:.0f} | {one / v['steady_epoch_seconds']:.2f}x |")
    print(f"ceiling (two independent trainings at once against one alone): {ceiling:.2f}x; "
          f"2 workers vs 1: {one / two:.2f}x ({one / two / ceiling:.0%} of the ceiling); "
          f"vs the local run alone: {base / two:.2f}x")
    return {"data": data, "people": people, "epochs": epochs, "runs": out, "ceiling": ceiling,
            "speedup_2v1": one / two, "speedup_vs_local": base / two}


# --------------------------------------------------------------------------- target (issue 48 item 1)

#: The dev release of ``target`` (used only to choose the epoch) and the releases under test.
TARGET_DEV = ("Manual_Entity", "TAB_test_Manual_Entity.json")
TARGET_RELEASES = (("spaCy_Entity", "TAB_test_spaCy_Entity.json"),
                   ("Manual_Supression", "TAB_test_Manual_Supression.json"))


def target_scenario(people: int, shortest: bool = False) -> Scenario:
    """TAB's public background of the ``people`` people with the longest public judgments (ties
    by id; ``shortest``: the shortest, for a smoke run); dev release: TAB's manual entity masking
    of their originals (labels); releases under test: their originals, spaCy's entity masking
    and the manual suppression."""
    from audit.io.loaders import load_corpus

    from tab import TAB, published

    bg = load_corpus(TAB / "bks" / "TAB_test_BK=Public.json", name="public")
    ranked = sorted(bg, key=lambda d: (len(d.text) if shortest else -len(d.text), d.id))
    keep = {d.subject for d in ranked[:people]}
    background = Corpus([d for d in bg if d.subject in keep], name="public")
    originals = load_corpus(TAB / "bks" / "TAB_test_BK=Original.json", name="originals")
    ids = [d.id for d in originals if d.subject in keep]
    mine = Corpus([originals[i] for i in ids], name="Original")
    releases = (Release("Original", mine), *(published(n, f, originals, ids) for n, f in TARGET_RELEASES))
    return Scenario(originals=mine, background=background, releases=releases, dev=published(*TARGET_DEV, originals, ids))


def target_run(scenario: Scenario, budget: str, threads: int, rotation: int | None, small: dict,
               home: Path | None = None) -> dict:
    """One cold run of the attack as a user starts it: a fresh ANONAUDIT_HOME (parse cache empty,
    no trained attacker), preparation + training (``fit``) and the prediction of every release.
    ``home``: that ANONAUDIT_HOME instead, kept: a run stopped there resumes from its checkpoint
    (then neither cold nor whole: its seconds are those of the resumed part)."""
    with fresh_home(None if home is None else home / budget):
        attack = TRIRAttack(budget=budget, num_threads=threads, seed=0, window_rotation=rotation, device="cpu",
                            progress=True, **small)
        t0 = time.perf_counter()
        attack.fit(scenario)
        fit_s = time.perf_counter() - t0
        trir, predict_s = {}, {}
        for rel in scenario.releases:
            t1 = time.perf_counter()
            head = attack.evaluate(scenario, rel)[0]
            predict_s[rel.name], trir[rel.name] = round(time.perf_counter() - t1, 1), round(head.value, 3)
        info = attack.trained_.info
    hist = info["history"]
    epoch_s = [h["seconds"] for h in hist]
    prep = (info.get("timings") or {}).get("text_preparation_seconds", 0.0)
    out = {"budget": budget, "resumed_from_epoch": info.get("resumed_from_epoch"),
           "window_rotation": info["settings"]["window_rotation"], "mask_styles": info["mask_styles"],
           "training_windows": info["training_windows"], "windows_per_epoch": info["windows_per_epoch"],
           "epochs_run": len(hist), "chosen_epoch": info["chosen_epoch"], "max_epochs": info["max_epochs"],
           "history": hist, "fit_check": info["fit_check"]["accuracy"], "preparation_s": prep,
           "epochs_s": round(sum(epoch_s), 1), "fit_s": round(fit_s, 1), "predict_s": predict_s,
           "wall_s": round(fit_s + sum(predict_s.values()), 1), "trir": trir}
    # the same epochs on every window (window_rotation=1): each epoch's seconds scale with its windows
    per_window = sum(epoch_s) / max(1, sum(h["windows"] for h in hist))
    out["projected_all_windows_epoch_s"] = round(per_window * info["training_windows"], 1)
    return out


def run_target(people: int, budgets: list[str], threads: int, rotation: int | None, quick: bool,
               home: Path | None = None) -> dict:
    scenario = target_scenario(people, shortest=quick)
    bg = scenario.background
    chars = sum(len(d.text) for d in bg)
    print(f"target: TAB public background, the {people} people with the {'shortest' if quick else 'longest'} "
          f"judgments ({len(bg)} documents, {chars:,} characters: {chars / 1e6:.2f} MB); dev release "
          f"{scenario.dev.name}; releases {', '.join(r.name for r in scenario.releases)}; {threads} threads; "
          f"window rotation {rotation or 'default'}", flush=True)
    small = dict(epochs=1, window=32, overlap=8) if quick else {}
    runs = {}
    for budget in budgets:
        r = runs[budget] = target_run(scenario, budget, threads, rotation, small, home)
        print(f"{budget}: " + json.dumps({k: v for k, v in r.items() if k != "history"}), flush=True)
        for h in r["history"]:
            print(f"  epoch {h['epoch']}: loss {h['loss']:.3f}, dev {h.get('dev_accuracy')}, {h['windows']} windows, "
                  f"{h['seconds']:.0f} s", flush=True)
    print("\n| budget | windows per epoch (of) | epochs run (chosen) | preparation s | epochs s | fit s | "
          "prediction s | wall s | fit check | " + " | ".join(r.name for r in scenario.releases) + " |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |" + " ---: |" * len(scenario.releases))
    for b, r in runs.items():
        print(f"| {b} | {r['windows_per_epoch']} ({r['training_windows']}) | {r['epochs_run']} ({r['chosen_epoch']}) | "
              f"{r['preparation_s']:.0f} | {r['epochs_s']:.0f} | {r['fit_s']:.0f} | {sum(r['predict_s'].values()):.0f} | "
              f"{r['wall_s']:.0f} | {r['fit_check']:.2f} | " + " | ".join(f"{v:.2f}" for v in r["trir"].values()) + " |")
    if "paper" in runs and "fast" in runs:
        print(f"paper / fast wall time: {runs['paper']['wall_s'] / runs['fast']['wall_s']:.2f}x")
    return {"people": people, "documents": len(bg), "characters": chars, "threads": threads, "dev": scenario.dev.name,
            "releases": [r.name for r in scenario.releases], "rotation": rotation, "runs": runs}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="?", choices=["prep", "ray", "both", "local", "target"], default="both",
                    help="local: one local training on one thread (what the ceiling runs); target: issue 48's "
                    "time target")
    ap.add_argument("--people", type=int, default=None, help="prep: TAB people (5); ray: demo people (20)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--data", choices=["demo", "tab"], default="demo", help="ray: the demo population or TAB's "
                    "public background (long texts)")
    ap.add_argument("--max-windows", type=int, default=None, help="ray: at most this many windows per person "
                    "and epoch (max_windows_per_class)")
    ap.add_argument("--ablation", action="store_true", help="ray: also 2 workers without each speed-up of the "
                    "exchange (the exchange after the backward pass; AdamW's loop over parameters)")
    ap.add_argument("--budgets", nargs="+", choices=["paper", "fast"], default=["paper", "fast"],
                    help="target: the budgets to run, one after the other")
    ap.add_argument("--threads", type=int, default=2, help="target: torch threads")
    ap.add_argument("--window-rotation", type=int, default=None, help="target: the attack's window_rotation "
                    "(default: the budget's; 1: every window every epoch, as before issue 48)")
    ap.add_argument("--home", type=Path, default=None, help="target: keep each budget's ANONAUDIT_HOME in "
                    "HOME/BUDGET (default: a fresh temporary one), so a stopped run started again resumes "
                    "from its last finished epoch")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: about a minute")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": os.getloadavg()}
    if args.what == "local":
        results["local"] = run_local(args.people or 20, args.epochs, args.data, args.max_windows)
    if args.what in ("prep", "both"):
        results["prep"] = run_prep(args.people or (1 if args.quick else 5))
    if args.what in ("ray", "both"):
        results["ray"] = run_ray(args.people or (6 if args.quick else 20), 2 if args.quick else args.epochs,
                                 args.data, args.max_windows, args.ablation)
    if args.what == "target":
        results["target"] = run_target(args.people or (3 if args.quick else 50),
                                       ["fast"] if args.quick else args.budgets, args.threads, args.window_rotation,
                                       args.quick, args.home)
    results["load_after"] = os.getloadavg()
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
