"""The contract check a plugin author runs on a component class, as scikit-learn's
``check_estimator``::

    from anonaudit.testing import check_component

    def test_my_attack_keeps_the_contract():
        check_component(MyAttack)  # models as parameters: check_component(Cls, params={"llm": ...})

:func:`check_component` runs an attack, sanitizer, metric or detector class through the rules the
rest of anonaudit relies on (one role, named and hinted parameters, ``get_params`` round trip,
typed results, determinism given a seed, a clear error when a required input is missing, no
original shown outside a private fact) and raises :class:`ContractError` listing every rule it
breaks; on a class that keeps them it returns a :class:`ContractReport`. By default it runs the
component on :func:`scenario`: six invented people (:data:`PEOPLE`), one document each with its
identifiers annotated, two public background documents per person, and a release that masks every
annotated span with its label.

This is the public, documented place of the check. Its code lives in the engine's ground layer
(:mod:`audit.core.contract`, :mod:`audit.core.contract_data`), which imports nothing above the data
model.
"""

from __future__ import annotations

from audit.core.contract import ContractError, ContractReport, check_component, roles
from audit.core.contract_data import PEOPLE, scenario, secrets

__all__ = ["check_component", "ContractError", "ContractReport", "roles", "scenario", "secrets", "PEOPLE"]
