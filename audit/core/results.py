"""The results schema every attack and metric writes.

A results file is JSON::

    {"schema": "anonaudit.results/1",
     "provenance": {...},
     "results": [{"kind": "attack" | "utility", "name": "phrase_search", "release": "NAME",
                  "value": 0.42, "ci": [0.33, 0.51], "n": 127, "baseline": 0.0079,
                  "beats_baseline": true, "details": {...}, "documents": [...]}]}

Orientation: attack values are risks (higher = more risk); utility values are
utilities (higher = more utility). ``documents`` holds per-document findings with
evidence (one :class:`Finding` each, written as ``{"id", "success", "summary"?, <facts>...,
"highlights_in"?, "highlights", "private"?}``); ``details`` holds anything else an attack
wants to explain itself.
Files are written atomically, so an interrupted run never leaves half a file, and
:meth:`ResultsFile.update` is the one writer of a results file that several commands share:
it re-reads the file under an exclusive lock and merges, so parallel writers lose nothing.
Reading checks the whole shape first (:mod:`audit.core.resultshape`): a malformed file is a
:class:`DataError` naming every problem, never a Python exception from deep inside.

A results file is self-contained: the report renders from it alone. The keys of ``details``
that readers rely on are typed (``Result.info``, :class:`~audit.core.details.Details`); the
provenance records what the run knew of each component (``ResultsFile.about``: description and
remedy, :class:`~audit.core.details.About`) and, when its spec had a gate, the checks it judged
(``ResultsFile.checks``, :class:`~audit.core.checks.Check`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from audit.core import safejson
from audit.core.checks import Check, checks_of, recorded_problems
from audit.core.consistency import beats, results_problems
from audit.core.details import About, Details, about_problems, abouts, details_problems
from audit.core.errors import DataError, Problem
from audit.core.files import atomic_write_json, locked, read_text
from audit.core.names import normalise
from audit.core.resultshape import KINDS, SHARE_TOLERANCE, clamp_share, json_type, figure_problems, result_shape_problems
from audit.core.stats import Risk

__all__ = ["SCHEMA", "KINDS", "SHARE_TOLERANCE", "clamp_share", "FINDING_KEYS", "Highlight", "Finding", "Result", "ResultsFile",
           "Details", "About", "Check", "figure_problems", "result_shape_problems", "grouped_warnings"]

#: The schema of a results file. Additions that older readers may ignore (the typed details'
#: checks, ``about``/``remedy`` and ``gate.checks`` in the provenance) keep it; a change that an
#: older reader would misread bumps it, and :data:`READABLE` lists what this version still reads.
SCHEMA = "anonaudit.results/1"
READABLE = (SCHEMA,)
#: Keys a serialized finding uses itself; an attack's own facts may not take them.
FINDING_KEYS = ("id", "success", "summary", "highlights", "highlights_in", "private")


@dataclass(frozen=True)
class Highlight:
    """A stretch of a sanitized document that the report marks as evidence.

    ``start``/``end`` are character offsets into the sanitized text of the finding's document
    (or of ``Finding.highlights_in`` when the evidence lies in another document); ``kind`` is a
    category ("rare n-gram", "recovered span"); ``note`` is free text for the reader and may
    quote private data, so the shareable edition drops it.
    """

    start: int
    end: int
    kind: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"start": self.start, "end": self.end, "kind": self.kind}
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Highlight:
        return cls(int(data["start"]), int(data["end"]), str(data.get("kind", "")), str(data.get("note", "") or ""))


@dataclass(frozen=True)
class Finding:
    """What one attack found about one document: the typed record the report and the
    shareable filter read, whatever the attack is.

    ``success``: did the attack succeed on this document (re-identified, linked, recovered);
    ``None`` when the document was not scored. ``summary``: one plain sentence for a reader.
    ``highlights``: the evidence, as offsets. ``facts``: everything else the attack wants to
    show, by name (JSON values). ``private``: the names of the facts that may hold private data
    (an original span, a guess, a predicted identity, a claim of the original); the shareable
    edition drops them, and a summary is private when ``"summary"`` is named.
    """

    id: str
    success: bool | None = None
    summary: str = ""
    highlights: tuple[Highlight, ...] = ()
    highlights_in: str | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)
    private: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        clash = set(self.facts) & set(FINDING_KEYS)
        if clash:
            raise ValueError(f"finding facts may not use the reserved key(s) {', '.join(sorted(clash))}")
        object.__setattr__(self, "facts", MappingProxyType(dict(self.facts)))
        object.__setattr__(self, "highlights", tuple(self.highlights))
        object.__setattr__(self, "private", frozenset(self.private))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its facts as a plain dict (a read-only view does not pickle), so a
        finding made on an executor's worker travels back to the run."""
        return (type(self), (self.id, self.success, self.summary, self.highlights, self.highlights_in,
                             dict(self.facts), self.private))

    def get(self, key: str, default: Any = None) -> Any:
        """A fact, or one of the finding's own fields, by name."""
        if key in FINDING_KEYS:
            return getattr(self, key)
        return self.facts.get(key, default)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "success": self.success}
        if self.summary:
            out["summary"] = self.summary
        out.update(self.facts)
        if self.highlights_in is not None:
            out["highlights_in"] = self.highlights_in
        out["highlights"] = [h.to_dict() for h in self.highlights]
        if self.private:
            out["private"] = sorted(self.private)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        success = data.get("success")
        return cls(
            id=str(data["id"]), success=success if isinstance(success, bool) else None,
            summary=str(data.get("summary") or ""),
            highlights=tuple(Highlight.from_dict(h) for h in data.get("highlights") or () if isinstance(h, dict)),
            highlights_in=data.get("highlights_in"),
            facts={k: v for k, v in data.items() if k not in FINDING_KEYS},
            private=frozenset(data.get("private") or ()),
        )


