"""The delinker: rewrite what still links a de-identified document to its source.

A de-identifier hides names, dates and places, but a released document keeps most of its
wording, and the adversary of the phrase-search attack (:mod:`attackers.phrase_search`, after
Lison & Anderson, "Protecting de-identified documents from search-based linkage attacks")
holds the original collection: a phrase, or a combination of phrases, found in fewer than
``k`` of its documents links the release back. The delinker removes those links:

1. The collection the adversary can search (``collection``, plus optional ``extra_corpus``
   documents) is indexed once with the attack's n-gram index
   (:class:`~attackers.phrase_search.index.NgramIndex`).
2. For each released document, :func:`attackers.phrase_search.linking.linking_ngrams` (the
   attack's own definition) finds what links: the minimal non-overlapping n-grams (n <=
   ``max_n``) with document frequency < ``k`` and, with ``arity`` 2 or 3, the combinations of
   common n-grams that link together (their shortest member is rewritten). Text inside the
   spans the de-identifier replaced, and placeholder tokens, is never part of an n-gram, so it
   is never rewritten.
3. The document is cut into chunks of ``chunk_sentences`` spaCy sentences. Each chunk with
   something to rewrite goes to the LLM with those spans (at most ``max_spans`` per request;
   more make several requests) marked ``[[like this]]``, two worked
   examples, and a request for a JSON object: a short reasoning, then one truthful rephrasing
   per marked span (a JSON schema enforces it where the backend supports schemas). A
   rephrasing is refused when it copies the phrase's words, holds brackets (small models copy
   the marks), or is much longer (:func:`usable_rewrite`); the others are spliced in. The
   requests of a round are sent as one batch.
4. The new text's n-grams are checked against the index again, and what still links is sent
   again (later rounds sample at ``retry_temperature`` with another seed, so a refused
   rewrite is not just replayed from the answer cache), up to ``max_rounds`` rounds.
5. What still links after the last round is replaced by ``[REDACTED]`` (``on_failure="redact"``)
   or kept (``"keep"``), and counted.

``plain=True`` is the paper's baseline: the same model rewrites whole chunks without being
told which spans link (round 1 rewrites every chunk, later rounds the chunks that still
link); the de-identifier's spans are shown as ``{{1}}``, ``{{2}}`` markers the answer must
keep, and nothing is redacted.

Every change is recorded on the released document next to the de-identifier's spans: a span
with label ``REPHRASED`` (:data:`~audit.core.data.REPHRASED`, whose words stay searchable by
the attacks) or ``REDACTED``, its offsets in the new text, ``original`` (the de-identified
text it replaced), ``replacement`` and, when the de-identifier's spans say how, ``orig_start``/
``orig_end`` in the original document. Per-document counts go to ``meta["delinker"]``, run
totals to :meth:`Delinker.stats`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from attackers.phrase_search.attack import DEFAULT_PLACEHOLDER_PATTERN
from attackers.phrase_search.index import NgramIndex, collection_fingerprint
from attackers.phrase_search.linking import Links, blocked_ranges, linking_ngrams
from audit.core.data import REPHRASED, Corpus, Document, Release, Span, span_order
from audit.core.errors import AnonauditError
from audit.core.interfaces import Sanitizer
from audit.core.registry import register
from audit.models.llm import LLM, ChatRequest
from audit.models.nlp import DEFAULT_SPACY_MODEL
from audit.models.resources import resources_of

#: What a span the LLM could not fix becomes (a placeholder the attacks never search).
REDACTION = "[REDACTED]"
REDACTED_LABEL = "REDACTED"

# --------------------------------------------------------------------------- prompts

_SYSTEM_MARKED = (
    "You help publish a document without letting anyone find its source by searching for exact "
    "phrases. In the passage, some phrases are wrapped in [[double brackets]]. Give a new wording for "
    "each bracketed phrase only:\n"
    "- it must stay true to what the phrase says; it may be vaguer, but never add or change facts;\n"
    "- it must read naturally in place of the brackets and must not reuse the same word sequence;\n"
    "- leave placeholders such as [PERSON] or ***, and everything outside the brackets, alone.\n"
    "Reply with a JSON object only: \"reasoning\" (one short sentence on how you will reword) and "
    "\"rewrites\", a list with one {\"marked\": <the bracketed phrase>, \"new\": <its new wording>} "
    "per bracketed phrase, in the order they appear."
)

_EXAMPLES_MARKED = [
    ("In [DATE] the applicant, who [[ran a small bakery]] in [LOC], was stopped [[outside the municipal "
     "swimming pool]] by two police officers.",
     {"reasoning": "Describe the job and the place in more general words.",
      "rewrites": [{"marked": "ran a small bakery", "new": "had a food business"},
                   {"marked": "outside the municipal swimming pool", "new": "near a public sports venue"}]}),
    ("The [[regional court of appeal upheld]] the sentence of [NUMBER] years and [[ordered the seizure of "
     "his fishing boat]].",
     {"reasoning": "Keep the decisions but phrase them differently.",
      "rewrites": [{"marked": "regional court of appeal upheld", "new": "appellate judges confirmed"},
                   {"marked": "ordered the seizure of his fishing boat", "new": "had his vessel confiscated"}]}),
]

_SYSTEM_PLAIN = (
    "You help publish a document without letting anyone find its source by searching for exact "
    "phrases. Rewrite the passage in your own words: keep every fact and its meaning, but change the "
    "wording. Markers such as {{1}} stand for hidden text: keep each of them exactly once, in the same "
    "order. Reply with a JSON object only: \"reasoning\" (one short sentence on how you will reword) "
    "and \"rewritten\" (the new passage)."
)

_EXAMPLES_PLAIN = [
    ("In {{1}} the applicant, who ran a small bakery in {{2}}, was stopped outside the municipal "
     "swimming pool by two police officers.",
     {"reasoning": "Reorder the sentence and use other words for the job and the place.",
      "rewritten": "Two police officers stopped the applicant, a bakery owner from {{2}}, near the town's "
                   "public pool in {{1}}."}),
]

_MARK = re.compile(r"\{\{(\d+)\}\}")
_NON_WORD = re.compile(r"\W+")


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _merge(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted ranges with overlapping ones merged."""
    out: list[list[int]] = []
    for s, e in sorted(ranges):
        if out and s < out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _json_object(answer: str) -> dict[str, Any] | None:
    """The JSON object in an answer (the whole answer, else its outermost braces)."""
    for cand in (answer.strip(), answer[answer.find("{"): answer.rfind("}") + 1]):
        try:
            data = json.loads(cand)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def parse_rewrites(answer: str, marked: Sequence[str]) -> list[str | None]:
    """The new wording of each marked phrase from an LLM answer (None where there is no usable
    one: missing, empty, multi-line, still bracketed, or the same words as the phrase). Items
    are matched to phrases by their ``marked`` text when it names one, else by position."""
    data = _json_object(answer)
    items = data.get("rewrites") if data else None
    if items is None and data:
        items = next((v for v in data.values() if isinstance(v, list)), None)
    out: list[str | None] = [None] * len(marked)
    if not isinstance(items, list):
        return out
    wanted = [_norm(m) for m in marked]
    for pos, item in enumerate(items):
        if isinstance(item, dict):
            said, new = item.get("marked"), item.get("new")
        else:
            said, new = None, item
        slot = None
        if isinstance(said, str):
            slot = next((j for j, w in enumerate(wanted) if w == _norm(said) and out[j] is None), None)
        if slot is None and pos < len(marked) and out[pos] is None:
            slot = pos
        if slot is None or not isinstance(new, str):
            continue
        new = new.strip()
        if usable_rewrite(marked[slot], new):
            out[slot] = new
    return out


