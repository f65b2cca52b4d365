"""Where anonaudit keeps its files (assembled models, LLM cache, trained attackers), and how.

``ANONAUDIT_HOME`` overrides the location; otherwise ``$XDG_CACHE_HOME/anonaudit``
or ``~/.cache/anonaudit``. Nothing here is global state: each call reads the
environment, so tests can point it at a temporary folder.

What is kept there is derived from the private documents an audit reads (LLM answers quote
them, embeddings and information content are computed from them, a trained attacker has
learnt them), so every folder :func:`subdir` hands out is readable by its owner only
(``0700``; a folder an older version made with looser permissions is tightened when next
opened, which also shuts out every file in it), and a new file written into such a folder
through :mod:`audit.core.files` gets ``0600`` (sqlite caches: :func:`private_file`).

``ANONAUDIT_NO_CACHE=1`` (what ``--no-cache`` sets for its run) turns every cache off: nothing
is read from or written to them (:func:`cache_enabled`). The assembled model files are not a
cache of results and are used as always.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from audit.core.errors import AnonauditError

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
NO_CACHE_ENV = "ANONAUDIT_NO_CACHE"
THREADS_ENV = "ANONAUDIT_THREADS"

#: What ``anonaudit cache`` reports and clears: kind -> (folder under :func:`home`, what it holds).
KINDS: dict[str, tuple[str, str]] = {
    "llm": ("cache", "LLM answers (prompts quote the documents), sqlite"),
    "embeddings": ("embeddings", "sentence vectors of document text, sqlite"),
    "ic": ("utility", "information content of every term of the originals, JSON, a file per document"),
    "trir": ("trir", "trained TRIR attackers (classifiers of the background's people) and their training checkpoints"),
    "parses": ("parses", "spaCy parses of documents (entities, lemmas) by content, sqlite"),
    "span_guess": ("span_guess", "frequent lemmas of the originals, JSON"),
    "models": ("models", "assembled embedded models and their converted copies (no private data)"),
}


#: The list, in each kind's folder, of the items anonaudit made there (one name a line): what
#: ``anonaudit cache clear`` may remove. Anything else in the folder is not anonaudit's (the
#: user's own files, when ANONAUDIT_HOME is a folder that held them) and is never touched.
MANIFEST = ".anonaudit-items"
#: Items this process has recorded, by manifest (path and inode: a manifest rewritten by
#: ``cache clear`` is a new file, and an item made again is recorded again).
_RECORDED: set[tuple[str, int, str]] = set()


def home() -> Path:
    env = os.environ.get("ANONAUDIT_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "anonaudit"


def subdir(name: str) -> Path:
    """A folder under :func:`home`, created on first use, readable by its owner only."""
    root = home()
    if not root.exists():
        root.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    path = root / name
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    make_private(path)
    return path


def kind_item(path: str | os.PathLike[str]) -> tuple[Path, str] | None:
    """``(kind folder, item name)`` of a path inside a kind's folder of :func:`home` (the item is
    the entry of that folder the path lies in), None for a path elsewhere. Compared as written and
    resolved, so a path reached through a link is still placed."""
    root = home()
    folders = {folder for folder, _ in KINDS.values()}
    for base, target in ((os.path.abspath(root), os.path.abspath(path)),
                         (os.path.realpath(root), os.path.realpath(path))):
        try:
            rel = os.path.relpath(target, base)
        except ValueError:  # pragma: no cover - Windows: another drive
            continue
        parts = Path(rel).parts
        if rel != os.curdir and not rel.startswith(os.pardir) and len(parts) >= 2 and parts[0] in folders:
            return root / parts[0], parts[1]
    return None


def record(path: str | os.PathLike[str]) -> None:
    """Record in its kind folder's :data:`MANIFEST` that anonaudit made ``path`` (a cache file, a
    trained attacker's folder...), so that ``cache clear`` may remove it; a path outside the kind
    folders is not recorded. Every writer of the caches calls it (:func:`audit.core.files.atomic_open`
    and :func:`private_file` for all of their files); appends are atomic, so concurrent writers
    need no lock."""
    found = kind_item(path)
    if found is None:
        return
    folder, name = found
    if name == MANIFEST or "\n" in name or "\r" in name:
        return
    manifest = folder / MANIFEST
    with contextlib.suppress(OSError):
        try:
            ino = os.stat(manifest).st_ino
        except FileNotFoundError:
            ino = 0
        if (str(manifest), ino, name) in _RECORDED:
            return
        fd = os.open(manifest, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
        try:
            os.write(fd, (name + "\n").encode("utf-8", "surrogateescape"))
            ino = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        _RECORDED.add((str(manifest), ino, name))


def recorded(folder: str | os.PathLike[str]) -> set[str]:
    """The names of the items anonaudit made in the kind folder ``folder`` (its :data:`MANIFEST`)."""
    try:
        with open(Path(folder) / MANIFEST, encoding="utf-8", errors="surrogateescape") as fh:
            return {line.rstrip("\n") for line in fh if line.strip()}
    except OSError:
        return set()


def make_private(path: str | os.PathLike[str]) -> None:
    """Make ``path`` readable by its owner only (``0700`` a folder, ``0600`` a file), if it is
    not already; a path this user does not own is left as it is."""
    with contextlib.suppress(OSError):
        st = os.stat(path)
        want = PRIVATE_DIR if Path(path).is_dir() else PRIVATE_FILE
        if st.st_mode & 0o077:
            os.chmod(path, (st.st_mode & 0o700) | (want & 0o700))


def private_file(path: str | os.PathLike[str]) -> Path:
    """``path`` created empty with ``0600`` if it does not exist (so that sqlite, which creates
    its ``-wal`` and ``-shm`` files with the database's mode, keeps them private too); an existing
    one and its ``-wal``/``-shm`` are made ``0600``."""
    path = Path(path)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE))
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if p.exists():
            make_private(p)
    record(path)
    return path


def threads() -> int:
    """CPU threads a stage computes with when it is not told (the llama.cpp runtime, faiss):
    ``ANONAUDIT_THREADS``, or every core. torch follows ``OMP_NUM_THREADS`` as usual. Two jobs
    sharing a machine each set it to their share: threads that outnumber the cores wait on
    each other at every barrier (OpenMP spins there), which costs far more than the cores lent."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return max(1, os.cpu_count() or 1)
    if not raw.isdigit() or int(raw) < 1:
        raise AnonauditError(f"{THREADS_ENV}={raw!r}: give a whole number of threads, 1 or more")
    return int(raw)


def cache_enabled() -> bool:
    """False when this run was asked to use no cache (``--no-cache``, ``ANONAUDIT_NO_CACHE=1``)."""
    return os.environ.get(NO_CACHE_ENV, "").strip().lower() not in ("1", "true", "yes", "on")


@contextlib.contextmanager
def caches_off(off: bool = True) -> Iterator[None]:
    """Every cache off while the ``with`` block runs (and in processes it starts); ``off=False``
    changes nothing."""
    if not off:
        yield
        return
    before = os.environ.get(NO_CACHE_ENV)
    os.environ[NO_CACHE_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(NO_CACHE_ENV, None)
        else:
            os.environ[NO_CACHE_ENV] = before
