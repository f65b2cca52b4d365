"""Where the commands and the API write: the one guard every writer calls before any work
(the commands before they start; :meth:`anonaudit.Results.report` before it writes).

An output path may not be an input of the same command (``sanitize --input X --out X``,
``report R.json --out R.json``), nor an existing file of another kind (``report ... --out
originals.jsonl``; the ``findings.csv`` beside a report written over an unrelated CSV): either
would destroy data the user did not mean to give up. Both are refused (:class:`AnonauditError`,
exit 2 on the command line) with a message naming the file. ``--force`` (the API ``force=True``)
replaces an existing file of another kind, never an input: no output destroys what the command
reads. A folder where a file should go, a parent that is a file, or a folder the user cannot
write into are refused too (``--force`` cannot help): found before the work starts, never after an
hour of it.

Kinds are recognised from the first bytes of the existing file (:data:`KINDS`); an empty file
holds nothing to lose and may be replaced by any kind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from audit.core.bundle import manifest_path
from audit.core.errors import AnonauditError
from audit.core.summary import COLUMNS as SUMMARY_COLUMNS
from audit.core.summary import FINDINGS_COLUMNS, summary_path

#: What each kind of output is, in words, for the messages.
KINDS = {
    "results": "an anonaudit results file",
    "report": "an anonaudit HTML report",
    "findings": "an anonaudit findings CSV",
    "jsonl": "a JSONL file of documents",
    "junit": "a JUnit XML file",
    "leaderboard": "an anonaudit leaderboard page",
    "leaderboard_csv": "an anonaudit leaderboard CSV",
    "leaderboard_md": "an anonaudit leaderboard table (Markdown)",
    "leaderboard_tex": "an anonaudit leaderboard table (LaTeX)",
    "codequality": "a GitLab Code Quality report (JSON)",
    "step_summary": "a job summary (Markdown, appended to)",
    "tae_spec": "an audit spec converted from a TAE config",
    "summary": "an anonaudit summary table (CSV)",
    "manifest": "an anonaudit results bundle's manifest",
    "folder": "a folder of outputs",
}
#: The one suffix rule of every output (issue 67): what a file of each kind is written as, and the
#: endings its name may have (the first is the one to give). Checked before any work by
#: :func:`check_outputs`, so ``attack --out x.pdf`` never writes JSON into a ``.pdf``. The job
#: summary is GitHub's file (``GITHUB_STEP_SUMMARY``, named by the runner): no rule.
SUFFIXES: dict[str, tuple[str, tuple[str, ...]]] = {
    "results": ("JSON", (".json",)),
    "report": ("HTML", (".html", ".htm")),
    "findings": ("CSV", (".csv",)),
    "jsonl": ("JSONL", (".jsonl", ".ndjson")),
    "junit": ("JUnit XML", (".xml",)),
    "leaderboard": ("HTML", (".html", ".htm")),
    "leaderboard_csv": ("CSV", (".csv",)),
    "leaderboard_md": ("Markdown", (".md",)),
    "leaderboard_tex": ("LaTeX", (".tex",)),
    "codequality": ("JSON", (".json",)),
    "tae_spec": ("YAML", (".yaml", ".yml")),
    "summary": ("CSV", (".csv",)),
    "manifest": ("JSON", (".json",)),
}
#: Endings that name a file's format: a folder output (``run``, ``bench``, ``demo`` ``--out``)
#: named with one of them is refused (``bench --out board.html`` would make a folder of that name).
FILE_SUFFIXES = frozenset(e for _, ends in SUFFIXES.values() for e in ends) | {
    ".pdf", ".txt", ".tsv", ".parquet", ".zip", ".gz", ".tar", ".xlsx", ".docx", ".png", ".svg", ".log"}
#: The first line of an audit spec ``data convert`` writes from a TAE config.
TAE_SPEC_HEADER = "# anonaudit audit spec converted from the TAE config"
#: Kinds of output merged into what the file holds (results): never written over an input, even
#: when forced (a forced write over a file of another kind starts a new one: :func:`replaces`).
MERGED = frozenset({"results"})
#: Kinds of output that are never written over a file of another kind, even when forced: the parts
#: beside a results file (a user's ``summary.csv`` or ``R.manifest.json`` there stays).
KEPT = frozenset({"summary", "manifest"})
_HEAD = 1 << 16

@dataclass(frozen=True)
class Output:
    """A file a command is about to write: its path, its kind (a key of :data:`KINDS`) and how
    the user named it (``--out``, ``the findings CSV beside --out``)."""

    path: Path
    kind: str
    named: str = "--out"


def _is_kind(path: Path, kind: str) -> bool:
    """Whether the existing file ``path`` already holds an output of ``kind`` (or nothing)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEAD)
    except OSError:
        return False
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if not text.strip():
        return True
    if kind == "results":
        return '"anonaudit.results/' in text
    if kind == "report":
        return "<html" in text.lower() and "anonaudit report" in text
    if kind == "findings":
        return text.splitlines()[0].strip().split(",")[:3] == list(FINDINGS_COLUMNS[:3])
    if kind == "junit":
        return text.lstrip().startswith("<?xml") and "<testsuite" in text
    if kind == "leaderboard":
        return "<html" in text.lower() and "anonaudit leaderboard" in text
    if kind == "leaderboard_csv":
        return text.startswith("rank,release,role,")
    if kind == "leaderboard_md":
        return text.startswith("| # | release |")
    if kind == "leaderboard_tex":
        return text.startswith("% anonaudit leaderboard")
    if kind == "codequality":
        return text.lstrip().startswith("[") and ('"fingerprint"' in text or not text.strip("[] \n"))
    if kind == "tae_spec":
        return text.startswith(TAE_SPEC_HEADER)
    if kind == "summary":
        return text.splitlines()[0].strip() == ",".join(SUMMARY_COLUMNS)
    if kind == "manifest":
        return '"anonaudit.bundle/' in text
    if kind == "step_summary":
        return True  # appended to, never replaced: what it holds stays
    if kind == "jsonl":
        lines = [ln for ln in text.splitlines()[:5] if ln.strip()]
        if len(head) == _HEAD and len(lines) > 1:
            lines = lines[:-1]  # the last line may be cut by the read
        try:
            return all(isinstance(r := json.loads(ln), dict) and "text" in r for ln in lines)
        except ValueError:
            return False
    raise ValueError(f"unknown output kind {kind!r}")


