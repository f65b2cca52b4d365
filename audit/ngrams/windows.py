"""Huge texts in windows, so memory stays bounded whatever one document's length.

Every n-gram of a text starts at some token; cutting the text at whitespace into windows of
about ``window_chars`` characters and taking, from each window, the n-grams that *start* in it
gives every n-gram exactly once. A window is tokenised a little past its end (``max_n - 1``
more tokens, the lookahead) so the n-grams that start near its end are complete. Tokens never
contain whitespace, token hashes depend only on the token's characters, and whether a token
starts a sentence depends only on it, the token before it and the characters between them, so
a window's n-grams, hashes and sentence segments are those of the whole text.

Memory: one window's tokens and n-grams (about ``window_chars`` / 6 tokens, times ``max_n``
n-grams) instead of the whole text's; used for texts longer than :data:`WINDOW_CHARS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from audit.ngrams.hashing import ngram_hashes
from audit.ngrams.tokenizer import Tokenizer, Tokens

#: Texts longer than this many characters are read in windows of this size.
WINDOW_CHARS = 1_000_000
_SPACE = re.compile(r"\s")


@dataclass
class Window:
    """The tokens of one window (character offsets into the whole text): the first ``core``
    start inside the window, the rest are the lookahead."""

    tokens: Tokens
    core: int
    start: int
    end: int


def _cut(text: str, pos: int) -> int:
    """The first whitespace position at or after ``pos`` (or the text's end)."""
    if pos >= len(text):
        return len(text)
    m = _SPACE.search(text, pos)
    return m.start() if m else len(text)


def _blocked_array(blocked: Sequence[tuple[int, int]]) -> np.ndarray:
    b = np.asarray(list(blocked), dtype=np.int64).reshape(-1, 2)
    return b[np.argsort(b[:, 0], kind="stable")]


def iter_windows(tok: Tokenizer, text: str, blocked: Sequence[tuple[int, int]], max_n: int,
                 window_chars: int = WINDOW_CHARS) -> Iterator[Window]:
    """The windows of ``text`` in order (one window when the text is short)."""
    L = len(text)
    spans = _blocked_array(blocked)
    c0 = 0
    while c0 < L:
        c1 = _cut(text, c0 + window_chars)
        ctx = 256
        while True:
            b = L if c1 >= L else _cut(text, c1 + ctx)
            if len(spans):
                near = spans[: np.searchsorted(spans[:, 0], b, side="right")]
                near = near[near[:, 1] >= c0]
                local = np.clip(near - c0, 0, b - c0)
            else:
                local = spans
            toks = tok.tokenize(text[c0:b], blocked=local)
            core = int(np.searchsorted(toks.start, c1 - c0))
            if b >= L or len(toks) - core >= max_n:
                break
            ctx *= 4
        toks.start += c0
        toks.end += c0
        yield Window(toks, core, c0, c1)
        c0 = c1


def window_ngrams(window: Window, max_n: int):
    """The n-grams starting in the window's core: ``(hash, n, first)`` with ``first`` the index
    of their first token in ``window.tokens``."""
    ng = ngram_hashes(window.tokens, max_n)
    sel = ng.first < window.core
    return ng.hash[sel], ng.n[sel], ng.first[sel]
