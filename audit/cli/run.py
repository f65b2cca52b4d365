"""``anonaudit run | report | gate | demo``: the commands a privacy officer and a CI job use."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import click

from audit.demo.data import MAX_RELEASED

from audit.cli.common import no_cache_run
from audit.cli.outputs import Output, check_outputs, force_option, report_outputs, results_outputs
from audit.core.errors import AnonauditError
from audit.core.summary import summary_path


def _echo_err(msg: str) -> None:
    click.echo(msg, err=True)


def _thresholds(max_: tuple[str, ...], min_: tuple[str, ...]):
    from audit.pipeline.gate import parse_threshold

    return [parse_threshold(t, "max") for t in max_] + [parse_threshold(t, "min") for t in min_]


def _render(results_path: Path, out: Path, *, shareable: bool, checks=None, max_documents: int = 50,
            title: str | None = None, notes=(), registry=None, keep_ids: bool = False) -> Path:
    """Write the report and, beside it, its CSV of per-document findings (``findings.csv``,
    or ``NAME.csv`` for a report named otherwise than report.html), through the API's
    :meth:`anonaudit.Results.report`."""
    from anonaudit import load_results

    return load_results(results_path).report(out, shareable=shareable, gate=checks, max_documents=max_documents,
                                             title=title, notes=notes, registry=registry, keep_ids=keep_ids)


def _warn_originals_beside(report: Path, results_path: Path) -> None:
    """Say loudly which files beside a shareable report hold original text."""
    folder = report.resolve().parent
    if folder != results_path.resolve().parent:
        return
    beside = [results_path.name] + (["releases/"] if (folder / "releases").is_dir() else []) + \
        [p.name for p in folder.glob("*.releases") if p.is_dir()]
    click.secho(f"WARNING: {folder} also holds {', '.join(beside)}, with original text and per-document "
                f"evidence: share {report.name} and its CSV only, never the folder.", fg="yellow", err=True)


# --------------------------------------------------------------------------- run


@click.command("run")
@click.argument("spec_file", type=click.Path(dir_okay=False), metavar="AUDIT.yaml")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output folder (overrides the spec's `out`): results.json, summary.csv, releases/, report.html, "
                   "findings.csv and, with --shareable, shareable/.")
@click.option("--report/--no-report", default=True, show_default=True, help="Write OUT/report.html at the end.")
@click.option("--shareable", is_flag=True,
              help="Also write the shareable edition (no original text, no file path, documents by "
                   "pseudonym) to OUT/shareable/, a folder safe to send.")
@click.option("--keep-ids", is_flag=True,
              help="In the shareable edition, keep the documents' ids (by default each is a stable pseudonym, "
                   "D01, D02...: an id can be a person's name or a case number).")
@click.option("--executor", "executor", type=click.Choice(["local", "ray"]), default=None,
              help="Where per-document work runs (overrides the spec's `executor`; default local). "
                   "ray needs pip install 'anonaudit[ray]'.")
@click.option("--ray-address", default=None, metavar="ADDRESS",
              help="The Ray cluster: auto (the cluster this machine joined), local (start a Ray here for the run), "
                   "HOST:PORT or ray://HOST:PORT. Implies --executor ray.")
@click.option("--ray-workers", type=click.IntRange(1, 100_000), default=None,
              help="Workers (actors) per stage on Ray (default: the cluster's CPUs).")
@force_option
@no_cache_run
@click.pass_context
def run_cmd(ctx: click.Context, spec_file: str, out_dir: str | None, report: bool, shareable: bool, keep_ids: bool,
            executor: str | None, ray_address: str | None, ray_workers: int | None, force: bool) -> None:
    """Run every attack and utility metric of an audit spec (YAML or TOML) on every release.

    Results go to OUT/results.json, saved after each (component, release) pair, with OUT/summary.csv
    beside it (one row per release x result: value, 95% CI, n, baseline); running the same command
    again resumes and recomputes nothing that finished. The whole spec is checked
    before anything runs. Exit status: 0 done (and the spec's `gate` passed), 1 when a `gate`
    threshold fails, 2 when the spec or an input is invalid, 3 when no threshold fails but one is
    inconclusive (an attacker failed its own check).
    """
    import anonaudit
    from audit.cli.common import echo_summary
    from audit.cli.driver import registry_of
    from audit.pipeline.runner import load_spec

    reg = registry_of(ctx)
    overrides = {"out": str(Path(out_dir).resolve())} if out_dir else None
    spec = load_spec(spec_file, overrides=overrides, registry=reg)
    spec = _with_executor(spec, executor, ray_address, ray_workers)
    check_outputs(spec_outputs(spec, report=report, shareable=shareable), spec_inputs(spec, spec_file), force=force)
    results = anonaudit.run(spec, registry=reg, progress=True)
    click.echo("")
    echo_summary(results.results)
    click.echo(f"\n{len(results.computed)} pair(s) computed, {len(results.reused)} reused from an earlier run, "
               f"in {results.seconds:.1f}s; results: {results.path} (table: {summary_path(results.path)})")
    for s in results.skipped + results.errors:
        click.secho(f"not run: {s['component']}: {s['reason']}", fg="yellow", err=True)
    checks = None
    if spec.gate.max or spec.gate.min:
        checks = results.gate(max=spec.gate.max, min=spec.gate.min, on_point=spec.gate.on_point)
        click.echo("\n" + checks.table())
    if report:
        max_docs = int(spec.report.get("max_documents", 50))
        notes = list(spec.report.get("notes") or ())  # e.g. the demo's weakened settings
        path = results.report(spec.out / "report.html", shareable=False, gate=checks, max_documents=max_docs,
                              registry=reg, notes=notes)
        click.echo(f"report: {path}")
        if shareable or bool(spec.report.get("shareable")):
            # In a folder of its own: everything in OUT/shareable/ may leave the data owner;
            # OUT/results.json and OUT/releases/ hold originals and must not.
            shared = results.report(spec.out / "shareable" / "report.html", shareable=True, gate=checks,
                                    max_documents=max_docs, registry=reg, notes=notes, keep_ids=keep_ids)
            click.secho(f"shareable report: {shared} (share the folder {shared.parent} only: "
                        f"{spec.out / 'results.json'} and {spec.out / 'releases'} hold original text)",
                        fg="green", err=True)
    if checks is not None and checks.exit_code:
        sys.exit(checks.exit_code)


def spec_inputs(spec, spec_file: str | Path) -> list[tuple[str, Path | None]]:
    """Every input file of an audit spec, by how the spec names it (for :func:`check_outputs`)."""
    return [("the audit spec", Path(spec_file)),
            ("originals", spec.originals and spec.originals.path),
            ("background", spec.background and spec.background.path),
            *((f"corpora.{k}", v.path) for k, v in spec.corpora.items()),
            *((f"release {r.name or r.path}", r.path) for r in spec.releases if r.path is not None)]


def spec_outputs(spec, *, report: bool, shareable: bool) -> list[Output]:
    """What ``run`` writes in OUT: results.json (releases/ beside it) and the report with its CSV."""
    outs = results_outputs(spec.out / "results.json", "OUT/results.json")
    if report:
        outs += report_outputs(spec.out / "report.html")
        if shareable or bool(spec.report.get("shareable")):
            outs += report_outputs(spec.out / "shareable" / "report.html")
    return outs


def _with_executor(spec, kind: str | None, address: str | None, workers: int | None):
    """``spec`` with the executor options of the command line laid over its ``executor``."""
    import dataclasses

    from audit.pipeline.executors import parse_executor

    if kind is None and address is None and workers is None:
        return spec
    merged = dataclasses.asdict(spec.executor)
    if address is not None or workers is not None:
        merged["kind"] = "ray"
    merged.update({k: v for k, v in (("kind", kind), ("address", address), ("workers", workers)) if v is not None})
    parsed, problems = parse_executor(merged)
    if problems:
        raise AnonauditError("; ".join(f"--{k.replace('executor.', 'ray-') if '.' in k else k}: {m}"
                                       for k, m in problems))
    return dataclasses.replace(spec, executor=parsed)


# --------------------------------------------------------------------------- report


@click.command("report")
@click.argument("results", type=click.Path(dir_okay=False), metavar="RESULTS.json")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="HTML file to write (default: report.html beside the results).")
@click.option("--shareable", is_flag=True,
              help="Leave out every original text, original span, guess, predicted identity and file path; "
                   "documents by pseudonym.")
@click.option("--keep-ids", is_flag=True,
              help="In the shareable edition, keep the documents' ids (by default each is a stable pseudonym, "
                   "D01, D02...: an id can be a person's name or a case number).")
@click.option("--max", "max_", multiple=True, metavar="NAME=VALUE", help="Gate threshold to show (see `gate`).")
@click.option("--min", "min_", multiple=True, metavar="NAME=VALUE", help="Gate threshold to show (see `gate`).")
@click.option("--on-point", is_flag=True, help="Judge thresholds on point estimates (default: the cautious CI bound).")
@click.option("--on-upper-ci", is_flag=True, hidden=True, help="The default now; accepted for older scripts.")
@click.option("--max-documents", type=click.IntRange(0, 100_000), default=50, show_default=True,
              help="Documents shown per release in the drill-down (the JSON has all).")
@click.option("--title", default=None, help="Report title.")
@force_option
def report_cmd(results: str, out: str | None, shareable: bool, keep_ids: bool, max_: tuple[str, ...],
               min_: tuple[str, ...],
               on_point: bool, on_upper_ci: bool, max_documents: int, title: str | None, force: bool) -> None:
    """Render any results file as one self-contained HTML report.

    Beside the report goes its CSV of per-document findings: findings.csv beside report.html,
    findings.shareable.csv beside report.shareable.html, NAME.csv beside any other NAME.html.
    """
    from audit.pipeline.gate import evaluate
    from audit.core.results import ResultsFile

    path = Path(results)
    target = Path(out) if out else path.with_name("report.shareable.html" if shareable else "report.html")
    check_outputs(report_outputs(target), [("RESULTS.json", path)], force=force)
    checks = None
    if max_ or min_:
        checks = evaluate(ResultsFile.load(path), _thresholds(max_, min_), on_point=on_point)
    written = _render(path, target, shareable=shareable, checks=checks, max_documents=max_documents, title=title,
                      keep_ids=keep_ids)
    click.echo(str(written))
    if shareable:
        _warn_originals_beside(written, path)


# --------------------------------------------------------------------------- gate


@click.command("gate")
@click.argument("results", type=click.Path(dir_okay=False), metavar="RESULTS.json")
@click.option("--max", "max_", multiple=True, metavar="NAME=VALUE",
              help="Fail when result NAME's 95% CI upper bound is above VALUE (e.g. trir=0.1 or trir=10%). "
                   "Repeatable.")
@click.option("--min", "min_", multiple=True, metavar="NAME=VALUE",
              help="Fail when result NAME's 95% CI lower bound is below VALUE (e.g. tpi=0.5). Repeatable.")
@click.option("--release", "releases", multiple=True, metavar="NAME",
              help="Judge only this release (repeatable; default: every release).")
@click.option("--on-point", is_flag=True,
              help="Compare point estimates instead of the 95% CI's upper bound for --max (lower bound for --min).")
@click.option("--on-upper-ci", is_flag=True, hidden=True, help="The default now; accepted for older scripts.")
@click.option("--junit", type=click.Path(dir_okay=False), default=None, help="Also write JUnit XML here.")
@force_option
def gate_cmd(results: str, max_: tuple[str, ...], min_: tuple[str, ...], releases: tuple[str, ...],
             on_point: bool, on_upper_ci: bool, junit: str | None, force: bool) -> None:
    """Pass/fail thresholds on a results file, for CI, on the cautious side: a risk fails when
    its 95% CI's upper bound is above --max, a utility when its lower bound is below --min.

    Exit status: 0 when every check passes, 1 when any fails, 3 when none fails but one is
    inconclusive (the attacker failed its own check, so its low risk proves nothing), 2 when
    the input is unusable (missing or malformed file, unknown result or release name, bad
    threshold).
    """
    from audit.pipeline.gate import FAIL, INCONCLUSIVE, evaluate, exit_code, format_table, write_junit
    from audit.core.results import ResultsFile

    try:
        if junit:
            check_outputs([Output(Path(junit), "junit", "--junit")], [("RESULTS.json", results)], force=force)
        checks = evaluate(ResultsFile.load(results), _thresholds(max_, min_), releases=releases,
                          on_point=on_point)
    except AnonauditError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    click.echo(format_table(checks))
    failed = sum(c.status == FAIL for c in checks)
    unsure = sum(c.status == INCONCLUSIVE for c in checks)
    if junit:
        write_junit(junit, checks)
    if failed:
        click.secho(f"{failed} of {len(checks)} check(s) failed"
                    + (f", {unsure} inconclusive" if unsure else ""), fg="red", err=True)
    elif unsure:
        click.secho(f"{unsure} of {len(checks)} check(s) inconclusive: an attacker failed its own check, "
                    "so a low risk from it proves nothing (see above)", fg="yellow", err=True)
    else:
        click.secho(f"all {len(checks)} check(s) passed", fg="green", err=True)
    if exit_code(checks):
        sys.exit(exit_code(checks))


# --------------------------------------------------------------------------- demo


@click.command("demo")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="anonaudit-demo", show_default=True,
              help="Folder for the data, results.json (summary.csv beside it) and report.html.")
@click.option("--n", type=click.IntRange(3, MAX_RELEASED), default=40, show_default=True,
              help=f"People in the release (3, the fewest the NMI metric can cluster, to {MAX_RELEASED}).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--llm", "llm_spec", default=None, metavar="SPEC",
              help="LLM for the attacks that use one (default: the best embedded model installed).")
@click.option("--sample", type=click.IntRange(1, 100_000), default=20, show_default=True,
              help="Documents per release for the stages that call a language model per document.")
@click.option("--presidio/--no-presidio", default=None,
              help="Include the Presidio release (default: when Presidio is installed).")
@force_option
@no_cache_run
@click.pass_context
def demo_cmd(ctx: click.Context, out_dir: str, n: int, seed: int, llm_spec: str | None, sample: int,
             presidio: bool | None, force: bool) -> None:
    """The whole audit on a synthetic population: data, baseline sanitizers, every installed attack
    and utility metric, results.json and report.html (prints the report's path). OUT receives
    data/ (the population), audit.yaml, results.json, releases/, report.html and findings.csv."""
    from audit.cli.demo import data_outputs
    from audit.cli.driver import registry_of

    out = Path(out_dir)
    check_outputs([*data_outputs(out / "data"), *results_outputs(out / "results.json", "OUT/results.json"),
                   *report_outputs(out / "report.html")], [], force=force)

    path = run_demo(out_dir, n=n, seed=seed, llm=llm_spec, sample=sample, presidio=presidio,
                    registry=registry_of(ctx))
    click.echo(str(path))
    from audit.core.results import ResultsFile

    failed = ResultsFile.load(out / "results.json").provenance.get("errors") or []
    if failed:  # the report says so too; a demo with a failed attack or metric is not a success
        click.secho(f"error: {len(failed)} component(s) failed: "
                    + "; ".join(f"{e.get('component')}: {e.get('reason')}" for e in failed), fg="red", err=True)
        ctx.exit(2)


#: Settings that keep the demo's language-model stages within minutes on a laptop CPU;
#: each is stated in the report. A real audit (``anonaudit run``) uses the attacks' defaults.
DEMO_PARAMS: dict[str, dict] = {
    # leakage over 10 documents per release (2 seeded claims each) and a 16-claim judge control
    "claim_linker": {"paraphrase": False, "score_sample": 10, "claim_sample": 2, "repeats": 1, "judge_check": 16},
    # span_guess runs at its defaults: the demo has a background, so the adversary guesses from it
    # (no LLM), every replaced span of the sampled documents (about 10 per document, hundreds per
    # release) in seconds.
    "trir": {"budget": "fast"},
}


def run_demo(out_dir: str | Path, *, n: int = 40, seed: int = 0, llm: str | None = None, sample: int = 20,
             presidio: bool | None = None, registry=None, attacks: list[str] | None = None,
             metrics: list[str] | None = None, sanitizers: list[str] | None = None,
             progress: bool | None = None) -> Path:
    """Build and run the demo audit; returns the report's path. ``attacks``/``metrics``
    default to every registered one, ``sanitizers`` (run on the originals besides the two
    releases that come with the data) to spacy_ner and presidio when installed; the
    tests pass their own registry and lists."""
    import yaml

    import anonaudit
    from audit.demo.data import write
    from audit.core.registry import registry as default_registry
    from audit.pipeline.runner import parse_spec

    reg = registry or default_registry
    out = Path(out_dir).resolve()
    t0 = time.time()
    _echo_err(f"demo: writing a synthetic population of {n} people to {out / 'data'}")
    write(out / "data", n=n, seed=seed)
    notes = []
    if presidio is None:
        presidio = importlib.util.find_spec("presidio_analyzer") is not None
        if not presidio and sanitizers is None:
            skipped = ("The Presidio release was skipped: Presidio is not installed "
                       "(pip install 'anonaudit[presidio]').")
            _echo_err(f"demo: {skipped}")
            notes.append(skipped)
    if sanitizers is None:
        sanitizers = ["spacy_ner", *(["presidio"] if presidio else [])]
    releases = [{"name": "suppressed", "path": "data/releases/suppressed.jsonl"},
                {"name": "labels", "path": "data/releases/labels.jsonl"},
                *[{"name": name, "sanitizer": name} for name in sanitizers]]
    components, heavy = _demo_components(reg, attacks, metrics, sample)
    # What the demo weakened, said in the report; kept in audit.yaml so a re-run still says it.
    settings = []
    if heavy:
        settings.append(f"Language-model stages ({', '.join(heavy)}) ran on a seeded sample of {sample} documents "
                        "per release to keep the demo short; run `anonaudit run audit.yaml` without `sample` for all.")
    for name, params in DEMO_PARAMS.items():
        if any(e["name"] == name for e in components["attacks"]):
            shown = ", ".join(f"{k}={v}" for k, v in params.items())
            settings.append(f"{name} ran with demo settings ({shown}); its defaults are stronger and slower.")
    spec_data = {"title": f"Demo audit: {n} synthetic people", "seed": seed, "out": ".",
                 "originals": "data/originals.jsonl", "background": "data/background.jsonl",
                 "releases": releases, **components, "models": {"llm": llm},
                 "report": {"notes": notes + settings}}
    spec_path = out / "audit.yaml"
    spec_path.write_text("# Written by `anonaudit demo`; re-run with: anonaudit run audit.yaml\n"
                         + yaml.safe_dump(spec_data, sort_keys=False), encoding="utf-8")
    spec = parse_spec(spec_data, base=out, source=str(spec_path), registry=reg, check_components=False)
    outcome = anonaudit.run(spec, registry=reg, on_error="skip", command="demo",
                            progress=True if progress is None else progress)
    notes += settings
    notes.append(f"The whole demo took {time.time() - t0:.0f} s.")
    from audit.cli.common import echo_summary

    echo_summary(outcome.results)
    return outcome.report(out / "report.html", shareable=False, notes=notes, registry=reg)


def _demo_components(reg, attacks: list[str] | None, metrics: list[str] | None,
                     sample: int) -> tuple[dict[str, list[dict]], list[str]]:
    """The demo spec's ``attacks`` and ``metrics`` entries (every registered one unless named),
    and the names of the attacks that run on a sample because they call the LLM per document."""
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
                    entry["sample"] = sample
                    heavy.append(name)
            except AnonauditError:
                pass  # cannot be loaded: the runner skips it and the report says so
            components[key].append(entry)
        # Cheap components first, so an interrupted demo already has results to show.
        components[key].sort(key=lambda e: "sample" in e)
    return components, heavy


COMMANDS = [run_cmd, report_cmd, gate_cmd, demo_cmd]