def usable_rewrite(original: str, new: str) -> bool:
    """Whether ``new`` can replace ``original``: one line, no brackets or braces (small models
    copy the [[marks]] or invent placeholders), not much longer, and not containing the
    original's words in their order (a copy, or the phrase padded with more words)."""
    if not new or "\n" in new or any(c in new for c in "[]{}") or len(new) > 2 * len(original) + 30:
        return False
    words_old = _words(original)
    return bool(words_old) and f" {words_old} " not in f" {_words(new)} "


def _words(text: str) -> str:
    return _norm(_NON_WORD.sub(" ", text))


def parse_plain(answer: str, n_markers: int) -> list[str] | None:
    """The rewritten passage split at its ``{{i}}`` markers (``n_markers + 1`` pieces), or None
    when there is none or its markers are not exactly 1..n in order."""
    data = _json_object(answer)
    text = data.get("rewritten") if data else None
    if not isinstance(text, str) or not text.strip():
        return None
    parts = _MARK.split(text)
    numbers = [int(x) for x in parts[1::2]]
    if numbers != list(range(1, n_markers + 1)):
        return None
    return parts[0::2]


# --------------------------------------------------------------------------- the draft


@dataclass
class _Edit:
    """One rewritten region: ``[start, end)`` in the current text, ``[src_start, src_end)`` in
    the input (de-identified) text; ``redacted`` when it is one redaction and nothing else."""

    start: int
    end: int
    src_start: int
    src_end: int
    redacted: bool = False


