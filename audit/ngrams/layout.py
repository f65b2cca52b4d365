"""The memory side of the n-gram index's build: sorted key runs merged into the final layout
(``layout_buckets``) within a bounded memory, pieces held in anonymous maps the kernel can page out
(:class:`MappedRuns`), the sort each numpy build does fastest (:func:`sort_kinds`) and the
allocator trimmed between stages. :mod:`audit.ngrams.build` drives it."""

from __future__ import annotations

import contextlib
import logging
import mmap
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from audit.ngrams.hashing import U64
from audit.ngrams.kernels import kernels
from audit.runtime.cpu import slow_sort_hint
from audit.core.errors import AnonauditError

if TYPE_CHECKING:
    from audit.ngrams.build import Packing

log = logging.getLogger(__name__)

#: glibc's ``mallopt`` parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


#: Every FREE_EVERY buckets laid out, the memory their pieces held goes back to the system: the
#: pages of the chunks' memory maps (:class:`MappedRuns`), or the C heap's free memory
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


def load_layout_kernel() -> None:
    """Load :func:`layout_buckets`'s kernel (from numba's cache, or compile it) by laying out nothing,
    with the argument types of its real calls."""
    none = np.zeros(0, dtype=np.uint32)
    kernels().lay_out(np.zeros(0, dtype=U64), *[U64(0)] * 7, none, none, none, none, np.zeros(0, dtype=np.int64))


def hold_to_the_end(j: int) -> None:
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


class MappedRuns:
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
            return split_buckets(keys, counts)
        if mm is None:
            mm, arr = _new_map(len(keys), keys.dtype)
            arr[:] = keys
            keys = arr
        with self.lock:
            self.runs.append([mm, np.cumsum(counts) * keys.itemsize, 0])
        return split_buckets(keys, counts)

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


