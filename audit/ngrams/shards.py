"""The n-gram index in hash-partitioned shards, for collections larger than one machine's memory.

The single index (:class:`~audit.ngrams.query.NgramIndex`) sorts every
``(n-gram hash, document)`` pair of the collection in one process. The sharded index cuts
the same sorted key space by the top ``log2(shards)`` bits of the n-gram hash: shard ``s``
holds exactly the keys of the single index whose hash starts with ``s``, with their posting
lists, so the shards together are the single index cut into contiguous pieces and every
query has the same answer.

Built in two stages, both through an executor (:mod:`audit.runtime.executor`), so on Ray the
workers do them (the folder must then be on a filesystem every worker sees):

1. per chunk of documents: tokenise, hash, pack ``(hash, document)`` keys exactly as the
   single build does, and spill them per shard to ``FOLDER/spill/shard-S/chunk-C.npz``;
2. per shard: read its spilled keys, merge them and lay out the index's arrays for its part of
   the key space (its own directory, keys, first documents and posting lists) in
   ``FOLDER/shard-S/``, then remove its spill.

A worker holds one chunk's keys in stage 1 and one shard's in stage 2: memory per worker is
about the single build's divided by the number of shards. ``FOLDER/docs.json`` and
``FOLDER/config.json`` (written last) describe the whole index.

Queries (:class:`ShardedNgramIndex`, an :class:`NgramIndex`) route each hash to its shard and
search only there; shards are memory-mapped when first needed. A posting list's position is
global (the shard's first posting plus its own offset) and a single document is itself, so
the attack's code is the same for both indexes.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audit.ngrams.build import (
    DocInfo,
    chunk_bounds,
    Packing,
    base_config,
    chunk_keys,
    collection_fingerprint,
    prepare,
)
from audit.ngrams.hashing import U64
from audit.ngrams.layout import Clock, hint_slow_sort, layout_buckets
from audit.ngrams.query import NgramIndex, search
from audit.ngrams.storage import load_arrays, save_arrays
from audit.ngrams.tokenizer import TOKENIZER_NAME, Tokenizer
from audit.core.errors import AnonauditError
from audit.runtime.executor import LocalExecutor
from audit.core.files import atomic_open, atomic_write_json
from audit.runtime.integrity import seal, unseal

SHARDED_FORMAT = "anonaudit.ngram_index.sharded/2"


def _shard_bits(shards: int) -> int:
    if not isinstance(shards, int) or shards < 1 or shards & (shards - 1) or shards > 4096:
        raise AnonauditError(f"shards must be a power of two between 1 and 4096, got {shards!r}")
    return shards.bit_length() - 1


def _full_hash(part: np.ndarray, bucket: int, t_bits: int) -> np.ndarray:
    """The top bits of the n-gram hashes of packed keys of one bucket (the low bits hold the document)."""
    if not t_bits:
        return part
    with np.errstate(over="ignore"):
        return (part >> U64(t_bits)) | (U64(bucket) << U64(64 - t_bits))


class SpillShards:
    """Stage 1 as an executor's worker: an item is ``(chunk, lo, texts)``; the chunk's packed
    keys are written per shard under ``spill``; the output is the chunk's number of tokens."""

    #: no setup (see :mod:`audit.runtime.executor`)
    light_setup = True

    def __init__(self, spill: str, lowercase: bool, max_n: int, packing: Packing, s_bits: int):
        self.spill, self.lowercase, self.max_n, self.packing, self.s_bits = spill, lowercase, max_n, packing, s_bits

    def __call__(self, items: list[tuple[int, int, list[str]]]) -> list[int]:
        out = []
        tok = Tokenizer(lowercase=self.lowercase)
        t_bits = self.packing.t_bits
        for chunk, lo, texts in items:
            n_tokens, parts = chunk_keys(lo, texts, tok, self.max_n, self.packing)
            per_shard: dict[int, tuple[list[np.ndarray], list[int]]] = {}
            for b, part in enumerate(parts):
                if not len(part):
                    continue
                if self.s_bits:
                    # a bucket's keys come in no order: grouped by their shard (the hash's top
                    # bits) first, with numpy's radix sort of small integers
                    shard = (_full_hash(part, b, t_bits) >> U64(64 - self.s_bits)).astype(np.uint16)
                    grouped = part[np.argsort(shard, kind="stable")]
                    counts = np.bincount(shard, minlength=1 << self.s_bits)
                    for s, piece in enumerate(np.split(grouped, np.cumsum(counts)[:-1])):
                        if len(piece):
                            keys, buckets = per_shard.setdefault(s, ([], []))
                            keys.append(piece)
                            buckets.append(b)
                else:
                    keys, buckets = per_shard.setdefault(0, ([], []))
                    keys.append(part)
                    buckets.append(b)
            for s, (keys, buckets) in per_shard.items():
                folder = Path(self.spill) / f"shard-{s:04d}"
                folder.mkdir(parents=True, exist_ok=True)
                with atomic_open(folder / f"chunk-{chunk:07d}.npz", "wb") as fh:
                    np.savez(fh, keys=np.concatenate(keys), buckets=np.asarray(buckets, dtype=np.int64),
                             counts=np.asarray([len(k) for k in keys], dtype=np.int64))
            out.append(int(n_tokens))
        return out


