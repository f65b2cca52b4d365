"""A time limit said before the work: a short calibration of each stage, then an estimate.

With a time limit (``anonaudit run --time-limit MINUTES``, ``time_limit=`` in the API), the runner
calibrates before its components run (:func:`calibrate`): every component that has work to do is
fitted and evaluated on two small slices of the audit, each a few documents of the first release,
their originals and their people's background, taken in an order fixed by the seed (the *warm*
slice loads the models and fills the caches; the *timed* slice, other documents, gives the rate).
Each stage's time is then extrapolated by the characters it reads: its preparation (``fit``) by the
characters of the originals and the background, its evaluation by those of each release it will
evaluate. What the warm slice took beyond that rate (loading the models into the run's shared
resources) is not counted again: the calibration runs on the run's own resources, which keep them.
A load a component makes for itself each time it is built is in the timed slice's rate, so it is
still counted (extrapolated: an upper bound). Work a component does once per fit whatever the
data's size, and says so (its ``once_seconds_`` after an evaluation: the claim linker's judge
control), is counted once, not extrapolated by characters and releases (it made the demo's
estimate 86 minutes for a 14-minute run); it is measured on the slice, so a control that grows
with the documents up to its cap is counted at the slice's size. A stage that samples to a
precision is counted for every document: the estimate is an upper bound there.

When the estimate and the time already spent exceed the limit, the run stops before any component
runs (:func:`check`): an :class:`~audit.core.errors.AnonauditError` (exit 2 on the command line)
gives the estimate per stage, what the calibration measured, and what would cut the work. The
calibration's LLM answers, spaCy parses and vectors stay in the caches, so a run that goes on
reuses them. Releases that sanitizers make are built before the calibration and are not counted.

A bench (``anonaudit bench --time-limit``, :mod:`audit.pipeline.bench_estimate`) estimates all of
its work before any: each sanitizer it must run is timed on the same two slices of the originals,
and the attacks and metrics are calibrated on the releases the sanitizers made of those slices,
then extrapolated to the whole work it describes (:class:`Whole`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from audit.core.data import Corpus, Release, Scenario
from audit.core.errors import AnonauditError

#: Documents in the warm slice and in the timed slice.
WARM, TIMED = 2, 3


@dataclass(frozen=True)
class Whole:
    """The work a calibration slice stands for: the characters the stages would fit on (the
    whole originals and background), and each release's characters by name (a release not named
    counts as it is)."""

    fit_chars: int
    release_chars: Mapping[str, int]


@dataclass(frozen=True)
class StageEstimate:
    """One component's estimate: ``seconds`` for the whole run (None when it could not be calibrated,
    ``problem`` says why), and what its calibration took (``calibration_seconds``)."""

    component: str
    seconds: float | None
    calibration_seconds: float
    problem: str | None = None


@dataclass(frozen=True)
class Estimate:
    """The stages' estimates, the documents the calibration read, and its own time."""

    stages: tuple[StageEstimate, ...]
    documents: int
    of: int
    seconds: float  # the calibration's own time

    @property
    def total(self) -> float:
        """Seconds the stages that could be calibrated are estimated to take."""
        return sum(s.seconds or 0.0 for s in self.stages)

    def describe(self) -> str:
        parts = ", ".join(f"{s.component} ~{_minutes(s.seconds)}" if s.seconds is not None
                          else f"{s.component}: not calibrated ({s.problem})" for s in self.stages)
        return (f"estimated {_minutes(self.total)} for {len(self.stages)} stage(s) ({parts}), from a calibration "
                f"on {self.documents} of {self.of} documents that took {_minutes(self.seconds)}")


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds:.1f} s" if seconds < 60 else f"{seconds / 60:.1f} min"


def chars(corpus: Corpus | Release | None) -> int:
    return 0 if corpus is None else sum(len(d.text) for d in corpus)


def slices(scenario: Scenario, seed: int) -> list[Scenario]:
    """The warm and the timed slice: :data:`WARM` and :data:`TIMED` documents of the first release
    (in a seeded order), with their originals and their people's background (an empty list when
    the release has fewer than ``WARM + TIMED`` documents)."""
    first = scenario.releases[0]
    ids = sorted(first.corpus.ids)
    if len(ids) < WARM + TIMED:
        return []
    random.Random(f"{seed}:calibration").shuffle(ids)
    out = []
    for chosen in (ids[:WARM], ids[WARM:WARM + TIMED]):
        keep = set(chosen)
        originals = None if scenario.originals is None else Corpus(
            [d for d in scenario.originals if d.id in keep], name=scenario.originals.name)
        people = {d.subject for d in (originals or first.corpus) if d.id in keep and d.subject} | keep
        background = None if scenario.background is None else Corpus(
            [d for d in scenario.background if (d.subject or d.id) in people], name=scenario.background.name)
        release = Release(first.name, Corpus([d for d in first.corpus if d.id in keep], name=first.corpus.name),
                          aligned=first.aligned)
        out.append(Scenario(originals=originals, background=background, releases=(release,)))
    return out


