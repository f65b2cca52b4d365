"""Checksums of the folders the toolkit saves and reuses: one mechanism for all of them.

A folder the toolkit writes to reuse later (a phrase-search n-gram index, ``--index-dir``; a
trained TRIR attacker in the cache) is *sealed* when complete: :func:`seal` writes
``CHECKSUMS`` inside it, the sha256 of every file (by relative path). Before such a folder is
reused, :func:`verify` compares what is there with what was sealed and says what differs (a
file changed, missing or added, or no seal at all: a folder saved by an older version, or an
interrupted save). A caller that finds a problem rebuilds the folder and says so
(:func:`rebuild_message`); a corrupt or tampered folder is never reused.

The embedded model files are checked against pinned sha256 values instead
(:mod:`audit.models.embedded`), and the rows of the embeddings cache carry a checksum each
(:mod:`audit.models.embed`), both through :func:`audit.core.files.sha256_file` /
:func:`row_checksum` here.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from audit.core.files import atomic_write_json, sha256_file

#: The seal's file name inside a sealed folder.
CHECKSUMS = "anonaudit-checksums.json"
_SCHEMA = "anonaudit.checksums/1"


def _files(folder: Path) -> list[Path]:
    """The files a seal covers: every file under ``folder`` but the seal itself, lock files and
    temporaries of atomic writes (dot files)."""
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and p.name != CHECKSUMS and not p.name.startswith("."))


def seal(folder: str | os.PathLike[str]) -> Path:
    """Write the checksums of every file in ``folder`` (a complete save) into it; returns the seal."""
    folder = Path(folder)
    files = {p.relative_to(folder).as_posix(): sha256_file(p) for p in _files(folder)}
    return atomic_write_json(folder / CHECKSUMS, {"schema": _SCHEMA, "files": files}, fsync=True)


def unseal(folder: str | os.PathLike[str]) -> None:
    """Remove the seal before a folder is written again (an interrupted rewrite is then unsealed)."""
    (Path(folder) / CHECKSUMS).unlink(missing_ok=True)


def verify(folder: str | os.PathLike[str]) -> str | None:
    """``None`` when ``folder`` holds exactly what was sealed, else what is wrong, in words."""
    folder = Path(folder)
    try:
        data = json.loads((folder / CHECKSUMS).read_text(encoding="utf-8"))
        sealed = data["files"] if data.get("schema") == _SCHEMA else None
        if not isinstance(sealed, dict) or not all(isinstance(v, str) for v in sealed.values()):
            raise ValueError
    except FileNotFoundError:
        return f"no checksums ({CHECKSUMS}): saved by an older version, or the save was interrupted"
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        return f"its checksums ({CHECKSUMS}) are unreadable"
    present = {p.relative_to(folder).as_posix(): p for p in _files(folder)}
    for name, digest in sealed.items():
        if name not in present:
            return f"{name} is missing"
        try:
            if sha256_file(present[name]) != digest:
                return f"{name} changed since it was saved (sha256 differs)"
        except OSError as exc:
            return f"{name} is unreadable ({exc.strerror or exc})"
    extra = sorted(set(present) - set(sealed))
    if extra:
        return f"{extra[0]} was added after it was saved"
    return None


def rebuild_message(what: str, folder: str | os.PathLike[str], problem: str) -> str:
    """The one message for a folder that is rebuilt because :func:`verify` found ``problem``."""
    return f"{what} in {folder} is corrupt or was changed ({problem}): rebuilding it"


def row_checksum(*parts: bytes | str) -> str:
    """A short checksum of one cache row's content (16 hex digits of sha256)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:16]
