"""From a component's constructor to command-line options.

A component declares its parameters once, as keyword arguments of ``__init__`` with type
hints, defaults and a ``name: text`` line each in the constructor's (or the class')
docstring. :func:`parameters` reads them; :func:`param_option` turns each simple one into
a typed click option:

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

import builtins
import collections.abc
import inspect
import math
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click

from audit.core.data import Corpus, Release
from audit.core.errors import AnonauditError
from audit.core.safejson import YAML_MAX_DEPTH, YAML_MAX_NODES, check_tree

#: Parameters filled by the driver's common options or by the runner, never their own option.
COMMON = ("seed", "llm", "embedder")
RUNNER_FILLED = ("progress",)

EMPTY = inspect.Parameter.empty


@dataclass(frozen=True)
class Param:
    """One constructor parameter as the command line sees it.

    ``kind``: ``int``, ``float``, ``str``, ``bool``, ``choice``, ``list`` (of strings),
    ``corpus``, ``release`` (files the driver loads) or ``other`` (``--param`` only).
    """

    name: str
    kind: str
    default: Any = EMPTY
    help: str = ""
    choices: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is EMPTY

    @property
    def flag(self) -> str:
        """The option's main spelling without dashes (``use_cache`` -> ``cache``)."""
        name = self.name[4:] if self.kind == "bool" and self.name.startswith("use_") and len(self.name) > 4 \
            else self.name
        return name.replace("_", "-")


# --------------------------------------------------------------------------- docstrings

_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_NAMES = r"[A-Za-z_]\w*(?:\s*/\s*[A-Za-z_]\w*)*"
_LINE = re.compile(rf"^(\s*)({_NAMES})\s*:\s+(\S.*)$")
_INLINE = re.compile(r"``([A-Za-z_]\w*)``\s*:\s")


def _plain(text: str) -> str:
    """reST to plain words: ``x`` -> x, :class:`~a.B` -> B; whitespace collapsed."""
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1], text)
    return " ".join(text.replace("``", "").split())


def parse_doc(doc: str | None) -> dict[str, str]:
    """Per-parameter help from a docstring.

    Two layouts are read: a line ``name: text`` (or ``a / b: text`` for several names), with
    more-indented continuation lines; and inline runs of a quoted name, a colon and its text in
    a paragraph (as in ``UtilityMetric``), each ending where the next begins.
    """
    out: dict[str, str] = {}
    if not doc:
        return out
    lines = inspect.cleandoc(doc).splitlines()
    names: list[str] = []
    indent = 0
    text: list[str] = []

    def flush() -> None:
        for n in names:
            out.setdefault(n, _plain(" ".join(text)).rstrip(";"))

    for line in lines:
        m = _LINE.match(line)
        if m:
            flush()
            indent = len(m.group(1))
            names = [n.strip() for n in m.group(2).split("/")]
            text = [m.group(3)]
        elif names and line.strip() and len(line) - len(line.lstrip()) > indent:
            text.append(line.strip())
        else:
            flush()
            names, text = [], []
    flush()
    flat = " ".join(lines)
    marks = list(_INLINE.finditer(flat))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(flat)
        piece = flat[m.end():end].strip()
        if i + 1 == len(marks):  # the last one ends with its sentence
            piece = re.split(r"(?<=[.!?])\s+(?=[A-Z])", piece, maxsplit=1)[0]
        out.setdefault(m.group(1), _plain(piece).rstrip(";,").rstrip())
    return out


def param_help(cls: type) -> dict[str, str]:
    """Help of every documented parameter: the constructor's docstring first, then the class',
    then those of its bases."""
    out: dict[str, str] = {}
    for klass in cls.__mro__:
        if klass is object:
            continue
        init = klass.__dict__.get("__init__")
        for doc in (getattr(init, "__doc__", None), klass.__dict__.get("__doc__")):
            for k, v in parse_doc(doc).items():
                out.setdefault(k, v)
    return out


def summary(cls: type) -> str:
    """One line on what the component is: the first sentence of its docstring, else of its description."""
    for text in (cls.__dict__.get("__doc__") or "", getattr(cls, "description", "") or ""):
        text = _plain(text.strip().split("\n\n")[0])
        if text:
            return re.split(r"(?<=[.!?])\s+(?=[A-Z])", text, maxsplit=1)[0]
    return ""


# --------------------------------------------------------------------------- type hints


class _Unknown:
    """A type hint that could not be resolved (a name imported only for type checking)."""


def _resolve(hint: Any, module: str) -> Any:
    if not isinstance(hint, str):
        return hint
    ns = {**vars(builtins), **vars(typing), **vars(collections.abc), **vars(sys.modules.get(module, builtins))}
    try:
        return eval(hint, ns)  # noqa: S307 - a type hint of an installed component
    except Exception:
        parts = [p.strip() for p in hint.split("|")] if "[" not in hint else [hint]
        resolved = []
        for part in parts:
            try:
                resolved.append(eval(part, ns))  # noqa: S307
            except Exception:
                resolved.append(_Unknown)
        return typing.Union[tuple(resolved)] if len(resolved) > 1 else resolved[0]


def _alternatives(hint: Any) -> tuple[list[Any], bool]:
    """The non-None members of a union hint, and whether None is allowed."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        args = list(typing.get_args(hint))
    else:
        args = [hint]
    # Annotated[int, AtLeast(1)] is an int option; its bound is checked with the other values
    args = [typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a for a in args]
    return [a for a in args if a is not type(None) and a is not None], any(a is type(None) for a in args)


def _is_str_sequence(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Iterable,
                  collections.abc.Collection):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return bool(args) and all(a is str for a in args)
    return False


def classify(hint: Any, default: Any = EMPTY) -> tuple[str, tuple[str, ...]]:
    """The option kind of a hint (see :class:`Param`) and its choices."""
    alts, _ = _alternatives(hint)
    if hint is EMPTY or not alts:  # no hint: go by the default
        if isinstance(default, bool):
            return "bool", ()
        for t in (int, float, str):
            if isinstance(default, t):
                return t.__name__, ()
        return "other", ()
    if len(alts) == 1 and typing.get_origin(alts[0]) is typing.Literal:
        values = typing.get_args(alts[0])
        if all(isinstance(v, str) for v in values):
            return "choice", tuple(values)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return "int", ()
    types_ = [a for a in alts if isinstance(a, type)]
    if any(issubclass(t, Release) for t in types_):
        return "release", ()
    if any(issubclass(t, Corpus) for t in types_):
        return "corpus", ()
    if alts == [bool]:
        return "bool", ()
    if all(a in (int, float) for a in alts):
        return ("float" if float in alts else "int"), ()
    if str in alts:
        return "str", ()
    if len(alts) == 1 and _is_str_sequence(alts[0]):
        return "list", ()
    return "other", ()


def parameters(cls: type) -> list[Param]:
    """Every keyword parameter of ``cls.__init__`` with its kind, default and help."""
    helps = param_help(cls)
    init = cls.__init__
    owner = next((k for k in cls.__mro__ if "__init__" in k.__dict__), cls)
    out = []
    for p in inspect.signature(init).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        hint = _resolve(p.annotation, owner.__module__) if p.annotation is not EMPTY else EMPTY
        kind, choices = classify(hint, p.default)
        out.append(Param(p.name, kind, p.default, helps.get(p.name, ""), choices))
    return out


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
    main = p.flag
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
