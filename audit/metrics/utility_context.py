"""Shared, lazily computed state of the utility metrics of one scenario.

Every metric of an audit reads the same expensive things: the terms and information
content of the originals, document embeddings, the fate of each original term in a
release. :class:`UtilityContext` computes each once (IC also on disk, see
:class:`~audit.metrics.ic.ICCache`) and hands it to every metric, so running seven
metrics costs about as much as running the most expensive one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from audit.core.data import Corpus, Document, Release, Span
from audit.core.errors import AnonauditError
from audit.metrics.ic import CONTEXT_TOKENS, CausalIC, ICCache, ICEstimator, MaskedIC, corpus_ic
from audit.metrics.terms import Term, TermExtractor
from audit.models.nlp import Spacy
from audit.models.resources import Resources

KEPT, REPLACED, DELETED = "kept", "replaced", "deleted"


@dataclass
class TermFate:
    """What a release did to one original term: kept, replaced (by ``counterpart``) or deleted.
    ``replacement``: what the spans touching it put in (their replacements, space-joined; empty
    for suppression), the counterpart TAE's TPS compares the term with."""

    status: str
    counterpart: str
    replacement: str = ""


def _overlapping(term: Term, spans: Sequence[Span]) -> list[Span]:
    out = []
    for s in spans:
        lo, hi = s.orig_start, s.orig_end
        if lo is None or hi is None:
            continue
        if (lo < term.end and term.start < hi) or (lo == hi and term.start < lo < term.end):
            out.append(s)
    return out


def term_fates(text: str, terms: Sequence[Term], spans: Sequence[Span]) -> list[TermFate]:
    """Fate of each term given the replaced spans (original offsets ``orig_start``/``orig_end``).

    A term touched by any replaced span counts as replaced; its counterpart is the term
    with each touching span swapped for its replacement ("Mr Galip Yalman" with
    "Galip Yalman" -> "PERSON" gives "Mr PERSON"). An empty counterpart is a deletion.
    """
    spans = sorted((s for s in spans if s.orig_start is not None), key=lambda s: (s.orig_start, s.orig_end))
    fates = []
    for term in terms:
        hits = _overlapping(term, spans)
        if not hits:
            fates.append(TermFate(KEPT, term.text))
            continue
        pieces, cursor = [], term.start
        for s in hits:
            if s.orig_start > cursor:
                pieces.append(text[cursor:s.orig_start])
            pieces.append(s.replacement or "")
            cursor = max(cursor, s.orig_end)
        if cursor < term.end:
            pieces.append(text[cursor:term.end])
        counterpart = " ".join("".join(pieces).split())
        put = " ".join(" ".join((s.replacement or "") for s in hits).split())
        if counterpart == term.text:
            fates.append(TermFate(KEPT, counterpart))
        else:
            fates.append(TermFate(REPLACED if counterpart else DELETED, counterpart, put))
    return fates


def _chunks(text: str, words: int) -> list[str]:
    toks = text.split()
    return [" ".join(toks[i:i + words]) for i in range(0, len(toks), words)] or [""]


