"""Building the index: every (n-gram hash, document) pair of a collection, sorted into CSR arrays.

The build packs each ``(hash, document)`` pair into one ``uint64`` (the document number
takes the hash's lowest bits) so that one plain ``np.sort`` orders pairs by hash then
document; up to 8 more hash bits are kept by first routing pairs to 2^t buckets by their
top bits (the "Hashing" section of the package docstring says how many bits are kept and
what that costs in collisions). Each chunk of documents finds its distinct pairs (document by
document, in a small hash table) and places them bucket after bucket, in no order within a
bucket; each bucket gathers its chunks' pairs, sorts them once and is laid out at once into the index's
arrays, which grow as the buckets are freed (:func:`layout_buckets`; the chunks' pairs live in memory
maps given back page by page, :class:`MappedRuns`), so the build's peak is about its distinct
pairs (8 bytes each) and not the pairs plus the index.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.ngrams.hashing import MASK64, U64, top_bits_mask
from audit.ngrams.kernels import kernels
from audit.ngrams.tokenizer import Tokenizer
from audit.ngrams import windows
from audit.ngrams.windows import iter_windows, window_ngrams
from audit.core.errors import AnonauditError
from audit.ngrams.layout import (
    MULTI,
    Clock,
    MappedRuns,
    compact_unique,
    distinct_values,
    hint_slow_sort,
    hold_to_the_end,
    keep_heap,
    layout_buckets,
    load_layout_kernel,
    sort_kinds,
    sorted_union,
    split_buckets,
)

FORMAT = "anonaudit.ngram_index/2"
#: The build routes pairs to 2^ROUTE_BITS buckets by their top hash bits (see :class:`Packing`):
#: each bucket sorts its chunks' pairs and is laid out on its own (in cache, and the buckets on
#: several threads), and is freed as its part of the index is laid out, which keeps the build's
#: peak near the size of its pairs (see :func:`layout_buckets`). More buckets make each bucket's
#: layout smaller (its scratch memory, and what is held until it is freed) but cost Python's
#: overhead per bucket, and per chunk a piece each (benchmarks/README.md).
ROUTE_BITS = 8
#: Bounds of ``min_hash_bits``: at least 32 bits of every key are stored, the directory takes the
#: bits above them (2^(bits - 32) entries: 4 MB at 52 bits, 64 MB at 56).
MIN_HASH_BITS, MAX_HASH_BITS = 40, 56


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
class Packing:
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
    def for_collection(cls, n_docs: int, min_hash_bits: int, route_bits: int = 0) -> Packing:
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


def base_config(tok: Tokenizer, max_n: int, packing: Packing, fp: str, n_docs: int) -> dict[str, Any]:
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
    """The fields of an :class:`~audit.ngrams.query.NgramIndex` over ``texts``
    (the parameters are those of :meth:`NgramIndex.build <audit.ngrams.query.NgramIndex.build>`)."""
    t0 = time.perf_counter()
    texts, docs = prepare(texts, ids, subjects, sources, max_n)
    D = len(texts)
    tok = Tokenizer(lowercase=lowercase)
    packing = Packing.for_collection(D, min_hash_bits, ROUTE_BITS)
    hint_slow_sort()
    clock = Clock()
    n_tokens, buckets, release = _bucket_runs(texts, tok, max_n, packing, chunk_chars, workers, progress, clock,
                                              executor)
    arrays = layout_buckets(buckets, packing, clock, workers=workers, release=release)
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
    :func:`split_buckets` cuts it back), and how many keys each run has in each bucket (one row
    a run). A worker with several CPUs (``threads``, set by the executor) extracts a group's
    chunks on as many threads (numpy and the kernels release the GIL), or cuts a lone chunk
    into that many runs of documents (the layout sorts each bucket's runs together anyway)."""

    #: the build only reads the keys (see :mod:`audit.runtime.executor`)
    readonly_outputs = True
    #: setup() loads nothing and, run again in the same process, costs nothing
    light_setup = True

    def __init__(self, lowercase: bool, max_n: int, packing: Packing):
        self.lowercase, self.max_n, self.packing = lowercase, max_n, packing
        self.threads: int | None = None

    def setup(self) -> None:
        keep_heap()  # this process only extracts chunks: reuse their memory, do not give it back
        sort_kinds()  # which of numpy's sorts is faster here, timed once per worker
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
            size = -(-sum(len(t) + 1 for t in texts) // threads)
            chunks = [(lo + a, texts[a:b]) for a, b in chunk_bounds(texts, size)]
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


def chunk_run(lo: int, texts: Sequence[str], tok: Tokenizer, max_n: int, packing: Packing) -> tuple[int, _Run]:
    """``(n_tokens, run)`` of the documents ``texts`` numbered from ``lo``."""
    nt, keys, buckets, counts = _chunk_pairs(texts, lo, tok, max_n, packing)
    return nt, (_place(keys, buckets, counts), counts)


def _chunk_pairs(texts: Sequence[str], lo: int, tok: Tokenizer, max_n: int,
                 packing: Packing) -> tuple[int, np.ndarray, np.ndarray | None, np.ndarray]:
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
               packing: Packing) -> tuple[int, list[np.ndarray]]:
    """``(n_tokens, keys per bucket)`` of the documents ``texts`` numbered from ``lo``, each
    bucket's keys distinct, in no order."""
    nt, (keys, counts) = chunk_run(lo, texts, tok, max_n, packing)
    return nt, split_buckets(keys, counts)


