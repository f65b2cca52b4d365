"""The audit's budget: one word (``quick``, ``standard``, ``full``) that sets how much work each
stage does, for ``anonaudit run``, ``demo``, ``attack`` and ``bench`` (``--budget``), the spec
(``budget:``) and the API (``budget=``).

* ``quick``: a CI gate in minutes. Stages that sample stop at a 95% interval of ±0.10, and
  attacks take their cheaper settings (``budget_params["quick"]`` of each class: TRIR's fast
  training, the claim linker without paraphrasing and its judge stopped at ±0.20).
* ``standard`` (the default): stages that sample stop at ±0.05 (:data:`DEFAULT_HALF_WIDTH`).
* ``full``: every document of every release.

A stage that samples names its target parameter in the class attribute ``precision_param``
(:mod:`audit.core.sequential`); the budget sets it, and the class's ``budget_params`` add what
else the level changes. Parameters the user gives always win. The table of what each level sets
is in docs/how-to/budgets.md and docs/methods.md; :func:`table` prints it from these definitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audit.core.errors import AnonauditError
from audit.core.sequential import DEFAULT_HALF_WIDTH

#: The levels, cheapest first, and the interval target each sets.
TARGETS: dict[str, float | None] = {"quick": 0.10, "standard": DEFAULT_HALF_WIDTH, "full": None}
BUDGETS = tuple(TARGETS)
DEFAULT_BUDGET = "standard"


def check_budget(budget: Any, where: str = "budget") -> str:
    """``budget`` if it is a level, else an error naming ``where`` and the levels."""
    if budget is None:
        return DEFAULT_BUDGET
    if not isinstance(budget, str) or budget not in TARGETS:
        raise AnonauditError(f"{where}: must be one of {', '.join(BUDGETS)}, got {budget!r}")
    return budget


def budget_params(cls: type, budget: str) -> dict[str, Any]:
    """What ``budget`` sets on a component of class ``cls``: its interval target and its own
    settings for the level (each only where the class takes the parameter)."""
    names = set(cls.param_names()) if hasattr(cls, "param_names") else set()
    out: dict[str, Any] = {}
    target = getattr(cls, "precision_param", None)
    if target and target in names:
        out[target] = TARGETS[budget]
    own: Mapping[str, Mapping[str, Any]] = getattr(cls, "budget_params", None) or {}
    out.update({k: v for k, v in own.get(budget, {}).items() if k in names})
    return out


def table(registry: Any) -> list[tuple[str, str, str]]:
    """``(component, parameter, values by level)`` for every registered attack a level changes."""
    rows = []
    for name in registry.names("attack"):
        try:
            cls = registry.get("attack", name)
        except AnonauditError:
            continue
        by_level = {b: budget_params(cls, b) for b in BUDGETS}
        for param in sorted({k for v in by_level.values() for k in v}):
            rows.append((name, param, ", ".join(f"{b}: {by_level[b].get(param, '(default)')}" for b in BUDGETS)))
    return rows
