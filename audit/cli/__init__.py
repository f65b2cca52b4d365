"""Deprecated: the command line moved up beside the API it drives, to :mod:`anonaudit.cli`
(issue 59: the engine, ``audit/``, holds nothing that imports the API).

``from audit.cli import main`` and the old module paths (``audit.cli.driver``...) still work, with
a :class:`DeprecationWarning`: each name here is the object of :mod:`anonaudit.cli`, and each module
the same module object. This shim is the one import from ``audit`` up to ``anonaudit`` that
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
MODULES = {name: name for name in ("bench", "cache", "commands", "common", "data", "demo", "driver", "gate",
                                   "harden", "llm", "models", "options", "outputs", "params", "report", "run",
                                   "tracking")}
for _old, _new in MODULES.items():
    sys.modules[f"{__name__}.{_old}"] = globals()[_old] = importlib.import_module(f"anonaudit.cli.{_new}")
del _old, _new
