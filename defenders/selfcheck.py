"""Self-checks of the LLM sanitizers: what their own release looks like, and when it degenerates.

Like an attack's control (the check that marks a result *inconclusive*), a sanitizer that asks
a small language model what to hide measures its own output, so that a comparison against a
degenerate release is not read as a finding. Per release (:func:`self_check`):

* ``share_words_changed``: words of the input that were masked, replaced or reworded, over all
  words (a "word" is a run of letters or digits);
* ``share_masks_on_stop_words``: replaced regions made only of stop words or punctuation
  (spaCy's stop list of the pipeline's language);
* ``documents_nothing_proposed``: documents where the model proposed nothing at all;
* the sanitizer's own counts (proposals rejected and why, untruthful candidates caught) are
  given beside these in its ``stats()``.

It warns (``warnings``, copied into the release's provenance and shown beside the release in
the report) when the output is degenerate, by two rules that depend on no corpus:

* **most of the text changed**: a document with more than half of its words masked or
  changed (the release then keeps less than it hides);
* **a named person left in clear**: a document in which spaCy's NER finds a person's name and
  nothing was masked at all.

The warnings name counts, never document ids or text, so the shareable edition may carry them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: A document is degenerate when more than this share of its words was masked or changed.
MOST_OF_THE_TEXT = 0.5

_WORD = re.compile(r"\w+")


def word_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every word (a run of letters or digits) of ``text``."""
    return [m.span() for m in _WORD.finditer(text)]


def stop_words(nlp: Any) -> frozenset[str]:
    """The stop list of a spaCy pipeline's language (lowercase)."""
    return frozenset(w.lower() for w in nlp.Defaults.stop_words)


def only_stop_words(text: str, stops: frozenset[str]) -> bool:
    """Whether ``text`` holds no word that is not a stop word (punctuation only counts too)."""
    return all(w.lower() in stops for w in _WORD.findall(text))


def names_a_person(doc: Any) -> bool:
    """Whether a parsed spaCy document has a ``PERSON`` entity."""
    return any(ent.label_ == "PERSON" for ent in doc.ents)


@dataclass(frozen=True)
class DocumentCheck:
    """What one document lost. ``changed``: regions of the input text masked or changed."""

    words: int
    changed_words: int
    regions: int
    stop_regions: int
    proposed: int | None = None  # proposals of the model (None: the sanitizer asks no list)
    person: bool = False  # NER finds a person's name in the input


def check_document(text: str, changed: Iterable[tuple[int, int]], stops: frozenset[str], *,
                   proposed: int | None = None, person: bool = False) -> DocumentCheck:
    """:class:`DocumentCheck` of ``text`` whose ``changed`` regions (offsets in ``text``) were
    masked or changed: a word counts as changed when any character of it is."""
    regions = sorted((s, e) for s, e in changed if e > s)
    words = word_spans(text)
    hit, j = 0, 0
    for s, e in words:
        while j < len(regions) and regions[j][1] <= s:
            j += 1
        if j < len(regions) and regions[j][0] < e:
            hit += 1
    stop = sum(only_stop_words(text[s:e], stops) for s, e in regions)
    return DocumentCheck(len(words), hit, len(regions), stop, proposed, person)


def self_check(checks: Sequence[DocumentCheck], *, what: str = "masked") -> dict[str, Any]:
    """The release's self-check from its documents' checks (see the module doc), with its
    ``warnings`` (empty when the release looks sane). ``what`` names the change in the warnings
    ("masked", "reworded")."""
    words = sum(c.words for c in checks)
    changed = sum(c.changed_words for c in checks)
    regions = sum(c.regions for c in checks)
    stop = sum(c.stop_regions for c in checks)
    most = sum(1 for c in checks if c.words and c.changed_words > MOST_OF_THE_TEXT * c.words)
    people_clear = sum(1 for c in checks if c.person and c.regions == 0)
    asked = [c for c in checks if c.proposed is not None]
    out: dict[str, Any] = {
        "documents": len(checks), "words": words, "words_changed": changed,
        "share_words_changed": round(changed / words, 4) if words else 0.0,
        "regions": regions, "regions_on_stop_words": stop,
        "share_masks_on_stop_words": round(stop / regions, 4) if regions else 0.0,
        "documents_mostly_changed": most, "documents_person_in_clear": people_clear,
    }
    if asked:
        out["documents_nothing_proposed"] = sum(1 for c in asked if c.proposed == 0)
    warnings = []
    if most:
        warnings.append(f"degenerate release: {most} of {len(checks)} document(s) have most of their words "
                        f"{what} (over {MOST_OF_THE_TEXT:.0%}; {out['share_words_changed']:.0%} of all words); "
                        "a comparison against it says little")
    if people_clear:
        warnings.append(f"degenerate release: {people_clear} of {len(checks)} document(s) name a person "
                        f"(spaCy NER) and have nothing {what}; a comparison against it says little")
    out["warnings"] = warnings
    return out
