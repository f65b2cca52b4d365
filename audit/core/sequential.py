"""Sampling to a stated precision: documents in a seeded order, in batches, until the interval is
narrow enough or every document is done.

A stage that calls a language model per document (the claim linker's leakage judge, span
guessing) cannot always afford every document of a large release, and a fixed sample of ten
documents gives an interval like [0.00, 0.25] that nobody can act on. Instead the stage takes
its documents in one order fixed by the seed (:func:`seeded_order`), looks at its interval
after batches that double in size (:func:`look_points`: 10, 20, 40, ... documents, then all),
and stops at the first look where the interval's half-width is at most the target
(:data:`DEFAULT_HALF_WIDTH`), or when every document is done. :class:`SequentialSample` records
how many documents that took, the target and whether it was reached; it is the result's
``details["sampled"]`` note, which the report shows beside the figure.

The interval is the stage's own (Wilson for one trial per document, the cluster bootstrap of
:mod:`audit.core.stats` for trials within documents). The rule stops on the interval's width,
never on its position (not "stop once the leakage looks low"), and looks only at the doubling
points, so it costs little coverage: docs/methods.md ("Sampling to a precision") gives the
simulated coverage and ``benchmarks/sequential_coverage.py`` reproduces it. The batches depend
only on the number of documents, so a re-run with the same seed and inputs is identical.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: The default target: the 95% interval's half-width, in the figure's units (a rate in [0, 1]).
DEFAULT_HALF_WIDTH = 0.05
#: Documents at the first look; each later look doubles it.
FIRST_LOOK = 10


def check_target(target: Any, what: str) -> None:
    """A target must be ``None`` (every document) or a half-width in (0, 0.5]."""
    from audit.core.errors import AnonauditError

    if target is None:
        return
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target <= 0.5:
        raise AnonauditError(f"{what}: the interval target must be a half-width above 0 and at most 0.5 "
                             f"(e.g. 0.05), or none for every document; got {target!r}")


def seeded_order(ids: Sequence[str], seed: int, salt: str) -> list[str]:
    """``ids`` in the order the seed fixes (the same for any input order of the same ids)."""
    order = sorted(set(ids))
    random.Random(f"{seed}:{salt}").shuffle(order)
    return order


def look_points(n: int, first: int = FIRST_LOOK) -> list[int]:
    """Cumulative document counts at which the interval is looked at: ``first``, doubling, then ``n``."""
    if n <= 0:
        return []
    out, k = [], max(1, first)
    while k < n:
        out.append(k)
        k *= 2
    return out + [n]


def half_width(ci: tuple[float, float] | None) -> float:
    return 0.5 if ci is None else (ci[1] - ci[0]) / 2


@dataclass(frozen=True)
class SequentialSample:
    """How a sequentially sampled figure was made: ``documents`` of ``of`` in the seeded order,
    stopped at the first look with ``half_width <= target`` (``reached``) or at the last
    document. ``target`` None: every document was asked for."""

    documents: int
    of: int
    seed: int
    target: float | None
    half_width: float
    reached: bool
    looks: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The ``details["sampled"]`` note (:class:`audit.core.details.Sampled` reads it)."""
        return {"documents": self.documents, "of": self.of, "seed": self.seed, "target": self.target,
                "half_width": round(self.half_width, 4), "reached": self.reached, "looks": list(self.looks),
                "rule": "documents in a seeded order; the 95% interval looked at after 10, 20, 40, ... documents; "
                        "stopped at the first look whose half-width is at most the target, or at the last document"}

    def sentence(self) -> str:
        return describe(self.documents, self.of, self.target, self.half_width, self.reached)


def describe(documents: int, of: int, target: float | None, width: float | None, reached: bool | None) -> str:
    """One line on how a figure was sampled (for terminals and the report)."""
    w = "" if width is None else f"±{width:.3f}"
    some = f"every document ({of})" if documents >= of else f"{documents} of {of} documents"
    if target is None:
        return some if documents >= of else f"a seeded sample of {some}"
    if reached:
        return f"{documents} of {of} documents, taken until the 95% interval reached ±{target:g} ({w})"
    return f"{some}: the 95% interval ({w or 'unknown'}) is wider than the ±{target:g} asked for"


def projection(done: int, n: int, seconds: float, width: float, target: float | None) -> str:
    """What the first look says about the rest: its pace, and the time the remaining documents
    would take if the target is not reached before the last one (the most it can cost)."""
    rest = (n - done) * seconds / max(done, 1)
    shown = f"{rest / 60:.1f} min" if rest >= 90 else f"{rest:.0f} s"
    goal = f"target ±{target:g}" if target is not None else "every document"
    return (f"{done} of {n} documents in {seconds:.0f} s ({seconds / max(done, 1):.1f} s each), ±{width:.3f} so far "
            f"({goal}); the other {n - done}, if all are needed: about {shown} more")


def sample_sequentially(ids: Sequence[str], *, seed: int, salt: str, target: float | None,
                        run: Callable[[list[str]], None], interval: Callable[[], tuple[float, float] | None],
                        limit: int | None = None, first: int = FIRST_LOOK,
                        say: Callable[[str], None] | None = None) -> SequentialSample:
    """Feed ``run`` the documents ``ids`` in the seeded order, one batch per look, until
    ``interval()`` (the figure so far) is narrow enough; ``target`` None runs every document (in
    the same batches, so the first one calibrates). ``limit``: at most this many documents (a
    cap the user set). ``run`` adds the batch's trials to what ``interval`` reads. ``say``: told,
    after the first batch when more are to come, what the rest may cost (:func:`projection`)."""
    order = seeded_order(ids, seed, salt)
    n = len(order) if limit is None else min(limit, len(order))
    looks = look_points(n, first)
    done, width, taken = 0, 0.5, []
    started = time.perf_counter()
    for k in looks:
        run(order[done:k])
        done = k
        taken.append(k)
        width = half_width(interval())
        if target is not None and width <= target:
            return SequentialSample(done, len(order), seed, target, width, True, tuple(taken))
        if say is not None and len(taken) == 1 and done < n:
            say(projection(done, n, time.perf_counter() - started, width, target))
    return SequentialSample(done, len(order), seed, target, width, target is not None and width <= target,
                            tuple(taken))
