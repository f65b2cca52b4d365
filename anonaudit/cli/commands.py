"""The list of top-level CLI commands (one module per command, named after it; ``attack``,
``sanitize`` and ``utility`` are built for every registered component by :mod:`anonaudit.cli.driver`)."""

from __future__ import annotations

import click


def all_commands() -> list[click.Command]:
    import anonaudit.cli.bench as bench_cli
    import anonaudit.cli.cache as cache_cli
    import anonaudit.cli.data as data_cli
    import anonaudit.cli.demo as demo_cli
    import anonaudit.cli.driver as driver
    import anonaudit.cli.gate as gate_cli
    import anonaudit.cli.harden as harden_cli
    import anonaudit.cli.llm as llm_cli
    import anonaudit.cli.models as models_cli
    import anonaudit.cli.report as report_cli
    import anonaudit.cli.run as run_cli

    return [*driver.groups(), *data_cli.commands(), *demo_cli.COMMANDS, *run_cli.COMMANDS, *report_cli.COMMANDS,
            *gate_cli.COMMANDS, *harden_cli.COMMANDS, *models_cli.COMMANDS, *llm_cli.COMMANDS, *cache_cli.COMMANDS,
            *bench_cli.COMMANDS]
