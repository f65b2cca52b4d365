"""A persistent answer cache in front of any :class:`~audit.models.llm.LLM`.

Why: an audit asks an LLM thousands of questions; a re-run (or a resumed run after an
interruption) must ask none of them again and must get the same answers. The cache is
one sqlite file (WAL mode, busy timeout), safe with several processes and threads.

Key = sha256 of (backend identity — backend kind plus model checksum or server model
name; for chat also how the backend decodes, :attr:`LLM.cache_identity` —, method, the
full request). For chat that is :meth:`ChatRequest.to_dict` (messages, temperature,
max_tokens, seed, stop, schema, and the shared prefixes where the backend reuses them,
:meth:`LLM.keyed`), so changing any parameter or the model gives a new key.
A request with temperature > 0 is cached too: with a fixed seed it is the same request,
and the cache makes it reproducible even where the backend is not. Failed calls are never
cached.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from audit.models.llm import LLM, ChatRequest, llm_desc

_SCHEMA = "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"


def cache_key(identity: str, method: str, payload: object) -> str:
    """The cache key of one call: stable JSON of everything that can change the answer."""
    blob = json.dumps({"identity": identity, "method": method, "payload": payload},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@contextlib.contextmanager
def transaction(path: str | Path, timeout: float = 60.0) -> Iterator[sqlite3.Connection]:
    """A connection to the sqlite file ``path`` (in WAL mode) for one transaction: committed, or
    rolled back on an error, then closed. The caches of vectors and parses use it."""
    db = sqlite3.connect(path, timeout=timeout)
    try:
        set_wal(db, timeout)
        with db:
            yield db
    finally:
        db.close()


def set_aside(path: Path, exc: Exception, *, who: str, what: str) -> None:
    """Move the corrupt sqlite file ``path`` (and its WAL files) aside, saying so on stderr as
    ``who`` (the caches of vectors and parses, which are then rebuilt)."""
    from audit.runtime.integrity import rebuild_message

    aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
    from audit.core import config

    config.record(aside)  # kept for the user to look at; anonaudit's, so `cache clear` removes it
    print(f"    {who}: {rebuild_message(what, path, str(exc))}; the old file is kept as {aside.name}",
          file=sys.stderr, flush=True)


def set_wal(conn: sqlite3.Connection, timeout: float = 60.0) -> None:
    """Switch ``conn``'s file to WAL mode. Two processes creating the same new file at once
    can get "database is locked" here without sqlite's busy handler ever waiting (the mode
    change needs an exclusive lock and sqlite refuses rather than risk a deadlock), so retry
    until ``timeout``. Once a file is in WAL mode (it is persistent) this is a no-op."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as err:
            if ("locked" not in str(err) and "busy" not in str(err)) or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


