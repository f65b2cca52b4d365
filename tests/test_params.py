"""One parameter model (audit/core/params.py): the spec validator, the Python API and the
command line read a component's constructor through it, and nothing else reads signatures."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pytest

import anonaudit.cli.param_options as cli_params
from audit.core.interfaces import Attack
from audit.core.params import Param, Unknown, parameters
from audit.core.paramtypes import PositiveInt, check_params
from audit.core.registry import registry

if TYPE_CHECKING:
    from audit.models.llm import LLMNotThere  # noqa: F401 - a hint the runtime cannot resolve

ROOT = Path(__file__).resolve().parents[1]


class Knobs(Attack):
    """A toy attack.

    rounds: how many rounds.
    mode: how to combine.
    """

    name = "knobs"

    def __init__(self, rounds: PositiveInt = 2, mode: Literal["any", "all"] = "any",
                 table: LLMNotThere | int = 3, ratio: float | None = None):
        self.rounds, self.mode, self.table, self.ratio = rounds, mode, table, ratio

    def evaluate(self, scenario, release):  # pragma: no cover - never run
        return []


def test_one_reading_serves_the_validator_and_the_command_line():
    by = {p.name: p for p in parameters(Knobs)}
    assert cli_params.Param is Param and cli_params.parameters is parameters  # the CLI maps, it does not read
    assert (by["rounds"].kind, by["rounds"].help, by["rounds"].default) == ("int", "how many rounds.", 2)
    assert (by["mode"].kind, by["mode"].choices) == ("choice", ("any", "all"))
    assert by["ratio"].kind == "float" and not by["ratio"].required
    # the unresolvable member of a union accepts anything (the command line sets it with --param)
    assert by["table"].kind == "other" and Unknown in getattr(by["table"].hint, "__args__", ())
    assert Knobs.param_names() == ["rounds", "mode", "table", "ratio"]
    # the validator reads the same hints: bounds, choices and types in words
    assert check_params(Knobs, {"rounds": 0, "mode": "some", "ratio": "x", "table": object()}) == {
        "rounds": "must be a whole number of at least 1, got 0",
        "mode": "must be one of 'any', 'all', got 'some'",
        "ratio": "must be a finite number or null, got 'x'",
    }
    option = cli_params.param_option(by["mode"])
    assert list(option.type.choices) == ["any", "all"]


@pytest.mark.parametrize("kind", ["attack", "sanitizer", "metric"])
def test_every_builtin_reads_the_same_names_everywhere(kind):
    for name in registry.names(kind):
        cls = registry.get(kind, name)
        names = [p.name for p in parameters(cls)]
        assert names == cls.param_names(), name
        defaults = {p.name: p.default for p in parameters(cls) if not p.required and p.default is not None}
        assert check_params(cls, defaults) == {}, f"{kind} {name}: a default does not fit its own hint"


def test_no_other_module_reads_constructor_signatures():
    """``inspect.signature`` of a component is read by the parameter model only."""
    offenders = []
    for pkg in ("audit", "anonaudit", "attackers", "defenders", "reports"):
        for path in (ROOT / pkg).rglob("*.py"):
            if path == ROOT / "audit" / "core" / "params.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "signature":
                    arg = ast.unparse(node.args[0]) if node.args else ""
                    if "__init__" in arg or arg in ("cls", "klass", "init"):
                        offenders.append(f"{path.relative_to(ROOT)}: signature({arg})")
    assert offenders == []
