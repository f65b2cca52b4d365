"""``anonaudit bench``: a sanitizer under test beside the comparison points, on one corpus,
through every attack and utility metric, with a leaderboard and paired tests.

The bench computes in memory; with an output folder, its writer
(:class:`~audit.pipeline.bench_writer.BenchWriter`, which holds the output guard) writes each
part as soon as it is made, so a re-run recomputes nothing that finished:

1. the corpus (with a writer: ``OUT/data/``, originals and background as JSONL);
2. every contender becomes a release (with a writer: ``OUT/sanitized/NAME.jsonl`` with
   ``NAME.json`` beside it, what made it, its key, its cost; a registered sanitizer whose key is
   unchanged is reused from there); an external command always runs again (the researcher is
   changing it) and is validated (:mod:`audit.pipeline.external`); the comparison points come
   first, so a sanitizer under test that fails loses none of them;
3. ONE audit (:class:`~audit.pipeline.runner.Audit`) runs every attack and metric on all the
   releases: each attack is fitted once per corpus (TRIR's attacker trained, the phrase index
   built) and evaluates every release; with a writer, its results are saved after each release;
4. the leaderboard (:mod:`audit.pipeline.leaderboard`): ranked by risk, costs, paired tests
   against the sanitizer under test, published reference rows.

Without a writer nothing is written but an external command's input and output, in a temporary
folder of their own that is deleted once the command has run: it is a program that reads and
writes files.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.core.data import Corpus, Release
from audit.core.errors import AnonauditError
from audit.core.registry import Registry, given_registry
from audit.pipeline.bench_writer import BenchWriter
from audit.pipeline.provenance import canonical

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
              echo: Callable[[str], None] = lambda m: None, writer: BenchWriter | None = None,
              time_limit: float | None = None) -> BenchOutcome:
    """Run a bench (see the module doc). It computes in memory; ``writer`` (made by the caller,
    holding the output guard) writes its folder, each part as it is made. Without one nothing
    is written, except the two files an external command needs, in a temporary folder of its
    own, deleted when it has run (:func:`audit.pipeline.bench_releases.command_release`).
    ``time_limit``: minutes the bench may take, estimated before any of its work
    (:mod:`audit.pipeline.bench_estimate`): an AnonauditError when the estimate exceeds it; then
    enforced, the calibration included (:mod:`audit.runtime.deadline`): at the limit the work stops
    (an external command with every process it started; the releases and pairs finished are kept)."""
    from audit.models.resources import Resources
    from audit.pipeline.estimate import check_limit
    from audit.pipeline.leaderboard import build_leaderboard
    from audit.pipeline.runner import Audit, parse_spec
    from audit.runtime.deadline import enforced

    reg = given_registry(registry)
    t0 = time.time()
    under = [c for c in spec.contenders if c.under_test]
    if len(under) != 1 or spec.contenders[0] is not under[0]:
        raise AnonauditError("a bench has exactly one sanitizer under test, given first")
    names = [c.name for c in spec.contenders]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise AnonauditError(f"two releases on the board are named {dup[0]!r}: give each its own name")
    if writer is not None:  # before any work: resume only the same corpus, and only a bench
        writer.check_same_bench({"originals": spec.originals, "background": spec.background})
    limit = check_limit(time_limit, "time limit")
    with enforced(limit), Resources(seed=spec.seed, progress=progress) as resources:
        if limit is not None:  # before any work: nothing sanitized, attacked or written yet
            from audit.pipeline.bench_estimate import check_bench

            echo("  " + check_bench(spec, reg, resources, writer, limit, t0, echo))
        data = _corpus_entries(spec, writer)
        made, costs, reused = _make_releases(spec, reg, resources, echo, writer)
        audit_data = {"title": spec.title, **({} if writer is None else {"out": str(writer.out)}), **data,
                      "releases": [entry for _, entry in made],
                      "attacks": list(spec.attacks), "metrics": list(spec.metrics),
                      "models": {"llm": spec.llm}, "budget": spec.budget}
        aspec = dataclasses.replace(parse_spec(audit_data, base=None if writer is None else writer.out,
                                               source="anonaudit bench", registry=reg, in_memory=True),
                                    seed=spec.seed)  # the bench's own, checked: straight into the spec
        echo(f"bench: every attack and metric on {len(made)} release(s); each attack is prepared once")
        outcome = Audit(aspec, registry=reg, on_error="skip", progress=progress, echo=echo, command="bench",
                        writer=None if writer is None else writer.results).run(resources)
    _record_names_from_files(outcome, [c.name for c in spec.contenders if c.name_from_file], writer)
    reuse = reuse_of(outcome.results, [n for n, _ in made])
    if writer is not None:
        reuse = writer.reuse(reuse)
    board = build_leaderboard(outcome.results, spec, costs, reuse=reuse)
    return BenchOutcome(audit=outcome, leaderboard=board, costs=costs, reused=reused, seconds=time.time() - t0)


def _record_names_from_files(outcome: Any, names: list[str], writer: BenchWriter | None) -> None:
    """Mark the releases named after their file in the results (``name_from: file``, as a spec's
    unnamed release is): the audit saw only the bench's releases, named by the bench."""

    def mark(rf: Any) -> Any:
        for name in names:
            info = (rf.provenance.get("releases") or {}).get(name)
            if isinstance(info, dict):
                info["name_from"] = "file"
        return rf

    if not names:
        return
    mark(outcome.results)
    if writer is not None:
        writer.amend_results(mark, outcome.results)


