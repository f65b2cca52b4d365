"""Which claims single a person out, and what a claim gets on the record most like its own.

Leakage is about facts that identify someone. Court judgments, medical notes or biographies
share much of their wording ("the applicant was represented by a lawyer"), and a judge asked
"does this passage state the fact?" rightly says Yes to such a fact on another person's
record too. Two tools of the judge (:mod:`.judge`) keep the figure about identifying facts:

* **Identifying claims** (:meth:`OriginalsIndex.why_not_identifying`). A claim identifies
  when it carries a specific detail (a named entity, date or number: spaCy's entities of
  :data:`DETAIL_LABELS`, or any token with a digit) and the linker's own retrieval ties it to
  its document: no claim of another original comes within the linker's ``tolerance`` of it
  (the rule by which the dense linker lets near-equal matches vote). Only identifying claims
  are judged, in the releases and in the judge's control.
* **The reference record** (:meth:`OriginalsIndex.nearest_other`): for a claim, the original of
  another person whose claims come closest to it by meaning (a matched negative). The margins
  that the control's claims get on their reference records are what the judge grants a fact
  on a record that is not its person's; the contrastive judge counts a claim as stated only
  when its margin exceeds them (:func:`null_threshold`, a conformal bound on the rate of false
  "stated" on other people's records). A threshold per claim (its own reference alone) was
  measured and rejected: on TAB a random other record beat the claim's reference 6 times in 16,
  both margins being noise around 0 (benchmarks/README.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

import numpy as np

#: spaCy entity labels that make a detail specific: people, groups, places, organisations,
#: named things, dates, times and amounts (the kinds of identifiers that TAB annotates). Not
#: ``LAW`` (the articles every judgment cites), ``ORDINAL`` or ``LANGUAGE``.
DETAIL_LABELS = frozenset({"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART",
                           "DATE", "TIME", "MONEY", "QUANTITY", "PERCENT", "CARDINAL"})

#: Why a claim is not judged (the keys of the counts in results).
NO_DETAIL = "no specific detail"
NOT_UNIQUE = "another original has it"

_DIGIT = re.compile(r"\w*\d\w*")


def detail_spans(ents: Iterable[tuple[int, int, str]], text: str) -> list[tuple[int, int, str]]:
    """The spans ``(start, end, label)`` of :func:`specific_details` in ``text``: the entities
    ``(start, end, label)`` of :data:`DETAIL_LABELS`, and every word with a digit outside them
    (label ``CARDINAL``); in text order. What a sanitizer masking specific details would mask."""
    spans = [(a, b, label) for a, b, label in ents if label in DETAIL_LABELS]
    spans += [(m.start(), m.end(), "CARDINAL") for m in _DIGIT.finditer(text)
              if not any(a <= m.start() < b for a, b, _ in spans)]
    return sorted(spans)


#: How the masked twin hides a detail, as releases do: suppression (removed), a label such as
#: ``[PERSON]``, and a fixed mask (``***``).
MASK_STYLES = ("suppression", "label", "stars")


def mask_spans(text: str, spans: Sequence[tuple[int, int, str]], style: str) -> str:
    """``text`` with each span ``(start, end, label)`` masked in ``style`` (:data:`MASK_STYLES`)."""
    if style not in MASK_STYLES:
        raise ValueError(f"unknown mask style {style!r} (use one of {', '.join(MASK_STYLES)})")
    out, pos = [], 0
    for a, b, label in sorted(spans):
        if a < pos:  # overlapping spans: the first one masks
            continue
        out.append(text[pos:a])
        out.append("" if style == "suppression" else f"[{label}]" if style == "label" else "***")
        pos = b
    out.append(text[pos:])
    return "".join(out)


_WORD = re.compile(r"[^\W_]+")
#: Words of a detail that say nothing specific alone (titles, articles, months' neighbours).
_PLAIN_WORDS = frozenset({"the", "of", "and", "a", "an", "in", "on", "at", "for", "to", "mr", "mrs", "ms", "dr",
                          "de", "van", "von", "s"})


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def words_of(text: str) -> frozenset[str]:
    """The words of ``text`` as :func:`stated_details` compares them (lower case, no punctuation)."""
    return frozenset(_words(text))


def states(detail: str, have: frozenset[str] | set[str]) -> bool:
    """Whether a passage with the words ``have`` (:func:`words_of`) states ``detail`` (see
    :func:`stated_details`)."""
    words = [w for w in _words(detail) if w not in _PLAIN_WORDS] or _words(detail)
    return bool(words) and 2 * sum(w in have for w in words) >= len(words)


#: A detail that the originals of more than this share of the other people state too is common
#: ("the Supreme Court", "the Government"), not specific: the ``details`` judge neither names it
#: nor counts a passage that states it (see :meth:`DetailFrequency.common`).
COMMON_SHARE = 0.1


class DetailFrequency:
    """Who states a detail: the words of every original and whom each is about, and for a detail
    the people whose originals state it (memoised)."""

    def __init__(self, texts: Sequence[str], people: Sequence[str]):
        self.words = [words_of(t) for t in texts]
        self.people = list(people)
        self.n_people = len(set(self.people))
        self._memo: dict[str, int] = {}

    def stating(self, detail: str) -> int:
        """How many people's originals state ``detail``."""
        if detail not in self._memo:
            self._memo[detail] = len({p for p, w in zip(self.people, self.words) if states(detail, w)})
        return self._memo[detail]

    def common(self, detail: str, share: float = COMMON_SHARE) -> bool:
        """Whether more than ``share`` of the people other than one who states it state it too."""
        return self.stating(detail) - 1 > share * max(1, self.n_people - 1)


