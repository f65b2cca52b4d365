"""The list of top-level CLI commands besides ``attack`` (one entry per command module)."""

from __future__ import annotations

import click


def all_commands() -> list[click.Command]:
    from audit import data_cli, demo_cli, models_cli, run_cli, utility_cli

    return [*data_cli.commands(), *demo_cli.COMMANDS, *run_cli.COMMANDS, *models_cli.COMMANDS,
            *utility_cli.COMMANDS]
