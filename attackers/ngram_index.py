"""A compact inverted index of word n-grams, built with vectorised numpy.

The phrase-search attack and the delinker sanitizer ask one question millions of
times: "in how many documents of the collection does this phrase occur, and
which?". This module answers it from a folder of three numpy arrays:

* ``keys``     sorted ``uint64`` hashes of every distinct n-gram (n = 1..max_n);
* ``offsets``  CSR offsets: the documents of ``keys[i]`` are ``postings[offsets[i]:offsets[i+1]]``;
* ``postings`` ``uint32`` document numbers, sorted within each list (so lists intersect fast).

plus ``docs.json`` (id, subject and source of every document number) and
``config.json`` saying what built it (tokeniser, max_n, hashing, collection
fingerprint). :meth:`NgramIndex.load` memory-maps the arrays, so a large index
opens instantly and is shared between processes through the page cache.

Tokenisation (:class:`Tokenizer`) works on the text's code points as one numpy
array, without a Python loop per word: word characters are letters and digits;
``- ' ’ . / , : &`` between two word characters stay inside a token ("36110/97",
"non-governmental", "1,000", "e.g"); everything else separates tokens.
Sentence boundaries are rules, not a parser: a newline, or ``.``/``!``/``?``
followed by a token that starts with a capital letter, unless the token before
the full stop is a known abbreviation ("Mr.", "no.", "Art.", ...) or a single
letter (an initial). That is much faster than spaCy for millions of words and
errs towards keeping sentences together; n-grams never cross a boundary.

Hashing: each code point (lower-cased; ’ folded to ', Unicode hyphens to -) has
a fixed pseudo-random 64-bit value; a token's hash is the polynomial of those
values mod 2^64 (vectorised with prefix sums), finalised with splitmix64; an
n-gram's hash is the polynomial of its token hashes plus n times a constant.
The stored hash keeps ``b = hash_bits`` bits (see the config): the build packs
each ``(hash, document)`` pair into one ``uint64`` (the document number takes
the hash's lowest bits) so that one plain ``np.sort`` orders pairs by hash then
document; up to 8 more bits are kept by first routing pairs to 2^t buckets by
their top bits. b >= 52 up to 2^20 documents (``min_hash_bits``, default 52;
b = 64 - ceil(log2 D) + 8 beyond; b = 64 - ceil(log2 D) when that is already
>= min_hash_bits, e.g. 57 bits for 127 documents). Treating hashes as random,
a phrase absent from the collection matches one of its N distinct n-grams with
probability about N / 2^b per lookup: at b = 52, 2e-10 for N = 10^6 (TAB-sized)
and 2e-8 for N = 10^8 (~70 M words), i.e. one spurious candidate per ~10,000
documents of 5,000 n-grams at that size; two distinct n-grams of the collection
share a hash with probability about N^2 / 2^(b+1) (about one merged pair among
10^8). Negligible next to the attack's other errors; ``min_hash_bits=64`` keeps
more bits (with buckets) for very large collections.

Size: about 48 MB per million words for the saved index (8-byte key and 4-byte
offset per distinct n-gram, 4-byte document number per posting; most 3- to
7-grams occur once); the build peaks at a few times that (figures in
benchmarks/README.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from audit.core.errors import AnonauditError
from audit.core.files import atomic_open, atomic_write_json

FORMAT = "anonaudit.ngram_index/1"
TOKENIZER_NAME = "anonaudit-words/1"

_U64 = np.uint64
_MASK64 = (1 << 64) - 1
_CHAR_MULT = _U64(0x100000001B3)  # FNV prime: odd, so invertible mod 2^64
_TOKEN_MULT = _U64(0x9E3779B97F4A7C15 | 1)
_LEN_MIX = _U64(0xD6E8FEB86659FD93)

#: Tokens before a full stop that do not end a sentence (lower case, no dot).
ABBREVIATIONS = (
    "mr mrs ms dr prof no nos art arts para paras pp p v vs e.g i.e etc cf st jr sr mt inc ltd co corp "
    "hon rev gen col lt sgt capt u.s fig vol ch sec seq approx jan feb mar apr jun jul aug sep sept oct "
    "nov dec op cit ibid al seq nr ref"
).split()
JOINERS = "-'’./,:&\u2010\u2011"
TERMINALS = ".!?"
NEWLINES = "\n\r\u2028\u2029\x0b\x0c"


# --------------------------------------------------------------------------- hashing


def _splitmix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, vectorised (wrap-around arithmetic on uint64)."""
    x = x.astype(_U64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> _U64(30)
        x *= _U64(0xBF58476D1CE4E5B9)
        x ^= x >> _U64(27)
        x *= _U64(0x94D049BB133111EB)
        x ^= x >> _U64(31)
    return x


def _pow_table(base: int, n: int) -> np.ndarray:
    """base^0 .. base^(n-1) mod 2^64."""
    out = np.empty(max(n, 1), dtype=_U64)
    out[0] = 1
    if n > 1:
        out[1:] = _U64(base)
        with np.errstate(over="ignore"):
            np.cumprod(out[1:], out=out[1:])
    return out[:n]


_POW_CACHE = 1 << 21  # characters; longer texts get their own tables


@lru_cache(maxsize=1)
def _pow_tables() -> tuple[np.ndarray, np.ndarray]:
    """Q^j and Q^-j for j < 2^21, shared by every short text (32 MB)."""
    q = int(_CHAR_MULT)
    return _pow_table(q, _POW_CACHE), _pow_table(pow(q, -1, 1 << 64), _POW_CACHE)


def _pows(n: int) -> tuple[np.ndarray, np.ndarray]:
    if n <= _POW_CACHE:
        pw, inv = _pow_tables()
        return pw[:n], inv[:n]
    q = int(_CHAR_MULT)
    return _pow_table(q, n), _pow_table(pow(q, -1, 1 << 64), n)


_WORD, _JOIN, _TERM, _NL = 1, 2, 4, 8


@lru_cache(maxsize=2)
def _tables(lowercase: bool = True) -> dict[str, np.ndarray]:
    """Per-code-point lookup tables for the Basic Multilingual Plane (built once).

    ``value`` gives every code point a fixed pseudo-random 64-bit value (after
    case folding, and with ’ folded to '), so the polynomial token hash behaves
    like a random function of the token's characters.
    """
    size = 0x10000
    chars = [chr(i) for i in range(size)]
    word = np.fromiter((c.isalnum() for c in chars), dtype=bool, count=size)
    upper = np.fromiter((c.isupper() for c in chars), dtype=bool, count=size)
    fold = np.arange(size, dtype=np.uint64)
    if lowercase:
        for i, c in enumerate(chars):
            lc = c.lower()
            if len(lc) == 1 and lc != c:
                fold[i] = ord(lc)
    fold[ord("’")] = ord("'")
    fold[0x2010] = fold[0x2011] = ord("-")
    value = _splitmix(fold + _U64(0x632BE59BD9B4E019))
    join = np.zeros(size, dtype=bool)
    join[[ord(c) for c in JOINERS]] = True
    term = np.zeros(size, dtype=bool)
    term[[ord(c) for c in TERMINALS]] = True
    nl = np.zeros(size, dtype=bool)
    nl[[ord(c) for c in NEWLINES]] = True
    word[0xFFFF] = join[0xFFFF] = False  # code points beyond the BMP are clipped to 0xFFFF
    # one byte of character classes, so a text needs a single table lookup
    cls = (word * _WORD | join * _JOIN | term * _TERM | nl * _NL).astype(np.uint8)
    return {"cls": cls, "upper": upper, "value": value}


def _token_hash(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Hash of every token ``values[s:e]``: sum_j values[j] Q^(j-s) mod 2^64, mixed.

    Prefix sums H[i] = sum_{j<i} values[j] Q^j give each token's polynomial as
    (H[e] - H[s]) * Q^-s, since Q is odd and so invertible mod 2^64.
    """
    L = len(values)
    pw, inv = _pows(L + 1)
    with np.errstate(over="ignore"):
        H = np.empty(L + 1, dtype=_U64)
        H[0] = 0
        np.multiply(values, pw[:L], out=H[1:])
        np.cumsum(H[1:], out=H[1:])
        raw = (H[ends] - H[starts]) * inv[starts]
    return _splitmix(raw)


def _hash_strings(tokens: Iterable[str], lowercase: bool = True) -> np.ndarray:
    """Token hashes of plain strings, each taken as one token (e.g. abbreviations)."""
    tokens = list(tokens)
    if not tokens:
        return np.zeros(0, dtype=_U64)
    text = "".join(tokens)
    cp = np.minimum(np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32), 0xFFFF)
    lens = np.array([len(t) for t in tokens], dtype=np.int64)
    ends = np.cumsum(lens)
    return _token_hash(_tables(lowercase)["value"][cp], ends - lens, ends)


@lru_cache(maxsize=2)
def _abbrev_hashes(lowercase: bool = True) -> np.ndarray:
    return np.sort(_hash_strings(ABBREVIATIONS + [a.title() for a in ABBREVIATIONS] if not lowercase
                                 else ABBREVIATIONS, lowercase))


# --------------------------------------------------------------------------- tokens


@dataclass
class Tokens:
    """The tokens of one text (or of many texts concatenated).

    ``start``/``end`` are character offsets; ``hash`` the token hashes; ``seg`` a
    segment number that changes at every sentence boundary, masked span and
    document boundary (n-grams stay inside one segment); ``ok`` is false for a
    token that overlaps or touches a masked span (never part of an n-gram).
    """

    start: np.ndarray
    end: np.ndarray
    hash: np.ndarray
    seg: np.ndarray
    ok: np.ndarray

    def __len__(self) -> int:
        return len(self.start)


@dataclass(frozen=True)
class Tokenizer:
    """Word tokeniser with rule-based sentence boundaries (see the module docstring).

    ``lowercase`` folds case before hashing (the default: a search engine would).
    """

    lowercase: bool = True

    def config(self) -> dict[str, Any]:
        return {"name": TOKENIZER_NAME, "lowercase": self.lowercase, "joiners": JOINERS,
                "sentence_rules": "newline, or [.!?] + capitalised token unless abbreviation/initial",
                "abbreviations": ABBREVIATIONS}

    def tokenize(self, text: str, blocked: Sequence[tuple[int, int]] = (),
                 doc_starts: np.ndarray | None = None) -> Tokens:
        """Tokens of ``text``. ``blocked`` are ``(start, end)`` character ranges
        (replaced spans, placeholders; ``start == end`` for a deletion): tokens
        that overlap or touch them are marked not ok and split segments.
        ``doc_starts`` (character offsets) start a new segment, for many
        documents joined into one text."""
        tab = _tables(self.lowercase)
        cp = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        L = len(cp)
        empty = Tokens(*(np.zeros(0, dtype=np.int64) for _ in range(2)), np.zeros(0, dtype=_U64),
                       np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))
        if L == 0:
            return empty
        astral = bool(cp.max() > 0xFFFF)
        cpc = np.minimum(cp, 0xFFFF) if astral else cp
        cls = tab["cls"][cpc]
        word = (cls & _WORD).view(bool)
        inword = word.copy()
        if L > 2:
            inword[1:-1] |= ((cls[1:-1] & _JOIN) != 0) & word[:-2] & word[2:]
        # tokens are maximal runs of in-word characters
        edge = np.flatnonzero(inword[1:] != inword[:-1]) + 1
        if inword[0]:
            edge = np.concatenate(([0], edge))
        if inword[-1]:
            edge = np.concatenate((edge, [L]))
        starts, ends = edge[0::2], edge[1::2]
        nt = len(starts)
        if nt == 0:
            return empty
        values = tab["value"][cpc]
        if astral:  # keep code points beyond the BMP distinct
            big = cp > 0xFFFF
            values[big] = _splitmix(cp[big].astype(_U64) + _U64(0x9E3779B97F4A7C15))
        hashes = _token_hash(values, starts, ends)
        # sentence boundaries, found from the (few) newlines and full stops outside tokens
        boundary = np.zeros(nt + 1, dtype=bool)
        boundary[np.searchsorted(starts, np.flatnonzero(cls & _NL))] = True
        stops = np.flatnonzero(((cls & _TERM) != 0) & ~inword)
        t = np.searchsorted(starts, stops)
        t = np.unique(t[(t > 0) & (t < nt)])
        if len(t):
            prev = t - 1
            first_char = cpc[starts[prev]]
            # a single letter before the stop is an initial ("J. Smith"); a single digit a list number
            single_letter = (ends[prev] - starts[prev] == 1) & ~((first_char >= ord("0")) & (first_char <= ord("9")))
            abbr = _abbrev_hashes(self.lowercase)
            pos = np.minimum(np.searchsorted(abbr, hashes[prev]), len(abbr) - 1)
            known = abbr[pos] == hashes[prev]
            boundary[t[tab["upper"][cpc[starts[t]]] & ~known & ~single_letter]] = True
        boundary = boundary[:nt]
        prev_end = ends[:-1]
        next_start = starts[1:]
        ok = np.ones(nt, dtype=bool)
        if doc_starts is not None and len(doc_starts):
            idx = np.searchsorted(starts, np.asarray(doc_starts), side="left")
            boundary[idx[idx < nt]] = True
        if len(blocked):
            b = np.asarray(blocked, dtype=np.int64).reshape(-1, 2)
            bs, be = b[:, 0], b[:, 1]
            # a token is bad if it overlaps or touches a blocked range: start <= be and end >= bs
            order = np.argsort(bs, kind="stable")
            bs, be = bs[order], be[order]
            run_max_end = np.maximum.accumulate(be)
            # ranges starting at or before the token's end; does the furthest-reaching one reach its start?
            j = np.searchsorted(bs, ends, side="right") - 1
            bad = (j >= 0) & (run_max_end[np.maximum(j, 0)] >= starts)
            ok &= ~bad
            # any blocked range starting in the gap before token t splits the segment
            cut = np.zeros(L + 2, dtype=np.int64)
            np.add.at(cut, np.minimum(bs, L), 1)
            cut_cum = np.concatenate(([0], np.cumsum(cut)))
            boundary[1:] |= cut_cum[next_start + 1] - cut_cum[prev_end] > 0
            boundary |= bad
        seg = np.cumsum(boundary)
        return Tokens(starts.astype(np.int64), ends.astype(np.int64), hashes, seg, ok)


# --------------------------------------------------------------------------- n-grams


@dataclass
class Ngrams:
    """All n-grams (n = 1..max_n) of a token sequence that stay inside one segment
    and contain only ok tokens: hash, length n, first token index."""

    hash: np.ndarray
    n: np.ndarray
    first: np.ndarray

    def __len__(self) -> int:
        return len(self.hash)


def iter_ngram_hashes(tokens: Tokens, max_n: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """For n = 1..max_n: ``(n, valid, hash)``: ``valid[i]`` says whether the
    n-gram starting at token i is valid, ``hash`` holds the valid ones' hashes.

    The hash of tokens t_1..t_n is t_1 M^(n-1) + ... + t_n + n C (mod 2^64):
    token hashes are uniform 64-bit values, so two different n-grams collide
    with probability about 2^-64, and the length term keeps n-grams of
    different lengths apart.
    """
    T = len(tokens)
    th = tokens.hash
    seg = tokens.seg
    bad_cum = None if tokens.ok.all() else np.concatenate(([0], np.cumsum(~tokens.ok)))
    cur = th
    for n in range(1, max_n + 1):
        m = T - n + 1
        if m <= 0:
            break
        with np.errstate(over="ignore"):
            if n > 1:
                cur = cur[:m] * _TOKEN_MULT + th[n - 1 :]
            valid = seg[n - 1 :] == seg[:m]
            if bad_cum is not None:
                valid &= bad_cum[n:] == bad_cum[:m]
            h = cur[valid]
            h += _LEN_MIX * _U64(n)
            yield n, valid, h


def ngram_hashes(tokens: Tokens, max_n: int) -> Ngrams:
    """Every valid n-gram of ``tokens`` (see :func:`iter_ngram_hashes`)."""
    hs, ns, fs = [], [], []
    for n, valid, h in iter_ngram_hashes(tokens, max_n):
        idx = np.flatnonzero(valid)
        hs.append(h)
        ns.append(np.full(len(idx), n, dtype=np.int8))
        fs.append(idx)
    if not hs:
        return Ngrams(np.zeros(0, dtype=_U64), np.zeros(0, dtype=np.int8), np.zeros(0, dtype=np.int64))
    return Ngrams(np.concatenate(hs), np.concatenate(ns), np.concatenate(fs))


# --------------------------------------------------------------------------- index


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


@dataclass
class NgramIndex:
    """An inverted index of word n-grams over a document collection (see the module docstring).

    Build with :meth:`build` (or :meth:`from_corpora` for audit corpora), persist
    with :meth:`save`/:meth:`load`. Document numbers follow the order of the
    documents given to :meth:`build`.
    """

    keys: np.ndarray
    offsets: np.ndarray
    posting_docs: np.ndarray
    docs: DocInfo
    max_n: int = 7
    tokenizer: Tokenizer = field(default_factory=Tokenizer)
    hash_mask: int = _MASK64
    config: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ build

    @classmethod
    def build(
        cls,
        texts: Iterable[str],
        *,
        ids: Sequence[str] | None = None,
        subjects: Sequence[str | None] | None = None,
        sources: Sequence[str] | None = None,
        max_n: int = 7,
        lowercase: bool = True,
        chunk_chars: int = 2_000_000,
        min_hash_bits: int = 52,
        workers: int = 1,
        fingerprint: str | None = None,
        progress: bool = False,
    ) -> NgramIndex:
        """Index ``texts`` (document number = position). ``chunk_chars`` bounds
        the text tokenised at once. ``min_hash_bits`` (<= 64) trades build speed
        for fewer hash collisions in very large collections (see the module docstring).
        ``workers`` > 1 threads share chunks and buckets (numpy releases the GIL
        in its loops); it helps only on otherwise idle cores, so the default is 1."""
        if not 1 <= max_n <= 32:
            raise AnonauditError(f"max_n must be between 1 and 32, got {max_n}")
        t0 = time.perf_counter()
        texts = list(texts)
        D = len(texts)
        if D >= 2**32 - 1:
            raise AnonauditError("an index holds at most 2^32 - 2 documents")
        ids = [str(i) for i in range(D)] if ids is None else [str(i) for i in ids]
        subjects = [None] * D if subjects is None else list(subjects)
        sources = ["collection"] * D if sources is None else list(sources)
        if not (len(ids) == len(subjects) == len(sources) == D):
            raise ValueError("ids, subjects and sources must have one entry per text")
        tok = Tokenizer(lowercase=lowercase)
        doc_bits = max(1, int(D - 1).bit_length())
        # Pack (hash, doc) into one uint64: the doc number replaces the hash's
        # lowest doc_bits bits, shifted up by t_bits whose top bits go to a bucket.
        # Effective hash bits = 64 - doc_bits + t_bits >= min_hash_bits.
        t_bits = min(8, max(0, min_hash_bits - 64 + doc_bits))
        lost = doc_bits - t_bits
        hash_mask = _MASK64 ^ ((1 << lost) - 1) if lost > 0 else _MASK64
        n_buckets = 1 << t_bits
        docmask = _U64((1 << doc_bits) - 1)

        chunks = _chunks(texts, chunk_chars)
        bar = _progress(progress, total=len(chunks), desc="indexing")
        clock = _Clock()
        # numpy releases the GIL in the heavy loops, so threads share the work of
        # independent chunks (and later of independent buckets) without copies
        pool = ThreadPoolExecutor(workers) if workers > 1 and len(chunks) > 1 else None
        mapper = pool.map if pool is not None else map
        buckets: list[list[np.ndarray]] = [[] for _ in range(n_buckets)]
        n_tokens = 0

        def keys_of(span: tuple[int, int]) -> tuple[int, list[np.ndarray]]:
            return _chunk_keys(texts, span, tok, max_n, t_bits, docmask, n_buckets)

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
            sorted_buckets = list(mapper(_sort_unique, buckets))
        finally:
            if pool is not None:
                pool.shutdown()
        del buckets
        counts = np.array([len(x) for x in sorted_buckets], dtype=np.int64)
        key = np.concatenate(sorted_buckets) if sorted_buckets else np.zeros(0, dtype=_U64)
        del sorted_buckets
        clock.lap("sort")
        # a posting list starts where the hash part changes, or at a bucket boundary
        bounds = np.concatenate(([0], np.cumsum(counts)))
        new = np.empty(len(key), dtype=bool)
        if len(key):
            new[0] = True
            np.greater(key[1:] ^ key[:-1], docmask, out=new[1:])
            new[bounds[:-1][counts > 0]] = True
        starts = np.flatnonzero(new)
        del new
        with np.errstate(over="ignore"):
            keys = key[starts] & ~docmask
            if t_bits:
                keys >>= _U64(t_bits)
                per_bucket = np.diff(np.searchsorted(starts, bounds))
                keys |= np.repeat(np.arange(n_buckets, dtype=_U64), per_bucket) << _U64(64 - t_bits)
        doc = (key & docmask).astype(np.uint32)
        del key
        off_dtype = np.uint32 if len(doc) < 2**32 else np.uint64
        offsets = np.empty(len(keys) + 1, dtype=off_dtype)
        offsets[:-1] = starts
        offsets[-1] = len(doc)
        clock.lap("csr")
        fp = fingerprint or collection_fingerprint([("collection", zip(ids, texts))])
        config = {
            "format": FORMAT,
            "tokenizer": tok.config(),
            "max_n": max_n,
            "hash": {"tokens": "polynomial mod 2^64 over code points + splitmix64",
                     "ngrams": "polynomial mod 2^64 over token hashes + n * constant",
                     "hash_bits": 64 - max(lost, 0), "hash_mask": hash_mask},
            "collection_fingerprint": fp,
            "n_docs": D,
            "n_tokens": int(n_tokens),
            "n_ngrams": int(len(keys)),
            "n_postings": int(len(doc)),
            "build_seconds": round(time.perf_counter() - t0, 3),
            "build_phases": clock.rounded(),
        }
        return cls(keys=keys, offsets=offsets, posting_docs=doc, docs=DocInfo(ids, subjects, sources),
                   max_n=max_n, tokenizer=tok, hash_mask=hash_mask, config=config)

    @classmethod
    def from_corpora(cls, corpora: Sequence[tuple[str, Iterable[Any]]], *, max_n: int = 7,
                     lowercase: bool = True, progress: bool = False, **kw: Any) -> NgramIndex:
        """Index several corpora of :class:`~audit.core.data.Document` as one collection,
        e.g. ``[("originals", originals), ("extra", background)]``: document
        numbers follow that order and ``docs.sources`` names each one's corpus."""
        parts = [(src, list(docs)) for src, docs in corpora]
        docs = [d for _, ds in parts for d in ds]
        fp = kw.pop("fingerprint", None) or collection_fingerprint(
            [(src, ((d.id, d.text) for d in ds)) for src, ds in parts])
        return cls.build([d.text for d in docs], ids=[d.id for d in docs], subjects=[d.subject for d in docs],
                         sources=[src for src, ds in parts for _ in ds], max_n=max_n, lowercase=lowercase,
                         fingerprint=fp, progress=progress, **kw)

    # ------------------------------------------------------------------ persistence

    def save(self, folder: str | os.PathLike) -> Path:
        """Write the index to ``folder`` (created): three .npy arrays, docs.json, config.json."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").unlink(missing_ok=True)  # an interrupted save leaves no valid index
        for name, arr in (("keys", self.keys), ("offsets", self.offsets), ("postings", self.posting_docs)):
            with atomic_open(folder / f"{name}.npy", "wb") as fh:
                np.save(fh, np.asarray(arr))
        atomic_write_json(folder / "docs.json", asdict(self.docs), allow_nan=True)
        atomic_write_json(folder / "config.json", self.config, allow_nan=True)  # last: marks a complete index
        return folder

    @classmethod
    def load(cls, folder: str | os.PathLike, *, mmap: bool = True) -> NgramIndex:
        """Open a saved index; arrays are memory-mapped unless ``mmap=False``."""
        folder = Path(folder)
        cfg_path = folder / "config.json"
        if not cfg_path.is_file():
            raise AnonauditError(f"{folder}: not an n-gram index folder (no config.json)")
        try:
            config = json.loads(cfg_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise AnonauditError(f"{cfg_path}: unreadable index config ({exc})") from None
        if config.get("format") != FORMAT:
            raise AnonauditError(f"{folder}: unsupported index format {config.get('format')!r} (expected {FORMAT})")
        mode = "r" if mmap else None
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode=mode) for name in ("keys", "offsets", "postings")}
        docs = DocInfo(**json.loads((folder / "docs.json").read_text(encoding="utf-8")))
        keys, offsets, posts = arrays["keys"], arrays["offsets"], arrays["postings"]
        if (len(offsets) != len(keys) + 1 or int(offsets[-1]) != len(posts) or len(docs.ids) != config.get("n_docs")
                or len(keys) != config.get("n_ngrams")):
            raise AnonauditError(f"{folder}: the index files do not match each other (interrupted save?); rebuild it")
        tcfg = config["tokenizer"]
        if tcfg.get("name") != TOKENIZER_NAME:
            raise AnonauditError(f"{folder}: built with tokeniser {tcfg.get('name')!r}, "
                                 f"this version uses {TOKENIZER_NAME}")
        return cls(keys=arrays["keys"], offsets=arrays["offsets"], posting_docs=arrays["postings"], docs=docs,
                   max_n=int(config["max_n"]), tokenizer=Tokenizer(lowercase=bool(tcfg["lowercase"])),
                   hash_mask=int(config["hash"]["hash_mask"]), config=config)

    # ------------------------------------------------------------------ queries

    @property
    def n_docs(self) -> int:
        return len(self.docs.ids)

    def lookup(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Document frequency and posting-list start of each n-gram hash (df 0 if absent)."""
        h = np.asarray(hashes, dtype=_U64) & _U64(self.hash_mask)
        keys = self.keys
        order = np.argsort(h)  # sorted needles: cache- and page-friendly on a memory-mapped index
        pos = np.empty(len(h), dtype=np.int64)
        pos[order] = np.searchsorted(keys, h[order])
        inside = pos < len(keys)
        found = np.zeros(len(h), dtype=bool)
        found[inside] = keys[pos[inside]] == h[inside]
        df = np.zeros(len(h), dtype=np.int64)
        start = np.zeros(len(h), dtype=np.int64)
        p = pos[found]
        start[found] = self.offsets[p]
        df[found] = self.offsets[p + 1].astype(np.int64) - start[found]
        return df, start

    def phrase_hash(self, phrase: str) -> int | None:
        """Hash of ``phrase`` as one n-gram (None if it is empty, longer than
        max_n tokens, or crosses a sentence boundary)."""
        toks = self.tokenizer.tokenize(phrase)
        n = len(toks)
        if n == 0 or n > self.max_n or toks.seg[0] != toks.seg[-1]:
            return None
        ng = ngram_hashes(toks, n)
        sel = (ng.n == n) & (ng.first == 0)
        return int(ng.hash[sel][0]) if sel.any() else None

    def document_frequency(self, phrase: str) -> int:
        """In how many documents of the collection ``phrase`` occurs (as whole tokens)."""
        h = self.phrase_hash(phrase)
        if h is None:
            return 0
        return int(self.lookup(np.array([h], dtype=_U64))[0][0])

    def postings(self, phrase: str) -> np.ndarray:
        """Sorted document numbers where ``phrase`` occurs (empty if none)."""
        h = self.phrase_hash(phrase)
        if h is None:
            return np.zeros(0, dtype=np.uint32)
        df, start = self.lookup(np.array([h], dtype=_U64))
        return np.asarray(self.postings_at(int(start[0]), int(df[0])))

    def postings_at(self, start: int, df: int) -> np.ndarray:
        return np.asarray(self.posting_docs[start : start + df])

    def ngrams(self, text: str, blocked: Sequence[tuple[int, int]] = ()) -> TextNgrams:
        """The visible n-grams of ``text`` with character offsets and document frequencies."""
        toks = self.tokenizer.tokenize(text, blocked=blocked)
        ng = ngram_hashes(toks, self.max_n)
        df, start = self.lookup(ng.hash)
        last = ng.first + ng.n.astype(np.int64) - 1
        return TextNgrams(text=text, hash=ng.hash, n=ng.n, first=ng.first, last=last,
                          char_start=toks.start[ng.first] if len(ng) else np.zeros(0, dtype=np.int64),
                          char_end=toks.end[last] if len(ng) else np.zeros(0, dtype=np.int64),
                          df=df, post_start=start)

    def rare_ngrams(self, text: str, k: int = 2, *, blocked: Sequence[tuple[int, int]] = (),
                    minimal: bool = True) -> list[RareNgram]:
        """N-grams of ``text`` found in fewer than ``k`` documents (but at least one).

        With ``minimal`` (the paper's step 2), shorter n-grams win and any rare
        n-gram overlapping an already kept one is dropped, which leaves the
        smallest set of non-overlapping phrases a rewriter must change.
        """
        tn = self.ngrams(text, blocked)
        sel = np.flatnonzero((tn.df >= 1) & (tn.df < k))
        if minimal:
            sel = minimal_set(tn, sel)
        return [tn.rare(self, i) for i in sel]


@dataclass
class RareNgram:
    """One phrase of a text with its location and where it occurs in the collection."""

    text: str
    start: int
    end: int
    n: int
    df: int
    docs: list[int]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TextNgrams:
    """Visible n-grams of one text: parallel arrays, plus the text for excerpts."""

    text: str
    hash: np.ndarray
    n: np.ndarray
    first: np.ndarray
    last: np.ndarray
    char_start: np.ndarray
    char_end: np.ndarray
    df: np.ndarray
    post_start: np.ndarray

    def __len__(self) -> int:
        return len(self.hash)

    def gather_postings(self, index: NgramIndex, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posting lists of the n-grams ``sel``, concatenated: ``(docs, owner)``
        where ``owner[j]`` is the position in ``sel`` that ``docs[j]`` belongs to."""
        sel = np.asarray(sel, dtype=np.int64)
        df = self.df[sel]
        owner = np.repeat(np.arange(len(sel)), df)
        base = np.repeat(self.post_start[sel] - np.concatenate(([0], np.cumsum(df)[:-1])), df)
        pos = base + np.arange(int(df.sum()))
        return np.asarray(index.posting_docs[pos]).astype(np.int64), owner

    def rare(self, index: NgramIndex, i: int) -> RareNgram:
        s, e = int(self.char_start[i]), int(self.char_end[i])
        docs = index.postings_at(int(self.post_start[i]), int(self.df[i]))
        return RareNgram(text=self.text[s:e], start=s, end=e, n=int(self.n[i]), df=int(self.df[i]),
                         docs=[int(d) for d in docs])


def minimal_set(tn: TextNgrams, candidates: np.ndarray) -> np.ndarray:
    """Greedy minimal non-overlapping subset: shortest first, then leftmost; an
    n-gram sharing a token with a kept one is dropped. Returned in text order.

    Vectorised per length n: candidates overlapping a kept shorter n-gram are
    dropped at once (prefix sums); only the survivors of one length, which may
    overlap each other, are scanned left to right.
    """
    candidates = np.asarray(candidates, dtype=np.int64)
    if len(candidates) == 0:
        return candidates
    size = int(tn.last[candidates].max()) + 2
    taken = np.zeros(size, dtype=np.int64)
    kept: list[np.ndarray] = []
    ns = tn.n[candidates]
    for n in np.unique(ns):
        c = candidates[ns == n]
        c = c[np.argsort(tn.first[c], kind="stable")]
        cum = np.concatenate(([0], np.cumsum(taken)))
        c = c[cum[tn.last[c] + 1] - cum[tn.first[c]] == 0]
        if len(c) == 0:
            continue
        firsts, lasts = tn.first[c], tn.last[c]
        if len(c) > 1 and (firsts[1:] <= lasts[:-1]).any():  # same-length overlaps: leftmost wins
            sel, end = [], -1
            for j, (a, b) in enumerate(zip(firsts.tolist(), lasts.tolist())):
                if a > end:
                    sel.append(j)
                    end = b
            c, firsts, lasts = c[sel], firsts[sel], lasts[sel]
        mark = np.zeros(size + 1, dtype=np.int64)
        np.add.at(mark, firsts, 1)
        np.add.at(mark, lasts + 1, -1)
        taken |= np.cumsum(mark)[:size] > 0
        kept.append(c)
    out = np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)
    return out[np.lexsort((tn.n[out], tn.first[out]))]


# --------------------------------------------------------------------------- helpers


def _chunk_keys(texts: Sequence[str], span: tuple[int, int], tok: Tokenizer, max_n: int, t_bits: int,
                docmask: np.uint64, n_buckets: int) -> tuple[int, list[np.ndarray]]:
    """Packed ``(hash, doc)`` keys of the n-grams of ``texts[lo:hi]``, split by bucket."""
    lo, hi = span
    joined = "\n".join(texts[lo:hi])
    lens = np.fromiter((len(t) + 1 for t in texts[lo:hi]), dtype=np.int64, count=hi - lo)
    doc_starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    toks = tok.tokenize(joined, doc_starts=doc_starts)
    per_doc = np.diff(np.searchsorted(toks.start, doc_starts), append=len(toks))
    doc_of_tok = np.repeat(np.arange(lo, hi, dtype=_U64), per_doc)
    key = np.empty(len(toks) * max_n, dtype=_U64)
    bucket = np.empty(len(key) if t_bits else 0, dtype=np.uint8)
    filled = 0
    for _n, valid, h in iter_ngram_hashes(toks, max_n):
        end = filled + len(h)
        with np.errstate(over="ignore"):
            if t_bits:
                np.right_shift(h, _U64(64 - t_bits), out=bucket[filled:end], casting="unsafe")
                h <<= _U64(t_bits)
            h &= ~docmask
            h |= doc_of_tok[: len(valid)][valid]
        key[filled:end] = h
        filled = end
    key, bucket = key[:filled], bucket[:filled]
    if not t_bits:
        return len(toks), [key]
    # route to buckets by the hash's top bits (radix sort of 8-bit values, chunk-sized: in cache)
    key = key[np.argsort(bucket, kind="stable")]
    return len(toks), np.split(key, np.cumsum(np.bincount(bucket, minlength=n_buckets))[:-1])


def _sort_unique(pieces: list[np.ndarray]) -> np.ndarray:
    """One bucket's keys, sorted, duplicate (hash, doc) pairs dropped."""
    merged = np.concatenate(pieces) if pieces else np.zeros(0, dtype=_U64)
    merged.sort()
    if len(merged) > 1:
        keep = np.empty(len(merged), dtype=bool)
        keep[0] = True
        np.not_equal(merged[1:], merged[:-1], out=keep[1:])
        merged = merged[keep]
    return merged


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
    out, lo, size = [], 0, 0
    for i, t in enumerate(texts):
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