def _shard_entries(hash_bits: int, s_bits: int) -> int:
    """How many directory entries each shard has (the directory cut by the shard bits)."""
    return 1 << (hash_bits - 32 - s_bits)


def _shard_dir(packing: Packing, s_bits: int, s: int) -> tuple[int, int]:
    """The directory entries of shard ``s``: (first, how many)."""
    per = _shard_entries(packing.hash_bits, s_bits)
    return s * per, per


class BuildShard:
    """Stage 2 as an executor's worker: an item is a shard number; its spilled keys become the
    index's arrays in ``FOLDER/shard-S/``; the output is ``(n_ngrams, n_postings, n_multi_docs)``."""

    #: no setup (see :mod:`audit.runtime.executor`)
    light_setup = True

    def __init__(self, folder: str, packing: Packing, s_bits: int):
        self.folder, self.packing, self.s_bits = folder, packing, s_bits

    def __call__(self, shards: list[int]) -> list[tuple[int, int, int]]:
        return [self._one(s) for s in shards]

    def _one(self, s: int) -> tuple[int, int, int]:
        spill = Path(self.folder) / "spill" / f"shard-{s:04d}"
        pieces: dict[int, list[np.ndarray]] = {}
        for f in sorted(spill.glob("chunk-*.npz")) if spill.is_dir() else []:
            with np.load(f) as z:
                keys, buckets, counts = z["keys"], z["buckets"], z["counts"]
            for b, part in zip(buckets.tolist(), np.split(keys, np.cumsum(counts)[:-1])):
                pieces.setdefault(int(b), []).append(part)
        ids = sorted(pieces)
        arrays = layout_buckets([pieces.pop(b) for b in ids], self.packing, Clock(), bucket_ids=ids,
                         dir_span=_shard_dir(self.packing, self.s_bits, s))
        save_arrays(Path(self.folder) / f"shard-{s:04d}", arrays)
        shutil.rmtree(spill, ignore_errors=True)
        n_keys, n_multi = len(arrays["keys"]), len(arrays["multi_offsets"]) - 1
        return n_keys, n_keys - n_multi + len(arrays["multi_docs"]), len(arrays["multi_docs"])


