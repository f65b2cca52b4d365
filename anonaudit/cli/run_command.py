"""``anonaudit run``: run an audit spec, then its gate and report."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from anonaudit.cli.common import budget_option, no_cache_run, time_limit_option
from anonaudit.cli.output_options import (Output, check_outputs, force_option, keep_ids_option, report_outputs,
                                          results_outputs)
from anonaudit.cli.tracking_options import tracking_options
from audit.core.errors import AnonauditError
from audit.core.summary import summary_path
from audit.pipeline.outputs import spec_inputs


@click.command("run")
@click.argument("spec_file", type=click.Path(dir_okay=False), metavar="AUDIT.yaml", required=False)
@click.option("--tae-config", type=click.Path(dir_okay=False), default=None, metavar="CONFIG.json",
              help="Run a TAE evaluation (its config.json: corpus, anonymizations, metrics, TRIR's background) "
                   "instead of a spec; what cannot be run offline is listed as not run, with why.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output folder (overrides the spec's `out`): results.json, summary.csv, releases/, report.html, "
                   "findings.csv and, with --shareable, shareable/.")
@click.option("--report/--no-report", default=True, show_default=True, help="Write OUT/report.html at the end.")
@click.option("--shareable", is_flag=True,
              help="Also write the shareable edition (no original text, no file path, documents by "
                   "pseudonym) to OUT/shareable/, a folder safe to send.")
@keep_ids_option()
@click.option("--executor", "executor", type=click.Choice(["local", "ray"]), default=None,
              help="Where per-document work runs (overrides the spec's `executor`; default local). "
                   "ray needs pip install 'anonaudit[ray]'.")
@click.option("--ray-address", default=None, metavar="ADDRESS",
              help="The Ray cluster: auto (the cluster this machine joined), local (start a Ray here for the run), "
                   "HOST:PORT or ray://HOST:PORT. Implies --executor ray.")
@click.option("--ray-workers", type=click.IntRange(1, 100_000), default=None,
              help="Workers (actors) per stage on Ray (default: the cluster's CPUs).")
@budget_option
@time_limit_option
@tracking_options
@force_option
@no_cache_run
@click.pass_context
def run_cmd(ctx: click.Context, spec_file: str | None, tae_config: str | None, out_dir: str | None, report: bool,
            shareable: bool, keep_ids: bool, executor: str | None, ray_address: str | None, ray_workers: int | None,
            budget: str | None, time_limit: float | None, mlflow_uri: str | None, mlflow_experiment: str,
            mlflow_private: bool, force: bool) -> None:
    """Run every attack and utility metric of an audit spec (YAML or TOML) on every release.

    Results go to OUT/results.json, saved after each (component, release) pair, with OUT/summary.csv
    beside it (one row per release x result: value, 95% CI, n, baseline); running the same command
    again resumes and recomputes nothing that finished. The whole spec is checked
    before anything runs. --tae-config CONFIG.json runs a TAE evaluation instead (docs/how-to/tae.md,
    "Coming from TAE"). Exit status: 0 done (and the spec's `gate` passed), 1 when a `gate`
    threshold fails, 2 when the spec or an input is invalid, 3 when no threshold fails but one is
    inconclusive (an attacker failed its own check).
    """
    import anonaudit
    from anonaudit.cli import tracking_options as tracking
    from anonaudit.cli.common import echo_release_warnings, echo_summary
    from anonaudit.cli.driver import registry_of
    from audit.pipeline.runner import load_spec

    reg = registry_of(ctx)
    overrides = {**({"out": str(Path(out_dir).resolve())} if out_dir else {}), **({"budget": budget} if budget else {})}
    if (spec_file is None) == (tae_config is None):
        raise AnonauditError("give an audit spec (AUDIT.yaml) or --tae-config CONFIG.json, not both or neither")
    if tae_config is not None:
        spec, spec_file = _tae_spec(tae_config, overrides, reg), tae_config
    else:
        spec = load_spec(spec_file, overrides=overrides or None, registry=reg)
    spec = _with_executor(spec, executor, ray_address, ray_workers)
    check_outputs(spec_outputs(spec, report=report, shareable=shareable), spec_inputs(spec, spec_file), force=force)
    tracking.check(mlflow_uri, mlflow_experiment)  # a tracker that cannot be used fails now, not after the audit
    results = anonaudit.run(spec, registry=reg, progress=True, force=force, time_limit=time_limit)
    click.echo("")
    echo_summary(results.results)
    echo_release_warnings(results.provenance)
    click.echo(f"\n{len(results.computed)} pair(s) computed, {len(results.reused)} reused from an earlier run, "
               f"in {results.seconds:.1f}s; results: {results.path} (table: {summary_path(results.path)})")
    for s in results.skipped + results.errors:
        click.secho(f"not run: {s['component']}: {s['reason']}", fg="yellow", err=True)
    checks = results.outcome  # the spec's gate, judged by anonaudit.run (None without one)
    if checks is not None:
        click.echo("\n" + checks.table(keep_ids=keep_ids))  # releases named after files: by pseudonym
    if report:
        max_docs = int(spec.report.get("max_documents", 50))
        notes = list(spec.report.get("notes") or ())  # e.g. the demo's weakened settings
        path = results.report(spec.out / "report.html", shareable=False, gate=checks, max_documents=max_docs,
                              notes=notes, force=force)
        click.echo(f"report: {path}")
        if shareable or bool(spec.report.get("shareable")):
            # In a folder of its own: everything in OUT/shareable/ may leave the data owner;
            # OUT/results.json and OUT/releases/ hold originals and must not.
            shared = results.report(spec.out / "shareable" / "report.html", shareable=True, gate=checks,
                                    max_documents=max_docs, notes=notes, keep_ids=keep_ids, force=force)
            click.secho(f"shareable report: {shared} (share the folder {shared.parent} only: "
                        f"{spec.out / 'results.json'} and {spec.out / 'releases'} hold original text)",
                        fg="green", err=True)
    tracking.log(results, mlflow_uri, mlflow_experiment, mlflow_private, keep_ids=keep_ids,
                 tags={"anonaudit.gate": checks.status} if checks is not None else None)
    if checks is not None and checks.exit_code:
        sys.exit(checks.exit_code)


def _tae_spec(config: str, overrides, reg):
    """The audit spec of a TAE config (:mod:`audit.io.taeconfig`); its notes are said now and go
    beside the report's verdict."""
    from audit.io.taeconfig import read_tae_config
    from audit.pipeline.spec import parse_spec

    mapping, notes = read_tae_config(config)
    mapping.update(overrides or {})
    for note in notes:
        click.secho(f"TAE config: {note}", fg="yellow", err=True)
    return parse_spec(mapping, base=Path(config).resolve().parent, source=config, registry=reg)


def spec_outputs(spec, *, report: bool, shareable: bool) -> list[Output]:
    """What ``run`` writes in OUT: results.json (releases/ beside it) and the report with its CSV."""
    outs = [Output(spec.out, "folder", "--out (or the spec's out)"),
            *results_outputs(spec.out / "results.json", "OUT/results.json")]
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


COMMANDS = [run_cmd]
