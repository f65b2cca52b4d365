"""Gate checks as data: a threshold judged on one result, and how a results file keeps them.

The gate (:mod:`audit.pipeline.gate`) judges :class:`Threshold` s on results and returns
:class:`Check` s; the report draws them; and a run whose spec has a ``gate`` records them in
its results file (``provenance.gate.checks``, :meth:`Check.to_dict`), so a report rendered
later from that file alone shows the verdict the run reached. A check names its result by
(kind, name, release); :func:`checks_of` finds it again in the file, and a recorded check
that does not fit (a wrong type, a result that is not there) is a problem naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from audit.core.results import Result

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
STATUSES = (PASS, FAIL, INCONCLUSIVE)
BOUNDS = ("value", "upper CI", "lower CI", "no result")
#: The ``bound`` of a check whose threshold has no result on its release: never a pass.
NO_RESULT = "no result"
#: Why such a check is inconclusive.
NOT_RUN = ("no result on this release: its component did not run on it (or failed), so nothing shows the "
           "release is safe")


@dataclass(frozen=True)
class Threshold:
    """``name <= value`` (side ``max``) or ``name >= value`` (side ``min``)."""

    name: str
    side: Literal["max", "min"]
    value: float

    @property
    def symbol(self) -> str:
        return "<=" if self.side == "max" else ">="


@dataclass(frozen=True)
class Check:
    """One threshold judged on one release: ``status`` is pass, fail or inconclusive;
    ``compared`` the number compared (the value or a CI bound, as ``bound`` says); ``reason``
    why a check is inconclusive (the component's own warning)."""

    threshold: Threshold
    release: str
    result: Result | None  # None: the threshold has no result on this release (bound "no result")
    compared: float
    bound: str  # "value" | "upper CI" | "lower CI" | "no result"
    status: str
    reason: str = ""

    @property
    def passed(self) -> bool:
        return self.status == PASS

    @property
    def title(self) -> str:
        return f"{self.threshold.name} {self.threshold.symbol} {self.threshold.value:g}"

    @property
    def message(self) -> str:
        verdict = {PASS: "passes", FAIL: "FAILS", INCONCLUSIVE: "is INCONCLUSIVE for"}[self.status]
        if self.result is None:
            return f"{self.threshold.name} on {self.release} {verdict} {self.threshold.symbol} " \
                   f"{self.threshold.value:g}: {self.reason or NOT_RUN}"
        text = (f"{self.threshold.name} on {self.release}: {self.bound} {self.compared:.4g} "
                f"{verdict} {self.threshold.symbol} {self.threshold.value:g}")
        return f"{text} (the attacker failed its own check: {self.reason})" if self.reason else text

    def to_dict(self) -> dict[str, Any]:
        """As recorded in ``provenance.gate.checks``: the threshold, the result it judged (by
        kind, name and release) and the judgement."""
        return {"name": self.threshold.name, "side": self.threshold.side, "threshold": self.threshold.value,
                "kind": "" if self.result is None else self.result.kind,
                "result": self.threshold.name if self.result is None else self.result.name, "release": self.release,
                "compared": self.compared if math.isfinite(self.compared) else None, "bound": self.bound,
                "status": self.status, "reason": self.reason}


_FIELDS = {"name": str, "side": str, "threshold": float, "kind": str, "result": str, "release": str,
           "bound": str, "status": str, "reason": str}


def check_problems(data: Any, results: Sequence[Result], where: str) -> list[str]:
    """What is wrong with one recorded check (``where`` names it: ``provenance.gate.checks[0]``)."""
    if not isinstance(data, Mapping):
        return [f"\"{where}\" must be an object"]
    out = []
    for key, kind in _FIELDS.items():
        value = data.get(key, "" if key == "reason" else None)
        ok = isinstance(value, str) if kind is str else \
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not ok:
            out.append(f"\"{where}.{key}\" must be {'a string' if kind is str else 'a finite number'}, "
                       f"not {value!r}"[:160])
    compared = data.get("compared")
    if compared is not None and not (isinstance(compared, (int, float)) and not isinstance(compared, bool)):
        out.append(f"\"{where}.compared\" must be a number or null, not {compared!r}"[:160])
    for key, allowed in (("side", ("max", "min")), ("status", STATUSES), ("bound", BOUNDS)):
        if isinstance(data.get(key), str) and data[key] not in allowed:
            out.append(f"\"{where}.{key}\" must be one of {', '.join(allowed)}, not {data[key]!r}")
    if not out and data["bound"] == NO_RESULT:
        if data["status"] != INCONCLUSIVE or data.get("compared") is not None:
            out.append(f"\"{where}\" has no result, so it must be inconclusive with no \"compared\" figure")
    elif not out and _find(results, data) is None:
        out.append(f"\"{where}\" judges result {data['result']!r} ({data['kind']}) on release "
                   f"{data['release']!r}, which is not in the file")
    return out


def _find(results: Sequence[Result], data: Mapping[str, Any]) -> Result | None:
    return next((r for r in results if (r.kind, r.name, r.release) == (data["kind"], data["result"], data["release"])),
                None)


def checks_of(provenance: Mapping[str, Any], results: Sequence[Result]) -> list[Check]:
    """The checks a run recorded in ``provenance.gate.checks``, each with its result from
    ``results`` (the file was checked on read: see :func:`check_problems`)."""
    gate = provenance.get("gate")
    recorded = gate.get("checks") if isinstance(gate, Mapping) else None
    out = []
    for data in recorded or ():
        r = _find(results, data)
        if r is None and data["bound"] != NO_RESULT:
            continue
        compared = math.nan if data.get("compared") is None else float(data["compared"])
        out.append(Check(Threshold(data["name"], data["side"], float(data["threshold"])), data["release"], r,
                         compared, data["bound"], data["status"], str(data.get("reason") or "")))
    return out


def recorded_problems(provenance: Any, results: Sequence[Result]) -> list[str]:
    """What is wrong with ``provenance.gate.checks`` (empty when there is none)."""
    gate = provenance.get("gate") if isinstance(provenance, Mapping) else None
    if not isinstance(gate, Mapping) or gate.get("checks") is None:
        return []
    if not isinstance(gate["checks"], list):
        return ["\"provenance.gate.checks\" must be a list of checks"]
    return [w for i, c in enumerate(gate["checks"]) for w in check_problems(c, results, f"provenance.gate.checks[{i}]")]
