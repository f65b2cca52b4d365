"""Word tokenisation with rule-based sentence boundaries, over a text's code points as one
numpy array read in one compiled pass (the "Tokenisation" section of the package docstring)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from audit.ngrams.hashing import U64, splitmix
from audit.ngrams.char_classes import CLIP, JOIN, NL, TERM, WORD
from audit.ngrams.kernels import kernels

TOKENIZER_NAME = "anonaudit-words/1"

#: Tokens before a full stop that do not end a sentence (lower case, no dot).
ABBREVIATIONS = (
    "mr mrs ms dr prof no nos art arts para paras pp p v vs e.g i.e etc cf st jr sr mt inc ltd co corp "
    "hon rev gen col lt sgt capt u.s fig vol ch sec seq approx jan feb mar apr jun jul aug sep sept oct "
    "nov dec op cit ibid al seq nr ref"
).split()
JOINERS = "-'’./,:&\u2010\u2011"
TERMINALS = ".!?"
NEWLINES = "\n\r\u2028\u2029\x0b\x0c"


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
    value = splitmix(fold + U64(0x632BE59BD9B4E019))
    join = np.zeros(size, dtype=bool)
    join[[ord(c) for c in JOINERS]] = True
    term = np.zeros(size, dtype=bool)
    term[[ord(c) for c in TERMINALS]] = True
    nl = np.zeros(size, dtype=bool)
    nl[[ord(c) for c in NEWLINES]] = True
    word[CLIP] = join[CLIP] = False  # code points beyond the BMP read this entry: in no class
    # one byte of character classes (the kernel's bits), so a character needs a single lookup
    cls = (word * WORD | join * JOIN | term * TERM | nl * NL).astype(np.uint8)
    return {"cls": cls, "upper": upper, "value": value}


def _hash_strings(tokens: Iterable[str], lowercase: bool = True) -> np.ndarray:
    """Token hashes of plain strings, each one token (e.g. abbreviations)."""
    tokens = list(tokens)
    starts, _ends, hashes, _boundary = _scan(" ".join(tokens), lowercase, np.zeros(0, dtype=U64), None)
    if len(starts) != len(tokens):
        raise ValueError(f"not one token each: {tokens!r}")
    return hashes


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
    """Word tokeniser with rule-based sentence boundaries (see the package docstring).

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
        starts, ends, hashes, boundary = _scan(text, self.lowercase, _abbrev_hashes(self.lowercase), doc_starts)
        ok = np.ones(len(starts), dtype=bool)
        if len(blocked) and len(starts):
            bad, cuts = _blocked_tokens(blocked, starts, ends, len(text))
            ok &= ~bad
            boundary[1:] |= cuts
            boundary |= bad
        return Tokens(starts, ends, hashes, np.cumsum(boundary), ok)


def _scan(text: str, lowercase: bool, abbr: np.ndarray,
          doc_starts: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, ends, hashes, boundary)`` of the tokens of ``text``: their character spans,
    their hashes, and whether each starts a segment (the kernel ``scan_tokens`` of
    :mod:`~audit.ngrams.kernels`); views of arrays sized for the most tokens a
    text of its length can have."""
    tab = _tables(lowercase)
    cp = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    cap = (len(cp) + 1) // 2  # tokens are separated by at least one character
    starts, ends = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
    hashes, boundary = np.empty(cap, dtype=U64), np.empty(cap, dtype=bool)
    docs = np.zeros(0, dtype=np.int64) if doc_starts is None else np.sort(np.asarray(doc_starts, dtype=np.int64))
    nt = kernels().scan_tokens(cp, tab["cls"], tab["value"], tab["upper"], abbr, docs, starts, ends, hashes, boundary)
    return starts[:nt], ends[:nt], hashes[:nt], boundary[:nt]


def _blocked_tokens(blocked: Sequence[tuple[int, int]], starts: np.ndarray, ends: np.ndarray,
                    L: int) -> tuple[np.ndarray, np.ndarray]:
    """For the tokens ``[starts, ends)`` of a text of ``L`` characters: which overlap or touch a
    blocked range, and for each token after the first, whether a blocked range starts in the
    gap before it (a segment cut)."""
    b = np.asarray(blocked, dtype=np.int64).reshape(-1, 2)
    bs, be = b[:, 0], b[:, 1]
    # a token is bad if it overlaps or touches a blocked range: start <= be and end >= bs
    order = np.argsort(bs, kind="stable")
    bs, be = bs[order], be[order]
    run_max_end = np.maximum.accumulate(be)
    # ranges starting at or before the token's end; does the furthest-reaching one reach its start?
    j = np.searchsorted(bs, ends, side="right") - 1
    bad = (j >= 0) & (run_max_end[np.maximum(j, 0)] >= starts)
    # any blocked range starting in the gap before token t splits the segment
    cut = np.zeros(L + 2, dtype=np.int64)
    np.add.at(cut, np.minimum(bs, L), 1)
    cut_cum = np.concatenate(([0], np.cumsum(cut)))
    return bad, cut_cum[starts[1:] + 1] - cut_cum[ends[:-1]] > 0
