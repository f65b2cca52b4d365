"""Results that agree with themselves: the one check of how a result's fields relate.

The shape check (:mod:`audit.core.resultshape`) judges each field alone; a result whose fields
are each fine can still contradict itself (an edited ``results.json``, a plugin's bug): a value
outside its own interval, a risk of 0 beside 12 of 12 documents hit, a ``beats_baseline`` that
the interval and the baseline deny. Every reader that draws a conclusion (loading a results
file, saving one, the runner taking a component's results, the gate, the report) runs
:func:`consistency_problems` on each result, here and nowhere else, and refuses a result that
disagrees, naming the result, its release and the fields.

The relations checked, where they are defined:

* the value lies within its interval ``ci`` (within
  :data:`~audit.core.resultshape.SHARE_TOLERANCE`);
* ``beats_baseline`` is whether the interval's lower bound (the value when there is no
  interval) lies above the baseline, as anonymeter decides it; it is never read from the
  file: a result that leaves it unset gets it recomputed (:func:`beats`), and a stored flag
  that disagrees is refused;
* a success rate (``details.successes``, :meth:`~audit.core.results.Result.from_risk`) is
  ``successes / n``, or ``successes / details.trials`` within the rounding of ``successes``
  when its trials are clustered in documents;
* a result that declares how its value follows from its per-document findings
  (``details.value_from``, :data:`~audit.core.details.VALUE_FROM`) is recomputed from them, and its ``n`` with it:

  - ``"success"``: the share of the scored findings (``success`` true or false) that succeeded;
    ``n`` is the number scored;
  - ``"sum:NUM/DEN"``: the sum of the findings' fact NUM over the sum of their fact DEN
    (span guessing: recovered spans over attacked spans); ``n`` is the number of findings;
  - ``"mean:FACT"``: the mean of the findings' fact FACT (a similarity per document) over the
    findings that have it (a number; null where the figure could not be measured); ``n`` is
    their number.

  A result without ``value_from`` is not recomputed from its findings: not every figure is a
  share of them (a leakage score judged by an LLM, a clustering's agreement).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from audit.core.details import VALUE_FROM
from audit.core.names import normalise
from audit.core.resultshape import SHARE_TOLERANCE, clamp_share

if TYPE_CHECKING:
    from audit.core.results import Finding, Result

__all__ = ["VALUE_FROM", "beats", "consistency_problems", "results_problems"]



def beats(value: float, ci: Sequence[float] | None, baseline: float | None) -> bool | None:
    """Whether a figure beats its baseline: the lower bound of ``ci`` (``value`` without one)
    above ``baseline``; ``None`` when there is no baseline or the figure is not finite."""
    if baseline is None or not _finite(baseline):
        return None
    low = ci[0] if ci is not None else value
    return bool(low > baseline) if _finite(low) else None


def consistency_problems(r: Result) -> list[str]:
    """What in ``r`` contradicts the rest of ``r`` (empty when it holds together); each message
    names the fields. Figures that are not finite numbers are the shape check's to refuse."""
    if not all(_finite(x) for x in (r.value, *(r.ci or ()))):
        return []
    out = []
    if r.ci is not None and not r.ci[0] - SHARE_TOLERANCE <= r.value <= r.ci[1] + SHARE_TOLERANCE:
        out.append(f"\"value\" {r.value:.6g} lies outside its own interval \"ci\" [{r.ci[0]:.6g}, {r.ci[1]:.6g}]")
    if r.beats_baseline is not None and r.beats_baseline != beats(r.value, r.ci, r.baseline):
        out.append(_beats_problem(r))
    out += _rate_problems(r)
    out += _findings_problems(r)
    return out


def results_problems(results: Iterable[Result]) -> list[str]:
    """:func:`consistency_problems` of each result, each message naming the result and its
    release; and results that contradict each other: two values for one metric (or attack) and
    release, naming both (a reader would otherwise keep one without a word)."""
    results = list(results)
    out = [f"result {r.name!r} on release {r.release!r}: {w}" for r in results for w in consistency_problems(r)]
    return out + duplicate_problems(results)


