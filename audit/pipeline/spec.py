"""The audit spec: what to audit, parsed and validated into frozen dataclasses.

An audit spec (YAML or TOML) names the data, the releases (files, or sanitizers to
run on the originals), the attacks and utility metrics with their parameters, the
models, sampling budgets, a seed and an output folder::

    title: Court decisions, June release
    seed: 0
    out: audit-out                       # relative to the spec file
    originals: data/originals.jsonl      # or {path: ..., format: csv, columns: {text: body}}
    background: data/background.jsonl
    corpora: {population: data/people.jsonl}   # extra corpora; a parameter "corpus:population" gets it
    releases:
      - {name: manual, path: releases/manual.json}     # span file, JSONL, ...
      - {name: ner, sanitizer: spacy_ner}
    attacks:
      - phrase_search
      - {name: span_guess, sample: 30, params: {max_spans: 200}}
    metrics: [tpi]
    models: {llm: qwen2.5-coder-1.5b, embedder: null}
    sampling: {documents: 100}           # per-release document budget; other keys are parameters
    budget: standard                     # quick | standard | full (audit.pipeline.budget)
    gate: {max: {trir: 0.1}, min: {tpi: 0.5}, on_point: false}
    executor: {kind: ray, address: auto, workers: 4}   # or just `local` (the default) / `ray`

Components are created only through the registry (``registry.create(kind, name,
**params)``); the spec's ``models.llm`` and ``models.embedder`` fill the parameters
``llm`` and ``embedder`` of every component (and sanitizer) that takes them, and each key of
``sampling`` other than ``documents`` fills the parameter of that name. The spec's ``seed`` is
the one seed of the audit: the runner hands it to each component that takes one as its keyword
``seed`` (:func:`audit.pipeline.calls.seed_keyword`), never through the parameters; a ``seed`` among a component's
parameters is refused. Beside ``name``, ``sample: N`` is the runner's budget (a seeded sample of
N documents of each release, the same ids for every release), ``budget`` sets each stage's
interval target and cheaper settings (:mod:`audit.pipeline.budget`), and ``params`` holds the
component's parameters; any other key is a parameter too (a component's own parameter
called ``sample`` must go under ``params``).

Every spec object is frozen: it is built complete by :func:`parse_spec`, and a variant is
made with :func:`dataclasses.replace`. Sequences are tuples; parameter mappings are plain
dicts that nobody mutates. The entries of ``releases``, ``attacks`` and ``metrics`` are parsed
in :mod:`audit.pipeline.entries`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.core.arguments import Seed, argument_problem
from audit.core.data import Corpus
from audit.core.errors import AnonauditError, DataError, Problem, Problems
from audit.core.files import read_text
from audit.core.paramtypes import check_params
from audit.io.detect import FORMATS
from audit.core.safejson import YAML_MAX_DEPTH, YAML_MAX_NODES, check_tree
from audit.core.registry import Registry, given_registry
from audit.pipeline.budget import check_budget
from audit.pipeline.executors import ExecutorSpec, parse_executor
from audit.pipeline.entries import (  # noqa: F401  (re-exported: the spec's public names)
    ComponentSpec,
    ReleaseSpec,
    parse_components,
    parse_releases,
)

#: Parameters that change how a component runs but not what it finds: left out of resume keys.
NOT_IN_KEY = frozenset({"progress", "num_threads", "cache", "use_cache", "cache_dir", "index_dir", "shards"})
TOP_KEYS = ("title", "seed", "out", "originals", "background", "corpora", "releases", "attacks", "metrics",
            "models", "sampling", "budget", "gate", "report", "executor")
CORPUS_REF = "corpus:"
#: How the provenance names data given in memory (no file): ``<in memory>: originals (DataFrame)``.
IN_MEMORY = "<in memory>"


# --------------------------------------------------------------------------- spec


@dataclass(frozen=True)
class InputSpec:
    """A corpus file and its format (``None`` = detected), or data in memory (``corpus``, from
    the API: used as it is, never written to disk; no ``path``)."""

    path: Path | None
    format: str | None = None
    #: The columns of a CSV, Parquet or JSONL file that hold the fields (``{"text": "body"}``).
    columns: Mapping[str, str] = field(default_factory=dict)
    corpus: Corpus | None = None
    label: str | None = None  # what the data in memory was, for messages: "originals (DataFrame)"

    @property
    def source(self) -> str:
        """The file, or ``<in memory>: LABEL``: how the provenance names the input."""
        return str(self.path) if self.corpus is None else f"{IN_MEMORY}: {self.label}"


@dataclass(frozen=True)
class GateSpec:
    max: Mapping[str, float] = field(default_factory=dict)
    min: Mapping[str, float] = field(default_factory=dict)
    on_upper_ci: bool = False  # accepted from older specs: the cautious bound is now the default
    on_point: bool = False  # compare point estimates instead of the cautious CI bound


@dataclass(frozen=True)
class AuditSpec:
    """A parsed and validated audit spec. Paths are absolute (resolved against the spec's folder)."""

    originals: InputSpec | None
    background: InputSpec | None = None
    corpora: Mapping[str, InputSpec] = field(default_factory=dict)
    releases: tuple[ReleaseSpec, ...] = ()
    attacks: tuple[ComponentSpec, ...] = ()
    metrics: tuple[ComponentSpec, ...] = ()
    llm: str | None = None
    embedder: str | None = None
    sample_documents: int | None = None
    sampling_params: Mapping[str, Any] = field(default_factory=dict)
    #: How much work the stages do: quick, standard, full (:mod:`audit.pipeline.budget`).
    budget: str = "standard"
    #: The audit's one seed, handed to each component as its keyword ``seed`` (:mod:`audit.pipeline.calls`).
    seed: Seed = 0
    #: Where the results are written; ``None``: nowhere, the results stay in memory (the API).
    out: Path | None = Path("audit-out")
    title: str = "Audit"
    gate: GateSpec = field(default_factory=GateSpec)
    report: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<spec>"
    #: Where per-document work runs (local by default); how it runs, never what it finds.
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)

    def __post_init__(self) -> None:
        for name in ("releases", "attacks", "metrics"):  # a list given by a caller is kept as a tuple
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def components(self) -> tuple[ComponentSpec, ...]:
        return self.attacks + self.metrics


