"""The index's compiled kernels themselves (see :mod:`audit.ngrams.kernels`,
whose ``kernels()`` imports this module, and so numba, on first use).

They are module-level functions, not closures: numba's disk cache keys a function by the pickled
contents of its closure, and a closure holding another compiled function (``lower_bound``) pickles
with a per-process identity, so it never matched and every fresh process (a Ray worker, a new
run) compiled its callers again, about 2 s. Module globals are not part of the key; the cache is
still invalidated when this file changes.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from audit.ngrams.hashing import CHAR_MULT, LEN_MIX, MIX1, MIX2, TOKEN_MULT
from audit.ngrams.char_classes import CLIP, JOIN, NL, TERM, WORD


def jit(fn: Any) -> Any:
    """``fn`` compiled on first use, cached on disk beside this file (or in numba's user-wide
    cache), releasing the GIL."""
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # no folder to cache in: compile in every process instead
        return numba.njit(nogil=True)(fn)


u64 = np.uint64
mix1, mix2, char_mult = u64(MIX1), u64(MIX2), u64(CHAR_MULT)
token_mult, len_mix = u64(TOKEN_MULT), u64(LEN_MIX)
s30, s27, s31 = u64(30), u64(27), u64(31)
word, join, term, nl, clip = WORD, JOIN, TERM, NL, CLIP


@jit
def lower_bound(values, lo, hi, x):  # pragma: no cover
    """The first position in ``values[lo:hi]`` (sorted) whose value is not below ``x``
    (``hi`` if none), by halving."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@jit
def scan_tokens(cp, cls, value, upper, abbr, doc_starts, starts, ends, hashes, boundary):  # pragma: no cover
    """Fill ``starts``, ``ends``, ``hashes`` and ``boundary`` (whether the token starts a
    segment) for the tokens of the code points ``cp``; return how many there are.

    A token starts at a word character and goes on over word characters and over joiners
    that have a word character on both sides. A token starts a segment after a newline,
    at a document's start (``doc_starts``, sorted character offsets: the first token at or
    after each), or after a full stop (``.!?`` outside a token) when it starts with a
    capital and the token before the stop is neither an abbreviation (``abbr``: sorted
    hashes) nor a single letter.

    Long because it is one compiled pass over the code points whose state (the token being read,
    its hash, the segment's start) lives in locals; cut into compiled calls, that state would go
    back and forth once per character."""
    L = cp.shape[0]
    n_abbr = abbr.shape[0]
    n_docs = doc_starts.shape[0]
    nt = 0
    di = 0
    i = 0
    after_newline = False
    after_stop = False
    while i < L:
        c = cp[i]
        k = cls[c if c < clip else clip]
        if not k & word:
            if k & nl:
                after_newline = True
            if k & term:
                after_stop = True
            i += 1
            continue
        s = i
        h = u64(0)
        p = u64(1)
        while True:  # the token's polynomial: sum of value[c_j] * Q^(j - s)
            h += value[cp[i]] * p
            p *= char_mult
            i += 1
            if i >= L:
                break
            c = cp[i]
            k = cls[c if c < clip else clip]
            if k & word:
                continue
            if k & join and i + 1 < L:
                c = cp[i + 1]
                if cls[c if c < clip else clip] & word:
                    continue
            break
        h ^= h >> s30  # splitmix64
        h *= mix1
        h ^= h >> s27
        h *= mix2
        h ^= h >> s31
        starts_segment = after_newline
        if after_stop and nt > 0 and not starts_segment:
            c = cp[s]
            if upper[c if c < clip else clip]:
                ps = starts[nt - 1]
                first = cp[ps]
                initial = ends[nt - 1] - ps == 1 and not (48 <= first <= 57)  # a letter, not a digit
                if not initial:
                    prev = hashes[nt - 1]
                    at = lower_bound(abbr, 0, n_abbr, prev)
                    starts_segment = not (at < n_abbr and abbr[at] == prev)
        while di < n_docs and doc_starts[di] <= s:
            starts_segment = True
            di += 1
        starts[nt] = s
        ends[nt] = i
        hashes[nt] = h
        boundary[nt] = starts_segment
        nt += 1
        after_newline = False
        after_stop = False
    return nt


