"""``anonaudit harden``: attack-guided sanitization that repairs only what the attacks used; options
over :func:`anonaudit.harden` (the checks, the files and the outcome are the API's)."""

from __future__ import annotations

import sys

import click

from anonaudit.cli.common import no_cache_run
from anonaudit.cli.output_options import force_option
from audit.core.errors import AnonauditError


@click.command("harden")
@click.argument("spec_file", type=click.Path(dir_okay=False), metavar="AUDIT.yaml")
@click.option("--release", "release", required=True, metavar="NAME",
              help="The spec's release to harden (a file or a sanitizer release of its `releases`).")
@click.option("--out", "out_file", required=True, type=click.Path(dir_okay=False),
              help="Where to write the hardened release (JSONL, every change recorded as a span).")
@click.option("--max-rounds", type=int, default=3, show_default=True,
              help="Most repair rounds (each one re-attacks the repaired release).")
@click.option("--text-repairer", default="delinker", show_default=True, metavar="SANITIZER",
              help="Sanitizer that rewords the visible words an attack used (rare phrases, claims, windows).")
@click.option("--span-repairer", default="intact", show_default=True, metavar="SANITIZER",
              help="Sanitizer that makes a replacement an attack saw through more general.")
@click.option("--attack", "attacks", multiple=True, metavar="NAME",
              help="Repair only the evidence of this attack of the spec (repeatable; default: every attack).")
@click.option("--metric", "metrics", multiple=True, metavar="NAME",
              help="A utility metric measured on every round besides the spec's own (repeatable; e.g. tps).")
@click.option("--repair-param", "repair_params", multiple=True, metavar="SANITIZER.KEY=VALUE",
              help="A repairer's parameter, VALUE read as YAML (e.g. delinker.chunk_sentences=2).")
@click.option("--detector", default=None, metavar="DETECTOR",
              help="Detector (spacy_ner, presidio or a plugin's) that labels the replacements of a release "
                   "file that records none (default: spaCy's entities).")
@click.option("--llm", "llm_spec", default=None, metavar="SPEC",
              help="LLM of the attacks and repairers (overrides the spec's models.llm), e.g. "
                   "openai:MODEL@http://host:8000/v1.")
@click.option("--results-dir", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Folder for results.json (summary.csv beside it), the report and the rounds "
                   "(default: the spec's `out`).")
@click.option("--report/--no-report", default=True, show_default=True,
              help="Write OUT/report.html (and findings.csv) at the end, with every round as a release.")
@force_option
@no_cache_run
@click.pass_context
def harden_cmd(ctx: click.Context, spec_file: str, release: str, out_file: str, max_rounds: int,
               text_repairer: str, span_repairer: str, attacks: tuple[str, ...], metrics: tuple[str, ...],
               repair_params: tuple[str, ...], detector: str | None, llm_spec: str | None, out_dir: str | None,
               report: bool, force: bool) -> None:
    """Attack a release with the spec's attacks, repair exactly the evidence they found, and
    attack again, until the spec's `gate` passes or after --max-rounds.

    Visible words an attack used (rare phrases, leaking claims, the window a classifier decided
    on) are reworded by the text repairer; replacements an attack saw through are generalised one
    level further (or to their label) by the span repairer. Every round is a release of its own
    (NAME.harden1, NAME.harden2...) in OUT/results.json and the report, with its risks and
    utility. Resumable: run the same command again. Exit status: 0 the gate passes on the
    hardened release (or the spec has none), 1 it still fails, 3 inconclusive, 2 invalid input.
    """
    from anonaudit.hardening import harden
    from anonaudit.cli.driver import registry_of
    from anonaudit.cli.param_options import parse_param_values

    params: dict[str, dict] = {}
    for key, value in parse_param_values(repair_params, "--repair-param").items():
        owner, dot, name = key.partition(".")
        if not dot or not name:
            raise AnonauditError(f"--repair-param {key!r}: expected SANITIZER.KEY=VALUE (e.g. delinker.max_spans=4)")
        params.setdefault(owner, {})[name] = value
    done = harden(spec_file, release, out=out_file, max_rounds=max_rounds, text_repairer=text_repairer,
                  span_repairer=span_repairer, attacks=attacks, metrics=metrics, repair_params=params,
                  detector=detector, llm=llm_spec, results_dir=out_dir, report=report, force=force,
                  registry=registry_of(ctx), command="harden")
    click.echo("")
    click.echo(str(done))
    click.echo(f"\nstopped: {done.stopped}; hardened release {done.final.name}: {out_file} "
               f"({done.seconds:.1f}s); results: {done.results_path}")
    if done.report is not None:
        click.echo(f"report: {done.report}")
    if done.exit_code:
        sys.exit(done.exit_code)


COMMANDS = [harden_cmd]
