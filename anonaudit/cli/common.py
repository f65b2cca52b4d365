"""Options and helpers shared by the commands of this package.

Every command spells the model options the same way (``--llm SPEC``, ``--no-cache``) and prints
results the same way (:func:`echo_summary`). The commands that run attacks and metrics write
their results through the pipeline (:mod:`anonaudit.cli.driver`), never here.
"""

from __future__ import annotations

from collections.abc import Iterable

import click

from audit.core.results import Result, grouped_warnings

LLM_HELP = ("LLM: an embedded model name (see `anonaudit models list`), a .gguf file, a Hugging Face "
            "folder, or openai:MODEL@http://host:port/v1. Default: the best embedded model installed.")
llm_option = click.option("--llm", "llm_spec", default=None, metavar="SPEC", help=LLM_HELP)
no_cache_option = click.option("--no-cache", is_flag=True, help="Do not read or write the LLM cache.")
NO_CACHE_HELP = ("Use no cache in this run: no LLM answer, embedding, information content, trained attacker "
                 "or lemma list is read from ANONAUDIT_HOME or written there (the embedded models are still used).")


def no_cache_run(fn):
    """Give a command ``--no-cache``, which turns every cache off while it runs
    (:func:`audit.core.config.caches_off`)."""
    import functools

    from audit.core.config import caches_off

    @click.option("--no-cache", "no_cache", is_flag=True, help=NO_CACHE_HELP)
    @functools.wraps(fn)
    def wrapper(*args, no_cache: bool = False, **kwargs):
        with caches_off(no_cache):
            return fn(*args, **kwargs)

    return wrapper


def echo_summary(results: Iterable[Result]) -> None:
    """A short table of results on the terminal, then each component's doubts about its own
    figure (``details["warning"]``), once per distinct warning with the releases it covers."""
    results = list(results)
    rows = [(r.name, r.release, r.value, r.ci, r.n, r.baseline, r.beats_baseline) for r in results]
    if not rows:
        return
    w_name = max(len(r[0]) for r in rows)
    w_rel = max(len(r[1]) for r in rows)
    click.echo(f"{'result':<{w_name}}  {'release':<{w_rel}}  {'value':>6}  {'95% CI':>13}  {'n':>5}  baseline")
    for name, rel, value, ci, n, base, beats in rows:
        ci_s = f"[{ci[0]:.3f},{ci[1]:.3f}]" if ci else ""
        base_s = "" if base is None else f"{base:.3g}" + ("" if beats is None else (" beaten" if beats else " NOT beaten"))
        click.echo(f"{name:<{w_name}}  {rel:<{w_rel}}  {value:6.3f}  {ci_s:>13}  {n:5d}  {base_s}")
    for name, text, releases in grouped_warnings(results):
        click.echo(f"WARNING {name} on {', '.join(releases)}: {text}", err=True)


def echo_release_warnings(provenance: dict) -> None:
    """With ``anonaudit -v``: every release warning of ``provenance`` in full, on stderr. Without
    it the run's log said only how many there were (they quote the originals and list document
    ids, and a CI log is published: :func:`audit.pipeline.releases.withheld_warnings`)."""
    if not click.get_current_context().find_root().params.get("verbose"):
        return
    for name, info in (provenance.get("releases") or {}).items():
        for text in (info.get("warnings") or []) if isinstance(info, dict) else []:
            click.secho(f"warning (-v): {text}", fg="yellow", err=True)


BUDGET_HELP = ("How much work each stage does: quick (a CI gate in minutes: stages that sample stop at a 95% "
               "interval of ±0.10, the claim linker's judge ±0.20, attacks take cheaper settings), standard "
               "(±0.05; the default) or full (every document). docs/how-to/budgets.md gives the table.")


def budget_option(fn):
    """``--budget quick|standard|full`` (the audit's budget, :mod:`audit.pipeline.budget`)."""
    from audit.pipeline.budget import BUDGETS

    return click.option("--budget", "budget", type=click.Choice(BUDGETS), default=None, help=BUDGET_HELP)(fn)


TIME_LIMIT_HELP = ("Minutes the audit may take: before any attack or metric runs, each stage is calibrated on a "
                   "few documents and the run stops (exit 2) when the estimate exceeds the limit; otherwise the "
                   "estimate is said and the work goes on (docs/how-to/budgets.md).")


BENCH_TIME_LIMIT_HELP = ("Minutes the whole bench may take: before any work, every sanitizer it must run, attack "
                         "and metric is calibrated on 5 documents and the bench stops (exit 2, nothing sanitized, "
                         "attacked or written) when the estimate exceeds the limit (docs/how-to/budgets.md).")
DEMO_TIME_LIMIT_HELP = ("Minutes the demo may take: after its population and its sanitizers' releases are made "
                        "(counted as spent), each attack and metric is calibrated on 5 documents and the demo "
                        "stops (exit 2, nothing attacked, no report) when the estimate exceeds the limit "
                        "(docs/how-to/budgets.md).")


def time_limit_option(fn=None, *, help_text: str = TIME_LIMIT_HELP):
    """``--time-limit MINUTES`` (:mod:`audit.pipeline.estimate`); ``help_text`` for a command
    whose limit covers other work (the bench's, the demo's)."""

    def add(f):
        return click.option("--time-limit", "time_limit", type=click.FloatRange(min=0, min_open=True), default=None,
                            metavar="MINUTES", help=help_text)(f)

    return add if fn is None else add(fn)
