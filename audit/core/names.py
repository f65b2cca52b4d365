"""How a component's name is spelled: the one rule by which the registry, the spec, the command
line and the results file agree that two spellings are the same name (below all of them, so
that results read back can match names without importing the registry)."""

from __future__ import annotations


def normalise(name: str) -> str:
    """CLI spelling ``span-guess`` and Python spelling ``span_guess`` are the same name."""
    return name.strip().lower().replace("-", "_")
