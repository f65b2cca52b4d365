"""Writing files atomically and hashing them: the one implementation of each.

Every file the toolkit writes (results, released documents, caches, indexes, reports) goes
through :func:`atomic_open` (or :func:`atomic_write` / :func:`atomic_write_json` built on
it): the content goes to a temporary file in the same folder, which replaces the target
with :func:`os.replace` only once it is complete. An interrupted write never leaves half a
file, and a reader never sees one; on any error the temporary file is removed. A writer killed
before it could remove its temporary (``kill -9``, SIGTERM) leaves it behind, named with its
process id: the next write into that folder removes it (:func:`sweep_temporaries`). The new file
keeps the mode of the one it replaces (a new file gets ``0666`` less the umask, like any file
the user creates, not the ``0600`` of a temporary file).

:func:`locked` holds an exclusive lock on a file for a read-modify-write by several processes
(the results file several commands merge into): see :meth:`audit.core.results.ResultsFile.update`.
It goes through ``filelock`` (``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows), so no
POSIX-only module is imported here; a lock that cannot be taken (its path is a folder, or the
folder is not writable) is an :class:`~audit.core.errors.AnonauditError` naming it (exit 2).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import filelock

from audit.core.errors import AnonauditError, DataError, Problem, not_utf8_message, wide_encoding

_BLOCK = 1 << 20


#: The content of every input that is a pipe (``<(cat f)``, a FIFO), by absolute path: a pipe can
#: be read only once, so every later reader of the same path in this process (format detection,
#: the loader, the provenance's sha256) gets these bytes instead of blocking on an empty pipe.
#: Regular files are read again when asked (:func:`audit.io.detect.read_once` reads each once per load).
_STREAMS: dict[str, bytes] = {}
#: How long a named pipe (FIFO) may wait for a program to open it for writing, in seconds
#: (``ANONAUDIT_PIPE_WAIT`` overrides it). A pipe whose writer is there but slow waits as long as
#: the writer takes; one that no program has open for writing is an error after this long, not a
#: command that hangs for ever.
PIPE_WAIT_S = 30.0
PIPE_WAIT_ENV = "ANONAUDIT_PIPE_WAIT"


def read_input(path: str | os.PathLike[str]) -> bytes:
    """The whole content of the input file ``path``: a regular file, or a pipe (read once per
    process, see :data:`_STREAMS`; :func:`_read_pipe`). Anything else (a folder, a device, a
    socket) is refused: :class:`IsADirectoryError` for a folder, as ``open`` raises it, and a
    :class:`~audit.core.errors.DataError` naming the file for the rest. Raises :class:`OSError`
    as ``open`` does."""
    key = os.path.abspath(os.fspath(path))
    if key in _STREAMS:
        return _STREAMS[key]
    mode = os.stat(path).st_mode
    if stat.S_ISREG(mode):
        with open(path, "rb") as fh:
            return fh.read()
    if stat.S_ISFIFO(mode):
        _STREAMS[key] = _read_pipe(path)
        return _STREAMS[key]
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
    kind = "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else \
        "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
    raise DataError(Problem(os.fspath(path), f"is {kind}, not a file: give a file (or a pipe) to read"))


def read_text(path: str | os.PathLike, what: str = "file") -> str:
    """The UTF-8 text of ``path``, or an :class:`AnonauditError` naming it and ``what`` it is."""
    src = str(path)
    try:
        raw = read_input(path)  # whole, once: a pipe can be read again by a later reader
        wide = wide_encoding(raw[:4096])
        if wide:
            raise AnonauditError(f"{src}: {not_utf8_message(wide)}")
        return raw.decode("utf-8-sig")
    except FileNotFoundError:
        raise AnonauditError(f"{src}: no such {what}") from None
    except IsADirectoryError:
        raise AnonauditError(f"{src}: is a folder, not a {what}") from None
    except UnicodeDecodeError as exc:
        raise AnonauditError(f"{src}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise AnonauditError(f"{src}: cannot read ({exc.strerror or exc})") from None


def _read_pipe(path: str | os.PathLike[str]) -> bytes:
    """All a pipe or FIFO gives until its writers close it. Opened without blocking, so a
    named pipe that no program has open for writing is found (a read returns end-of-file at once,
    where a pipe with a writer that has not written yet would block): it is waited for
    :data:`PIPE_WAIT_S` seconds, then refused with a :class:`DataError` naming it. An anonymous
    pipe (``<(cmd)``, ``/dev/stdin``) had its writer from the start: end-of-file is its end. Once
    a writer is there, the read blocks as a plain read does, however slow the writer is."""
    wait = _pipe_wait()
    deadline = time.monotonic() + wait
    anonymous = os.path.basename(os.path.realpath(path)).startswith("pipe:[")  # Linux names them so
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        while True:
            try:
                first = os.read(fd, _BLOCK)
            except BlockingIOError:  # a writer has it open and has written nothing yet
                first = b""
                break
            if first or anonymous:
                break
            if time.monotonic() >= deadline:  # no writer has had it open (or one left, writing nothing)
                raise DataError(Problem(os.fspath(path), f"a named pipe (FIFO) that no program wrote to in "
                                        f"{wait:g} s: start the program that writes it first (or set "
                                        f"{PIPE_WAIT_ENV} to wait longer), or give a regular file"))
            time.sleep(0.05)
        os.set_blocking(fd, True)
        chunks = [first]
        while block := os.read(fd, _BLOCK):
            chunks.append(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _pipe_wait() -> float:
    """:data:`PIPE_WAIT_S`, or the seconds ``ANONAUDIT_PIPE_WAIT`` gives."""
    text = os.environ.get(PIPE_WAIT_ENV, "").strip()
    try:
        return max(0.0, float(text)) if text else PIPE_WAIT_S
    except ValueError:
        raise AnonauditError(f"{PIPE_WAIT_ENV}={text!r}: give a number of seconds") from None


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's content, read in blocks (a pipe: its bytes, read once by
    :func:`read_input`)."""
    key = os.path.abspath(os.fspath(path))
    if key not in _STREAMS and stat.S_ISREG(os.stat(path).st_mode):
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            while block := fh.read(_BLOCK):
                h.update(block)
        return h.hexdigest()
    return hashlib.sha256(read_input(path)).hexdigest()


