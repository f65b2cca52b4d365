"""``anonaudit gate``: pass/fail thresholds on a results file, for CI."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from anonaudit.cli.output_options import Output, check_outputs, force_option, keep_ids_option
from audit.core.errors import AnonauditError


def thresholds(max_: tuple[str, ...], min_: tuple[str, ...]):
    from audit.pipeline.gate import parse_threshold

    return [parse_threshold(t, "max") for t in max_] + [parse_threshold(t, "min") for t in min_]


#: GitLab's default name for a Code Quality report (``artifacts: reports: codequality:``).
CODEQUALITY = "gl-code-quality-report.json"


def ci_outputs(fmt: str, codequality: str | None, results: str) -> list[Output]:
    """The files ``--format`` writes besides the table: GitLab's Code Quality report, GitHub's
    job summary (appended to, where ``GITHUB_STEP_SUMMARY`` names one)."""
    out = []
    if codequality or fmt == "gitlab":
        out.append(Output(Path(codequality or CODEQUALITY), "codequality", "--codequality"))
    if fmt == "github" and os.environ.get("GITHUB_STEP_SUMMARY"):
        out.append(Output(Path(os.environ["GITHUB_STEP_SUMMARY"]), "step_summary", "GITHUB_STEP_SUMMARY"))
    return out


def _repo_path(path: str) -> str:
    """The results file as GitLab locates an issue: relative to the job's folder (the checkout),
    or its bare name when it lies elsewhere (an absolute path may name a person or a case)."""
    full, here = Path(path).resolve(), Path.cwd().resolve()
    return full.relative_to(here).as_posix() if full.is_relative_to(here) else full.name


def write_ci(fmt: str, outputs: list[Output], checks, rf, results: str, keep_ids: bool) -> None:
    """Print GitHub's annotations, append its job summary, write GitLab's report (see
    :mod:`reports.ci`: the shareable edition's rules; documents by pseudonym unless ``keep_ids``;
    ``checks`` already :func:`published`)."""
    from audit.core.files import atomic_write
    from reports.ci import github_annotations, gitlab_json, markdown_summary
    from reports.shareable import pseudonyms

    if fmt == "github":
        for line in github_annotations(checks):
            click.echo(line)
    for out in outputs:
        if out.kind == "codequality":
            atomic_write(out.path, gitlab_json(checks, path=_repo_path(results)))
        elif out.kind == "step_summary":
            with open(out.path, "a", encoding="utf-8") as fh:
                fh.write(markdown_summary(checks, names=None if keep_ids else pseudonyms(rf)) + "\n")



def published(checks, rf, keep_ids: bool):
    """The checks as everything the gate publishes names them (the table on stdout, the JUnit
    XML, the annotations, the job summary, the Code Quality report): a release named after its
    file by its shareable pseudonym unless ``keep_ids`` (:func:`reports.shareable.release_pseudonyms`,
    the one rule)."""
    from reports.ci import renamed
    from reports.shareable import release_pseudonyms

    return renamed(checks, {} if keep_ids else release_pseudonyms(rf))


@click.command("gate")
@click.argument("results", type=click.Path(), metavar="RESULTS.json")
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
@click.option("--format", "fmt", type=click.Choice(["text", "github", "gitlab"]), default="text", show_default=True,
              help="github: also print a workflow annotation per failing (error) or inconclusive (warning) check "
                   "and append a Markdown job summary to $GITHUB_STEP_SUMMARY when it is set; gitlab: also write "
                   f"a Code Quality report (--codequality, default {CODEQUALITY}). Neither holds original text "
                   "or document ids (see --keep-ids).")
@click.option("--codequality", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help=f"Write GitLab's Code Quality report (JSON) here (with --format gitlab: default {CODEQUALITY}).")
@keep_ids_option(help="Name documents by their ids, and releases named after their files by those names, in the "
                      "table, JUnit XML, annotations, job summary and Code Quality report (default: pseudonyms "
                      "D01... and R1..., as in the shareable report: an id or a file name can name a person or a "
                      "case).")
@force_option
def gate_cmd(results: str, max_: tuple[str, ...], min_: tuple[str, ...], releases: tuple[str, ...],
             on_point: bool, on_upper_ci: bool, junit: str | None, fmt: str, codequality: str | None,
             keep_ids: bool, force: bool) -> None:
    """Pass/fail thresholds on a results file, for CI, on the cautious side: a risk fails when
    its 95% CI's upper bound is above --max, a utility when its lower bound is below --min.

    Exit status: 0 when every check passes, 1 when any fails, 3 when none fails but one is
    inconclusive (the attacker failed its own check, so its low risk proves nothing), 2 when
    the input is unusable (missing or malformed file, unknown result or release name, bad
    threshold).
    """
    from audit.pipeline.gate import FAIL, INCONCLUSIVE, evaluate, exit_code, format_table, write_junit
    from audit.core.bundle import reading, results_file
    from audit.core.results import load_verified

    results = str(results_file(results))  # a results file, or the bundle's folder holding results.json
    try:
        outputs = ([Output(Path(junit), "junit", "--junit")] if junit else []) + ci_outputs(fmt, codequality, results)
        if outputs:
            check_outputs(outputs, [("RESULTS.json", results)], force=force)
        with reading(results):  # one write's results and manifest (a writer holds the lock between them)
            rf = load_verified(results)  # the bundle verified before it is read: a forged part is named, exit 2
        checks = evaluate(rf, thresholds(max_, min_), releases=releases, on_point=on_point)
    except AnonauditError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    checks = published(checks, rf, keep_ids)  # one rule for stdout, JUnit and the CI formats
    click.echo(format_table(checks))
    write_ci(fmt, outputs, checks, rf, results, keep_ids)
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
