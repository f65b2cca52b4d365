"""Terms of a document: the units whose information content is measured.

Following TPI/TPS, a document's terms are non-overlapping segments that are a
named entity, a noun phrase, or a single word that is not a stop word. Named
entities are taken first, then noun chunks that do not overlap an entity, then
the remaining content words; everything else (stop words, punctuation,
whitespace) carries no term. Offsets are character offsets into the text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from audit.models.nlp import Spacy

if TYPE_CHECKING:
    from spacy.tokens import Doc, Span as SpacySpan


@dataclass(frozen=True, order=True)
class Term:
    """``text[start:end]`` of a document; ``kind`` is "entity", "chunk" or "word"."""

    start: int
    end: int
    text: str
    kind: str = "word"

    def to_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "text": self.text, "kind": self.kind}


def _trim(span: SpacySpan) -> tuple[int, int] | None:
    """Token range of ``span`` without leading/trailing punctuation and spaces."""
    toks = list(span)
    while toks and (toks[0].is_punct or toks[0].is_space):
        toks.pop(0)
    while toks and (toks[-1].is_punct or toks[-1].is_space):
        toks.pop()
    if not toks:
        return None
    return toks[0].i, toks[-1].i + 1


def terms_of_doc(doc: Doc) -> list[Term]:
    """Terms of a parsed spaCy document, sorted by start."""
    taken = [False] * len(doc)
    found: list[Term] = []

    def claim(start: int, end: int, kind: str) -> None:
        if any(taken[start:end]):
            return
        for i in range(start, end):
            taken[i] = True
        first, last = doc[start], doc[end - 1]
        s, e = first.idx, last.idx + len(last.text)
        found.append(Term(s, e, doc.text[s:e], kind))

    for ent in doc.ents:
        rng = _trim(ent)
        if rng:
            claim(*rng, "entity")
    try:
        chunks = list(doc.noun_chunks)
    except ValueError:  # no parser in the pipeline
        chunks = []
    for chunk in chunks:
        rng = _trim(chunk)
        if rng and not all(t.is_stop for t in doc[rng[0]:rng[1]]):  # not "it", "which"
            claim(*rng, "chunk")
    for tok in doc:
        if not (tok.is_stop or tok.is_punct or tok.is_space) and tok.text.strip():
            claim(tok.i, tok.i + 1, "word")
    found.sort()
    return found


@dataclass
class TermExtractor:
    """Extracts terms with a lazily loaded spaCy pipeline (NER + parser needed)."""

    spacy: Spacy | None = None

    def __post_init__(self) -> None:
        if self.spacy is None:
            self.spacy = Spacy()

    def __call__(self, text: str) -> list[Term]:
        return terms_of_doc(self.spacy(text))

    def many(self, texts: Iterable[str], batch_size: int = 8) -> list[list[Term]]:
        return [terms_of_doc(d) for d in self.spacy.pipe(texts, batch_size=batch_size)]


def tokens_of(texts: Sequence[str], spacy: Spacy) -> list[list[tuple[int, int]]]:
    """Word-token offsets (no spaces, no punctuation) of each text, for token-level scores."""
    return [[(t.idx, t.idx + len(t.text)) for t in d if not (t.is_space or t.is_punct)]
            for d in spacy.pipe(texts)]
