"""The parameter model: what a component's constructor takes, read once, in one place.

A component declares its parameters once, as keyword arguments of ``__init__`` with type
hints, defaults and a ``name: text`` line each in the constructor's (or the class')
docstring (:mod:`audit.core.interfaces`). :func:`parameters` reads them into
:class:`Param` records (name, resolved type hint, default, help, and the *kind* of value:
``int``, ``float``, ``str``, ``bool``, ``choice``, ``list`` of strings, ``corpus``, ``release``
or ``other``). Everything that needs a component's parameters reads them here:

* the spec validator and the Python API check given values against the hints
  (:func:`audit.core.paramtypes.check_params`);
* the command line maps each :class:`Param` to a click option (:mod:`anonaudit.cli.param_options`);
* :meth:`audit.core.interfaces.Component.param_names` and the plugin contract check
  (:func:`anonaudit.testing.check_component`).

A hint that cannot be resolved (a name imported only for type checking) becomes
:class:`Unknown`, which accepts any value; in a union only the unresolvable member does.
"""

from __future__ import annotations

import builtins
import collections.abc
import inspect
import re
import sys
import types
import typing
from dataclasses import dataclass
from typing import Any

from audit.core.data import Corpus, Release

EMPTY = inspect.Parameter.empty

#: The value kinds of :class:`Param` (see there).
KINDS = ("int", "float", "str", "bool", "choice", "list", "corpus", "release", "other")


class Unknown:
    """A type hint that could not be resolved: any value is accepted."""


@dataclass(frozen=True)
class Param:
    """One constructor parameter of a component.

    ``hint``: the resolved type hint (``EMPTY`` when there is none). ``kind``: ``int``,
    ``float``, ``str``, ``bool``, ``choice`` (a ``Literal`` of strings, ``choices``), ``list``
    (of strings), ``corpus`` or ``release`` (data the caller loads), or ``other`` (anything
    else: a mapping, a model object). ``keyword_only``: declared after ``*``.
    """

    name: str
    kind: str
    default: Any = EMPTY
    help: str = ""
    choices: tuple[str, ...] = ()
    hint: Any = EMPTY
    keyword_only: bool = True

    @property
    def required(self) -> bool:
        return self.default is EMPTY


# --------------------------------------------------------------------------- docstrings

_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_NAMES = r"[A-Za-z_]\w*(?:\s*/\s*[A-Za-z_]\w*)*"
_LINE = re.compile(rf"^(\s*)({_NAMES})\s*:\s+(\S.*)$")
_INLINE = re.compile(r"``([A-Za-z_]\w*)``\s*:\s")


def plain(text: str) -> str:
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
            out.setdefault(n, plain(" ".join(text)).rstrip(";"))

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
        out.setdefault(m.group(1), plain(piece).rstrip(";,").rstrip())
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
        text = plain(text.strip().split("\n\n")[0])
        if text:
            return re.split(r"(?<=[.!?])\s+(?=[A-Z])", text, maxsplit=1)[0]
    return ""


# --------------------------------------------------------------------------- type hints


def resolve(hint: Any, module: str) -> Any:
    """A hint written as a string (``from __future__ import annotations``) evaluated in the
    namespace of ``module``; a union whose members cannot all be resolved keeps the others
    (the rest become :class:`Unknown`)."""
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
                resolved.append(Unknown)
        return typing.Union[tuple(resolved)] if len(resolved) > 1 else resolved[0]


def alternatives(hint: Any) -> tuple[list[Any], bool]:
    """The non-None members of a union hint (``Annotated`` unwrapped), and whether None is allowed."""
    origin = typing.get_origin(hint)
    args = list(typing.get_args(hint)) if origin is typing.Union or origin is types.UnionType else [hint]
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
    """The value kind of a hint (see :class:`Param`) and its choices."""
    alts, _ = alternatives(hint)
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
    """Every named parameter of ``cls.__init__`` (not ``self``, ``*args``, ``**kwargs``), in
    order, with its resolved hint, kind, default and help."""
    helps = param_help(cls)
    owner = next((k for k in cls.__mro__ if "__init__" in k.__dict__), cls)
    out = []
    for p in inspect.signature(cls.__init__).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        hint = resolve(p.annotation, owner.__module__) if p.annotation is not EMPTY else EMPTY
        kind, choices = classify(hint, p.default)
        out.append(Param(p.name, kind, p.default, helps.get(p.name, ""), choices, hint,
                         p.kind is p.KEYWORD_ONLY))
    return out


def variadic(cls: type) -> list[str]:
    """The ``*args``/``**kwargs`` of ``cls.__init__`` (a component has none: every parameter is
    named, so a config maps one-to-one onto the constructor)."""
    if cls.__init__ is object.__init__:  # no constructor of its own: no parameters at all
        return []
    return [p.name for p in inspect.signature(cls.__init__).parameters.values()
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def param_hints(cls: type) -> dict[str, Any]:
    """The resolved type hint of each parameter of ``cls.__init__`` (:class:`Unknown` for one
    without a hint)."""
    return {p.name: (Unknown if p.hint is EMPTY else p.hint) for p in parameters(cls)}