def read_spec_file(path: str | os.PathLike) -> dict[str, Any]:
    """Read a YAML (``.yaml``/``.yml``) or TOML (``.toml``) file into a dict."""
    path = Path(path)
    src = str(path)
    text = read_text(path, "audit spec file")
    if path.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise DataError(Problem(src, f"invalid TOML: {exc}")) from None
        except RecursionError:
            raise DataError(Problem(src, "invalid TOML: nested too deeply")) from None
    else:
        import yaml

        try:
            data = yaml.load(text, Loader=_unique_keys_loader())  # noqa: S506 - a SafeLoader subclass
        except _DuplicateKey as exc:
            raise DataError(Problem(src, str(exc), line=exc.line)) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = None if mark is None else mark.line + 1
            what = getattr(exc, "problem", None) or str(exc)
            raise DataError(Problem(src, f"invalid YAML: {what}", line=line)) from None
        except RecursionError:
            raise DataError(Problem(src, "invalid YAML: nested too deeply")) from None
    check_tree(data, src, max_nodes=YAML_MAX_NODES, max_depth=YAML_MAX_DEPTH)  # depth, alias bombs, lone surrogates
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise DataError(Problem(src, f"the top level must be a mapping of keys, got {type(data).__name__}"))
    return data


class _DuplicateKey(Exception):
    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.line = line