def _timed(obj: Any, scenario: Scenario) -> tuple[float, float, float]:
    """Seconds to fit ``obj`` on ``scenario`` and to evaluate it on its one release (then closed),
    and the part of the evaluation it says it does once per fit whatever the data (``once_seconds_``)."""
    try:
        t = time.perf_counter()
        obj.fit(scenario)
        fitted = time.perf_counter()
        obj.evaluate(scenario, scenario.releases[0])
        evaluated = time.perf_counter() - fitted
        once = min(evaluated, max(0.0, float(getattr(obj, "once_seconds_", 0.0) or 0.0)))
        return fitted - t, evaluated - once, once
    finally:
        close = getattr(obj, "close", None)
        if callable(close):
            close()


def calibrate(components: Sequence[tuple[str, Callable[[], Any]]], scenario: Scenario, evaluated: dict[str, list],
              seed: int, whole: Whole | None = None, say: Callable[[str], None] | None = None) -> Estimate:
    """The estimate of each component (``(label, make)``: ``make()`` builds it, without progress
    bars) on ``scenario``, evaluated on the releases ``evaluated[label]`` (its pending ones, each as
    it will be evaluated: sampled or whole). ``whole``: ``scenario`` is a slice of that work, to
    which the estimate extrapolates. ``say``: told each stage's estimate as it is made (a
    calibration of LLM stages takes minutes). See the module doc."""
    t0 = time.perf_counter()
    warm, timed = (slices(scenario, seed) or [None, None])
    full_fit = chars(scenario.originals) + chars(scenario.background) if whole is None else whole.fit_chars
    rel_chars = (chars if whole is None else lambda r: whole.release_chars.get(r.name, chars(r)))
    stages = []
    for label, make in components:
        started = time.perf_counter()
        if warm is None:
            stages.append(StageEstimate(label, None, 0.0, f"fewer than {WARM + TIMED} documents to calibrate on"))
            continue
        try:
            _, (t_fit, t_eval, once) = _timed(make(), warm), _timed(make(), timed)
        except Exception as exc:  # noqa: BLE001 - a stage that cannot run on a slice is not estimated, and said so
            stages.append(StageEstimate(label, None, time.perf_counter() - started, f"{type(exc).__name__}: {exc}"))
            if say is not None:
                say(f"    {label}: not calibrated ({stages[-1].problem})")
            continue
        fit_rate = t_fit / max(1, chars(timed.originals) + chars(timed.background))
        eval_rate = t_eval / max(1, chars(timed.releases[0]))
        # the warm slice's time (w_fit, w_eval) loaded what the run keeps: not counted again
        seconds = once + fit_rate * full_fit + eval_rate * sum(rel_chars(r) for r in evaluated[label])
        stages.append(StageEstimate(label, seconds, time.perf_counter() - started))
        if say is not None:
            say(f"    {label}: ~{_minutes(seconds)} (calibrated in {_minutes(stages[-1].calibration_seconds)}, "
                f"{len(stages)} of {len(components)})")
    return Estimate(tuple(stages), 0 if warm is None else WARM + TIMED, len(scenario.releases[0]),
                    time.perf_counter() - t0)


#: What would cut an audit's work, said when its limit cannot be met.
CUT = "--budget quick, fewer releases, attacks or metrics, --sample N documents"


def check(estimate: Estimate, limit_minutes: float, spent: float, cut: str = CUT,
          nothing: str = "Nothing was attacked or measured") -> str:
    """The line to say when the estimate fits in ``limit_minutes`` (``spent`` seconds already gone);
    an AnonauditError that says why (``nothing``: what was not done; ``cut``: what would cut the
    work) when it does not."""
    left = limit_minutes * 60 - spent
    head = f"time limit {limit_minutes:g} min"
    if estimate.total > left:
        raise AnonauditError(
            f"{head} cannot be met: {estimate.describe()}; {_minutes(spent)} already spent. {nothing}. "
            f"Cut the work ({cut}) or give a longer --time-limit")
    unknown = [s.component for s in estimate.stages if s.seconds is None]
    return (f"{head}: {estimate.describe()}; {_minutes(spent)} spent, {_minutes(left)} left"
            + (f" (not counted: {', '.join(unknown)})" if unknown else ""))


def check_limit(value: Any, where: str = "time_limit") -> float | None:
    """``value`` as a number of minutes (None: no limit), else an error naming ``where``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value != value:
        raise AnonauditError(f"{where}: must be a positive number of minutes, got {value!r}")
    return float(value)
