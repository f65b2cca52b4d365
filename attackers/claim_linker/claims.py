"""Atomic claims: splitting documents into small facts.

The claim linker works on *claims*, short statements that each carry one piece of
information. Two splitters share one interface (:class:`ClaimSplitter`):

* :class:`SentenceSplitter` — deterministic and fast: spaCy sentences, cut further at
  semicolons and between coordinated clauses that have their own subject. Good for large
  corpora and for CI.
* :class:`LLMSplitter` — an instruction-tuned LLM rewrites each passage as a list of
  self-contained claims (the paper's atomisation). Slower, cached by the LLM layer.

Every :class:`Claim` keeps a pointer into its document (``start``/``end`` of the text
it came from and of its sentence), so evidence can be highlighted in the sanitized text.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from audit.runtime.progress import bar as progress_bar
from audit.core.text import word_tokens
from audit.models.llm import extract_json_list

if TYPE_CHECKING:
    from audit.core.data import Document
    from audit.models.llm import LLM
    from audit.models.nlp import Spacy


@dataclass(frozen=True)
class Claim:
    """One atomic statement taken from a document.

    ``start``/``end`` locate the text the claim came from (the clause for the sentence
    splitter, the best-matching sentence for the LLM splitter); ``sent_start``/``sent_end``
    locate its whole sentence. Offsets are into the text of document ``doc_id``.
    """

    doc_id: str
    index: int
    text: str
    start: int
    end: int
    sent_start: int
    sent_end: int


class ClaimSplitter(ABC):
    """Turns documents into lists of claims (one list per document, in order)."""

    #: Short name recorded in results ("sentences", "llm").
    kind: str = ""

    @abstractmethod
    def split(self, docs: Sequence[Document], *, progress: bool = False) -> list[list[Claim]]:
        """Claims of each document, in document order."""


# --------------------------------------------------------------------------- sentences


def word_count(text: str) -> int:
    return len(word_tokens(text))


class SentenceSplitter(ClaimSplitter):
    """Sentences and clauses via spaCy's parser.

    A sentence is cut at semicolons and before a coordinated verb that has its own subject
    ("He was arrested on 3 May and he was released a week later" gives two claims).
    Pieces with fewer than ``min_words`` words (headings, list numbers) are merged into
    their neighbour or, when the whole sentence is that short, dropped. ``clauses=False``
    keeps whole sentences and needs only spaCy's sentence recogniser (faster, for large corpora).
    """

    kind = "sentences"

    def __init__(self, spacy: Spacy | None = None, *, min_words: int = 4, max_chars: int = 600,
                 clauses: bool = True):
        if spacy is None:
            from audit.models.nlp import Spacy

            if clauses:
                spacy = Spacy(disable=("ner",))
            else:  # the statistical sentence recogniser alone: about 2x faster than the parser
                spacy = Spacy(disable=("parser", "tagger", "attribute_ruler", "lemmatizer", "ner"), enable=("senter",))
        self.spacy = spacy
        self.clauses = clauses
        self.min_words = min_words
        self.max_chars = max_chars

    def split(self, docs: Sequence[Document], *, progress: bool = False) -> list[list[Claim]]:
        out: list[list[Claim]] = []
        parsed = self.spacy.pipe((d.text for d in docs), batch_size=8)
        for doc, sdoc in progress_bar(zip(docs, parsed), total=len(docs), enabled=progress,
                                      desc="claims (sentences)", unit="doc"):
            claims: list[Claim] = []
            for sent in sdoc.sents:
                for start, end in self._clauses(sent):
                    text = doc.text[start:end].strip()
                    if word_count(text) < self.min_words:
                        continue
                    lead = len(doc.text[start:end]) - len(doc.text[start:end].lstrip())
                    claims.append(Claim(doc.id, len(claims), " ".join(text.split()), start + lead,
                                        start + lead + len(text), sent.start_char, sent.end_char))
            out.append(claims)
        return out

    def _clauses(self, sent) -> list[tuple[int, int]]:
        """Character ranges of the clauses of one spaCy sentence."""
        cuts: set[int] = set()
        for tok in sent if self.clauses else ():
            if tok.text == ";" and tok.i + 1 < sent.end:
                cuts.add(tok.i + 1)
            if tok.dep_ == "conj" and tok.pos_ in ("VERB", "AUX") and tok.head.i < tok.i and any(
                c.dep_ in ("nsubj", "nsubjpass") for c in tok.children
            ):
                first = min(t.i for t in tok.subtree)
                # Take the conjunction ("and", "but") and comma before the clause with it.
                while first - 1 > tok.head.i and sent.doc[first - 1].dep_ in ("cc", "punct"):
                    first -= 1
                cuts.add(first)
        bounds = [sent.start] + sorted(c for c in cuts if sent.start < c < sent.end) + [sent.end]
        ranges = []
        for a, b in zip(bounds, bounds[1:]):
            start = sent.doc[a].idx
            end = sent.doc[b - 1].idx + len(sent.doc[b - 1].text)
            ranges.append((start, end))
        # Merge pieces too short to be a claim into the previous one.
        merged: list[tuple[int, int]] = []
        text = sent.doc.text
        for start, end in ranges:
            if merged and word_count(text[start:end]) < self.min_words:
                merged[-1] = (merged[-1][0], end)
            else:
                merged.append((start, end))
        if len(merged) > 1 and word_count(text[merged[0][0]:merged[0][1]]) < self.min_words:
            merged[0:2] = [(merged[0][0], merged[1][1])]
        # Very long pieces (enumerations) are cut at the last space before max_chars.
        final: list[tuple[int, int]] = []
        for start, end in merged:
            while end - start > self.max_chars:
                cut = text.rfind(" ", start, start + self.max_chars)
                cut = cut if cut > start else start + self.max_chars
                final.append((start, cut))
                start = cut + 1
            final.append((start, end))
        return final


# --------------------------------------------------------------------------- LLM

CLAIM_LIST_SCHEMA_ITEMS = {"type": "string", "minLength": 3}

_SPLIT_SYSTEM = (
    "You rewrite text as a list of atomic facts. Each fact is one short, complete sentence "
    "that states exactly one piece of information and can be understood on its own: replace "
    "pronouns with the names or descriptions they refer to. Keep placeholders such as [PERSON] "
    "or *** exactly as written. Do not add facts that the text does not state."
)


def claims_schema(max_items: int) -> dict:
    """JSON schema: a list of at most ``max_items`` non-empty strings."""
    return {"type": "array", "items": CLAIM_LIST_SCHEMA_ITEMS, "minItems": 1, "maxItems": max_items}


_NUMBERING = re.compile(r"^\s*(?:[-*•·–]|\(?\d{1,3}[.):]|\(?[a-z][.)]|claim\s*\d+\s*[:.)-])\s*", re.IGNORECASE)


def parse_claim_list(answer: str) -> list[str]:
    """Claims from an LLM answer: a JSON list (or {"claims": [...]}) when there is one,
    otherwise numbered or bulleted lines. Preambles ("Here are the facts:") and empty
    items are dropped; duplicates are kept once."""
    items: list[str] | None = None
    text = answer.strip()
    if text.startswith("```"):
        text = re.sub(r"^```\w*\s*|\s*```$", "", text)
    data = extract_json_list(text)
    if data is not None:
        items = [str(x) for x in data if isinstance(x, (str, int, float))]
    if items is None:
        items = []
        for line in text.splitlines():
            stripped = line.strip()
            if not stripped:
                continue
            numbered = bool(_NUMBERING.match(stripped))
            body = _NUMBERING.sub("", stripped, count=1).strip()
            if not numbered and body.endswith(":"):
                continue  # a preamble such as "Here are the claims:"
            items.append(body)
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        item = " ".join(item.strip().strip('"').split())
        if word_count(item) >= 2 and item.lower() not in seen:
            seen.add(item.lower())
            out.append(item)
    return out


def word_overlap(a: str, b: str) -> float:
    """Share of the words of ``a`` that also occur in ``b`` (case-insensitive)."""
    wa, wb = set(word_tokens(a)), set(word_tokens(b))
    return len(wa & wb) / max(1, len(wa))


class LLMSplitter(ClaimSplitter):
    """Atomic claims written by an LLM, one request per passage of about ``chunk_chars``.

    Long documents are cut at sentence boundaries so the answer fits ``max_tokens``.
    Each claim points to the sentence of its passage that shares most words with it.
    Claims sharing less than ``min_overlap`` of their words with the passage are dropped
    (refusals, invented facts). When an answer yields no claim, the passage's sentences are used as its claims
    (counted in :attr:`fallbacks`), so one bad answer never loses a document.
    """

    kind = "llm"

    def __init__(self, llm: LLM, spacy: Spacy | None = None, *, chunk_chars: int = 1200,
                 max_claims: int = 30, max_tokens: int = 768, min_overlap: float = 0.3):
        if spacy is None:
            from audit.models.nlp import Spacy

            spacy = Spacy(disable=("ner",))
        self.llm = llm
        self.spacy = spacy
        self.chunk_chars = chunk_chars
        self.max_claims = max_claims
        self.max_tokens = max_tokens
        self.min_overlap = min_overlap
        self.fallbacks = 0

    def _chunks(self, text: str) -> list[list[tuple[int, int]]]:
        """Sentence ranges grouped into passages of about ``chunk_chars``."""
        chunks: list[list[tuple[int, int]]] = []
        current: list[tuple[int, int]] = []
        for start, end in self.spacy.sentences(text):
            if not text[start:end].strip():
                continue
            if current and end - current[0][0] > self.chunk_chars:
                chunks.append(current)
                current = []
            current.append((start, end))
        if current:
            chunks.append(current)
        return chunks

    def request(self, passage: str):
        from audit.models.llm import ChatRequest

        user = ("Split the text below into atomic facts. Answer with a JSON list of strings, "
                "one fact per string.\n\nText:\n" + passage)
        return ChatRequest.make(
            [{"role": "system", "content": _SPLIT_SYSTEM}, {"role": "user", "content": user}],
            temperature=0.0, max_tokens=self.max_tokens, seed=0, json_schema=claims_schema(self.max_claims))

    def split(self, docs: Sequence[Document], *, progress: bool = False) -> list[list[Claim]]:
        jobs: list[tuple[int, list[tuple[int, int]]]] = []
        for i, doc in enumerate(docs):
            for chunk in self._chunks(doc.text):
                jobs.append((i, chunk))
        requests = [self.request(docs[i].text[chunk[0][0]:chunk[-1][1]]) for i, chunk in jobs]
        answers = self.llm.complete_batch(requests, progress=progress and "claim linker, splitting claims")
        out: list[list[Claim]] = [[] for _ in docs]
        for (i, chunk), answer in zip(jobs, answers):
            doc = docs[i]
            passage = doc.text[chunk[0][0]:chunk[-1][1]]
            # Claims must come from the passage: drop answers that share few words with it
            # (refusals, invented facts).
            texts = [t for t in parse_claim_list(answer) if word_overlap(t, passage) >= self.min_overlap]
            if not texts:
                self.fallbacks += 1
                for s, e in chunk:
                    piece = " ".join(doc.text[s:e].split())
                    if word_count(piece) >= 2:
                        out[i].append(Claim(doc.id, len(out[i]), piece, s, e, s, e))
                continue
            for text in texts:
                s, e = max(chunk, key=lambda r: word_overlap(text, doc.text[r[0]:r[1]]))
                out[i].append(Claim(doc.id, len(out[i]), text, s, e, s, e))
        return out


def make_splitter(kind: str, llm_getter=None, spacy: Spacy | None = None) -> ClaimSplitter:
    """``"sentences"`` or ``"llm"`` (``llm_getter()`` returns the model, loaded lazily)."""
    if kind == "sentences":
        return SentenceSplitter(spacy)
    if kind == "llm":
        if llm_getter is None:
            raise ValueError("the LLM claim splitter needs an LLM")
        return LLMSplitter(llm_getter(), spacy)
    from audit.core.errors import AnonauditError

    raise AnonauditError(f"unknown claim splitter {kind!r} (use 'sentences' or 'llm')")