def build_sharded(folder: str | os.PathLike, texts: Iterable[str], *, shards: int, ids: Sequence[str] | None = None,
                  subjects: Sequence[str | None] | None = None, sources: Sequence[str] | None = None,
                  max_n: int = 7, lowercase: bool = True, chunk_chars: int = 500_000, min_hash_bits: int = 52,
                  fingerprint: str | None = None, executor: Any = None) -> ShardedNgramIndex:
    """Build the sharded index of ``texts`` in ``folder`` (see the module doc) and open it.
    The parameters are those of :meth:`NgramIndex.build`; ``shards`` is a power of two."""
    t0 = time.perf_counter()
    s_bits = _shard_bits(shards)
    texts, docs = prepare(texts, ids, subjects, sources, max_n)
    D = len(texts)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    unseal(folder)
    (folder / "config.json").unlink(missing_ok=True)  # an interrupted build leaves no valid index
    shutil.rmtree(folder / "spill", ignore_errors=True)
    tok = Tokenizer(lowercase=lowercase)
    packing = Packing.for_collection(D, min_hash_bits)
    hint_slow_sort()
    if s_bits > packing.dir_bits:
        raise AnonauditError(f"{shards} shards need at least {s_bits + 32} hash bits; this index keeps "
                             f"{packing.hash_bits} (min_hash_bits)")
    ex = executor or LocalExecutor()
    clock = Clock()
    chunks = chunk_bounds(texts, chunk_chars)
    n_tokens = sum(ex.map(SpillShards(str(folder / "spill"), lowercase, max_n, packing, s_bits),
                          [(c, lo, texts[lo:hi]) for c, (lo, hi) in enumerate(chunks)], group=1,
                          label="sharded index: n-grams"))
    clock.lap("keys")
    sizes = ex.map(BuildShard(str(folder), packing, s_bits), list(range(shards)), group=1,
                   label="sharded index: shards")
    clock.lap("shards")
    shutil.rmtree(folder / "spill", ignore_errors=True)
    fp = fingerprint or collection_fingerprint([("collection", zip(docs.ids, texts))])
    config = {
        **base_config(tok, max_n, packing, fp, D),
        "format": SHARDED_FORMAT,
        "shards": shards,
        "shard_ngrams": [n for n, _, _ in sizes],
        "shard_multi_docs": [m for _, _, m in sizes],
        "n_tokens": int(n_tokens),
        "n_ngrams": int(sum(n for n, _, _ in sizes)),
        "n_postings": int(sum(p for _, p, _ in sizes)),
        "build_seconds": round(time.perf_counter() - t0, 3),
        "build_phases": clock.rounded(),
    }
    atomic_write_json(folder / "docs.json", asdict(docs), allow_nan=True)
    atomic_write_json(folder / "config.json", config, allow_nan=True)  # marks a complete index
    seal(folder)  # checksums last: verified before the folder is reused (audit.runtime.integrity)
    return ShardedNgramIndex.load(folder)


class _Postings:
    """The shards' ``multi_docs`` seen as one array (global positions), read shard by shard."""

    def __init__(self, index: ShardedNgramIndex):
        self.index = index
        self.base = index.posting_base

    def __len__(self) -> int:
        return int(self.base[-1])

    def __getitem__(self, pos: Any) -> np.ndarray:
        if isinstance(pos, slice):
            start, stop = pos.start or 0, len(self) if pos.stop is None else pos.stop
            if stop <= start:
                return np.zeros(0, dtype=np.uint32)
            s = int(np.searchsorted(self.base, start, side="right")) - 1
            b = int(self.base[s])
            return np.asarray(self.index.shard(s)["multi_docs"][start - b:stop - b])
        pos = np.asarray(pos, dtype=np.int64)
        out = np.empty(len(pos), dtype=np.uint32)
        which = np.searchsorted(self.base, pos, side="right") - 1
        for s in np.unique(which):
            sel = which == s
            out[sel] = self.index.shard(int(s))["multi_docs"][pos[sel] - int(self.base[s])]
        return out


