"""What the context-free baseline knows, and the background adversary who knows it too.

:class:`LabelPrior` is the distribution of originals per entity label among a release's
replaced spans, each span's own original left out (leave-one-out: the span is estimated from
the *other* spans). Its most likely originals are the context-free baseline's guesses.

A real adversary uses everything it knows. :func:`combine` gives the background adversary
the same prior: the hidden original either comes from what the background says about the
people the document may be about (the background's candidate distribution, a mixture over
the retrieved people weighted by their posterior) or from the release's general stock of
originals of that label (this prior). The adversary has no reason to trust one source more,
so each gets half the weight (a uniform prior over the two sources); the guesses are the
``p`` most probable originals of the mixture. The prior's weight is what the other spans make
likely *times* how likely the original is one they hold at all: the Good–Turing estimate, one
minus the share of originals seen only once (dates are mostly new, so the stock of other dates
says little; "London" or "British" recur, so it says much). Nothing in it is fitted. Where the background has no candidate, the
guesses are exactly the prior's, so the combined adversary is never weaker than the baseline
there; where it has, a background candidate displaces a prior guess only when it is the more
probable of the two.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable

from audit.core.text import word_tokens

#: a distribution over candidate originals: key -> (probability, text shown)
Dist = dict[str, tuple[float, str]]
_ARTICLES = frozenset({"the", "a", "an"})


def candidate_key(text: str) -> str:
    """The key under which two spellings of one candidate share their probability: lowercased
    word tokens without a leading article ("the Court of Appeal" = "Court of Appeal")."""
    words = word_tokens(text)
    while words and words[0] in _ARTICLES and len(words) > 1:
        words = words[1:]
    return " ".join(words)


class LabelPrior:
    """How often each original occurs per label among the replaced spans (what the baseline knows)."""

    def __init__(self, spans: Iterable[tuple[str, str]]):
        """``spans``: ``(label, original)`` of every replaced span of the release."""
        self._counts: dict[str, Counter[str]] = {}
        self._shown: dict[str, dict[str, Counter[str]]] = {}
        for label, original in spans:
            original = (original or "").strip()
            key = candidate_key(original)
            if not key:
                continue
            self._counts.setdefault(label, Counter())[key] += 1
            self._shown.setdefault(label, {}).setdefault(key, Counter())[original] += 1

    def distribution(self, label: str, own: str) -> Dist:
        """The originals of ``label`` among the other spans: ``own`` (the span's original) is
        counted once less. Probabilities are the shares of those other spans."""
        counts = self._counts.get(label, Counter())
        own_key = candidate_key(own or "")
        total = sum(counts.values()) - (own_key in counts)
        if total <= 0:
            return {}
        out: Dist = {}
        for key, n in counts.items():
            n -= key == own_key
            if n > 0:
                out[key] = (n / total, self._shown[label][key].most_common(1)[0][0])
        return out

    def seen_mass(self, label: str, own: str) -> float:
        """The probability that the span's original is one the other spans hold (Good–Turing:
        one minus the share of the other spans whose original occurs only once among them)."""
        counts = self._counts.get(label, Counter())
        own_key = candidate_key(own or "")
        left = [n - (k == own_key) for k, n in counts.items()]
        total = sum(left)
        return 1.0 - sum(n == 1 for n in left) / total if total > 0 else 0.0

    def guesses(self, label: str, own: str, p: int) -> list[str]:
        """The baseline's ``p`` guesses: the most frequent other originals of ``label``."""
        return top(self.distribution(label, own), p)


def top(dist: Dist, p: int) -> list[str]:
    """The ``p`` most probable candidates (ties by text, so the order is deterministic): the first
    ``p`` of the sorted list, without sorting all of it."""
    return [text for _, text in heapq.nsmallest(p, ((-prob, text) for prob, text in dist.values()))]


def combine(background: Dist, prior: Dist, seen: float = 1.0, weight: float = 0.5) -> Dist:
    """The mixture ``weight * background + (1 - weight) * seen * prior`` (``seen``: the prior's
    mass on the originals it holds, :meth:`LabelPrior.seen_mass`); the prior alone where the
    background has no candidate (then the guesses are exactly the baseline's)."""
    if not background:
        return dict(prior)
    out: Dist = {k: (weight * pr, text) for k, (pr, text) in background.items()}
    for key, (pr, text) in prior.items():
        have, shown = out.get(key, (0.0, text))
        out[key] = (have + (1 - weight) * seen * pr, shown)
    return out
