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
import re
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
    provenance records, each with its sha256 (the copies' as recorded when they were written; a
    copy with no recorded sha256 and no file is left out, and the readers name it as missing)."""
    from audit.core.summary import summary_path

    path = Path(results_path)
    parts: list[dict[str, Any]] = []
    for role, part in (("results", path), ("summary", summary_path(path))):
        parts.append({"path": part.name, "role": role, "sha256": sha256_file(part), "bytes": part.stat().st_size})
    for name, rel, sha in release_parts(provenance):
        target = path.parent / rel
        sha = sha or (sha256_file(target) if target.is_file() else None)
        if sha is not None:
            parts.append({"path": rel, "role": "release copy", "release": name, "sha256": sha})
    return atomic_write_json(check_manifest_target(path), {"schema": SCHEMA, "results": path.name, "parts": parts})


def _what(part: Mapping[str, Any]) -> str:
    if part.get("role") == "release copy":
        return f"the copy of release {part.get('release')!r}"
    return {"results": "the results file", "summary": "the summary table"}.get(str(part.get("role")), "a part")


#: The keys each role of part has (``bytes`` is optional for a release copy).
PART_KEYS = {"results": ({"path", "role", "sha256", "bytes"}, set()),
             "summary": ({"path", "role", "sha256", "bytes"}, set()),
             "release copy": ({"path", "role", "release", "sha256"}, {"bytes"})}
_SHA = re.compile(r"^[0-9a-f]{64}$")


def _part_problems(i: int, part: Any) -> list[str]:
    """What is wrong with the shape of ``parts[i]`` (the part named)."""
    if not isinstance(part, Mapping):
        return [f"parts[{i}] must be an object, not {type(part).__name__}"]
    role = part.get("role")
    if role not in PART_KEYS:
        return [f"parts[{i}]: \"role\" must be one of {', '.join(PART_KEYS)}, not {role!r}"[:200]]
    required, optional = PART_KEYS[role]
    where = f"parts[{i}] ({_what(part)}, {str(part.get('path'))[:100]!r})"
    out = [f"{where}: \"{k}\" is missing" for k in sorted(required - set(part))]
    out += [f"{where}: unknown key \"{k}\""[:200] for k in sorted(set(part) - required - optional)]
    for key in ("path", "release"):
        if key in part and key in required and not (isinstance(part[key], str) and part[key]):
            out.append(f"{where}: \"{key}\" must be a non-empty string, not {part[key]!r}"[:200])
    if "sha256" in part and not (isinstance(part["sha256"], str) and _SHA.match(part["sha256"])):
        out.append(f"{where}: \"sha256\" must be 64 lowercase hex digits, not {part['sha256']!r}"[:200])
    if "bytes" in part and not (isinstance(part["bytes"], int) and not isinstance(part["bytes"], bool)
                                and part["bytes"] >= 0):
        out.append(f"{where}: \"bytes\" must be a whole number of bytes, not {part['bytes']!r}"[:200])
    return out


def manifest_problems(data: Any, results_name: str, summary_name: str) -> list[str]:
    """Every way the parsed manifest ``data`` of the results file ``results_name`` differs from
    the schema: a missing, extra or null key, a part of unknown role, a sha256 that is not one,
    a part listed twice, no results file or no summary listed (each named)."""
    if not isinstance(data, Mapping):
        return [f"the manifest must be an object, not {type(data).__name__}"]
    out = [f"\"{k}\" is missing" for k in ("schema", "results", "parts") if k not in data]
    out += [f"unknown key \"{k}\""[:200] for k in sorted(set(data) - {"schema", "results", "parts"})]
    if "schema" in data and data["schema"] != SCHEMA:
        out.append(f"\"schema\" must be {SCHEMA!r}, not {data['schema']!r}"[:200])
    if "results" in data and data["results"] != results_name:
        out.append(f"\"results\" must be {results_name!r} (the results file beside it), not {data['results']!r}"[:200])
    parts = data.get("parts")
    if not isinstance(parts, list):
        return out + ([f"\"parts\" must be a list of parts, not {parts!r}"[:200]] if "parts" in data else [])
    for i, part in enumerate(parts):
        out += _part_problems(i, part)
    if out:
        return out
    paths = [p["path"] for p in parts]
    out += [f"the part {p!r} is listed {paths.count(p)} times" for p in sorted(set(paths)) if paths.count(p) > 1]
    names = [p["release"] for p in parts if p["role"] == "release copy"]
    out += [f"the copy of release {n!r} is listed {names.count(n)} times" for n in sorted(set(names))
            if names.count(n) > 1]
    for role, name in (("results", results_name), ("summary", summary_name)):
        listed = [p["path"] for p in parts if p["role"] == role]
        if listed != [name]:
            out.append(f"{_what({'role': role})} must be listed once, as {name!r} (listed: {listed})"[:200])
    return out


def _read_manifest(manifest: Path, results_path: Path) -> list[Mapping[str, Any]]:
    """The parts of a manifest, read with the duplicate-key-refusing reader and checked whole
    against the schema (:func:`manifest_problems`); an :class:`AnonauditError` naming every
    problem otherwise."""
    from audit.core import safejson
    from audit.core.summary import summary_path

    try:
        data = safejson.loads(manifest.read_bytes(), str(manifest))
    except OSError as exc:
        raise AnonauditError(f"{manifest}: cannot read the manifest ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise AnonauditError(f"{manifest}: damaged manifest of the results bundle {results_path.name} ({exc}); "
                             "run the audit again") from None
    problems = manifest_problems(data, results_path.name, summary_path(results_path).name)
    if problems:
        raise AnonauditError(f"{manifest}: the manifest of the results bundle {results_path.name} is not valid "
                             "(run the audit again to rewrite it):\n  - " + "\n  - ".join(problems))
    return data["parts"]


def check_bundle(results_path: str | os.PathLike[str]) -> None:
    """Every part the manifest beside ``results_path`` lists must be there, inside the folder,
    with the sha256 listed (and the size, where listed): otherwise an :class:`AnonauditError`
    naming the part. The manifest itself must follow the schema whole (:func:`manifest_problems`).
    Run before the results file is read (then :func:`check_coverage` on its provenance). No
    manifest (results written before it existed): nothing to check here (:func:`release_copies`
    checks the copies against the provenance)."""
    path = Path(results_path)
    manifest = manifest_path(path)
    if not manifest.is_file():
        return
    parts = _read_manifest(manifest, path)
    base = path.resolve().parent
    problems = []
    for part in parts:
        target = Path(os.path.normpath(base / part["path"]))
        if Path(part["path"]).is_absolute() or not target.is_relative_to(base):
            problems.append(f"{manifest}: {_what(part)} is listed at {part['path']!r}, outside the bundle's folder")
        elif not target.is_file():
            problems.append(f"{target}: {_what(part)} is missing from the results bundle (listed in {manifest.name}); "
                            "copy the whole folder, or run the audit again")
        elif sha256_file(target) != part["sha256"] or part.get("bytes", target.stat().st_size) != target.stat().st_size:
            problems.append(f"{target}: {_what(part)} was changed after the audit wrote it (its sha256 is not the "
                            f"one in {manifest.name}); run the audit again to rewrite it")
    if problems:
        raise AnonauditError("\n".join(problems))


def check_coverage(results_path: str | os.PathLike[str], provenance: Mapping[str, Any]) -> None:
    """The manifest beside ``results_path`` (checked by :func:`check_bundle`) lists every release
    copy the results file's provenance records, at the path and with the sha256 it records, and no
    other: a copy left out of the manifest, or one the provenance does not know, is refused
    naming it. A results file written with a manifest (its provenance's ``bundle``) whose manifest
    is gone is refused too: only a file from before manifests is read without one."""
    path = Path(results_path)
    manifest = manifest_path(path)
    if not manifest.is_file():
        if provenance.get("bundle") == SCHEMA and path.is_file():
            raise AnonauditError(f"{manifest}: the manifest of {path.name} is missing, though {path.name} was written "
                                 "with one (its provenance says \"bundle\"); copy the whole folder, or run the audit "
                                 "again")
        return
    listed = {p["release"]: p for p in _read_manifest(manifest, path) if p["role"] == "release copy"}
    recorded = {name: (rel, sha) for name, rel, sha in release_parts(provenance)}
    problems = [f"{manifest}: the copy of release {n!r} ({rel}) is not listed in the manifest; run the audit again"
                for n, (rel, _) in recorded.items() if n not in listed]
    problems += [f"{manifest}: the copy of release {n!r} is listed, but {path.name} records no such release"
                 for n in listed if n not in recorded]
    problems += [f"{manifest}: the copy of release {n!r} is listed at {listed[n]['path']!r} with another sha256 or "
                 f"path than {path.name} records ({rel!r}); run the audit again"
                 for n, (rel, sha) in recorded.items() if n in listed
                 and (listed[n]["path"] != rel or (sha is not None and listed[n]["sha256"] != sha))]
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
