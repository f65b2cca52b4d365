"""Entity labels: which ones exist, which point at a person, and the check of a list a user gives."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: spaCy entity labels that point at people, places, organisations, dates and numbers.
#: Left out: WORK_OF_ART, LAW, LANGUAGE, PRODUCT, EVENT (rarely personal in themselves).
SPACY_PII_LABELS = ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "DATE", "TIME", "MONEY", "QUANTITY",
                    "CARDINAL", "ORDINAL", "PERCENT")


#: The entity labels of spaCy's English pipelines (OntoNotes 5), the default model's among them.
SPACY_ENGLISH_LABELS = ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW",
                        "LANGUAGE", "DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL")


def check_labels(labels: Sequence[str] | None, known: Iterable[str] | None, where: str) -> Sequence[str] | None:
    """``labels`` unless one of them is not among ``known`` (compared without case), or the list is
    empty: either would release documents with less masked than asked, silently."""
    if labels is None:
        return None
    if isinstance(labels, str) or not all(isinstance(x, str) and x.strip() for x in labels):
        raise ValueError(f"labels must be a list of label names, got {labels!r}")
    if not labels:
        raise ValueError("labels is empty: nothing would be masked (leave it out to mask every label)")
    if known is not None:
        have = {k.upper() for k in known}
        unknown = [x for x in labels if x.upper() not in have]
        if unknown:
            raise ValueError(f"unknown label(s) {', '.join(unknown)}; known to {where}: "
                             f"{', '.join(sorted(have)) or 'no label'}")
    return labels


def wanted(labels: Sequence[str] | None, label: str) -> bool:
    """Whether ``label`` is one of ``labels`` (without case); every label is when ``labels`` is None."""
    return labels is None or (label or "").upper() in {x.upper() for x in labels}
