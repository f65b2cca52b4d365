"""Lexical tools shared by attacks and utility metrics: word tokens and ROUGE-L.

One implementation of ROUGE-L serves both the claim linker's lexical baseline and
the ``rouge`` utility metric, so the two figures agree on the same texts. It matches
the ``rouge-score`` package (tested) and is much faster on long documents: the
longest common subsequence is computed bit-parallel, one big-integer update per
token of the candidate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_TOKEN = re.compile(r"\w+")


def word_tokens(text: str) -> list[str]:
    """Lower-cased word tokens (BM25)."""
    return _TOKEN.findall(text.lower())


class RougeTokenizer:
    """rouge-score's tokenisation (lower case, alphanumeric, Porter stems), memoised."""

    def __init__(self, stem: bool = True):
        from nltk.stem import porter

        self._porter = porter.PorterStemmer() if stem else None
        self._cache: dict[str, str] = {}

    def stem(self, word: str) -> str:
        out = self._cache.get(word)
        if out is None:
            out = self._cache[word] = self._porter.stem(word)
        return out

    def __call__(self, text: str) -> list[str]:
        from rouge_score import tokenize

        return tokenize.tokenize(text, self if self._porter is not None else None)


def bitmasks(tokens: Sequence[str]) -> dict[str, int]:
    masks: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    return masks


def lcs_length(a: Sequence[str], b: Sequence[str], masks_a: dict[str, int] | None = None) -> int:
    """Length of the longest common subsequence, bit-parallel over ``a`` (Hyyrö, 2004):
    one big-integer update per token of ``b`` instead of a |a|x|b| table."""
    n = len(a)
    if n == 0 or not b:
        return 0
    masks = masks_a if masks_a is not None else bitmasks(a)
    full = (1 << n) - 1
    v = full
    for tok in b:
        m = masks.get(tok)
        if m:
            u = v & m
            v = ((v + u) | (v - u)) & full
    return n - v.bit_count()


def rouge_l(reference: Sequence[str], candidate: Sequence[str], masks_ref: dict[str, int] | None = None) -> float:
    """ROUGE-L F-measure of two token lists (as rouge-score computes it)."""
    if not reference or not candidate:
        return 0.0
    lcs = lcs_length(reference, candidate, masks_ref)
    if lcs == 0:
        return 0.0
    p, r = lcs / len(candidate), lcs / len(reference)
    return 2 * p * r / (p + r)


def rouge_l_text(reference: str, candidate: str, *, stem: bool = False) -> float:
    """ROUGE-L F1 of two texts with rouge-score's tokenisation (Porter stems when ``stem``)."""
    tok = RougeTokenizer(stem=stem)
    return rouge_l(tok(reference), tok(candidate))
