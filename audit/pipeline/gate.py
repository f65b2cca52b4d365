"""The CI gate: thresholds on a results file, a pass/fail/inconclusive table and JUnit XML.

As in Evidently's test suites, a check is a named comparison of one result with a
threshold: ``--max trir=0.1`` judges TRIR's risk on a release against 0.1, ``--min
tpi=0.5`` TPI's utility against 0.5. The gate errs on the safe side:

* by default the cautious bound of the 95% interval is compared: a risk fails when its
  *upper* bound is above the threshold, a utility when its *lower* bound is below it (so
  0 of 8 spans recovered, upper bound 32%, does not pass ``span_guess <= 0.1``);
  ``on_point`` compares the point estimate instead (the old behaviour);
* a result whose component doubts its own figure (``details["warning"]``: TRIR failed its
  fit check, the claim linker's judge failed its control, span guessing did worse than its
  context-free baseline) is *inconclusive* when it would otherwise pass: a weak attacker's
  low risk says nothing about the release. A check that fails stays failed (an attack's
  success is a lower bound on the risk). Inconclusive is never a pass.

Unusable input (a bad threshold, a result name that is not in the file, a release
that is not there) raises :class:`GateInputError`. The CLI exits :data:`EXIT_INVALID` (2) on
it, :data:`EXIT_FAIL` (1) when a check fails, :data:`EXIT_INCONCLUSIVE` (3) when none fails
but one is inconclusive, and 0 when every check passes.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from audit.core.checks import FAIL, INCONCLUSIVE, NO_RESULT, NOT_RUN, PASS, Check, Threshold
from audit.core.consistency import results_problems
from audit.core.errors import AnonauditError
from audit.core.files import atomic_write
from audit.core.registry import normalise
from audit.core.results import Result, ResultsFile

__all__ = ["EXIT_FAIL", "EXIT_INVALID", "EXIT_INCONCLUSIVE", "PASS", "FAIL", "INCONCLUSIVE", "Check", "Threshold",
           "GateInputError", "exit_code", "parse_threshold", "evaluate", "judge", "recorded", "format_table",
           "junit_xml", "write_junit", "missing"]


EXIT_FAIL = 1
EXIT_INVALID = 2
EXIT_INCONCLUSIVE = 3


class GateInputError(AnonauditError):
    """The gate cannot judge: a threshold or a name is wrong, or the file is unusable."""


def exit_code(checks: Iterable[Check]) -> int:
    """1 when a check fails, else 3 when one is inconclusive, else 0."""
    statuses = {c.status for c in checks}
    return EXIT_FAIL if FAIL in statuses else EXIT_INCONCLUSIVE if INCONCLUSIVE in statuses else 0


_NUM = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(%?)\s*$")


def parse_threshold(text: str, side: str) -> Threshold:
    """``NAME=VALUE`` with VALUE a number or a percentage (``10%`` = 0.1)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise GateInputError(f"--{side} {text!r}: expected NAME=VALUE, e.g. --{side} trir=0.1")
    m = _NUM.match(value)
    if not m:
        raise GateInputError(f"--{side} {text!r}: {value.strip()!r} is not a number (use e.g. 0.1 or 10%)")
    number = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    if not math.isfinite(number):
        raise GateInputError(f"--{side} {text!r}: the threshold must be a finite number")
    if not 0.0 <= number <= 1.0:
        raise GateInputError(f"--{side} {text!r}: the threshold must lie between 0 and 1 (0% and 100%): "
                             "risks and utilities are shares")
    return Threshold(name.strip(), side, number)


def evaluate(rf: ResultsFile, thresholds: Sequence[Threshold], *, releases: Sequence[str] = (),
             on_point: bool = False) -> list[Check]:
    """Judge every threshold on every selected release (all releases by default), on the
    cautious CI bound unless ``on_point``.

    A threshold whose result is missing on every selected release is an input error; one
    missing on some releases is inconclusive there (:func:`missing`), never a pass: a release
    that was never attacked is not shown safe.
    """
    if not thresholds:
        raise GateInputError("no thresholds: give at least one --max NAME=VALUE or --min NAME=VALUE")
    contradictions = results_problems(rf.results)  # a result its own fields deny is never judged
    if contradictions:
        raise GateInputError("the results contradict themselves, so the gate cannot judge them:\n  - "
                             + "\n  - ".join(contradictions))
    known_releases = rf.releases
    for rel in releases:
        if rel not in known_releases:
            raise GateInputError(f"release {rel!r} is not in the results (releases: {', '.join(known_releases)})")
    selected = list(releases) or known_releases
    names = sorted({r.name for r in rf.results})
    checks: list[Check] = []
    for th in thresholds:
        matching = [r for r in rf.results if normalise(r.name) == normalise(th.name) and r.release in selected]
        if not matching:
            where = f" on release(s) {', '.join(selected)}" if releases else ""
            raise GateInputError(f"no result named {th.name!r}{where} (results: {', '.join(names) or 'none'})")
        found = {r.release: r for r in matching}
        checks += [judge(th, found[rel], on_point=on_point) if rel in found else missing(th, rel) for rel in selected]
    return checks


