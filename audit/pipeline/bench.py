"""``anonaudit bench``: a sanitizer under test beside the comparison points, on one corpus,
through every attack and utility metric, with a leaderboard and paired tests.

Steps, each resumable (a re-run recomputes nothing that finished):

1. the corpus is written to ``OUT/data/`` (originals and background as JSONL);
2. every contender becomes a release in ``OUT/sanitized/NAME.jsonl``, written as soon as it is
   made, with ``NAME.json`` beside it (what made it, its key, its cost); a registered sanitizer
   whose key is unchanged is reused, an external command always runs again (the researcher is
   changing it) and is validated (:mod:`audit.pipeline.external`); the comparison points come
   first, so a sanitizer under test that fails loses none of them;
3. ONE audit (:class:`~audit.pipeline.runner.Audit`) runs every attack and metric on all the
   releases: each attack is fitted once per corpus (TRIR's attacker trained, the phrase index
   built) and evaluates every release; its results are saved after each release;
4. the leaderboard (:mod:`audit.pipeline.leaderboard`): ranked by risk, costs, paired tests
   against the sanitizer under test, published reference rows.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.core.data import Corpus, Release
from audit.core.errors import AnonauditError
from audit.core.files import atomic_write_json, sha256_file
from audit.core.registry import Registry, normalise
from audit.core.registry import registry as default_registry
from audit.pipeline.provenance import canonical, digest

#: The comparison points run by default: cheap, no language model.
CHEAP = ("suppression", "labels", "spacy_ner", "presidio")
#: The comparison points ``--with`` adds: LLM sanitizers, run on a document budget.
LLM_POINTS = ("intact", "prompt", "delinker")


@dataclass(frozen=True)
class Contender:
    """One release on the leaderboard. ``kind``: ``"sanitizer"`` (a registered one, run on the
    originals), ``"command"`` (an external program), ``"file"`` (a release file, any README
    format) or ``"release"`` (a release in memory: the API, a TRI file's method column).
    ``budget``: run on a seeded sample of this many documents (the LLM sanitizers)."""

    name: str
    kind: str
    sanitizer: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    path: str | None = None
    command: str | None = None
    release: Release | None = None
    under_test: bool = False
    budget: int | None = None
    #: The name was taken from the release file's name (no one chose it; it may be a person's):
    #: recorded as ``name_from: file`` in the results, which the shareable edition hides.
    name_from_file: bool = False


@dataclass(frozen=True)
class BenchSpec:
    """Everything a bench needs, complete. ``contenders``: the sanitizer under test first.
    ``attacks``/``metrics``: audit-spec entries. ``reference``: published rows
    (:func:`audit.pipeline.leaderboard.read_reference`)."""

    out: Path
    originals: Corpus | None
    background: Corpus | None
    contenders: tuple[Contender, ...]
    attacks: tuple[Any, ...]
    metrics: tuple[Any, ...]
    seed: int = 0
    llm: str | None = None
    title: str = "Benchmark"
    corpus: str = "corpus"
    reference: tuple[Any, ...] = ()
    command_timeout: float | None = None
    #: How much work the attacks do: quick, standard, full (:mod:`audit.pipeline.budget`).
    budget: str = "standard"
    #: The whole corpus when ``originals`` is a sample of it: release files made for the whole
    #: corpus are read against it, then cut to the sample.
    population: Corpus | None = None


@dataclass
class BenchOutcome:
    """What :func:`run_bench` made: the audit's outcome, the leaderboard and each contender's cost."""

    audit: Any
    leaderboard: Any
    costs: dict[str, dict[str, Any]]
    reused: list[str]
    seconds: float


def run_bench(spec: BenchSpec, *, registry: Registry | None = None, progress: bool = True,
              echo: Callable[[str], None] = lambda m: None, replace: bool = False) -> BenchOutcome:
    """Run a bench (see the module doc); results in ``spec.out`` (``replace``: its results.json is
    a file of another kind the user chose to write over, see :class:`~audit.pipeline.runner.Audit`)."""
    from audit.models.resources import Resources
    from audit.pipeline.leaderboard import build_leaderboard
    from audit.pipeline.runner import Audit, parse_spec

    reg = registry or default_registry
    t0 = time.time()
    under = [c for c in spec.contenders if c.under_test]
    if len(under) != 1 or spec.contenders[0] is not under[0]:
        raise AnonauditError("a bench has exactly one sanitizer under test, given first")
    names = [c.name for c in spec.contenders]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise AnonauditError(f"two releases on the board are named {dup[0]!r}: give each its own name")
    spec.out.mkdir(parents=True, exist_ok=True)
    data = _write_corpus(spec)
    with Resources(seed=spec.seed, progress=progress) as resources:
        made, costs, reused = _make_releases(spec, reg, resources, echo)
        audit_data = {"title": spec.title, "out": str(spec.out), **data,
                      "releases": [{"name": n, "path": str(p)} for n, p in made],
                      "attacks": list(spec.attacks), "metrics": list(spec.metrics),
                      "models": {"llm": spec.llm}, "budget": spec.budget}
        aspec = dataclasses.replace(parse_spec(audit_data, base=spec.out, source="anonaudit bench", registry=reg),
                                    seed=spec.seed)  # the bench's own, checked: straight into the spec
        echo(f"bench: every attack and metric on {len(made)} release(s); each attack is prepared once")
        outcome = Audit(aspec, registry=reg, on_error="skip", progress=progress, echo=echo,
                        command="bench", replace=replace).run(resources)
    _record_names_from_files(outcome, [c.name for c in spec.contenders if c.name_from_file])
    reuse = _remember_reuse(spec.out / "bench.json", reuse_of(outcome.results, [n for n, _ in made]))
    board = build_leaderboard(outcome.results, spec, costs, reuse=reuse)
    return BenchOutcome(audit=outcome, leaderboard=board, costs=costs, reused=reused, seconds=time.time() - t0)


def _record_names_from_files(outcome: Any, names: list[str]) -> None:
    """Mark the releases named after their file in the results (``name_from: file``, as a spec's
    unnamed release is): the audit saw only the bench's copies, named by the bench."""
    from audit.core.results import ResultsFile

    def mark(rf: Any) -> Any:
        for name in names:
            info = (rf.provenance.get("releases") or {}).get(name)
            if isinstance(info, dict):
                info["name_from"] = "file"
        return rf

    if not names:
        return
    mark(outcome.results)
    if getattr(outcome, "path", None) is not None and Path(outcome.path).is_file():
        ResultsFile.update(outcome.path, lambda current: mark(current if current is not None else outcome.results))


def _remember_reuse(path: Path, reuse: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """This run's attack preparations, completed by those an earlier run measured (a run that
    reused every result prepared nothing); kept in ``OUT/bench.json``."""
    try:
        old = json.loads(path.read_text(encoding="utf-8")).get("reuse", {}) if path.exists() else {}
    except (OSError, ValueError, AttributeError):
        old = {}
    merged = {**{k: v for k, v in old.items() if isinstance(v, dict)}, **reuse}
    atomic_write_json(path, {"reuse": merged})
    return merged


def _write_corpus(spec: BenchSpec) -> dict[str, str]:
    """The originals and background as JSONL in ``OUT/data`` (rewritten only when they changed,
    so a re-run's input fingerprints and file dates stay)."""
    from audit.io.loaders import save_jsonl

    out: dict[str, str] = {}
    for role, corpus in (("originals", spec.originals), ("background", spec.background)):
        if corpus is None:
            continue
        path = spec.out / "data" / f"{role}.jsonl"
        meta = path.with_suffix(".fingerprint")
        if not (path.exists() and meta.exists() and meta.read_text().strip() == corpus.fingerprint()):
            save_jsonl(corpus, path)
            meta.write_text(corpus.fingerprint() + "\n")
        out[role] = str(path)
    return out


def _make_releases(spec: BenchSpec, reg: Registry, resources: Any, echo: Callable[[str], None]
                   ) -> tuple[list[tuple[str, Path]], dict[str, dict[str, Any]], list[str]]:
    """Each contender's release file, comparison points first, the sanitizer under test last;
    a comparison point that cannot run on this corpus (labels without annotations) is skipped
    with its reason, the sanitizer under test never is."""
    folder = spec.out / "sanitized"
    folder.mkdir(parents=True, exist_ok=True)
    made: dict[str, Path] = {}
    costs: dict[str, dict[str, Any]] = {}
    reused: list[str] = []
    order = [*spec.contenders[1:], spec.contenders[0]]
    for i, c in enumerate(order, 1):
        label = f"[{i}/{len(order)}] {'under test' if c.under_test else 'comparison'} {c.name}"
        try:
            path, cost, was_reused = _release_of(c, spec, reg, resources, folder)
        except AnonauditError as exc:
            if c.under_test or c.kind != "sanitizer":  # a file the user named must be right: exit 2
                raise
            echo(f"  {label}: SKIPPED ({exc})")
            costs[c.name] = {"skipped": str(exc)}
            continue
        made[c.name] = path
        costs[c.name] = cost
        if was_reused:
            reused.append(c.name)
        echo(f"  {label}: " + ("reused " if was_reused else "made ") + f"{path.name} ({cost.get('documents')} "
             f"documents" + (f", {cost['seconds_per_document']:.2f} s/document)" if cost.get("seconds_per_document")
                             is not None else ")"))
    ordered = [(c.name, made[c.name]) for c in spec.contenders if c.name in made]
    return ordered, costs, reused


def _release_of(c: Contender, spec: BenchSpec, reg: Registry, resources: Any,
                folder: Path) -> tuple[Path, dict[str, Any], bool]:
    """``(release file, cost, reused)`` of one contender; the file and its record are written
    as soon as the release is made."""
    from audit.io.loaders import load_release_file, save_jsonl
    from audit.pipeline.external import run_command, validate_release
    from audit.pipeline.releases import release_file_name, sample_release

    path = folder / release_file_name(c.name)
    record = path.with_suffix(".json")
    originals = spec.originals
    if c.kind in ("file", "release"):
        if c.kind == "file":
            (rel,) = load_release_file(c.path, name=c.name, originals=spec.population or originals)
        else:
            rel = c.release
        if spec.population is not None and originals is not None:  # made for the whole corpus: cut to the sample
            rel = Release(rel.name, Corpus([d for d in rel.corpus if d.id in originals], name=rel.name,
                                           source=rel.source), aligned=rel.aligned, source=rel.source)
        if originals is not None and c.under_test:
            validate_release(rel, originals, source=c.path or c.name)
        save_jsonl(rel.corpus, path)
        return path, {"kind": c.kind, "documents": len(rel), "source": c.path or "in memory"}, False
    if originals is None:
        raise AnonauditError(f"{c.name}: a sanitizer needs the original documents, and this corpus has none")
    docs = sample_release(Release("originals", originals), c.budget, spec.seed).corpus if c.budget else originals
    key = digest({"kind": c.kind, "sanitizer": c.sanitizer and normalise(c.sanitizer), "params": canonical(dict(c.params)),
                  "command": c.command, "originals": docs.fingerprint(), "llm": spec.llm, "seed": spec.seed})
    if c.kind == "sanitizer" and _reusable(path, record, key):
        return path, json.loads(record.read_text(encoding="utf-8"))["cost"], True
    before = _llm_use(resources, c.params)
    t0 = time.perf_counter()
    if c.kind == "command":
        rel = run_command(c.command, docs, c.name, folder, timeout=spec.command_timeout).release
    else:
        rel = _sanitize(c, docs, reg, resources, spec)
    seconds = time.perf_counter() - t0
    cost = _cost(c, len(docs), seconds, before, _llm_use(resources, c.params))
    save_jsonl(rel.corpus, path)
    atomic_write_json(record, {"name": c.name, "kind": c.kind, "sanitizer": c.sanitizer, "command": c.command,
                               "params": canonical(dict(c.params)), "key": key, "sha256": sha256_file(path),
                               "cost": cost, "warnings": list(rel.warnings)})
    return path, cost, False


def _reusable(path: Path, record: Path, key: str) -> bool:
    if not (path.exists() and record.exists()):
        return False
    try:
        info = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and info.get("key") == key and info.get("sha256") == sha256_file(path)


def _sanitize(c: Contender, docs: Corpus, reg: Registry, resources: Any, spec: BenchSpec) -> Release:
    """A registered sanitizer on the originals, with the run's seed and LLM where it takes them."""
    cls = reg.get("sanitizer", c.sanitizer)
    params = dict(c.params)
    accepted = cls.param_names()
    # the run's seed and LLM; the collection an adversary searches (the delinker's) is the corpus
    for key, value in (("seed", spec.seed), ("llm", spec.llm), ("progress", resources.progress),
                       ("collection", spec.population or spec.originals)):
        if key in accepted and key not in params and value is not None:
            params[key] = value
    try:
        san = reg.create("sanitizer", c.sanitizer, **params).use(resources)
    except (TypeError, ValueError) as exc:
        raise AnonauditError(f"sanitizer {c.sanitizer!r}: {exc}") from None
    try:
        rel = san.sanitize(docs, name=c.name)
        own = getattr(san, "warnings", lambda _n: [])(c.name)
    finally:
        san.close()
    if own:
        rel = dataclasses.replace(rel, warnings=tuple(own))
    return rel


def _llm_use(resources: Any, params: Mapping[str, Any]) -> tuple[int, int, int]:
    """``(requests, cached, tokens)`` so far: of the run's LLMs and of LLM objects a sanitizer was
    given as parameters (requests answered by the model or its answer cache; tokens the model spent)."""
    from audit.models.llm import LLM

    given = [v for v in params.values() if isinstance(v, LLM)]
    stats = [resources.llm_stats(), *(getattr(x, "stats", None) or {} for x in given)]
    requests = sum(int(st.get("hits", 0)) + int(st.get("misses", 0)) for st in stats)
    cached = sum(int(st.get("hits", 0)) for st in stats)
    return requests, cached, sum(resources.llm_usage(*given).values())


def _cost(c: Contender, n: int, seconds: float, before: tuple[int, int, int], after: tuple[int, int, int]
          ) -> dict[str, Any]:
    """Cost per document: seconds, LLM requests (answered by the model or its cache) and tokens
    the model spent (a cached answer costs none)."""
    requests, cached, tokens = (a - b for a, b in zip(after, before))
    n = max(n, 1)
    return {"kind": c.kind, "documents": n, "seconds": round(seconds, 3),
            "seconds_per_document": round(seconds / n, 4), "requests_per_document": round(requests / n, 3),
            "tokens_per_document": round(tokens / n, 1), "cached_requests": cached}


def reuse_of(rf: Any, releases: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per attack: what preparing it once cost (``fit_seconds``: the attacker trained, the index
    built) and how many releases shared it; a run per release would have paid it each time."""
    comps = (rf.provenance.get("components") or {}) if hasattr(rf, "provenance") else {}
    out: dict[str, dict[str, Any]] = {}
    for label, info in comps.items():
        if not isinstance(info, Mapping) or info.get("kind") != "attack" or info.get("fit_seconds") is None:
            continue
        fit = float(info["fit_seconds"])
        out[str(info.get("name", label))] = {"fit_seconds": fit, "releases": len(releases),
                                             "saved_seconds": round(fit * (len(releases) - 1), 1)}
    return out
