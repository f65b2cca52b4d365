"""``anonaudit demo``: the whole audit on a synthetic population (:mod:`anonaudit.demo.demo_audit`), and
``anonaudit demo-data``: write that population to a folder (:mod:`anonaudit.demo.population`)."""

from __future__ import annotations

from pathlib import Path

import click

from anonaudit.cli.param_options import Checked
from audit.core.arguments import Seed
from anonaudit.cli.common import DEMO_TIME_LIMIT_HELP, budget_option, no_cache_run, time_limit_option
from anonaudit.cli.output_options import Output, check_outputs, force_option, report_outputs, results_outputs
from anonaudit.demo.population import FILES, MAX_RELEASED


@click.command("demo-data")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True, help="Folder to write into.")
@click.option("--n", type=click.IntRange(1, MAX_RELEASED), default=40, show_default=True,
              help=f"People in the release (1 to {MAX_RELEASED}; half as many again appear only in the background).")
@click.option("--seed", type=Checked(Seed), default=0, show_default=True)
@force_option
def demo_data(out_dir: str, n: int, seed: int, force: bool) -> None:
    """Write a deterministic synthetic population: originals.jsonl (private records with gold
    PII spans), background.jsonl (public documents, more people than the release) and
    releases/suppressed.jsonl, releases/labels.jsonl."""
    from anonaudit.demo.population import write

    check_outputs([Output(Path(out_dir), "folder", "--out"), *data_outputs(Path(out_dir))], [], force=force)

    data = write(out_dir, n=n, seed=seed)
    click.echo(f"wrote {len(data.originals)} originals, {len(data.background)} background documents "
               f"about {len({d.subject for d in data.background})} people, and releases "
               f"{', '.join(sorted(data.releases))} to {out_dir}")


def data_outputs(folder: Path) -> list[Output]:
    """The files ``demo-data`` writes into ``folder``."""
    return [Output(folder / name, "jsonl", f"--out {folder}: {name}") for name in FILES]


@click.command("demo")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="anonaudit-demo", show_default=True,
              help="Folder for the data, results.json (summary.csv beside it) and report.html.")
@click.option("--n", type=click.IntRange(3, MAX_RELEASED), default=40, show_default=True,
              help=f"People in the release (3, the fewest the NMI metric can cluster, to {MAX_RELEASED}).")
@click.option("--seed", type=Checked(Seed), default=0, show_default=True)
@click.option("--llm", "llm_spec", default=None, metavar="SPEC",
              help="LLM for the attacks that use one (default: the best embedded model installed).")
@click.option("--sample", type=click.IntRange(1, 100_000), default=None,
              help="A fixed seeded sample of N documents per release for the stages that call a language model "
                   "per document (default: none; they take documents until their interval reaches the budget's "
                   "target).")
@budget_option
@click.option("--presidio/--no-presidio", default=None,
              help="Include the Presidio release (default: when Presidio is installed).")
@time_limit_option(help_text=DEMO_TIME_LIMIT_HELP)
@force_option
@no_cache_run
@click.pass_context
def demo_cmd(ctx: click.Context, out_dir: str, n: int, seed: int, llm_spec: str | None, sample: int | None,
             budget: str | None, presidio: bool | None, time_limit: float | None, force: bool) -> None:
    """The whole audit on a synthetic population: data, baseline sanitizers, every installed attack
    and utility metric, results.json and report.html (prints the report's path). OUT receives
    data/ (the population), audit.yaml, results.json, releases/, report.html and findings.csv."""
    from anonaudit.cli.common import echo_summary
    from anonaudit.cli.driver import registry_of
    from anonaudit.demo.demo_audit import run_demo

    out = Path(out_dir)
    check_outputs([Output(out, "folder", "--out"), *data_outputs(out / "data"), *results_outputs(out / "results.json", "OUT/results.json"),
                   *report_outputs(out / "report.html")], [], force=force)

    path = run_demo(out_dir, n=n, seed=seed, llm=llm_spec, sample=sample, budget=budget, presidio=presidio,
                    registry=registry_of(ctx), on_results=echo_summary, force=force, time_limit=time_limit)
    click.echo(str(path))
    from audit.core.results import ResultsFile

    failed = ResultsFile.load(out / "results.json").provenance.get("errors") or []
    if failed:  # the report says so too; a demo with a failed attack or metric is not a success
        click.secho(f"error: {len(failed)} component(s) failed: "
                    + "; ".join(f"{e.get('component')}: {e.get('reason')}" for e in failed), fg="red", err=True)
        ctx.exit(2)


COMMANDS = [demo_data, demo_cmd]
