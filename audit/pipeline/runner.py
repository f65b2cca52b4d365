"""The audit runner: one spec in, every attack and metric on every release out.

The spec (:mod:`audit.pipeline.spec`) says what to audit; the runner loads the data, makes
the releases (:mod:`audit.pipeline.releases`), creates each component through the registry
with its parameters completed from the spec, hands it the run's shared models (one
:class:`~audit.models.resources.Resources` per run, closed at the end) and runs it on every
release. Provenance comes from :func:`audit.pipeline.provenance.build_provenance`.

The runner computes in memory and writes nothing itself: with an output, its writer
(:class:`~audit.pipeline.bundle_writer.BundleWriter`, which holds the output guard) writes the
bundle at each checkpoint, in one step. Resuming: ``OUT/results.json`` is rewritten atomically
once the releases are made and after every (component, release) pair (under its lock, merged
into what other commands wrote meanwhile: :meth:`~audit.core.results.ResultsFile.update`), with a key per pair (component, parameters,
release and the fingerprints of every input) under ``provenance["pairs"]``. A re-run skips
every pair whose key is there and whose results are present, so an interrupted audit
recomputes nothing it finished (and ``fit`` runs only when some pair is missing).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.core.data import Corpus, Release, Scenario
from audit.core.details import details_problems
from audit.core.errors import AnonauditError
from audit.core.registry import Registry, given_registry, normalise
from audit.core.consistency import consistency_problems
from audit.core.results import Result, ResultsFile, figure_problems
from audit.models.resources import LLM_STATS, Resources
from audit.pipeline.bundle_writer import BundleWriter
from audit.pipeline.provenance import (
    build_provenance,
    canonical,
    component_info,
    digest,
    input_record,
    memory_record,
    merge_provenance,
)
from audit.pipeline.executors import make_executor
from audit.runtime.deadline import enforced
from audit.pipeline.gate import recorded
from audit.pipeline.releases import build_releases, sample_release
from audit.pipeline.spec import (  # noqa: F401  (re-exported: the runner's public names)
    CORPUS_REF, NOT_IN_KEY, AuditSpec, ComponentSpec, GateSpec, InputSpec, ReleaseSpec, load_spec, parse_spec,
    read_spec_file,
)
from audit.pipeline.calls import as_given, component_params, seed_keyword


class ComponentError(AnonauditError):
    """An attack or metric failed while it ran (its exception is the ``__cause__``)."""


def _echo(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the audit


@dataclass
class AuditOutcome:
    """What :meth:`Audit.run` did: the results file, and how much was computed vs reused."""

    results: ResultsFile
    #: The results file written (``None``: the results stayed in memory).
    path: Path | None
    computed: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    releases: dict[str, Release] = field(default_factory=dict)
    seconds: float = 0.0
    #: ``(kind, name, release)`` of every result this run computed or reused, in order.
    keys: list[tuple[str, str, str]] = field(default_factory=list)
    #: This run's release copies (JSONL bytes) by the path the provenance records for each.
    copies: dict[str, bytes] = field(default_factory=dict)
    #: The estimate of a calibration-only run (``whole=``), nothing else computed.
    estimate: Any = None


@dataclass
class _RunState:
    """What a run has done so far, saved after every pair (:meth:`Audit._save`): the results file
    and this run's own results, the pairs done, the provenance of inputs, releases and components."""

    rf: ResultsFile
    path: Path | None
    started: float
    pairs: dict[str, Any]
    components: dict[str, Any]
    inputs: dict[str, Any] = field(default_factory=dict)
    releases: dict[str, Any] = field(default_factory=dict)
    mine: list[Result] = field(default_factory=list)
    outcome: AuditOutcome = None  # type: ignore[assignment]  # set once the releases are built
    executor_info: dict[str, Any] = field(default_factory=dict)


