"""A bench's time limit said before any of its work (``anonaudit bench --time-limit MINUTES``,
``anonaudit.bench(time_limit=)``; issue 57, "Bad input and limits").

Unlike a run, whose releases are made before its calibration, a bench estimates all of its work
before doing any, since making the releases is a large part of it (the LLM sanitizers, an
external command):

1. two small slices of the originals (:func:`audit.pipeline.estimate.slices`: 2 documents that
   load the models, then 3 others, timed) are sanitized by every contender the bench would make
   (a registered sanitizer, an external command, run on the slices in a temporary folder); each
   one's time is extrapolated by the characters of the documents it will sanitize (all of them,
   or its seeded sample); a release reused from ``OUT/sanitized`` counts nothing;
2. every attack and metric is calibrated (:class:`~audit.pipeline.runner.Audit` with ``whole=``)
   on those 5 documents and the contenders' releases of them (a release file is cut to them), and
   extrapolated to the whole corpus and each release's estimated size;
3. the sum, with the time already spent, is checked against the limit
   (:func:`audit.pipeline.estimate.check`): exit 2 with the estimate per stage and what would
   cut the work, before anything is sanitized, attacked or written but the empty folder.

What is not counted is said: the leaderboard and report (seconds), and a stage that could not be
calibrated (named, with why).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from audit.core.data import Corpus, Release, Scenario
from audit.pipeline.estimate import TIMED, WARM, Estimate, StageEstimate, Whole, chars, check, slices

#: What a bench stopped by its limit has not done.
NOTHING = ("Nothing was sanitized (but the calibration's documents), attacked, measured or written")
#: What would cut a bench's work, said when its limit cannot be met.
CUT = ("--budget quick, --documents N, fewer comparison points (--compare, --with) or a smaller "
       "--sanitizer-sample, fewer attacks or metrics, --sample N documents")


def check_bench(spec: Any, reg: Any, resources: Any, writer: Any, limit: float, started: float,
                echo: Callable[[str], None]) -> str:
    """Calibrate a bench (see the module doc) and check it against ``limit`` minutes (``started``:
    when the bench began, ``time.time()``). Returns the line to say; raises an AnonauditError
    when the limit cannot be met."""
    t0 = time.perf_counter()
    echo(f"bench: calibrating every stage against the time limit of {limit:g} min")
    base = spec.originals if spec.originals is not None else _first_release(spec).corpus
    cut = slices(Scenario(originals=spec.originals, background=spec.background,
                          releases=(Release("calibration", base),)), spec.seed)
    if not cut:
        est = Estimate((StageEstimate("bench", None, 0.0, f"fewer than {WARM + TIMED} documents to calibrate on"),),
                       0, len(base), time.perf_counter() - t0)
        return check(est, limit, time.time() - started, CUT, NOTHING)
    warm, timed = cut
    ids = [*warm.releases[0].corpus.ids, *timed.releases[0].corpus.ids]
    stages, releases, sizes = [], [], {}
    for c in [*spec.contenders[1:], spec.contenders[0]]:
        stage, rel, full = _contender(c, spec, reg, resources, writer, warm, timed, ids)
        if stage is not None:
            stages.append(stage)
        if rel is not None and len(rel):
            releases.append(rel)
            sizes[c.name] = full
    audit = _attacks_estimate(spec, reg, resources, warm, timed, releases, sizes)
    stages.extend(audit.stages)
    est = Estimate(tuple(stages), WARM + TIMED, len(base), time.perf_counter() - t0)
    return check(est, limit, time.time() - started, CUT, NOTHING) + "; not counted: the leaderboard and its page"


def _first_release(spec: Any) -> Release:
    from audit.pipeline.bench_releases import given_release

    return given_release(next(c for c in spec.contenders if c.kind in ("file", "release")), spec)


def _contender(c: Any, spec: Any, reg: Any, resources: Any, writer: Any, warm: Scenario, timed: Scenario,
               ids: list[str]) -> tuple[StageEstimate | None, Release | None, int]:
    """``(its making's estimate or None, its release of the calibration documents, the characters
    its whole release is estimated to have)`` of one contender."""
    from audit.pipeline.bench_releases import (command_release, contender_documents, given_release, release_key,
                                               sanitize_with)

    keep = set(ids)
    label = f"sanitize {c.name}"
    if c.kind in ("file", "release") or spec.originals is None:
        if c.kind not in ("file", "release"):
            return StageEstimate(label, None, 0.0, "no originals to sanitize"), None, 0
        rel = given_release(c, spec)
        return None, _cut(rel, keep), chars(rel)
    docs = contender_documents(c, spec)
    if c.kind == "sanitizer" and writer is not None and writer.reusable(c.name, release_key(c, docs, spec)) is not None:
        rel = given_release(dataclasses.replace(c, kind="file", path=str(writer.release_path(c.name))), spec)
        return StageEstimate(label + " (reused)", 0.0, 0.0), _cut(rel, keep), chars(rel)

    def make(part: Scenario) -> tuple[Release, float]:
        t = time.perf_counter()
        rel = (command_release(c, part.originals, spec, None) if c.kind == "command"
               else sanitize_with(c, part.originals, reg, resources, spec))
        return rel, time.perf_counter() - t

    started = time.perf_counter()
    try:
        (w_rel, _), (t_rel, t_s) = make(warm), make(timed)
    except Exception as exc:  # noqa: BLE001 - a contender that fails on the slices is not estimated, and said so
        return StageEstimate(label, None, time.perf_counter() - started, f"{type(exc).__name__}: {exc}"), None, 0
    rate = t_s / max(1, chars(timed.originals))  # the warm slice's loads stay in the shared resources
    rel = Release(c.name, Corpus([*w_rel.corpus, *t_rel.corpus], name=c.name), aligned=w_rel.aligned)
    made = chars(warm.originals) + chars(timed.originals)
    full = round(chars(rel) * chars(docs) / max(1, made))
    return StageEstimate(label, rate * chars(docs), time.perf_counter() - started), rel, full


def _cut(rel: Release, keep: set[str]) -> Release:
    return dataclasses.replace(rel, corpus=Corpus([d for d in rel.corpus if d.id in keep], name=rel.name))


def _attacks_estimate(spec: Any, reg: Any, resources: Any, warm: Scenario, timed: Scenario,
                      releases: list[Release], sizes: dict[str, int]) -> Estimate:
    """The attacks' and metrics' estimate: an :class:`~audit.pipeline.runner.Audit` that only
    calibrates, on the calibration documents and the contenders' releases of them (the longest
    first: its slices are taken from the first), extrapolated to the whole bench."""
    from audit.pipeline.entries import ReleaseSpec
    from audit.pipeline.runner import Audit, parse_spec
    from audit.pipeline.spec import InputSpec

    def joined(role: str) -> Corpus | None:
        parts = [getattr(warm, role), getattr(timed, role)]
        if parts[0] is None:
            return None
        docs = {d.id: d for part in parts for d in part}  # one person's background in both slices: once
        return Corpus(list(docs.values()), name=role)

    data: dict[str, Any] = {"title": "bench calibration", "attacks": list(spec.attacks),
                            "metrics": list(spec.metrics), "models": {"llm": spec.llm}, "budget": spec.budget,
                            "releases": [ReleaseSpec(r.name, release=r, label="calibration")
                                         for r in sorted(releases, key=len, reverse=True)]}
    for role in ("originals", "background"):
        corpus = joined(role)
        if corpus is not None:
            data[role] = InputSpec(None, corpus=corpus, label=f"{role} (calibration)")
    if not releases:
        return Estimate((), 0, 0, 0.0)
    aspec = dataclasses.replace(parse_spec(data, source="bench calibration", registry=reg, in_memory=True),
                                seed=spec.seed)
    whole = Whole(chars(spec.originals) + chars(spec.background), sizes)
    outcome = Audit(aspec, registry=reg, on_error="skip", progress=False, echo=None, command="bench",
                    whole=whole).run(resources)
    return outcome.estimate
