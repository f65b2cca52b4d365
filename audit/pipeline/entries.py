"""The audit spec's lists, entry by entry: the releases (files, or sanitizers run on the
originals) and the components (attacks, metrics) with their parameters, each checked against
the registry; every problem is recorded with its key path."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.core.data import Release, release_name_problem
from audit.core.errors import AnonauditError, Problems
from audit.core.paramtypes import check_params
from audit.core.registry import Registry, normalise
from audit.io.detect import FORMATS

COMPONENT_KEYS = ("name", "params", "sample")
RELEASE_KEYS = ("name", "path", "format", "columns", "sanitizer", "params", "aligned")


@dataclass(frozen=True)
class ReleaseSpec:
    """A release: a file (``path``, with ``name`` and ``format`` kept apart from it: loaded by
    :func:`audit.io.loaders.load_release_file`), a ``sanitizer`` run on the originals, or a
    release given in memory (``release``, through the API: audited as it is, never written to disk)."""

    name: str | None
    path: Path | None = None
    format: str | None = None
    sanitizer: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    #: The columns of a CSV, Parquet or JSONL file that hold the fields (``{"text": "body"}``).
    columns: Mapping[str, str] = field(default_factory=dict)
    #: The release, when it was given in memory rather than as a file or a sanitizer.
    release: Release | None = None
    #: What the data in memory was, for messages and the provenance (``"releases['a'] (DataFrame)"``).
    label: str | None = None


def columns_problem(columns: Any) -> str:
    """What is wrong with a ``columns`` mapping ``{field: column}`` ("" when nothing)."""
    from audit.io.frames import check_columns

    if not isinstance(columns, Mapping):
        return "must be a mapping FIELD: COLUMN (fields: id, text, subject, spans)"
    try:
        check_columns(columns)
    except AnonauditError as exc:
        return str(exc)
    return ""


@dataclass(frozen=True)
class ComponentSpec:
    """An attack or metric with its parameters and optional document budget."""

    kind: str  # "attack" | "metric"
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    sample: int | None = None

    @property
    def label(self) -> str:
        return f"{self.kind}:{normalise(self.name)}"


def parse_components(raw: Any, key: str, kind: str, p: Problems, reg: Registry,
                      check: bool) -> list[ComponentSpec]:
    if raw is None:
        return []
    items: list[tuple[str, Any]] = []
    if isinstance(raw, Mapping):  # {name: {params...}}
        items = [(f"{key}.{n}", {"name": n, **(v or {})} if isinstance(v, Mapping) or v is None else v)
                 for n, v in raw.items()]
    elif isinstance(raw, list):
        items = [(f"{key}[{i}]", v) for i, v in enumerate(raw)]
    else:
        p.at(key, f"must be a list of {kind} names or mappings, got {type(raw).__name__}")
        return []
    out: list[ComponentSpec] = []
    seen: set[str] = set()
    for where, item in items:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            p.at(where, f"must be a {kind} name or a mapping with a 'name', got {item!r}")
            continue
        name = item["name"]
        raw_params = item.get("params") or {}
        if isinstance(raw_params, Mapping):
            params = dict(raw_params)
        else:
            p.at(f"{where}.params", "must be a mapping of parameter: value")
            params = {}
        for k, v in item.items():  # inline parameters are allowed beside name/sample
            if k not in COMPONENT_KEYS:
                params[k] = v
        _no_seed(params, where, p)
        sample = item.get("sample")
        if sample is not None and (not isinstance(sample, int) or isinstance(sample, bool) or sample < 1):
            p.at(f"{where}.sample", f"must be a positive integer (documents per release), got {sample!r}")
            sample = None
        if normalise(name) in seen:
            p.at(where, f"{kind} {name!r} is listed twice")
        seen.add(normalise(name))
        if check:
            try:
                cls = reg.get(kind, name)
            except AnonauditError as exc:
                p.at(where, str(exc))
                continue
            accepted = cls.param_names()
            for k in params:
                if k not in accepted:
                    p.at(f"{where}.params.{k}",
                          f"{kind} {name!r} has no parameter {k!r} (it takes: {', '.join(accepted) or 'none'})")
            for k, wrong in check_params(cls, params).items():
                p.at(f"{where}.params.{k}", f"{kind} {name!r}: parameter {k!r} {wrong}")
        out.append(ComponentSpec(kind, name, params, sample))
    return out


def _no_seed(params: dict[str, Any], where: str, p: Problems) -> None:
    """A ``seed`` among a component's parameters is refused (and dropped, so that the other
    problems are still found): the seed is the audit's, one for every component."""
    if "seed" in params:
        p.at(f"{where}.params.seed", f"{params.pop('seed')!r}: the seed is the audit's, one for every component: "
                                     "give it as the spec's top-level seed")