def suffix_problem(path: Path, kind: str) -> str:
    """Why ``path`` cannot hold an output of ``kind`` by its name ("" when it can): a file whose
    ending is not its format's (:data:`SUFFIXES`), or a folder named like a file (:data:`FILE_SUFFIXES`)."""
    ending = path.suffix.lower()
    if kind == "folder":
        if ending in FILE_SUFFIXES:
            return (f"names a folder of outputs, but its ending {path.suffix!r} is a file format's: give the "
                    "folder a name without it")
        return ""
    if kind not in SUFFIXES:
        return ""
    what, ends = SUFFIXES[kind]
    if ending in ends:
        return ""
    has = f"ends in {path.suffix!r}" if path.suffix else "has no ending"
    return (f"is written as {what} ({KINDS[kind]}), but its name {has}: give it a name ending in "
            f"{' or '.join(ends)}")


def _not_unicode(path: Path) -> bool:
    """A name made of bytes that are not UTF-8 (Python keeps them as lone surrogates)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _same(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _where_problem(path: Path) -> str:
    """Why ``path`` cannot be written whatever ``--force`` says ("" when it can)."""
    if path.is_dir():
        return "is a folder, not a file"
    parent = path.resolve().parent
    probe = parent
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        return f"cannot be written: {probe} is a file, not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"cannot be written: the folder {probe} is not writable"
    if path.exists() and not os.access(path, os.W_OK) and not os.access(parent, os.W_OK):
        return "cannot be written: it is read-only"
    return ""


def check_outputs(outputs: Iterable[Output], inputs: Sequence[tuple[str, str | os.PathLike | None]], *,
                  force: bool = False, force_named: str = "--force") -> None:
    """Refuse (:class:`AnonauditError`, every problem at once) outputs that are inputs of the
    command (``inputs``: how each was named, and its path; an input that is a results file brings
    every part of its bundle: :func:`bundle_parts`), two outputs at one path, and outputs that
    cannot be written at all, whatever ``force`` says; and existing files of another kind, unless ``force``.
    ``force_named``: how the caller's user says force (the API's ``force=True``)."""
    hard: list[str] = []
    soft: list[str] = []
    given = [(label, Path(p).expanduser()) for label, p in inputs if p]
    for label, path in given:
        if _not_unicode(path):
            hard.append(f"{label} {path!s:.200}: the file name is not valid UTF-8; rename it (file names are "
                        "recorded in the results and the report)")
    given += [part for label, path in given if not _not_unicode(path) for part in bundle_parts(path, label)]
    outputs = list(outputs)
    hard += _collisions(outputs)
    for out in outputs:
        path = Path(out.path).expanduser()
        if suffix_problem(path, out.kind):
            hard.append(f"{out.named} {path}: {suffix_problem(path, out.kind)}")
        if out.kind == "folder":
            if path.exists() and not path.is_dir():
                hard.append(f"{out.named} {path}: is a file, not a folder")
            continue
        wrong = "the file name is not valid UTF-8; choose another (it is written into the results and the report)" \
            if _not_unicode(path) else _where_problem(path)
        if wrong:
            hard.append(f"{out.named} {path}: {wrong}")
            continue
        clash = next((label for label, p in given if p.exists() and _same(path, p)), None)
        if clash is not None and out.kind in MERGED:
            hard.append(f"{out.named} {path}: this is also the command's input ({clash}); a results file is never "
                        f"written over an input ({force_named} does not change that): give another output path")
        elif clash is not None:  # no output ever destroys an input: the user's --force included
            hard.append(f"{out.named} {path}: this is also the command's input ({clash}); writing it would "
                        f"destroy that input ({force_named} does not change that): give another output path")
        elif path.exists() and not _is_kind(path, out.kind) and out.kind in KEPT:
            hard.append(f"{out.named} {path}: exists and is not one anonaudit wrote (not {KINDS[out.kind]}); it is "
                        f"never written over ({force_named} does not change that): move it away or choose another "
                        "results file name")
        elif path.exists() and not _is_kind(path, out.kind):
            soft.append(f"{out.named} {path}: exists and is not {KINDS[out.kind]}; writing it would replace "
                        "that file")
    if hard or (soft and not force):
        hint = [f"give another output path, or {force_named} to replace it anyway"] if soft and not force else []
        raise AnonauditError("\n".join(hard + (soft if not force else []) + hint))


def _collisions(outputs: Sequence[Output]) -> list[str]:
    """Two outputs of one command at one path: the second write would lose the first."""
    out, seen = [], []
    for o in outputs:
        path = Path(o.path).expanduser()
        first = next((s for s in seen if _same(path, Path(s.path).expanduser())), None)
        if first is not None:
            out.append(f"{o.named} {path} and {first.named} {Path(first.path).expanduser()} are one file: one would be "
                       "lost without a word; give each its own path")
        else:
            seen.append(o)
    return out


def bundle_parts(path: Path, label: str) -> list[tuple[str, Path]]:
    """The parts of the results bundle whose results file is the input ``path`` (``label``: how
    the command names it), each as an input of its own: its summary table, its manifest and
    every release copy (the ``releases/`` folder's files, and any other part its manifest
    lists). Empty when ``path`` is not an anonaudit results file."""
    if not path.is_file() or not path.stat().st_size or not _is_kind(path, "results"):
        return []
    copies = path.parent / ("releases" if path.name == "results.json" else f"{path.stem}.releases")
    parts = [("summary table", summary_path(path)), ("manifest", manifest_path(path)),
             *(("release copy", p) for p in sorted(copies.rglob("*")) if p.is_file())]
    parts += [("part", path.parent / rel) for rel in _listed(manifest_path(path))]
    return [(f"{label}'s {what} {part}", part) for what, part in parts]


def _listed(manifest: Path) -> list[str]:
    """The paths a manifest lists, read leniently (the guard only looks for more inputs: the
    readers refuse a damaged manifest, :func:`audit.core.bundle.check_bundle`)."""
    try:
        parts = json.loads(manifest.read_text(encoding="utf-8")).get("parts")
        return [p["path"] for p in parts if isinstance(p, dict) and isinstance(p.get("path"), str)]
    except (OSError, ValueError, AttributeError, TypeError):
        return []


def replaces(path: str | os.PathLike, kind: str) -> bool:
    """Whether writing an output of ``kind`` at ``path`` replaces an existing file of another kind
    (which :func:`check_outputs` lets through only when forced): a results writer then starts a
    new file there instead of merging into it."""
    path = Path(path).expanduser()
    return path.is_file() and not _is_kind(path, kind)


def spec_inputs(spec, spec_file: str | os.PathLike | None = None) -> list[tuple[str, Path | None]]:
    """Every input file of an audit spec (and the spec file itself, when there is one), by how the
    spec names it: what ``anonaudit run``, ``harden`` and the API's ``audit``/``run`` may not write over."""
    return [*((("the audit spec", Path(spec_file)),) if spec_file is not None else ()),
            ("originals", spec.originals and spec.originals.path),
            ("background", spec.background and spec.background.path),
            *((f"corpora.{k}", v.path) for k, v in spec.corpora.items()),
            *((f"release {r.name or r.path}", r.path) for r in spec.releases if r.path is not None)]


