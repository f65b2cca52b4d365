"""``--mlflow [URI]`` of ``anonaudit run`` and ``anonaudit bench``: the tracking store is checked
before the audit starts (:func:`anonaudit.tracking.check_mlflow`), the run logged after it
(:func:`anonaudit.tracking.log_mlflow`), once its own outputs are written."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click


def tracking_options(f: Callable) -> Callable:
    """``--mlflow [URI]``, ``--mlflow-experiment NAME`` and ``--mlflow-private``."""
    f = click.option("--mlflow-private", is_flag=True,
                     help="Log the internal edition to MLflow (the report with original spans and guesses, the "
                          "full results and the release copies); by default the shareable edition's rules apply.")(f)
    f = click.option("--mlflow-experiment", default="anonaudit", show_default=True, metavar="NAME",
                     help="The MLflow experiment the run is logged in.")(f)
    return click.option(
        "--mlflow", "mlflow_uri", is_flag=False, flag_value="", default=None, metavar="[URI]",
        help="Log the run to MLflow (pip install 'anonaudit[mlflow]'): the spec and parameters, one metric per "
             "release x result (value, ci_low, ci_high, n), the report and the results as artefacts. URI: a "
             "tracking server (http://host:5000) or store (file:./mlruns); alone, MLflow's default "
             "(MLFLOW_TRACKING_URI). Checked before the audit starts.")(f)


def check(uri: str | None, experiment: str = "anonaudit") -> None:
    """Before the work: the experiment's name one MLflow can hold (checked even without --mlflow: a
    wrong option is said, not ignored), MLflow installed, its store reachable (an AnonauditError,
    exit 2, otherwise)."""
    from anonaudit.tracking import check_experiment, check_mlflow

    check_experiment(experiment)
    if uri is not None:
        check_mlflow(uri or None)


def log(results: Any, uri: str | None, experiment: str, private: bool, *, keep_ids: bool = False,
        extra: Sequence[Path] = (), tags: dict[str, str] | None = None) -> None:
    """After the work (its outputs already written): log the run and say where it went."""
    if uri is None:
        return
    from anonaudit.tracking import log_mlflow

    run_id = log_mlflow(results, uri or None, experiment=experiment, private=private, keep_ids=keep_ids,
                        extra=[p for p in extra if p.is_file()], tags=tags)
    click.echo(f"MLflow: run {run_id} in experiment {experiment!r}"
               + ("" if private else " (shareable edition: no original text, documents by pseudonym)"))


def leaderboard_files(bench: Any, private: bool) -> tuple[str, ...]:
    """The leaderboard's files a tracker gets: all four with ``--mlflow-private``; else the tables
    (Markdown, LaTeX: they name no file, where the page and the CSV give each release's source),
    unless a release is named after its file (the shareable edition would hide that name)."""
    from reports.shareable import release_pseudonyms

    if private:
        return ("md", "tex", "html", "csv")
    if release_pseudonyms(bench.results.file):
        click.echo("MLflow: the leaderboard's tables are not logged: a release is named after its file "
                   "(--mlflow-private logs them)")
        return ()
    return ("md", "tex")
