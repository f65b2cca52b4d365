"""What an audit is, as one typed, frozen object: :class:`Spec` (issue 71, item 4).

Built in Python::

    spec = anonaudit.Spec(originals=df, releases={"labels": df2}, attacks=["phrase_search"],
                          metrics=["rouge"], budget=anonaudit.Budget("quick"), seed=3,
                          models=anonaudit.Models(llm="qwen2.5-0.5b"))
    anonaudit.audit(spec)
    anonaudit.audit(spec.replace(seed=4))

or loaded from a YAML (or TOML) file with the audit spec's keys (docs/how-to/run-an-audit.md):
``anonaudit.Spec.load("audit.yaml")``, its paths read from the file's folder. The Python API's
``audit``, ``attack``, ``utility`` and ``bench`` take one; a few keywords (``originals``,
``releases``, ``attacks``, ``metrics``, ``seed``) stand in for its fields in a short call. What a
run does with its results (``out``, ``force``, ``progress``, ``on_error``) is not the audit, so it
is an argument of the call, not a field; how the command line names its run (``command``) is not
the API's at all.

The seed is one :data:`~audit.core.arguments.Seed` from here to every component: this field, the
parsed spec's ``seed``, the component's ``seed`` parameter.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from audit.core.arguments import PositiveInt, Seed, check_argument
from audit.core.errors import AnonauditError

#: The budget levels (docs/how-to/budgets.md); ``None``: the spec file's, else ``standard``.
Level = Literal["quick", "standard", "full"]


@dataclass(frozen=True)
class Models:
    """The models every component that takes one is given: ``llm`` (a model spec: an embedded
    model's name, ``llamacpp:PATH``, ``server:URL``...) and ``embedder`` (a sentence embedder).
    ``None``: each component's default."""

    llm: str | None = None
    embedder: str | None = None

    def __post_init__(self) -> None:
        for name in ("llm", "embedder"):
            check_argument("anonaudit.Models", name, getattr(self, name), str | None)


@dataclass(frozen=True)
class Budget:
    """How much work the stages do. ``level``: ``"quick"`` (a CI gate: intervals of ±0.10),
    ``"standard"`` (±0.05, the default) or ``"full"`` (every document). ``sample``: a seeded sample of
    this many documents per release (the same ids for each). ``time_limit``: minutes the audit may
    take (each stage calibrated first; an error with the estimate when it exceeds the limit), then
    enforced by a SIGALRM timer: run from the main thread of a POSIX process, as a limit asked from
    another thread or on Windows is refused before any work (an AnonauditError)."""

    level: Level | None = None
    sample: PositiveInt | None = None
    time_limit: float | None = None

    def __post_init__(self) -> None:
        from audit.pipeline.budget import check_budget
        from audit.pipeline.estimate import check_limit

        if self.level is not None:
            check_budget(self.level, "anonaudit.Budget(level=...)")
        check_argument("anonaudit.Budget", "sample", self.sample, PositiveInt | None)
        check_limit(self.time_limit, "anonaudit.Budget(time_limit=...)")


@dataclass(frozen=True)
class Columns:
    """The columns of tables (and of CSV, Parquet or JSONL files) that hold each field."""

    text: str = "text"
    id: str = "id"  # noqa: A003
    subject: str = "subject"
    spans: str = "spans"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            check_argument("anonaudit.Columns", f.name, getattr(self, f.name), str)


@dataclass(frozen=True)
class Spec:
    """An audit: what is attacked and measured, and how.

    releases: ``{name: data}`` (a file, a DataFrame, a list of dicts, a ``Dataset``, a ``Release``,
        or ``{"sanitizer": NAME, "params": {...}}`` run on the originals), or a list of files and
        Release objects.
    attacks, metrics: names, ``{"name": ..., "params": {...}, "sample": N}`` entries, or
        ``{name: {params}}``.
    originals: the private documents (as a release's data); background: public documents with a
        ``subject`` (what TRIR's adversary knows); corpora: further corpora a parameter refers to
        as ``"corpus:NAME"``.
    budget (:class:`Budget`), seed (one integer for every component), models (:class:`Models`),
    columns (:class:`Columns`), title (the report's), executor (``"local"``, ``"ray"`` or
    ``{"kind": "ray", "address": ..., "workers": N}``); base: the folder relative paths are read
    from (the spec file's when loaded; default the working directory).
    """

    releases: Any = None
    attacks: Any = None
    metrics: Any = None
    originals: Any = None
    background: Any = None
    corpora: Mapping[str, Any] | None = None
    budget: Budget = field(default_factory=Budget)
    seed: Seed = 0
    models: Models = field(default_factory=Models)
    columns: Columns = field(default_factory=Columns)
    title: str | None = None
    executor: Any = None
    base: Path | None = None

    def __post_init__(self) -> None:
        for name, hint in (("seed", Seed), ("title", str | None), ("budget", Budget), ("models", Models),
                           ("columns", Columns), ("corpora", Mapping | None), ("base", Path | None)):
            _check_field(name, getattr(self, name), hint)

    def replace(self, **changes: Any) -> Spec:
        """A copy with ``changes`` (checked as a new spec is)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Spec:
        """The spec in a YAML or TOML file, its relative paths read from the file's folder. A key
        that is not the audit's (``out``, ``gate``, ``report``: what ``anonaudit.run(path)`` does
        with its results) is refused, naming the file."""
        from audit.pipeline.spec import read_spec_file

        data = read_spec_file(path)
        return from_mapping(data, base=Path(path).expanduser().resolve().parent, source=str(path))


def _check_field(name: str, value: Any, hint: Any) -> None:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            raise AnonauditError(f"anonaudit.Spec: {name} must be an anonaudit.{hint.__name__}, got {value!r}")
        return
    check_argument("anonaudit.Spec", name, value, hint)


#: The keys of a spec file that a :class:`Spec` holds, and those that belong to a run of it.
SPEC_KEYS = ("title", "seed", "originals", "background", "corpora", "releases", "attacks", "metrics", "models",
             "sampling", "budget", "executor")
RUN_KEYS = ("out", "gate", "report")


def from_mapping(data: Mapping[str, Any], *, base: Path, source: str) -> Spec:
    """A :class:`Spec` from an audit spec's mapping (a file's): ``models``, ``sampling`` and
    ``budget`` to their typed fields."""
    if not isinstance(data, Mapping):
        raise AnonauditError(f"{source}: an audit spec is a mapping of keys, got {type(data).__name__}")
    wrong = [k for k in data if k not in SPEC_KEYS]
    if wrong:
        run = [k for k in wrong if k in RUN_KEYS]
        raise AnonauditError(f"{source}: {', '.join(map(str, wrong))}: not part of an anonaudit.Spec (its keys: "
                             f"{', '.join(SPEC_KEYS)})" + (f"; {', '.join(run)}: a run's, anonaudit.run({source!r})"
                                                           if run else ""))
    models = data.get("models") or {}
    sampling = data.get("sampling") or {}
    if not isinstance(models, Mapping) or set(models) - {"llm", "embedder"}:
        raise AnonauditError(f"{source}: models: expected {{llm: ..., embedder: ...}}, got {models!r}")
    if not isinstance(sampling, Mapping) or set(sampling) - {"documents"}:
        raise AnonauditError(f"{source}: sampling: expected {{documents: N}}, got {sampling!r}")
    try:
        return Spec(releases=data.get("releases"), attacks=data.get("attacks"), metrics=data.get("metrics"),
                    originals=data.get("originals"), background=data.get("background"),
                    corpora=data.get("corpora"), seed=data.get("seed", 0), title=data.get("title"),
                    executor=data.get("executor"), base=base,
                    budget=Budget(level=data.get("budget"), sample=sampling.get("documents")),
                    models=Models(llm=models.get("llm"), embedder=models.get("embedder")))
    except AnonauditError as exc:
        raise AnonauditError(f"{source}: {exc}") from None


def spec_mapping(spec: Spec) -> dict[str, Any]:
    """The audit spec's mapping of ``spec`` (what the pipeline parses), data in memory as it is;
    the seed and the time limit are not in it: the caller hands them to the run as they are."""
    from anonaudit.inputs import columns_of, component_entries, input_entry, release_entries

    c = spec.columns
    columns = columns_of(c.text, c.id, c.subject, c.spans)
    data: dict[str, Any] = {"models": {"llm": spec.models.llm, "embedder": spec.models.embedder},
                            "releases": release_entries(spec.releases, columns),
                            "attacks": component_entries(spec.attacks, "attacks"),
                            "metrics": component_entries(spec.metrics, "metrics")}
    for role, value in (("originals", spec.originals), ("background", spec.background)):
        entry = input_entry(value, role, columns)
        if entry is not None:
            data[role] = entry
    if spec.corpora:
        data["corpora"] = {str(k): input_entry(v, f"corpora[{k!r}]", columns) for k, v in spec.corpora.items()}
    optional = {"budget": spec.budget.level, "title": spec.title, "executor": spec.executor,
                "sampling": None if spec.budget.sample is None else {"documents": spec.budget.sample}}
    data.update({k: v for k, v in optional.items() if v is not None})
    return data


__all__ = ["Spec", "Budget", "Models", "Columns", "Level"]