def layout_buckets(buckets: list[list[np.ndarray]], packing: Packing, clock: Clock,
                   bucket_ids: Sequence[int] | None = None, dir_span: tuple[int, int] | None = None,
                   workers: int = 1, release: Any = None) -> dict[str, np.ndarray]:
    """The index's arrays (the package docstring) from each bucket's chunks' distinct
    keys (of the buckets ``bucket_ids``, in increasing order, when not all of them: a shard,
    whose directory covers only its entries ``dir_span``, (first, how many)).

    Bucket by bucket, in order (their key ranges follow each other): its chunks' keys are
    gathered and sorted on ``workers`` threads, and laid out (the kernel ``lay_out`` of
    :mod:`~audit.ngrams.kernels`) straight into arrays that grow in place; every :data:`FREE_EVERY` buckets the memory of those laid out is given back:
    ``release(j)`` when given (:meth:`MappedRuns.release`: buckets up to ``j`` are done), else
    the heap is trimmed; so the pairs and the index never both live whole (the build's peak:
    the index is about 0.9x the pairs it is made from)."""
    ids = list(range(len(buckets))) if bucket_ids is None else [int(b) for b in bucket_ids]
    total = sum(len(p) for pieces in buckets for p in pieces)
    dir_lo, dir_n = dir_span or (0, 1 << packing.dir_bits)
    dir_counts = np.zeros(dir_n + 1, dtype=np.int64)
    # keys, first, multi_docs, multi_counts: at most one of each per pair (a half for the counts)
    grown = [_Grown(np.uint32, cap) for cap in (total, total, total, total // 2)]

    spans = [_dir_entries(packing, b, dir_lo, dir_n) for b in ids]
    # one array per bucket in flight: the one being laid out and those the threads sort
    # meanwhile (:func:`_in_order` runs at most ``ahead`` buckets ahead)
    ahead = SORT_AHEAD * workers if workers > 1 else 0
    slots = [_Merged() for _ in range(ahead + 1)]

    def merged(j: int) -> np.ndarray | None:
        pieces = buckets[j]
        buckets[j] = None  # type: ignore[call-overload]  # freed as merged
        n = sum(len(p) for p in pieces)
        return sorted_union(pieces, out=slots[j % len(slots)].get(n)) if n else None

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
    arrays = _finished(grown, dir_counts, n_multi)
    clock.lap("layout")
    return arrays


def _dir_entries(packing: Packing, bucket: int, dir_lo: int, dir_n: int) -> tuple[int, int]:
    """The directory entries of ``bucket`` in the directory of entries ``dir_lo`` to
    ``dir_lo + dir_n``, (first, how many) (a bucket may cover more than a shard's)."""
    at, span = packing.dir_range(bucket)
    at, end = max(at, dir_lo), min(at + span, dir_lo + dir_n)
    return at - dir_lo, end - at


def _finished(grown: list[_Grown], dir_counts: np.ndarray, n_multi: int) -> dict[str, np.ndarray]:
    """The index's arrays once every bucket is laid out: the grown arrays cut to size, the
    multi-document lists' offsets and the directory (counts summed)."""
    if n_multi >= MULTI:  # ``first`` could not number them
        raise AnonauditError(f"{n_multi:,} n-grams occur in two documents or more, more than one index holds "
                             f"({MULTI:,}): build it in shards")
    keys, first, multi_docs, multi_counts = (g.done() for g in grown)
    offsets = np.zeros(len(multi_counts) + 1, dtype=np.uint32 if len(multi_docs) < 2**32 else np.uint64)
    np.cumsum(multi_counts, out=offsets[1:])
    del multi_counts
    directory = np.cumsum(dir_counts).astype(np.uint32 if len(keys) < 2**32 else np.uint64)
    return dict(directory=directory, keys=keys, first=first, multi_offsets=offsets, multi_docs=multi_docs)


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
    (not in :class:`MappedRuns`), which ``free`` keeps for later use, so the process would hold
    the pairs and the index at once although only the index is live."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def keep_heap() -> None:
    """Let the C heap (glibc) keep what this process frees, up to 256 MB, and serve arrays up
    to 32 MB from it, instead of giving them back to the system as it goes: in a process that
    extracts chunk after chunk (a cluster's worker), each chunk's temporary arrays would
    otherwise be pages touched anew, which in a VM cost as much as the work (benchmarks/README.md).
    Not for the process that builds the index, whose peak memory this would raise."""
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20)
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)


@lru_cache(maxsize=1)
def _libc() -> Any:
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:  # not glibc (macOS, musl without it): the memory is reused by the process instead
        return None


def split_buckets(keys: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """The buckets' keys as views of ``keys`` (see :meth:`ChunkKeys.__call__`)."""
    return np.split(keys, np.cumsum(counts)[:-1])


@lru_cache(maxsize=1)
def hint_slow_sort() -> None:
    """Once a process: say so when numpy's sort is the slow one of this CPU (:mod:`audit.runtime.cpu`)."""
    hint = slow_sort_hint()
    if hint:
        log.warning(hint)


@lru_cache(maxsize=1)
def sort_kinds() -> tuple[str, str]:
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


def compact_unique(arr: np.ndarray) -> np.ndarray:
    """``arr`` sorted in place, then its distinct values in a new array of their own."""
    arr.sort(kind=sort_kinds()[0])
    return distinct_values(arr)


def distinct_values(arr: np.ndarray) -> np.ndarray:
    """The distinct values of the sorted ``arr``, in a new array of their own."""
    if len(arr) <= 1:
        return arr.copy()
    keep = np.empty(len(arr), dtype=bool)
    keep[0] = True
    np.not_equal(arr[1:], arr[:-1], out=keep[1:])
    return arr[keep]


def sorted_union(pieces: list[np.ndarray], out: np.ndarray | None = None, runs: bool = False) -> np.ndarray:
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
    out.sort(kind=sort_kinds()[1 if runs else 0])
    return out


class Clock:
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