def _check_sanitizer(san: str, params: Mapping[str, Any], where: str, p: Problems, reg: Registry) -> None:
    """Whether release ``where``'s sanitizer is registered and takes ``params`` as given."""
    try:
        cls = reg.get("sanitizer", san)
    except AnonauditError as exc:
        p.at(f"{where}.sanitizer", str(exc))
        return
    accepted = cls.param_names()
    for k in params:
        if k not in accepted:
            p.at(f"{where}.params.{k}", f"sanitizer {san!r} has no parameter {k!r} "
                                         f"(it takes: {', '.join(accepted) or 'none'})")
    for k, wrong in check_params(cls, params).items():
        p.at(f"{where}.params.{k}", f"sanitizer {san!r}: parameter {k!r} {wrong}")


def _release_items(raw: Any, p: Problems) -> list[Any]:
    """The spec's ``releases`` as a list of entries (a mapping ``{name: path-or-mapping}`` too);
    empty, with the problem said, when it is missing, empty or not a list."""
    if raw is None:
        p.at("releases", "is required: a list of release files or sanitizers")
        return []
    if isinstance(raw, Mapping):  # {name: path-or-mapping}
        raw = [{"name": k, **(v if isinstance(v, Mapping) else {"path": v})} for k, v in raw.items()]
    if not isinstance(raw, list):
        p.at("releases", "must be a list")
        return []
    if not raw:
        p.at("releases", "is empty: the audit would audit nothing; name at least one release file or sanitizer")
    return raw


def parse_releases(raw: Any, p: Problems, base: Path, reg: Registry, check: bool,
                    have_originals: bool) -> list[ReleaseSpec]:
    out: list[ReleaseSpec] = []
    for i, item in enumerate(_release_items(raw, p)):
        where = f"releases[{i}]"
        if isinstance(item, str):
            item = {"path": item}
        if isinstance(item, ReleaseSpec):  # a source the API made (a release in memory): as it is
            wrong = release_name_problem(item.name) if item.name is not None else ""
            if wrong:
                p.at(f"{where}.name", wrong)
            out.append(item)
            continue
        if not isinstance(item, Mapping):
            p.at(where, f"must be a file path or a mapping, got {item!r}")
            continue
        for k in set(item) - set(RELEASE_KEYS):
            p.at(f"{where}.{k}", f"unknown key (use {', '.join(RELEASE_KEYS)})")
        fmt = item.get("format")
        if fmt is not None and fmt not in FORMATS:
            p.at(f"{where}.format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}"[:200])
        path, san = item.get("path"), item.get("sanitizer")
        if (path is None) == (san is None):
            p.at(where, "give exactly one of 'path' (a release file) or 'sanitizer' (run on the originals)")
            continue
        raw_params = item.get("params") or {}
        if not isinstance(raw_params, Mapping):
            p.at(f"{where}.params", "must be a mapping of parameter: value")
            raw_params = {}
        params = dict(raw_params)
        _no_seed(params, where, p)
        name = item.get("name")
        if name is not None:
            wrong = release_name_problem(name)
            if wrong:
                p.at(f"{where}.name", wrong)
                name = None
        columns = item.get("columns") or {}
        if columns_problem(columns):
            p.at(f"{where}.columns", columns_problem(columns))
            columns = {}
        if path is not None:
            full = (base / str(path)).expanduser()
            if not full.exists():
                p.at(f"{where}.path", f"file not found: {full}")
            out.append(ReleaseSpec(name=name, path=full, format=item.get("format"), params=params,
                                   columns=dict(columns)))
        else:
            san = str(san)
            if not have_originals:
                p.at(f"{where}.sanitizer", "a sanitizer needs 'originals' to run on")
            if check:
                _check_sanitizer(san, params, where, p, reg)
            out.append(ReleaseSpec(name=name or normalise(san), format=item.get("format"), sanitizer=san,
                                   params=params))
    names = [r.name for r in out if r.name]
    for n in {n for n in names if names.count(n) > 1}:
        p.at("releases", f"two releases are named {n!r}")
    return out
