"""What an audit returns: :class:`Results` (a tidy table, the HTML report, the gate, a results
file) and :class:`GateOutcome` (the gate's typed verdict).

A :class:`Results` holds the results file's content and the sanitized texts of its releases
(the report draws its evidence on them), in memory: nothing is written until
:meth:`Results.save` or :meth:`Results.report` is called.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.core.arguments import NonNegativeInt, checked
from audit.core.checks import Check
from audit.core.errors import AnonauditError
from audit.core.results import Result, ResultsFile
from audit.core.summary import COLUMNS, summary_rows

PANDAS_HINT = "pip install 'anonaudit[pandas]'"


def import_pandas():
    """pandas, or an :class:`AnonauditError` saying how to install it (an optional extra)."""
    try:
        import pandas as pd
    except ImportError:
        raise AnonauditError(f"to_pandas() needs pandas: {PANDAS_HINT} (or use to_list())") from None
    return pd


@dataclass(frozen=True)
class GateOutcome:
    """The gate's verdict on a set of results: ``status`` is ``"pass"``, ``"fail"`` or
    ``"inconclusive"`` (no check fails but an attacker failed its own check, so its low risk
    proves nothing); ``exit_code`` is the CLI's (0, 1, 3); ``checks`` are the typed checks of
    :mod:`audit.pipeline.gate`. True only when every check passes."""

    checks: tuple[Any, ...]
    status: str
    exit_code: int
    #: The files the judged results came from (:meth:`Results.inputs`): :meth:`write_junit` may not replace one.
    inputs: tuple[tuple[str, Path], ...] = ()
    #: How what is published names each release named after its file (its shareable pseudonym:
    #: :func:`reports.shareable.release_pseudonyms`): :meth:`table` and :meth:`write_junit` unless ``keep_ids``.
    names: Mapping[str, str] = field(default_factory=dict)

    def published(self, keep_ids: bool = False) -> list[Any]:
        """The checks as a published table names them: a release named after its file by its
        pseudonym (``R1``...) unless ``keep_ids``, as ``anonaudit gate`` prints them."""
        from reports.ci import renamed

        return renamed(list(self.checks), {} if keep_ids else dict(self.names))

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def __bool__(self) -> bool:
        return self.passed

    @property
    def failed(self) -> list[Any]:
        return [c for c in self.checks if c.status == "fail"]

    def to_list(self) -> list[dict[str, Any]]:
        return [{"release": c.release, "name": c.threshold.name, "side": c.threshold.side,
                 "threshold": c.threshold.value, "bound": c.bound, "compared": c.compared, "status": c.status,
                 "reason": c.reason} for c in self.checks]

    def to_pandas(self):
        return import_pandas().DataFrame(self.to_list(), columns=["release", "name", "side", "threshold", "bound",
                                                                  "compared", "status", "reason"])

    def table(self, *, keep_ids: bool = False) -> str:
        """The plain-text table ``anonaudit gate`` prints (releases named as :meth:`published`)."""
        from audit.pipeline.gate import format_table

        return format_table(self.published(keep_ids))

    @checked
    def write_junit(self, path: str | os.PathLike, *, force: bool = False, keep_ids: bool = False) -> Path:
        """Write the checks as JUnit XML to ``path``: not over an input of the results nor an
        existing file of another kind (the command line's guard) unless ``force=True``. A release
        named after its file is named by its pseudonym unless ``keep_ids`` (:meth:`published`)."""
        from audit.pipeline.gate import write_junit
        from audit.pipeline.outputs import Output, check_outputs

        check_outputs([Output(Path(path), "junit", "the JUnit file")], self.inputs, force=force,
                      force_named="force=True")
        return write_junit(path, self.published(keep_ids))

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        """The verdict and the checks, inline in a notebook (:mod:`reports.notebook`)."""
        from reports.notebook import gate_html

        return gate_html(list(self.checks), self.status, self.exit_code)


@dataclass
class Results:
    """The results of an audit, an attack or utility metrics.

    ``to_pandas()`` (or ``to_list()``) is the flat table, one row per release x result
    (columns :data:`audit.core.summary.COLUMNS`: release, kind, name, value, ci_low, ci_high,
    n, baseline, beats_baseline, inconclusive, warning), the same as ``summary.csv``.
    ``results`` are the typed :class:`~audit.core.results.Result` objects with their
    per-document findings; ``provenance`` says how they were made. ``computed``, ``reused``,
    ``skipped`` and ``errors`` say what the run did; ``outcome`` is the verdict of the spec's
    gate when :func:`anonaudit.run` ran a spec that has one.
    """

    file: ResultsFile
    #: The release copies the report reads: {path relative to the results file: JSONL bytes}.
    copies: Mapping[str, bytes] = field(default_factory=dict)
    computed: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    keys: list[tuple[str, str, str]] = field(default_factory=list)
    #: Where the results file is, when the run wrote one (``out=``) or it was loaded.
    path: Path | None = None
    #: How long the run took (0 for results loaded from a file).
    seconds: float = 0.0
    #: The verdict of the spec's gate (:func:`anonaudit.run` of a spec with a ``gate``), else None.
    outcome: GateOutcome | None = None

    # -- reading
    @property
    def results(self) -> list[Result]:
        return list(self.file.results)

    @property
    def provenance(self) -> dict[str, Any]:
        return self.file.provenance

    @property
    def releases(self) -> list[str]:
        return self.file.releases

    @checked
    def get(self, name: str, release: str) -> Result | None:
        """The result ``name`` on ``release`` (None when there is none)."""
        return self.file.get(name, release)

    def to_list(self) -> list[dict[str, Any]]:
        return summary_rows(self.file.results)

    def to_pandas(self):
        """One row per release x result: the table of ``summary.csv``."""
        return import_pandas().DataFrame(self.to_list(), columns=list(COLUMNS))

    def findings(self):
        """One row per release x result x document (the report's findings CSV, as a DataFrame):
        ``success`` True (the attack succeeded on the document), False or None (not scored),
        its one-sentence ``summary``, and how many evidence ``marks`` it left in which document."""
        rows = [{"release": r.release, "result": r.name, "kind": r.kind, "document": d.id, "success": d.success,
                 "summary": d.summary, "marks": len(d.highlights),
                 "marks_in": d.highlights_in or (d.id if d.highlights else None)}
                for r in self.file.results for d in r.documents]
        return import_pandas().DataFrame(rows, columns=["release", "result", "kind", "document", "success",
                                                        "summary", "marks", "marks_in"])

    def _repr_html_(self) -> str:
        """Inline in a notebook (:mod:`reports.notebook`): the verdict first, the risks with their
        intervals and baselines, utility, the privacy-utility chart, per-document evidence collapsed."""
        from reports.notebook import results_html

        return results_html(self.file, texts=self.texts())

    def log_mlflow(self, uri: str | None = None, **options: Any) -> str:
        """Log these results to MLflow as one run (the spec and parameters, one metric per release x
        result with its interval and n, the report and the results bundle) and return the run's id;
        the shareable edition unless ``private=True``: :func:`anonaudit.tracking.log_mlflow`."""
        from anonaudit.tracking import log_mlflow

        return log_mlflow(self, uri, **options)

    def to_latex(self, *, title: str = "Audit results", label: str = "tab:audit", keep_ids: bool = False) -> str:
        """A LaTeX table for a paper (pandas' Styler; booktabs): one row per release, each attack's
        risk and each utility with its 95% interval, risks above chance marked (the interval named
        in the note): :func:`reports.latex.results_latex`. A release named after its file is
        named by its pseudonym (``R1``...) unless ``keep_ids``, as in the shareable report."""
        from reports.latex import results_latex
        from reports.shareable import published_names, release_pseudonyms

        names = {} if keep_ids else release_pseudonyms(self.file)
        return results_latex(published_names(list(self.file.results), names), title=title, label=label)

    def __len__(self) -> int:
        return len(self.file.results)

    def __repr__(self) -> str:
        names = sorted({r.name for r in self.file.results})
        return f"Results({len(self.file.results)} results: {', '.join(names)} on {', '.join(self.releases)})"

    # -- the gate
    @checked
    def gate(self, max: Mapping[str, float] | None = None, min: Mapping[str, float] | None = None, *,  # noqa: A002
             releases: Sequence[str] = (), on_point: bool = False) -> GateOutcome:
        """Judge thresholds as ``anonaudit gate`` does (on the cautious end of each 95% CI unless
        ``on_point``): ``max={"phrase_search": 0.1}`` fails a release whose risk may exceed 0.1,
        ``min={"rouge": 0.5}`` one whose utility may fall below 0.5. Raises
        :class:`~audit.pipeline.gate.GateInputError` for a name or release not in the results."""
        from audit.pipeline.gate import Threshold, evaluate, exit_code

        thresholds = [_threshold(k, "max", v, Threshold) for k, v in (max or {}).items()] + \
                     [_threshold(k, "min", v, Threshold) for k, v in (min or {}).items()]
        checks = evaluate(self.file, thresholds, releases=list(releases), on_point=on_point)
        code = exit_code(checks)
        status = {0: "pass", 1: "fail", 3: "inconclusive"}[code]
        from reports.shareable import release_pseudonyms

        return GateOutcome(tuple(checks), status, code, tuple(self.inputs()), release_pseudonyms(self.file))

    # -- writing
    @checked
    def save(self, path: str | os.PathLike, *, force: bool = False) -> Path:
        """Write the results bundle: the results file (``results.json``), ``summary.csv`` beside it,
        the release copies the report reads (``releases/`` beside ``results.json``, ``X.releases/``
        beside ``X.json``) and the manifest listing each with its sha256 (:mod:`audit.core.bundle`),
        so that ``anonaudit report``, ``gate`` and :func:`load_results` work on it later, anywhere.
        An existing file is replaced only with ``force=True``, and never one these results were
        made from (an input, a release copy: :meth:`inputs`), nor where no file can be written
        (the command line's guard, :func:`audit.pipeline.outputs.check_outputs`)."""
        from audit.core.bundle import check_manifest_target
        from audit.core.files import atomic_write
        from audit.pipeline.outputs import check_outputs, results_outputs
        from audit.pipeline.releases import release_file_name

        path = Path(path)
        own = self.path.resolve() if self.path else None
        check_outputs(results_outputs(path, "the results file"),
                      [(label, p) for label, p in self.inputs() if Path(p).resolve() != own],
                      force=force, force_named="force=True")
        if path.exists() and not force and path.resolve() != own:
            raise AnonauditError(f"{path}: exists; pass force=True to replace it")
        check_manifest_target(path)  # before any copy is written
        folder = path.parent / ("releases" if path.name == "results.json" else f"{path.stem}.releases")
        prov = json.loads(json.dumps(self.file.provenance))  # a copy, with the copies' new places
        for name, info in (prov.get("releases") or {}).items():
            data = self.copies.get(str(info.get("path"))) if isinstance(info, dict) else None
            if data is None:  # no copy in hand (an older run's, damaged): the bundle lists none
                if isinstance(info, dict):
                    info.pop("path", None)
                continue
            target = folder / release_file_name(name)
            atomic_write(target, data)
            info["path"] = os.path.relpath(target, path.parent)
        rf = ResultsFile(results=list(self.file.results), provenance=prov)
        rf.save(path)
        return path

    @checked
    def report(self, path: str | os.PathLike, *, shareable: bool = False,
               gate: GateOutcome | Sequence[Check] | None = None, max_documents: NonNegativeInt = 50, title: str | None = None, notes: Sequence[str] = (),
               keep_ids: bool = False, force: bool = False, guide: str = "docs/") -> Path:
        """Write the HTML report to ``path`` and its per-document findings beside it
        (``findings.csv`` for ``report.html``, ``NAME.csv`` otherwise); ``shareable=True``
        leaves out every original text, span, guess and predicted identity. ``gate``: a
        :class:`GateOutcome` (or its checks) shown beside the verdict (default: the checks the run
        recorded in the results, when its spec had a gate). In the shareable edition
        document ids are stable pseudonyms unless ``keep_ids``. Each part of the page links to
        its explanation in the user guide: ``guide`` is the folder or URL of the built guide
        (default ``docs/``, a relative link that works offline with the site built beside the
        report). Returns the path.

        Either file may not be an input of these results (:meth:`inputs`) nor an existing file
        of another kind (the command line's guard, :func:`audit.pipeline.outputs.check_outputs`):
        refused with :class:`AnonauditError` unless ``force=True``."""
        from audit.pipeline.outputs import check_outputs, report_outputs
        from reports.export import write_findings_csv
        from reports.render import write_report
        from reports.shareable import shareable as make_shareable

        out = Path(path)
        page, csv = report_outputs(out)
        check_outputs((page, csv), self.inputs(), force=force, force_named="force=True")
        write_findings_csv(csv.path, make_shareable(self.file, keep_ids=keep_ids) if shareable else self.file)
        checks = None if gate is None else list(gate.checks if isinstance(gate, GateOutcome) else gate)
        return write_report(out, self.file, shareable=shareable, checks=checks, texts=self.texts(),
                            max_documents=max_documents, title=title, notes=list(notes), csv_name=csv.path.name,
                            keep_ids=keep_ids, guide=guide)

    def inputs(self) -> list[tuple[str, Path]]:
        """The files these results were made from or read from, by what they are: the results
        file, the release copies beside it, and the input and release files their provenance
        records (a relative path there is taken from the working folder, as the run took it)."""
        found: list[tuple[str, Path]] = []
        if self.path is not None:
            found.append(("the results file", Path(self.path)))
            base = Path(self.path).parent
            for name, info in (self.file.provenance.get("releases") or {}).items():
                if isinstance(info, Mapping) and isinstance(info.get("path"), str):
                    found.append((f"the copy of release {name}", base / info["path"]))
        for role, info in (self.file.provenance.get("inputs") or {}).items():
            if isinstance(info, Mapping) and isinstance(info.get("path"), str):
                found.append((f"the {role} input", Path(info["path"])))
        for name, info in (self.file.provenance.get("releases") or {}).items():
            if isinstance(info, Mapping) and isinstance(info.get("source"), str):
                found.append((f"release {name}", Path(info["source"])))
        return found

    def texts(self) -> dict[str, dict[str, str]]:
        """The sanitized text of each document of each release: ``{release: {id: text}}``."""
        out: dict[str, dict[str, str]] = {}
        for name, info in (self.file.provenance.get("releases") or {}).items():
            data = self.copies.get(str(info.get("path"))) if isinstance(info, Mapping) else None
            if data is None:
                continue
            texts: dict[str, str] = {}
            for line in data.decode("utf-8", errors="replace").split("\n"):
                if line.strip():
                    d = json.loads(line)
                    texts[str(d["id"])] = str(d["text"])
            out[str(name)] = texts
        return out


def _threshold(name: str, side: str, value: Any, cls: Any) -> Any:
    from audit.pipeline.gate import GateInputError

    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise GateInputError(f"{side}={{{name!r}: {value!r}}}: a threshold is a number between 0 and 1")
    return cls(str(name), side, float(value))


def read_copies(results_path: Path, rf: ResultsFile, *, strict: bool = True, skip: Any = ()) -> dict[str, bytes]:
    """The release copies recorded in ``rf``'s provenance, read from beside ``results_path`` and
    checked (:func:`audit.core.bundle.release_copies`). ``strict``: a copy missing or changed is
    an error naming it (loading results to report on them); otherwise it is left out (after a
    run into a results file, for an earlier run's copy: the report's to refuse, not a reason to
    fail the attack that just ran). ``skip``: the copies already in hand (this run's)."""
    from audit.core.bundle import release_copies

    return release_copies(results_path, rf.provenance, strict=strict, skip=skip)


@checked
def load_results(path: str | os.PathLike) -> Results:
    """Read a results bundle into :class:`Results`: the results file (or the folder holding
    ``results.json``) and the release copies beside it, every part checked against the bundle's
    manifest (:mod:`audit.core.bundle`): a part missing or changed is an :class:`AnonauditError`
    naming it. A results file written before manifests existed is read with its copies checked
    against its provenance."""
    from audit.core.bundle import reading, results_file
    from audit.core.results import load_verified

    path = results_file(path)
    with reading(path):  # one write's parts: a writer holds the lock from results.json to the manifest
        rf = load_verified(path)  # the manifest and its parts verified first, then the results file read
        copies = read_copies(path, rf)
    return Results(rf, copies=copies, path=path)
