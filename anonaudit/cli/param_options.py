"""From the parameter model (:mod:`audit.core.params`) to command-line options.

A component declares its parameters once, as keyword arguments of ``__init__`` with type
hints, defaults and a ``name: text`` line each in the constructor's (or the class')
docstring. The core reads them (:func:`audit.core.params.parameters`, the same reading the
spec validator checks values with); this module only maps each simple :class:`Param` to a
typed click option (:func:`param_option`), by its kind:

* ``int``, ``float``, ``str`` (``X | None`` too) -> ``--name VALUE``;
* ``bool`` -> ``--name/--no-name``; ``use_x: bool`` is spelled ``--x/--no-x``;
* ``Literal["a", "b"]`` -> a choice;
* a sequence of strings -> ``--name A,B``;
* a :class:`~audit.core.data.Corpus` or :class:`~audit.core.data.Release` -> a file
  (``--name NAME=FILE`` or ``FILE``) that the driver loads;
* anything else is set with ``--param name=VALUE`` (VALUE read as YAML).

A component keeps older spellings with ``cli_aliases`` (see
:class:`~audit.core.interfaces.Component`): ``{"threads": "num_threads"}`` adds
``--threads``; ``{"no_scoring": "no_score"}`` adds ``--no-scoring`` for ``--no-score``.
Only options given on the command line reach the constructor, so the component's own
defaults apply (and are what ``--help`` shows).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import click

from audit.core.errors import AnonauditError
from audit.core.params import EMPTY, Param, parameters, parse_doc, summary
from audit.core.safejson import YAML_MAX_DEPTH, YAML_MAX_NODES, check_tree

__all__ = ["COMMON", "RUNNER_FILLED", "EMPTY", "FINITE_FLOAT", "Checked", "Param", "flag", "param_option",
           "parameters", "parse_doc", "parse_param_values", "simple", "split_list", "summary"]

#: Parameters filled by the driver's common options or by the runner, never their own option.
COMMON = ("seed", "llm", "embedder")
RUNNER_FILLED = ("progress",)


def flag(p: Param) -> str:
    """The option's main spelling without dashes (``use_cache`` -> ``cache``)."""
    name = p.name[4:] if p.kind == "bool" and p.name.startswith("use_") and len(p.name) > 4 else p.name
    return name.replace("_", "-")


# --------------------------------------------------------------------------- options


class FiniteFloat(click.ParamType):
    """A number; NaN and infinities are refused (no parameter of a component means them)."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


FINITE_FLOAT = FiniteFloat()


class Checked(click.ParamType):
    """A number option checked by the validator of the Python API (:mod:`audit.core.arguments`)
    against the same type the API's argument has (``Checked(Seed)``, ``Checked(Seconds, float)``):
    the command line and the API refuse the same values with the same words."""

    def __init__(self, hint: Any, base: type = int):
        self.hint = hint
        self.base = click.INT if base is int else click.FLOAT
        self.name = self.base.name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from audit.core.arguments import argument_problem

        number = self.base.convert(value, param, ctx)
        wrong = argument_problem(number, self.hint)
        if wrong:
            self.fail(f"{value!r}: {wrong}", param, ctx)
        return number

_TYPES = {"int": click.INT, "float": FINITE_FLOAT, "str": click.STRING, "list": click.STRING,
          "corpus": click.STRING, "release": click.STRING}
_METAVARS = {"int": "N", "float": "X", "str": "TEXT", "list": "A,B", "corpus": "FILE", "release": "NAME=FILE"}


def _show(value: Any) -> str | None:
    """A default as the help shows it (None when there is nothing worth showing)."""
    if value is EMPTY or value is None:
        return None
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return None if value == "" or len(value) > 40 else value
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(map(str, value)) if value else "none"
    if isinstance(value, (int, float)):
        return str(value)
    return None


def simple(p: Param) -> bool:
    """Whether a parameter gets its own option."""
    return p.kind != "other" and p.name not in COMMON + RUNNER_FILLED


def param_option(p: Param, aliases: Mapping[str, str] | None = None, *, used_by: str = "",
                 taken: frozenset[str] = frozenset()) -> click.Option:
    """The typed click option of one parameter; its destination is ``p.name``.

    ``aliases`` maps extra spellings to this option's (``{"threads": "num_threads"}``;
    ``{"no_scoring": "no_score"}`` for the off side of a flag); spellings in ``taken`` (the
    driver's own options) are left out; ``used_by`` is appended to the help.
    """
    main = flag(p)
    extra_on, extra_off = [], []
    for alias, target in (aliases or {}).items():
        a, t = alias.replace("_", "-"), target.replace("_", "-")
        if a in taken:
            continue
        if t in (p.name.replace("_", "-"), main):
            extra_on.append(a)
        elif p.kind == "bool" and t in (f"no-{p.name.replace('_', '-')}", f"no-{main}"):
            extra_off.append(a)
    help_ = p.help[:1].upper() + p.help[1:] if p.help else ""
    if help_ and help_[-1] not in ".!?)":
        help_ += "."
    if p.kind in ("corpus", "release"):
        help_ = f"{help_} Given as a file: NAME=FILE or FILE.".strip()
    if used_by:
        help_ = f"{help_} [{used_by}]" if help_ else f"[{used_by}]"
    shown = _show(p.default)
    # The default is shown, never passed: only options given on the command line reach the
    # constructor (the driver reads each option's source), so its own defaults apply.
    common = dict(help=help_, show_default=shown is not None, required=p.required)
    if p.kind == "bool":
        decls = [f"--{main}/--no-{main}", *[f"--{a}" for a in extra_on]]
        decls += [f" /--{a}" for a in extra_off]
        return click.Option([*decls, p.name], default=None if p.required else bool(p.default), **common)
    names = [f"--{main}", *[f"--{a}" for a in extra_on]]
    if p.kind == "choice":
        ptype: Any = click.Choice(list(p.choices))
        metavar = None
    else:
        ptype, metavar = _TYPES[p.kind], _METAVARS[p.kind]
    return click.Option([*names, p.name], type=ptype, default=shown if shown is not None else None,
                        metavar=metavar, **common)


def split_list(value: str) -> list[str]:
    """``"A, B,C"`` -> ``["A", "B", "C"]``."""
    return [x.strip() for x in value.split(",") if x.strip()]


def parse_param_values(values: Sequence[str], option: str = "--param") -> dict[str, Any]:
    """``KEY=VALUE`` pairs, each VALUE read as YAML."""
    import yaml

    out: dict[str, Any] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise AnonauditError(f"{option} {item!r}: expected KEY=VALUE")
        try:
            out[key.strip().replace("-", "_")] = check_tree(yaml.safe_load(value), f"{option} {key.strip()}",
                                                                  max_nodes=YAML_MAX_NODES, max_depth=YAML_MAX_DEPTH)
        except (yaml.YAMLError, RecursionError) as exc:
            raise AnonauditError(f"{option} {item[:80]!r}: the value is not valid YAML "
                                 f"({exc.__class__.__name__})") from None
    return out