def stated_details(details: Sequence[str], evidence: str) -> list[str]:
    """The details of a claim that ``evidence`` states in so many words: a detail is stated when
    at least half of its words (less titles and articles; case and punctuation aside) are words
    of the evidence ("Mr Nieminen" states "Mr Dmitri Nieminen", "May 3, 1999" states "3 May 1999",
    "[PERSON]" or a blank states nothing). A reader can check each one against the evidence. A
    detail said in other words only ("the mid-sixties" for "1965") is not found: the judge then
    counts the claim as not stated (benchmarks/README.md, the judge's masked twin)."""
    have = words_of(evidence)
    return [d for d in details if states(d, have)]


def specific_details(ents: Iterable[tuple[str, str]], text: str) -> list[str]:
    """The specific details of a claim: the texts of its entities ``(text, label)`` whose label
    is in :data:`DETAIL_LABELS`, and every word with a digit in ``text`` not inside one of them."""
    details = [t for t, label in ents if label in DETAIL_LABELS]
    inside = " ".join(details)
    details += [w for w in _DIGIT.findall(text) if w not in inside]
    return details


class OriginalsIndex:
    """The claim vectors of every original (unit length, the linker's embedder), by document.

    ``vecs``: one row per claim, documents in order; ``counts``: claims per document;
    ``people``: who each document is about (its subject; its id when it names none), so that
    another document about the same person is never "another original" or a reference record.
    """

    def __init__(self, vecs: np.ndarray, counts: Sequence[int], people: Sequence[str] | None = None):
        self.vecs = np.asarray(vecs, dtype=np.float32)
        self.offsets = np.concatenate([[0], np.cumsum(counts)]).astype(int)
        self.doc = np.repeat(np.arange(len(counts)), counts)
        if len(self.doc) != len(self.vecs):
            raise ValueError(f"{len(self.vecs)} claim vectors for {len(self.doc)} claims")
        names = list(people) if people is not None else [str(i) for i in range(len(counts))]
        codes = {name: k for k, name in enumerate(dict.fromkeys(names))}
        self.person = np.array([codes[name] for name in names], dtype=int)
        self.claim_person = self.person[self.doc] if len(self.doc) else np.zeros(0, dtype=int)

    def of(self, i: int) -> np.ndarray:
        """The claim vectors of original ``i``."""
        return self.vecs[self.offsets[i]:self.offsets[i + 1]]

    def why_not_identifying(self, i: int, k: int, details: Sequence[str], tolerance: float) -> str | None:
        """``None`` when claim ``k`` of original ``i`` identifies, else the reason
        (:data:`NO_DETAIL`, :data:`NOT_UNIQUE`: an original about someone else has it)."""
        if not details:
            return NO_DETAIL
        v = self.vecs[self.offsets[i] + k]
        sims = self.vecs @ v
        sims[self.claim_person == self.person[i]] = -np.inf
        if len(sims) and float(sims.max()) >= float(v @ v) - tolerance:
            return NOT_UNIQUE
        return None

    def nearest_other(self, vec: np.ndarray, exclude: Iterable[int]) -> int:
        """The original about none of the people of the originals in ``exclude`` that holds the
        claim closest to ``vec``; -1 when there is none."""
        sims = self.vecs @ np.asarray(vec, dtype=np.float32)
        mask = np.isin(self.claim_person, self.person[list(exclude)])
        sims[mask] = -np.inf
        if not len(sims) or mask.all():
            return -1
        return int(self.doc[int(np.argmax(sims))])


#: The contrastive judge's rate of false "stated" on records of other people: its threshold is
#: the conformal ``1 - NULL_ALPHA`` quantile of the margins that the control's claims get on
#: their reference records (half the control's own bound on the other-document level, 0.2).
NULL_ALPHA = 0.1


def null_threshold(null_margins: Sequence[float], alpha: float = NULL_ALPHA) -> float:
    """The margin a claim must exceed to count as stated: at least 0 (Yes must win), and the
    ``ceil((n + 1) * (1 - alpha))``-th smallest of the ``n`` margins that claims get on records
    of other people (capped at the largest). A record of another person, exchangeable with those,
    then beats it with probability at most ``alpha`` (at most ``1 / (n + 1)`` when capped, as for
    ``n`` = 16 and ``alpha`` = 0.1: 1/17); no margin: 0."""
    values = sorted(float(m) for m in null_margins)
    if not values:
        return 0.0
    rank = min(len(values), math.ceil((len(values) + 1) * (1 - alpha)))
    return max(0.0, values[rank - 1])