def _bucket_runs(texts: Sequence[str], tok: Tokenizer, max_n: int, packing: Packing, chunk_chars: int,
                 workers: int, progress: bool, clock: Clock,
                 executor: Any = None) -> tuple[int, list[list[np.ndarray]], Any]:
    """The number of tokens, per bucket its chunks' keys, each distinct (a pair
    belongs to one chunk, its document's, so the chunks' keys are also disjoint), and what gives
    their memory back as the layout goes (:meth:`MappedRuns.release`, :func:`hold_to_the_end`,
    or None: trim the heap). With a
    distributed ``executor`` the chunks' n-grams are extracted by its workers (:class:`ChunkKeys`)."""
    chunks = chunk_bounds(texts, chunk_chars)
    buckets: list[list[np.ndarray]] = [[] for _ in range(packing.n_buckets)]
    n_tokens = 0
    if executor is not None and getattr(executor, "distributed", False):
        per = _chunks_per_group(len(chunks))
        groups = [[(lo, texts[lo:hi]) for lo, hi in chunks[g:g + per]] for g in range(0, len(chunks), per)]
        # this process lays the buckets out: its kernel loads (numba's start, the first time in a
        # process: about a second) while the workers extract, instead of after them
        with ThreadPoolExecutor(1) as side:
            loaded = side.submit(load_layout_kernel)
            outs = executor.map(ChunkKeys(tok.lowercase, max_n, packing), groups, group=1,
                                label="phrase index: n-grams")
            loaded.result()
        for nt, keys, counts in outs:
            n_tokens += nt
            # views of what came back (read-only on a cluster), held until the layout is done
            for i, part in enumerate(split_buckets(keys, counts.ravel())):
                buckets[i % packing.n_buckets].append(part)
        del outs
        clock.lap("keys")
        return n_tokens, buckets, hold_to_the_end
    bar = _progress(progress, total=len(chunks), desc="indexing")
    mapped = MappedRuns() if MappedRuns.usable(len(chunks)) else None

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
        return nt, [[p.copy() for p in split_buckets(keys, counts)] if len(counts) > 1 else [keys]]

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


# --------------------------------------------------------------------------- helpers



def _chunks_per_group(n_chunks: int) -> int:
    """How many chunks a cluster's worker takes at once: up to 8, so that what each group costs
    the cluster (a few ms) is spread over several chunks, while a collection of a few dozen
    chunks still makes 16 groups or more for the workers to share."""
    return max(1, min(8, n_chunks // 16))


def _pairs_of_documents(texts: Sequence[str], span: tuple[int, int], tok: Tokenizer, max_n: int,
                        packing: Packing, base: int = 0) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
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


def _huge_doc_keys(text: str, doc: int, tok: Tokenizer, max_n: int, packing: Packing) -> tuple[int, list[np.ndarray]]:
    """Packed keys of one huge document, split by bucket, computed one window at a time
    (:mod:`~audit.ngrams.windows`): the same keys as
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
            parts[b].append(compact_unique(piece))
    # the windows' runs may share pairs (a phrase twice in the document): merged, then deduplicated
    return n_tokens, [distinct_values(sorted_union(p, runs=True)) for p in parts]


def chunk_bounds(texts: Sequence[str], chunk_chars: int) -> list[tuple[int, int]]:
    """Runs of documents of about ``chunk_chars`` characters; a document longer than
    :data:`~audit.ngrams.windows.WINDOW_CHARS` is a chunk of its own (it is read in windows)."""
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
