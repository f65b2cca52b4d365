"""The list of top-level CLI commands besides ``attack`` (one import per module)."""

from __future__ import annotations

import click


def all_commands() -> list[click.Command]:
    cmds: list[click.Command] = []
    # Each command module exposes the click commands it defines; add a line per module.
    from audit import data_cli; cmds += data_cli.commands()
    from audit.demo_cli import COMMANDS as demo_commands

    cmds += demo_commands
    from audit.run_cli import COMMANDS as run_commands; cmds += run_commands  # noqa: E702 (issue 8)
    from audit.models_cli import COMMANDS as model_commands; cmds += model_commands  # noqa: E702 (issue 2)
    from audit.utility_cli import COMMANDS as utility_commands; cmds += utility_commands  # noqa: E702 (issue 7)
    return cmds
