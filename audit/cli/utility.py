"""``anonaudit utility``: utility metrics of one or more releases against the originals.

All metrics of a run share one :class:`~audit.metrics.context.UtilityContext`, so
the information content of the originals and their embeddings are computed once
(and IC is cached on disk for later runs).
"""

from __future__ import annotations

import time

import click

from audit.cli.common import (
    echo_summary,
    format_option,
    llm_option,
    load_originals,
    load_release_specs,
    no_cache_option,
    originals_option,
    out_option,
    provenance,
    releases_option,
    seed_option,
    write_results,
)
from audit.core.errors import AnonauditError


def _parse_metrics(value: str) -> list[str]:
    from audit.metrics.utility import ALL_METRICS

    names = [m.strip().lower() for m in value.split(",") if m.strip()]
    unknown = [m for m in names if m not in ALL_METRICS]
    if unknown or not names:
        raise click.BadParameter(f"unknown metric(s) {', '.join(unknown) or '(none)'}; "
                                 f"choose from {','.join(ALL_METRICS)}")
    return names


@click.command("utility")
@originals_option
@releases_option
@click.option("--metrics", default="tpi,tps,nmi,precision,recall,similarity,rouge", show_default=True,
              help="Comma-separated metrics. precision/recall are skipped when the originals carry no "
                   "gold spans.")
@click.option("--ic", type=click.Choice(["causal", "masked"]), default="causal", show_default=True,
              help="Information-content estimator: a causal LLM's log-probabilities, or a masked LM.")
@click.option("--ic-model", default=None, metavar="PATH",
              help="For --ic masked: a local BERT-like folder with its MLM head. For --ic causal: an LLM "
                   "spec used for IC instead of --llm (e.g. transformers:qwen2.5-coder-0.5b).")
@click.option("--context-tokens", type=int, default=256, show_default=True,
              help="Causal IC: most tokens of left context a term sees.")
@click.option("--mask-every", type=int, default=6, show_default=True,
              help="Masked IC: mask one term in every N.")
@llm_option
@click.option("--embedder", default=None, metavar="SPEC", help="Sentence embedder folder (default: MiniLM).")
@click.option("--k", "k", type=int, default=None, help="NMI: number of clusters (default: best silhouette).")
@click.option("--runs", type=int, default=5, show_default=True, help="NMI: seeded k-means runs averaged.")
@format_option
@seed_option
@no_cache_option
@out_option
def utility_command(originals: str, releases: tuple[str, ...], metrics: str, ic: str, ic_model: str | None,
                    context_tokens: int, mask_every: int, llm_spec: str | None, embedder: str | None,
                    k: int | None, runs: int, fmt: str | None, seed: int, no_cache: bool, out: str) -> None:
    """Measure how much utility each --release keeps: TPI, TPS, NMI, precision/recall against gold
    spans, document similarity and ROUGE-L."""
    from audit.core.data import Scenario
    from audit.metrics.context import UtilityContext
    from audit.metrics.utility import METRIC_CLASSES, NMIMetric

    started = time.time()
    names = _parse_metrics(metrics)
    corpus = load_originals(originals, fmt)
    rels = load_release_specs(releases, corpus, fmt)
    scenario = Scenario(originals=corpus, releases=tuple(rels))
    if ("precision" in names or "recall" in names) and not any(d.spans for d in corpus):
        click.echo("note: the originals carry no gold spans; precision and recall are skipped", err=True)
        names = [n for n in names if n not in ("precision", "recall")]
    ctx = UtilityContext(corpus, ic=ic, ic_model=ic_model, llm=llm_spec, embedder=embedder,
                         context_tokens=context_tokens, mask_every=mask_every, cache=not no_cache,
                         progress=True)
    common = {"context": ctx, "ic": ic, "ic_model": ic_model, "llm": llm_spec, "embedder": embedder,
              "cache": not no_cache, "seed": seed}
    objs = [NMIMetric(**common, k=k, runs=runs) if n == "nmi" else METRIC_CLASSES[n](**common) for n in names]
    results = []
    for rel in rels:
        for obj in objs:
            try:
                results.extend(obj.evaluate(scenario, rel))
            except AnonauditError as exc:
                click.echo(f"note: {obj.name} skipped for {rel.name}: {exc}", err=True)
    params = {"metrics": names, "ic": ic, "ic_model": ic_model, "llm": llm_spec, "embedder": embedder,
              "context_tokens": context_tokens, "mask_every": mask_every, "k": k, "runs": runs, "seed": seed}
    extra = {}
    if any(n in names for n in ("tpi", "tps")):
        extra["ic_estimator"] = ctx.estimator.identity
    write_results(out, results, provenance(command="utility", params=params,
                                           inputs={"originals": originals, "releases": list(releases)},
                                           started=started, extra=extra))
    echo_summary(results)


COMMANDS = [utility_command]