@dataclass(frozen=True)
class Result:
    """One figure for one release: an attack's risk or a utility metric.

    Frozen: a stage that adds to a result (the runner noting a sample) makes a new one with
    :func:`dataclasses.replace` and a new ``details`` dict; ``details`` is read-only by
    convention. ``documents`` holds one :class:`Finding` per document (a list given here is
    kept as a tuple).
    """

    kind: Literal["attack", "utility"]
    name: str
    release: str
    value: float
    ci: tuple[float, float] | None = None
    n: int = 0
    baseline: float | None = None
    beats_baseline: bool | None = None
    details: dict[str, Any] = field(default_factory=dict)
    documents: tuple[Finding, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        self._clamp_noise()
        if self.beats_baseline is None and self.baseline is not None:  # recomputed, as every reader does
            object.__setattr__(self, "beats_baseline", beats(self.value, self.ci, self.baseline))
        documents = tuple(self.documents)
        for d in documents:
            if not isinstance(d, Finding):
                raise TypeError(f"result {self.name!r}: documents must be Finding objects "
                                f"(audit.core.results.Finding), got {type(d).__name__}")
        object.__setattr__(self, "documents", documents)

    def _clamp_noise(self) -> None:
        """Figures outside [0, 1] by floating-point noise only (within
        :data:`~audit.core.resultshape.SHARE_TOLERANCE`) are the bound they missed, and
        ``details["clamped"]`` records each as computed; a real error is left for the checks
        (:func:`~audit.core.resultshape.figure_problems`) to refuse."""
        ci = self.ci
        figures = {"value": self.value, "baseline": self.baseline}
        if isinstance(ci, (tuple, list)) and len(ci) == 2:
            figures.update({"ci_low": ci[0], "ci_high": ci[1]})
        moved = {k: float(x) for k, x in figures.items() if clamp_share(x) is not x}  # x itself when kept
        if not moved:
            return
        new = {k: clamp_share(x) for k, x in figures.items()}
        object.__setattr__(self, "value", new["value"])
        object.__setattr__(self, "baseline", new["baseline"])
        if "ci_low" in new:
            object.__setattr__(self, "ci", (new["ci_low"], new["ci_high"]))
        if self.beats_baseline is not None:  # judged again on the figures as they now are
            object.__setattr__(self, "beats_baseline", beats(self.value, self.ci, self.baseline))
        before = self.details.get("clamped") if isinstance(self.details, Mapping) else None
        object.__setattr__(self, "details", {**self.details, "clamped": {
            **(before if isinstance(before, Mapping) else {}), **moved}})

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.name, self.release)

    @property
    def info(self) -> Details:
        """The typed view of the ``details`` every reader relies on (``warning``, ``sampled``,
        ``attacker``...: :class:`~audit.core.details.Details`); ``details`` itself stays the
        open mapping the component wrote."""
        return Details.of(self.details)

    @classmethod
    def from_risk(cls, name: str, release: str, risk: Risk, *, details: dict | None = None,
                  documents: Iterable[Finding] = ()) -> Result:
        """An attack result from a :class:`~audit.core.stats.Risk`."""
        det = dict(details or {})
        if risk.residual is not None:
            det.setdefault("residual_risk", risk.residual)
            det.setdefault("residual_ci", list(risk.residual_ci or ()))
        det.setdefault("successes", risk.rate.successes)
        return cls(
            kind="attack", name=name, release=release, value=risk.rate.value, ci=risk.rate.ci,
            n=risk.rate.n, baseline=risk.baseline, beats_baseline=risk.beats_baseline,
            details=det, documents=tuple(documents or ()),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "release": self.release,
            "value": _finite(self.value),
            "ci": None if self.ci is None else [_finite(self.ci[0]), _finite(self.ci[1])],
            "n": self.n,
            "baseline": None if self.baseline is None else _finite(self.baseline),
            "beats_baseline": self.beats_baseline,
            "details": self.details,
            "documents": [d.to_dict() for d in self.documents],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        ci = data.get("ci")
        value = data["value"]
        return cls(
            kind=data["kind"], name=data["name"], release=data["release"],
            value=math.nan if value is None else float(value),  # refused on load (result_shape_problems)
            ci=None if ci is None else (float(ci[0]), float(ci[1])), n=int(data.get("n", 0)),
            baseline=data.get("baseline"), beats_baseline=data.get("beats_baseline"),
            details=dict(data.get("details") or {}),
            # a document written before findings were typed has no "success": it loads as None
            documents=tuple(_finding_of(i, d) for i, d in enumerate(data.get("documents") or ())),
        )


def _finding_of(i: int, data: Any) -> Finding:
    if not isinstance(data, dict) or "id" not in data:
        raise ValueError(f"documents[{i}] is not a finding (an object with an \"id\")")
    return Finding.from_dict(data)


def grouped_warnings(results: Iterable[Result]) -> list[tuple[str, str, list[str]]]:
    """Each component's doubt about its own figure (``details["warning"]``), once per
    distinct (result name, warning), with the releases it applies to, in first-seen order."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for r in results:
        text = r.info.warning
        if text:
            grouped.setdefault((r.name, text), []).append(r.release)
    return [(name, text, releases) for (name, text), releases in grouped.items()]


def _finite(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


@dataclass
class ResultsFile:
    """All results of an audit plus its provenance. ``add`` replaces a result with
    the same (kind, name, release), so re-running one attack updates it in place."""

    results: list[Result] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)

    def add(self, result: Result) -> None:
        self.results = [r for r in self.results if r.key != result.key]
        self.results.append(result)

    def extend(self, results: Iterable[Result]) -> None:
        for r in results:
            self.add(r)

    def get(self, name: str, release: str, kind: str | None = None) -> Result | None:
        for r in self.results:
            if r.name == name and r.release == release and (kind is None or r.kind == kind):
                return r
        return None

    def about(self, kind: str, name: str) -> About:
        """What the run knew about component ``name`` (``kind``: attack or utility): its
        description and remedy, as recorded in the provenance when it ran (empty for a file
        written before remedies were recorded)."""

        found = abouts(self.provenance.get("components"))
        return found.get((kind, name)) or next(
            (a for (k, n), a in found.items() if k == kind and normalise(n) == normalise(name)), About(kind, name))

    def checks(self) -> list[Check]:
        """The gate checks the run recorded (``provenance.gate.checks``), each with its result."""
        return checks_of(self.provenance, self.results)

    @property
    def releases(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.results:
            seen.setdefault(r.release, None)
        return list(seen)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "provenance": self.provenance,
                "results": [r.to_dict() for r in self.results]}

    def save(self, path: str | os.PathLike) -> Path:
        """Write atomically (temporary file in the same folder, flushed to disk, then rename),
        and the flat table beside it (``summary.csv``: :mod:`audit.core.summary`).
        Use :meth:`update` when another process may write the same file. A result whose figures
        could not be read back (NaN, a reversed interval, n = 0) is refused, never written."""
        from audit.core.summary import check_summary_target, write_summary

        from audit.core.bundle import SCHEMA as BUNDLE_SCHEMA
        from audit.core.bundle import check_manifest_target, write_manifest

        data = self.check(str(path))
        data["provenance"] = {**data["provenance"], "bundle": BUNDLE_SCHEMA}  # a manifest goes with it
        check_summary_target(path)
        check_manifest_target(path)
        written = atomic_write_json(path, data, fsync=True)
        write_summary(path, self.results)
        write_manifest(path, self.provenance)  # last: it lists the others (audit.core.bundle)
        return written

    def check(self, where: str) -> dict[str, Any]:
        """The content as a file holds it (:meth:`to_dict`), refused with a :class:`DataError`
        (``where``: how to name it) when a result's figures could not be read back (NaN, a
        reversed interval, n = 0) or the results contradict themselves: what :meth:`save` writes,
        and what an audit kept in memory must be too."""
        data = self.to_dict()
        problems = [Problem(where, f"result {r['name']!r} on release {r['release']!r}: {w}")
                    for r in data["results"] for w in [*figure_problems(r), *details_problems(r["details"])]]
        problems += [Problem(where, w) for w in [*about_problems(self.provenance.get("components")),
                                                *recorded_problems(self.provenance, self.results)]]
        if not problems:  # results that contradict themselves are never written
            problems += [Problem(where, w) for w in results_problems(self.results)]
        if problems:
            raise DataError(problems)
        return data

    @classmethod
    def update(cls, path: str | os.PathLike, merge: Callable[[ResultsFile | None], ResultsFile], *,
               replace: bool = False) -> ResultsFile:
        """The one read-modify-write of a shared results file: under an exclusive lock, read
        the file as it is now (``None`` when there is none), let ``merge`` make the new content
        from it, and write that atomically (fsync, rename, the file's mode kept). Returns what
        was written. Commands writing into one file at the same time therefore each add to what
        the others wrote, and none loses the others' results. ``replace``: what the file holds
        is not read (``None`` to ``merge``) but replaced: a file of another kind the user chose
        to write over (``--force``)."""
        path = Path(path)
        with locked(path):
            current = cls.load(path) if path.exists() and not replace else None
            new = merge(current)
            new.save(path)
        return new

    @classmethod
    def load(cls, path: str | os.PathLike) -> ResultsFile:
        src = str(path)
        text = read_text(path, "results file")
        try:
            data = safejson.loads(text, src)
        except json.JSONDecodeError as exc:
            raise DataError(Problem(src, f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno)) from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise DataError(Problem(src, f"not an anonaudit results file (expected \"schema\": \"{SCHEMA}\")"))
        problems: list[Problem] = []
        items = data.get("results")
        provenance = data.get("provenance")
        if items is not None and not isinstance(items, list):
            problems.append(Problem(src, f"\"results\" must be a list of results, not {json_type(items)}"))
            items = []
        if provenance is not None and not isinstance(provenance, dict):
            problems.append(Problem(src, f"\"provenance\" must be an object, not {json_type(provenance)}"))
            provenance = {}
        results: list[Result] = []
        for i, item in enumerate(items or []):
            wrong = result_shape_problems(item)
            if wrong:
                problems += [Problem(src, f"results[{i}]: {w}") for w in wrong]
                continue
            try:
                results.append(Result.from_dict(item))
            except (KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
                problems.append(Problem(src, f"results[{i}] is malformed: {exc}"))
        if not problems:  # results that contradict themselves (audit.core.consistency), and what the
            # report reads from the provenance: descriptions, remedies, checks
            problems += [Problem(src, w) for w in [*results_problems(results),
                                                   *about_problems((provenance or {}).get("components")),
                                                   *recorded_problems(provenance or {}, results)]]
        if problems:
            raise DataError(problems)
        return cls(results=results, provenance=dict(provenance or {}))


def load_verified(results_path: str | os.PathLike) -> ResultsFile:
    """The :class:`ResultsFile` at ``results_path``, read only after its bundle is verified
    (:func:`audit.core.bundle.check_bundle`: the manifest and every part it lists), then checked
    to list every release copy it records (:func:`audit.core.bundle.check_coverage`): what
    ``report``, ``gate`` and :func:`anonaudit.load_results` read. Call it under
    :func:`audit.core.bundle.reading`."""
    from audit.core.bundle import check_bundle, check_coverage

    check_bundle(results_path)
    rf = ResultsFile.load(results_path)
    check_coverage(results_path, rf.provenance)
    return rf
