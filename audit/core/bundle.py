"""The results bundle: a results file and the parts beside it that the report reads, with a
manifest that lists every part and its sha256.

A results file ``R.json`` is written with its parts (paths relative to its folder):

- ``R.json`` itself, and its summary table (``summary.csv``, ``R.summary.csv``:
  :mod:`audit.core.summary`);
- the copy of each release (``releases/NAME-HASH.jsonl``, ``R.releases/...``), whose path and
  sha256 its provenance records: the report draws each document's evidence on it;
- ``R.manifest.json``: ``{"schema": "anonaudit.bundle/1", "results": "R.json", "parts": [{"path",
  "role", "sha256", "bytes"}, ...]}``, written last, every time the results file is written.

The folder holding them is self-contained: moved or copied anywhere, :func:`anonaudit.load_results`,
``anonaudit report`` and ``anonaudit gate`` work on it with nothing else present. A part that is
missing or altered (its sha256 is not the manifest's) is an :class:`AnonauditError` naming it,
never left out without a word. Its readers hold the results file's lock while they read the
parts (:func:`reading`), as its writer does while it writes them. A results file written before
the manifest existed has none: its
release copies are still checked against the sha256 its provenance records, and a missing one is
an error that says what to do.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from audit.core.errors import AnonauditError
from audit.core.files import atomic_write_json, locked, sha256_file

SCHEMA = "anonaudit.bundle/1"


def results_file(path: str | os.PathLike[str]) -> Path:
    """The results file a path names: the path itself, or ``results.json`` in a bundle's folder."""
    path = Path(path)
    return path / "results.json" if path.is_dir() else path


@contextlib.contextmanager
def reading(results_path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the results file's lock (:func:`audit.core.files.locked`, which a writer holds from
    the results file to its manifest: :meth:`audit.core.results.ResultsFile.update`) while the
    ``with`` block reads the bundle's parts, so that a reader never sees the results of one write
    with the manifest of another. A results file that is not a plain file (read from a pipe), or
    whose folder cannot hold the lock file (read-only: no writer there), is read without it."""
    with contextlib.ExitStack() as stack:
        if Path(results_path).is_file():
            with contextlib.suppress(AnonauditError):
                stack.enter_context(locked(results_path))
        yield


def manifest_path(results_path: str | os.PathLike[str]) -> Path:
    """``R.manifest.json`` beside the results file ``R.json``."""
    path = Path(results_path)
    return path.with_name(f"{path.stem}.manifest.json")


def _is_manifest(path: Path) -> bool:
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("schema") == SCHEMA
    except (OSError, ValueError, AttributeError):
        return False


def check_manifest_target(results_path: str | os.PathLike[str]) -> Path:
    """The manifest's path, refused when a file there is not a manifest anonaudit wrote (a
    user's ``R.manifest.json`` beside ``--out R.json`` is never written over)."""
    target = manifest_path(results_path)
    if target.is_dir() or (target.exists() and target.stat().st_size and not _is_manifest(target)):
        raise AnonauditError(f"{target}: the manifest of {Path(results_path).name} goes there, but it is "
                             "not one anonaudit wrote; move it away or choose another results file name")
    return target