class _Draft:
    """A released document being rewritten: its current text, the de-identifier's spans
    (shifted to the current text, never touched) and the rewritten regions so far."""

    def __init__(self, doc: Document):
        self.doc = doc
        self.text = doc.text
        self.protected = list(doc.spans)
        self.edits: list[_Edit] = []

    def _to_src(self, pos: int) -> int:
        shift = 0
        for e in self.edits:
            if e.end <= pos:
                shift = e.src_end - e.end
            else:
                break
        return pos + shift

    def replace(self, start: int, end: int, new: str, *, redaction: bool = False) -> None:
        """Put ``new`` in place of ``text[start:end]`` (outside every protected span). Apply
        several replacements right to left so that the offsets of the others stay valid."""
        for p in self.protected:
            if p.start < end and start < p.end:
                raise AnonauditError(f"delinker: internal error, a rewrite [{start}, {end}) overlaps the "
                                     f"de-identifier's span [{p.start}, {p.end}) of document {self.doc.id!r}")
        over = [e for e in self.edits if e.start < end and start < e.end]
        ms = min([start] + [e.start for e in over])
        me = max([end] + [e.end for e in over])
        src_s = over[0].src_start if over and over[0].start == ms else self._to_src(ms)
        src_e = over[-1].src_end if over and over[-1].end == me else self._to_src(me)
        delta = len(new) - (end - start)
        self.text = self.text[:start] + new + self.text[end:]
        kept = [e for e in self.edits if e not in over]
        for e in kept:
            if e.start >= end:
                e.start += delta
                e.end += delta
        kept.append(_Edit(ms, me + delta, src_s, src_e, redacted=redaction and not over))
        self.edits = sorted(kept, key=lambda e: e.start)
        self.protected = [replace(p, start=p.start + delta, end=p.end + delta) if p.start >= end else p
                          for p in self.protected]

    def _orig_offset(self, src_pos: int) -> int | None:
        """Offset in the original document of a position of the input text outside its spans."""
        before = [s for s in self.doc.spans if s.end <= src_pos]
        if not before:
            return src_pos
        last = max(before, key=lambda s: s.end)
        return None if last.orig_end is None else last.orig_end + (src_pos - last.end)

    def document(self, meta: dict[str, Any]) -> Document:
        spans = list(self.protected)
        src = self.doc.text
        for e in self.edits:
            o_s, o_e = self._orig_offset(e.src_start), self._orig_offset(e.src_end)
            spans.append(Span(e.start, e.end, REDACTED_LABEL if e.redacted else REPHRASED,
                              replacement=self.text[e.start:e.end], original=src[e.src_start:e.src_end],
                              orig_start=o_s if o_e is not None else None,
                              orig_end=o_e if o_s is not None else None))
        return Document(self.doc.id, self.text, subject=self.doc.subject,
                        spans=tuple(sorted(spans, key=span_order)),
                        meta={**dict(self.doc.meta), "delinker": meta})


