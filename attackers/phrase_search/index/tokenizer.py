"""Word tokenisation with rule-based sentence boundaries, over a text's code points as one
numpy array (the "Tokenisation" section of the package docstring)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from attackers.phrase_search.index.hashing import U64, splitmix, token_hash

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

_WORD, _JOIN, _TERM, _NL = 1, 2, 4, 8  # character classes


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
    word[0xFFFF] = join[0xFFFF] = False  # code points beyond the BMP are clipped to 0xFFFF
    # one byte of character classes, so a text needs a single table lookup
    cls = (word * _WORD | join * _JOIN | term * _TERM | nl * _NL).astype(np.uint8)
    return {"cls": cls, "upper": upper, "value": value}


def _hash_strings(tokens: Iterable[str], lowercase: bool = True) -> np.ndarray:
    """Token hashes of plain strings, each taken as one token (e.g. abbreviations)."""
    tokens = list(tokens)
    if not tokens:
        return np.zeros(0, dtype=U64)
    text = "".join(tokens)
    cp = np.minimum(np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32), 0xFFFF)
    lens = np.array([len(t) for t in tokens], dtype=np.int64)
    ends = np.cumsum(lens)
    return token_hash(_tables(lowercase)["value"][cp], ends - lens, ends)


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
        tab = _tables(self.lowercase)
        cp = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        L = len(cp)
        empty = Tokens(*(np.zeros(0, dtype=np.int64) for _ in range(2)), np.zeros(0, dtype=U64),
                       np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))
        if L == 0:
            return empty
        astral = bool(cp.max() > 0xFFFF)
        cpc = np.minimum(cp, 0xFFFF) if astral else cp
        cls = tab["cls"][cpc]
        starts, ends, inword = _token_spans(cls)
        nt = len(starts)
        if nt == 0:
            return empty
        values = tab["value"][cpc]
        if astral:  # keep code points beyond the BMP distinct
            big = cp > 0xFFFF
            values[big] = splitmix(cp[big].astype(U64) + U64(0x9E3779B97F4A7C15))
        hashes = token_hash(values, starts, ends)
        boundary = self._sentence_starts(tab, cls, cpc, inword, starts, ends, hashes)
        ok = np.ones(nt, dtype=bool)
        if doc_starts is not None and len(doc_starts):
            idx = np.searchsorted(starts, np.asarray(doc_starts), side="left")
            boundary[idx[idx < nt]] = True
        if len(blocked):
            bad, cuts = _blocked_tokens(blocked, starts, ends, L)
            ok &= ~bad
            boundary[1:] |= cuts
            boundary |= bad
        seg = np.cumsum(boundary)
        return Tokens(starts.astype(np.int64), ends.astype(np.int64), hashes, seg, ok)

    def _sentence_starts(self, tab: dict[str, np.ndarray], cls: np.ndarray, cpc: np.ndarray, inword: np.ndarray,
                         starts: np.ndarray, ends: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """Whether each token starts a sentence: after a newline, or after a full stop when it
        is capitalised and the token before the stop is neither an abbreviation nor an initial."""
        nt = len(starts)
        # sentence boundaries, found from the (few) newlines and full stops outside tokens
        boundary = np.zeros(nt + 1, dtype=bool)
        # one scan of the text for the rare characters of either kind, then each kind among those
        rare = np.flatnonzero((cls & (_NL | _TERM)) != 0)  # a bool mask: several times faster to scan
        rare_cls = cls[rare]
        boundary[np.searchsorted(starts, rare[(rare_cls & _NL) != 0])] = True
        stops = rare[((rare_cls & _TERM) != 0) & ~inword[rare]]
        t = np.searchsorted(starts, stops)  # non-decreasing, as ``stops`` is
        t = t[(t > 0) & (t < nt)]
        if len(t) > 1:
            t = t[np.concatenate(([True], t[1:] != t[:-1]))]
        if len(t):
            prev = t - 1
            first_char = cpc[starts[prev]]
            # a single letter before the stop is an initial ("J. Smith"); a single digit a list number
            single_letter = (ends[prev] - starts[prev] == 1) & ~((first_char >= ord("0")) & (first_char <= ord("9")))
            abbr = _abbrev_hashes(self.lowercase)
            pos = np.minimum(np.searchsorted(abbr, hashes[prev]), len(abbr) - 1)
            known = abbr[pos] == hashes[prev]
            boundary[t[tab["upper"][cpc[starts[t]]] & ~known & ~single_letter]] = True
        return boundary[:nt]


def _token_spans(cls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start and end offsets of the tokens of a text with character classes ``cls``, and which
    characters are inside a token (word characters, and joiners between two of them)."""
    L = len(cls)
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
    return edge[0::2], edge[1::2], inword


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