def _corpus_entries(spec: BenchSpec, writer: BenchWriter | None) -> dict[str, Any]:
    """The audit spec's originals and background: the documents in memory, or (with a writer)
    the files it keeps them in, ``OUT/data/ROLE.jsonl``."""
    from audit.pipeline.spec import InputSpec

    out: dict[str, Any] = {}
    for role, corpus in (("originals", spec.originals), ("background", spec.background)):
        if corpus is not None:
            out[role] = (InputSpec(None, corpus=corpus, label=f"{role} (bench)") if writer is None
                         else str(writer.corpus(role, corpus)))
    return out


def _make_releases(spec: BenchSpec, reg: Registry, resources: Any, echo: Callable[[str], None],
                   writer: BenchWriter | None) -> tuple[list[tuple[str, Any]], dict[str, dict[str, Any]], list[str]]:
    """Each contender's release as an entry of the audit spec (its file with a writer, else the
    release in memory), comparison points first, the sanitizer under test last; a comparison
    point that cannot run on this corpus (labels without annotations) is skipped with its
    reason, the sanitizer under test never is."""
    made: dict[str, Any] = {}
    costs: dict[str, dict[str, Any]] = {}
    reused: list[str] = []
    order = [*spec.contenders[1:], spec.contenders[0]]
    for i, c in enumerate(order, 1):
        label = f"[{i}/{len(order)}] {'under test' if c.under_test else 'comparison'} {c.name}"
        try:
            entry, cost, was_reused = _release_of(c, spec, reg, resources, writer)
        except AnonauditError as exc:
            if c.under_test or c.kind != "sanitizer":  # a file the user named must be right: exit 2
                raise
            echo(f"  {label}: SKIPPED ({exc})")
            costs[c.name] = {"skipped": str(exc)}
            continue
        made[c.name] = entry
        costs[c.name] = cost
        if was_reused:
            reused.append(c.name)
        shown = Path(entry["path"]).name if isinstance(entry, dict) else "it in memory"
        echo(f"  {label}: " + ("reused " if was_reused else "made ") + f"{shown} ({cost.get('documents')} "
             f"documents" + (f", {cost['seconds_per_document']:.2f} s/document)" if cost.get("seconds_per_document")
                             is not None else ")"))
    ordered = [(c.name, made[c.name]) for c in spec.contenders if c.name in made]
    return ordered, costs, reused


def _release_of(c: Contender, spec: BenchSpec, reg: Registry, resources: Any,
                writer: BenchWriter | None) -> tuple[Any, dict[str, Any], bool]:
    """``(audit spec entry, cost, reused)`` of one contender; with a writer, the release and its
    record are written as soon as it is made."""
    from audit.pipeline.bench_releases import (command_release, contender_documents, given_release, release_key,
                                               sanitize_with)
    from audit.pipeline.external import validate_release

    originals = spec.originals
    if c.kind in ("file", "release"):
        rel = given_release(c, spec)
        if originals is not None and c.under_test:
            validate_release(rel, originals, source=c.path or c.name)
        cost = {"kind": c.kind, "documents": len(rel), "source": c.path or "in memory"}
        return _entry(c, rel, writer), cost, False
    if originals is None:
        raise AnonauditError(f"{c.name}: a sanitizer needs the original documents, and this corpus has none")
    docs = contender_documents(c, spec)
    key = release_key(c, docs, spec)
    if c.kind == "sanitizer" and writer is not None:
        cost = writer.reusable(c.name, key)
        if cost is not None:
            return {"name": c.name, "path": str(writer.release_path(c.name))}, cost, True
    before = _llm_use(resources, c.params)
    t0 = time.perf_counter()
    if c.kind == "command":
        rel = command_release(c, docs, spec, writer)
    else:
        rel = sanitize_with(c, docs, reg, resources, spec)
    seconds = time.perf_counter() - t0
    cost = _cost(c, len(docs), seconds, before, _llm_use(resources, c.params))
    record = {"name": c.name, "kind": c.kind, "sanitizer": c.sanitizer, "command": c.command,
              "params": canonical(dict(c.params)), "key": key, "sha256": None,
              "cost": cost, "warnings": list(rel.warnings)}
    return _entry(c, rel, writer, record), cost, False


def _entry(c: Contender, rel: Release, writer: BenchWriter | None, record: dict[str, Any] | None = None) -> Any:
    """The audit spec's entry of a contender's release: the release in memory, or the file the
    writer kept it in (with its ``record`` beside it when given)."""
    from audit.pipeline.entries import ReleaseSpec

    if writer is None:
        return ReleaseSpec(c.name, release=rel, label=f"the bench's release ({c.kind})")
    return {"name": c.name, "path": str(writer.release(c.name, rel.corpus, record))}


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
