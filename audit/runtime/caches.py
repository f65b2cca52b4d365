"""What the caches under ``ANONAUDIT_HOME`` hold, and removing it (``anonaudit cache``).

Each kind of :data:`audit.core.config.KINDS` is one folder. An *item* is one entry of that
folder (a file, with an sqlite database's ``-wal``/``-shm`` beside it, or a folder such as one
trained attacker); its age is the time since anything in it was last written. The LLM answer
cache keeps each answer's time, so ``older_than`` removes the old answers from it and keeps the
rest; the other kinds are removed item by item. The assembled models (kind ``models``) are never
removed unless asked for by name: they are not derived from documents, and assembling them again
takes minutes.

Only what anonaudit made is removed: each kind's folder lists the items anonaudit wrote there
(:data:`audit.core.config.MANIFEST`, kept by every cache writer through
:func:`audit.core.config.record`). Anything else (the user's own files, when ANONAUDIT_HOME is a
folder that held them) is left and reported as left. Links are never followed: a kind's folder
that is a link is left as it is, and an item that is a link is unlinked, never what it points
to. A removal that fails is reported as failed, never as removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from audit.core import config
from audit.core.errors import AnonauditError
from audit.core.files import atomic_write, is_temporary, sweep_temporaries

#: The LLM answer cache's file (kind ``llm``) and its table.
LLM_FILE = "llm.sqlite"
_SIDE = ("-wal", "-shm", "-journal")


@dataclass(frozen=True)
class KindInfo:
    """One kind of cache: its folder, what it holds, and how much."""

    kind: str
    folder: Path
    holds: str
    items: int
    files: int
    bytes: int
    oldest: float | None  # seconds since the oldest item was last written
    newest: float | None  # seconds since the newest item was last written
    private: bool  # the folder is readable by its owner only


def _items(folder: Path) -> list[list[Path]]:
    """The folder's items, each the list of its paths (a database with its side files), without
    the manifest and the temporaries of writers at work. A folder that is a link has none: it is
    never followed."""
    if folder.is_symlink() or not folder.is_dir():
        return []
    names = sorted(os.listdir(folder))
    main = [n for n in names if not n.endswith(_SIDE) and n != config.MANIFEST and not is_temporary(n)]
    return [[folder / n, *(folder / (n + s) for s in _SIDE if (n + s) in names)] for n in main]


def _walk(paths: list[Path]) -> tuple[int, int, float]:
    """Files, bytes and the latest modification time under ``paths``."""
    files = size = 0
    latest = 0.0
    for p in paths:
        walk = [p] if p.is_symlink() or not p.is_dir() else [p, *p.rglob("*")]  # links never followed
        for f in walk:
            with contextlib.suppress(OSError):
                st = f.lstat()
                latest = max(latest, st.st_mtime)
                if not f.is_dir():
                    files += 1
                    size += st.st_size
    return files, size, latest


def info(kinds: list[str] | None = None) -> list[KindInfo]:
    """Size and age of each kind (all of :data:`config.KINDS` by default): the items anonaudit made."""
    now = time.time()
    out = []
    for kind in kinds or list(config.KINDS):
        name, holds = config.KINDS[kind]
        folder = config.home() / name
        files = size = 0
        ages = []
        ours = config.recorded(folder)
        items = [i for i in _items(folder) if i[0].name in ours]
        for item in items:
            f, s, latest = _walk(item)
            files, size = files + f, size + s
            ages.append(now - latest)
        private = folder.is_dir() and not folder.stat().st_mode & 0o077
        out.append(KindInfo(kind, folder, holds, len(items), files, size, max(ages, default=None),
                            min(ages, default=None), private))
    return out


def parse_age(text: str) -> float:
    """``7d``, ``12h``, ``30m``, ``90s`` or ``2w`` in seconds (a bare number: days)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    t = text.strip().lower()
    unit = units.get(t[-1:], None)
    number = t[:-1] if unit else t
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise AnonauditError(f"--older-than {text!r}: give a duration such as 7d, 12h, 30m, 90s or 2w")
    return value * (unit or units["d"])


def _clear_llm_answers(db: Path, cutoff: float, dry_run: bool) -> int:
    """Remove the answers written before ``cutoff`` from the LLM cache; returns how many."""
    con = sqlite3.connect(db, timeout=60.0)
    try:
        n = int(con.execute("SELECT COUNT(*) FROM answers WHERE created < ?", (cutoff,)).fetchone()[0])
        if n and not dry_run:
            with con:
                con.execute("DELETE FROM answers WHERE created < ?", (cutoff,))
            con.execute("VACUUM")
        return n
    except sqlite3.DatabaseError as exc:
        raise AnonauditError(f"{db}: not a readable LLM cache ({exc}); remove it with `anonaudit cache clear "
                             f"--kind llm` (without --older-than)") from exc
    finally:
        con.close()


@dataclass
class Cleared:
    """What :func:`clear` did to one kind: items (or LLM answers) and bytes removed, what it left
    (not anonaudit's, or a link) and what it could not remove (``PATH: why``)."""

    items: int = 0
    bytes: int = 0
    answers: int = 0
    left: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def clear(kinds: list[str], *, older_than: float | None = None, dry_run: bool = False) -> dict[str, Cleared]:
    """Remove the items anonaudit made of ``kinds`` (all written more than ``older_than`` seconds
    ago, if given); returns per kind what was removed, left and not removed (see the module doc)."""
    now = time.time()
    done: dict[str, Cleared] = {}
    for kind in kinds:
        folder = config.home() / config.KINDS[kind][0]
        done[kind] = out = Cleared()
        if folder.is_symlink():  # never followed: what it points to is not this home's to empty
            out.left.append(f"{folder}: a link to {os.readlink(folder)} (links are never followed; remove the "
                            "link yourself, or clear there with ANONAUDIT_HOME set to it)")
            continue
        if not folder.is_dir():
            continue
        if not dry_run:
            sweep_temporaries(folder, force=True)  # half-written files of killed writers
        ours = config.recorded(folder)
        foreign = []
        for item in _items(folder):
            if item[0].name not in ours:
                foreign.append(item[0].name)
                continue
            _, size, latest = _walk(item)
            if kind == "llm" and item[0].name == LLM_FILE and older_than is not None and not item[0].is_symlink():
                out.answers += _clear_llm_answers(item[0], now - older_than, dry_run)
                continue
            if older_than is not None and now - latest < older_than:
                continue
            failed = [] if dry_run else _remove(item)
            if failed:
                out.failed += failed
            else:
                out.items += 1
                out.bytes += size
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            out.left.append(f"{folder}: {len(foreign)} item(s) anonaudit did not make, never touched: {shown}")
        if not dry_run and (out.items or out.failed):
            _forget(folder)
    return done


def _remove(item: list[Path]) -> list[str]:
    """Remove one item's paths (a link is unlinked, never followed; a folder's content is removed
    without following the links in it); returns ``PATH: why`` for each that could not be removed."""
    failed: list[str] = []

    def note(_fn, path, exc_info) -> None:
        exc = exc_info[1]
        failed.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")

    for p in item:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, onerror=note)
        else:
            try:
                p.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                failed.append(f"{p}: {exc.strerror or exc}")
    return failed


def _forget(folder: Path) -> None:
    """Rewrite the folder's list of anonaudit's items without those no longer there (a writer
    that adds one meanwhile records it again when it next writes it)."""
    ours = config.recorded(folder)
    kept = sorted(n for n in ours if os.path.lexists(folder / n))
    with contextlib.suppress(OSError):
        atomic_write(folder / config.MANIFEST, "".join(n + "\n" for n in kept))