def release_parts(provenance: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    """``(release name, path relative to the results folder, recorded sha256)`` of each release
    copy the provenance records."""
    found = []
    for name, info in (provenance.get("releases") or {}).items():
        if isinstance(info, Mapping) and isinstance(info.get("path"), str):
            sha = info.get("sha256")
            found.append((str(name), info["path"], sha if isinstance(sha, str) else None))
    return found


def write_manifest(results_path: str | os.PathLike[str], provenance: Mapping[str, Any]) -> Path:
    """Write ``R.manifest.json``: the results file, its summary and every release copy its
    provenance records, each with its sha256 (the copies' as recorded when they were written)."""
    from audit.core.summary import summary_path

    path = Path(results_path)
    parts: list[dict[str, Any]] = []
    for role, part in (("results", path), ("summary", summary_path(path))):
        parts.append({"path": part.name, "role": role, "sha256": sha256_file(part), "bytes": part.stat().st_size})
    for name, rel, sha in release_parts(provenance):
        target = path.parent / rel
        parts.append({"path": rel, "role": "release copy", "release": name,
                      "sha256": sha or (sha256_file(target) if target.is_file() else None)})
    return atomic_write_json(check_manifest_target(path), {"schema": SCHEMA, "results": path.name, "parts": parts})


def _what(part: Mapping[str, Any]) -> str:
    if part.get("role") == "release copy":
        return f"the copy of release {part.get('release')!r}"
    return {"results": "the results file", "summary": "the summary table"}.get(str(part.get("role")), "a part")


def check_bundle(results_path: str | os.PathLike[str]) -> None:
    """Every part the manifest beside ``results_path`` lists must be there, inside the folder,
    with the sha256 listed: otherwise an :class:`AnonauditError` naming the part. No manifest
    (results written before it existed): nothing to check here (:func:`release_copies` checks
    the copies against the provenance)."""
    path = Path(results_path)
    manifest = manifest_path(path)
    if not manifest.is_file():
        return
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        parts = data["parts"] if data.get("schema") == SCHEMA else None
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        parts = None
    if not isinstance(parts, list) or not all(isinstance(p, Mapping) and isinstance(p.get("path"), str)
                                              for p in parts):
        raise AnonauditError(f"{manifest}: damaged manifest of the results bundle {path.name}; run the audit "
                             "again, or delete it to read the results file as an older one")
    base = path.resolve().parent
    problems = []
    for part in parts:
        target = Path(os.path.normpath(base / part["path"]))
        if not target.is_relative_to(base):
            problems.append(f"{manifest}: {_what(part)} is listed at {part['path']!r}, outside the bundle's folder")
        elif not target.is_file():
            problems.append(f"{target}: {_what(part)} is missing from the results bundle (listed in {manifest.name}); "
                            "copy the whole folder, or run the audit again")
        elif part.get("sha256") is not None and sha256_file(target) != part["sha256"]:
            problems.append(f"{target}: {_what(part)} was changed after the audit wrote it (its sha256 is not the "
                            f"one in {manifest.name}); run the audit again to rewrite it")
    if problems:
        raise AnonauditError("\n".join(problems))


def release_copies(results_path: str | os.PathLike[str], provenance: Mapping[str, Any], *,
                   strict: bool = True, skip: Any = ()) -> dict[str, bytes]:
    """The release copies the provenance records, read from beside ``results_path``, by their
    recorded path. A path outside the results folder is always refused; a copy that is missing or
    whose sha256 is not the recorded one is an :class:`AnonauditError` naming it (``strict``),
    else left out (after a run, whose own copies it holds in memory: an older run's damaged copy
    in the same results file is the report's to refuse). ``skip``: paths already in hand. A
    results file read from a pipe (``<(cmd)``, ``/dev/stdin``) has no folder, so no parts: its
    report shows the results without the release texts."""
    if not Path(results_path).is_file():
        return {}
    base = Path(results_path).resolve().parent
    copies: dict[str, bytes] = {}
    for name, rel, sha in release_parts(provenance):
        target = Path(os.path.normpath(base / rel))  # lexically: a link inside the folder is fine
        if not target.is_relative_to(base):  # the runner writes copies beside the results, never elsewhere
            raise AnonauditError(f"{results_path}: the copy of release {name!r} is recorded at {rel!r}, "
                                 "outside the results folder; a results file never points there")
        if rel in skip:
            continue
        if not target.is_file():
            if strict:
                raise AnonauditError(f"{target}: the copy of release {name!r} is missing beside {results_path} "
                                     "(the report shows each document's evidence on it); copy the whole results "
                                     "folder, or run the audit again")
            continue
        data = target.read_bytes()
        if sha is not None and hashlib.sha256(data).hexdigest() != sha:
            if strict:
                raise AnonauditError(f"{target}: the copy of release {name!r} was changed after the audit wrote it "
                                     f"(its sha256 is not the one recorded in {results_path}); the report would "
                                     "show the wrong text. Run the audit again to rewrite it.")
            continue
        copies[rel] = data
    return copies