def _unique_keys_loader():
    """A YAML SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last
    silently: a spec with two ``gate:`` sections would lose the first)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                try:
                    key = self.construct_object(key_node, deep=True)
                    hash(key)
                except Exception:
                    continue  # the base class reports unhashable keys
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise _DuplicateKey(f"duplicate key {key!r} (first given on line {seen[key]}); "
                                        "YAML would silently keep only the last", line)
                seen[key] = line
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def load_spec(path: str | os.PathLike, *, registry: Registry | None = None,
              overrides: Mapping[str, Any] | None = None) -> AuditSpec:
    """Read and validate an audit spec file; ``overrides`` replace top-level keys."""
    data = read_spec_file(path)
    data.update(overrides or {})
    return parse_spec(data, base=Path(path).resolve().parent, source=str(path), registry=registry)


def parse_spec(data: Mapping[str, Any], *, base: Path | None = None, source: str = "<spec>",
               registry: Registry | None = None, check_components: bool = True,
               in_memory: bool = False) -> AuditSpec:
    """Validate a spec mapping. Every problem is reported at once, each with its key path.
    ``in_memory``: without ``out``, the results stay in memory (``out=None``), not in ``audit-out``."""
    reg = given_registry(registry)
    base = base or Path.cwd()
    p = Problems(source)
    unknown = [k for k in data if k not in TOP_KEYS]
    for k in unknown:
        p.at(k, f"unknown key (known keys: {', '.join(TOP_KEYS)})")

    originals = _input(data.get("originals"), "originals", p, base)
    background = _input(data.get("background"), "background", p, base)
    corpora = _corpora(data.get("corpora") or {}, p, base)

    seed = data.get("seed", 0)
    if argument_problem(seed, Seed):  # the API's and the command line's own check
        p.at("seed", f"{argument_problem(seed, Seed)}, got {seed!r}")
        seed = 0
    llm, embedder = _models(data.get("models") or {}, p)
    _check_model_specs(llm, embedder, p)
    sample_documents, sampling_params = _sampling(data.get("sampling") or {}, p)
    budget = data.get("budget")
    try:
        budget = check_budget(budget)
    except AnonauditError as exc:
        p.at("budget", str(exc).split(": ", 1)[1])
        budget = "standard"

    releases = parse_releases(data.get("releases"), p, base, reg, check_components, originals is not None)
    attacks = parse_components(data.get("attacks"), "attacks", "attack", p, reg, check_components)
    metrics = parse_components(data.get("metrics"), "metrics", "metric", p, reg, check_components)
    if not attacks and not metrics and "attacks" not in unknown:
        p.at("attacks", "the audit names no attack and no metric: nothing to do")
    _check_references(attacks + metrics, corpora, sampling_params, p, reg, check_components)
    gate = _gate(data.get("gate") or {}, p)
    if check_components:
        _check_gate_names(gate, attacks + metrics, p)
    for comp in attacks + metrics:
        value = comp.params.get("llm")
        if isinstance(value, str):
            _check_model_specs(value, None, p, where=f"{comp.kind}s.{comp.name}.params.llm")

    report = _report(data.get("report") or {}, p)
    out = data.get("out", None if in_memory else "audit-out")
    if out is not None and (not isinstance(out, str) or not out):
        p.at("out", f"must be a folder path, got {out!r}")
        out = "audit-out"
    title = data.get("title", "Audit")
    if not isinstance(title, str) or not title.strip():
        p.at("title", f"must be a non-empty text, got {_shown(title)}")
        title = "Audit"
    executor, executor_problems = parse_executor(data.get("executor"))
    for where, message in executor_problems:
        p.at(where, message)
    p.raise_if_any()
    return AuditSpec(originals=originals, background=background, corpora=corpora, releases=tuple(releases),
                     attacks=tuple(attacks), metrics=tuple(metrics), llm=llm, embedder=embedder,
                     sample_documents=sample_documents, sampling_params=sampling_params, budget=budget, seed=seed,
                     out=None if out is None else (base / out).expanduser(), title=str(title), gate=gate, report=dict(report),
                     source=source, executor=executor)


def _report(report: Any, p: Problems) -> Mapping[str, Any]:
    """The spec's ``report`` section, checked (``{}`` when it is not a mapping)."""
    if not isinstance(report, Mapping):
        p.at("report", "must be a mapping (shareable, max_documents, notes)")
        return {}
    for k in set(report) - {"shareable", "max_documents", "notes"}:
        p.at(f"report.{k}", "unknown key (use shareable, max_documents, notes)")
    notes = report.get("notes")
    if notes is not None and not (isinstance(notes, list) and all(isinstance(n, str) for n in notes)):
        p.at("report.notes", "must be a list of sentences shown beside the verdict")
    most = report.get("max_documents")
    if most is not None and (not isinstance(most, int) or isinstance(most, bool) or most < 0):
        p.at("report.max_documents", f"must be a whole number, 0 or more, got {_shown(most)}")
    if not isinstance(report.get("shareable", False), bool):
        p.at("report.shareable", f"must be true or false, got {_shown(report['shareable'])}")
    return report


