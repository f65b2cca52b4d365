"""Sentence embeddings: a small wrapper around sentence-transformers.

Rows are float32 and L2-normalised, so a dot product is the cosine similarity (what
dense retrieval and linkage attacks use). Optionally, vectors are kept on disk keyed by
model identity and text hash (sqlite under ``config.subdir("embeddings")``), so a
re-run of an audit embeds nothing twice. Models are local folders only (the embedded
MiniLM by default); nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from audit.core import config
from audit.core.errors import AnonauditError
from audit.runtime.executor import sends_to_workers
from audit.models.checked_rows import read_rows, write_rows
from audit.models.answer_cache import set_aside, transaction
from audit.models.specs import embedder_path


#: The arithmetic an embedder may compute in (:class:`Embedder`'s ``precision``).
PRECISIONS = ("fp32", "bf16", "auto")


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Embedder:
    """``Embedder(model=None, cache=False).encode(texts) -> (n, dim) float32, unit rows``.

    ``model``: ``None``/``"minilm"`` (embedded all-MiniLM-L6-v2) or a local
    sentence-transformers folder. ``device``: ``"cpu"`` unless CUDA is available (or given).
    ``cache``: ``True`` for the default store, or a path to a sqlite file.
    ``precision``: the arithmetic of the forward pass: ``fp32`` (the default), ``bf16`` (torch's
    bfloat16 autocast: matrix products in bfloat16, layer norms and softmax in float32) or
    ``auto`` (bf16 where the device computes it natively, :func:`~audit.runtime.cpu.native_bf16`;
    else fp32). The precision is part of the vectors' cache key: rows of one are never read as
    the other's.
    ``executor``: an :class:`~audit.runtime.executor.Executor` that computes the vectors (groups of
    exactly the texts one local step would embed, so the vectors are the same) when a call has
    more than one step of texts to embed; the cache is read and written here, in this process,
    which loads the model only for a call with one step or fewer to embed (one group would keep
    one worker busy and gain nothing from a cluster, whose stage costs seconds to start: an
    attack that embeds a document's few sentences at a time would start a stage each time), or
    to know the vectors' dimension without any vector (an empty input with nothing embedded yet).
    """

    #: Texts embedded in one step here, and in one group on an executor's worker (a model's batch
    #: is at most a step).
    STEP = 1024

    def __init__(self, model: str | None = None, cache: bool | str | os.PathLike[str] = False,
                 device: str | None = None, executor=None, precision: str = "fp32"):
        if precision not in PRECISIONS:
            raise AnonauditError(f"embedder precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.executor = executor
        self.path = embedder_path(model)
        self._device = device
        self._model = None
        self._dim: int | None = None
        if executor is None:  # the vectors are computed here: load now (the run shows it as a stage)
            self._load_here()
        #: the arithmetic the vectors are computed in (``auto`` resolved on this process's device)
        self.precision = resolve_precision(precision, device or ("cpu" if executor is not None else self.device))
        self.identity = (f"sentence-transformers:{Path(self.path).name}:{self._fingerprint()}"
                         + ("" if self.precision == "fp32" else f":{self.precision}"))
        self.cache_path: Path | None = None
        if cache and config.cache_enabled():
            self.cache_path = (config.subdir("embeddings") / "embeddings.sqlite" if cache is True
                               else Path(cache))
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            config.private_file(self.cache_path)
            self._open_cache()
        self.stats = {"hits": 0, "misses": 0}

    def _open_cache(self) -> None:
        """Create the cache's table (each row with its checksum, :func:`audit.runtime.integrity.row_checksum`);
        a file that is not a readable sqlite database is set aside and started anew, with a message."""
        try:
            with self._db() as db:
                db.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT, key TEXT, vec BLOB, sum TEXT, "
                           "PRIMARY KEY (model, key))")
                columns = {row[1] for row in db.execute("PRAGMA table_info(vectors)")}
                if "sum" not in columns:  # written by an older version: its rows are checked as unverified
                    db.execute("ALTER TABLE vectors ADD COLUMN sum TEXT")
                db.execute("SELECT count(*) FROM vectors").fetchone()
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            self._set_aside(exc)
            config.private_file(self.cache_path)
            with self._db() as db:
                db.execute("CREATE TABLE vectors (model TEXT, key TEXT, vec BLOB, sum TEXT, PRIMARY KEY (model, key))")

    def _set_aside(self, exc: Exception) -> None:
        """Move a corrupt cache file (and its WAL files) aside, saying so."""
        assert self.cache_path is not None
        set_aside(self.cache_path, exc, who="embeddings", what="the embeddings cache")

    def _load_here(self):
        """The model, loaded in this process on first use."""
        if self._model is None:
            self._model = _load(self.path, self._device)
            get_dim = (getattr(self._model, "get_embedding_dimension", None)
                       or self._model.get_sentence_embedding_dimension)
            self._dim = int(get_dim())
        return self._model

    @property
    def dim(self) -> int:
        """The vectors' dimension (from the first vectors computed, or the model's own)."""
        if self._dim is None:
            self._load_here()
        return self._dim  # type: ignore[return-value]

    @property
    def device(self) -> str:
        """Where this process computes vectors: ``"cpu"`` or ``"cuda"`` (loads the model; with an
        executor, its workers choose their own)."""
        return self._load_here().device.type

    def _fingerprint(self) -> str:
        """Model identity for the vector cache: the content of the model's files (never its
        path, so two environments share vectors only when the weights are the same) and the
        library versions that compute the vectors."""
        from audit.models.specs import content_digest, runtime_versions

        h = hashlib.sha256(content_digest(self.path).encode())
        h.update(runtime_versions("sentence-transformers", "transformers", "torch").encode())
        return h.hexdigest()[:16]

    def _db(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A connection for one transaction: committed (or rolled back), then closed."""
        assert self.cache_path is not None
        return transaction(self.cache_path)

    def encode(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """Embed ``texts`` (order kept); an empty input gives a ``(0, dim)`` array."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [_text_key(t) for t in texts]
        known: dict[str, np.ndarray] = {}
        if self.cache_path is not None:
            known = self._lookup(set(keys))
        todo = list(dict.fromkeys(k for k in keys if k not in known))
        self.stats["hits"] += sum(k in known for k in keys)
        self.stats["misses"] += len(todo)
        if todo:
            first = {k: t for k, t in zip(keys, texts)}
            from audit.runtime.progress import bar as progress_bar

            # sentence-transformers' own bar would redraw with "\r" in a log: ours prints lines.
            step = self.STEP
            batch_size = min(batch_size, step)  # a batch never spans two steps
            if sends_to_workers(self.executor, len(todo), step):  # the same steps, each one a group on a worker
                rows = self.executor.map(EmbedWorker(self.path, batch_size, precision=self.precision),
                                         [first[k] for k in todo],
                                         group=step, label="embedding")
                fresh = dict(zip(todo, np.stack(rows).astype(np.float32)))
                known.update(fresh)
                self._store(fresh)
            else:  # here (one step with an executor: see the class doc), each step kept as it is done
                model = self._load_here()
                for i in progress_bar(range(0, len(todo), step), desc="embedding", unit="batch", enabled=progress):
                    fresh = dict(zip(todo[i:i + step], _encode(model, [first[k] for k in todo[i:i + step]],
                                                               batch_size, self.precision)))
                    known.update(fresh)
                    self._store(fresh)  # an interrupted call keeps the steps it finished
        out = np.stack([known[k] for k in keys]).astype(np.float32, copy=False)
        self._dim = out.shape[1]  # known now without the model (with an executor, it is not here)
        # re-normalise: cached or not, every row is unit length (zero rows stay zero)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def _store(self, fresh: dict[str, np.ndarray]) -> None:
        """Keep ``fresh`` vectors (text key -> vector) in the cache, each row with its checksum."""
        if self.cache_path is None or not fresh:
            return
        with self._db() as db:
            write_rows(db, "vectors", self.identity, {k: v.tobytes() for k, v in fresh.items()})

    def _lookup(self, keys: set[str]) -> dict[str, np.ndarray]:
        """The cached vectors of ``keys`` whose row checksum holds; a row that fails it (changed,
        truncated, or written without one) is deleted and its text embedded again."""
        try:
            with self._db() as db:
                found, bad = read_rows(db, "vectors", "vec", self.identity, keys, _vector)
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            self._set_aside(exc)
            self._open_cache()
            return {}
        if bad:
            import sys

            print(f"    embeddings: {len(bad)} cached vector(s) in {self.cache_path} failed their checksum: "
                  "embedding them again", file=sys.stderr, flush=True)
        if found and len({len(v) for v in found.values()}) > 1:  # vectors of mixed sizes: none is trusted
            return {}
        return found


def _load(path: str, device: str | None):
    """The sentence-transformers model at ``path``, offline, on ``device`` (CUDA when available)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import torch
    from sentence_transformers import SentenceTransformer

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return SentenceTransformer(path, device=device, local_files_only=True)


def resolve_precision(precision: str, device: str) -> str:
    """``fp32`` or ``bf16``: ``auto`` is bf16 where ``device`` computes it natively."""
    if precision != "auto":
        return precision
    from audit.runtime.cpu import native_bf16

    return "bf16" if native_bf16(device) else "fp32"


def _encode(model, texts: list[str], batch_size: int, precision: str = "fp32") -> np.ndarray:
    """One step of :meth:`Embedder.encode`: unit float32 rows of ``texts`` (the forward pass in
    bfloat16 autocast with ``precision="bf16"``)."""
    import torch

    kind = model.device.type
    with torch.autocast(kind, dtype=torch.bfloat16, enabled=precision == "bf16"):
        out = model.encode(texts, batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True,
                           normalize_embeddings=True)
    return np.asarray(out, dtype=np.float32)


class EmbedWorker:
    """The embedding stage on an executor's worker: loads the model once (``setup``), then
    embeds group after group exactly as :meth:`Embedder.encode` embeds one step, with as many
    torch threads as the worker has CPUs (``threads``, set by the executor on a cluster)."""

    def __init__(self, path: str, batch_size: int = 64, device: str | None = None, precision: str = "fp32"):
        self.path = path
        self.batch_size = batch_size
        self.device = device
        self.precision = precision
        self.threads: int | None = None
        self._model = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_model": None}

    def setup(self) -> None:
        if self._model is None:
            self._model = _load(self.path, self.device)
            if self.threads and self._model.device.type == "cpu":
                import torch

                torch.set_num_threads(self.threads)

    def __call__(self, texts: list[str]) -> list[np.ndarray]:
        self.setup()
        return list(_encode(self._model, list(texts), self.batch_size, self.precision))


def _vector(value: Any) -> np.ndarray:
    """A cached vector's row read back (float32 bytes); ValueError when it is not one."""
    if not isinstance(value, bytes) or not value or len(value) % 4:
        raise ValueError("not a vector")
    return np.frombuffer(value, dtype=np.float32)
