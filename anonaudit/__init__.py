"""anonaudit: attack sanitized text the way an adversary would, before it is published.

The Python API (the command line is a thin layer over it)::

    import anonaudit
    results = anonaudit.audit(originals=df, releases={"labels": df2},
                              attacks=["phrase_search"], metrics=["rouge"], seed=0)
    spec = anonaudit.Spec.load("audit.yaml")   # or anonaudit.Spec(...): releases, attacks, budget...
    results = anonaudit.audit(spec.replace(seed=1))
    results.to_pandas()            # release, kind, name, value, ci_low, ci_high, n, baseline, ...
    results.report("report.html")  # and findings.csv beside it
    results.gate(max={"phrase_search": 0.1})

The spec: :class:`Spec` (with :class:`Budget`, :class:`Models`, :class:`Columns`).
Functions: :func:`audit`, :func:`attack`, :func:`utility`, :func:`sanitize`, :func:`run`, :func:`bench`,
:func:`harden`, :func:`load_results`, :func:`sample_data`. Importing this package loads no model and no
plugin: each function imports what it needs when it is called.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from audit import __version__

_EXPORTS = {
    "audit": "anonaudit.api", "attack": "anonaudit.api", "utility": "anonaudit.api", "sanitize": "anonaudit.api",
    "run": "anonaudit.api", "sample_data": "anonaudit.api", "bench": "anonaudit.benchmark",
    "Spec": "anonaudit.typed_spec", "Budget": "anonaudit.typed_spec", "Models": "anonaudit.typed_spec",
    "Columns": "anonaudit.typed_spec",
    "BenchResults": "anonaudit.benchmark", "harden": "anonaudit.hardening", "Hardened": "anonaudit.hardening",
    "Results": "anonaudit.outcome", "GateOutcome": "anonaudit.outcome", "load_results": "anonaudit.outcome",
    "Corpus": "audit.core.data", "Document": "audit.core.data", "Span": "audit.core.data",
    "Release": "audit.core.data", "Result": "audit.core.results", "Finding": "audit.core.results",
    "AnonauditError": "audit.core.errors", "DataError": "audit.core.errors", "ArgumentError": "audit.core.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'anonaudit' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
