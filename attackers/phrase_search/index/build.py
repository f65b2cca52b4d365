"""Building the index: every (n-gram hash, document) pair of a collection, sorted into CSR arrays.

The build packs each ``(hash, document)`` pair into one ``uint64`` (the document number
takes the hash's lowest bits) so that one plain ``np.sort`` orders pairs by hash then
document; up to 8 more hash bits are kept by first routing pairs to 2^t buckets by their
top bits (the "Hashing" section of the package docstring says how many bits are kept and
what that costs in collisions). Each chunk of documents finds its distinct pairs (document by
document, in a small hash table) and places them bucket after bucket, in no order within a
bucket; each bucket gathers its chunks' pairs, sorts them once and is laid out at once into the index's
arrays, which grow as the buckets are freed (:func:`_layout`; the chunks' pairs live in memory
maps given back page by page, :class:`_MappedRuns`), so the build's peak is about its distinct
pairs (8 bytes each) and not the pairs plus the index.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import mmap
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from attackers.phrase_search.index.hashing import MASK64, U64, top_bits_mask
from attackers.phrase_search.index.kernels import kernels
from attackers.phrase_search.index.tokenizer import Tokenizer
from attackers.phrase_search.index import windows
from attackers.phrase_search.index.windows import iter_windows, window_ngrams
from audit.runtime.cpu import slow_sort_hint
from audit.core.errors import AnonauditError

FORMAT = "anonaudit.ngram_index/2"
#: The build routes pairs to 2^ROUTE_BITS buckets by their top hash bits (see :class:`_Packing`):
#: each bucket sorts its chunks' pairs and is laid out on its own (in cache, and the buckets on
#: several threads), and is freed as its part of the index is laid out, which keeps the build's
#: peak near the size of its pairs (see :func:`_layout`). More buckets make each bucket's
#: layout smaller (its scratch memory, and what is held until it is freed) but cost Python's
#: overhead per bucket, and per chunk a piece each (benchmarks/README.md).
ROUTE_BITS = 8
#: Every FREE_EVERY buckets laid out, the memory their pieces held goes back to the system: the
#: pages of the chunks' memory maps (:class:`_MappedRuns`), or the C heap's free memory
#: (:func:`_trim`) when the pieces are in the heap. Less often holds more pairs; more often
#: costs more system calls, each of which interrupts the other threads (8 buckets: 1.3 MB per
#: million words held at most).
FREE_EVERY = 8
#: In the layout, each sorting thread may run this many buckets ahead of the one being laid
#: out: with one each, a thread that has sorted its bucket waits for the layout, and the two
#: cores were a fifth idle (benchmarks/README.md). Each costs a bucket's sorted array (an
#: eighth of a percent of the pairs).
SORT_AHEAD = 4
#: In ``first``, the flag of an n-gram found in two documents or more: the rest of the value is
#: its number among those n-grams (its posting list is ``multi_docs[multi_offsets[j]:multi_offsets[j+1]]``);
#: without the flag, the value is the one document of the n-gram.
MULTI = 1 << 31
#: Bounds of ``min_hash_bits``: at least 32 bits of every key are stored, the directory takes the
#: bits above them (2^(bits - 32) entries: 4 MB at 52 bits, 64 MB at 56).
MIN_HASH_BITS, MAX_HASH_BITS = 40, 56

log = logging.getLogger(__name__)


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
    """How a ``(hash, document)`` pair is packed into one ``uint64``: the hash keeps its top
    ``hash_bits`` bits; shifted up by ``t_bits`` (whose top bits go to a bucket), its lowest
    ``doc_bits`` bits are free for the document number.

    ``route_bits`` (>= ``t_bits``): pairs are routed to ``2^route_bits`` buckets by the hash's
    top bits, so that each bucket is sorted on its own (in cache, and the buckets on several
    threads) instead of all pairs in one sort. Only the top ``t_bits`` leave the packed key; the
    buckets are contiguous ranges of the one sorted order, so the index is the same."""

    doc_bits: int
    t_bits: int
    hash_bits: int
    route_bits: int = -1  # -1: t_bits

    def __post_init__(self) -> None:
        if self.route_bits < self.t_bits:
            object.__setattr__(self, "route_bits", self.t_bits)

    @classmethod
    def for_collection(cls, n_docs: int, min_hash_bits: int, route_bits: int = 0) -> _Packing:
        if not (isinstance(min_hash_bits, int) and MIN_HASH_BITS <= min_hash_bits <= MAX_HASH_BITS):
            raise AnonauditError(f"min_hash_bits must be between {MIN_HASH_BITS} and {MAX_HASH_BITS}, "
                                 f"got {min_hash_bits!r}")
        doc_bits = max(1, int(n_docs - 1).bit_length())
        t_bits = min(8, max(0, min_hash_bits - 64 + doc_bits))
        return cls(doc_bits, t_bits, min(min_hash_bits, 64 - doc_bits + t_bits), route_bits)

    @property
    def hash_mask(self) -> int:
        return top_bits_mask(self.hash_bits)

    @property
    def keep(self) -> np.uint64:
        """The bits of a shifted hash that stay in the packed key (the hash's kept bits below the
        top ``t_bits``)."""
        return U64((self.hash_mask << self.t_bits) & MASK64)

    @property
    def dir_bits(self) -> int:
        """The hash's top bits that index the directory (the next 32 are each key's stored value)."""
        return self.hash_bits - 32

    @property
    def n_buckets(self) -> int:
        return 1 << self.route_bits

    def shifted_out(self, buckets: np.ndarray) -> np.ndarray:
        """The top ``t_bits`` hash bits (those that left the packed key) of each bucket number."""
        return buckets >> U64(self.route_bits - self.t_bits)

    @property
    def docmask(self) -> np.uint64:
        return U64((1 << self.doc_bits) - 1)

    def dir_range(self, bucket: int) -> tuple[int, int]:
        """The directory entries (first, how many) that the keys of ``bucket`` fall in."""
        d, r = self.dir_bits, self.route_bits
        return (bucket << (d - r), 1 << (d - r)) if d >= r else (bucket >> (r - d), 1)


def prepare(texts: Iterable[str], ids: Sequence[str] | None, subjects: Sequence[str | None] | None,
            sources: Sequence[str] | None, max_n: int) -> tuple[list[str], DocInfo]:
    """The texts as a list and what the index knows about each, checked."""
    if not 1 <= max_n <= 32:
        raise AnonauditError(f"max_n must be between 1 and 32, got {max_n}")
    texts = list(texts)
    D = len(texts)
    if D >= MULTI:
        raise AnonauditError(f"an index holds at most {MULTI - 1} documents")
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
                 "hash_bits": packing.hash_bits, "hash_mask": packing.hash_mask},
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
    packing = _Packing.for_collection(D, min_hash_bits, ROUTE_BITS)
    _hint_slow_sort()
    clock = _Clock()
    n_tokens, buckets, release = _bucket_runs(texts, tok, max_n, packing, chunk_chars, workers, progress, clock,
                                              executor)
    arrays = _layout(buckets, packing, clock, workers=workers, release=release)
    fp = fingerprint or collection_fingerprint([("collection", zip(docs.ids, texts))])
    config = {
        **base_config(tok, max_n, packing, fp, D),
        "n_tokens": int(n_tokens),
        "n_ngrams": int(len(arrays["keys"])),
        "n_postings": int(len(arrays["keys"]) - len(arrays["multi_offsets"]) + 1 + len(arrays["multi_docs"])),
        "build_seconds": round(time.perf_counter() - t0, 3),
        "build_phases": clock.rounded(),
        "route_bits": packing.route_bits,
    }
    return dict(**arrays, docs=docs, max_n=max_n, tokenizer=tok, hash_bits=packing.hash_bits, config=config)


class ChunkKeys:
    """The n-gram extraction of the build as an executor's worker (:mod:`audit.runtime.executor`):
    an item is a group of chunks, each ``(lo, texts)``, a run of documents numbered from
    ``lo``; its output is ``(n_tokens, keys, counts)``: the chunks' runs (:func:`chunk_run`) one
    after the other in one array, each written into its place there as it is made (one array
    travels out of the worker with no copy, where several were copied into one;
    :func:`_split_buckets` cuts it back), and how many keys each run has in each bucket (one row
    a run). A worker with several CPUs (``threads``, set by the executor) extracts a group's
    chunks on as many threads (numpy and the kernels release the GIL), or cuts a lone chunk
    into that many runs of documents (the layout sorts each bucket's runs together anyway)."""

    #: the build only reads the keys (see :mod:`audit.runtime.executor`)
    readonly_outputs = True
    #: setup() loads nothing and, run again in the same process, costs nothing
    light_setup = True

    def __init__(self, lowercase: bool, max_n: int, packing: _Packing):
        self.lowercase, self.max_n, self.packing = lowercase, max_n, packing
        self.threads: int | None = None

    def setup(self) -> None:
        _keep_heap()  # this process only extracts chunks: reuse their memory, do not give it back
        _sort_kinds()  # which of numpy's sorts is faster here, timed once per worker
        # the code-point tables and the compiled kernels (from numba's cache), once per worker
        chunk_run(0, ["Warm up."], Tokenizer(lowercase=self.lowercase), self.max_n, self.packing)

    def __call__(self, items: list[list[tuple[int, list[str]]]]) -> list[tuple[int, np.ndarray, np.ndarray]]:
        tok = Tokenizer(lowercase=self.lowercase)
        threads = self.threads or 1
        with ThreadPoolExecutor(threads) if threads > 1 else contextlib.nullcontext() as pool:
            return [self._group(chunks, tok, threads, pool) for chunks in items]

    def _group(self, chunks: list[tuple[int, list[str]]], tok: Tokenizer, threads: int,
               pool: ThreadPoolExecutor | None) -> tuple[int, np.ndarray, np.ndarray]:
        if len(chunks) == 1 and threads > 1:  # a lone chunk: in as many runs as threads
            lo, texts = chunks[0]
            chunks = [(lo + a, texts[a:b]) for a, b in _chunks(texts, -(-sum(len(t) + 1 for t in texts) // threads))]
        each = pool.map if pool is not None and len(chunks) > 1 else map
        # each chunk's distinct pairs; then, their numbers known, each chunk's placed bucket after
        # bucket in its part of one array
        found = list(each(lambda c: _chunk_pairs(c[1], c[0], tok, self.max_n, self.packing), chunks))
        ends = np.cumsum([len(f[1]) for f in found])
        keys = np.empty(int(ends[-1]), dtype=U64)
        list(each(lambda j: _place(*found[j][1:], out=keys[ends[j] - len(found[j][1]):ends[j]]), range(len(found))))
        return sum(f[0] for f in found), keys, np.stack([f[3] for f in found])


#: A run of a chunk's keys: ``(keys, counts)``, the packed keys bucket after bucket, each
#: bucket's distinct (in no order, or sorted for one huge document), and how many each bucket has.
_Run = tuple[np.ndarray, np.ndarray]


def chunk_run(lo: int, texts: Sequence[str], tok: Tokenizer, max_n: int, packing: _Packing) -> tuple[int, _Run]:
    """``(n_tokens, run)`` of the documents ``texts`` numbered from ``lo``."""
    nt, keys, buckets, counts = _chunk_pairs(texts, lo, tok, max_n, packing)
    return nt, (_place(keys, buckets, counts), counts)


def _chunk_pairs(texts: Sequence[str], lo: int, tok: Tokenizer, max_n: int,
                 packing: _Packing) -> tuple[int, np.ndarray, np.ndarray | None, np.ndarray]:
    """``(n_tokens, keys, buckets, counts)`` of the documents ``texts`` numbered from ``lo``: their
    distinct pairs in the order found, each one's bucket, and how many each bucket has, for
    :func:`_place` to put bucket after bucket (``buckets`` None: ``keys`` are so already, those of
    one huge document)."""
    if len(texts) == 1 and len(texts[0]) > windows.WINDOW_CHARS:  # one huge document: in windows
        nt, parts = _huge_doc_keys(texts[0], lo, tok, max_n, packing)
        return nt, np.concatenate(parts), None, np.array([len(p) for p in parts], dtype=np.int64)
    return _pairs_of_documents(texts, (0, len(texts)), tok, max_n, packing, base=lo)


def _place(keys: np.ndarray, buckets: np.ndarray | None, counts: np.ndarray,
           out: np.ndarray | None = None) -> np.ndarray:
    """The pairs ``keys`` of :func:`_chunk_pairs` bucket after bucket, in ``out`` (made if not given)."""
    if out is None:
        out = np.empty(len(keys), dtype=U64)
    if buckets is None:
        out[:] = keys
    else:
        kernels().by_bucket(keys, buckets, counts, out)
    return out


def chunk_keys(lo: int, texts: Sequence[str], tok: Tokenizer, max_n: int,
               packing: _Packing) -> tuple[int, list[np.ndarray]]:
    """``(n_tokens, keys per bucket)`` of the documents ``texts`` numbered from ``lo``, each
    bucket's keys distinct, in no order."""
    nt, (keys, counts) = chunk_run(lo, texts, tok, max_n, packing)
    return nt, _split_buckets(keys, counts)


def _bucket_runs(texts: Sequence[str], tok: Tokenizer, max_n: int, packing: _Packing, chunk_chars: int,
                 workers: int, progress: bool, clock: _Clock,
                 executor: Any = None) -> tuple[int, list[list[np.ndarray]], Any]:
    """The number of tokens, per bucket its chunks' keys, each distinct (a pair
    belongs to one chunk, its document's, so the chunks' keys are also disjoint), and what gives
    their memory back as the layout goes (:meth:`_MappedRuns.release`, :func:`_hold_to_the_end`,
    or None: trim the heap). With a
    distributed ``executor`` the chunks' n-grams are extracted by its workers (:class:`ChunkKeys`)."""
    chunks = _chunks(texts, chunk_chars)
    buckets: list[list[np.ndarray]] = [[] for _ in range(packing.n_buckets)]
    n_tokens = 0
    if executor is not None and getattr(executor, "distributed", False):
        per = _chunks_per_group(len(chunks))
        groups = [[(lo, texts[lo:hi]) for lo, hi in chunks[g:g + per]] for g in range(0, len(chunks), per)]
        # this process lays the buckets out: its kernel loads (numba's start, the first time in a
        # process: about a second) while the workers extract, instead of after them
        with ThreadPoolExecutor(1) as side:
            loaded = side.submit(_load_layout_kernel)
            outs = executor.map(ChunkKeys(tok.lowercase, max_n, packing), groups, group=1,
                                label="phrase index: n-grams")
            loaded.result()
        for nt, keys, counts in outs:
            n_tokens += nt
            # views of what came back (read-only on a cluster), held until the layout is done
            for i, part in enumerate(_split_buckets(keys, counts.ravel())):
                buckets[i % packing.n_buckets].append(part)
        del outs
        clock.lap("keys")
        return n_tokens, buckets, _hold_to_the_end
    bar = _progress(progress, total=len(chunks), desc="indexing")
    mapped = _MappedRuns() if _MappedRuns.usable(len(chunks)) else None

    def keys_of(span: tuple[int, int]) -> tuple[int, list[list[np.ndarray]]]:
        """The chunk's tokens, and its runs' keys per bucket, each bucket's in an array of its own."""
        lo, hi = span
        if hi - lo == 1 and len(texts[lo]) > windows.WINDOW_CHARS:
            # one huge document: its buckets' keys as they are made, in windows (as one run, like
            # a worker sends it, they would be copied once more: twice its pairs at the peak)
            nt, parts = _huge_doc_keys(texts[lo], lo, tok, max_n, packing)
            return nt, [parts]
        nt, keys, buckets, counts = _pairs_of_documents(texts, span, tok, max_n, packing)
        keys = _place(keys, buckets, counts, out=None if mapped is None else mapped.empty(len(keys)))
        if mapped is not None:
            return nt, [mapped.add(keys, counts)]
        return nt, [[p.copy() for p in _split_buckets(keys, counts)] if len(counts) > 1 else [keys]]

    # numpy releases the GIL in the heavy loops, so threads share the work of independent chunks
    with ThreadPoolExecutor(max(1, workers)) as pool:
        for nt, runs in (pool.map if workers > 1 and len(chunks) > 1 else map)(keys_of, chunks):
            n_tokens += nt
            for parts in runs:
                for b, part in enumerate(parts):
                    buckets[b].append(part)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    clock.lap("keys")
    return n_tokens, buckets, None if mapped is None else mapped.release


def _load_layout_kernel() -> None:
    """Load :func:`_layout`'s kernel (from numba's cache, or compile it) by laying out nothing,
    with the argument types of its real calls."""
    none = np.zeros(0, dtype=np.uint32)
    kernels().lay_out(np.zeros(0, dtype=U64), *[U64(0)] * 7, none, none, none, none, np.zeros(0, dtype=np.int64))


def _hold_to_the_end(j: int) -> None:
    """The release of pieces that cannot be given back before the layout ends: views of what a
    cluster sent, whose blocks each hold every bucket of their chunks (and are not in the heap,
    so trimming it would give back nothing of theirs)."""


class _Grown:
    """An array filled from its start, part after part, to at most ``capacity`` values, whose
    memory is taken as it is written: an anonymous memory map of the capacity, reserved but not
    backed (``MAP_NORESERVE``), so that the index's arrays can grow while the buckets they are
    made from are freed (allocated and zeroed whole at the start, they would be counted, and on
    some systems held, beside all the pairs), and are never copied nor zeroed as they grow.
    Without such maps (another system, or a reservation refused) it grows in place instead
    (``ndarray.resize``: a ``realloc``, zero-filled), a sixteenth of its expected size at a time."""

    def __init__(self, dtype: Any, capacity: int):
        self.dtype, self.n = np.dtype(dtype), 0
        self.map: mmap.mmap | None = None
        try:
            self.map = mmap.mmap(-1, max(1, capacity) * self.dtype.itemsize, flags=_MAP_FLAGS)
        except _MAP_ERRORS:  # no anonymous maps, or the reservation refused
            self.arr = np.empty(0, dtype=self.dtype)
        else:
            # (no huge pages: asked for here, they made the build 25% slower on this VM, benchmarks/README.md)
            self.arr = np.frombuffer(self.map, dtype=self.dtype)

    def tail(self, n: int, expected: float) -> np.ndarray:
        """Room for ``n`` more values after those written, to write them into (then
        :meth:`advance`); ``expected``: about how many values the array will hold in the end."""
        need = self.n + n
        if need > len(self.arr):  # never with a map: its capacity bounds the values
            self.arr.resize(max(need, self.n + int(expected) // 16), refcheck=False)
        return self.arr[self.n:need]

    def advance(self, n: int) -> None:
        """``n`` more values were written into the :meth:`tail`."""
        self.n += n

    def done(self) -> np.ndarray:
        """The values, in an array that holds no more than they need."""
        if self.map is None:
            self.arr.resize(self.n, refcheck=False)
            return self.arr
        del self.arr  # the map's only view, so that it can shrink
        with contextlib.suppress(*_MAP_ERRORS):  # not shrunk: the rest stays reserved but never backed
            self.map.resize(max(1, self.n * self.dtype.itemsize))
        return np.frombuffer(self.map, dtype=self.dtype, count=self.n)


#: An anonymous private map, reserved without swap or commit accounting (Linux's MAP_NORESERVE,
#: which Python's mmap module names only from 3.12): pages are taken only when written.
_MAP_FLAGS = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0) | \
    getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)
#: What making an anonymous map, or shrinking it, raises where the system cannot.
_MAP_ERRORS = (OSError, ValueError, AttributeError, SystemError)


class _MappedRuns:
    """The chunks' runs, each in an anonymous memory map of its own, given back to the system
    page by page as the layout goes past their buckets (:meth:`release`, ``madvise``): the
    buckets' pieces are views of their run instead of copies in the C heap, whose freed memory
    only :func:`_trim` (glibc alone) gives back."""

    #: At most this many maps (Linux allows 65,530 a process by default); a collection of more
    #: chunks (some 8 G characters) keeps its pieces in the heap.
    MAX_MAPS = 16384

    def __init__(self) -> None:
        self.runs: list[list[Any]] = []
        self.fresh: dict[int, mmap.mmap] = {}  # maps made by empty(), by their array's address
        self.lock = threading.Lock()

    @classmethod
    def usable(cls, n_chunks: int) -> bool:
        return (n_chunks <= cls.MAX_MAPS and hasattr(mmap, "MADV_DONTNEED") and hasattr(mmap, "MAP_ANONYMOUS")
                and hasattr(mmap.mmap, "madvise"))

    def empty(self, n: int) -> np.ndarray:
        """An array of ``n`` keys in a map of its own, for a run to be written into and then
        handed to :meth:`add` (which then keeps it as it is, instead of copying it)."""
        mm, arr = _new_map(n)
        with self.lock:
            self.fresh[arr.ctypes.data] = mm
        return arr

    def add(self, keys: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
        """Each bucket's keys of the run ``(keys, counts)``, as views of its map: the map of
        ``keys`` when :meth:`empty` made it, else a copy's."""
        with self.lock:
            mm = self.fresh.pop(keys.ctypes.data, None)
        if not len(keys):
            return _split_buckets(keys, counts)
        if mm is None:
            mm, arr = _new_map(len(keys), keys.dtype)
            arr[:] = keys
            keys = arr
        with self.lock:
            self.runs.append([mm, np.cumsum(counts) * keys.itemsize, 0])
        return _split_buckets(keys, counts)

    def release(self, j: int) -> None:
        """Buckets up to ``j`` are laid out: give back the whole pages of every run before the end
        of its bucket ``j``."""
        for run in self.runs:
            mm, ends, done = run
            upto = int(ends[j]) & ~(mmap.PAGESIZE - 1)
            if upto > done:
                mm.madvise(mmap.MADV_DONTNEED, done, upto - done)
                run[2] = upto


def _new_map(n: int, dtype: Any = U64) -> tuple[mmap.mmap, np.ndarray]:
    """A private anonymous map of ``n`` values and the array over it (private: MADV_DONTNEED
    frees a private anonymous page; a shared one stays in memory)."""
    mm = mmap.mmap(-1, max(1, n * np.dtype(dtype).itemsize), flags=_MAP_FLAGS)
    return mm, np.frombuffer(mm, dtype=dtype, count=n)


class _Merged:
    """The array a bucket's pieces are gathered and sorted in, reused from bucket to bucket: allocated
    for each, it would be given back by :func:`_trim` and touched anew for the next one, which
    in a VM costs about 2 ms a MB."""

    def __init__(self) -> None:
        self.arr = np.zeros(0, dtype=U64)

    def get(self, n: int) -> np.ndarray:
        if len(self.arr) < n:
            self.arr = np.empty(n + n // 4, dtype=U64)
        return self.arr[:n]


def _layout(buckets: list[list[np.ndarray]], packing: _Packing, clock: _Clock,
            bucket_ids: Sequence[int] | None = None, dir_span: tuple[int, int] | None = None,
            workers: int = 1, release: Any = None) -> dict[str, np.ndarray]:
    """The index's arrays (the package docstring) from each bucket's chunks' distinct
    keys (of the buckets ``bucket_ids``, in increasing order, when not all of them: a shard,
    whose directory covers only its entries ``dir_span``, (first, how many)).

    Bucket by bucket, in order (their key ranges follow each other): its chunks' keys are
    gathered and sorted on ``workers`` threads, and laid out (the kernel ``lay_out`` of
    :mod:`~attackers.phrase_search.index.kernels`) straight into arrays that grow in place; every :data:`FREE_EVERY` buckets the memory of those laid out is given back:
    ``release(j)`` when given (:meth:`_MappedRuns.release`: buckets up to ``j`` are done), else
    the heap is trimmed; so the pairs and the index never both live whole (the build's peak:
    the index is about 0.9x the pairs it is made from)."""
    ids = list(range(len(buckets))) if bucket_ids is None else [int(b) for b in bucket_ids]
    total = sum(len(p) for pieces in buckets for p in pieces)
    dir_lo, dir_n = dir_span or (0, 1 << packing.dir_bits)
    dir_counts = np.zeros(dir_n + 1, dtype=np.int64)
    # keys, first, multi_docs, multi_counts: at most one of each per pair (a half for the counts)
    grown = [_Grown(np.uint32, cap) for cap in (total, total, total, total // 2)]

    def entries(bucket: int) -> tuple[int, int]:
        """The directory entries of ``bucket`` in this directory, (first, how many) (a bucket may
        cover more than a shard's)."""
        at, span = packing.dir_range(bucket)
        at, end = max(at, dir_lo), min(at + span, dir_lo + dir_n)
        return at - dir_lo, end - at

    spans = [entries(b) for b in ids]
    # one array per bucket in flight: the one being laid out and those the threads sort
    # meanwhile (:func:`_in_order` runs at most ``ahead`` buckets ahead)
    ahead = SORT_AHEAD * workers if workers > 1 else 0
    slots = [_Merged() for _ in range(ahead + 1)]

    def merged(j: int) -> np.ndarray | None:
        pieces = buckets[j]
        buckets[j] = None  # type: ignore[call-overload]  # freed as merged
        n = sum(len(p) for p in pieces)
        return _sorted_union(pieces, out=slots[j % len(slots)].get(n)) if n else None

    # a stored key: the 32 hash bits below the directory's (packed, they sit t_bits higher);
    # a directory entry: the bucket's t_bits that left the packed key, then the next d - t_bits
    d, t_bits = packing.dir_bits, packing.t_bits
    key_shift, dir_shift = U64(64 - packing.hash_bits + t_bits), U64(64 - d + t_bits)
    lay_out = kernels().lay_out
    done, n_multi = 0, 0
    _trim()  # the chunks' temporary arrays, freed, back to the system before the index grows
    with ThreadPoolExecutor(max(1, workers)) as pool:
        for j, part in enumerate(_in_order(pool, merged, len(ids), ahead)):
            if part is None:
                continue
            n = len(part)
            done += n
            at, span = spans[j]
            high = int(packing.shifted_out(U64(ids[j]))) << (d - t_bits) if t_bits else 0
            # written after the arrays' values: at most one key, first and listed document a
            # pair, and one list every two pairs (views not kept: the maps shrink when done)
            m, lists, listed = lay_out(part, packing.docmask, key_shift, dir_shift, U64(high), U64(dir_lo + at),
                                       U64(n_multi), U64(MULTI),
                                       *(g.tail(k, (g.n + k) * total / done) for g, k in zip(grown, (n, n, n, n // 2))),
                                       dir_counts[at + 1:at + 1 + span])
            for g, k in zip(grown, (m, m, listed, lists)):
                g.advance(k)
            n_multi += lists
            if j % FREE_EVERY == FREE_EVERY - 1:
                if release is not None:
                    release(j)
                else:
                    _trim()
    buckets.clear()
    if n_multi >= MULTI:  # ``first`` could not number them
        raise AnonauditError(f"{n_multi:,} n-grams occur in two documents or more, more than one index holds "
                             f"({MULTI:,}): build it in shards")
    keys, first, multi_docs, multi_counts = (g.done() for g in grown)
    offsets = np.zeros(len(multi_counts) + 1, dtype=np.uint32 if len(multi_docs) < 2**32 else np.uint64)
    np.cumsum(multi_counts, out=offsets[1:])
    del multi_counts
    directory = np.cumsum(dir_counts).astype(np.uint32 if len(keys) < 2**32 else np.uint64)
    clock.lap("layout")
    return dict(directory=directory, keys=keys, first=first, multi_offsets=offsets, multi_docs=multi_docs)


# --------------------------------------------------------------------------- helpers


def _in_order(pool: ThreadPoolExecutor, fn: Any, n: int, ahead: int) -> Iterator[Any]:
    """``fn(0) .. fn(n - 1)`` on the pool's threads, in order, at most ``ahead`` of them beyond
    the one being consumed (``pool.map`` would run all of them ahead: their results would pile
    up); none ahead: in this thread, one after the other."""
    if ahead < 1:
        yield from map(fn, range(n))
        return
    running: deque[Future] = deque()
    for j in range(n):
        running.append(pool.submit(fn, j))
        if len(running) > ahead:
            yield running.popleft().result()
    while running:
        yield running.popleft().result()


def _trim() -> None:
    """Give the memory freed inside the C heap back to the system (glibc's ``malloc_trim``):
    the chunks' temporary arrays, and the buckets' pieces when they are small arrays in the heap
    (not in :class:`_MappedRuns`), which ``free`` keeps for later use, so the process would hold
    the pairs and the index at once although only the index is live."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def _keep_heap() -> None:
    """Let the C heap (glibc) keep what this process frees, up to 256 MB, and serve arrays up
    to 32 MB from it, instead of giving them back to the system as it goes: in a process that
    extracts chunk after chunk (a cluster's worker), each chunk's temporary arrays would
    otherwise be pages touched anew, which in a VM cost as much as the work (benchmarks/README.md).
    Not for the process that builds the index, whose peak memory this would raise."""
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20)
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)


#: glibc's ``mallopt`` parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def _chunks_per_group(n_chunks: int) -> int:
    """How many chunks a cluster's worker takes at once: up to 8, so that what each group costs
    the cluster (a few ms) is spread over several chunks, while a collection of a few dozen
    chunks still makes 16 groups or more for the workers to share."""
    return max(1, min(8, n_chunks // 16))


@lru_cache(maxsize=1)
def _libc() -> Any:
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:  # not glibc (macOS, musl without it): the memory is reused by the process instead
        return None


def _pairs_of_documents(texts: Sequence[str], span: tuple[int, int], tok: Tokenizer, max_n: int,
                        packing: _Packing, base: int = 0) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """``(n_tokens, keys, buckets, counts)``: the distinct packed ``(hash, document)`` keys of the
    n-grams of ``texts[lo:hi]`` (document ``i`` numbered ``base + i``) in the order found, each
    one's bucket, and how many each bucket has (:func:`_place` puts them bucket after bucket).

    The chunk is tokenised as one text, and its pairs are found document by document (the
    kernel ``doc_pairs``: a document's repeated n-grams in a hash table that stays in cache);
    placed, they are left unsorted within a bucket: the layout sorts each bucket's pairs anyway.
    ``keys`` and ``buckets`` are views of the chunk's buffers (up to ``max_n`` pairs a token),
    freed once the pairs are placed."""
    lo, hi = span
    joined = "\n".join(texts[lo:hi])
    lens = np.fromiter((len(t) + 1 for t in texts[lo:hi]), dtype=np.int64, count=hi - lo)
    doc_starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    toks = tok.tokenize(joined, doc_starts=doc_starts)
    doc_tokens = np.append(np.searchsorted(toks.start, doc_starts), len(toks))
    keys = np.empty(len(toks) * max_n, dtype=U64)
    buckets = np.empty(len(keys), dtype=np.uint16)
    counts = np.zeros(packing.n_buckets, dtype=np.int64)
    n = kernels().doc_pairs(toks.hash, toks.seg, doc_tokens, max_n, U64(packing.hash_mask), packing.route_bits,
                            packing.t_bits, U64(base + lo), keys, buckets, counts)
    return len(toks), keys[:n], buckets[:n], counts


def _huge_doc_keys(text: str, doc: int, tok: Tokenizer, max_n: int, packing: _Packing) -> tuple[int, list[np.ndarray]]:
    """Packed keys of one huge document, split by bucket, computed one window at a time
    (:mod:`~attackers.phrase_search.index.windows`): the same keys as
    :func:`_pairs_of_documents`, with one window's tokens and n-grams in memory instead of the
    whole text's; each window's keys are sorted and deduplicated before they are kept."""
    parts: list[list[np.ndarray]] = [[] for _ in range(packing.n_buckets)]
    n_tokens = 0
    t_bits, r_bits, keep = packing.t_bits, packing.route_bits, packing.keep
    for w in iter_windows(tok, text, (), max_n, windows.WINDOW_CHARS):
        h, _n, _first = window_ngrams(w, max_n)
        n_tokens += w.core
        with np.errstate(over="ignore"):
            if r_bits:
                bucket = (h >> U64(64 - r_bits)).astype(np.uint16)
            if t_bits:
                h <<= U64(t_bits)
            h &= keep
            h |= U64(doc)
        if r_bits:
            order = np.argsort(bucket, kind="stable")
            h = h[order]
            split = np.split(h, np.cumsum(np.bincount(bucket, minlength=packing.n_buckets))[:-1])
        else:
            split = [h]
        for b, piece in enumerate(split):
            parts[b].append(_compact_unique(piece))
    # the windows' runs may share pairs (a phrase twice in the document): merged, then deduplicated
    return n_tokens, [_distinct(_sorted_union(p, runs=True)) for p in parts]


def _split_buckets(keys: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """The buckets' keys as views of ``keys`` (see :meth:`ChunkKeys.__call__`)."""
    return np.split(keys, np.cumsum(counts)[:-1])


@lru_cache(maxsize=1)
def _hint_slow_sort() -> None:
    """Once a process: say so when numpy's sort is the slow one of this CPU (:mod:`audit.runtime.cpu`)."""
    hint = slow_sort_hint()
    if hint:
        log.warning(hint)


@lru_cache(maxsize=1)
def _sort_kinds() -> tuple[str, str]:
    """The faster of numpy's sorts on this machine, ``(for values in no order, for values in
    sorted runs)``, timed once per process on arrays of those kinds (25-45 ms here): a bucket's
    pairs from many chunks, and one huge document's windows' sorted keys.

    Where numpy's quicksort is vectorised and fast (x86-simd-sort with AVX2, or AVX-512 on
    Intel; Highway on ARM) it wins both, though timsort ("stable") merges runs instead of
    ignoring them (here, a bucket of 140,000 values in 84 runs: 9.9 against 21.7 ns a value);
    where it is slow (AVX-512 on AMD Zen 4, :mod:`audit.runtime.cpu`), timsort merges runs twice
    as fast and random values are a draw. The sorted values are the same either way."""
    rng = np.random.default_rng(0)
    chunk = rng.integers(0, 2**63, 1 << 16, dtype=U64)
    runs = np.sort(rng.integers(0, 2**63, (16, 4096), dtype=U64), axis=1).ravel()

    def best(kind: str, arr: np.ndarray) -> float:
        times = []
        for _ in range(3):
            work = arr.copy()
            t0 = time.perf_counter()
            work.sort(kind=kind)
            times.append(time.perf_counter() - t0)
        return min(times)

    return tuple("quicksort" if best("quicksort", arr) < best("stable", arr) else "stable"  # type: ignore[return-value]
                 for arr in (chunk, runs))


def _compact_unique(arr: np.ndarray) -> np.ndarray:
    """``arr`` sorted in place, then its distinct values in a new array of their own."""
    arr.sort(kind=_sort_kinds()[0])
    return _distinct(arr)


def _distinct(arr: np.ndarray) -> np.ndarray:
    """The distinct values of the sorted ``arr``, in a new array of their own."""
    if len(arr) <= 1:
        return arr.copy()
    keep = np.empty(len(arr), dtype=bool)
    keep[0] = True
    np.not_equal(arr[1:], arr[:-1], out=keep[1:])
    return arr[keep]


def _sorted_union(pieces: list[np.ndarray], out: np.ndarray | None = None, runs: bool = False) -> np.ndarray:
    """One bucket's keys, sorted, from its pieces: each one chunk's distinct keys, in no order
    (with ``runs``: each sorted). Chunks share no pair, so the result is distinct too (one huge
    document's windows may: :func:`_huge_doc_keys` keeps the distinct values). Written
    into ``out`` (made if not given, as long as the pieces together). Empties ``pieces``, freeing
    each piece once it is copied, so the pieces and the sorted array are never both whole in
    memory."""
    if out is None:
        out = np.empty(sum(len(p) for p in pieces), dtype=U64)
    pieces.reverse()
    pos = 0
    while pieces:
        piece = pieces.pop()
        out[pos:pos + len(piece)] = piece
        pos += len(piece)
        del piece
    out.sort(kind=_sort_kinds()[1 if runs else 0])
    return out


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
    from audit.runtime.progress import bar as progress_bar

    return progress_bar(total=total, desc=desc, unit="chunk")
