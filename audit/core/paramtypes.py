"""Checking parameter values against a component's constructor, before anything runs.

A component's parameters are read once, by the parameter model (:mod:`audit.core.params`:
:func:`~audit.core.params.parameters`), which the command line uses too. :func:`check_params`
compares the values an audit spec, a Python call or a command line gives with their type
hints and returns one message per wrong value, naming the parameter, so the spec validator
can list every problem at once instead of the run failing later with a raw Python error, one
component at a time.

Only what the hint says is checked (``int``, ``float``, ``str``, ``bool``, ``Literal``,
``None``, unions, lists/tuples/sets and mappings of those, and the bounds of
:data:`PositiveInt`/:data:`NonNegativeInt` (:class:`AtLeast`, :class:`AtMost`, :class:`Above`): a count or size is validated by its type, so
``batch_size=0`` is refused before anything runs); a parameter whose hint names
another class (a model object, a corpus given as ``corpus:NAME``) or cannot be resolved is
accepted as it is, and ranges stay the constructor's business.
"""

from __future__ import annotations

import collections.abc
import math
import os
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from audit.core.params import EMPTY, Unknown, param_hints, parameters

__all__ = ["AtLeast", "AtMost", "Above", "PositiveInt", "NonNegativeInt", "check_params", "describe", "matches", "param_hints"]

_SEQUENCES = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Iterable,
              collections.abc.Collection, collections.abc.Set, collections.abc.MutableSequence)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


class AtLeast(typing.NamedTuple):
    """``Annotated[int, AtLeast(1)]``: a number no smaller than ``minimum``."""

    minimum: float


class AtMost(typing.NamedTuple):
    """``Annotated[int, AtMost(2**32 - 1)]``: a number no larger than ``maximum``."""

    maximum: float


class Above(typing.NamedTuple):
    """``Annotated[float, Above(0)]``: a number larger than ``bound`` (a time limit of 0 means nothing)."""

    bound: float


def _in_range(value: Any, marks: Sequence[Any]) -> bool:
    return all(value >= m.minimum for m in marks if isinstance(m, AtLeast)) and \
        all(value <= m.maximum for m in marks if isinstance(m, AtMost)) and \
        all(value > m.bound for m in marks if isinstance(m, Above))


#: A count or size where 0 makes no sense (a batch of 0 documents, 0 rounds): at least 1.
PositiveInt = typing.Annotated[int, AtLeast(1)]
#: A count that may be 0 (layers to freeze, an overlap): not negative.
NonNegativeInt = typing.Annotated[int, AtLeast(0)]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def matches(value: Any, hint: Any, *, strict: bool = False) -> bool:
    """Whether ``value`` (as read from YAML/JSON) fits ``hint``; unknown hints accept anything.
    ``strict``: a hint that names a class (``os.PathLike``, ``Corpus``) takes only its instances
    (a Python call's arguments, :mod:`audit.core.arguments`); otherwise such a value is the
    component's to judge (a corpus given as ``"corpus:NAME"`` in a spec)."""
    if hint is Unknown or hint is EMPTY or hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(matches(value, a, strict=strict) for a in args)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin is typing.Annotated:
        return matches(value, args[0], strict=strict) and _in_range(value, args[1:])
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:  # NaN and infinities are no value a parameter means
        return _is_number(value) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    if origin in _MAPPINGS or hint in _MAPPINGS:
        if not isinstance(value, Mapping):
            return False
        if len(args) == 2:
            return all(matches(k, args[0], strict=strict) and matches(v, args[1], strict=strict)
                       for k, v in value.items())
        return True
    if origin in _SEQUENCES or hint in _SEQUENCES:
        if not isinstance(value, (list, tuple, set, frozenset)):
            return False
        items = [a for a in args if a is not Ellipsis]
        if origin is tuple and args and Ellipsis not in args:  # tuple[int, str]: fixed length
            return len(value) == len(args) and all(matches(v, a, strict=strict) for v, a in zip(value, args))
        return not items or all(matches(v, items[0], strict=strict) for v in value)
    if strict and isinstance(origin or hint, type):
        return isinstance(value, origin or hint)
    return True  # another class (a model, a corpus given as "corpus:NAME", a path): not checked here


def describe(hint: Any, *, none: str = "null") -> str:
    """A hint in plain words: ``int | None`` -> "a whole number or null" (``none``: how None is
    called: "null" in a spec, "None" in Python)."""
    if hint is None or hint is type(None):
        return none
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        parts = [describe(a, none=none) for a in args if a is not type(None)]
        if type(None) in args:
            parts.append(none)
        return " or ".join(dict.fromkeys(parts))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is typing.Annotated:
        least = [m.minimum for m in args[1:] if isinstance(m, AtLeast)]
        most = [m.maximum for m in args[1:] if isinstance(m, AtMost)]
        above = [m.bound for m in args[1:] if isinstance(m, Above)]
        bounds = ([f"at least {_bound(max(least))}"] if least else []) + ([f"at most {_bound(min(most))}"] if most else [])
        return describe(args[0], none=none) + (f" of {' and '.join(bounds)}" if bounds else "") + \
            (f" above {_bound(max(above))}" if above else "")
    if hint is os.PathLike or origin is os.PathLike:
        return "a path"
    names = {bool: "true or false", int: "a whole number", float: "a finite number", str: "a string"}
    if hint in names:
        return names[hint]
    if origin in _MAPPINGS or hint in _MAPPINGS:
        if len(args) == 2 and args[1] is not Any:
            return f"a mapping of {_plural(describe(args[0], none=none))} to {_plural(describe(args[1], none=none))}"
        return "a mapping"
    if origin in _SEQUENCES or hint in _SEQUENCES:
        items = [a for a in args if a is not Ellipsis]
        return f"a list of {_plural(describe(items[0], none=none))}" if items else "a list"
    return getattr(hint, "__name__", str(hint))


def _bound(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _plural(words: str) -> str:
    for one, many in (("a whole number", "whole numbers"), ("a finite number", "finite numbers"),
                      ("a number", "numbers"), ("a string", "strings"),
                      ("true or false", "true/false values"), ("a mapping", "mappings")):
        words = words.replace(one, many)
    return words


def check_params(cls: type, params: Mapping[str, Any]) -> dict[str, str]:
    """``{parameter: what is wrong}`` for every value in ``params`` that does not fit the type
    hint of ``cls``'s constructor (unknown parameter names are the caller's to report)."""
    hints = {p.name: p.hint for p in parameters(cls)}
    out: dict[str, str] = {}
    for name, value in params.items():
        if name in hints and not matches(value, hints[name]):
            shown = repr(value)
            if len(shown) > 60:
                shown = shown[:57] + "..."
            out[name] = f"must be {describe(hints[name])}, got {shown}"
    return out
