"""The ``anonaudit`` command line.

Each command lives beside the code it drives (``audit/*_cli.py`` modules and the
attacks' own ``cli_command``); this module only assembles them and turns every
:class:`~audit.core.errors.AnonauditError` into a readable message and exit code 1.
"""

from __future__ import annotations

import logging
import os
import sys

# Before anything imports tqdm: bars of other libraries (transformers de-quantizing a GGUF file,
# sentence-transformers encoding) are off; ours pass ``disable`` explicitly (audit.core.progress).
os.environ.setdefault("TQDM_DISABLE", "1")

import click  # noqa: E402

from audit import __version__  # noqa: E402
from audit.core.errors import AnonauditError  # noqa: E402
from audit.core.registry import normalise, registry  # noqa: E402


class FriendlyGroup(click.Group):
    """A group whose commands report user errors as one message, never a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except AnonauditError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            ctx.exit(1)
        except KeyboardInterrupt:
            click.secho("interrupted: finished work is saved; run the same command again to resume.",
                        fg="yellow", err=True)
            ctx.exit(130)


class AttackGroup(FriendlyGroup):
    """``anonaudit attack NAME``: one sub-command per registered attack."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = []
        for name in registry.names("attack"):
            try:
                if registry.get("attack", name).cli_command() is not None:
                    names.append(name.replace("_", "-"))
            except AnonauditError:
                continue  # a broken plugin must not hide the others
        return names

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if normalise(cmd_name) not in registry.names("attack"):
            return None
        cmd = registry.get("attack", cmd_name).cli_command()
        if cmd is not None:
            cmd.name = cmd_name
        return cmd


@click.group(cls=FriendlyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="anonaudit")
@click.option("-v", "--verbose", is_flag=True, help="Log what happens (model loading, cache use).")
def main(verbose: bool) -> None:
    """Attack sanitized text the way an adversary would, before it is published."""
    if not verbose:  # model-loading bars of transformers drown our own progress bars
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


@main.group(cls=AttackGroup)
def attack() -> None:
    """Run one attack on one or more releases."""


def _add_commands() -> None:
    from audit.cli import commands

    for cmd in commands.all_commands():
        main.add_command(cmd)


_add_commands()
