"""The list of top-level CLI commands: one module per command, named after it with ``_command``
(``run_command.py`` for ``anonaudit run``), so no command module shares its name with the pipeline
step it drives (:mod:`audit.pipeline.gate`...); ``attack``, ``sanitize`` and ``utility`` are built
for every registered component by :mod:`anonaudit.cli.driver`."""

from __future__ import annotations

import click


def all_commands() -> list[click.Command]:
    import anonaudit.cli.bench_command as bench_cli
    import anonaudit.cli.cache_command as cache_cli
    import anonaudit.cli.data_command as data_cli
    import anonaudit.cli.demo_command as demo_cli
    import anonaudit.cli.driver as driver
    import anonaudit.cli.gate_command as gate_cli
    import anonaudit.cli.harden_command as harden_cli
    import anonaudit.cli.llm_command as llm_cli
    import anonaudit.cli.models_command as models_cli
    import anonaudit.cli.report_command as report_cli
    import anonaudit.cli.run_command as run_cli

    return [*driver.groups(), *data_cli.commands(), *demo_cli.COMMANDS, *run_cli.COMMANDS, *report_cli.COMMANDS,
            *gate_cli.COMMANDS, *harden_cli.COMMANDS, *models_cli.COMMANDS, *llm_cli.COMMANDS, *cache_cli.COMMANDS,
            *bench_cli.COMMANDS]