@jit
def doc_pairs(th, seg, doc_tokens, max_n, kept, route_bits, t_bits, first_doc, keys, buckets, counts):  # pragma: no cover
    """The distinct (n-gram, document) pairs of a chunk, document by document: for each
    n-gram (n = 1..max_n) of the tokens with hashes ``th`` inside one segment (``seg``), its
    hash's bits ``kept`` (the top bits: at least the lowest 8 are not kept), once per
    document (the tokens of document ``d`` are ``doc_tokens[d]:doc_tokens[d + 1]``; the
    documents are numbered from ``first_doc``), packed (the kept bits shifted up by
    ``t_bits``, the document below them) into ``keys``, with its bucket (the hash's top
    ``route_bits``) in ``buckets``, counted per bucket in ``counts``. Return how many pairs.

    A document's repeated n-grams are found in a hash table sized for it (twice its n-grams
    at most, a power of two: a few dozen KB for a page of text, so it stays in cache). A
    slot holds the n-gram's kept bits and, in the bits below them, a mark of the document
    it was written for (1 to 255), so that a slot is read once a probe and the table is
    cleared only when the marks wrap, not for every document."""
    n_docs = doc_tokens.shape[0] - 1
    T = th.shape[0]
    most = 1
    for d in range(n_docs):
        most = max(most, (doc_tokens[d + 1] - doc_tokens[d]) * max_n)
    bits = 1
    while (1 << bits) < 2 * most:
        bits += 1
    table = np.zeros(1 << bits, dtype=np.uint64)
    marks = ~kept  # the bits a mark takes
    last_mark = u64(255) if marks >= u64(255) else marks
    route_shift = u64(64 - route_bits if route_bits else 0)
    up = u64(t_bits)
    mark = u64(0)
    f = 0
    for d in range(n_docs):
        a, b = doc_tokens[d], doc_tokens[d + 1]
        slot_bits = 1
        while (1 << slot_bits) < 2 * (b - a) * max_n:
            slot_bits += 1
        slot_shift = u64(64 - slot_bits)  # a slot: the pair's top bits (a hash's: random)
        wrap = (1 << slot_bits) - 1
        mark += u64(1)
        if mark > last_mark:  # the marks wrap: slots of an earlier document could read as this one's
            table[:] = 0
            mark = u64(1)
        doc = first_doc + u64(d)
        for i in range(a, b):
            h = u64(0)
            s = seg[i]
            for n in range(1, max_n + 1):
                j = i + n - 1
                if j >= T or seg[j] != s:
                    break
                h = h * token_mult + th[j]
                x = (h + len_mix * u64(n)) & kept
                entry = x | mark
                slot = np.int64(x >> slot_shift)
                held = table[slot]
                while (held & marks) == mark and held != entry:  # another n-gram of this document
                    slot = (slot + 1) & wrap
                    held = table[slot]
                if held == entry:
                    continue  # seen in this document
                table[slot] = entry
                bucket = np.int64(x >> route_shift) if route_bits else 0
                keys[f] = (x << up) | doc
                buckets[f] = bucket
                counts[bucket] += 1
                f += 1
    return f


@jit
def by_bucket(keys, buckets, counts, out):  # pragma: no cover
    """``keys`` (with their ``buckets``, counted in ``counts``) into ``out`` bucket after
    bucket, in their order within each."""
    n_buckets = counts.shape[0]
    at = np.empty(n_buckets, dtype=np.int64)
    pos = 0
    for b in range(n_buckets):
        at[b] = pos
        pos += counts[b]
    for i in range(keys.shape[0]):
        b = buckets[i]
        out[at[b]] = keys[i]
        at[b] += 1