def results_outputs(results: Path, named: str = "--out") -> list[Output]:
    """The files a results writer makes: the results file, its summary table and its manifest
    (each writer refuses, whatever ``--force`` says, a file there it did not write:
    :mod:`audit.core.summary`, :mod:`audit.core.bundle`)."""
    return [Output(results, "results", named),
            Output(summary_path(results), "summary", f"the summary table beside {named}"),
            Output(manifest_path(results), "manifest", f"the manifest beside {named}")]


def bench_outputs(out: Path) -> list[Output]:
    """What ``bench`` writes in OUT (its command and :func:`anonaudit.bench`)."""
    return [Output(out, "folder", "the bench's folder (--out, out=)"),
            *results_outputs(out / "results.json", "OUT/results.json"),
            Output(out / "leaderboard.html", "leaderboard", "OUT/leaderboard.html"),
            Output(out / "leaderboard.csv", "leaderboard_csv", "OUT/leaderboard.csv"),
            Output(out / "leaderboard.md", "leaderboard_md", "OUT/leaderboard.md"),
            Output(out / "leaderboard.tex", "leaderboard_tex", "OUT/leaderboard.tex"),
            Output(out / "data" / "originals.jsonl", "jsonl", "OUT/data/originals.jsonl"),
            Output(out / "data" / "background.jsonl", "jsonl", "OUT/data/background.jsonl")]


def report_outputs(out: Path) -> tuple[Output, Output]:
    """The files ``report`` (and ``run``/``demo``) write: the HTML report at ``out`` and its
    findings CSV beside it (:func:`findings_csv_path`)."""
    return (Output(out, "report", "the report"),
            Output(findings_csv_path(out), "findings", f"the findings CSV beside {out.name}"))


def findings_csv_path(report: Path) -> Path:
    """``findings.csv`` beside ``report.html`` (``findings.shareable.csv`` beside
    ``report.shareable.html``), ``NAME.csv`` beside any other ``NAME.html``."""
    name = report.name
    return report.with_name("findings.csv" if name == "report.html" else
                            "findings.shareable.csv" if name == "report.shareable.html" else report.stem + ".csv")
