"""Validation of the delinker's rewordings, and its self-check.

A rewording the model proposes for a linking phrase is spliced in only when, besides being
usable (:func:`~defenders.delinker.prompts.usable_rewrite`: one line, no brackets, not a copy):

* it **invents no fact** (:func:`invented`): every number in it is a number of the phrase it
  replaces, and every capitalised word (a name: a person, a place, an organisation) is a word of
  that phrase; the first word is exempt when the phrase itself starts with a capital (it then
  starts a sentence), and so are stop words ("The", "In") and "I";
* it **does not link by itself** (:func:`links_alone`): read alone with the attack's index, it
  holds no phrase found in fewer than ``k`` documents of the collection (a rare word swapped in
  links the release as surely as the phrase it replaced).

What links only together with its neighbours is found by the next round's check of the whole
text, as before. Rejections are counted per document (``rejected_unusable``,
``rejected_invented``, ``rejected_links``), and the run's :func:`delinker_check` (the share of
words reworded or redacted, documents where the model proposed nothing) is the release's
self-check (:mod:`defenders.selfcheck`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from audit.ngrams import NgramIndex
from attackers.phrase_search.linking import linking_ngrams
from audit.core.data import Document
from defenders.selfcheck import DocumentCheck, self_check

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITAL = re.compile(r"\b[A-Z][\w'’-]*")
#: Capitalised words that name nothing (the start of a sentence, a title word).
_PLAIN = frozenset("i a an the in on at of for to by with from and or but this that these those it he she they "
                   "we you his her their its there here when while after before during as".split())


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def invented(original: str, new: str) -> list[str]:
    """The numbers and names of ``new`` that ``original`` does not hold (empty: none invented)."""
    out = sorted(_numbers(new) - _numbers(original))
    words = {w.lower() for w in re.findall(r"[\w'’-]+", original)}
    for m in _CAPITAL.finditer(new):
        word = m.group(0)
        if m.start() == len(new) - len(new.lstrip()) and original.strip()[:1].isupper():
            continue  # the phrase starts a sentence: so does its rewording
        if word.lower() in _PLAIN or word.lower() in words or any(c.isdigit() for c in word):
            continue
        out.append(word)
    return out


def links_alone(index: NgramIndex, new: str, k: int) -> bool:
    """Whether ``new``, read alone, holds a phrase found in fewer than ``k`` documents."""
    return bool(linking_ngrams(index, new, k, 1))


def rewrite_problem(original: str, new: str, index: NgramIndex | None, k: int) -> str | None:
    """Why a usable rewording of ``original`` must still be rejected (``"invented"``,
    ``"links"``), or None."""
    if invented(original, new):
        return "invented"
    if index is not None and links_alone(index, new, k):
        return "links"
    return None


def document_check(before: Document, after: Document, stops: frozenset[str], labels: Sequence[str]) -> DocumentCheck:
    """How much of ``before`` (the de-identified document) the delinker reworded or redacted:
    its spans with one of ``labels`` on ``after`` give the text they replaced; a document where
    phrases were sent and nothing came back usable counts as "proposed nothing"."""
    meta = after.meta.get("delinker", {})
    replaced = [s.original or "" for s in after.spans if s.label in labels]
    words = len(re.findall(r"\w+", before.text))
    changed = sum(len(re.findall(r"\w+", t)) for t in replaced)
    stop = sum(1 for t in replaced if all(w.lower() in stops for w in re.findall(r"\w+", t)))
    sent = meta.get("spans_sent", 0)
    return DocumentCheck(words, min(changed, words), len(replaced), stop,
                         proposed=meta.get("rewritten", 0) if sent else None)


def delinker_check(pairs: Sequence[tuple[Document, Document]], stops: frozenset[str],
                   labels: Sequence[str]) -> dict[str, Any]:
    """The self-check of a delinked release (``(before, after)`` per document). A named person
    is not looked for: the delinker rewords what a de-identifier already released."""
    return self_check([document_check(b, a, stops, labels) for b, a in pairs], what="reworded or redacted")
