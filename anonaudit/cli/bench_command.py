"""``anonaudit bench``: a researcher's sanitizer beside the comparison points, with paired tests.

A thin layer over :func:`anonaudit.bench`: options in, the same call a script makes, the
leaderboard's paths and table out.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from anonaudit.benchmark import BenchPeople
from anonaudit.cli.param_options import Checked
from audit.core.arguments import Seconds, Seed
from anonaudit.cli.common import BENCH_TIME_LIMIT_HELP, BUDGET_HELP, no_cache_run, time_limit_option
from anonaudit.cli.output_options import check_outputs, force_option, keep_ids_option
from audit.pipeline.bench_writer import holding
from anonaudit.cli.tracking_options import tracking_options
from audit.pipeline.outputs import bench_outputs
from audit.core.errors import AnonauditError


def _names(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [] if value.strip().lower() in ("", "none") else [v.strip() for v in value.split(",") if v.strip()]


def _params(items: tuple[str, ...], what: str) -> dict[str, dict]:
    """``NAME.KEY=VALUE`` (VALUE read as YAML) as ``{NAME: {KEY: VALUE}}``; ``KEY=VALUE`` under ``""``."""
    import yaml

    out: dict[str, dict] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise AnonauditError(f"{what} {item!r}: expected KEY=VALUE")
        name, _, key = key.strip().rpartition(".")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise AnonauditError(f"{what} {item!r}: the value is not YAML ({exc})") from None
        out.setdefault(name, {})[key] = value
    return out


def _extra(items: tuple[str, ...]) -> dict[str, str]:
    from audit.io.loaders import parse_release_spec

    out: dict[str, str] = {}
    for item in items:
        name, path = parse_release_spec(item)
        key = name or Path(path).stem
        if key in out:
            raise AnonauditError(f"--also {item!r}: a release named {key!r} is already given by --also "
                                 f"{key}={out[key]}; give each --also release its own name (NAME=FILE)")
        out[key] = path
    return out


@click.command("bench")
@click.option("--command", "command", default=None, metavar="CMD",
              help="The sanitizer under test as a program, in any language: CMD holds {input} (the documents, JSONL: "
                   "id, text, subject, spans) and {output} (where it writes its release, in any input format: "
                   "docs/how-to/input-formats.md), e.g. \"python my_sanitizer.py {input} {output}\".")
@click.option("--sanitizer", "sanitizer", default=None, metavar="NAME",
              help="The sanitizer under test as a registered sanitizer (an entry point, e.g. a plugin's).")
@click.option("--release", "release", default=None, metavar="FILE",
              help="The sanitizer under test as a release already made (any input format; a span file is applied "
                   "to the originals).")
@click.option("--name", default=None, help="The name of the sanitizer under test on the leaderboard.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="A parameter of --sanitizer (VALUE read as YAML); repeatable.")
@click.option("--originals", default=None, type=click.Path(dir_okay=False),
              help="The corpus: original documents in any input format (TAB JSON included). Default: the synthetic "
                   "demo population.")
@click.option("--format", "fmt", default=None, help="The format of --originals (default: told by name and content).")
@click.option("--background", default=None, type=click.Path(dir_okay=False),
              help="Public documents per person: what TRIR's adversary knows (the demo has its own).")
@click.option("--tri", default=None, type=click.Path(dir_okay=False),
              help="A TRI-format file (name, public_knowledge, one column per method): its background, and each method "
                   "column as a release on the board.")
@click.option("--tri-originals", default=None, metavar="COLUMN",
              help="The column of --tri that holds the original texts (sanitizers run on it).")
@click.option("--demo-people", type=Checked(BenchPeople), default=20, show_default=True,
              help="People in the demo population (when no corpus is given).")
@click.option("--documents", type=click.IntRange(1, 10_000_000), default=None,
              help="Bench a seeded sample of this many original documents (the background stays whole).")
@click.option("--compare", default=None, metavar="LIST",
              help="Comparison points (registered sanitizers, comma-separated, or none). Default: suppression, labels, "
                   "spacy_ner and presidio (when installed).")
@click.option("--with", "with_", default=None, metavar="LIST",
              help="More comparison points that call a language model, e.g. intact,prompt,delinker; each runs on a "
                   "seeded sample of --sanitizer-sample documents.")
@click.option("--sanitizer-sample", type=click.IntRange(1, 10_000_000), default=10, show_default=True,
              help="Documents for each --with sanitizer (a seeded sample).")
@click.option("--budget", default=None, metavar="quick|standard|full",
              help=BUDGET_HELP + " (A number here is the old spelling of --sanitizer-sample: deprecated.)")
@click.option("--also", "also", multiple=True, metavar="NAME=FILE",
              help="A release already made to place on the board too (e.g. a published sanitization); repeatable.")
@click.option("--attacks", default=None, metavar="LIST",
              help="Attacks (default: every registered one the corpus allows; TRIR needs a background).")
@click.option("--metrics", default=None, metavar="LIST", help="Utility metrics (default: every registered one).")
@click.option("--component-param", "cparams", multiple=True, metavar="NAME.KEY=VALUE",
              help="A parameter of a comparison point, attack or metric (VALUE read as YAML), e.g. trir.budget=fast "
                   "or intact.candidates=3; repeatable.")
@click.option("--sample", type=click.IntRange(1, 10_000_000), default=None,
              help="A fixed seeded sample of N documents per release for the attacks that call a language model per "
                   "document (default: none; they take documents until their interval reaches the budget's target).")
@click.option("--reference", default=None, metavar="FILE|tab",
              help="Published figures to show beside ours: a CSV (method,metric,value,source[,ours,note]) or 'tab' "
                   "(the one that ships with anonaudit).")
@click.option("--seed", type=Checked(Seed), default=0, show_default=True)
@click.option("--llm", "llm_spec", default=None, metavar="SPEC", help="LLM for the sanitizers and attacks that use one.")
@click.option("--timeout", type=Checked(Seconds, float), default=None,
              help="Seconds the --command may run, above 0 (default: 3600); past it the command and every "
                   "process it started are stopped.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="bench-out", show_default=True,
              help="Folder: data/, sanitized/ (each release as it is made), results.json, leaderboard.html, "
                   "leaderboard.csv, leaderboard.md and leaderboard.tex (with pandas). Running again resumes.")
@time_limit_option(help_text=BENCH_TIME_LIMIT_HELP)
@tracking_options
@keep_ids_option(help="Name releases and the corpus named after their files by those names in the leaderboard's "
                      "page, CSV, Markdown and LaTeX tables and on stdout (default: pseudonyms R1... and \"the "
                      "corpus\", as in the shareable report: a file name can name a person or a case).")
@force_option
@no_cache_run
@click.pass_context
def bench_cmd(ctx: click.Context, command, sanitizer, release, name, params, originals, fmt, background, tri,
              tri_originals, demo_people, documents, compare, with_, sanitizer_sample, budget, also, attacks, metrics, cparams, sample,
              reference, seed, llm_spec, timeout, out_dir, time_limit, mlflow_uri, mlflow_experiment, mlflow_private,
              keep_ids, force) -> None:
    """Benchmark a sanitizer against the comparison points on one corpus: every attack and utility
    metric, each attack prepared once for all releases, a leaderboard ranked by risk with 95%
    intervals, the cost per document, and paired tests against the sanitizer under test (exact
    McNemar on per-document attack outcomes, paired bootstrap on per-document utility).

    The sanitizer under test is one of --command, --sanitizer or --release. Exit status 0 done, 2
    when an input, or the release the sanitizer under test made, is invalid (each problem names its
    document; the comparison points already made are kept, and a re-run reuses them).
    """
    import anonaudit
    from anonaudit.cli import tracking_options as tracking
    from anonaudit.typed_spec import Budget, Models, Spec
    from anonaudit.cli.driver import registry_of
    from audit.pipeline.external import check_timeout

    check_timeout(timeout, "--timeout")
    out = Path(out_dir)
    extra = _extra(also)
    check_outputs(bench_outputs(out), [("--originals", originals), ("--background", background), ("--tri", tri),
                                  ("--release", release), ("--reference", reference),
                                  *((f"--also {k}", v) for k, v in extra.items())], force=force)
    budget, sanitizer_sample = _budget(budget, sanitizer_sample)
    tracking.check(mlflow_uri, mlflow_experiment)  # a tracker that cannot be used fails now, not after the bench
    by_component = _params(cparams, "--component-param")
    sanitizers = set(registry_of(ctx).names("sanitizer"))
    san_params = {k: v for k, v in by_component.items() if k in sanitizers}
    by_component = {k: v for k, v in by_component.items() if k not in sanitizers}
    spec = Spec(originals=originals, background=background, releases=extra or None, seed=seed,
                attacks=_with_params(_names(attacks), by_component), metrics=_with_params(_names(metrics), by_component),
                budget=Budget(budget, sample, time_limit), models=Models(llm=llm_spec))
    with holding(out, create=False):  # from the bench to its leaderboard: no other bench into OUT meanwhile
        result = anonaudit.bench(
            sanitizer, spec, command=command, release=release, name=name, params=_params(params, "--param").get("", {}),
            tri=tri, tri_originals=tri_originals, demo_people=demo_people, comparisons=_names(compare),
            with_=_names(with_) or (), sanitizer_sample=sanitizer_sample, sanitizer_params=san_params,
            documents=documents, reference=reference, out=out, format=fmt, command_timeout=timeout,
            registry=registry_of(ctx), force=force)
        page = result.report(out / "leaderboard.html", force=force, keep_ids=keep_ids)
    click.echo("")
    click.echo(result.to_markdown(keep_ids=keep_ids))
    tex = out / "leaderboard.tex"
    latex = str(tex) if tex.is_file() else "no LaTeX: pip install 'anonaudit[pandas]'"
    click.echo(f"leaderboard: {page} (table: {out / 'leaderboard.csv'}, {out / 'leaderboard.md'}, {latex}); "
               f"results: {out / 'results.json'}; {result.seconds:.1f}s")
    tracking.log(result.results, mlflow_uri, mlflow_experiment, mlflow_private,
                 extra=[out / f"leaderboard.{ext}" for ext in tracking.leaderboard_files(result, mlflow_private)])
    for e in result.results.skipped + result.results.errors:
        click.secho(f"not run: {e['component']}: {e['reason']}", fg="yellow", err=True)
    if any(not e.get("input") for e in result.results.errors):
        sys.exit(2)  # a component failed (not one that does not suit this corpus): not a success


def _budget(value: str | None, sanitizer_sample: int) -> tuple[str | None, int]:
    """``--budget``: a level, or (the old spelling, deprecated) a number of documents for the
    --with sanitizers."""
    from audit.pipeline.budget import BUDGETS

    if value is None or value in BUDGETS:
        return value, sanitizer_sample
    if value.isdigit() and int(value) >= 1:
        click.secho(f"note: --budget {value} (documents for each --with sanitizer) is deprecated: write "
                    f"--sanitizer-sample {value}; --budget is now the audit's budget ({', '.join(BUDGETS)})",
                    fg="yellow", err=True)
        return None, int(value)
    raise AnonauditError(f"--budget {value}: must be one of {', '.join(BUDGETS)}")


def _with_params(names: list[str] | None, params: dict[str, dict]) -> list | None:
    """Spec entries for ``names``, with the ``--component-param`` values of each."""
    if names is None:
        if any(params):
            raise AnonauditError("--component-param needs --attacks/--metrics naming the components it sets "
                                 f"({', '.join(sorted(k for k in params if k))})")
        return None
    return [{"name": n, "params": params[n]} if n in params else n for n in names]


COMMANDS = [bench_cmd]