def duplicate_problems(results: Iterable[Result]) -> list[str]:
    """Two results of one kind, name (as the gate matches names) and release: each pair named
    with both values."""
    first: dict[tuple[str, str, str], Result] = {}
    out = []
    for r in results:
        key = (r.kind, normalise(r.name), r.release)
        if key in first:
            a = first[key]
            out.append(f"result {r.name!r} on release {r.release!r} is given twice, with two values: "
                       f"{a.value:.6g} and {r.value:.6g}; a results file holds one value per result and release")
        else:
            first[key] = r
    return out


def _beats_problem(r: Result) -> str:
    if r.baseline is None:
        return f"\"beats_baseline\" is {_json(r.beats_baseline)} but there is no \"baseline\" to beat"
    low, where = (r.ci[0], "the interval's lower bound \"ci[0]\"") if r.ci is not None else (r.value, "\"value\"")
    relation = "above" if low > r.baseline else "not above"
    return (f"\"beats_baseline\" is {_json(r.beats_baseline)}, but {where} {low:.6g} is {relation} "
            f"\"baseline\" {r.baseline:.6g}")


def _rate_problems(r: Result) -> list[str]:
    successes, trials = r.details.get("successes"), r.details.get("trials")
    if not _count(successes):
        return []
    if trials is None:
        expected, slack, what = successes / r.n if r.n else math.nan, 0.0, f"\"n\" {r.n}"
    elif _finite(trials) and trials > 0:
        expected, slack, what = successes / trials, 0.5 / trials, f"\"details.trials\" {_num(trials)}"
    else:
        return []
    if _finite(expected) and abs(clamp_share(expected) - r.value) > slack + SHARE_TOLERANCE:
        return [f"\"value\" {r.value:.6g} is not \"details.successes\" {successes} over {what} ({expected:.6g})"]
    return []


def _findings_problems(r: Result) -> list[str]:
    declared = r.details.get("value_from")
    if not isinstance(declared, str) or not r.documents:
        return []
    m = VALUE_FROM.match(declared)
    if m is None:  # the details check names it
        return []
    docs = r.documents
    if declared == "success":
        scored = [d for d in docs if d.success is not None]
        hits = sum(bool(d.success) for d in scored)
        expected, n, said = (hits / len(scored) if scored else math.nan), len(scored), \
            f"{hits} of {len(scored)} scored findings in \"documents\" succeeded"
    elif m.group("num"):
        facts = [m.group("num"), m.group("den")]
        missing = next(((d.id, f) for d in docs for f in facts if not _finite(_fact(d, f))), None)
        if missing is not None:
            return [f"\"details.value_from\" is {declared!r}, but the finding of document {missing[0]!r} in "
                    f"\"documents\" has no number \"{missing[1]}\""]
        n = len(docs)
        num, den = (sum(_fact(d, f) for d in docs) for f in facts)
        expected = num / den if den > 0 else math.nan
        said = f"the findings in \"documents\" sum to {_num(num)} {facts[0]} of {_num(den)} {facts[1]}"
    else:  # a document without the figure (not measurable there) is not in the mean
        values = [v for v in (_fact(d, m.group("fact")) for d in docs) if _finite(v)]
        n = len(values)
        expected = sum(values) / n if n else math.nan
        said = f"the findings' \"{m.group('fact')}\" in \"documents\" average {expected:.6g}"
    out = []
    if _finite(expected) and abs(clamp_share(expected) - r.value) > SHARE_TOLERANCE:
        out.append(f"\"value\" {r.value:.6g} disagrees with its findings: {said} "
                   f"(\"details.value_from\": {declared!r})")
    if n != r.n:
        out.append(f"\"n\" {r.n} disagrees with its findings: {n} "
                   f"{'finding(s)' if declared.startswith('sum') else 'scored finding(s)'} in \"documents\" "
                   f"(\"details.value_from\": {declared!r})")
    return out


def _fact(d: Finding, name: str) -> Any:
    value = d.facts.get(name)
    return float(value) if _finite(value) else math.nan


def _finite(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def _count(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and x >= 0


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.6g}"


def _json(flag: Any) -> str:
    return {True: "true", False: "false", None: "null"}.get(flag, repr(flag))
