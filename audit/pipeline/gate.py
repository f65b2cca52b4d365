"""The CI gate: thresholds on a results file, a pass/fail table and JUnit XML.

As in Evidently's test suites, a check is a named comparison of one result with a
threshold: ``--max trir=0.1`` fails when TRIR's risk exceeds 0.1 on a release,
``--min tpi=0.5`` fails when TPI's utility falls below 0.5. With ``on_upper_ci``
the cautious bound of the 95% interval is compared instead of the point value
(upper bound for ``max``, lower bound for ``min``).

Unusable input (a bad threshold, a result name that is not in the file, a release
that is not there) raises :class:`GateInputError`; the CLI exits 2 on it, 1 when a
check fails and 0 when every check passes.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from audit.core.errors import AnonauditError
from audit.core.files import atomic_write
from audit.core.registry import normalise
from audit.core.results import Result, ResultsFile


class GateInputError(AnonauditError):
    """The gate cannot judge: a threshold or a name is wrong, or the file is unusable."""


@dataclass(frozen=True)
class Threshold:
    """``name <= value`` (side ``max``) or ``name >= value`` (side ``min``)."""

    name: str
    side: str  # "max" | "min"
    value: float

    @property
    def symbol(self) -> str:
        return "<=" if self.side == "max" else ">="


@dataclass(frozen=True)
class Check:
    """One threshold judged on one release."""

    threshold: Threshold
    release: str
    result: Result
    compared: float  # the number that was compared (value, or a CI bound)
    bound: str  # "value" | "upper CI" | "lower CI"
    passed: bool

    @property
    def title(self) -> str:
        return f"{self.threshold.name} {self.threshold.symbol} {self.threshold.value:g}"

    @property
    def message(self) -> str:
        verdict = "passes" if self.passed else "FAILS"
        return (f"{self.threshold.name} on {self.release}: {self.bound} {self.compared:.4g} "
                f"{verdict} {self.threshold.symbol} {self.threshold.value:g}")


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
             on_upper_ci: bool = False) -> list[Check]:
    """Judge every threshold on every selected release (all releases by default).

    A threshold whose result is missing on every selected release is an input error;
    one missing on some releases only is judged where it exists.
    """
    if not thresholds:
        raise GateInputError("no thresholds: give at least one --max NAME=VALUE or --min NAME=VALUE")
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
        for r in sorted(matching, key=lambda r: selected.index(r.release)):
            compared, bound = r.value, "value"
            if on_upper_ci and r.ci is not None:
                compared, bound = (r.ci[1], "upper CI") if th.side == "max" else (r.ci[0], "lower CI")
            passed = compared <= th.value if th.side == "max" else compared >= th.value
            checks.append(Check(th, r.release, r, compared, bound, passed))
    return checks


def format_table(checks: Iterable[Check]) -> str:
    """A plain-text pass/fail table for the terminal."""
    rows = [("check", "release", "compared", "result"), *[
        (c.title, c.release, f"{c.compared:.4g} ({c.bound})", "PASS" if c.passed else "FAIL") for c in checks]]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def junit_xml(checks: Sequence[Check], *, suite: str = "anonaudit gate") -> str:
    """JUnit XML: one test case per check, a ``<failure>`` for each failing one."""
    failures = sum(not c.passed for c in checks)
    root = ET.Element("testsuites", name=suite, tests=str(len(checks)), failures=str(failures))
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(checks)), failures=str(failures),
                       errors="0", skipped="0")
    for c in checks:
        tc = ET.SubElement(ts, "testcase", classname=f"anonaudit.{c.release}", name=c.title)
        if not c.passed:
            failure = ET.SubElement(tc, "failure", message=c.message, type="threshold")
            r = c.result
            ci = "" if r.ci is None else f", 95% CI [{r.ci[0]:.4g}, {r.ci[1]:.4g}]"
            failure.text = f"{c.message}\nvalue {r.value:.4g}{ci}, n = {r.n}"
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str | Path, checks: Sequence[Check]) -> Path:
    return atomic_write(path, junit_xml(checks))
