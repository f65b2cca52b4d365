"""``anonaudit cache info`` and ``anonaudit cache clear``: what is kept under ANONAUDIT_HOME,
derived from the documents audited, and removing it."""

from __future__ import annotations

import click

from audit.core.config import KINDS

DOCUMENT_KINDS = [k for k in KINDS if k != "models"]


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, s in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= s:
            return f"{seconds / s:.1f}{unit}"
    return f"{seconds:.0f}s"


@click.group("cache")
def cache_group() -> None:
    """The caches under ANONAUDIT_HOME: LLM answers, embeddings, information content and trained
    attackers, all derived from the (private) documents audited."""


@cache_group.command("info")
def cache_info() -> None:
    """What each cache holds, its size and age (since its oldest and newest item was written)."""
    from audit.core import config
    from audit.runtime import caches

    rows = [("KIND", "ITEMS", "FILES", "SIZE", "OLDEST", "NEWEST", "PRIVATE", "HOLDS")]
    for k in caches.info():
        rows.append((k.kind, str(k.items), str(k.files), _size(k.bytes), _age(k.oldest), _age(k.newest),
                     ("yes" if k.private else "NO") if k.folder.exists() else "-", k.holds))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    click.echo(f"ANONAUDIT_HOME: {config.home()}")
    for r in rows:
        click.secho("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1], bold=r is rows[0])


@cache_group.command("clear")
@click.option("--older-than", default=None, metavar="AGE",
              help="Only what was last written longer ago than AGE (7d, 12h, 30m, 90s, 2w); LLM answers one by one.")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(list(KINDS)),
              help="Only this kind (repeatable; default: every kind but models).")
@click.option("--models", is_flag=True,
              help="Also remove the assembled embedded models (rebuilt from their packages on next use, minutes).")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
def cache_clear(older_than: str | None, kinds: tuple[str, ...], models: bool, dry_run: bool) -> None:
    """Remove cached LLM answers, embeddings, information content and trained attackers: only
    what anonaudit made (each kind's folder lists it); anything else there, and a folder that is
    a link, is left and named. Exit status 2 when something could not be removed (each named)."""
    import sys

    from audit.runtime import caches

    age = caches.parse_age(older_than) if older_than is not None else None
    chosen = list(dict.fromkeys([*(kinds or DOCUMENT_KINDS), *(["models"] if models else [])]))
    done = caches.clear(chosen, older_than=age, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    failed = 0
    for kind, d in done.items():
        what = f"{d.items} item(s), {_size(d.bytes)}"
        if d.answers:
            what += f", {d.answers} LLM answer(s)"
        click.echo(f"{verb} {kind}: {what}")
        for line in d.left:
            click.echo(f"  left {kind}: {line}")
        for line in d.failed:
            click.secho(f"  could not remove ({kind}) {line}", fg="red", err=True)
        failed += len(d.failed)
    if failed:
        click.secho(f"error: {failed} path(s) could not be removed (named above); what was removed is said above",
                    fg="red", err=True)
        sys.exit(2)


COMMANDS = [cache_group]
