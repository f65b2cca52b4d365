"""``anonaudit.audit``, ``attack``, ``utility``, ``sanitize`` and ``run``: the toolkit from Python.

Each function builds an audit spec (:mod:`audit.pipeline.spec`) and runs it with the
pipeline's :class:`~audit.pipeline.runner.Audit`: the same load, fit, evaluate and save loop,
the same checks and provenance as ``anonaudit run``; the command line calls these functions.
Nothing is written to disk unless asked (``out=``): data in memory goes to the runner as it is
(:mod:`anonaudit.inputs`), and the results and the release texts come back in memory
(:class:`~anonaudit.outcome.Results`), to be written by :meth:`~anonaudit.outcome.Results.save`
or ``out=``. Model caches still go to ``ANONAUDIT_HOME``.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from anonaudit.inputs import as_corpus, columns_of, is_file
from anonaudit.outcome import Results, read_copies
from anonaudit.typed_spec import Spec
from audit.core.arguments import PositiveInt, Seed, check_argument, checked
from audit.core.config import caches_off
from audit.core.data import Corpus
from audit.core.paramtypes import AtLeast, AtMost
from anonaudit.demo.population import MAX_RELEASED
from audit.core.errors import AnonauditError, ArgumentError


#: The people of a synthetic population (:func:`sample_data`, ``anonaudit demo-data --n``).
DemoPeople = Annotated[int, AtLeast(1), AtMost(MAX_RELEASED)]


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - values that cannot be compared (arrays) are not the same
        return False


def _registry(registry: Any, function: str = "audit"):
    from audit.core.registry import given_registry

    return given_registry(registry, f"anonaudit.{function}(): registry=")


def _merged_params(function: str, params: Mapping[str, Any] | None, keywords: Mapping[str, Any]) -> dict[str, Any]:
    """A component's parameters given as ``params=`` and as keywords, in one dict; a parameter
    given both ways with two values is an :class:`ArgumentError` naming both (never resolved
    silently); ``params`` that is not a mapping, one too."""
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise ArgumentError(f"anonaudit.{function}(): params={params!r:.60}: must be a mapping of parameter names "
                            "to values")
    for key in sorted(params.keys() & keywords.keys(), key=str):
        if not _same(params[key], keywords[key]):
            raise ArgumentError(f"anonaudit.{function}(): the parameter {key!r} is given twice with two values: "
                                f"params={{{key!r}: {params[key]!r:.40}}} and {key}={keywords[key]!r:.40}; "
                                "give it once")
    return {**params, **keywords}


@checked
def audit(spec: Spec | str | os.PathLike | None = None, /, *, originals: Any = None, releases: Any = None,
          attacks: Any = None, metrics: Any = None, seed: Seed | None = None, out: str | os.PathLike | None = None,
          force: bool = False, progress: bool = True, on_error: Literal["raise", "skip"] = "raise",
          registry: Any = None) -> Results:
    """Run the attacks and utility metrics of ``spec`` on its releases; return their Results.

    spec: an :class:`anonaudit.Spec` (releases, attacks, metrics, originals, background, budget,
        seed, models...), or a YAML/TOML file of one (``Spec.load``).
    originals, releases, attacks, metrics, seed: shortcuts for the spec's fields (a short call
        needs no Spec: ``audit(originals=df, releases={"x": df2}, attacks=["phrase_search"])``).
    out: a results file to write (summary.csv and the release copies beside it; results merge
        into an existing one). Default: nothing written. An input, or an existing file of another
        kind unless ``force``, is refused.
    progress: say what each stage does. on_error: "raise" stops at the first failing component;
        "skip" records it and goes on. registry: the components (default: the installed ones).
    """
    return execute_audit(with_shortcuts(spec, originals=originals, releases=releases, attacks=attacks,
                                        metrics=metrics, seed=seed),
                         out=out, force=force, progress=progress, on_error=on_error, registry=registry)


def with_shortcuts(spec: Any, **shortcuts: Any) -> Spec:
    """``spec`` (a :class:`Spec`, a spec file, or none) with the fields the caller gave as keywords."""
    from anonaudit.typed_spec import Spec

    if spec is None:
        spec = Spec()
    elif is_file(spec):
        spec = Spec.load(spec)
    elif not isinstance(spec, Spec):
        raise AnonauditError(f"anonaudit: spec must be an anonaudit.Spec or a spec file, got {type(spec).__name__}")
    given = {k: v for k, v in shortcuts.items() if v is not None}
    return spec.replace(**given) if given else spec


def execute_audit(spec: Spec, *, out: Any = None, force: bool = False, progress: bool = True,
                  on_error: str = "raise", registry: Any = None, command: str = "api",
                  source: str = "anonaudit.audit()") -> Results:
    """Run ``spec`` (what :func:`audit` does; the command line calls it with its ``command`` and
    ``source``, the names its run and its messages go by)."""
    from anonaudit.typed_spec import spec_mapping

    return _execute(spec_mapping(spec), out=out, registry=registry, progress=progress, on_error=on_error,
                    command=command, source=source, resume=False, force=force, seed=spec.seed,
                    time_limit=spec.budget.time_limit, base=spec.base)


def _execute(data: Mapping[str, Any] | Any, *, out: Any, registry: Any, progress: bool,
             on_error: str, command: str, source: str, resume: bool, base: Path | None = None,
             force: bool = False, spec_file: Any = None, seed: int | None = None,
             time_limit: float | None = None) -> Results:
    """Parse (unless given parsed) and run a spec; results in memory, or in ``out`` when given
    (refused before any work when it is an input, or a file of another kind unless ``force``:
    the command line's guard, :func:`audit.pipeline.outputs.check_outputs`). ``seed``: the
    caller's, checked by it, straight into the spec (not through the spec's mapping)."""
    import dataclasses

    from audit.pipeline.bundle_writer import BundleWriter
    from audit.pipeline.outputs import spec_inputs
    from audit.pipeline.runner import Audit, AuditSpec, parse_spec

    from audit.runtime.deadline import check_enforceable

    reg = _registry(registry, "audit")
    check_enforceable(time_limit, "time_limit=" if command == "api" else "--time-limit")  # before any write
    results_path = Path(out).expanduser().resolve() if out is not None else None
    if isinstance(data, AuditSpec):
        spec = data
    else:
        spec = parse_spec(data, base=base or Path.cwd(), source=source, registry=reg, in_memory=True)
    spec = dataclasses.replace(spec, out=None if results_path is None else results_path.parent,
                               **({} if seed is None else {"seed": seed}))
    # the one writer of out=, made before any work: it holds the output guard
    writer = None if results_path is None else BundleWriter(results_path, inputs=spec_inputs(spec, spec_file),
                                                            force=force, force_named="force=True")
    with caches_off(_no_cache(spec.components)):
        outcome = Audit(spec, registry=reg, on_error=on_error, progress=progress,
                        echo=_echo if progress else None, command=command, writer=writer, resume=resume,
                        time_limit=time_limit).run()
    rf = outcome.results
    # this run's copies as it made them; an earlier run's in the same results file, from beside it
    copies = {**(read_copies(outcome.path, rf, strict=False, skip=outcome.copies) if outcome.path else {}),
              **outcome.copies}
    results = Results(rf, copies=copies, computed=outcome.computed, reused=outcome.reused, skipped=outcome.skipped,
                      errors=outcome.errors, keys=outcome.keys, path=outcome.path if results_path else None,
                      seconds=outcome.seconds)
    if spec.gate.max or spec.gate.min:  # the spec's gate, judged as `anonaudit run` judges it
        results.outcome = results.gate(max=spec.gate.max, min=spec.gate.min, on_point=spec.gate.on_point)
    return results


def _no_cache(components: Any) -> bool:
    """A component's ``cache``/``use_cache`` off (``--no-cache``) turns every cache off for the
    run: the shared models it asks for (LLM answers, embeddings, information content) too."""
    return any(c.params.get(k) is False for c in components for k in ("cache", "use_cache"))


def _echo(msg: str) -> None:
    import sys

    print(msg, file=sys.stderr, flush=True)


#: Where a keyword of an older, flat :func:`attack` / :func:`utility` now goes: a field of the
#: :class:`Spec` given as ``spec=`` (said when one is given as a keyword that is not the attack's).
SPEC_FIELDS = {"background": "background=...", "corpora": "corpora=...", "llm": "models=anonaudit.Models(llm=...)",
               "embedder": "models=anonaudit.Models(embedder=...)", "budget": "budget=anonaudit.Budget(...)",
               "time_limit": "budget=anonaudit.Budget(time_limit=...)", "title": "title=...",
               "executor": "executor=...", "text_column": "columns=anonaudit.Columns(text=...)",
               "id_column": "columns=anonaudit.Columns(id=...)", "subject_column": "columns=anonaudit.Columns(subject=...)",
               "spans_column": "columns=anonaudit.Columns(spans=...)"}


def _not_spec_fields(function: str, keywords: Mapping[str, Any], takes: Any = ()) -> None:
    """A keyword that is a field of the :class:`Spec` (and not the component's own parameter) is
    refused, naming where it goes."""
    for key in sorted(keywords):
        if key in SPEC_FIELDS and key not in takes:
            raise ArgumentError(f"anonaudit.{function}(): {key}= is part of the audit's spec: give "
                                f"spec=anonaudit.Spec({SPEC_FIELDS[key]})")


@checked
def attack(name: str, releases: Any = None, *, spec: Spec | str | os.PathLike | None = None, originals: Any = None,
           params: Mapping[str, Any] | None = None, sample: PositiveInt | None = None, seed: Seed | None = None,
           out: str | os.PathLike | None = None, force: bool = False, progress: bool = True,
           on_error: Literal["raise", "skip"] = "raise", registry: Any = None, **keywords: Any) -> Results:
    """Run one attack (``"phrase_search"``, ``"trir"``, ``"span_guess"``, ``"claim_linker"``, or a
    plugin's) on the releases: :func:`audit` of ``spec`` with this attack alone.

    spec: the rest of the audit (background, budget, models, columns...): an :class:`anonaudit.Spec`
        or a spec file. params (or further keywords): the attack's parameters. sample: documents per
        release. releases, originals, seed, out, force, progress, on_error, registry: :func:`audit`'s.
    """
    if SPEC_FIELDS.keys() & keywords.keys():
        _not_spec_fields("attack", keywords, _registry(registry, "attack").get("attack", name).param_names())
    entry: dict[str, Any] = {"name": name, "params": _merged_params("attack", params, keywords)}
    if sample is not None:
        entry["sample"] = sample
    return audit(with_shortcuts(spec), originals=originals, releases=releases, attacks=[entry], seed=seed, out=out,
                 force=force, progress=progress, on_error=on_error, registry=registry)


@checked
def utility(originals: Any = None, releases: Any = None, *, metrics: Any = None,
            spec: Spec | str | os.PathLike | None = None, seed: Seed | None = None,
            out: str | os.PathLike | None = None, force: bool = False, progress: bool = True,
            on_error: Literal["raise", "skip"] | None = None, registry: Any = None, **keywords: Any) -> Results:
    """Utility metrics of the releases against the originals: :func:`audit` of ``spec`` with these
    metrics alone (default: every registered metric; ``tpi`` and ``tps`` load the 0.5B scoring
    model). spec, seed, out, force, progress, registry: as :func:`attack`'s. on_error: as
    :func:`audit`'s; by default a metric that does not suit the data (``recall`` without gold
    spans) is left out and listed in ``results.errors`` when every metric runs, as ``anonaudit
    utility`` does, and raises when ``metrics`` names it."""
    _not_spec_fields("utility", keywords)
    if keywords:
        raise ArgumentError(f"anonaudit.utility(): unexpected keyword(s) {', '.join(sorted(keywords))}")
    if metrics is None:
        metrics = list(_registry(registry, "utility").names("metric"))
        on_error = on_error or "skip"
    elif isinstance(metrics, (list, tuple)) and not metrics:  # else the spec blames its `attacks`
        raise ArgumentError("anonaudit.utility(): metrics=[]: no metric to run; name at least one, or leave "
                            "metrics out for every registered one")
    return audit(with_shortcuts(spec), originals=originals, releases=releases, metrics=metrics, seed=seed, out=out,
                 force=force, progress=progress, on_error=on_error or "raise", registry=registry)


@checked
def run(spec: Any, *, out: str | os.PathLike | None = None, registry: Any = None, progress: bool = True,
        on_error: Literal["raise", "skip"] = "raise", resume: bool = True, force: bool = False,
        budget: str | None = None, time_limit: float | None = None) -> Results:
    """Run an audit spec: a YAML/TOML file (its results go to the spec's ``out`` folder, or
    ``out``, and a re-run resumes), a mapping with the spec's keys (in memory unless it names
    ``out``), or a parsed :class:`~audit.pipeline.spec.AuditSpec`. ``OUT/results.json`` may not be
    an input of the spec (nor the spec file), nor an existing file of another kind unless
    ``force`` (as ``anonaudit run --force``). ``budget``: the spec's ``budget`` replaced (quick,
    standard, full). ``time_limit``: minutes the run may take (as :func:`audit`'s).

    When the spec has a ``gate``, the returned results carry its verdict in ``results.outcome``
    (a :class:`~anonaudit.outcome.GateOutcome`: ``status``, ``exit_code`` as ``anonaudit run``
    exits, ``passed``, the checks); ``None`` without a gate. A failing gate does not raise: the
    results are what the caller needs to see why."""
    return run_spec(spec, out=out, registry=registry, progress=progress, on_error=on_error, resume=resume,
                    force=force, budget=budget, time_limit=time_limit)


def run_spec(spec: Any, *, out: Any = None, registry: Any = None, progress: bool = True, on_error: str = "raise",
             resume: bool = True, force: bool = False, budget: str | None = None, time_limit: float | None = None,
             command: str = "run") -> Results:
    """:func:`run`, its run named ``command`` (the demo's is ``demo``): what the command line calls."""
    from audit.pipeline.budget import check_budget
    from audit.pipeline.runner import AuditSpec, load_spec

    check_argument("anonaudit.run()", "spec", spec, str | os.PathLike | Mapping[str, Any] | AuditSpec)
    reg = _registry(registry, "run")
    spec_file = spec if is_file(spec) else None
    given = {} if budget is None else {"budget": check_budget(budget, "anonaudit.run(budget=...)")}
    if is_file(spec):
        overrides = {**({"out": str(Path(out).resolve())} if out is not None else {}), **given}
        spec = load_spec(spec, overrides=overrides or None, registry=reg)
    elif isinstance(spec, Mapping) and (out is not None or "out" in spec):
        from audit.pipeline.runner import parse_spec

        spec = parse_spec({**spec, **({"out": str(out)} if out is not None else {}), **given}, base=Path.cwd(),
                          source="anonaudit.run()", registry=reg)
    elif isinstance(spec, Mapping):
        spec = {**spec, **given}
    elif isinstance(spec, AuditSpec) and given:
        spec = dataclasses.replace(spec, **given)
    path = spec.out / "results.json" if isinstance(spec, AuditSpec) and spec.out is not None else None
    return _execute(spec, out=path, registry=reg, progress=progress, on_error=on_error, command=command,
                    source="anonaudit.run()", resume=resume, force=force, spec_file=spec_file, time_limit=time_limit)


@checked
def sanitize(name: str, data: Any, *, params: Mapping[str, Any] | None = None, seed: Seed | None = None,
             llm: str | None = None, embedder: str | None = None, text_column: str = "text", id_column: str = "id",
             subject_column: str = "subject", spans_column: str = "spans", format: str | None = None,  # noqa: A002
             release_name: str | None = None, progress: bool | None = None, registry: Any = None,
             **kwargs: Any) -> Any:
    """Run the sanitizer ``name`` on ``data`` and return the release, the pandas way: a new
    object of the input's kind, the input untouched. A DataFrame gives a DataFrame, a Hugging
    Face ``Dataset`` a ``Dataset`` and a list of dicts a list of dicts, with the same column
    names and the applied spans (offsets in the new text, label, replacement, original) in the
    spans column; a file path or a ``Corpus`` gives a :class:`~audit.core.data.Release`.
    The sanitizer's parameters go in ``params`` or as further keywords. ``seed`` (default 0) and
    ``progress`` (default False) given as keywords and in ``params`` with two values are refused,
    an explicit ``seed=0`` too (their defaults are ``None``, so an explicit value is seen)."""
    from audit.core.paramtypes import check_params

    reg = _registry(registry, "sanitize")
    cls = reg.get("sanitizer", name)
    given = _merged_params("sanitize", params, kwargs)
    accepted = cls.param_names()
    for key, value, default in (("seed", seed, 0), ("llm", llm, None), ("embedder", embedder, None),
                                ("progress", progress, False)):
        if key in accepted and key in given and value is not None and given[key] != value:
            raise ArgumentError(f"anonaudit.sanitize(): {key} is given twice with two values: {key}={value!r} and "
                                f"params={{{key!r}: {given[key]!r}}}; give it once")
        if key in accepted and key not in given and (value if value is not None else default) is not None:
            given[key] = value if value is not None else default  # left out: the default (seed 0, as always)
    wrong = check_params(cls, given)
    if wrong:
        raise AnonauditError("\n".join(f"sanitizer {name!r}: parameter {k!r} {why}" for k, why in wrong.items()))
    columns = columns_of(text_column, id_column, subject_column, spans_column)
    if is_file(data):
        from audit.io.loaders import load_corpus

        corpus = load_corpus(data, format=format, columns=columns or None)
    else:
        corpus = as_corpus(data, name="originals", columns=columns)
    try:
        san = reg.create("sanitizer", name, **given)
    except (TypeError, ValueError) as exc:
        raise AnonauditError(f"sanitizer {name!r}: {exc}") from None
    try:
        with caches_off(any(given.get(k) is False for k in ("cache", "use_cache"))):  # every cache
            release = san.sanitize(corpus, name=release_name or (Path(data).stem if is_file(data) else name))
        own = tuple(san.warnings(release.name)) if callable(getattr(san, "warnings", None)) else ()
    finally:
        san.close()
    if own:  # its self-check found the release degenerate: the release says so
        release = dataclasses.replace(release, warnings=own)
    if is_file(data) or isinstance(data, Corpus):
        return release
    for text in own:  # a table has no place for it: Python's warnings do
        warnings.warn(f"release {release.name!r}: {text}", UserWarning, stacklevel=2)
    rows = [_row(d, text_column, id_column, subject_column, spans_column) for d in release.corpus]
    if isinstance(data, (list, tuple)):
        return rows
    if callable(getattr(type(data), "from_list", None)) and not hasattr(data, "iloc"):  # datasets.Dataset
        return type(data).from_list(rows)
    from anonaudit.outcome import import_pandas

    frame = import_pandas().DataFrame(rows)
    given = getattr(data, "columns", None)
    given = list(given) if given is not None else list(getattr(data, "column_names", None) or [])
    first = [c for c in given if c in frame.columns]
    return frame[first + [c for c in frame.columns if c not in first]]


def _row(doc: Any, text: str, id_: str, subject: str, spans: str) -> dict[str, Any]:
    row: dict[str, Any] = {id_: doc.id, text: doc.text, subject: doc.subject,
                           spans: [s.to_dict() for s in doc.spans]}
    for k, v in doc.meta.items():
        row.setdefault(k, v)
    return row


@checked
def sample_data(n: DemoPeople = 12, seed: Seed = 0) -> dict[str, Any]:
    """A small synthetic population as lists of dicts (``originals``, ``background`` and the two
    releases that come with ``anonaudit demo-data``), for examples and tests."""
    from anonaudit.demo.population import generate

    demo = generate(n=n, seed=seed)
    rows = lambda docs: [d.to_dict() for d in docs]  # noqa: E731
    return {"originals": rows(demo.originals), "background": rows(demo.background),
            "releases": {name: rows(r.corpus) for name, r in demo.releases.items()}}


__all__ = ["audit", "attack", "utility", "sanitize", "run", "sample_data"]