def _shown(value: Any) -> str:
    """A value for a message: its type when it is a list or mapping (which may be huge), else its repr."""
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)}"
    if isinstance(value, Mapping):
        return f"a mapping of {len(value)} keys"
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _input(value: Any, where: str, p: Problems, base: Path, required: bool = False) -> InputSpec | None:
    """A corpus file given as ``PATH`` or ``{path, format, columns}``, resolved against ``base``."""
    from audit.pipeline.entries import columns_problem

    if value is None:
        if required:
            p.at(where, "is required (a file path)")
        return None
    if isinstance(value, InputSpec):  # a source the API made (data in memory, or a file): as it is
        return value
    fmt, columns = None, {}
    if isinstance(value, Mapping):
        extra = set(value) - {"path", "format", "columns"}
        if extra:
            p.at(where, f"unknown key(s) {', '.join(sorted(extra))} (use path, format, columns)")
        fmt = value.get("format")
        if fmt is not None and fmt not in FORMATS:
            p.at(f"{where}.format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}"[:200])
            fmt = None
        columns = value.get("columns") or {}
        if columns_problem(columns):
            p.at(f"{where}.columns", columns_problem(columns))
            columns = {}
        value = value.get("path")
    if not isinstance(value, str) or not value:
        p.at(where, f"must be a file path, got {value!r}")
        return None
    full = (base / value).expanduser()
    if not full.exists():
        p.at(where, f"file not found: {full}")
    return InputSpec(full, fmt, dict(columns))


def _corpora(raw: Any, p: Problems, base: Path) -> dict[str, InputSpec]:
    """The extra corpora, ``{NAME: PATH}``."""
    corpora: dict[str, InputSpec] = {}
    if not isinstance(raw, Mapping):
        p.at("corpora", "must be a mapping NAME: PATH")
    else:
        for k, v in raw.items():
            spec = _input(v, f"corpora.{k}", p, base, required=True)
            if spec is not None:
                corpora[str(k)] = spec
    return corpora


def _models(models: Any, p: Problems) -> tuple[Any, Any]:
    """``(llm, embedder)`` of the ``models`` section."""
    llm = embedder = None
    if not isinstance(models, Mapping):
        p.at("models", "must be a mapping with keys llm, embedder")
    else:
        for k in set(models) - {"llm", "embedder"}:
            p.at(f"models.{k}", "unknown key (use llm, embedder)")
        llm, embedder = models.get("llm"), models.get("embedder")
        for k, v in (("llm", llm), ("embedder", embedder)):
            if v is not None and not isinstance(v, str):
                p.at(f"models.{k}", f"must be a string (a model name, path or URL), got {v!r}")
    return llm, embedder


def _check_model_specs(llm: Any, embedder: Any, p: Problems, where: str = "models.llm") -> None:
    """Resolve the LLM and embedder specs now (without loading anything), so an unknown model
    is found before the run, not when the first component that needs it starts. ``default``
    and ``scorer`` depend on what is installed and are resolved by the components that use them."""
    from audit.models import specs

    if isinstance(llm, str) and llm.strip():
        try:
            specs.check_llm_spec(llm)
        except specs.ModelError as exc:
            p.at(where, str(exc))
    if isinstance(embedder, str) and embedder.strip() and embedder.strip() not in ("default", "minilm"):
        try:
            specs.embedder_path(embedder)
        except specs.ModelError as exc:
            p.at("models.embedder", str(exc))


def _check_gate_names(gate: GateSpec, components: Sequence[ComponentSpec], p: Problems) -> None:
    """Every gate threshold must name a result one of the audit's components writes: the
    component's name, or ``NAME.PART`` for its further results (``trir.top5``)."""
    from audit.core.registry import normalise

    known = {normalise(c.name) for c in components}
    for side, limits in (("max", gate.max), ("min", gate.min)):
        for name in limits:
            if normalise(name).split(".", 1)[0] not in known:
                p.at(f"gate.{side}.{name}", "no attack or metric of this audit writes this result (it runs: "
                                            f"{', '.join(sorted(known)) or 'none'}); the gate would fail only "
                                            "after the whole audit")