class AnswerStore:
    """Key → JSON value in sqlite. One connection per thread; WAL for concurrent processes."""

    def __init__(self, path: str | Path, *, timeout: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        from audit.core import config

        config.private_file(self.path)  # the answers quote private documents: 0600, and its -wal/-shm
        self.timeout = timeout
        self._local = threading.local()
        conn = self._conn()
        with conn:
            conn.execute(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            set_wal(conn, self.timeout)
            conn.execute("PRAGMA synchronous = NORMAL")
            self._local.conn = conn
        return conn

    def get_many(self, keys: Sequence[str]) -> dict[str, object]:
        found: dict[str, object] = {}
        conn = self._conn()
        unique = list(dict.fromkeys(keys))
        for i in range(0, len(unique), 500):
            chunk = unique[i:i + 500]
            rows = conn.execute(f"SELECT key, value FROM answers WHERE key IN ({','.join('?' * len(chunk))})",
                                chunk).fetchall()
            found.update((k, json.loads(v)) for k, v in rows)
        return found

    def put_many(self, items: dict[str, object]) -> None:
        if not items:
            return
        now = time.time()
        conn = self._conn()
        with conn:
            conn.executemany("INSERT OR REPLACE INTO answers (key, value, created) VALUES (?, ?, ?)",
                             [(k, json.dumps(v, ensure_ascii=False), now) for k, v in items.items()])

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class CachedLLM(LLM):
    """Wraps a backend: hits come from disk, only misses reach the backend (in order).

    ``enabled=False`` (``--no-cache``) passes everything through and touches no file.
    ``stats`` counts ``hits``, ``misses`` and ``backend_calls`` (requests actually sent),
    for provenance. Misses are sent in chunks and stored as each chunk finishes, so an
    interrupted batch resumes where it stopped.
    """

    def __init__(self, backend: LLM, path: str | Path, enabled: bool = True, *, chunk_size: int = 16):
        self.backend = backend
        self.path = Path(path)
        from audit.core import config

        self.enabled = enabled and config.cache_enabled()
        self.chunk_size = max(1, chunk_size)
        self.store = AnswerStore(self.path) if self.enabled else None
        self.stats: dict[str, int] = {"hits": 0, "misses": 0, "backend_calls": 0}
        self._lock = threading.Lock()

    # the LLM interface, delegated -------------------------------------------------
    @property
    def identity(self) -> str:  # type: ignore[override]
        return self.backend.identity

    @property
    def cache_identity(self) -> str:
        return self.backend.cache_identity

    @property
    def in_process(self) -> tuple[Any, Any] | None:  # type: ignore[override]
        return self.backend.in_process

    @property
    def runs_in_process(self) -> bool:  # type: ignore[override]
        return self.backend.runs_in_process

    @property
    def worker_spec(self) -> str | None:  # type: ignore[override]
        return self.backend.worker_spec

    @property
    def context_size(self) -> int:  # type: ignore[override]
        return self.backend.context_size

    @property
    def supports_schema(self) -> bool:  # type: ignore[override]
        return self.backend.supports_schema

    def count_tokens(self, text: str) -> int:
        return self.backend.count_tokens(text)

    def chat_text(self, messages) -> str | None:
        return self.backend.chat_text(messages)

    def keyed(self, request: ChatRequest) -> ChatRequest:
        return self.backend.keyed(request)

    @property
    def usage(self) -> dict[str, int]:  # type: ignore[override]
        """Tokens spent by the backend: cache hits cost nothing."""
        return self.backend.usage

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
        self.backend.close()

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for k, v in deltas.items():
                self.stats[k] += v

    # chat ------------------------------------------------------------------------
    def _complete(self, request: ChatRequest) -> str:
        return self._complete_batch([request])[0]

    def _complete_batch(self, requests: list[ChatRequest], *, progress: bool | str = False) -> list[str]:
        if self.store is None:
            self._count(misses=len(requests), backend_calls=len(requests))
            return self.backend.complete_batch(requests, progress=progress)
        keys = [cache_key(self.cache_identity, "chat", self.backend.keyed(r).to_dict()) for r in requests]
        found = self.store.get_many(keys)
        todo: dict[str, ChatRequest] = {k: r for k, r in zip(keys, requests) if k not in found}
        self._count(hits=len(requests) - sum(k not in found for k in keys), misses=sum(k not in found for k in keys))
        items = list(todo.items())
        from audit.runtime.progress import bar as progress_bar

        with progress_bar(total=len(items), enabled=bool(progress) and bool(items), desc=llm_desc(progress),
                          unit="req") as bar:
            for i in range(0, len(items), self.chunk_size):
                chunk = items[i:i + self.chunk_size]
                answers = self.backend.complete_batch([r for _, r in chunk])
                self._count(backend_calls=len(chunk))
                fresh = {k: a for (k, _), a in zip(chunk, answers)}
                self.store.put_many(fresh)
                found.update(fresh)
                bar.update(len(chunk))
        return [str(found[k]) for k in keys]

    def scoring_key(self, prefix: str, answers, shared) -> dict[str, Any]:
        return self.backend.scoring_key(prefix, answers, shared)

    # log-probabilities -------------------------------------------------------------
    def answer_logprobs(self, prefix: str, answers, *, shared=()) -> list[float]:
        """The backend's :meth:`~audit.models.llm.LLM.answer_logprobs`, cached under what
        determines them (:meth:`~audit.models.llm.LLM.scoring_key`)."""
        if self.store is None:
            self._count(misses=1, backend_calls=1)
            return self.backend.answer_logprobs(prefix, answers, shared=shared)
        key = cache_key(self.identity, "answer_logprobs", self.backend.scoring_key(prefix, answers, shared))
        found = self.store.get_many([key])
        if key in found:
            self._count(hits=1)
            return [float(x) for x in found[key]]  # type: ignore[union-attr]
        self._count(misses=1, backend_calls=1)
        values = [float(x) for x in self.backend.answer_logprobs(prefix, answers, shared=shared)]
        self.store.put_many({key: values})
        return values

    def logprobs(self, prefix: str, continuation: str) -> list[float]:
        if self.store is None:
            self._count(misses=1, backend_calls=1)
            return self.backend.logprobs(prefix, continuation)
        key = cache_key(self.identity, "logprobs", {"prefix": prefix, "continuation": continuation})
        found = self.store.get_many([key])
        if key in found:
            self._count(hits=1)
            return [float(x) for x in found[key]]  # type: ignore[union-attr]
        self._count(misses=1, backend_calls=1)
        values = [float(x) for x in self.backend.logprobs(prefix, continuation)]
        self.store.put_many({key: values})
        return values
