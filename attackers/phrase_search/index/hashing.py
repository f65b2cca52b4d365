"""Hashing of tokens and n-grams, vectorised with numpy (the "Hashing" section of the package docstring).

A token's hash is the polynomial of its code points' values mod 2^64, finalised with
splitmix64 (:func:`token_hash`); an n-gram's hash is the polynomial of its token hashes
plus n times a constant (:func:`iter_ngram_hashes`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from attackers.phrase_search.index.tokenizer import Tokens

U64 = np.uint64
MASK64 = (1 << 64) - 1
_CHAR_MULT = U64(0x100000001B3)  # FNV prime: odd, so invertible mod 2^64
_TOKEN_MULT = U64(0x9E3779B97F4A7C15 | 1)
_LEN_MIX = U64(0xD6E8FEB86659FD93)


def top_bits_mask(bits: int) -> int:
    """The 64-bit mask that keeps a hash's top ``bits`` bits."""
    return MASK64 ^ ((1 << (64 - bits)) - 1)


def splitmix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, vectorised (wrap-around arithmetic on uint64)."""
    x = x.astype(U64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> U64(30)
        x *= U64(0xBF58476D1CE4E5B9)
        x ^= x >> U64(27)
        x *= U64(0x94D049BB133111EB)
        x ^= x >> U64(31)
    return x


def _pow_table(base: int, n: int) -> np.ndarray:
    """base^0 .. base^(n-1) mod 2^64."""
    out = np.empty(max(n, 1), dtype=U64)
    out[0] = 1
    if n > 1:
        out[1:] = U64(base)
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


def token_hash(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Hash of every token ``values[s:e]``: sum_j values[j] Q^(j-s) mod 2^64, mixed.

    Prefix sums H[i] = sum_{j<i} values[j] Q^j give each token's polynomial as
    (H[e] - H[s]) * Q^-s, since Q is odd and so invertible mod 2^64.
    """
    L = len(values)
    pw, inv = _pows(L + 1)
    with np.errstate(over="ignore"):
        H = np.empty(L + 1, dtype=U64)
        H[0] = 0
        np.multiply(values, pw[:L], out=H[1:])
        np.cumsum(H[1:], out=H[1:])
        raw = (H[ends] - H[starts]) * inv[starts]
    return splitmix(raw)


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
            h += _LEN_MIX * U64(n)
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
