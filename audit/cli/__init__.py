"""Deprecated: the command line moved up beside the API it drives, to :mod:`anonaudit.cli`
(issue 59: the engine, ``audit/``, holds nothing that imports the API).

``from audit.cli import main`` and the old module paths (``audit.cli.driver``, ``audit.cli.run``...)
still work, with a :class:`DeprecationWarning`: each name here is the object of :mod:`anonaudit.cli`,
and each old module the same module object as its new one (:data:`MODULES`: ``audit.cli.run`` is
:mod:`anonaudit.cli.run_command`). This shim is one of the two imports from ``audit`` up to ``anonaudit``
tests/test_architecture.py allows, by name; it runs only when the old path is imported."""

from __future__ import annotations

import importlib
import sys
import warnings

warnings.warn("audit.cli is deprecated: the command line is anonaudit.cli (`from anonaudit.cli import main`)",
              DeprecationWarning, stacklevel=2)

from anonaudit.cli import *  # noqa: E402,F401,F403 - the package's names, at their old path
from anonaudit.cli import EXIT_GATE_FAILED, EXIT_INVALID, FriendlyGroup, main, os_error_message  # noqa: E402,F401

#: The old module names under ``audit.cli`` and the modules of :mod:`anonaudit.cli` they are now.
MODULES = {"bench": "bench_command", "cache": "cache_command", "commands": "commands", "common": "common",
           "data": "data_command", "demo": "demo_command", "driver": "driver", "gate": "gate_command",
           "harden": "harden_command", "llm": "llm_command", "models": "models_command",
           "options": "driver_options", "outputs": "output_options", "params": "param_options",
           "report": "report_command", "run": "run_command", "tracking": "tracking_options"}
for _old, _new in MODULES.items():
    sys.modules[f"{__name__}.{_old}"] = globals()[_old] = importlib.import_module(f"anonaudit.cli.{_new}")
del _old, _new