# --------------------------------------------------------------------------- the sanitizer


@register("sanitizer")
class Delinker(Sanitizer):
    """Reword, with an LLM, the phrases that still link a de-identified release to its source.

    Checked against the n-gram index of the collection until nothing links (see the module doc)."""

    name: ClassVar[str] = "delinker"
    description: ClassVar[str] = (
        "Takes a de-identified release and the document collection an adversary could search, finds every "
        "phrase (or combination of phrases) still found in fewer than k documents of that collection, and "
        "asks a language model to reword just those phrases truthfully, checking the result again until "
        "nothing links; phrases it cannot reword are redacted. Text the de-identifier replaced is never "
        "touched, and every rewrite is recorded on the released document."
    )

    def __init__(self, collection: Corpus | None = None, extra_corpus: Corpus | None = None, k: int = 2,
                 max_n: int = 7, arity: int = 1, max_rounds: int = 3,
                 on_failure: Literal["redact", "keep"] = "redact", plain: bool = False,
                 llm: str | LLM | None = None, seed: int = 0, temperature: float = 0.0,
                 retry_temperature: float = 0.7, chunk_sentences: int = 3, max_spans: int = 8,
                 spacy_model: str = DEFAULT_SPACY_MODEL,
                 placeholder_pattern: str | None = DEFAULT_PLACEHOLDER_PATTERN, lowercase: bool = True,
                 df_cap: int = 1000, max_candidates: int = 40, cache: bool = True, progress: bool = True):
        """
        collection: the documents the adversary can search (usually the originals).
        extra_corpus: more documents searched with the collection (public background texts).
        k: a phrase links when it occurs in fewer than k documents of the collection.
        max_n: longest phrase (n-gram), in words.
        arity: also remove combinations of 2 or 3 common phrases that link together; 1 = single phrases.
        max_rounds: rewrite-and-check rounds before giving up on a phrase.
        on_failure: what to do with phrases that still link after the last round: redact them or keep them.
        plain: the baseline: rewrite whole chunks without telling the model which phrases link.
        llm: the LLM that rewrites (a spec, see ``anonaudit models list``, or an LLM object).
        seed: seed of the LLM requests.
        temperature: sampling temperature of the first round.
        retry_temperature: sampling temperature of later rounds (another answer than the refused one).
        chunk_sentences: sentences per LLM request.
        max_spans: most phrases marked in one request (a chunk with more is sent in several requests).
        spacy_model: the spaCy pipeline that splits sentences.
        placeholder_pattern: regex of placeholder tokens never used in a phrase nor rewritten ('' for none).
        lowercase: fold case before matching phrases (off: case-sensitive).
        df_cap: combinations only use phrases found in at most this many documents.
        max_candidates: combinations use at most this many of the rarest phrases per document.
        cache: read and write the LLM answer cache.
        """
        self.collection = collection
        self.extra_corpus = extra_corpus
        self.k = k
        self.max_n = max_n
        self.arity = arity
        self.max_rounds = max_rounds
        self.on_failure = on_failure
        self.plain = plain
        self.llm = llm
        self.seed = seed
        self.temperature = temperature
        self.retry_temperature = retry_temperature
        self.chunk_sentences = chunk_sentences
        self.max_spans = max_spans
        self.spacy_model = spacy_model
        self.placeholder_pattern = placeholder_pattern
        self.lowercase = lowercase
        self.df_cap = df_cap
        self.max_candidates = max_candidates
        self.cache = cache
        self.progress = progress
        self._check()
        self._index: NgramIndex | None = None
        self._index_key: str | None = None
        self._llm: LLM | None = None
        self._totals: dict[str, int] = {}

    def _check(self) -> None:
        bad = []
        if not isinstance(self.k, int) or self.k < 2:
            bad.append(f"k must be an integer >= 2, got {self.k!r}")
        if not 1 <= self.max_n <= 32:
            bad.append(f"max_n must be between 1 and 32, got {self.max_n!r}")
        if self.arity not in (1, 2, 3):
            bad.append(f"arity must be 1, 2 or 3, got {self.arity!r}")
        if self.max_rounds < 1:
            bad.append(f"max_rounds must be at least 1, got {self.max_rounds!r}")
        if self.on_failure not in ("redact", "keep"):
            bad.append(f"on_failure must be 'redact' or 'keep', got {self.on_failure!r}")
        if self.chunk_sentences < 1 or self.max_spans < 1:
            bad.append(f"chunk_sentences and max_spans must be at least 1, got {self.chunk_sentences!r} "
                       f"and {self.max_spans!r}")
        if self.df_cap < self.k or self.max_candidates < 2:
            bad.append("df_cap must be >= k and max_candidates >= 2")
        for what, corpus in (("collection", self.collection), ("extra_corpus", self.extra_corpus)):
            if corpus is not None and not isinstance(corpus, Corpus):
                bad.append(f"{what} must be a loaded corpus, got {type(corpus).__name__} (on the command line: "
                           f"--{what.replace('_', '-')} FILE; in an audit spec: corpus:NAME)")
        if bad:
            raise AnonauditError("delinker: " + "; ".join(bad))

    # ------------------------------------------------------------------ resources

    def index(self) -> NgramIndex:
        """The n-gram index of the collection (and extra documents), built once."""
        if self.collection is None:
            raise AnonauditError("delinker needs the collection the adversary can search (--collection FILE, "
                                 "usually the original documents)")
        parts = [("collection", self.collection)]
        if self.extra_corpus is not None:
            parts.append(("extra", self.extra_corpus))
        fp = collection_fingerprint([(src, ((d.id, d.text) for d in c)) for src, c in parts])
        key = f"{fp}:{self.max_n}:{self.lowercase}"
        if self._index is None or self._index_key != key:
            self._index = NgramIndex.from_corpora(parts, max_n=self.max_n, lowercase=self.lowercase, fingerprint=fp)
            self._index_key = key
        return self._index

    def _get_llm(self) -> LLM:
        if self._llm is None:
            self._llm = resources_of(self).llm(self.llm, cache=self.cache, what="the delinker's rewriter")
        return self._llm

    def close(self) -> None:
        self._llm = None
        self._index = None
        self._index_key = None
        super().close()

    # ------------------------------------------------------------------ what links

    def _blocked(self, draft: _Draft) -> list[tuple[int, int]]:
        return blocked_ranges(draft.text, draft.protected, self.placeholder_pattern or None)

    def links(self, draft: _Draft) -> Links:
        return linking_ngrams(self.index(), draft.text, self.k, self.arity, blocked=self._blocked(draft),
                              df_cap=self.df_cap, max_candidates=self.max_candidates)

    @staticmethod
    def targets(links: Links) -> list[tuple[int, int]]:
        """Character ranges to rewrite: the n-grams to rephrase, overlapping ones merged."""
        tn = links.tn
        return _merge([(int(tn.char_start[i]), int(tn.char_end[i])) for i in links.to_rephrase()])

    def chunks(self, text: str, keep_whole: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """``[start, end)`` of consecutive chunks of ``chunk_sentences`` spaCy sentences covering
        the text; no chunk boundary falls inside a range of ``keep_whole``."""
        if not text:
            return []
        sents = resources_of(self).spacy(self.spacy_model, disable=("ner", "lemmatizer")).sentences(text)
        bounds = [s for j, (s, _) in enumerate(sents) if j and j % self.chunk_sentences == 0]
        bounds = [b for b in bounds if not any(s < b < e for s, e in keep_whole)]
        edges = [0] + bounds + [len(text)]
        return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]

    # ------------------------------------------------------------------ requests

    def _schema(self, n: int | None) -> dict[str, Any] | None:
        if not getattr(self._get_llm(), "supports_schema", False):
            return None
        reasoning = {"type": "string", "maxLength": 240}
        if n is None:
            return {"type": "object", "properties": {"reasoning": reasoning, "rewritten": {"type": "string"}},
                    "required": ["reasoning", "rewritten"]}
        item = {"type": "object",
                "properties": {"marked": {"type": "string"}, "new": {"type": "string", "minLength": 1}},
                "required": ["marked", "new"]}
        return {"type": "object",
                "properties": {"reasoning": reasoning,
                               "rewrites": {"type": "array", "items": item, "minItems": n, "maxItems": n}},
                "required": ["reasoning", "rewrites"]}

    def _request(self, system: str, examples, passage: str, schema, max_tokens: int, rnd: int) -> ChatRequest:
        messages = [{"role": "system", "content": system}]
        for ex_passage, ex_answer in examples:
            messages.append({"role": "user", "content": f"Passage:\n{ex_passage}"})
            messages.append({"role": "assistant", "content": json.dumps(ex_answer, ensure_ascii=False)})
        messages.append({"role": "user", "content": f"Passage:\n{passage}"})
        temperature = self.temperature if rnd == 1 else self.retry_temperature
        return ChatRequest.make(messages, temperature=temperature, max_tokens=max_tokens,
                                seed=self.seed + rnd - 1, json_schema=schema)

    def marked_request(self, text: str, chunk: tuple[int, int], spans: Sequence[tuple[int, int]],
                       rnd: int = 1) -> ChatRequest:
        """The request for one chunk with ``spans`` (offsets in ``text``, inside the chunk) marked."""
        a, b = chunk
        pieces, cur = [], a
        for s, e in spans:
            pieces += [text[cur:s], "[[", text[s:e], "]]"]
            cur = e
        pieces.append(text[cur:b])
        passage = "".join(pieces).strip()
        return self._request(_SYSTEM_MARKED, _EXAMPLES_MARKED, passage, self._schema(len(spans)),
                             96 + 48 * len(spans), rnd)

    def _plain_parts(self, draft: _Draft, chunk: tuple[int, int]) -> tuple[str, list[tuple[int, int]]]:
        """The chunk with protected ranges shown as ``{{i}}`` markers, and the ranges of the text
        between them (its rewritable pieces)."""
        a, b = chunk
        text = draft.text
        inner = text[a:b]
        lead = len(inner) - len(inner.lstrip())
        a2, b2 = a + lead, a + len(inner.rstrip())
        hidden = [(max(s, a2), min(e, b2)) for s, e in _merge(self._blocked(draft)) if s < b2 and a2 < e
                  or (s == e and a2 <= s <= b2)]
        pieces, out, cur = [], [], a2
        for j, (s, e) in enumerate(hidden, 1):
            pieces.append((cur, s))
            out += [text[cur:s], f"{{{{{j}}}}}"]
            cur = e
        pieces.append((cur, b2))
        out.append(text[cur:b2])
        return "".join(out), pieces

    # ------------------------------------------------------------------ one document

    def delink(self, doc: Document) -> Document:
        """The delinked version of one released document."""
        llm = self._get_llm()
        draft = _Draft(doc)
        counts = {"rounds": 0, "spans_sent": 0, "llm_requests": 0, "redacted": 0, "still_linking": 0,
                  "rewritten": 0}
        links = self.links(draft)
        for rnd in range(1, self.max_rounds + 1):
            if not links:
                break
            targets = self.targets(links)
            counts["rounds"] = rnd
            keep_whole = targets if not self.plain else targets + _merge(self._blocked(draft))
            chunks = self.chunks(draft.text, keep_whole)
            jobs: list[tuple[ChatRequest, Any]] = []
            for chunk in chunks:
                inside = [t for t in targets if chunk[0] <= t[0] and t[1] <= chunk[1]]
                if self.plain:
                    if rnd > 1 and not inside:
                        continue
                    passage, pieces = self._plain_parts(draft, chunk)
                    if not any(draft.text[s:e].strip() for s, e in pieces):
                        continue
                    req = self._request(_SYSTEM_PLAIN, _EXAMPLES_PLAIN, passage, self._schema(None),
                                        96 + 2 * llm.count_tokens(passage), rnd)
                    jobs.append((req, pieces))
                else:
                    for j in range(0, len(inside), self.max_spans):
                        group = inside[j:j + self.max_spans]
                        jobs.append((self.marked_request(draft.text, chunk, group, rnd), group))
                        counts["spans_sent"] += len(group)
            if not jobs:
                break
            answers = llm.complete_batch([r for r, _ in jobs])
            counts["llm_requests"] += len(jobs)
            replacements: list[tuple[int, int, str]] = []
            for (_, spans), answer in zip(jobs, answers):
                if self.plain:
                    new_pieces = parse_plain(answer, len(spans) - 1)
                    if new_pieces is None:
                        continue
                    for (s, e), new in zip(spans, new_pieces):
                        old = draft.text[s:e]
                        core_s = s + len(old) - len(old.lstrip())
                        core_e = s + len(old.rstrip())
                        if core_e > core_s and new.strip() and _norm(new) != _norm(old):
                            replacements.append((core_s, core_e, new.strip()))
                else:
                    news = parse_rewrites(answer, [draft.text[s:e] for s, e in spans])
                    replacements += [(s, e, new) for (s, e), new in zip(spans, news) if new is not None]
            for s, e, new in sorted(replacements, reverse=True):
                draft.replace(s, e, new)
            counts["rewritten"] += len(replacements)
            links = self.links(draft)
        if links and self.on_failure == "redact" and not self.plain:
            for _ in range(5):  # hiding a phrase can expose another combination; bounded
                targets = self.targets(links)
                for s, e in reversed(targets):
                    draft.replace(s, e, REDACTION, redaction=True)
                counts["redacted"] += len(targets)
                links = self.links(draft)
                if not links:
                    break
        counts["still_linking"] = int(len(links.to_rephrase())) if links else 0
        return draft.document(counts)

    # ------------------------------------------------------------------ the release

    def sanitize(self, corpus: Corpus, *, name: str | None = None) -> Release:
        t0 = time.perf_counter()
        self.index()
        from audit.core.progress import bar as progress_bar

        docs = []
        for doc in progress_bar(corpus, total=len(corpus), desc="delinking", unit="doc", enabled=self.progress):
            docs.append(self.delink(doc))
        name = name or self.name
        totals = {"documents": len(docs)}
        for d in docs:
            for key, value in d.meta["delinker"].items():
                totals[key] = totals.get(key, 0) + value
        totals["max_rounds_used"] = max((d.meta["delinker"]["rounds"] for d in docs), default=0)
        totals["documents_still_linking"] = sum(d.meta["delinker"]["still_linking"] > 0 for d in docs)
        self._totals[name] = totals
        self.record_timing(name, {"delink": time.perf_counter() - t0})
        return Release(name=name, corpus=Corpus(docs, name=name, source=corpus.source), aligned=True,
                       sanitizer=self.name, source=corpus.source)

    def stats(self) -> dict[str, Any]:
        """Timings, and per release: rounds used, spans sent, spans redacted, LLM requests,
        n-grams still linking (summed over documents)."""
        out = super().stats()
        if self._totals:
            out["delinker"] = {k: dict(v) for k, v in self._totals.items()}
        return out
