"""``anonaudit models list`` and ``prune``: see and tidy the models (``anonaudit llm chat``, the
smoke test of one, is :mod:`anonaudit.cli.llm_command`)."""

from __future__ import annotations

import click


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


@click.group("models")
def models_group() -> None:
    """The models anonaudit can use offline."""


@models_group.command("list")
def models_list() -> None:
    """Each known model: installed?, path, size, checksum status, default for which role."""
    from audit.models.specs import list_models

    rows = [("NAME", "ROLES", "INSTALLED", "SIZE", "CHECKSUM", "DEFAULT FOR", "PATH")]
    for m in list_models():
        rows.append((m.name, ", ".join(m.roles), "yes" if m.installed else "no", _size(m.size), m.checksum,
                     ", ".join(m.default_for) or "-", m.path or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        line = "  ".join(cell.ljust(w) for cell, w in zip(r, widths)) + "  " + r[-1]
        click.secho(line, bold=r is rows[0], fg="red" if "MISMATCH" in r else None)
    click.echo("\nOther LLMs: --llm PATH.gguf, --llm HF_FOLDER, or --llm openai:MODEL@http://host:port/v1 "
               "(key in ANONAUDIT_API_KEY or OPENAI_API_KEY).")


@models_group.command("prune")
@click.option("--dry-run", is_flag=True, help="Say what would be removed, and remove nothing.")
def models_prune(dry_run: bool) -> None:
    """Remove the converted models this installation will not use again.

    A GGUF model read through transformers is kept dequantised (2.5 GB for the 0.5B scorer), and
    llama.cpp's tokeniser rebuilt from it, in folders named by the model file's content and the
    versions of transformers, torch and llama.cpp: after an upgrade, or once the file changed or
    is gone, the old ones are never read again. Another installation sharing this model cache
    with other versions would make its own again. Only what anonaudit made is removed: a folder
    there that it did not make (no record of it, not named by a model's key) is left, and listed."""
    from audit.models.specs import foreign_folders, prune_conversions

    removed, kept = prune_conversions(dry_run=dry_run)
    for folder in foreign_folders():
        click.echo(f"left      {folder} (not made by anonaudit)")
    verb = "would remove" if dry_run else "removed"
    for c in removed:
        click.echo(f"{verb}  {_size(c.size):>9}  {c.path}\n    {c.stale}")
    in_use = f"{len(kept)} in use ({_size(sum(c.size for c in kept))})"
    if removed:
        click.echo(f"{verb} {len(removed)} conversion(s), {_size(sum(c.size for c in removed))}; {in_use}")
    else:
        click.echo(f"nothing to prune: {in_use}")


COMMANDS = [models_group]
