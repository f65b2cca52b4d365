"""One person's candidates, worked out once and scored for every span by array arithmetic (issue 57).

:meth:`Background.candidates <attackers.span_guess.background.Background.candidates>` reads each
mention of a person's background for each span: how many words next to the span repeat, in
order, next to the mention (``edge``), and the IDF-weighted share of the span's surrounding
words that surround the mention (``share``); then, per candidate, its best mention, its type,
how often the background names it and how specific it is to the person. Read mention by mention
in Python, that cost grows with the background's length for every span (seconds per span on
long public judgments).

A :class:`CandidateTable` holds the same mentions as arrays, built once per person: each
mention's candidate (its :func:`~attackers.span_guess.mentions.key`), the ``EDGE`` words
nearest to it on each side and the set of words around it, as ids of the person's own word
list. For each span label, a :class:`_View` keeps the mentions that are candidates for it, each
candidate's tier, count and the log of its count (all fixed by the label). Scoring a span is
then a comparison of two small id matrices (``edge``), one weighted count over the words around
the mentions (``share``, :func:`numpy.bincount`), one sort to find each candidate's best
mention and one to rank the candidates: no Python loop over the mentions.

The result is the per-mention loop's, bit for bit (``tests/test_span_guess_table.py``): both add
a mention's shared IDFs smallest first (the table keeps each mention's words in that order, and
:func:`numpy.bincount` adds its weights one by one in the order given).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np

from attackers.span_guess.mentions import EDGE, Mention, key, tier

#: ids that match no word: a mention's missing neighbour, a span's missing neighbour, a span's
#: word the person's background never has around a mention
_NO_MENTION_WORD, _NO_SPAN_WORD, _UNKNOWN = -1, -3, -2
#: weight of the bag-of-words share: all surrounding words shared = one adjacent word
SHARE = 1.0


@dataclass
class _View:
    """The mentions that are candidates for one span label, and what the label fixes of them."""

    rows: np.ndarray  # mention indices, in the background's order
    kid: np.ndarray  # each one's candidate (key id)
    left: np.ndarray  # (rows, EDGE) ids of the EDGE words before each, nearest first
    right: np.ndarray  # (rows, EDGE) ids of the EDGE words after each, nearest first
    bag_row: np.ndarray  # (row in this view, word id) of each word around each mention
    bag_word: np.ndarray
    tier: np.ndarray  # per key id: the best tier among its mentions here
    count: np.ndarray  # per key id: its mentions here
    log_count: np.ndarray  # per key id: math.log1p(count)
    plain: list[int]  # key ids by (tier, -count, key): the ranking without the span's context
    first: np.ndarray  # per key id: the text index of its first mention here


class CandidateTable:
    """``person``'s mentions as arrays (see the module doc); ``specificity(key)`` is the
    background's measure of how specific a candidate is to one person."""

    def __init__(self, mentions: Sequence[Mention], idf: Callable[[str], float], specificity: Callable[[str], float]):
        self.texts = [m.text for m in mentions]
        self.labels = [m.label for m in mentions]
        self.keys: list[str] = []
        key_id: dict[str, int] = {}
        kid = []
        for m in mentions:
            k = key(m.text)
            kid.append(key_id.setdefault(k, len(key_id)))
            if len(key_id) > len(self.keys):
                self.keys.append(k)
        self.key_id = key_id
        self.kid = np.asarray(kid, dtype=np.int64)
        self.specificity = np.asarray([specificity(k) for k in self.keys], dtype=np.float64)
        order = sorted(range(len(self.keys)), key=self.keys.__getitem__)
        self.key_rank = np.empty(len(self.keys), dtype=np.int64)
        self.key_rank[order] = np.arange(len(self.keys))
        self.words: dict[str, int] = {}  # the person's word list: word -> id, in order of first use
        ids = self.words.setdefault
        self.left = np.full((len(mentions), EDGE), _NO_MENTION_WORD, dtype=np.int64)
        self.right = np.full((len(mentions), EDGE), _NO_MENTION_WORD, dtype=np.int64)
        rows, words = [], []
        for i, m in enumerate(mentions):
            near_left = m.left[::-1][:EDGE]
            self.left[i, :len(near_left)] = [ids(w, len(self.words)) for w in near_left]
            self.right[i, :len(m.right[:EDGE])] = [ids(w, len(self.words)) for w in m.right[:EDGE]]
            bag = {ids(w, len(self.words)): w for w in m.left + m.right}
            rows += [i] * len(bag)
            words += sorted(bag, key=lambda j: (idf(bag[j]), j))  # smallest IDF first, as the loop adds them
        self.bag_row = np.asarray(rows, dtype=np.int64)
        self.bag_word = np.asarray(words, dtype=np.int64)
        self.idf = np.asarray([idf(w) for w in self.words], dtype=np.float64)
        self._views: dict[str, _View | None] = {}

    def __len__(self) -> int:
        return len(self.texts)

    # ------------------------------------------------------------------ per label

    def view(self, label: str) -> _View | None:
        """The mentions that are candidates for ``label`` (None: there are none), memoised."""
        if label not in self._views:
            self._views[label] = self._make_view(label)
        return self._views[label]

    def _make_view(self, label: str) -> _View | None:
        tiers = {lab: tier(label, lab) for lab in set(self.labels)}
        rows = [i for i, lab in enumerate(self.labels) if tiers[lab] is not None and self.keys[self.kid[i]]]
        if not rows:
            return None
        at = np.asarray(rows, dtype=np.int64)
        kid = self.kid[at]
        n_keys = len(self.keys)
        best_tier = np.full(n_keys, 2, dtype=np.int64)
        np.minimum.at(best_tier, kid, np.asarray([tiers[self.labels[i]] for i in rows], dtype=np.int64))
        count = np.bincount(kid, minlength=n_keys)
        first = np.full(n_keys, -1, dtype=np.int64)
        present, at_first = np.unique(kid, return_index=True)
        first[present] = at[at_first]  # each key's first mention
        inside = np.full(len(self), -1, dtype=np.int64)
        inside[at] = np.arange(len(at))
        keep = inside[self.bag_row] >= 0
        plain = sorted(present.tolist(), key=lambda k: (best_tier[k], -count[k], self.keys[k]))
        return _View(rows=at, kid=kid, left=self.left[at], right=self.right[at],
                     bag_row=inside[self.bag_row[keep]], bag_word=self.bag_word[keep], tier=best_tier, count=count,
                     log_count=np.asarray([math.log1p(c) for c in count.tolist()], dtype=np.float64),
                     plain=plain, first=first)

    # ------------------------------------------------------------------ per span

    def encode(self, words: Sequence[str], pad: int) -> np.ndarray:
        """``words`` (the span's nearest first, up to EDGE) as ids of this person's word list."""
        out = np.full(EDGE, pad, dtype=np.int64)
        ids = [self.words.get(w, _UNKNOWN) for w in words[:EDGE]]
        out[:len(ids)] = ids
        return out

    def rank(self, label: str, left: Sequence[str], right: Sequence[str], want: Collection[str], total: float,
             skip: Collection[str] = ()) -> list[tuple[str, float, int]]:
        """The candidates for a span, best first, as :meth:`Background.candidates` gives them:
        ``(text, score, tier)``. ``left``/``right``: the span's words, nearest first; ``want``:
        the words around the span; ``total``: the sum of their IDFs; ``skip``: keys
        that are no candidates (the replacement shown in the span)."""
        v = self.view(label)
        if v is None:
            return []
        run_left = np.cumprod(v.left == self.encode(left, _NO_SPAN_WORD), axis=1).sum(axis=1)
        run_right = np.cumprod(v.right == self.encode(right, _NO_SPAN_WORD), axis=1).sum(axis=1)
        edge = run_left + run_right
        if total:
            weight = np.zeros(len(self.words), dtype=np.float64)
            wanted = [i for i in map(self.words.get, want) if i is not None]
            weight[wanted] = self.idf[wanted]
            # each mention's shared words' IDFs, added one by one in the bag's order (smallest first)
            shared = np.bincount(v.bag_row, weights=weight[v.bag_word], minlength=len(v.rows))
            share = shared / total
        else:
            share = np.zeros(len(v.rows), dtype=np.float64)
        # each candidate's best mention: the most adjacent words, then the largest share, then the first
        pos = np.arange(len(v.rows))
        order = np.lexsort((pos, -share, -edge, v.kid))
        lead = order[np.r_[True, v.kid[order][1:] != v.kid[order][:-1]]]
        kid = v.kid[lead]
        skipped = [self.key_id[k] for k in skip if k in self.key_id]
        if skipped:
            keep = ~np.isin(kid, skipped)
            lead, kid = lead[keep], kid[keep]
        e, s, t = edge[lead], share[lead], v.tier[kid]
        score = e + SHARE * s + ((t == 0) + v.log_count[kid]) * self.specificity[kid]
        ranked = np.lexsort((self.key_rank[kid], -v.count[kid], t, -s, -score))
        rows = v.rows[lead[ranked]]
        return [(self.texts[r], sc, ti) for r, sc, ti in
                zip(rows.tolist(), (score + s / 10)[ranked].tolist(), t[ranked].tolist())]

    def plain(self, label: str, skip: Collection[str] = ()) -> list[str]:
        """The candidates for ``label`` without the span's context, most frequent first (each
        shown as its first mention): :meth:`Background.person_only`."""
        v = self.view(label)
        if v is None:
            return []
        skipped = {self.key_id[k] for k in skip if k in self.key_id}
        return [self.texts[v.first[k]] for k in v.plain if k not in skipped]

