"""One validator for the arguments of the Python API and the options of the command line.

A function of the API declares what each argument takes once, in its type hints: the types of
the parameter model (:mod:`audit.core.params`, :mod:`audit.core.paramtypes`), with ranges as
``Annotated`` marks (:data:`Seed`, :data:`PositiveInt`, :data:`Seconds`...). :func:`checked`
reads them and refuses, before the function runs, an argument that does not fit, with an
:class:`~audit.core.errors.ArgumentError` naming the function and the argument: a string where
a list of names is expected (never read one character at a time), a negative or NaN time
limit, a population of 0, a path that is a number. The command line's options that feed the
same arguments use the same types (:func:`argument_problem`, through
:class:`anonaudit.cli.param_options.Checked`), so both refuse the same values with the same words.

A hint that names no type the model knows (``Any``, a model object) is not checked here: the
function reads such an argument itself and raises an :class:`~audit.core.errors.AnonauditError`
when it cannot.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from audit.core.errors import ArgumentError
from audit.core.params import EMPTY, resolve
from audit.core.paramtypes import Above, AtLeast, AtMost, NonNegativeInt, PositiveInt, describe, matches

__all__ = ["Seed", "PositiveInt", "NonNegativeInt", "Seconds", "argument_problem", "checked", "check_argument", "plain"]

#: A seed: a whole number from 0 to 2**32 - 1 (what every random generator the toolkit seeds accepts).
Seed = typing.Annotated[int, AtLeast(0), AtMost(2**32 - 1)]
#: A time limit in seconds: a finite number above 0.
Seconds = typing.Annotated[float, Above(0)]

F = TypeVar("F", bound=Callable[..., Any])


def plain(value: Any) -> Any:
    """``value`` with every numpy scalar in it (``np.int64``, ``np.float32``, ``np.bool_``: what
    pandas and numpy hand out) made the Python number or bool it holds, inside lists, tuples and
    dicts too; anything else as it is (the same object when nothing changed). A numpy scalar is
    then checked as its value is: ``np.int64(3)`` is a seed, ``np.bool_(True)`` is a bool and
    not a count, ``np.float64('nan')`` no time limit."""
    kind = type(value)
    if kind.__module__ == "numpy" and getattr(value, "shape", None) == () and callable(getattr(value, "item", None)):
        return value.item()
    if kind in (list, tuple):
        items = [plain(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else kind(items)
    if kind is dict:
        pairs = {plain(k): plain(v) for k, v in value.items()}
        same = len(pairs) == len(value) and all(a is b for a, b in zip(pairs, value)) \
            and all(pairs[k] is value[k] for k in value)
        return value if same else pairs
    return value


def argument_problem(value: Any, hint: Any) -> str:
    """What is wrong with ``value`` for an argument of type ``hint`` ("must be ...", or "" when
    it fits)."""
    if matches(value, hint, strict=True):
        return ""
    wrong = f"must be {describe(hint, none='None')}"
    if isinstance(value, str) and matches([value], hint, strict=True):  # never read a character at a time
        wrong += f", not one string: give [{value!r}]"
    return wrong


def _given(name: str, value: Any) -> str:
    shown = repr(value)
    return f"{name}={shown if len(shown) <= 60 else shown[:57] + '...'}"


def check_argument(where: str, name: str, value: Any, hint: Any) -> None:
    """Raise :class:`ArgumentError` when ``value`` does not fit ``hint``."""
    wrong = argument_problem(value, hint)
    if wrong:
        raise ArgumentError(f"{where}: {_given(name, value)}: {wrong}")


def checked(fn: F) -> F:
    """Check the arguments of each call of ``fn`` against its type hints before it runs (see the
    module docstring). An unknown keyword or a missing argument is an :class:`ArgumentError`
    too, never Python's ``TypeError``. Arguments left at their defaults are not checked."""
    sig = inspect.signature(fn)
    where = f"anonaudit.{fn.__qualname__}()"
    hints: dict[str, Any] = {}

    def hint_of(name: str) -> Any:
        if name not in hints:
            annotation = sig.parameters[name].annotation
            hints[name] = EMPTY if annotation is EMPTY else resolve(annotation, fn.__module__)
        return hints[name]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise ArgumentError(f"{where}: {exc}") from None
        for name, value in bound.arguments.items():  # np.int64(3) is 3: what pandas hands out
            bound.arguments[name] = plain(value)
        problems = []
        for name, value in bound.arguments.items():
            p = sig.parameters[name]
            if name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            wrong = argument_problem(value, hint_of(name))
            if wrong:
                problems.append(f"{_given(name, value)}: {wrong}")
        if problems:
            raise ArgumentError(f"{where}: " + "; ".join(problems))
        return fn(*bound.args, **bound.kwargs)

    return typing.cast(F, wrapper)
