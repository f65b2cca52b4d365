"""Hashing of tokens and n-grams (the "Hashing" section of the package docstring).

A token's hash is the polynomial of its code points' values mod 2^64 (``CHAR_MULT``), finalised
with splitmix64 (computed as the text is scanned, :mod:`~audit.ngrams.kernels`);
an n-gram's hash is the polynomial of its token hashes (``TOKEN_MULT``) plus n times
``LEN_MIX`` (:func:`iter_ngram_hashes`, vectorised with numpy, for a text's n-grams with their
positions; the build's kernel computes the same hashes).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from audit.ngrams.tokenizer import Tokens

U64 = np.uint64
MASK64 = (1 << 64) - 1
CHAR_MULT = 0x100000001B3  # FNV prime
TOKEN_MULT = 0x9E3779B97F4A7C15 | 1
LEN_MIX = 0xD6E8FEB86659FD93
#: splitmix64's multipliers
MIX1, MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def top_bits_mask(bits: int) -> int:
    """The 64-bit mask that keeps a hash's top ``bits`` bits."""
    return MASK64 ^ ((1 << (64 - bits)) - 1)


def splitmix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, vectorised (wrap-around arithmetic on uint64)."""
    x = x.astype(U64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> U64(30)
        x *= U64(MIX1)
        x ^= x >> U64(27)
        x *= U64(MIX2)
        x ^= x >> U64(31)
    return x


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
                cur = cur[:m] * U64(TOKEN_MULT) + th[n - 1 :]
            valid = seg[n - 1 :] == seg[:m]
            if bad_cum is not None:
                valid &= bad_cum[n:] == bad_cum[:m]
            h = cur[valid]
            h += U64(LEN_MIX) * U64(n)
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
        return Ngrams(np.zeros(0, dtype=U64), np.zeros(0, dtype=np.int8), np.zeros(0, dtype=np.int64))
    return Ngrams(np.concatenate(hs), np.concatenate(ns), np.concatenate(fs))
