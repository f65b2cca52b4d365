"""The data model every other layer uses: spans, documents, corpora, releases and scenarios,
results and their typed findings, the repair targets read from them, statistics, the component
interfaces and their registry, parameter checks and errors, and the persistence the data model
itself needs (atomic files and hashes, checked input trees, where the toolkit keeps its files).
It imports nothing from the rest of anonaudit; how a run runs is :mod:`audit.runtime`.

The contract check a plugin author runs on a component class is public as
:mod:`anonaudit.testing` (``from anonaudit.testing import check_component``); its code is
:mod:`audit.core.contract`. ``from audit.core import check_component`` (and ``ContractError``), the
path it had before, still works with a :class:`DeprecationWarning`."""

import warnings
from typing import Any

__all__ = ["check_component", "ContractError"]


def __getattr__(name: str) -> Any:
    """``check_component`` and ``ContractError`` at their old path, with a
    :class:`DeprecationWarning` naming the new one, imported when first asked for (importing any
    module of the core must not import the whole of it)."""
    if name in __all__:
        warnings.warn(f"audit.core.{name} is deprecated: import it from anonaudit.testing "
                      f"(from anonaudit.testing import {name})", DeprecationWarning, stacklevel=2)
        from audit.core import contract

        return getattr(contract, name)
    raise AttributeError(f"module 'audit.core' has no attribute {name!r}")
