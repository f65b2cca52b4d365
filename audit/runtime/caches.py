"""What the caches under ``ANONAUDIT_HOME`` hold, and removing it (``anonaudit cache``).

Each kind of :data:`audit.core.config.KINDS` is one folder. An *item* is one entry of that
folder (a file, with an sqlite database's ``-wal``/``-shm`` beside it, or a folder such as one
trained attacker); its age is the time since anything in it was last written. The LLM answer
cache keeps each answer's time, so ``older_than`` removes the old answers from it and keeps the
rest; the other kinds are removed item by item. A kind's folder that is a symbolic link (a
model folder shared by the users of a machine) is unlinked, never emptied. The assembled models (kind ``models``) are
never removed unless asked for by name: they are not derived from documents, and assembling
them again takes minutes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from audit.core import config
from audit.core.errors import AnonauditError

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
    """The folder's items, each the list of its paths (a database with its side files)."""
    if not folder.is_dir():
        return []
    names = sorted(os.listdir(folder))
    main = [n for n in names if not n.endswith(_SIDE)]
    return [[folder / n, *(folder / (n + s) for s in _SIDE if (n + s) in names)] for n in main]


def _walk(paths: list[Path]) -> tuple[int, int, float]:
    """Files, bytes and the latest modification time under ``paths``."""
    files = size = 0
    latest = 0.0
    for p in paths:
        walk = [p] if not p.is_dir() else [p, *p.rglob("*")]
        for f in walk:
            with contextlib.suppress(OSError):
                st = f.lstat()
                latest = max(latest, st.st_mtime)
                if not f.is_dir():
                    files += 1
                    size += st.st_size
    return files, size, latest


def info(kinds: list[str] | None = None) -> list[KindInfo]:
    """Size and age of each kind (all of :data:`config.KINDS` by default)."""
    now = time.time()
    out = []
    for kind in kinds or list(config.KINDS):
        name, holds = config.KINDS[kind]
        folder = config.home() / name
        files = size = 0
        ages = []
        items = _items(folder)
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


def clear(kinds: list[str], *, older_than: float | None = None, dry_run: bool = False) -> dict[str, dict[str, int]]:
    """Remove the items of ``kinds`` (all written more than ``older_than`` seconds ago, if
    given); returns per kind the items (or LLM answers) and bytes removed."""
    now = time.time()
    done: dict[str, dict[str, int]] = {}
    for kind in kinds:
        folder = config.home() / config.KINDS[kind][0]
        removed = {"items": 0, "bytes": 0, "answers": 0}
        done[kind] = removed
        if folder.is_symlink():  # a folder shared from elsewhere (e.g. one machine's models): unlink, never empty it
            removed["items"] += 1
            if not dry_run:
                folder.unlink()
            continue
        for item in _items(folder):
            _, size, latest = _walk(item)
            if kind == "llm" and item[0].name == LLM_FILE and older_than is not None:
                removed["answers"] += _clear_llm_answers(item[0], now - older_than, dry_run)
                continue
            if older_than is not None and now - latest < older_than:
                continue
            removed["items"] += 1
            removed["bytes"] += size
            if not dry_run:
                for p in item:
                    if p.is_dir() and not p.is_symlink():
                        shutil.rmtree(p, ignore_errors=True)
                    else:
                        with contextlib.suppress(FileNotFoundError):
                            p.unlink()
    return done
