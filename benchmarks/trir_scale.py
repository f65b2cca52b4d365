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
def fresh_home():
    """A fresh ANONAUDIT_HOME whose ``models`` link to the default home's assembled models."""
    from audit.core.config import home

    models = home() / "models"
    old = os.environ.get("ANONAUDIT_HOME")
    with tempfile.TemporaryDirectory(prefix="trir-scale-") as tmp:
        if models.is_dir():
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
    from audit.demo.data import development_population

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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="?", choices=["prep", "ray", "both", "local"], default="both",
                    help="local: one local training on one thread (what the ceiling runs)")
    ap.add_argument("--people", type=int, default=None, help="prep: TAB people (5); ray: demo people (20)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--data", choices=["demo", "tab"], default="demo", help="ray: the demo population or TAB's "
                    "public background (long texts)")
    ap.add_argument("--max-windows", type=int, default=None, help="ray: at most this many windows per person "
                    "and epoch (max_windows_per_class)")
    ap.add_argument("--ablation", action="store_true", help="ray: also 2 workers without each speed-up of the "
                    "exchange (the exchange after the backward pass; AdamW's loop over parameters)")
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
    results["load_after"] = os.getloadavg()
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
