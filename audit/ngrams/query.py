"""The n-gram index (:class:`NgramIndex`) and its queries: document frequencies and posting
lists of phrases, the visible n-grams of a text, and its rare ones (:func:`minimal_set`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from audit.ngrams.build import DocInfo, build_fields, collection_fingerprint
from audit.ngrams.hashing import U64, ngram_hashes, top_bits_mask
from audit.ngrams.kernels import kernels
from audit.ngrams.layout import MULTI
from audit.ngrams.storage import ARRAYS, load_fields, save_index
from audit.ngrams.tokenizer import Tokenizer
from audit.ngrams import windows
from audit.ngrams.windows import iter_windows, window_ngrams


@dataclass
class NgramIndex:
    """An inverted index of word n-grams over a document collection (see the package docstring).

    Build with :meth:`build` (or :meth:`from_corpora` for audit corpora), persist
    with :meth:`save`/:meth:`load`. Document numbers follow the order of the
    documents given to :meth:`build`.
    """

    directory: np.ndarray
    keys: np.ndarray
    first: np.ndarray
    multi_offsets: np.ndarray
    multi_docs: np.ndarray
    docs: DocInfo
    max_n: int = 7
    tokenizer: Tokenizer = field(default_factory=Tokenizer)
    hash_bits: int = 52
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
        chunk_chars: int = 500_000,
        min_hash_bits: int = 52,
        workers: int = 1,
        fingerprint: str | None = None,
        progress: bool = False,
        executor: Any = None,
    ) -> NgramIndex:
        """Index ``texts`` (document number = position). ``chunk_chars`` bounds
        the text tokenised at once (its tokens and n-gram keys are the build's largest
        temporary arrays: 500,000 characters keep them small beside the index). ``min_hash_bits`` (<= 64) trades build speed
        for fewer hash collisions in very large collections (see the package docstring).
        ``workers`` > 1 threads share chunks and buckets (numpy releases the GIL
        in its loops); it helps only on otherwise idle cores, so the default is 1.
        ``executor``: a distributed :class:`~audit.runtime.executor.Executor` extracts the chunks'
        n-grams on its workers (the same index, built from the same keys)."""
        return cls(**build_fields(texts, ids=ids, subjects=subjects, sources=sources, max_n=max_n,
                                  lowercase=lowercase, chunk_chars=chunk_chars, min_hash_bits=min_hash_bits,
                                  workers=workers, fingerprint=fingerprint, progress=progress, executor=executor))

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
        return save_index(self, folder)

    @classmethod
    def load(cls, folder: str | os.PathLike, *, mmap: bool = True) -> NgramIndex:
        """Open a saved index; arrays are memory-mapped unless ``mmap=False``."""
        return cls(**load_fields(folder, mmap=mmap))

    # ------------------------------------------------------------------ queries

    @property
    def n_docs(self) -> int:
        return len(self.docs.ids)

    @property
    def nbytes(self) -> int:
        """The size of the index's arrays (in memory, or on disk for a loaded one)."""
        return sum(np.asarray(getattr(self, name)).nbytes for name in ARRAYS)

    @property
    def hash_mask(self) -> int:
        """The hash bits the index keeps (a needle is compared on these)."""
        return top_bits_mask(self.hash_bits)

    def lookup(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Document frequency and posting reference of each n-gram hash (df 0 if absent): the
        reference is the document itself when df is 1, else the start of the posting list in
        ``multi_docs`` (:meth:`postings_at` reads either)."""
        return search(self.directory, self.keys, self.first, self.multi_offsets,
                      np.asarray(hashes, dtype=U64), self.hash_bits)

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
        return int(self.lookup(np.array([h], dtype=U64))[0][0])

    def postings(self, phrase: str) -> np.ndarray:
        """Sorted document numbers where ``phrase`` occurs (empty if none)."""
        h = self.phrase_hash(phrase)
        if h is None:
            return np.zeros(0, dtype=np.uint32)
        df, ref = self.lookup(np.array([h], dtype=U64))
        return np.asarray(self.postings_at(int(ref[0]), int(df[0])))

    def postings_at(self, ref: int, df: int) -> np.ndarray:
        """The sorted documents of the n-gram that :meth:`lookup` gave ``(df, ref)``."""
        if df <= 1:
            return np.array([ref] if df else [], dtype=np.uint32)
        return np.asarray(self.multi_docs[ref : ref + df])

    def gather(self, refs: np.ndarray, dfs: np.ndarray) -> np.ndarray:
        """The posting lists of n-grams ``(df, ref)``, concatenated in order (as ``int64``)."""
        refs, dfs = np.asarray(refs, dtype=np.int64), np.asarray(dfs, dtype=np.int64)
        starts = np.cumsum(dfs) - dfs
        # each list's positions in multi_docs; a single document's "position" is the document
        pos = np.repeat(refs - starts, dfs)
        pos += np.arange(len(pos))
        if not (dfs > 1).any():
            return pos
        single = dfs == 1
        at = starts[single]
        pos[at] = 0  # read a placeholder for the single documents, then put them in place
        out = np.asarray(self.multi_docs[pos]).astype(np.int64)
        out[at] = refs[single]
        return out

    def ngrams(self, text: str, blocked: Sequence[tuple[int, int]] = ()) -> TextNgrams:
        """The visible n-grams of ``text`` with character offsets and document frequencies."""
        toks = self.tokenizer.tokenize(text, blocked=blocked)
        ng = ngram_hashes(toks, self.max_n)
        df, ref = self.lookup(ng.hash)
        last = ng.first + ng.n.astype(np.int64) - 1
        return TextNgrams(text=text, hash=ng.hash, n=ng.n, first=ng.first, last=last,
                          char_start=toks.start[ng.first] if len(ng) else np.zeros(0, dtype=np.int64),
                          char_end=toks.end[last] if len(ng) else np.zeros(0, dtype=np.int64),
                          df=df, post_ref=ref)

    def iter_ngrams(self, text: str, blocked: Sequence[tuple[int, int]] = (), *,
                    window_chars: int | None = None) -> Iterator[TextNgrams]:
        """The visible n-grams of ``text`` as :meth:`ngrams` gives them, one window of about
        ``window_chars`` characters at a time (:mod:`~audit.ngrams.windows`), so
        a huge text never has all its n-grams in memory. Each n-gram appears in exactly one
        window; character offsets are the text's, token indices (``first``, ``last``) the
        window's. A text no longer than ``window_chars`` (default
        :data:`~audit.ngrams.windows.WINDOW_CHARS`) is one window, equal to
        :meth:`ngrams`."""
        window_chars = window_chars or windows.WINDOW_CHARS
        if len(text) <= window_chars:
            yield self.ngrams(text, blocked)
            return
        for w in iter_windows(self.tokenizer, text, blocked, self.max_n, window_chars):
            h, n, first = window_ngrams(w, self.max_n)
            df, ref = self.lookup(h)
            last = first + n.astype(np.int64) - 1
            yield TextNgrams(text=text, hash=h, n=n, first=first, last=last, char_start=w.tokens.start[first],
                             char_end=w.tokens.end[last], df=df, post_ref=ref)

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
    post_ref: np.ndarray  # see NgramIndex.lookup

    def __len__(self) -> int:
        return len(self.hash)

    def gather_postings(self, index: NgramIndex, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posting lists of the n-grams ``sel``, concatenated: ``(docs, owner)``
        where ``owner[j]`` is the position in ``sel`` that ``docs[j]`` belongs to."""
        sel = np.asarray(sel, dtype=np.int64)
        df = self.df[sel]
        return index.gather(self.post_ref[sel], df), np.repeat(np.arange(len(sel)), df)

    def rare(self, index: NgramIndex, i: int) -> RareNgram:
        s, e = int(self.char_start[i]), int(self.char_end[i])
        docs = index.postings_at(int(self.post_ref[i]), int(self.df[i]))
        return RareNgram(text=self.text[s:e], start=s, end=e, n=int(self.n[i]), df=int(self.df[i]),
                         docs=[int(d) for d in docs])