def missing(th: Threshold, release: str) -> Check:
    """The check of a threshold with no result on ``release``: inconclusive (exit 3 unless
    another check fails), never a pass."""
    return Check(th, release, None, math.nan, NO_RESULT, INCONCLUSIVE, NOT_RUN)


def judge(th: Threshold, r: Result, *, on_point: bool = False) -> Check:
    """One threshold on one result (see the module docstring for the rules)."""
    compared, bound = r.value, "value"
    if not on_point and r.ci is not None:
        compared, bound = (r.ci[1], "upper CI") if th.side == "max" else (r.ci[0], "lower CI")
    ok = compared <= th.value if th.side == "max" else compared >= th.value
    if not math.isfinite(compared):
        ok = False
    warning = r.info.warning
    if not ok:
        return Check(th, r.release, r, compared, bound, FAIL)
    if warning:
        return Check(th, r.release, r, compared, bound, INCONCLUSIVE, warning)
    return Check(th, r.release, r, compared, bound, PASS)


def recorded(rf: ResultsFile, limits: Mapping[str, Mapping[str, float]], *, on_point: bool = False) -> list[dict]:
    """The checks of a spec's ``gate`` (``{"max": {name: value}, "min": {...}}``) on the results
    in ``rf``, as a run records them in its results file (``provenance.gate.checks``): a report
    rendered later from the file shows the verdict the run reached. A threshold with no result
    yet on any release (a component still to run, or skipped) is left out here (``anonaudit
    gate`` and ``anonaudit run`` refuse it); one with results on some releases only is
    inconclusive on the others (:func:`missing`)."""
    out = []
    for side in ("max", "min"):
        for name, value in (limits.get(side) or {}).items():
            th = Threshold(str(name), side, float(value))
            found = {r.release: r for r in rf.results if normalise(r.name) == normalise(th.name)}
            out += [(judge(th, found[rel], on_point=on_point) if rel in found else missing(th, rel)).to_dict()
                    for rel in rf.releases if found]
    return out


def format_table(checks: Iterable[Check]) -> str:
    """A plain-text pass/fail/inconclusive table for the terminal (reasons below it)."""
    checks = list(checks)
    rows = [("check", "release", "compared", "result"), *[
        (c.title, c.release, c.bound if c.result is None else f"{c.compared:.4g} ({c.bound})", c.status.upper())
        for c in checks]]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for c in checks:
        if c.status == INCONCLUSIVE:
            lines.append(f"INCONCLUSIVE {c.title} on {c.release}: {c.reason}")
    return "\n".join(lines)


def junit_xml(checks: Sequence[Check], *, suite: str = "anonaudit gate") -> str:
    """JUnit XML: one test case per check, a ``<failure>`` for each failing one and an
    ``<error type="inconclusive">`` for each inconclusive one (never a pass)."""
    failures = sum(c.status == FAIL for c in checks)
    errors = sum(c.status == INCONCLUSIVE for c in checks)
    root = ET.Element("testsuites", name=suite, tests=str(len(checks)), failures=str(failures), errors=str(errors))
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(checks)), failures=str(failures),
                       errors=str(errors), skipped="0")
    for c in checks:
        tc = ET.SubElement(ts, "testcase", classname=f"anonaudit.{c.release}", name=c.title)
        if c.status == PASS:
            continue
        r = c.result
        ci = "" if r is None or r.ci is None else f", 95% CI [{r.ci[0]:.4g}, {r.ci[1]:.4g}]"
        tag, kind = ("failure", "threshold") if c.status == FAIL else ("error", "inconclusive")
        el = ET.SubElement(tc, tag, message=c.message, type=kind)
        el.text = c.message + ("" if r is None else f"\nvalue {r.value:.4g}{ci}, n = {r.n}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str | Path, checks: Sequence[Check]) -> Path:
    return atomic_write(path, junit_xml(checks))
