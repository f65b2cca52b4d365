"""The demo audit of ``anonaudit demo``: the synthetic population (:mod:`anonaudit.demo.population`), the
baseline sanitizers, every installed attack and utility metric, results.json and report.html.

It is a user of the Python API (:func:`anonaudit.run`), as a script would be; the command line
(:mod:`anonaudit.cli.demo_command`) only checks its outputs and prints what it says.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from audit.core.errors import AnonauditError
from audit.pipeline.budget import TARGETS, check_budget

if TYPE_CHECKING:
    from audit.core.results import Result


def _say(msg: str) -> None:
    """A line of what the demo does, on stderr (the report's path alone goes to stdout)."""
    print(msg, file=sys.stderr, flush=True)


#: Settings that keep the demo's language-model stages within minutes on a laptop CPU;
#: each is stated in the report. A real audit (``anonaudit run``) uses the attacks' defaults.
#: No stage runs on a fixed sample: those that sample take documents until their interval reaches
#: the budget's target (``--budget``, :mod:`audit.pipeline.budget`).
DEMO_PARAMS: dict[str, dict] = {
    # leakage judged on 2 seeded claims of each scored document, a 16-claim judge control
    "claim_linker": {"paraphrase": False, "claim_sample": 2, "repeats": 1, "judge_check": 16},
    # span_guess runs at its defaults: the demo has a background, so the adversary guesses from it
    # (no LLM), every replaced span of the documents it takes (about 10 per document) in seconds.
    "trir": {"budget": "fast"},
}


def run_demo(out_dir: str | Path, *, n: int = 40, seed: int = 0, llm: str | None = None,
             sample: int | None = None, budget: str | None = None, presidio: bool | None = None, registry=None, attacks: list[str] | None = None,
             metrics: list[str] | None = None, sanitizers: list[str] | None = None,
             progress: bool | None = None, force: bool = False,
             on_results: Callable[[list[Result]], None] | None = None, time_limit: float | None = None) -> Path:
    """Build and run the demo audit; returns the report's path. ``attacks``/``metrics``
    default to every registered one, ``sanitizers`` (run on the originals besides the two
    releases that come with the data) to spacy_ner and presidio when installed; the
    tests pass their own registry and lists. ``on_results`` is shown the results before the
    report is written (the command line prints its table of them). ``force``: the results file
    and the report may replace an existing file of another kind (the command line checked it
    with ``--force``). ``budget``: quick, standard (default) or full; ``sample``: a fixed seeded
    sample of that many documents per release for the stages that call a language model per
    document (default: none; they sample to the budget's interval target). ``time_limit``: minutes
    the demo may take: its attacks and metrics calibrated before they run, an AnonauditError (no
    report) when the estimate, with the time already spent, exceeds it (docs/how-to/budgets.md)."""
    import yaml

    from anonaudit.api import run_spec
    from anonaudit.demo.population import write
    from audit.core.registry import given_registry
    from audit.pipeline.runner import parse_spec

    from audit.pipeline.estimate import check_limit

    check_limit(time_limit)  # a wrong limit is said before anything is written
    reg = given_registry(registry, "anonaudit.demo(): registry=")
    out = Path(out_dir).resolve()
    t0 = time.time()
    _say(f"demo: writing a synthetic population of {n} people to {out / 'data'}")
    write(out / "data", n=n, seed=seed)
    notes = []
    if presidio is None:
        presidio = importlib.util.find_spec("presidio_analyzer") is not None
        if not presidio and sanitizers is None:
            skipped = ("The Presidio release was skipped: Presidio is not installed "
                       "(pip install 'anonaudit[presidio]').")
            _say(f"demo: {skipped}")
            notes.append(skipped)
    if sanitizers is None:
        sanitizers = ["spacy_ner", *(["presidio"] if presidio else [])]
    releases = [{"name": "suppressed", "path": "data/releases/suppressed.jsonl"},
                {"name": "labels", "path": "data/releases/labels.jsonl"},
                *[{"name": name, "sanitizer": name} for name in sanitizers]]
    components, heavy = demo_components(reg, attacks, metrics, sample)
    level = check_budget(budget, "demo --budget")
    settings = _settings(components, heavy, sample, level)  # said in the report, kept in audit.yaml
    spec_data = {"title": f"Demo audit: {n} synthetic people", "seed": seed, "out": ".",
                 "originals": "data/originals.jsonl", "background": "data/background.jsonl",
                 "releases": releases, **components, "models": {"llm": llm}, "budget": level,
                 "report": {"notes": notes + settings}}
    spec_path = out / "audit.yaml"
    spec_path.write_text("# Written by `anonaudit demo`; re-run with: anonaudit run audit.yaml\n"
                         + yaml.safe_dump(spec_data, sort_keys=False), encoding="utf-8")
    spec = parse_spec(spec_data, base=out, source=str(spec_path), registry=reg, check_components=False)
    outcome = run_spec(spec, registry=reg, on_error="skip", command="demo", force=force,
                            progress=True if progress is None else progress, time_limit=time_limit)
    notes += settings
    notes.append(f"The whole demo took {time.time() - t0:.0f} s.")
    if on_results is not None:
        on_results(outcome.results)
    return outcome.report(out / "report.html", shareable=False, notes=notes, force=force)


def _settings(components: dict[str, list[dict]], heavy: list[str], sample: int | None, level: str) -> list[str]:
    """What the demo weakened or how it sampled, one sentence each, for the report."""
    settings = []
    if heavy and sample:
        settings.append(f"Language-model stages ({', '.join(heavy)}) ran on a seeded sample of {sample} documents "
                        "per release to keep the demo short; run `anonaudit run audit.yaml` without `sample` for all.")
    elif heavy:
        target = TARGETS[level]
        settings.append(f"Budget {level}: " + (f"stages that sample ({', '.join(heavy)}) took documents in a seeded "
                        f"order until their 95% interval was ±{target:g} or every document was done (each figure "
                        "says which)" if target is not None else "every stage ran on every document") + ".")
    for name, params in DEMO_PARAMS.items():
        if any(e["name"] == name for e in components["attacks"]):
            shown = ", ".join(f"{k}={v}" for k, v in params.items())
            settings.append(f"{name} ran with demo settings ({shown}); its defaults are stronger and slower.")
    return settings


def demo_components(reg, attacks: list[str] | None, metrics: list[str] | None,
                     sample: int | None) -> tuple[dict[str, list[dict]], list[str]]:
    """The demo spec's ``attacks`` and ``metrics`` entries (every registered one unless named),
    and the names of the attacks that call the LLM per document (on ``sample`` documents when
    given; else to their interval target)."""
    components: dict[str, list[dict]] = {"attacks": [], "metrics": []}
    heavy: list[str] = []
    for kind, key, names in (("attack", "attacks", attacks), ("metric", "metrics", metrics)):
        for name in (reg.names(kind) if names is None else names):
            entry: dict = {"name": name}
            if name in DEMO_PARAMS:
                entry["params"] = dict(DEMO_PARAMS[name])
            try:
                # Attacks that call the LLM per document run on a sample; the utility
                # metrics score every document (one forward pass per window, cached).
                if kind == "attack" and "llm" in reg.get(kind, name).param_names():
                    if sample:
                        entry["sample"] = sample
                    heavy.append(name)
            except AnonauditError:
                pass  # cannot be loaded: the runner skips it and the report says so
            components[key].append(entry)
        # Cheap components first, so an interrupted demo already has results to show.
        components[key].sort(key=lambda e: e["name"] in heavy)
    return components, heavy
