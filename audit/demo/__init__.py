"""Deprecated: the demo moved up beside the API, to :mod:`anonaudit.demo` (issue 59: the engine,
``audit/``, holds nothing that imports the API).

``from audit.demo.data import generate`` and ``from audit.demo.run import run_demo`` still work,
with a :class:`DeprecationWarning`: each is the same module object as
:mod:`anonaudit.demo.population` and :mod:`anonaudit.demo.demo_audit`. This shim is one of the
imports from ``audit`` up to ``anonaudit`` that tests/test_architecture.py allows, by name; it runs
only when the old path is imported."""

from __future__ import annotations

import importlib
import sys
import warnings

warnings.warn("audit.demo is deprecated: the demo is anonaudit.demo (its population: anonaudit.demo.population)",
              DeprecationWarning, stacklevel=2)

#: The old module names under ``audit.demo`` and the modules of :mod:`anonaudit.demo` they are now.
MODULES = {"data": "population", "run": "demo_audit"}
for _old, _new in MODULES.items():
    sys.modules[f"{__name__}.{_old}"] = globals()[_old] = importlib.import_module(f"anonaudit.demo.{_new}")
del _old, _new
