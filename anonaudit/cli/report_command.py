"""``anonaudit report``: render a results file as one self-contained HTML report (and its CSV).
The rendering here is shared by ``run``, ``harden`` and ``demo``."""

from __future__ import annotations

from pathlib import Path

import click

from anonaudit.cli.gate_command import thresholds
from anonaudit.cli.output_options import check_outputs, force_option, keep_ids_option, report_outputs


def render(results_path: Path, out: Path, *, shareable: bool, checks=None, max_documents: int = 50,
            title: str | None = None, notes=(), keep_ids: bool = False, force: bool = False,
            guide: str = "docs/") -> Path:
    """Write the report and, beside it, its CSV of per-document findings (``findings.csv``,
    or ``NAME.csv`` for a report named otherwise than report.html), through the API's
    :meth:`anonaudit.Results.report`."""
    from anonaudit import load_results

    return load_results(results_path).report(out, shareable=shareable, gate=checks, max_documents=max_documents,
                                             title=title, notes=notes, keep_ids=keep_ids, force=force, guide=guide)


def warn_originals_beside(report: Path, results_path: Path) -> None:
    """Say loudly which files beside a shareable report hold original text."""
    folder = report.resolve().parent
    if folder != results_path.resolve().parent:
        return
    beside = [results_path.name] + (["releases/"] if (folder / "releases").is_dir() else []) + \
        [p.name for p in folder.glob("*.releases") if p.is_dir()]
    click.secho(f"WARNING: {folder} also holds {', '.join(beside)}, with original text and per-document "
                f"evidence: share {report.name} and its CSV only, never the folder.", fg="yellow", err=True)


@click.command("report")
@click.argument("results", type=click.Path(), metavar="RESULTS.json")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="HTML file to write (default: report.html beside the results).")
@click.option("--shareable", is_flag=True,
              help="Leave out every original text, original span, guess, predicted identity and file path; "
                   "documents by pseudonym.")
@keep_ids_option()
@click.option("--max", "max_", multiple=True, metavar="NAME=VALUE", help="Gate threshold to show (see `gate`).")
@click.option("--min", "min_", multiple=True, metavar="NAME=VALUE", help="Gate threshold to show (see `gate`).")
@click.option("--on-point", is_flag=True, help="Judge thresholds on point estimates (default: the cautious CI bound).")
@click.option("--on-upper-ci", is_flag=True, hidden=True, help="The default now; accepted for older scripts.")
@click.option("--max-documents", type=click.IntRange(0, 100_000), default=50, show_default=True,
              help="Documents shown per release in the drill-down (the JSON has all).")
@click.option("--title", default=None, help="Report title.")
@click.option("--guide", default="docs/", show_default=True, metavar="URL",
              help="Where each part's 'explained' link points: the folder or URL of the built user guide "
                   "(`mkdocs build`), relative to the report.")
@force_option
def report_cmd(results: str, out: str | None, shareable: bool, keep_ids: bool, max_: tuple[str, ...],
               min_: tuple[str, ...], on_point: bool, on_upper_ci: bool, max_documents: int, title: str | None,
               guide: str, force: bool) -> None:
    """Render any results file as one self-contained HTML report.

    Beside the report goes its CSV of per-document findings: findings.csv beside report.html,
    findings.shareable.csv beside report.shareable.html, NAME.csv beside any other NAME.html.
    """
    from audit.core.bundle import results_file
    from anonaudit import load_results
    from audit.pipeline.gate import evaluate

    path = results_file(results)  # a results file, or the bundle's folder holding results.json
    target = Path(out) if out else path.with_name("report.shareable.html" if shareable else "report.html")
    check_outputs(report_outputs(target), [("RESULTS.json", path)], force=force)
    checks = None
    if max_ or min_:
        checks = evaluate(load_results(path).file, thresholds(max_, min_), on_point=on_point)
    written = render(path, target, shareable=shareable, checks=checks, max_documents=max_documents, title=title,
                     keep_ids=keep_ids, force=force, guide=guide)
    click.echo(str(written))
    if shareable:
        warn_originals_beside(written, path)


COMMANDS = [report_cmd]
