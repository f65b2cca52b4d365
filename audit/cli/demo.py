"""``anonaudit demo-data``: write the synthetic population to a folder."""

from __future__ import annotations

from pathlib import Path

import click

from audit.cli.outputs import Output, check_outputs, force_option
from audit.demo.data import MAX_RELEASED


@click.command("demo-data")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True, help="Folder to write into.")
@click.option("--n", type=click.IntRange(1, MAX_RELEASED), default=40, show_default=True,
              help=f"People in the release (1 to {MAX_RELEASED}; half as many again appear only in the background).")
@click.option("--seed", type=int, default=0, show_default=True)
@force_option
def demo_data(out_dir: str, n: int, seed: int, force: bool) -> None:
    """Write a deterministic synthetic population: originals.jsonl (private records with gold
    PII spans), background.jsonl (public documents, more people than the release) and
    releases/suppressed.jsonl, releases/labels.jsonl."""
    from audit.demo.data import write

    check_outputs(data_outputs(Path(out_dir)), [], force=force)

    data = write(out_dir, n=n, seed=seed)
    click.echo(f"wrote {len(data.originals)} originals, {len(data.background)} background documents "
               f"about {len({d.subject for d in data.background})} people, and releases "
               f"{', '.join(sorted(data.releases))} to {out_dir}")


def data_outputs(folder: Path) -> list[Output]:
    """The files ``demo-data`` writes into ``folder``."""
    return [Output(folder / name, "jsonl", f"--out {folder}: {name}")
            for name in ("originals.jsonl", "background.jsonl", "releases/suppressed.jsonl", "releases/labels.jsonl")]


COMMANDS = [demo_data]
