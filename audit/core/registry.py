"""One registry for attacks, sanitizers, metrics and detectors.

As in lm-evaluation-harness: components register themselves with a decorator,
and built-in and third-party plugins alike are declared as entry points
(``anonaudit.attacks``, ``anonaudit.sanitizers``, ``anonaudit.metrics``,
``anonaudit.detectors``) that are
imported lazily, only when a name is looked up or listed. The core never imports
an attacker or defender module by name.

A third-party package adds an attack with one entry point::

    [project.entry-points."anonaudit.attacks"]
    my_attack = "my_package.attack:MyAttack"
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TypeVar

from audit.core.errors import AnonauditError
from audit.core.interfaces import Attack, Component, Detector, Metric, Sanitizer
from audit.core.names import normalise

KIND_BASES: dict[str, type[Component]] = {"attack": Attack, "sanitizer": Sanitizer, "metric": Metric,
                                          "detector": Detector}
T = TypeVar("T", bound=type[Component])


@dataclass
class Registry:
    """Maps (kind, name) to a component class; entry points load on first use."""

    _classes: dict[str, dict[str, type[Component]]] = field(default_factory=lambda: {k: {} for k in KIND_BASES})
    _lazy: dict[str, dict[str, str]] = field(default_factory=lambda: {k: {} for k in KIND_BASES})
    _entry_points_loaded: bool = False

    def register(self, kind: str, name: str | None = None) -> Callable[[T], T]:
        """Class decorator: ``@registry.register("attack")`` (name defaults to ``cls.name``)."""
        base = self._base(kind)

        def deco(cls: T) -> T:
            if not (isinstance(cls, type) and issubclass(cls, base)):
                raise TypeError(f"{cls!r} must subclass {base.__name__} to be registered as {kind!r}")
            key = normalise(name or cls.name)
            if not key:
                raise TypeError(f"{cls.__name__} has no registry name")
            existing = self._classes[kind].get(key)
            if existing is not None and existing is not cls and existing.__qualname__ != cls.__qualname__:
                raise ValueError(f"{kind} {key!r} is already registered to {existing.__qualname__}")
            self._classes[kind][key] = cls
            return cls

        return deco

    def add_lazy(self, kind: str, name: str, target: str) -> None:
        """Register ``"module:object"`` to be imported when first used."""
        self._base(kind)
        self._lazy[kind].setdefault(normalise(name), target)

    def names(self, kind: str) -> list[str]:
        self._load_entry_points()
        return sorted(set(self._classes[kind]) | set(self._lazy[kind]))

    def get(self, kind: str, name: str) -> type[Component]:
        self._load_entry_points()
        key = normalise(name)
        cls = self._classes[kind].get(key)
        if cls is not None:
            return cls
        target = self._lazy[kind].get(key)
        if target is None:
            known = ", ".join(self.names(kind)) or "none installed"
            raise AnonauditError(f"unknown {kind} {name!r} (known: {known})")
        cls = self._import(target, kind, key)
        self._classes[kind][key] = cls
        return cls

    def create(self, kind: str, name: str, **params) -> Component:
        cls = self.get(kind, name)
        unknown = set(params) - set(cls.param_names())
        if unknown:
            raise AnonauditError(
                f"{kind} {name!r} has no parameter(s) {', '.join(sorted(unknown))} "
                f"(it takes: {', '.join(cls.param_names()) or 'none'})"
            )
        return cls(**params)

    def _base(self, kind: str) -> type[Component]:
        try:
            return KIND_BASES[kind]
        except KeyError:
            raise ValueError(f"unknown registry kind {kind!r} (use one of {', '.join(KIND_BASES)})") from None

    def _import(self, target: str, kind: str, key: str) -> type[Component]:
        module_name, _, attr = target.partition(":")
        try:
            obj = importlib.import_module(module_name)
            for part in attr.split(".") if attr else ():
                obj = getattr(obj, part)
        except ImportError as exc:
            raise AnonauditError(f"{kind} {key!r} could not be loaded from {target}: {exc}") from exc
        except AttributeError:
            raise AnonauditError(f"{kind} {key!r}: {target} does not exist") from None
        base = self._base(kind)
        if not (isinstance(obj, type) and issubclass(obj, base)):
            raise AnonauditError(f"{kind} {key!r}: {target} is not a {base.__name__} subclass")
        return obj

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        for kind in KIND_BASES:
            for ep in entry_points(group=f"anonaudit.{kind}s"):
                self.add_lazy(kind, ep.name, ep.value)


#: The registry of this process. Components register into it at import time.
registry = Registry()
register = registry.register


def given_registry(value: object, where: str = "registry=") -> Registry:
    """The registry a caller gave (``registry=`` of the API, the runner): the process' one for
    None, the :class:`Registry` itself, or an :class:`~audit.core.errors.ArgumentError` naming
    ``where`` for anything else (never an AttributeError from deep inside)."""
    from audit.core.errors import ArgumentError

    if value is None:
        return registry
    if not isinstance(value, Registry):
        raise ArgumentError(f"{where}: must be an anonaudit Registry (audit.core.registry.Registry) or None, "
                            f"got {type(value).__name__}")
    return value