@dataclass
class UtilityContext:
    """Lazily computed state shared by the utility metrics of one set of originals.

    ``ic``: ``"causal"`` (``llm``: an LLM spec or object) or ``"masked"`` (``ic_model``:
    a local MLM folder), or an :class:`~audit.metrics.ic.ICEstimator`. ``embedder``: a
    spec for :class:`audit.models.embed.Embedder` or any object with ``encode(texts)`` returning
    unit rows. ``ic_precision``: the causal scorer's arithmetic (``auto``, ``fp32``, ``bf16``:
    :class:`~audit.metrics.ic.CausalIC`). ``cache``: keep IC (and embeddings) on disk. ``resources``: the run's
    :class:`~audit.models.resources.Resources`, where the scorer LLM, the embedder and spaCy come
    from (a private set when not given, released by :meth:`close`). The metrics of a run share
    one context through :meth:`Resources.shared <audit.models.resources.Resources.shared>`.
    """

    originals: Corpus
    ic: str | ICEstimator = "causal"
    ic_model: str | None = None
    llm: Any = None
    embedder: Any = None
    context_tokens: int = CONTEXT_TOKENS
    mask_every: int = 6
    ic_precision: str = "auto"
    cache: bool = True
    cache_dir: str | None = None
    spacy: Spacy | None = None
    chunk_words: int = 200
    progress: bool = False
    resources: Resources | None = None
    _own_resources: bool = field(default=False, init=False, repr=False)
    _estimator: ICEstimator | None = field(default=None, init=False, repr=False)
    _ic_cache: ICCache | None = field(default=None, init=False, repr=False)
    _ic: dict[str, tuple[list[Term], np.ndarray]] = field(default_factory=dict, init=False, repr=False)
    _encoder: Any = field(default=None, init=False, repr=False)
    _fates: dict[tuple[str, Document], list[TermFate]] = field(default_factory=dict, init=False, repr=False)
    _doc_emb: dict[str, np.ndarray] = field(default_factory=dict, init=False, repr=False)
    _sim: dict[tuple[str, str], float] = field(default_factory=dict, init=False, repr=False)
    memo: dict[Any, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.resources is None:
            self.resources = Resources(progress=self.progress)
            self._own_resources = True
        if self.spacy is None:
            self.spacy = self.resources.spacy()

    def close(self) -> None:
        """Release the models of a private set of resources (a shared set is its owner's)."""
        self._estimator = None
        self._encoder = None
        if self._own_resources and self.resources is not None:
            self.resources.close()

    # ------------------------------------------------------------------ IC
    @property
    def estimator(self) -> ICEstimator:
        if self._estimator is None:
            if isinstance(self.ic, ICEstimator):
                self._estimator = self.ic
            elif self.ic == "masked":
                if not self.ic_model:
                    raise AnonauditError("--ic masked needs --ic-model: a local folder of a BERT-like model "
                                         "with its masked-LM head")
                self._estimator = MaskedIC(self.ic_model, every=self.mask_every)
            elif self.ic == "causal":
                llm = self.llm
                if llm is None or isinstance(llm, str):
                    llm = self.resources.llm(self.ic_model or llm or "scorer", cache=self.cache,
                                             what="the information-content model")
                self._estimator = CausalIC(llm, context_tokens=self.context_tokens, precision=self.ic_precision)
            else:
                raise AnonauditError(f"unknown IC estimator {self.ic!r} (use causal or masked)")
        return self._estimator

    def terms_ic(self, ids: Sequence[str] | None = None) -> dict[str, tuple[list[Term], np.ndarray]]:
        """Terms and IC of the originals with these ids (all by default), each computed once."""
        want = list(self.originals.ids if ids is None else ids)
        missing = [i for i in want if i not in self._ic and i in self.originals]
        if missing:
            if self._ic_cache is None:
                self._ic_cache = ICCache(self.estimator.identity, self.cache_dir, enabled=self.cache)
            sub = Corpus([self.originals[i] for i in missing], name=self.originals.name)
            self._ic.update(corpus_ic(sub, self.estimator, TermExtractor(self.spacy), cache=self._ic_cache,
                                      progress=self.progress, executor=self.resources.executor))
        return {i: self._ic[i] for i in want if i in self._ic}

    def cache_stats(self) -> dict[str, Any]:
        """What came from the disk caches (information content, embeddings), for the provenance."""
        out: dict[str, Any] = {}
        if self._ic_cache is not None:
            out["information_content"] = dict(self._ic_cache.stats)
        stats = getattr(self._encoder, "stats", None)
        if isinstance(stats, dict):
            out["embeddings"] = dict(stats)
        return out

    def ic_seconds(self) -> list[float]:
        return [] if self._ic_cache is None else self._ic_cache.seconds()

    # ------------------------------------------------------------------ releases
    def replaced(self, original: Document, released: Document) -> list[Span]:
        from audit.core.align import replaced_spans

        return replaced_spans(original, released)

    def fates(self, release: Release, doc_id: str) -> list[TermFate]:
        released = release.corpus[doc_id]
        key = (doc_id, released)  # by content: the context outlives the release objects it sees
        if key not in self._fates:
            orig = self.originals[doc_id]
            terms, _ = self.terms_ic([doc_id])[doc_id]
            self._fates[key] = term_fates(orig.text, terms, self.replaced(orig, released))
        return self._fates[key]

    # ------------------------------------------------------------------ embeddings
    @property
    def encoder(self) -> Any:
        if self._encoder is None:
            self._encoder = self.resources.embedder(self.embedder, cache=self.cache)
        return self._encoder

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        """The encoder's vectors of ``texts``, with its progress bar when its ``encode`` takes
        ``progress`` (ours does; any other object is asked ``encode(texts)`` only)."""
        import inspect

        encode = self.encoder.encode
        try:
            shows = "progress" in inspect.signature(encode).parameters
        except (TypeError, ValueError):  # a builtin or C encoder without a signature
            shows = False
        return encode(texts, progress=self.progress) if shows else encode(texts)

    def similarity(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """SIM = max(0, cosine) of each (original, replacement) pair; memoised."""
        todo = sorted({p for p in pairs if p not in self._sim and p[0] != p[1] and p[1].strip()})
        if todo:
            texts = sorted({t for p in todo for t in p})
            vecs = self._encode(texts)
            index = {t: i for i, t in enumerate(texts)}
            for a, b in todo:
                self._sim[(a, b)] = max(0.0, float(np.dot(vecs[index[a]], vecs[index[b]])))
        return [1.0 if a == b else (0.0 if not b.strip() else self._sim[(a, b)]) for a, b in pairs]

    def document_embeddings(self, docs: Sequence[Document], key: str) -> np.ndarray:
        """One unit vector per document: the mean of its ~``chunk_words``-word chunk embeddings
        (so long documents are read whole, not cut at the encoder's length limit)."""
        out = []
        need = [d for d in docs if f"{key}/{d.id}" not in self._doc_emb]
        if need:
            chunks = [_chunks(d.text, self.chunk_words) for d in need]
            flat = [c for cs in chunks for c in cs]
            vecs = self._encode(flat)
            pos = 0
            for d, cs in zip(need, chunks):
                v = vecs[pos:pos + len(cs)].mean(axis=0)
                pos += len(cs)
                self._doc_emb[f"{key}/{d.id}"] = v / (np.linalg.norm(v) or 1.0)
        for d in docs:
            out.append(self._doc_emb[f"{key}/{d.id}"])
        return np.array(out, dtype=np.float64)
