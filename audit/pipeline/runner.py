"""The audit runner: one spec file in, every attack and metric on every release out.

An audit spec (YAML or TOML) names the data, the releases (files, or sanitizers to
run on the originals), the attacks and utility metrics with their parameters, the
models, sampling budgets, a seed and an output folder::

    title: Court decisions, June release
    seed: 0
    out: audit-out                       # relative to the spec file
    originals: data/originals.jsonl      # or {path: ..., format: jsonl}
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
    gate: {max: {trir: 0.1}, min: {tpi: 0.5}, on_upper_ci: false}

Components are created only through the registry (``registry.create(kind, name,
**params)``); the spec's ``seed``, ``models.llm`` and ``models.embedder`` fill the
parameters ``seed``, ``llm`` and ``embedder`` of every component that takes them, and
each key of ``sampling`` other than ``documents`` fills the parameter of that name.
Beside ``name``, ``sample: N`` is the runner's budget (a seeded sample of N documents
of each release, the same ids for every release) and ``params`` holds the component's
parameters; any other key is a parameter too (a component's own parameter called
``sample`` must go under ``params``).

Resuming: ``OUT/results.json`` is rewritten atomically after every (component,
release) pair, with a key per pair (component, parameters, release and the
fingerprints of every input) under ``provenance["pairs"]``. A re-run skips every
pair whose key is there and whose results are present, so an interrupted audit
recomputes nothing it finished (and ``fit`` runs only when some pair is missing).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import random
import sys
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit import __version__
from audit.core.data import Corpus, Document, Release, Scenario, Span
from audit.core.errors import AnonauditError, DataError, Problem, Problems, read_text
from audit.core.registry import Registry, normalise
from audit.core.registry import registry as default_registry
from audit.core.results import Result, ResultsFile

#: Component parameters the runner fills from the spec when the spec does not set them.
INJECTED = {"seed": "seed", "llm": "models.llm", "embedder": "models.embedder"}
#: Parameters that change how a component runs but not what it finds: left out of resume keys.
NOT_IN_KEY = frozenset({"progress", "num_threads", "cache", "use_cache", "cache_dir", "index_dir"})
TOP_KEYS = ("title", "seed", "out", "originals", "background", "corpora", "releases", "attacks", "metrics",
            "models", "sampling", "gate", "report")
COMPONENT_KEYS = ("name", "params", "sample")
RELEASE_KEYS = ("name", "path", "format", "sanitizer", "params", "aligned")
CORPUS_REF = "corpus:"


# --------------------------------------------------------------------------- spec


@dataclass
class InputSpec:
    """A corpus file and its format (``None`` = detected)."""

    path: Path
    format: str | None = None


@dataclass
class ReleaseSpec:
    """A release: a file, or a sanitizer run on the originals."""

    name: str | None
    path: Path | None = None
    format: str | None = None
    sanitizer: str | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class ComponentSpec:
    """An attack or metric with its parameters and optional document budget."""

    kind: str  # "attack" | "metric"
    name: str
    params: dict[str, Any] = field(default_factory=dict)
    sample: int | None = None

    @property
    def label(self) -> str:
        return f"{self.kind}:{normalise(self.name)}"


@dataclass
class GateSpec:
    max: dict[str, float] = field(default_factory=dict)
    min: dict[str, float] = field(default_factory=dict)
    on_upper_ci: bool = False


@dataclass
class AuditSpec:
    """A parsed and validated audit spec. Paths are absolute (resolved against the spec's folder)."""

    originals: InputSpec | None
    background: InputSpec | None = None
    corpora: dict[str, InputSpec] = field(default_factory=dict)
    releases: list[ReleaseSpec] = field(default_factory=list)
    attacks: list[ComponentSpec] = field(default_factory=list)
    metrics: list[ComponentSpec] = field(default_factory=list)
    llm: str | None = None
    embedder: str | None = None
    sample_documents: int | None = None
    sampling_params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    out: Path = Path("audit-out")
    title: str = "Audit"
    gate: GateSpec = field(default_factory=GateSpec)
    report: dict[str, Any] = field(default_factory=dict)
    source: str = "<spec>"

    @property
    def components(self) -> list[ComponentSpec]:
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
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = None if mark is None else mark.line + 1
            what = getattr(exc, "problem", None) or str(exc)
            raise DataError(Problem(src, f"invalid YAML: {what}", line=line)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise DataError(Problem(src, f"the top level must be a mapping of keys, got {type(data).__name__}"))
    return data


def load_spec(path: str | os.PathLike, *, registry: Registry | None = None,
              overrides: Mapping[str, Any] | None = None) -> AuditSpec:
    """Read and validate an audit spec file; ``overrides`` replace top-level keys."""
    data = read_spec_file(path)
    data.update(overrides or {})
    return parse_spec(data, base=Path(path).resolve().parent, source=str(path), registry=registry)


def parse_spec(data: Mapping[str, Any], *, base: Path | None = None, source: str = "<spec>",
               registry: Registry | None = None, check_components: bool = True) -> AuditSpec:
    """Validate a spec mapping. Every problem is reported at once, each with its key path."""
    reg = registry or default_registry
    base = base or Path.cwd()
    p = Problems(source)
    unknown = [k for k in data if k not in TOP_KEYS]
    for k in unknown:
        p.at(k, f"unknown key (known keys: {', '.join(TOP_KEYS)})")

    def path_of(value: Any, where: str, required: bool = False) -> InputSpec | None:
        if value is None:
            if required:
                p.at(where, "is required (a file path)")
            return None
        fmt = None
        if isinstance(value, Mapping):
            extra = set(value) - {"path", "format"}
            if extra:
                p.at(where, f"unknown key(s) {', '.join(sorted(extra))} (use path, format)")
            fmt = value.get("format")
            value = value.get("path")
        if not isinstance(value, str) or not value:
            p.at(where, f"must be a file path, got {value!r}")
            return None
        full = (base / value).expanduser()
        if not full.exists():
            p.at(where, f"file not found: {full}")
        return InputSpec(full, fmt)

    originals = path_of(data.get("originals"), "originals")
    background = path_of(data.get("background"), "background")
    corpora: dict[str, InputSpec] = {}
    raw_corpora = data.get("corpora") or {}
    if not isinstance(raw_corpora, Mapping):
        p.at("corpora", "must be a mapping NAME: PATH")
    else:
        for k, v in raw_corpora.items():
            spec = path_of(v, f"corpora.{k}", required=True)
            if spec is not None:
                corpora[str(k)] = spec

    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        p.at("seed", f"must be an integer, got {seed!r}")
        seed = 0

    models = data.get("models") or {}
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

    sampling = data.get("sampling") or {}
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

    releases = _parse_releases(data.get("releases"), p, base, reg, check_components, originals is not None)
    attacks = _parse_components(data.get("attacks"), "attacks", "attack", p, reg, check_components)
    metrics = _parse_components(data.get("metrics"), "metrics", "metric", p, reg, check_components)
    if not attacks and not metrics and "attacks" not in unknown:
        p.at("attacks", "the audit names no attack and no metric: nothing to do")

    # Corpus references and sampling parameters must point somewhere.
    accepted: set[str] = set()
    for comp in attacks + metrics:
        cls = _get_class(reg, comp.kind, comp.name) if check_components else None
        if cls is not None:
            accepted |= set(cls.param_names())
        for k, v in comp.params.items():
            if isinstance(v, str) and v.startswith(CORPUS_REF) and v[len(CORPUS_REF):] not in corpora:
                known = ", ".join(corpora) or "none declared under corpora"
                p.at(f"{comp.kind}s.{comp.name}.params.{k}", f"unknown corpus {v!r} (known: {known})")
    if check_components:
        for k in sampling_params:
            if k not in accepted:
                p.at(f"sampling.{k}", "no configured attack or metric takes this parameter "
                                       f"(they take: {', '.join(sorted(accepted)) or 'none'})")

    gate = GateSpec()
    raw_gate = data.get("gate") or {}
    if not isinstance(raw_gate, Mapping):
        p.at("gate", "must be a mapping with keys max, min, on_upper_ci")
    else:
        for k in set(raw_gate) - {"max", "min", "on_upper_ci"}:
            p.at(f"gate.{k}", "unknown key (use max, min, on_upper_ci)")
        for side in ("max", "min"):
            section = raw_gate.get(side) or {}
            if not isinstance(section, Mapping):
                p.at(f"gate.{side}", "must be a mapping RESULT: VALUE")
                continue
            for k, v in section.items():
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    p.at(f"gate.{side}.{k}", f"must be a number, got {v!r}")
                else:
                    getattr(gate, side)[str(k)] = float(v)
        gate.on_upper_ci = bool(raw_gate.get("on_upper_ci", False))

    report = data.get("report") or {}
    if not isinstance(report, Mapping):
        p.at("report", "must be a mapping (shareable, max_documents)")
        report = {}
    else:
        for k in set(report) - {"shareable", "max_documents"}:
            p.at(f"report.{k}", "unknown key (use shareable, max_documents)")

    out = data.get("out", "audit-out")
    if not isinstance(out, str) or not out:
        p.at("out", f"must be a folder path, got {out!r}")
        out = "audit-out"
    title = data.get("title") or "Audit"
    p.raise_if_any()
    return AuditSpec(originals=originals, background=background, corpora=corpora, releases=releases,
                     attacks=attacks, metrics=metrics, llm=llm, embedder=embedder,
                     sample_documents=sample_documents, sampling_params=sampling_params, seed=seed,
                     out=(base / out).expanduser(), title=str(title), gate=gate, report=dict(report),
                     source=source)


def _get_class(reg: Registry, kind: str, name: str):
    try:
        return reg.get(kind, name)
    except AnonauditError:
        return None


def _parse_components(raw: Any, key: str, kind: str, p: Problems, reg: Registry,
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
        out.append(ComponentSpec(kind, name, params, sample))
    return out


def _parse_releases(raw: Any, p: Problems, base: Path, reg: Registry, check: bool,
                    have_originals: bool) -> list[ReleaseSpec]:
    if raw is None:
        p.at("releases", "is required: a list of release files or sanitizers")
        return []
    if isinstance(raw, Mapping):  # {name: path-or-mapping}
        raw = [{"name": k, **(v if isinstance(v, Mapping) else {"path": v})} for k, v in raw.items()]
    if not isinstance(raw, list):
        p.at("releases", "must be a list")
        return []
    out: list[ReleaseSpec] = []
    for i, item in enumerate(raw):
        where = f"releases[{i}]"
        if isinstance(item, str):
            item = {"path": item}
        if not isinstance(item, Mapping):
            p.at(where, f"must be a file path or a mapping, got {item!r}")
            continue
        for k in set(item) - set(RELEASE_KEYS):
            p.at(f"{where}.{k}", f"unknown key (use {', '.join(RELEASE_KEYS)})")
        path, san = item.get("path"), item.get("sanitizer")
        if (path is None) == (san is None):
            p.at(where, "give exactly one of 'path' (a release file) or 'sanitizer' (run on the originals)")
            continue
        raw_params = item.get("params") or {}
        if not isinstance(raw_params, Mapping):
            p.at(f"{where}.params", "must be a mapping of parameter: value")
            raw_params = {}
        params = dict(raw_params)
        spec = ReleaseSpec(name=item.get("name"), format=item.get("format"), params=params)
        if path is not None:
            full = (base / str(path)).expanduser()
            if not full.exists():
                p.at(f"{where}.path", f"file not found: {full}")
            spec.path = full
        else:
            spec.sanitizer = str(san)
            if not have_originals:
                p.at(f"{where}.sanitizer", "a sanitizer needs 'originals' to run on")
            if check:
                try:
                    cls = reg.get("sanitizer", spec.sanitizer)
                except AnonauditError as exc:
                    p.at(f"{where}.sanitizer", str(exc))
                else:
                    accepted = cls.param_names()
                    for k in params:
                        if k not in accepted:
                            p.at(f"{where}.params.{k}", f"sanitizer {san!r} has no parameter {k!r} "
                                                         f"(it takes: {', '.join(accepted) or 'none'})")
            spec.name = spec.name or normalise(spec.sanitizer)
        out.append(spec)
    names = [r.name for r in out if r.name]
    for n in {n for n in names if names.count(n) > 1}:
        p.at("releases", f"two releases are named {n!r}")
    return out


# --------------------------------------------------------------------------- helpers


def canonical(obj: Any) -> Any:
    """A JSON-friendly form of a parameter value (corpora become their fingerprint)."""
    if isinstance(obj, Corpus):
        return {"corpus": obj.name, "fingerprint": obj.fingerprint()}
    if isinstance(obj, Mapping):
        return {str(k): canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [canonical(v) for v in obj]
        return sorted(items, key=repr) if isinstance(obj, (set, frozenset)) else items
    if isinstance(obj, Path):
        return str(obj)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return repr(obj)


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(canonical(obj), sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def sample_release(release: Release, k: int | None, seed: int) -> Release:
    """A seeded sample of ``k`` documents (the same ids for every release of an audit)."""
    if k is None or len(release) <= k:
        return release
    ids = sorted(release.corpus.ids)
    keep = set(random.Random(f"{seed}:sample").sample(ids, k))
    docs = [d for d in release.corpus if d.id in keep]
    return dataclasses.replace(release, corpus=Corpus(docs, name=release.corpus.name, source=release.source))


def write_release_jsonl(release: Release | Corpus, path: Path) -> Path:
    """Write documents (with their recorded spans) as JSONL, atomically."""
    corpus = release.corpus if isinstance(release, Release) else release
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for doc in corpus:
            fh.write(json.dumps(doc.to_dict(), ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def read_release_jsonl(path: Path, name: str, sanitizer: str | None = None) -> Release:
    """Read back a release written by :func:`write_release_jsonl`."""
    docs = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                d = json.loads(line)
                docs.append(Document(d["id"], d["text"], d.get("subject"),
                                     tuple(Span.from_dict(s) for s in d.get("spans", ())), d.get("meta") or {}))
    return Release(name=name, corpus=Corpus(docs, name=name, source=str(path)), sanitizer=sanitizer,
                   source=str(path))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def component_info(obj: Any) -> dict[str, Any]:
    """What a component says about itself: ``provenance()`` (models, checksums) and ``stats``
    (e.g. LLM cache hits and misses), when it exposes them."""
    info: dict[str, Any] = {}
    for attr in ("provenance", "stats"):
        value = getattr(obj, attr, None)
        try:
            if callable(value):
                value = value()
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                value = dataclasses.asdict(value)
        except Exception as exc:  # a component's self-description must never break an audit
            value = {"error": f"{type(exc).__name__}: {exc}"}
        if isinstance(value, Mapping) and value:
            info[attr] = canonical(value)
    return info


def _echo(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the audit


@dataclass
class AuditOutcome:
    """What :meth:`Audit.run` did: the results file, and how much was computed vs reused."""

    results: ResultsFile
    path: Path
    computed: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    releases: dict[str, Release] = field(default_factory=dict)
    seconds: float = 0.0


class Audit:
    """Runs an :class:`AuditSpec`.

    ``on_error="raise"`` stops at the first failing component (``anonaudit run``);
    ``"skip"`` records the failure in the provenance and goes on (``anonaudit demo``),
    and a component that cannot even be loaded is then skipped with a note.
    """

    def __init__(self, spec: AuditSpec, *, registry: Registry | None = None, on_error: str = "raise",
                 progress: bool = True, echo: Callable[[str], None] | None = _echo,
                 command: str = "run"):
        if on_error not in ("raise", "skip"):
            raise ValueError("on_error must be 'raise' or 'skip'")
        self.spec = spec
        self.registry = registry or default_registry
        self.on_error = on_error
        self.progress = progress
        self.echo = echo or (lambda msg: None)
        self.command = command

    @property
    def results_path(self) -> Path:
        return self.spec.out / "results.json"

    # -- data
    def _load_corpus(self, inp: InputSpec, name: str) -> Corpus:
        from audit.io.loaders import load_corpus

        return load_corpus(str(inp.path), format=inp.format, name=name)

    def _build_releases(self, originals: Corpus | None, rf: ResultsFile) -> tuple[list[Release], dict]:
        from audit.io.loaders import load_releases

        prov: dict[str, Any] = {}
        previous = rf.provenance.get("releases", {}) if isinstance(rf.provenance.get("releases"), dict) else {}
        releases: list[Release] = []
        folder = self.spec.out / "releases"
        for rs in self.spec.releases:
            if rs.path is not None:
                spec_str = f"{rs.name}={rs.path}" if rs.name else str(rs.path)
                loaded = load_releases(spec_str, originals=originals, format=rs.format)
                for rel in loaded:
                    entry = {"source": str(rs.path), "sha256": _sha256(rs.path)}
                    releases.append(rel)
                    prov[rel.name] = entry
                continue
            assert originals is not None and rs.sanitizer is not None and rs.name is not None
            key = digest({"sanitizer": normalise(rs.sanitizer), "params": rs.params,
                          "originals": originals.fingerprint()})
            cached = folder / f"{_safe(rs.name)}.jsonl"
            old = previous.get(rs.name, {})
            if old.get("key") == key and cached.exists() and old.get("sha256") == _sha256(cached):
                rel = read_release_jsonl(cached, rs.name, sanitizer=normalise(rs.sanitizer))
                self.echo(f"  release {rs.name}: reused {cached.name} ({len(rel)} documents)")
            else:
                t0 = time.time()
                san = self.registry.create("sanitizer", rs.sanitizer, **rs.params)
                rel = san.sanitize(originals, name=rs.name)
                if rel.name != rs.name:
                    rel = dataclasses.replace(rel, name=rs.name)
                self.echo(f"  release {rs.name}: sanitized {len(rel)} documents with {rs.sanitizer} "
                          f"in {time.time() - t0:.1f}s")
            releases.append(rel)
            prov[rs.name] = {"sanitizer": normalise(rs.sanitizer), "params": canonical(rs.params), "key": key}
        names = [r.name for r in releases]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise AnonauditError(f"{self.spec.source}: two releases are named {sorted(dup)[0]!r}; give each a name")
        # Every release is written beside the results, so the report can show sanitized texts.
        for rel in releases:
            if originals is not None:
                rel.check_against(originals)
            path = write_release_jsonl(rel, folder / f"{_safe(rel.name)}.jsonl")
            prov[rel.name].update({"path": os.path.relpath(path, self.spec.out), "documents": len(rel),
                                   "aligned": rel.aligned, "fingerprint": rel.corpus.fingerprint(),
                                   "sha256": _sha256(path)})
        return releases, prov

    # -- the run
    def run(self) -> AuditOutcome:
        spec = self.spec
        t_start = time.time()
        spec.out.mkdir(parents=True, exist_ok=True)
        path = self.results_path
        rf = ResultsFile.load(path) if path.exists() else ResultsFile()
        old_prov = rf.provenance if rf.provenance.get("command") else {}
        pairs: dict[str, Any] = dict(old_prov.get("pairs", {}))
        components_prov: dict[str, Any] = dict(old_prov.get("components", {}))

        self.echo("[1/3] loading data")
        originals = self._load_corpus(spec.originals, "originals") if spec.originals else None
        background = self._load_corpus(spec.background, "background") if spec.background else None
        corpora = {k: self._load_corpus(v, k) for k, v in spec.corpora.items()}
        inputs: dict[str, Any] = {}
        for role, inp, corpus in [("originals", spec.originals, originals), ("background", spec.background, background),
                                  *[(f"corpora.{k}", spec.corpora[k], c) for k, c in corpora.items()]]:
            if inp is not None and corpus is not None:
                inputs[role] = {"path": str(inp.path), "sha256": _sha256(inp.path), "documents": len(corpus),
                                "fingerprint": corpus.fingerprint()}
        self.echo(f"[2/3] preparing {len(spec.releases)} release spec(s)")
        releases, releases_prov = self._build_releases(originals, rf)
        scenario = Scenario(originals=originals, background=background, releases=tuple(releases))
        outcome = AuditOutcome(results=rf, path=path, releases={r.name: r for r in releases})
        base_fp = {"originals": None if originals is None else originals.fingerprint(),
                   "background": None if background is None else background.fingerprint()}

        other_runs = rf.provenance.get("runs")  # results merged in by single-attack commands

        def save() -> None:
            rf.provenance = self._provenance(inputs, releases_prov, components_prov, pairs, outcome, t_start)
            if other_runs:
                rf.provenance["runs"] = other_runs
            rf.save(path)

        self.echo(f"[3/3] running {len(spec.components)} component(s) on {len(releases)} release(s)")
        for ci, comp in enumerate(spec.components, 1):
            label = f"({ci}/{len(spec.components)}) {comp.kind} {comp.name}"
            try:
                obj, params = self._create(comp, corpora)
            except Exception as exc:  # cannot be imported or constructed
                if self.on_error == "raise":
                    raise
                reason = str(exc) if isinstance(exc, AnonauditError) else f"{type(exc).__name__}: {exc}"
                outcome.skipped.append({"component": comp.label, "reason": reason})
                self.echo(f"  {label}: SKIPPED ({exc})")
                save()
                continue
            cls = type(obj)
            components_prov[comp.label] = {
                "kind": comp.kind, "name": normalise(comp.name), "class": f"{cls.__module__}:{cls.__qualname__}",
                "description": getattr(cls, "description", "") or "", "params": canonical(obj.get_params()),
                "sample": comp.sample or spec.sample_documents,
            }
            budget = comp.sample or spec.sample_documents
            todo: list[tuple[Release, Release, str]] = []
            for rel in releases:
                sampled = sample_release(rel, budget, spec.seed)
                key = digest({"component": comp.label, "params": params, "release": rel.name,
                              "release_fp": sampled.corpus.fingerprint(), **base_fp})
                done = pairs.get(key)
                if done and all(rf.get(n, r, k) is not None for k, n, r in map(tuple, done.get("results", []))):
                    outcome.reused.append(f"{comp.label}@{rel.name}")
                    continue
                todo.append((rel, sampled, key))
            if not todo:
                self.echo(f"  {label}: all {len(releases)} release(s) already done, reused")
                continue
            try:
                t0 = time.time()
                self.echo(f"  {label}: {len(todo)} release(s) to do"
                          + (f", {len(releases) - len(todo)} already done" if len(todo) < len(releases) else ""))
                obj.fit(scenario)
                fit_s = round(time.time() - t0, 3)
                components_prov[comp.label]["fit_seconds"] = fit_s
                self.echo(f"    prepared (fit: models loaded, attacker trained or index built) in {fit_s:.1f}s")
                bar = self._bar(todo, label)
                for rel, sampled, key in bar:
                    t1 = time.time()
                    results = obj.evaluate(scenario, sampled)
                    results = self._check(results, comp, rel, sampled)
                    rf.extend(results)
                    pairs[key] = {"component": comp.label, "release": rel.name, "params": canonical(params),
                                  "results": [list(r.key) for r in results],
                                  "seconds": round(time.time() - t1, 3),
                                  "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                  "documents": len(sampled), "of": len(rel)}
                    outcome.computed.append(f"{comp.label}@{rel.name}")
                    head = results[0] if results else None
                    self.echo(f"    {rel.name}: " + (f"{head.name} = {head.value:.3f} (n={head.n})" if head else "no result")
                              + f" in {pairs[key]['seconds']:.1f}s")
                    components_prov[comp.label].update(component_info(obj))
                    save()
                self.echo(f"  {label}: done in {time.time() - t0:.1f}s")
            except KeyboardInterrupt:
                save()
                raise
            except Exception as exc:
                if self.on_error == "raise" or isinstance(exc, (MemoryError,)):
                    save()
                    raise
                outcome.errors.append({"component": comp.label, "reason": f"{type(exc).__name__}: {exc}"})
                self.echo(f"  {label}: FAILED ({type(exc).__name__}: {exc}); going on")
            finally:
                _close_quietly(obj)  # free its model before the next component loads one
            save()
        save()
        outcome.seconds = time.time() - t_start
        return outcome

    def _create(self, comp: ComponentSpec, corpora: Mapping[str, Corpus]):
        cls = self.registry.get(comp.kind, comp.name)
        accepted = cls.param_names()
        params = dict(comp.params)
        for param, source in INJECTED.items():
            if param in accepted and param not in params:
                value = {"seed": self.spec.seed, "models.llm": self.spec.llm,
                         "models.embedder": self.spec.embedder}[source]
                if value is not None:
                    params[param] = value
        for k, v in self.spec.sampling_params.items():
            if k in accepted and k not in params:
                params[k] = v
        if "progress" in accepted and "progress" not in params:
            params["progress"] = self.progress
        resolved = {k: corpora[v[len(CORPUS_REF):]] if isinstance(v, str) and v.startswith(CORPUS_REF) else v
                    for k, v in params.items()}
        try:
            obj = self.registry.create(comp.kind, comp.name, **resolved)
        except AnonauditError:
            raise
        except (TypeError, ValueError) as exc:
            raise AnonauditError(f"{self.spec.source}: {comp.kind} {comp.name!r}: bad parameters: {exc}") from None
        return obj, canonical({k: v for k, v in params.items() if k not in NOT_IN_KEY})

    def _bar(self, todo, label):
        from audit.core.progress import bar as progress_bar, is_terminal

        # Off a terminal the runner's own line per release says the same thing.
        return progress_bar(todo, desc=f"  {label}", unit="release", enabled=self.progress and is_terminal())

    def _check(self, results: Any, comp: ComponentSpec, rel: Release, sampled: Release) -> list[Result]:
        want = "attack" if comp.kind == "attack" else "utility"
        if not isinstance(results, list) or not all(isinstance(r, Result) for r in results):
            raise AnonauditError(f"{comp.kind} {comp.name!r} returned {type(results).__name__}, not a list of Result")
        for r in results:
            if r.kind != want:
                raise AnonauditError(f"{comp.kind} {comp.name!r} returned a result of kind {r.kind!r} "
                                     f"(expected {want!r})")
            if len(sampled) < len(rel):
                r.details.setdefault("sampled", {"documents": len(sampled), "of": len(rel), "seed": self.spec.seed})
        return results

    def _provenance(self, inputs, releases_prov, components_prov, pairs, outcome, t_start) -> dict[str, Any]:
        spec = self.spec
        spec_file = Path(spec.source)
        return {
            "tool": "anonaudit", "version": __version__, "command": self.command, "title": spec.title,
            "spec": {"path": str(spec_file), "sha256": _sha256(spec_file) if spec_file.is_file() else None},
            "argv": sys.argv[1:], "python": platform.python_version(), "platform": platform.platform(),
            "seed": spec.seed, "models": {"llm": spec.llm, "embedder": spec.embedder},
            "sampling": {"documents": spec.sample_documents, **canonical(spec.sampling_params)},
            "inputs": inputs, "releases": releases_prov, "components": components_prov, "pairs": pairs,
            "skipped": outcome.skipped, "errors": outcome.errors,
            "gate": {"max": spec.gate.max, "min": spec.gate.min, "on_upper_ci": spec.gate.on_upper_ci},
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)),
            "seconds": round(time.time() - t_start, 3),
        }


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "release"


def _close_quietly(obj: Any) -> None:
    """``obj.close()``; a component that fails to release a resource never fails the audit."""
    close = getattr(obj, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # releasing is best effort
            close()
