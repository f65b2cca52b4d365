"""``anonaudit gate``: pass/fail thresholds on a results file, for CI."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from audit.cli.outputs import Output, check_outputs, force_option
from audit.core.errors import AnonauditError


def thresholds(max_: tuple[str, ...], min_: tuple[str, ...]):
    from audit.pipeline.gate import parse_threshold

    return [parse_threshold(t, "max") for t in max_] + [parse_threshold(t, "min") for t in min_]



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
        checks = evaluate(ResultsFile.load(results), thresholds(max_, min_), releases=releases,
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


COMMANDS = [gate_cmd]
