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
Reading checks the whole shape first: a malformed file is a :class:`DataError` naming every
problem, never a Python exception from deep inside.
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
from audit.core.errors import DataError, Problem, read_text
from audit.core.files import atomic_write_json, locked
from audit.core.stats import Risk

SCHEMA = "anonaudit.results/1"
KINDS = ("attack", "utility")
#: How far outside [0, 1] a share may stray by floating-point rounding.
SHARE_TOLERANCE = 1e-9
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
        documents = tuple(self.documents)
        for d in documents:
            if not isinstance(d, Finding):
                raise TypeError(f"result {self.name!r}: documents must be Finding objects "
                                f"(audit.core.results.Finding), got {type(d).__name__}")
        object.__setattr__(self, "documents", documents)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.name, self.release)

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
        text = r.details.get("warning")
        if isinstance(text, str) and text:
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

        data = self.to_dict()
        problems = [Problem(str(path), f"result {r['name']!r} on release {r['release']!r}: {w}")
                    for r in data["results"] for w in figure_problems(r)]
        if problems:
            raise DataError(problems)
        check_summary_target(path)
        written = atomic_write_json(path, data, fsync=True)
        write_summary(path, self.results)
        return written

    @classmethod
    def update(cls, path: str | os.PathLike, merge: Callable[[ResultsFile | None], ResultsFile]) -> ResultsFile:
        """The one read-modify-write of a shared results file: under an exclusive lock, read
        the file as it is now (``None`` when there is none), let ``merge`` make the new content
        from it, and write that atomically (fsync, rename, the file's mode kept). Returns what
        was written. Commands writing into one file at the same time therefore each add to what
        the others wrote, and none loses the others' results."""
        path = Path(path)
        with locked(path):
            current = cls.load(path) if path.exists() else None
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
            problems.append(Problem(src, f"\"results\" must be a list of results, not {_json_type(items)}"))
            items = []
        if provenance is not None and not isinstance(provenance, dict):
            problems.append(Problem(src, f"\"provenance\" must be an object, not {_json_type(provenance)}"))
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
        if problems:
            raise DataError(problems)
        return cls(results=results, provenance=dict(provenance or {}))


def _json_type(value: Any) -> str:
    """How JSON calls the type of ``value`` (for messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def result_shape_problems(item: Any) -> list[str]:
    """What is wrong with the shape of one serialized result (empty when it can be read)."""
    if not isinstance(item, dict):
        return [f"must be an object, not {_json_type(item)}"]
    out: list[str] = []
    for key in ("kind", "name", "release"):
        if not isinstance(item.get(key), str):
            out.append(f"\"{key}\" must be a string, not {_json_type(item.get(key))}")
    if isinstance(item.get("kind"), str) and item["kind"] not in KINDS:
        out.append(f"\"kind\" must be one of {', '.join(KINDS)}, not {item['kind']!r}")
    out += figure_problems(item)
    if item.get("beats_baseline") is not None and not isinstance(item["beats_baseline"], bool):
        out.append(f"\"beats_baseline\" must be true, false or null, not {_json_type(item['beats_baseline'])}")
    if item.get("details") is not None and not isinstance(item["details"], dict):
        out.append(f"\"details\" must be an object, not {_json_type(item['details'])}")
    docs = item.get("documents")
    if docs is not None and not isinstance(docs, list):
        out.append(f"\"documents\" must be a list of findings, not {_json_type(docs)}")
    elif docs:
        for j, d in enumerate(docs):
            wrong = _finding_shape_problems(d)
            if wrong:
                out.append(f"documents[{j}]: {wrong}")
                if len(out) >= 20:
                    break
    return out


def _share_problem(key: str, x: Any) -> str:
    """What is wrong with ``x`` as a share (a risk, a utility, a baseline: 0 <= x <= 1)."""
    if not _is_number(x):
        return f"\"{key}\" must be a number, not {_json_type(x)}"
    if not math.isfinite(x):
        return f"\"{key}\" must be a finite number, not {x}"
    if not -SHARE_TOLERANCE <= x <= 1 + SHARE_TOLERANCE:
        return f"\"{key}\" must lie between 0 and 1 (risks and utilities are shares), not {x}"
    return ""


def figure_problems(item: dict[str, Any]) -> list[str]:
    """What is wrong with the figures of one serialized result: ``value`` a finite share,
    ``ci`` ordered and within [0, 1], ``n`` at least 1, ``baseline`` a finite share or null. A
    figure outside these (NaN, a reversed interval, a rate over no trial) would be read as a
    verdict it does not support, so it is refused on read and on write alike."""
    out: list[str] = []
    if "value" not in item:
        out.append("\"value\" is missing")
    elif item["value"] is None:
        out.append("\"value\" is null: the figure was not finite (NaN or infinite), so it says nothing")
    else:
        out.append(_share_problem("value", item["value"]))
    ci = item.get("ci")
    if ci is not None:
        if isinstance(ci, list) and len(ci) == 2 and None in ci:
            out.append(f"\"ci[{ci.index(None)}]\" is null: the bound was not finite (NaN or infinite)")
        elif not (isinstance(ci, list) and len(ci) == 2 and all(_is_number(x) for x in ci)):
            out.append(f"\"ci\" must be a list of two numbers [low, high] or null, not {json.dumps(ci)[:60]}")
        else:
            wrong = [w for w in (_share_problem("ci[0]", ci[0]), _share_problem("ci[1]", ci[1])) if w]
            out += wrong
            if not wrong and ci[0] > ci[1]:
                out.append(f"\"ci\" must be ordered [low, high], not [{ci[0]}, {ci[1]}]")
    n = item.get("n")
    if not (isinstance(n, int) and not isinstance(n, bool)):
        out.append(f"\"n\" must be a whole number, not {_json_type(n)}" + (" (it is missing)" if "n" not in item
                                                                            else ""))
    elif n < 1:
        out.append(f"\"n\" must be at least 1 (the number of documents scored), not {n}: a figure over no "
                   "document measures nothing")
    if item.get("baseline") is not None:
        out.append(_share_problem("baseline", item["baseline"]))
    return [w for w in out if w]


def _finding_shape_problems(d: Any) -> str:
    """What is wrong with one serialized finding ("" when nothing)."""
    if not isinstance(d, dict):
        return f"must be a finding (an object with an \"id\"), not {_json_type(d)}"
    if not isinstance(d.get("id"), (str, int)) or isinstance(d.get("id"), bool):
        return "must have an \"id\" (a string)"
    hl = d.get("highlights")
    if hl is not None:
        if not isinstance(hl, list):
            return f"\"highlights\" must be a list, not {_json_type(hl)}"
        for h in hl:
            if not (isinstance(h, dict) and isinstance(h.get("start"), int) and isinstance(h.get("end"), int)
                    and not isinstance(h["start"], bool) and not isinstance(h["end"], bool)
                    and 0 <= h["start"] <= h["end"]):
                return "each highlight must be an object with whole-number offsets 0 <= \"start\" <= \"end\""
    if d.get("highlights_in") is not None and not isinstance(d["highlights_in"], str):
        return "\"highlights_in\" must be a document id (a string)"
    private = d.get("private")
    if private is not None and not (isinstance(private, list) and all(isinstance(x, str) for x in private)):
        return "\"private\" must be a list of fact names"
    if d.get("summary") is not None and not isinstance(d["summary"], str):
        return "\"summary\" must be a string"
    return ""