@jit
def lay_out(part, docmask, key_shift, dir_shift, dir_high, dir_first, multi_base, multi_flag,
            keys, first, multi_docs, multi_counts, dir_counts):  # pragma: no cover
    """Lay out one bucket's sorted, distinct packed keys ``part`` (a hash part above
    ``docmask``, the document below it) into the index's arrays, from their starts: per
    n-gram (a run of equal hash parts) its stored key (``part >> key_shift``, its low 32
    bits), and ``first``: its document, or ``multi_flag`` with its number among the n-grams
    of two documents or more (from ``multi_base``), whose documents go to ``multi_docs`` and
    their count to ``multi_counts``; and count the n-grams of each directory entry
    (``part >> dir_shift | dir_high``, less ``dir_first``: its place in ``dir_counts``). The masks, shifts and
    numbers are ``uint64``. Return how many n-grams, posting lists and listed documents were
    written."""
    n = part.shape[0]
    hashmask = ~docmask
    m = 0
    nm = 0
    nd = 0
    i = 0
    while i < n:
        x = part[i]
        h = x & hashmask
        j = i + 1
        while j < n and (part[j] & hashmask) == h:
            j += 1
        keys[m] = np.uint32((x >> key_shift) & u64(0xFFFFFFFF))
        entry = dir_high
        if dir_shift < 64:
            entry |= x >> dir_shift
        dir_counts[entry - dir_first] += 1
        if j - i == 1:
            first[m] = np.uint32(x & docmask)
        else:
            first[m] = np.uint32(multi_flag | (multi_base + u64(nm)))
            multi_counts[nm] = np.uint32(j - i)
            for k in range(i, j):
                multi_docs[nd] = np.uint32(part[k] & docmask)
                nd += 1
            nm += 1
        m += 1
        i = j
    return m, nm, nd


@jit
def find(directory, keys, first, multi_offsets, hashes, entry_shift, needle_shift, dir_base, multi_flag,
         multi_base, df, ref):  # pragma: no cover
    """For each n-gram hash of ``hashes``, its document frequency in ``df`` (0 when absent)
    and its posting reference in ``ref`` (see ``NgramIndex.lookup``), from the index's arrays
    (or a shard's, whose directory starts at entry ``dir_base`` and whose posting lists at
    ``multi_base``). The directory entry (``hash >> entry_shift``) bounds the keys to search,
    a few dozen at most; the stored key (``hash >> needle_shift``, its low 32 bits) is
    searched among them by halving."""
    for i in range(hashes.shape[0]):
        h = hashes[i]
        e = np.int64(h >> entry_shift) - dir_base
        lo = np.int64(directory[e])
        end = np.int64(directory[e + 1])
        needle = np.uint32((h >> needle_shift) & u64(0xFFFFFFFF))
        lo = lower_bound(keys, lo, end, needle)
        if lo >= end or keys[lo] != needle:
            continue
        f = u64(first[lo])
        if f < multi_flag:
            df[i] = 1
            ref[i] = np.int64(f)
        else:
            j = np.int64(f - multi_flag)
            at = np.int64(multi_offsets[j])
            df[i] = np.int64(multi_offsets[j + 1]) - at
            ref[i] = at + multi_base


@jit
def keep_free(order, first, last, taken, out):  # pragma: no cover
    """The n-grams ``order`` (positions in ``first``/``last``, their first and last tokens) in
    turn, each kept (written to ``out``) when none of its tokens is ``taken`` yet, its tokens
    then taken; return how many were kept."""
    m = 0
    for k in range(order.shape[0]):
        c = order[k]
        a, b = first[c], last[c]
        free = True
        for t in range(a, b + 1):
            if taken[t]:
                free = False
                break
        if free:
            for t in range(a, b + 1):
                taken[t] = True
            out[m] = c
            m += 1
    return m

