"""What makes a text linkable: the public helpers the attack and the delinker sanitizer share.

* :func:`blocked_ranges` — the character ranges an adversary cannot search: spans a release
  records as replaced (except rewrites whose new words are visible, label
  :data:`~audit.core.data.REPHRASED`) and placeholder tokens;
* :func:`rare_indices` — the n-grams of a text found in 1..k-1 documents of the collection;
* :func:`linking_ngrams` — the minimal non-overlapping set of those, plus the combinations of
  common n-grams (arity 2..3) whose posting lists intersect in fewer than k documents.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from attackers.phrase_search.combinations import Combination, rare_combinations
from audit.ngrams import NgramIndex, TextNgrams, minimal_set
from audit.core.data import REPHRASED, Span


def blocked_ranges(text: str, spans: Iterable[Span], placeholder_pattern: str | None,
                   use_spans: bool = True) -> list[tuple[int, int]]:
    """Character ranges of ``text`` no phrase may use: recorded replacements (when
    ``use_spans``; a rephrasing, label ``REPHRASED``, stays searchable) and placeholders."""
    ranges = [(s.start, s.end) for s in spans if s.label != REPHRASED] if use_spans else []
    if placeholder_pattern:
        ranges += [m.span() for m in re.finditer(placeholder_pattern, text)]
    return ranges


def rare_indices(tn: TextNgrams, k: int) -> np.ndarray:
    """Indices of the n-grams of ``tn`` found in at least one and fewer than ``k`` documents."""
    return np.flatnonzero((tn.df >= 1) & (tn.df < k))


@dataclass
class Links:
    """What links one text: ``ngrams`` (indices into ``tn``, the minimal non-overlapping set
    of rare n-grams, in text order) and ``combinations`` of common n-grams."""

    tn: TextNgrams
    ngrams: np.ndarray
    combinations: list[Combination] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(len(self.ngrams) or self.combinations)

    def to_rephrase(self) -> np.ndarray:
        """The n-grams a rewriter must change: the minimal set, and from each combination its
        shortest member (leftmost on ties), without duplicates, in text order."""
        picked = [int(i) for i in self.ngrams]
        for c in self.combinations:
            picked.append(min(c.members, key=lambda i: (int(self.tn.n[i]), int(self.tn.first[i]))))
        out = np.unique(np.asarray(picked, dtype=np.int64))
        return out[np.argsort(self.tn.first[out], kind="stable")]


def linking_ngrams(index: NgramIndex, text: str, k: int, arity: int = 1, *,
                   blocked: Iterable[tuple[int, int]] = (), df_cap: int = 1000,
                   max_candidates: int = 40) -> Links:
    """The visible n-grams of ``text`` that narrow the collection down to fewer than ``k``
    documents, alone or (``arity`` 2, 3) in combination (see the package docstring)."""
    tn = index.ngrams(text, list(blocked))
    rare = minimal_set(tn, rare_indices(tn, k))
    combos = (rare_combinations(index, tn, k, arity, df_cap=df_cap, max_candidates=max_candidates)
              if arity >= 2 else [])
    return Links(tn, rare, combos)
