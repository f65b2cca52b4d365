"""The delinker sanitizer: find what links, ask for rewrites, check again, redact what is left."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from attackers.phrase_search.attack import DEFAULT_PLACEHOLDER_PATTERN
from audit.ngrams import NgramIndex, collection_fingerprint
from attackers.phrase_search.linking import Links, blocked_ranges, linking_ngrams
from audit.core.data import REPHRASED, Corpus, Document, Release, sanitize_corpus
from audit.core.errors import AnonauditError
from audit.core.interfaces import Sanitizer
from audit.core.registry import register, registry
from audit.models.llm import LLM, ChatRequest
from audit.models.nlp import DEFAULT_SPACY_MODEL
from audit.models.resources import UsesLLM, resources_of
from defenders.delinker.rewording_checks import delinker_check, rewrite_problem
from defenders.delinker.draft import Draft, cuts as _cuts, whole_rephrasings  # noqa: F401 (re-exported)
from defenders.delinker.prompts import (REDACTED_LABEL, REDACTION, EXAMPLES_MARKED, EXAMPLES_PLAIN, SYSTEM_MARKED,
                                        SYSTEM_PLAIN, merge_ranges, norm_words, parse_plain, parse_rewrites)
from defenders.selfcheck import stop_words
from defenders.delinker.repair import DelinkerRepair

# --------------------------------------------------------------------------- the sanitizer


@register("sanitizer")
class Delinker(UsesLLM, DelinkerRepair, Sanitizer):
    """Reword, with an LLM, the phrases that still link a de-identified release to its source.

    Checked against the n-gram index of the collection until nothing links (see the module doc)."""

    name: ClassVar[str] = "delinker"
    llm_role: ClassVar[str] = "the delinker's rewriter"
    #: ``anonaudit harden`` hands it the visible words an attack used, to reword (:meth:`repair`).
    repairs: ClassVar[frozenset[str]] = frozenset({"text"})
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
                 df_cap: int = 1000, max_candidates: int = 40, batch: int = 32, cache: bool = True,
                 progress: bool = True, detector: str | None = None):
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
        batch: documents delinked together (each round's requests go out at once: concurrently on a server, to the workers on a cluster); the same release whatever it is.
        cache: read and write the LLM answer cache.
        detector: a registered span detector (spacy_ner, presidio, a plugin's): what it finds in a document that records no replaced span is masked as [LABEL] before delinking.
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
        self.batch = batch
        self.cache = cache
        self.progress = progress
        self.detector = detector
        self._check()
        self._index: NgramIndex | None = None
        self._index_key: str | None = None
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
        if not isinstance(self.batch, int) or self.batch < 1:
            bad.append(f"batch must be an integer >= 1, got {self.batch!r}")
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
        if self.detector is not None:
            try:
                registry.get("detector", self.detector)
            except AnonauditError as exc:
                bad.append(f"detector: {exc}")
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

    def close(self) -> None:
        self._index = None
        self._index_key = None
        super().close()

    # ------------------------------------------------------------------ what links

    def _blocked(self, draft: Draft) -> list[tuple[int, int]]:
        return blocked_ranges(draft.text, draft.protected, self.placeholder_pattern or None)

    def links(self, draft: Draft) -> Links:
        return linking_ngrams(self.index(), draft.text, self.k, self.arity, blocked=self._blocked(draft),
                              df_cap=self.df_cap, max_candidates=self.max_candidates)

    @staticmethod
    def targets(links: Links) -> list[tuple[int, int]]:
        """Character ranges to rewrite: the n-grams to rephrase, overlapping ones merged."""
        tn = links.tn
        return merge_ranges([(int(tn.char_start[i]), int(tn.char_end[i])) for i in links.to_rephrase()])

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
        # the instructions and examples are the same in every request: evaluated once (shared)
        return ChatRequest.make(messages, temperature=temperature, max_tokens=max_tokens,
                                seed=self.seed + rnd - 1, json_schema=schema, shared=(len(messages) - 1,))

    def marked_request(self, text: str, chunk: tuple[int, int], spans: Sequence[tuple[int, int]],
                       rnd: int = 1, max_tokens: int | None = None) -> ChatRequest:
        """The request for one chunk with ``spans`` (offsets in ``text``, inside the chunk) marked;
        ``max_tokens`` for the answer (default: enough for as many short phrases)."""
        a, b = chunk
        pieces, cur = [], a
        for s, e in spans:
            pieces += [text[cur:s], "[[", text[s:e], "]]"]
            cur = e
        pieces.append(text[cur:b])
        passage = "".join(pieces).strip()
        return self._request(SYSTEM_MARKED, EXAMPLES_MARKED, passage, self._schema(len(spans)),
                             max_tokens or 96 + 48 * len(spans), rnd)

    def _plain_parts(self, draft: Draft, chunk: tuple[int, int]) -> tuple[str, list[tuple[int, int]]]:
        """The chunk with protected ranges shown as ``{{i}}`` markers, and the ranges of the text
        between them (its rewritable pieces)."""
        a, b = chunk
        text = draft.text
        inner = text[a:b]
        lead = len(inner) - len(inner.lstrip())
        a2, b2 = a + lead, a + len(inner.rstrip())
        hidden = [(max(s, a2), min(e, b2)) for s, e in merge_ranges(self._blocked(draft)) if s < b2 and a2 < e
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
        return self.delink_many([doc])[0]

    def delink_many(self, docs: Sequence[Document]) -> list[Document]:
        """:meth:`delink` for several documents, each round's requests of all of them sent
        together (concurrently on a server, to the workers on a cluster); every request is
        answered on its own, so the documents are those of one at a time."""
        llm = self._get_llm()
        drafts = [Draft(doc) for doc in docs]
        counts = [{"rounds": 0, "spans_sent": 0, "llm_requests": 0, "redacted": 0, "still_linking": 0,
                   "rewritten": 0, "rejected_unusable": 0, "rejected_invented": 0, "rejected_links": 0} for _ in docs]
        links = [self.links(d) for d in drafts]
        active = list(range(len(docs)))
        for rnd in range(1, self.max_rounds + 1):
            jobs: dict[int, list[tuple[ChatRequest, Any]]] = {}
            for i in active:
                if links[i]:
                    counts[i]["rounds"] = rnd
                    jobs[i] = self._round_jobs(llm, drafts[i], links[i], rnd, counts[i])
            active = [i for i in jobs if jobs[i]]  # nothing links, or nothing to send: done
            if not active:
                break
            requests = [r for i in active for r, _ in jobs[i]]
            answers = iter(llm.complete_batch(requests, progress=self.progress))
            for i in active:
                counts[i]["llm_requests"] += len(jobs[i])
                replacements = self._replacements(drafts[i], [(job, next(answers)) for job in jobs[i]], counts[i])
                for s, e, new in sorted(replacements, reverse=True):
                    drafts[i].replace(s, e, new)
                counts[i]["rewritten"] += len(replacements)
                links[i] = self.links(drafts[i])
        out = []
        for draft, link, count in zip(drafts, links, counts):
            if link and self.on_failure == "redact" and not self.plain:
                for _ in range(5):  # hiding a phrase can expose another combination; bounded
                    targets = self.targets(link)
                    for s, e in reversed(targets):
                        draft.replace(s, e, REDACTION, redaction=True)
                    count["redacted"] += len(targets)
                    link = self.links(draft)
                    if not link:
                        break
            count["still_linking"] = int(len(link.to_rephrase())) if link else 0
            out.append(draft.document(count))
        return out

    def _round_jobs(self, llm: LLM, draft: Draft, links: Links, rnd: int,
                    counts: dict[str, int]) -> list[tuple[ChatRequest, Any]]:
        """One round's requests for one document: each with its spans (guided) or the chunk's
        rewritable pieces (plain)."""
        targets = self.targets(links)
        keep_whole = targets if not self.plain else targets + merge_ranges(self._blocked(draft))
        jobs: list[tuple[ChatRequest, Any]] = []
        for chunk in self.chunks(draft.text, keep_whole):
            inside = [t for t in targets if chunk[0] <= t[0] and t[1] <= chunk[1]]
            if self.plain:
                if rnd > 1 and not inside:
                    continue
                passage, pieces = self._plain_parts(draft, chunk)
                if not any(draft.text[s:e].strip() for s, e in pieces):
                    continue
                req = self._request(SYSTEM_PLAIN, EXAMPLES_PLAIN, passage, self._schema(None),
                                    96 + 2 * llm.count_tokens(passage), rnd)
                jobs.append((req, pieces))
            else:
                for j in range(0, len(inside), self.max_spans):
                    group = inside[j:j + self.max_spans]
                    jobs.append((self.marked_request(draft.text, chunk, group, rnd), group))
                    counts["spans_sent"] += len(group)
        return jobs

    def _replacements(self, draft: Draft, answered: list[tuple[tuple[ChatRequest, Any], str]],
                      counts: dict[str, int]) -> list[tuple[int, int, str]]:
        """The edits that one round's answers make to ``draft`` (validated: :meth:`_valid`)."""
        replacements: list[tuple[int, int, str]] = []
        for (_, spans), answer in answered:
            if self.plain:
                new_pieces = parse_plain(answer, len(spans) - 1)
                if new_pieces is None:
                    continue
                for (s, e), new in zip(spans, new_pieces):
                    old = draft.text[s:e]
                    core_s = s + len(old) - len(old.lstrip())
                    core_e = s + len(old.rstrip())
                    if core_e > core_s and new.strip() and norm_words(new) != norm_words(old):
                        replacements.append((core_s, core_e, new.strip()))
            else:
                news = self._valid(draft, spans, parse_rewrites(answer, [draft.text[s:e] for s, e in spans]), counts)
                replacements += [(s, e, new) for (s, e), new in zip(spans, news) if new is not None]
        return replacements

    def _valid(self, draft: Draft, spans: Sequence[tuple[int, int]], news: Sequence[str | None],
               counts: dict[str, int]) -> list[str | None]:
        """``news`` with each rewording that is unusable, invents a fact or links by itself
        (:mod:`defenders.delinker.rewording_checks`) replaced by None, and counted."""
        index = self.index() if self.collection is not None else None
        out: list[str | None] = []
        for (s, e), new in zip(spans, news):
            why = "unusable" if new is None else rewrite_problem(draft.text[s:e], new, index, self.k)
            if why:
                counts[f"rejected_{why}"] = counts.get(f"rejected_{why}", 0) + 1
            out.append(None if why else new)
        return out

    # ------------------------------------------------------------------ the release

    def sanitize(self, corpus: Corpus, *, name: str | None = None) -> Release:
        t0 = time.perf_counter()
        self.index()
        from audit.runtime.progress import bar as progress_bar

        docs: list[Document] = []
        todo = list(self.deidentified(corpus))
        with progress_bar(total=len(todo), desc="delinking", unit="doc", enabled=self.progress) as bar:
            for lo in range(0, len(todo), self.batch):
                docs += self.delink_many(todo[lo:lo + self.batch])
                bar.update(len(docs) - bar.n)
        name = name or self.name
        totals = {"documents": len(docs)}
        for d in docs:
            for key, value in d.meta["delinker"].items():
                totals[key] = totals.get(key, 0) + value
        totals["max_rounds_used"] = max((d.meta["delinker"]["rounds"] for d in docs), default=0)
        totals["documents_still_linking"] = sum(d.meta["delinker"]["still_linking"] > 0 for d in docs)
        stops = stop_words(resources_of(self).spacy(self.spacy_model, disable=("ner", "lemmatizer")).nlp)
        totals["self_check"] = delinker_check(list(zip(todo, docs)), stops, (REPHRASED, REDACTED_LABEL))
        self._totals[name] = totals
        self.record_timing(name, {"delink": time.perf_counter() - t0})
        return Release(name=name, corpus=Corpus(docs, name=name, source=corpus.source), aligned=True,
                       sanitizer=self.name, source=corpus.source)

    def deidentified(self, corpus: Corpus) -> Corpus:
        """``corpus`` with what the ``detector`` finds masked as ``[LABEL]`` in every document that
        records no replaced span (the others, and every document when there is no detector, as
        they are): the de-identification the delinker then completes."""
        bare = [doc for doc in corpus if not any(s.original is not None for s in doc.spans)]
        if self.detector is None or not bare:
            return corpus
        found = registry.create("detector", self.detector).use(resources_of(self)).detect([d.text for d in bare])
        spans = {doc.id: [dataclasses.replace(s, replacement=f"[{(s.label or 'REDACTED').upper()}]") for s in doc_spans]
                 for doc, doc_spans in zip(bare, found)}
        masked = sanitize_corpus(Corpus(bare, name=corpus.name), spans, name=corpus.name or self.name)
        by_id = {doc.id: doc for doc in masked.corpus}
        return Corpus([by_id.get(doc.id, doc) for doc in corpus], name=corpus.name, source=corpus.source)

    def warnings(self, name: str) -> list[str]:
        """The self-check's warnings on release ``name`` (:mod:`defenders.selfcheck`)."""
        return list(self._totals.get(name, {}).get("self_check", {}).get("warnings", []))

    def stats(self) -> dict[str, Any]:
        """Timings, and per release: rounds used, spans sent, spans redacted, LLM requests,
        n-grams still linking (summed over documents)."""
        out = super().stats()
        if self._totals:
            out["delinker"] = {k: dict(v) for k, v in self._totals.items()}
        return out