class Audit:
    """Runs an :class:`AuditSpec`.

    ``on_error="raise"`` stops at the first failing component (``anonaudit run``);
    ``"skip"`` records the failure in the provenance and goes on (``anonaudit demo``),
    and a component that cannot even be loaded is then skipped with a note.
    ``results_path``: the results file (default ``OUT/results.json``; the command-line driver
    names any file, whose folder is then the spec's ``out``); results and provenance merge
    into it when it exists. ``writer``: the :class:`BundleWriter` of that file, made (with the
    output guard) by the caller; by default one is made for ``results_path``. A spec whose ``out``
    is ``None`` (and no ``results_path`` or ``writer``) writes nothing: results, provenance and
    release copies stay in memory (the API without ``out=``). ``resume=False`` recomputes pairs
    that an earlier run finished.
    ``executor``: where per-document work runs; default the one the spec names
    (:mod:`audit.pipeline.executors`), started for the run and closed after it. One given here
    belongs to the caller. ``replace``: the results path holds a file of another kind that the
    user chose to write over (``--force``, checked by :func:`audit.pipeline.outputs.check_outputs`):
    it is replaced by a new results file at the first save, not read. ``time_limit``: minutes the
    run may take; before any component runs, a short calibration estimates the stages' time and a
    limit the estimate exceeds stops the run with an AnonauditError (:mod:`audit.pipeline.estimate`);
    then enforced: at the limit the work stops, finished pairs saved (:mod:`audit.runtime.deadline`).
    ``whole``: the inputs are a calibration slice of larger work (the bench's); the run only
    calibrates, extrapolates to ``whole`` and returns the estimate in ``outcome.estimate``.
    """

    def __init__(self, spec: AuditSpec, *, registry: Registry | None = None, on_error: str = "raise",
                 progress: bool = True, echo: Callable[[str], None] | None = _echo,
                 command: str = "run", results_path: str | Path | None = None, resume: bool = True,
                 executor: Any = None, replace: bool = False, writer: BundleWriter | None = None,
                 time_limit: float | None = None, whole: Any = None):
        from audit.pipeline.estimate import check_limit

        self.time_limit = check_limit(time_limit, "time limit")
        self.whole = whole
        self.executor = executor
        self.writer = writer
        self.replace = replace
        if on_error not in ("raise", "skip"):
            raise ValueError("on_error must be 'raise' or 'skip'")
        self.spec = spec
        self.registry = given_registry(registry)
        self.on_error = on_error
        self.progress = progress
        self.echo = echo or (lambda msg: None)
        self.command = command
        self._results_path = None if results_path is None else Path(results_path)
        self.resume = resume

    @property
    def results_path(self) -> Path | None:
        """The results file, or ``None`` when the results stay in memory."""
        if self.writer is not None:
            return self.writer.path
        if self._results_path is None and self.spec.out is None:
            return None
        return self._results_path or self.spec.out / "results.json"

    def _writer(self) -> BundleWriter | None:
        """The run's writer (made for :attr:`results_path` before any work when none was given);
        ``None`` in memory."""
        if self.writer is None and self.results_path is not None:
            self.writer = BundleWriter(self.results_path, replace=self.replace)
        return self.writer

    # -- data
    def _load_dev(self) -> Release | None:
        """The dev release the background file carries (a TRI file's dev column), if any."""
        from audit.io.loaders import load_dev

        inp = self.spec.background
        return None if inp is None or inp.path is None else load_dev(str(inp.path), format=inp.format)

    def _load_corpus(self, inp: InputSpec, name: str) -> Corpus:
        """The corpus of an input: read from its file, or the documents given in memory as they are."""
        from audit.io.loaders import load_corpus

        if inp.corpus is not None:
            return Corpus(list(inp.corpus), name=name, source=inp.label)
        return load_corpus(str(inp.path), format=inp.format, name=name, columns=dict(inp.columns) or None)

    # -- the run
    def run(self, resources: Resources | None = None) -> AuditOutcome:
        """Run the audit. One :class:`~audit.models.resources.Resources` serves every sanitizer
        and component of the run (each model is loaded once) and is closed at the end; so is the
        executor (a Ray cluster is joined, or started, before any data is loaded). A caller that
        runs several audits in a row (``anonaudit harden``) may pass its own resources, which stay
        open (with their executor)."""
        with enforced(None if self.whole is not None else self.time_limit):  # the calibration included
            if resources is not None:
                return self._run(resources)
            executor = self.executor or make_executor(self.spec.executor)
            try:
                executor.start()
                if executor.kind != "local":
                    info = executor.info()
                    self.echo(f"executor: {info['kind']} at {info.get('address')}: {info.get('nodes')} node(s), "
                              f"{info.get('cpus')} CPU(s), {info.get('gpus')} GPU(s), {info.get('workers')} worker(s) "
                              "per stage")
                with Resources(seed=self.spec.seed, progress=self.progress, executor=executor) as resources:
                    return self._run(resources)
            finally:
                if self.executor is None:
                    executor.close()

    def _run(self, resources: Resources) -> AuditOutcome:
        """The three steps of :meth:`run`: load the inputs, prepare the releases, run each component
        (:meth:`_run_component`). What is done is saved after every (component, release) pair, on
        failure and on interruption (:meth:`_save`), so a re-run resumes."""
        spec = self.spec
        writer = self._writer()
        path = None if writer is None else writer.path
        rf = ResultsFile() if writer is None else writer.previous()
        old_prov = rf.provenance if rf.provenance.get("command") else {}
        st = _RunState(rf=rf, path=path, started=time.time(), pairs=dict(old_prov.get("pairs", {})),
                       components=dict(old_prov.get("components", {})))

        self.echo("[1/3] loading data")
        originals, background, corpora, st.inputs = self._load_inputs(old_prov)
        self.echo(f"[2/3] preparing {len(spec.releases)} release spec(s)")
        previous = rf.provenance.get("releases")
        releases, releases_prov, copies = build_releases(spec, originals, previous if isinstance(previous, dict) else {},
                                                 registry=self.registry, resources=resources,
                                                 progress=self.progress, echo=self.echo,
                                                 copies_name="releases" if writer is None else writer.copies_name,
                                                 reuse_from=None if writer is None else writer.copies_folder,
                                                 results=path)
        st.releases = {**(previous if isinstance(previous, dict) and old_prov else {}), **releases_prov}
        dev = self._load_dev()
        scenario = Scenario(originals=originals, background=background, releases=tuple(releases), dev=dev)
        st.outcome = AuditOutcome(results=rf, path=path, releases={r.name: r for r in releases}, copies=copies)
        base_fp = {"originals": None if originals is None else originals.fingerprint(),
                   "background": None if background is None else background.fingerprint()}
        if dev is not None:  # keys of runs without a dev release stay what they were
            base_fp["dev"] = dev.corpus.fingerprint()
        st.executor_info = resources.executor.info()
        if writer is not None:  # the releases made (a sanitizer's output) are kept at once
            self._save(st, resources)

        if self.whole is not None:  # a calibration only (the bench's): the estimate, nothing run
            st.outcome.estimate = self._calibrate(st, scenario, corpora, base_fp, resources)
            return st.outcome
        if self.time_limit is not None:
            self._calibrate(st, scenario, corpora, base_fp, resources)
        self.echo(f"[3/3] running {len(spec.components)} component(s) on {len(releases)} release(s)")
        for ci, comp in enumerate(spec.components, 1):
            label = f"({ci}/{len(spec.components)}) {comp.kind} {comp.name}"
            self._run_component(comp, label, st, scenario, corpora, base_fp, resources)
        self._save(st, resources)
        st.outcome.seconds = time.time() - st.started
        return st.outcome

    def _calibrate(self, st: _RunState, scenario: Scenario, corpora: Mapping[str, Corpus], base_fp: dict[str, Any],
                   resources: Resources) -> Any:
        """The time limit said before the work: each component with pending releases calibrated on
        two small slices, and the run stopped when the estimate exceeds the limit (:mod:`audit.pipeline.estimate`);
        with :attr:`whole`, the estimate returned unchecked."""
        from types import SimpleNamespace

        from audit.pipeline.estimate import calibrate, check

        if self.whole is None:
            self.echo(f"  calibrating the stages against the time limit of {self.time_limit:g} min")
        done = SimpleNamespace(results=st.rf, reused=[], keys=[])  # _pending's record of reused pairs, unused here
        makers, evaluated = [], {}
        for comp in self.spec.components:
            _, params = self._create(comp, corpora, resources, progress=False)
            todo = self._pending(comp, params, list(scenario.releases), st.pairs, base_fp, done)
            if todo:
                makers.append((comp.label, lambda c=comp: self._create(c, corpora, resources, progress=False)[0]))
                evaluated[comp.label] = [sampled for _, sampled, _ in todo]
        estimate = calibrate(makers, scenario, evaluated, self.spec.seed, whole=self.whole, say=self.echo)
        if self.whole is None:
            self.echo("  " + check(estimate, self.time_limit, time.time() - st.started))
        return estimate

    def _save(self, st: _RunState, resources: Resources) -> None:
        """Write what this run computed into the results file, under the file's lock, on top of
        what is in it now: another command writing into the same file meanwhile keeps its
        results, pairs and releases (and so does this one)."""
        spec, outcome = self.spec, st.outcome
        prov = build_provenance(command=self.command, started=st.started, spec=spec, inputs=st.inputs,
                                releases=st.releases, components=st.components, pairs=st.pairs,
                                skipped=outcome.skipped, errors=outcome.errors,
                                executor={**st.executor_info, "stages": dict(resources.executor.timings)})

        def merge(current: ResultsFile | None) -> ResultsFile:
            merged = ResultsFile(results=list(current.results) if current else [],
                                 provenance=merge_provenance(current.provenance if current else {}, prov))
            merged.extend(st.mine)
            if spec.gate.max or spec.gate.min:  # the verdict travels with the file (audit.core.checks)
                merged.provenance["gate"] = {**merged.provenance.get("gate", {}), "checks": recorded(
                    merged, {"max": spec.gate.max, "min": spec.gate.min}, on_point=spec.gate.on_point)}
            return merged

        if self.writer is None:  # in memory: checked as a file's content is, written nowhere
            written = merge(None)
            written.check("results")
        else:  # the one writing step: new release copies, then results, summary and manifest
            written = self.writer.save(merge, outcome.copies)
        st.rf.results, st.rf.provenance = written.results, written.provenance

    def _run_component(self, comp: ComponentSpec, label: str, st: _RunState, scenario: Scenario,
                       corpora: Mapping[str, Corpus], base_fp: dict[str, Any], resources: Resources) -> None:
        """Create one component, evaluate it on every release it has not done yet
        (:meth:`_evaluate`), record a failure (or raise it, with ``on_error="raise"``), close it."""
        outcome, releases = st.outcome, list(scenario.releases)
        try:
            obj, params = self._create(comp, corpora, resources)
        except Exception as exc:  # cannot be imported or constructed
            if self.on_error == "raise":
                raise
            reason = str(exc) if isinstance(exc, AnonauditError) else f"{type(exc).__name__}: {exc}"
            outcome.skipped.append({"component": comp.label, "reason": reason})
            self.echo(f"  {label}: SKIPPED ({exc})")
            self._save(st, resources)
            return
        cls = type(obj)
        st.components[comp.label] = {
            "kind": comp.kind, "name": normalise(comp.name), "class": f"{cls.__module__}:{cls.__qualname__}",
            "description": getattr(cls, "description", "") or "", "params": canonical(obj.get_params()),
            **({"remedy": str(getattr(cls, "remedy", "") or "")} if comp.kind == "attack" else {}),
            "sample": comp.sample or self.spec.sample_documents,
        }
        todo = self._pending(comp, params, releases, st.pairs, base_fp, outcome)
        if not todo:
            self.echo(f"  {label}: all {len(releases)} release(s) already done, reused")
            return
        try:
            self._evaluate(obj, comp, params, label, todo, st, scenario, resources)
        except KeyboardInterrupt:
            self._save(st, resources)
            raise
        except Exception as exc:
            if isinstance(exc, MemoryError):
                self._save(st, resources)
                raise
            if self.on_error == "raise":
                self._save(st, resources)
                if isinstance(exc, AnonauditError):
                    raise
                # A component's own failure (a bug, a damaged cache): the reason, named, not a
                # traceback; the traceback goes to the log (``anonaudit -v``).
                logging.getLogger(__name__).info("%s failed", comp.label, exc_info=True)
                raise ComponentError(f"{comp.kind} {normalise(comp.name)!r} failed: {type(exc).__name__}: "
                                     f"{exc} (finished results are saved; `anonaudit -v ...` shows where it "
                                     "failed)") from exc
            outcome.errors.append({"component": comp.label, "reason": f"{type(exc).__name__}: {exc}",
                                   "input": isinstance(exc, AnonauditError)})
            self.echo(f"  {label}: FAILED ({type(exc).__name__}: {exc}); going on")
        finally:
            _close_quietly(obj)  # what it loaded itself; the shared models stay for the next one
        self._save(st, resources)

    def _evaluate(self, obj: Any, comp: ComponentSpec, params: Any, label: str, todo: list, st: _RunState,
                  scenario: Scenario, resources: Resources) -> None:
        """Fit ``obj`` once, then evaluate it on each pending release, saving after each."""
        prov, n_releases = st.components[comp.label], len(scenario.releases)
        llm_before = resources.llm_stats()
        t0 = time.time()
        self.echo(f"  {label}: {len(todo)} release(s) to do"
                  + (f", {n_releases - len(todo)} already done" if len(todo) < n_releases else ""))
        obj.fit(scenario)
        fit_s = round(time.time() - t0, 3)
        prov["fit_seconds"] = fit_s
        self.echo(f"    prepared (fit: models loaded, attacker trained or index built) in {fit_s:.1f}s")
        for rel, sampled, key in self._bar(todo, label):
            t1 = time.time()
            results = self._check(obj.evaluate(scenario, sampled), comp, rel, sampled)
            st.rf.extend(results)
            st.mine.extend(results)
            st.pairs[key] = {"component": comp.label, "release": rel.name, "params": canonical(params),
                             "results": [list(r.key) for r in results],
                             "seconds": round(time.time() - t1, 3),
                             "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             "documents": len(sampled), "of": len(rel)}
            st.outcome.computed.append(f"{comp.label}@{rel.name}")
            st.outcome.keys.extend(r.key for r in results)
            head = results[0] if results else None
            self.echo(f"    {rel.name}: " + (f"{head.name} = {head.value:.3f} (n={head.n})" if head else "no result")
                      + f" in {st.pairs[key]['seconds']:.1f}s")
            prov.update(component_info(obj))
            _add_llm_use(prov, llm_before, resources.llm_stats())
            self._save(st, resources)
        self.echo(f"  {label}: done in {time.time() - t0:.1f}s")

    def _load_inputs(self, old_prov: Mapping[str, Any]
                     ) -> tuple[Corpus | None, Corpus | None, dict[str, Corpus], dict[str, Any]]:
        """``(originals, background, corpora, inputs)``: the spec's corpora and the provenance
        record of each input."""
        spec = self.spec
        originals = self._load_corpus(spec.originals, "originals") if spec.originals else None
        background = self._load_corpus(spec.background, "background") if spec.background else None
        corpora = {k: self._load_corpus(v, k) for k, v in spec.corpora.items()}
        # A results file may gather several runs (``anonaudit attack`` commands merging into one
        # file): the inputs and releases of earlier runs stay described beside this run's.
        inputs: dict[str, Any] = dict(old_prov.get("inputs") or {})
        for role, inp, corpus in [("originals", spec.originals, originals), ("background", spec.background, background),
                                  *[(f"corpora.{k}", spec.corpora[k], c) for k, c in corpora.items()]]:
            if inp is not None and corpus is not None:
                inputs[role] = input_record(inp.path, corpus) if inp.corpus is None else memory_record(inp.source, corpus)
        return originals, background, corpora, inputs

    def _pending(self, comp: ComponentSpec, params: Any, releases: list[Release], pairs: Mapping[str, Any],
                 base_fp: Mapping[str, Any], outcome: AuditOutcome) -> list[tuple[Release, Release, str]]:
        """``(release, sampled release, pair key)`` of each pair still to compute. A pair an earlier
        run finished (its key recorded, every result present) is counted in ``outcome`` as reused."""
        spec = self.spec
        rf = outcome.results
        budget = comp.sample or spec.sample_documents
        todo: list[tuple[Release, Release, str]] = []
        for rel in releases:
            sampled = sample_release(rel, budget, spec.seed)
            key = digest({"component": comp.label, "params": params, "release": rel.name,
                          "release_fp": sampled.corpus.fingerprint(), **base_fp})
            done = pairs.get(key)
            if self.resume and done and all(rf.get(n, r, k) is not None
                                            for k, n, r in map(tuple, done.get("results", []))):
                outcome.reused.append(f"{comp.label}@{rel.name}")
                outcome.keys.extend(tuple(k) for k in done.get("results", []))
                continue
            todo.append((rel, sampled, key))
        return todo

    def _create(self, comp: ComponentSpec, corpora: Mapping[str, Corpus], resources: Resources,
                progress: bool | None = None):
        cls = self.registry.get(comp.kind, comp.name)
        params = component_params(self.spec, cls.param_names(), comp.params,
                                  progress=self.progress if progress is None else progress, cls=cls)
        seed = seed_keyword(self.spec.seed, cls.param_names())
        resolved = {k: corpora[v[len(CORPUS_REF):]] if isinstance(v, str) and v.startswith(CORPUS_REF) else v
                    for k, v in params.items()}
        try:
            obj = self.registry.create(comp.kind, comp.name, **seed, **resolved)
        except AnonauditError:
            raise
        except (TypeError, ValueError) as exc:
            raise AnonauditError(f"{self.spec.source}: {comp.kind} {comp.name!r}: bad parameters: {exc}") from None
        return obj.use(resources), canonical({k: v for k, v in as_given(comp.params, seed, params).items()
                                              if k not in NOT_IN_KEY})

    def _bar(self, todo, label):
        from audit.runtime.progress import bar as progress_bar, interactive

        # Off a terminal (or a notebook's widget) the runner's own line per release says the same thing.
        return progress_bar(todo, desc=f"  {label}", unit="release", enabled=self.progress and interactive())

    def _check(self, results: Any, comp: ComponentSpec, rel: Release, sampled: Release) -> list[Result]:
        want = "attack" if comp.kind == "attack" else "utility"
        if not isinstance(results, list) or not all(isinstance(r, Result) for r in results):
            raise AnonauditError(f"{comp.kind} {comp.name!r} returned {type(results).__name__}, not a list of Result")
        out = []
        for r in results:
            if r.kind != want:
                raise AnonauditError(f"{comp.kind} {comp.name!r} returned a result of kind {r.kind!r} "
                                     f"(expected {want!r})")
            wrong = figure_problems(r.to_dict()) + details_problems(r.details)
            wrong = wrong or consistency_problems(r)
            if wrong:  # NaN, n = 0, an interval outside [0, 1], a figure its findings deny: a failure
                raise AnonauditError(f"{comp.kind} {comp.name!r} on release {rel.name!r}: result {r.name!r} "
                                     f"cannot be used: {'; '.join(wrong)}")
            own = r.details.get("sampled")
            if len(sampled) < len(rel) and (own is None or isinstance(own, Mapping)):
                # A component that measured a sample of the runner's sample keeps its count, of
                # the whole release. Results are frozen: a new one with a new details dict.
                mark = ({**own, "of": len(rel)} if isinstance(own, Mapping)
                        else {"documents": len(sampled), "of": len(rel), "seed": self.spec.seed})
                if isinstance(own, Mapping) and isinstance(own.get("made"), str):  # its release was the sample
                    mark["made"] = f"{own['made']} (the runner's seeded sample of {len(sampled)} of {len(rel)} documents)"
                r = dataclasses.replace(r, details={**r.details, "sampled": mark})
            out.append(r)
        return out


def _add_llm_use(entry: dict[str, Any], before: Mapping[str, int], after: Mapping[str, int]) -> None:
    """Record in a component's provenance how it used the run's answer cache (its own share of
    the shared LLMs' hits, misses and backend calls)."""
    used = {k: after[k] - before[k] for k in LLM_STATS}
    if any(used.values()):
        entry["stats"] = {**entry.get("stats", {}), "llm_cache": used}


def _close_quietly(obj: Any) -> None:
    """``obj.close()``; a component that fails to release a resource never fails the audit."""
    close = getattr(obj, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # releasing is best effort
            close()
