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

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
NO_CACHE_ENV = "ANONAUDIT_NO_CACHE"

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
    return path


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
