"""Building the index: every (n-gram hash, document) pair of a collection, sorted into CSR arrays.

The build packs each ``(hash, document)`` pair into one ``uint64`` (the document number
takes the hash's lowest bits) so that one plain ``np.sort`` orders pairs by hash then
document; up to 8 more hash bits are kept by first routing pairs to 2^t buckets by their
top bits (the "Hashing" section of the package docstring says how many bits are kept and
what that costs in collisions).
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from attackers.phrase_search.index.hashing import MASK64, U64, iter_ngram_hashes
from attackers.phrase_search.index.tokenizer import Tokenizer
from attackers.phrase_search.index import windows
from attackers.phrase_search.index.windows import iter_windows, window_ngrams
from audit.core.errors import AnonauditError

FORMAT = "anonaudit.ngram_index/1"
#: The single build sorts each of 2^ROUTE_BITS buckets on its own (see :class:`_Packing`). With
#: torch's sort (see SORT_BACKEND) each bucket is sorted whole, so a large collection gets up to
#: MAX_ROUTE_BITS bits, enough for buckets of about BUCKET_KEYS keys, which a sort keeps in cache
#: (a key per character, roughly: max_n n-grams per word of about as many characters).
ROUTE_BITS = 8
MAX_ROUTE_BITS = 10
BUCKET_KEYS = 1 << 17
#: How the sorted runs of the chunks are merged: timsort ("stable") finds the runs and merges them,
#: several times faster than a quicksort that ignores them.
MERGE_SORT = "stable"
#: How the local build sorts its keys. "numpy": each chunk sorts and deduplicates its own keys
#: (small sorts, in cache) and each bucket merges the chunks' sorted runs (timsort), as a
#: distributed build does with its workers' chunks. "torch": the chunks only route their keys, and
#: each bucket is sorted once, by torch's CPU sort, and deduplicated (torch sorts 64-bit integers
#: about 1.6x as fast as numpy's wheel here, which has no SIMD sort for them; with numpy's sort one
#: sort per bucket is no faster than the chunks' sorts and the merge). "auto": torch for a
#: collection of at least TORCH_SORT_MIN_CHARS characters when torch is already imported (an audit
#: that embeds or trains has loaded it; below that size the cost of a torch call per bucket is
#: more than the faster sort saves), or of at least TORCH_IMPORT_MIN_CHARS, where the faster sort
#: saves more than torch's import (about 1 s) costs. The index is the same either way.
SORT_BACKEND = "auto"
TORCH_SORT_MIN_CHARS = 8_000_000
TORCH_IMPORT_MIN_CHARS = 128_000_000


@dataclass
class DocInfo:
    """What the index knows about each document number."""

    ids: list[str]
    subjects: list[str | None]
    sources: list[str]


def collection_fingerprint(corpora: Sequence[tuple[str, Iterable[tuple[str, str]]]]) -> str:
    """sha256 over (source, id, text) of every document, in order."""
    h = hashlib.sha256()
    for source, docs in corpora:
        h.update(f"\x00source\x00{source}\x00".encode())
        for doc_id, text in docs:
            h.update(doc_id.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
            h.update(text.encode("utf-8", "surrogatepass"))
            h.update(b"\x01")
    return h.hexdigest()


@dataclass(frozen=True)
class _Packing:
    """How a ``(hash, document)`` pair is packed into one ``uint64``: the document number
    replaces the hash's lowest ``doc_bits`` bits, shifted up by ``t_bits`` whose top bits go
    to a bucket. Effective hash bits = 64 - doc_bits + t_bits >= min_hash_bits.

    ``route_bits`` (>= ``t_bits``): pairs are routed to ``2^route_bits`` buckets by the hash's
    top bits, so that each bucket is sorted on its own (in cache, and the buckets on several
    threads) instead of all pairs in one sort. Only the top ``t_bits`` leave the packed key; the
    buckets are contiguous ranges of the one sorted order, so the index is the same."""

    doc_bits: int
    t_bits: int
    route_bits: int = -1  # -1: t_bits

    def __post_init__(self) -> None:
        if self.route_bits < self.t_bits:
            object.__setattr__(self, "route_bits", self.t_bits)

    @classmethod
    def for_collection(cls, n_docs: int, min_hash_bits: int, route_bits: int = 0) -> _Packing:
        doc_bits = max(1, int(n_docs - 1).bit_length())
        return cls(doc_bits, min(8, max(0, min_hash_bits - 64 + doc_bits)), route_bits)

    @property
    def lost(self) -> int:
        """Low hash bits given up to the document number."""
        return self.doc_bits - self.t_bits

    @property
    def hash_mask(self) -> int:
        return MASK64 ^ ((1 << self.lost) - 1) if self.lost > 0 else MASK64

    @property
    def n_buckets(self) -> int:
        return 1 << self.route_bits

    def shifted_out(self, buckets: np.ndarray) -> np.ndarray:
        """The top ``t_bits`` hash bits (those that left the packed key) of each bucket number."""
        return buckets >> U64(self.route_bits - self.t_bits)

    @property
    def docmask(self) -> np.uint64:
        return U64((1 << self.doc_bits) - 1)


def prepare(texts: Iterable[str], ids: Sequence[str] | None, subjects: Sequence[str | None] | None,
            sources: Sequence[str] | None, max_n: int) -> tuple[list[str], DocInfo]:
    """The texts as a list and what the index knows about each, checked."""
    if not 1 <= max_n <= 32:
        raise AnonauditError(f"max_n must be between 1 and 32, got {max_n}")
    texts = list(texts)
    D = len(texts)
    if D >= 2**32 - 1:
        raise AnonauditError("an index holds at most 2^32 - 2 documents")
    ids = [str(i) for i in range(D)] if ids is None else [str(i) for i in ids]
    subjects = [None] * D if subjects is None else list(subjects)
    sources = ["collection"] * D if sources is None else list(sources)
    if not (len(ids) == len(subjects) == len(sources) == D):
        raise ValueError("ids, subjects and sources must have one entry per text")
    return texts, DocInfo(ids, subjects, sources)


def base_config(tok: Tokenizer, max_n: int, packing: _Packing, fp: str, n_docs: int) -> dict[str, Any]:
    """The config entries every index (single or sharded) of a collection has in common."""
    return {
        "format": FORMAT,
        "tokenizer": tok.config(),
        "max_n": max_n,
        "hash": {"tokens": "polynomial mod 2^64 over code points + splitmix64",
                 "ngrams": "polynomial mod 2^64 over token hashes + n * constant",
                 "hash_bits": 64 - max(packing.lost, 0), "hash_mask": packing.hash_mask},
        "collection_fingerprint": fp,
        "n_docs": n_docs,
    }


def build_fields(texts: Iterable[str], *, ids: Sequence[str] | None, subjects: Sequence[str | None] | None,
                 sources: Sequence[str] | None, max_n: int, lowercase: bool, chunk_chars: int, min_hash_bits: int,
                 workers: int, fingerprint: str | None, progress: bool, executor: Any = None) -> dict[str, Any]:
    """The fields of an :class:`~attackers.phrase_search.index.query.NgramIndex` over ``texts``
    (the parameters are those of :meth:`NgramIndex.build <attackers.phrase_search.index.query.NgramIndex.build>`)."""
    t0 = time.perf_counter()
    texts, docs = prepare(texts, ids, subjects, sources, max_n)
    D = len(texts)
    tok = Tokenizer(lowercase=lowercase)
    n_chars = sum(len(t) for t in texts)
    sort = _sort_backend(n_chars)
    route_bits = ROUTE_BITS
    if sort == "torch":
        route_bits = max(ROUTE_BITS, min(MAX_ROUTE_BITS, (n_chars // BUCKET_KEYS).bit_length()))
    packing = _Packing.for_collection(D, min_hash_bits, route_bits)
    clock = _Clock()
    n_tokens, buckets = _sorted_keys(texts, tok, max_n, packing, chunk_chars, workers, progress, clock, sort,
                                     executor)
    keys, offsets, doc = _csr(buckets, packing, clock, workers=workers)
    fp = fingerprint or collection_fingerprint([("collection", zip(docs.ids, texts))])
    config = {
        **base_config(tok, max_n, packing, fp, D),
        "n_tokens": int(n_tokens),
        "n_ngrams": int(len(keys)),
        "n_postings": int(len(doc)),
        "build_seconds": round(time.perf_counter() - t0, 3),
        "build_phases": clock.rounded(),
        "build_sort": {"sort": sort, "route_bits": packing.route_bits},
    }
    return dict(keys=keys, offsets=offsets, posting_docs=doc, docs=docs, max_n=max_n,
                tokenizer=tok, hash_mask=packing.hash_mask, config=config)


class ChunkKeys:
    """The n-gram extraction of the build as an executor's worker (:mod:`audit.core.executor`):
    an item is ``(lo, texts)``, a run of documents numbered from ``lo``; its output is
    ``(n_tokens, keys per bucket)``, exactly what the build computes for that chunk here. A
    worker with several CPUs (``threads``, set by the executor) cuts each chunk into as many
    runs of documents, extracts them on threads (numpy releases the GIL) and merges each
    bucket's sorted runs: the same output. With ``distinct=False`` (the driver sorts with torch,
    see :data:`SORT_BACKEND`) the keys are only routed to their buckets, and sorted on the driver."""

    def __init__(self, lowercase: bool, max_n: int, packing: _Packing, distinct: bool = True):
        self.lowercase, self.max_n, self.packing, self.distinct = lowercase, max_n, packing, distinct
        self.threads: int | None = None

    def setup(self) -> None:
        from attackers.phrase_search.index.hashing import _pow_tables

        _pow_tables()  # the code-point tables, once per worker
        Tokenizer(lowercase=self.lowercase).tokenize("Warm up.")

    def __call__(self, items: list[tuple[int, list[str]]]) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Per item ``(n_tokens, keys, counts)``: the buckets' keys one after the other in one
        array, and how many each bucket has (one array travels faster than 2^route_bits small
        ones; :func:`_split_buckets` cuts it back)."""
        tok = Tokenizer(lowercase=self.lowercase)
        if not self.threads or self.threads < 2:
            outs = [chunk_keys(lo, texts, tok, self.max_n, self.packing, self.distinct) for lo, texts in items]
        else:
            with ThreadPoolExecutor(self.threads) as pool:
                outs = [self._on_threads(pool, lo, texts, tok) for lo, texts in items]
        return [(nt, np.concatenate(parts), np.array([len(p) for p in parts], dtype=np.int64)) for nt, parts in outs]

    def _on_threads(self, pool: ThreadPoolExecutor, lo: int, texts: Sequence[str],
                    tok: Tokenizer) -> tuple[int, list[np.ndarray]]:
        runs = _chunks(texts, -(-sum(len(t) + 1 for t in texts) // self.threads))
        if len(runs) < 2:
            return chunk_keys(lo, texts, tok, self.max_n, self.packing, self.distinct)
        outs = list(pool.map(lambda r: chunk_keys(lo + r[0], texts[r[0]:r[1]], tok, self.max_n, self.packing,
                                                  self.distinct), runs))
        join = _merge_sorted if self.distinct else np.concatenate
        return sum(nt for nt, _ in outs), [join([parts[b] for _, parts in outs]) for b in range(len(outs[0][1]))]


def chunk_keys(lo: int, texts: Sequence[str], tok: Tokenizer, max_n: int,
               packing: _Packing, distinct: bool = True) -> tuple[int, list[np.ndarray]]:
    """``(n_tokens, keys per bucket)`` of the documents ``texts`` numbered from ``lo``: each
    bucket's keys sorted and distinct, or (``distinct=False``) routed only (see :data:`SORT_BACKEND`)."""
    if len(texts) == 1 and len(texts[0]) > windows.WINDOW_CHARS:  # one huge document: in windows
        return _huge_doc_keys(texts[0], lo, tok, max_n, packing)
    return _chunk_keys(texts, (0, len(texts)), tok, max_n, packing, base=lo, distinct=distinct)


def _sorted_keys(texts: Sequence[str], tok: Tokenizer, max_n: int, packing: _Packing, chunk_chars: int,
                 workers: int, progress: bool, clock: _Clock, sort: str,
                 executor: Any = None) -> tuple[int, list[np.ndarray]]:
    """The number of tokens, and per bucket the sorted, distinct packed keys of every n-gram.
    With a distributed ``executor``, the chunks' n-grams are extracted by its workers
    (:class:`ChunkKeys`) and only sorted here.

    With numpy's sort each chunk's keys are sorted and deduplicated where they are made and each
    bucket merges the chunks' sorted runs; with torch's the chunks only route their keys and each
    bucket is sorted once (see :data:`SORT_BACKEND`)."""
    chunks = _chunks(texts, chunk_chars)
    distinct = sort == "numpy"
    buckets: list[list[np.ndarray]] = [[] for _ in range(packing.n_buckets)]
    n_tokens = 0
    if executor is not None and getattr(executor, "distributed", False):
        outs = executor.map(ChunkKeys(tok.lowercase, max_n, packing, distinct),
                            [(lo, texts[lo:hi]) for lo, hi in chunks], group=1, label="phrase index: n-grams")
        for nt, keys, counts in outs:
            n_tokens += nt
            for b, part in enumerate(_split_buckets(keys, counts)):
                buckets[b].append(part)
        del outs
        clock.lap("keys")
        with ThreadPoolExecutor(max(1, workers)) as sorter:
            return n_tokens, _sort_buckets(buckets, sort, sorter.map)
    bar = _progress(progress, total=len(chunks), desc="indexing")
    # numpy releases the GIL in the heavy loops, so threads share the work of
    # independent chunks (and later of independent buckets) without copies
    pool = ThreadPoolExecutor(workers) if workers > 1 and len(chunks) > 1 else None
    mapper = pool.map if pool is not None else map

    def keys_of(span: tuple[int, int]) -> tuple[int, list[np.ndarray]]:
        lo, hi = span
        if hi - lo == 1 and len(texts[lo]) > windows.WINDOW_CHARS:  # one huge document: in windows
            return _huge_doc_keys(texts[lo], lo, tok, max_n, packing)
        return _chunk_keys(texts, span, tok, max_n, packing, distinct=distinct)

    try:
        for nt, parts in mapper(keys_of, chunks):
            n_tokens += nt
            for b, part in enumerate(parts):
                buckets[b].append(part)
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        clock.lap("keys")
        return n_tokens, _sort_buckets(buckets, sort, mapper)
    finally:
        if pool is not None:
            pool.shutdown()


def _sort_buckets(buckets: list[list[np.ndarray]], sort: str, mapper: Any) -> list[np.ndarray]:
    """Each bucket's distinct keys, sorted, from its chunks' pieces: sorted runs merged (numpy's
    sort), or one sort of them all (torch's, on one torch thread per build thread)."""
    if sort == "numpy":
        return list(mapper(_merge_sorted, buckets))
    with _one_torch_thread():
        return list(mapper(_TorchBucketSort(), buckets))


class _TorchBucketSort:
    """One bucket's distinct keys, sorted by torch, from its chunks' unsorted pieces (emptied).
    The pieces are joined and sorted in scratch arrays that each build thread keeps for the next
    bucket (torch's sort writes the order it found too, 8 bytes a key), so that only the distinct
    keys are new memory: a bucket's worth of scratch per thread instead of three bucket-sized
    arrays per bucket (in this VM, touching fresh memory costs about 2 ms a MB)."""

    def __init__(self) -> None:
        self._scratch: dict[int, tuple[np.ndarray, Any, Any]] = {}

    def __call__(self, pieces: list[np.ndarray]) -> np.ndarray:
        import torch

        n = sum(len(p) for p in pieces)
        if n == 0:
            return np.zeros(0, dtype=U64)
        scratch = self._scratch.get(threading.get_ident())
        if scratch is None or len(scratch[0]) < n:
            m = n + n // 4
            scratch = (np.empty(m, dtype=U64), torch.empty(m, dtype=torch.int64), torch.empty(m, dtype=torch.int64))
            self._scratch[threading.get_ident()] = scratch
        joined = scratch[0][:n]
        np.concatenate(pieces, out=joined)
        pieces.clear()
        joined ^= _SIGN  # torch sorts signed integers: flipping the sign bit maps uint64's order onto int64's
        values, order = scratch[1][:n], scratch[2][:n]
        torch.sort(torch.from_numpy(joined.view(np.int64)), out=(values, order))
        out = values.numpy().view(U64)
        out ^= _SIGN
        return _distinct(out)


def _csr(sorted_buckets: list[np.ndarray], packing: _Packing, clock: _Clock,
         bucket_ids: np.ndarray | None = None, workers: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``keys``, ``offsets`` and ``postings`` from the sorted keys of every bucket (of the
    buckets ``bucket_ids``, in increasing order, when not all of them: a shard).

    Bucket by bucket (their key ranges do not overlap, and a posting list never crosses a
    bucket's boundary), on ``workers`` threads: each bucket's posting starts, n-gram keys and
    document numbers are cut from it, the document numbers straight into their place in the
    final array, and the bucket is let go at once, so the buckets and the arrays made from them
    never all live at once (the build's memory peak)."""
    docmask, t_bits = packing.docmask, packing.t_bits
    counts = np.array([len(x) for x in sorted_buckets], dtype=np.int64)
    bases = np.concatenate(([0], np.cumsum(counts)))
    total = int(bases[-1])
    ids = (np.arange(len(sorted_buckets), dtype=U64) if bucket_ids is None
           else np.asarray(bucket_ids, dtype=U64))
    # each bucket's hash bits that left its packed keys, back in place on top of its n-gram keys
    high = packing.shifted_out(ids) << U64(64 - t_bits) if t_bits else None
    doc = np.empty(total, dtype=np.uint32)
    clock.lap("sort")

    def one(j: int) -> tuple[np.ndarray, np.ndarray]:
        part = sorted_buckets[j]
        sorted_buckets[j] = None  # type: ignore[call-overload]  # freed with ``part``
        if not len(part):
            return np.zeros(0, dtype=U64), np.zeros(0, dtype=np.uint32)
        # a posting list starts where the hash part changes (and at the bucket's start)
        new = np.empty(len(part), dtype=bool)
        new[0] = True
        np.greater(part[1:] ^ part[:-1], docmask, out=new[1:])
        starts = _flatnonzero_u32(new) if len(part) < 2**32 else np.flatnonzero(new)
        del new
        with np.errstate(over="ignore"):
            keys = part[starts] & ~docmask
            if high is not None:
                keys >>= U64(t_bits)
                keys |= high[j]
        part &= docmask  # in place (the bucket is the build's own array): the document numbers
        doc[bases[j]:bases[j + 1]] = part
        return keys, starts

    n = len(sorted_buckets)
    if workers > 1 and n > 1:
        with ThreadPoolExecutor(workers) as pool:
            parts = list(pool.map(one, range(n)))
    else:
        parts = [one(j) for j in range(n)]
    sorted_buckets.clear()
    n_keys = sum(len(k) for k, _ in parts)
    keys = np.empty(n_keys, dtype=U64)
    off_dtype = np.uint32 if total < 2**32 else np.uint64
    offsets = np.empty(n_keys + 1, dtype=off_dtype)
    pos = 0
    for j, (k, st) in enumerate(parts):
        keys[pos:pos + len(k)] = k
        offsets[pos:pos + len(k)] = st
        offsets[pos:pos + len(k)] += off_dtype(bases[j])
        pos += len(k)
        parts[j] = None  # type: ignore[call-overload]
    offsets[-1] = total
    clock.lap("csr")
    return keys, offsets, doc


# --------------------------------------------------------------------------- helpers


def _chunk_keys(texts: Sequence[str], span: tuple[int, int], tok: Tokenizer, max_n: int, packing: _Packing,
                base: int = 0, distinct: bool = True) -> tuple[int, list[np.ndarray]]:
    """Packed ``(hash, doc)`` keys of the n-grams of ``texts[lo:hi]``, split by bucket (document
    ``i`` numbered ``base + i``): each bucket's sorted and distinct, or (``distinct=False``) as
    they come, duplicates included, for one sort of the whole bucket later."""
    t_bits, r_bits, docmask, n_buckets = packing.t_bits, packing.route_bits, packing.docmask, packing.n_buckets
    lo, hi = span
    joined = "\n".join(texts[lo:hi])
    lens = np.fromiter((len(t) + 1 for t in texts[lo:hi]), dtype=np.int64, count=hi - lo)
    doc_starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    toks = tok.tokenize(joined, doc_starts=doc_starts)
    per_doc = np.diff(np.searchsorted(toks.start, doc_starts), append=len(toks))
    doc_of_tok = np.repeat(np.arange(base + lo, base + hi, dtype=U64), per_doc)
    key = np.empty(len(toks) * max_n, dtype=U64)
    bucket = np.empty(len(key) if r_bits else 0, dtype=np.uint8 if r_bits <= 8 else np.uint16)
    filled = 0
    for _n, valid, h in iter_ngram_hashes(toks, max_n):
        end = filled + len(h)
        with np.errstate(over="ignore"):
            if r_bits:
                np.right_shift(h, U64(64 - r_bits), out=bucket[filled:end], casting="unsafe")
            if t_bits:
                h <<= U64(t_bits)
            h &= ~docmask
            h |= doc_of_tok[: len(valid)][valid]
        key[filled:end] = h
        filled = end
    key, bucket = key[:filled], bucket[:filled]
    # distinct: each bucket's keys leave sorted and without duplicates, in arrays of their own: the
    # chunk's buffer (max_n keys per token) is freed, and what is kept until the merge is only the
    # distinct (n-gram, document) pairs. A pair belongs to one chunk (its document's), so the
    # chunks' pairs are disjoint and the merge needs no second pass for duplicates. Otherwise the
    # routed keys leave as views of one array, duplicates and all, for one sort of each bucket.
    if not r_bits:
        return len(toks), [_compact_unique(key) if distinct else key]
    # route to buckets by the hash's top bits (radix sort of 8- or 16-bit values, chunk-sized: in cache)
    key = key[np.argsort(bucket, kind="stable")]
    parts = np.split(key, np.cumsum(np.bincount(bucket, minlength=n_buckets))[:-1])
    return len(toks), [_compact_unique(p) for p in parts] if distinct else parts


def _huge_doc_keys(text: str, doc: int, tok: Tokenizer, max_n: int, packing: _Packing) -> tuple[int, list[np.ndarray]]:
    """Packed keys of one huge document, split by bucket, computed one window at a time
    (:mod:`~attackers.phrase_search.index.windows`): the same keys as :func:`_chunk_keys`, with
    one window's tokens and n-grams in memory instead of the whole text's; each window's keys
    are sorted and deduplicated before they are kept."""
    parts: list[list[np.ndarray]] = [[] for _ in range(packing.n_buckets)]
    n_tokens = 0
    t_bits, r_bits, docmask = packing.t_bits, packing.route_bits, packing.docmask
    for w in iter_windows(tok, text, (), max_n, windows.WINDOW_CHARS):
        h, _n, _first = window_ngrams(w, max_n)
        n_tokens += w.core
        with np.errstate(over="ignore"):
            if r_bits:
                bucket = (h >> U64(64 - r_bits)).astype(np.uint16)
            if t_bits:
                h <<= U64(t_bits)
            h &= ~docmask
            h |= U64(doc)
        if r_bits:
            order = np.argsort(bucket, kind="stable")
            h = h[order]
            split = np.split(h, np.cumsum(np.bincount(bucket, minlength=packing.n_buckets))[:-1])
        else:
            split = [h]
        for b, piece in enumerate(split):
            parts[b].append(_sort_unique([piece]))
    return n_tokens, [_sort_unique(p) for p in parts]


def _split_buckets(keys: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """The buckets' keys as views of ``keys`` (see :meth:`ChunkKeys.__call__`)."""
    return np.split(keys, np.cumsum(counts)[:-1])


def _compact_unique(arr: np.ndarray) -> np.ndarray:
    """``arr`` sorted in place, then its distinct values in a new array of their own."""
    arr.sort()
    return _distinct(arr)


def _distinct(arr: np.ndarray) -> np.ndarray:
    """The distinct values of the sorted ``arr``, in a new array of their own."""
    if len(arr) <= 1:
        return arr.copy()
    keep = np.empty(len(arr), dtype=bool)
    keep[0] = True
    np.not_equal(arr[1:], arr[:-1], out=keep[1:])
    return arr[keep]


_SIGN = U64(1 << 63)


def _torch_loaded() -> bool:
    return "torch" in sys.modules


def _sort_backend(n_chars: int) -> str:
    """How the buckets' keys are sorted for a collection of ``n_chars`` characters: "numpy" or
    "torch" (see :data:`SORT_BACKEND`)."""
    backend = SORT_BACKEND
    if backend == "auto":
        big = n_chars >= TORCH_IMPORT_MIN_CHARS or (n_chars >= TORCH_SORT_MIN_CHARS and _torch_loaded())
        backend = "torch" if big else "numpy"
    if backend == "torch":
        try:
            import torch  # noqa: F401  (a dependency of sentence-transformers; absent in a trimmed install)
        except ImportError:
            return "numpy"
    return backend


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    """torch's intra-op threads set to one for the block (each build thread runs its own sort),
    and restored after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _merge_sorted(pieces: list[np.ndarray]) -> np.ndarray:
    """One bucket's keys, sorted, from pieces that are each sorted and distinct and share no
    value (one chunk's each). Empties ``pieces``, freeing each piece once it is copied, so the
    pieces and the merged array are never both whole in memory."""
    out = np.empty(sum(len(p) for p in pieces), dtype=U64)
    pieces.reverse()
    pos = 0
    while pieces:
        piece = pieces.pop()
        out[pos:pos + len(piece)] = piece
        pos += len(piece)
        del piece
    out.sort(kind=MERGE_SORT)
    return out


def _flatnonzero_u32(mask: np.ndarray, block: int = 1 << 22) -> np.ndarray:
    """``np.flatnonzero(mask)`` as ``uint32``, a block at a time (half the memory of int64)."""
    out = np.empty(int(np.count_nonzero(mask)), dtype=np.uint32)
    pos = 0
    for i in range(0, len(mask), block):
        idx = np.flatnonzero(mask[i:i + block])
        idx += i
        out[pos:pos + len(idx)] = idx
        pos += len(idx)
    return out


def _sort_unique(pieces: list[np.ndarray]) -> np.ndarray:
    """One bucket's keys, sorted, duplicate (hash, doc) pairs dropped."""
    merged = np.concatenate(pieces) if pieces else np.zeros(0, dtype=U64)
    merged.sort(kind=MERGE_SORT)  # the pieces are sorted runs
    return _distinct(merged)


class _Clock:
    """Accumulates wall time per build phase (reported in the index config)."""

    def __init__(self) -> None:
        self.t = time.perf_counter()
        self.phases: dict[str, float] = {}

    def lap(self, name: str | None = None) -> None:
        now = time.perf_counter()
        if name:
            self.phases[name] = self.phases.get(name, 0.0) + now - self.t
        self.t = now

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.phases.items()}


def _chunks(texts: Sequence[str], chunk_chars: int) -> list[tuple[int, int]]:
    """Runs of documents of about ``chunk_chars`` characters; a document longer than
    :data:`~attackers.phrase_search.index.windows.WINDOW_CHARS` is a chunk of its own (it is read in windows)."""
    out, lo, size = [], 0, 0
    for i, t in enumerate(texts):
        if len(t) > windows.WINDOW_CHARS:
            if lo < i:
                out.append((lo, i))
            out.append((i, i + 1))
            lo, size = i + 1, 0
            continue
        size += len(t) + 1
        if size >= chunk_chars:
            out.append((lo, i + 1))
            lo, size = i + 1, 0
    if lo < len(texts):
        out.append((lo, len(texts)))
    return out


def _progress(enabled: bool, total: int, desc: str):
    if not enabled or total <= 1:
        return None
    from audit.core.progress import bar as progress_bar

    return progress_bar(total=total, desc=desc, unit="chunk")