def search(directory: np.ndarray, keys: np.ndarray, first: np.ndarray, multi_offsets: np.ndarray,
           hashes: np.ndarray, hash_bits: int, dir_base: int = 0, multi_base: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(df, ref)`` of each hash (see :meth:`NgramIndex.lookup`) in the arrays of an index, or of
    a shard whose directory starts at entry ``dir_base`` and whose posting lists start at
    ``multi_base`` in the whole index's.

    The directory entry (the hash's top ``hash_bits - 32`` bits) gives the range of keys to
    search; the 32 bits below are searched in it (a range holds a few dozen keys at most), one
    hash after the other in a compiled loop (the kernel ``find``): as numpy expressions over all
    the hashes at once, each halving step cost a dozen passes, which a shard's few hundred hashes
    a document did not amortise."""
    df = np.zeros(len(hashes), dtype=np.int64)
    ref = np.zeros(len(hashes), dtype=np.int64)
    if not len(hashes) or not len(keys):
        return df, ref
    kernels().find(np.asarray(directory), np.asarray(keys), np.asarray(first), np.asarray(multi_offsets),
                   np.ascontiguousarray(hashes, dtype=U64), U64(64 - (hash_bits - 32)), U64(64 - hash_bits),
                   int(dir_base), U64(MULTI), int(multi_base), df, ref)
    return df, ref


def minimal_set(tn: TextNgrams, candidates: np.ndarray) -> np.ndarray:
    """Greedy minimal non-overlapping subset: shortest first, then leftmost; an
    n-gram sharing a token with a kept one is dropped. Returned in text order.

    The candidates are taken in that order in a compiled loop (the kernel ``keep_free``), each
    kept when none of its tokens is taken yet: a few operations each, where numpy expressions
    per length cost a dozen passes and calls each, for a document's few dozen candidates.
    """
    candidates = np.asarray(candidates, dtype=np.int64)
    if len(candidates) == 0:
        return candidates
    order = candidates[np.lexsort((tn.first[candidates], tn.n[candidates]))]  # by length, then start
    taken = np.zeros(int(tn.last[candidates].max()) + 1, dtype=np.bool_)
    out = np.empty(len(order), dtype=np.int64)
    kept = out[:kernels().keep_free(order, np.asarray(tn.first, dtype=np.int64),
                                    np.asarray(tn.last, dtype=np.int64), taken, out)]
    return kept[np.lexsort((tn.n[kept], tn.first[kept]))]