def _umask() -> int:
    """The process' umask (read by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_for(path: Path) -> int:
    """The permission bits a new version of ``path`` gets: those of the file it replaces, else
    ``0666`` less the umask (``0600`` at most under ANONAUDIT_HOME: the caches)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
        if _in_home(path):  # the caches: derived from private documents, the owner's only
            mode &= 0o600
        return mode


def _in_home(path: Path) -> bool:
    """Whether ``path`` lies under ANONAUDIT_HOME (the caches, :mod:`audit.core.config`)."""
    from audit.core import config

    try:
        return path.resolve().is_relative_to(config.home().resolve())
    except (OSError, RuntimeError):
        return False


def _record_if_cache(path: Path) -> None:
    """A file written under ANONAUDIT_HOME's kind folders is anonaudit's: recorded in its folder's
    list (:func:`audit.core.config.record`), which ``cache clear`` removes from and only from."""
    from audit.core import config

    config.record(path)


def _chmod_fd(fd: int, name: str, mode: int) -> None:
    """Set the permission bits of an open file (``os.fchmod`` where the OS has it; on Windows,
    which keeps only a read-only flag, by name)."""
    if hasattr(os, "fchmod"):
        os.fchmod(fd, mode)
    else:  # pragma: no cover - Windows
        os.chmod(name, mode)


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: not every file system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def locked(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock for ``path`` while the ``with`` block runs (other processes calling
    this for the same path wait). The lock is taken on the side file ``.NAME.lock`` beside it,
    which stays: ``path`` itself is replaced by every atomic write, so it cannot carry the lock.
    A lock that cannot be taken is an :class:`AnonauditError` naming the lock file."""
    path = Path(path)
    lock_path = path.with_name(f".{path.name}.lock")
    lock = filelock.FileLock(str(lock_path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if lock_path.is_dir():
            raise IsADirectoryError(21, "it is a folder, not a file", str(lock_path))
        lock.acquire()
        _record_if_cache(lock_path)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise AnonauditError(
            f"cannot lock {path}: the lock file {lock_path} cannot be opened ({why}); "
            f"remove or rename it if it is a folder, or make {path.parent} writable") from exc
    try:
        yield
    finally:
        lock.release()


#: A temporary of this module: ``.NAME.pPID.RANDOM.tmp`` (the writer's process id in the name).
_TEMPORARY = re.compile(r"^\..+\.p(?P<pid>\d+)\.[A-Za-z0-9_]+\.tmp$")
#: A temporary written before the process id was in the name (``.NAME.RANDOM.tmp``).
_OLD_TEMPORARY = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")
#: Age past which a temporary is stale whatever its name says (a process id can be reused).
STALE_SECONDS = 24 * 3600
_swept: set[str] = set()


def folder_problem(path: str | os.PathLike[str]) -> str:
    """Why ``path`` cannot be a folder that a run creates or writes into ("" when it can): a file
    there, a file where one of its parents should be, or a folder that is not writable. A
    component that keeps work in a folder (a checkpoint, a cache, an index) asks before the work,
    so that nothing is computed for an hour and then lost because it cannot be saved."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        return "is a file, not a folder"
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        return f"cannot be created: {probe} is a file, not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return "is not writable" if probe == path else f"cannot be created: the folder {probe} is not writable"
    return ""


def is_temporary(name: str) -> bool:
    """Whether the file name ``name`` is one of this module's temporaries (a writer's at work, or
    one a killed writer left: :func:`sweep_temporaries` removes those)."""
    return bool(_TEMPORARY.match(name) or _OLD_TEMPORARY.match(name))


def temporary_prefix(name: str) -> str:
    """The start of the name of a temporary file or folder for ``name`` in this process."""
    return f".{name}.p{os.getpid()}."


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, another user's
        return True
    return True


def sweep_temporaries(folder: str | os.PathLike[str], *, force: bool = False) -> list[Path]:
    """Remove the temporaries that killed writers left in ``folder`` (``kill -9``, SIGTERM, a power
    cut): those whose process is gone, and any older than :data:`STALE_SECONDS` (a legacy one
    without a process id after an hour). A live writer's temporary is never touched. Done once
    per folder and process (``force``: again); returns what was removed."""
    import shutil
    import time

    key = os.path.abspath(folder)
    if key in _swept and not force:
        return []
    _swept.add(key)
    removed: list[Path] = []
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = _TEMPORARY.match(entry.name)
        legacy = m is None and _OLD_TEMPORARY.match(entry.name)
        if m is None and not legacy:
            continue
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        stale = age > 3600 if legacy else (not _alive(int(m["pid"])) or age > STALE_SECONDS)
        if not stale:
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", *, encoding: str | None = "utf-8",
                newline: str | None = None, fsync: bool = False) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing (``mode`` ``"w"`` or ``"wb"``); when the
    ``with`` block ends without an error it replaces ``path``, otherwise it is deleted and
    ``path`` is left as it was. The folder is created. ``fsync``: flush the file to disk before
    the replace and the folder after it (files that must survive a power cut: results, models)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes only: mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_temporaries(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=temporary_prefix(path.name), suffix=".tmp", dir=path.parent)
    try:
        _chmod_fd(fd, tmp, _mode_for(path))
        if mode == "wb":
            fh = os.fdopen(fd, "wb")
        else:
            fh = os.fdopen(fd, "w", encoding=encoding, newline=newline)
        with fh:
            yield fh
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
        if fsync:
            _fsync_dir(path.parent)
        _record_if_cache(path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write(path: str | os.PathLike[str], data: str | bytes, *, encoding: str = "utf-8") -> Path:
    """Write ``data`` (text or bytes) to ``path`` atomically; returns the path."""
    path = Path(path)
    if isinstance(data, bytes):
        with atomic_open(path, "wb") as fh:
            fh.write(data)
    else:
        with atomic_open(path, "w", encoding=encoding, newline="") as fh:
            fh.write(data)
    return path


def atomic_write_json(path: str | os.PathLike[str], data: Any, *, indent: int | None = 1,
                      allow_nan: bool = False, fsync: bool = False) -> Path:
    """Write ``data`` as UTF-8 JSON (non-ASCII kept, a final newline) atomically; returns the path."""
    path = Path(path)
    with atomic_open(path, "w", encoding="utf-8", fsync=fsync) as fh:
        json.dump(data, fh, ensure_ascii=False, indent=indent, allow_nan=allow_nan)
        fh.write("\n")
    return path