def _sampling(sampling: Any, p: Problems) -> tuple[int | None, dict[str, Any]]:
    """``(documents, parameters)`` of the ``sampling`` section: the per-release document budget,
    and every other key as a parameter value."""
    sample_documents = None
    sampling_params: dict[str, Any] = {}
    if not isinstance(sampling, Mapping):
        p.at("sampling", "must be a mapping (documents: N, or parameter: value)")
    else:
        for k, v in sampling.items():
            if k == "documents":
                if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                    p.at("sampling.documents", f"must be a positive integer, got {v!r}")
                else:
                    sample_documents = v
            else:
                sampling_params[str(k)] = v
    return sample_documents, sampling_params


def _check_references(components: Sequence[ComponentSpec], corpora: Mapping[str, InputSpec],
                      sampling_params: Mapping[str, Any], p: Problems, reg: Registry, check: bool) -> None:
    """Corpus references and sampling parameters must point somewhere."""
    accepted: set[str] = set()
    for comp in components:
        cls = _get_class(reg, comp.kind, comp.name) if check else None
        if cls is not None:
            accepted |= set(cls.param_names())
            given = {k: v for k, v in sampling_params.items() if k in cls.param_names() and k not in comp.params}
            for k, wrong in check_params(cls, given).items():
                p.at(f"sampling.{k}", f"{comp.kind} {comp.name!r}: parameter {k!r} {wrong}")
        for k, v in comp.params.items():
            if isinstance(v, str) and v.startswith(CORPUS_REF) and v[len(CORPUS_REF):] not in corpora:
                known = ", ".join(corpora) or "none declared under corpora"
                p.at(f"{comp.kind}s.{comp.name}.params.{k}", f"unknown corpus {v!r} (known: {known})")
    if check:
        for k in sampling_params:
            if k not in accepted:
                p.at(f"sampling.{k}", "no configured attack or metric takes this parameter "
                                       f"(they take: {', '.join(sorted(accepted)) or 'none'})")


def _get_class(reg: Registry, kind: str, name: str):
    try:
        return reg.get(kind, name)
    except AnonauditError:
        return None


def _gate(raw_gate: Any, p: Problems) -> GateSpec:
    """The ``gate`` section: ``max`` and ``min`` thresholds per result, and ``on_point``
    (``on_upper_ci`` is still accepted: the cautious bound is now the default)."""
    limits: dict[str, dict[str, float]] = {"max": {}, "min": {}}
    on_upper_ci = on_point = False
    if not isinstance(raw_gate, Mapping):
        p.at("gate", "must be a mapping with keys max, min, on_point")
    else:
        for k in set(raw_gate) - {"max", "min", "on_upper_ci", "on_point"}:
            p.at(f"gate.{k}", "unknown key (use max, min, on_point)")
        for side in ("max", "min"):
            section = raw_gate.get(side) or {}
            if not isinstance(section, Mapping):
                p.at(f"gate.{side}", "must be a mapping RESULT: VALUE")
                continue
            for k, v in section.items():
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    p.at(f"gate.{side}.{k}", f"must be a number, got {v!r}")
                elif not 0.0 <= float(v) <= 1.0:
                    p.at(f"gate.{side}.{k}", f"must be between 0 and 1 (risks and utilities are shares), got {v!r}")
                else:
                    limits[side][str(k)] = float(v)
        on_upper_ci = raw_gate.get("on_upper_ci", False)
        on_point = raw_gate.get("on_point", False)
        for k, v in (("on_upper_ci", on_upper_ci), ("on_point", on_point)):
            if not isinstance(v, bool):
                p.at(f"gate.{k}", f"must be true or false, got {_shown(v)}")
        on_upper_ci, on_point = on_upper_ci is True, on_point is True
    return GateSpec(max=limits["max"], min=limits["min"], on_upper_ci=on_upper_ci, on_point=on_point)