@dataclass
class ShardedNgramIndex(NgramIndex):
    """An :class:`NgramIndex` whose arrays live in hash-partitioned shards (see the module doc).
    ``directory``, ``keys``, ``first`` and ``multi_offsets`` are unused (empty); ``multi_docs``
    reads across shards."""

    folder: Path | None = None
    shard_bits: int = 0
    posting_base: np.ndarray | None = None

    @classmethod
    def load(cls, folder: str | os.PathLike, *, mmap: bool = True) -> ShardedNgramIndex:
        folder = Path(folder)
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise AnonauditError(f"{folder}: not a sharded n-gram index ({exc})") from None
        if config.get("format") != SHARDED_FORMAT:
            raise AnonauditError(f"{folder}: not a sharded n-gram index (format {config.get('format')!r})")
        tcfg = config["tokenizer"]
        if tcfg.get("name") != TOKENIZER_NAME:
            raise AnonauditError(f"{folder}: built with tokeniser {tcfg.get('name')!r}, this version uses "
                                 f"{TOKENIZER_NAME}")
        docs = DocInfo(**json.loads((folder / "docs.json").read_text(encoding="utf-8")))
        base = np.concatenate(([0], np.cumsum(np.asarray(config["shard_multi_docs"], dtype=np.int64))))
        empty = np.zeros(0, dtype=np.uint32)
        index = cls(directory=empty, keys=empty, first=empty, multi_offsets=empty, multi_docs=None, docs=docs,
                    max_n=int(config["max_n"]), tokenizer=Tokenizer(lowercase=bool(tcfg["lowercase"])),
                    hash_bits=int(config["hash"]["hash_bits"]), config=config, folder=folder,
                    shard_bits=_shard_bits(int(config["shards"])), posting_base=base)
        index._mmap = mmap
        index._open: dict[int, dict[str, np.ndarray]] = {}
        index.multi_docs = _Postings(index)
        return index

    def save(self, folder: str | os.PathLike) -> Path:
        if Path(folder).resolve() != Path(self.folder).resolve():
            raise AnonauditError("a sharded index lives in the folder it was built in")
        return Path(folder)

    @property
    def shard_entries(self) -> int:
        """How many directory entries each shard has."""
        return _shard_entries(self.hash_bits, self.shard_bits)

    def shard(self, s: int) -> dict[str, np.ndarray]:
        """The arrays of shard ``s``, opened (memory-mapped) on first use."""
        found = self._open.get(s)
        if found is None:
            found = load_arrays(self.folder / f"shard-{s:04d}", self._mmap, self.config["shard_ngrams"][s],
                                self.shard_entries)
            self._open[s] = found
        return found

    def lookup(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`NgramIndex.lookup`, each hash searched in its own shard only."""
        h = np.asarray(hashes, dtype=U64)
        df = np.zeros(len(h), dtype=np.int64)
        ref = np.zeros(len(h), dtype=np.int64)
        if not len(h):
            return df, ref
        which = (h >> U64(64 - self.shard_bits)).astype(np.int64) if self.shard_bits else np.zeros(len(h), np.int64)
        for s in np.unique(which):
            sel = np.flatnonzero(which == s)
            a = self.shard(int(s))
            df[sel], ref[sel] = search(a["directory"], a["keys"], a["first"], a["multi_offsets"], h[sel],
                                       self.hash_bits, dir_base=int(s) * self.shard_entries,
                                       multi_base=int(self.posting_base[s]))
        return df, ref

    def __getstate__(self) -> dict[str, Any]:  # sent to workers: they reopen the shards they need
        return {**self.__dict__, "_open": {}}


def open_saved(folder: str | os.PathLike, fp: str, *, max_n: int, lowercase: bool,
               shards: int) -> tuple[NgramIndex | None, str | None]:
    """``(index, note)``: the index saved in ``folder`` (plain or sharded) when it was built from
    the collection ``fp`` with these settings and its checksums hold (:mod:`audit.runtime.integrity`);
    else ``None`` (build it again), with a ``note`` saying why when the folder is corrupt or was
    changed (a stale one, built from other documents or settings, is rebuilt quietly)."""
    from audit.ngrams.build import FORMAT
    from audit.ngrams.storage import saved_format
    from audit.runtime.integrity import rebuild_message, verify

    saved = saved_format(folder)
    if saved not in (FORMAT, SHARDED_FORMAT):
        return None, None
    sharded = saved == SHARDED_FORMAT
    problem = verify(folder)
    if problem is None:
        try:
            index = ShardedNgramIndex.load(folder) if sharded else NgramIndex.load(folder)
        except (AnonauditError, OSError, ValueError, KeyError, TypeError) as exc:
            problem = str(exc)
    if problem is not None:
        return None, rebuild_message("the n-gram index", folder, problem)
    cfg = index.config
    if (cfg.get("collection_fingerprint") != fp or int(cfg.get("max_n", -1)) != max_n
            or index.tokenizer.lowercase != lowercase or int(cfg.get("shards", 1) if sharded else 1) != shards):
        return None, None  # stale: built from other documents or settings
    return index, None
