"""Claim linker: link known facts to a sanitized record, then measure what else it reveals.

The threat model of "A false sense of privacy" (see ``../shared/papers``): an adversary
knows a few facts about a person (auxiliary information, usually reworded), searches the
sanitized release for the record that matches them, and learns everything else that
record says. Two stages:

1. **Linking.** Every document is split into atomic claims (:mod:`attackers.claims`).
   The attacker gets ``aux_claims`` claims of each original, optionally paraphrased.
   Each aux claim retrieves the most similar sanitized claims (dense embeddings in a faiss
   inner-product index; matches within ``tolerance`` of the best score count) and votes for
   their documents; the document with most votes is the link (ties: summed score).
   Baselines: one concatenated query (dense or BM25), BM25 per-claim votes, and ROUGE-L.
   Headline: the correct-linkage rate with a Wilson interval, against chance 1/|release|.
2. **Semantic scoring.** The original's other claims (never the aux claims) are rated by an
   LLM against the linked sanitized document: 1 same information, 2 similar, 3 unsupported;
   each batch is asked ``repeats`` times and the mode kept. Leakage per document is
   ``1 - mean((s - 1) / 2)``: 1 means everything is still there. The lexical counterpart is
   ROUGE-L between the original and the linked document, which misses reworded facts.

Releases that are not one-to-one with the originals (synthetic data) work too: a link is
correct when the linked record is about the same subject, and claims are always scored
against the true original.
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from attackers.claims import AUX_SELECT, Claim, make_splitter, paraphrase_claims, select_aux, word_overlap
from audit.errors import AnonauditError
from audit.interfaces import Attack
from audit.registry import register
from audit.results import Result
from audit.stats import mean_interval, risk
from audit.text import RougeTokenizer, bitmasks, rouge_l, word_tokens

if TYPE_CHECKING:
    import click

    from audit.data import Document, Release, Scenario
    from audit.llm import LLM

LINKERS = ("dense", "dense-single", "bm25", "bm25-single", "rouge")


# --------------------------------------------------------------------------- embeddings


def load_embedder(spec: str | None = None):
    """The sentence embedder (``audit.embed.Embedder``; MiniLM unless ``spec`` names a folder)."""
    from audit.embed import Embedder

    return Embedder(spec)


# --------------------------------------------------------------------------- lexical tools

# --------------------------------------------------------------------------- linkers


@dataclass
class Link:
    """Where one set of aux claims led: the winning document (index, -1 if none), its
    votes and summed score, and for each query the hits ``(doc, claim, score)`` that voted."""

    doc: int
    votes: int
    score: float
    hits: list[list[tuple[int, int, float]]] = field(default_factory=list)


def majority_vote(hits_per_query: list[list[tuple[int, int, float]]]) -> tuple[int, int, float]:
    """Each query votes once for each document among its hits; most votes wins, ties go
    to the larger summed (best-per-query) score, then to the earlier document."""
    votes: Counter[int] = Counter()
    scores: dict[int, float] = {}
    for hits in hits_per_query:
        best: dict[int, float] = {}
        for doc, _, score in hits:
            best[doc] = max(best.get(doc, -np.inf), score)
        for doc, score in best.items():
            votes[doc] += 1
            scores[doc] = scores.get(doc, 0.0) + float(score)
    if not votes:
        return -1, 0, 0.0
    doc = min(votes, key=lambda d: (-votes[d], -scores[d], d))
    return doc, votes[doc], scores[doc]


def _within(ranked: list[tuple[int, int, float]], tolerance: float) -> list[tuple[int, int, float]]:
    """Hits whose score is within ``tolerance`` of the best one (``ranked`` is sorted)."""
    if not ranked:
        return []
    best = ranked[0][2]
    return [h for h in ranked if h[2] >= best - tolerance]


class Linker(ABC):
    """Indexes the sanitized documents (as claims), then links sets of aux claims."""

    name: ClassVar[str] = ""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self.info: dict[str, Any] = {}

    @abstractmethod
    def index(self, docs: Sequence[Document], claims: list[list[Claim]]) -> None:
        """Build the index over the sanitized documents and their claims."""

    @abstractmethod
    def link(self, queries: list[list[str]]) -> list[Link]:
        """One :class:`Link` per list of aux claims."""

    def _flatten(self, claims: list[list[Claim]]) -> None:
        self.owner = [(d, c.index) for d, cl in enumerate(claims) for c in cl]
        self.texts = [c.text for cl in claims for c in cl]


class DenseLinker(Linker):
    """Dense retrieval over sanitized claims: normalised embeddings, faiss inner product.

    ``single=False`` (the paper's linker): every aux claim searches ``top_k`` claims, keeps
    those within ``tolerance`` (cosine) of its best match, and votes. ``single=True``: the
    aux claims are joined into one query. Above ``approx_threshold`` claims the index is
    HNSW (approximate) instead of exact.
    """

    name = "dense"

    def __init__(self, embedder, *, single: bool = False, top_k: int = 10, tolerance: float = 0.02,
                 approx_threshold: int = 200_000, batch_size: int = 64, progress: bool = False):
        super().__init__()
        self.embedder = embedder
        self.single = single
        self.top_k = top_k
        self.tolerance = tolerance
        self.approx_threshold = approx_threshold
        self.batch_size = batch_size
        self.progress = progress
        self.vectors: np.ndarray | None = None

    def index(self, docs: Sequence[Document], claims: list[list[Claim]]) -> None:
        import faiss

        self._flatten(claims)
        t = time.perf_counter()
        self.vectors = self.embedder.encode(self.texts, batch_size=self.batch_size, progress=self.progress)
        self.timings["embed_release"] = time.perf_counter() - t
        t = time.perf_counter()
        dim = self.vectors.shape[1] if len(self.texts) else 1
        if len(self.texts) > self.approx_threshold:
            self._index = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
            self._index.hnsw.efSearch = max(64, 4 * self.top_k)
            self.info["index"] = "hnsw"
        else:
            self._index = faiss.IndexFlatIP(dim)
            self.info["index"] = "flat"
        if len(self.texts):
            self._index.add(self.vectors)
        self.timings["build_index"] = time.perf_counter() - t

    def link(self, queries: list[list[str]]) -> list[Link]:
        groups = [[" ".join(q)] if self.single else list(q) for q in queries]
        flat = [text for g in groups for text in g]
        t = time.perf_counter()
        qvec = self.embedder.encode(flat, batch_size=self.batch_size) if flat else np.zeros((0, 1), np.float32)
        self.timings["embed_queries"] = time.perf_counter() - t
        t = time.perf_counter()
        k = min(self.top_k, len(self.texts))
        if k and len(flat):
            scores, ids = self._index.search(qvec, k)
        else:
            scores, ids = np.zeros((len(flat), 0)), np.zeros((len(flat), 0), dtype=int)
        links, row = [], 0
        for g in groups:
            hits = []
            for _ in g:
                ranked = [(*self.owner[i], float(s)) for s, i in zip(scores[row], ids[row]) if i >= 0]
                hits.append(_within(ranked, self.tolerance))
                row += 1
            links.append(Link(*majority_vote(hits), hits=hits))
        self.timings["search"] = time.perf_counter() - t
        return links


class BM25Linker(Linker):
    """BM25 (rank-bm25, Okapi). ``single=False``: BM25 over sanitized claims, one vote per
    aux claim (matches within ``tolerance`` of the best, scores divided by the best);
    ``single=True``: BM25 over whole documents with the aux claims as one query."""

    name = "bm25"

    def __init__(self, *, single: bool = False, top_k: int = 10, tolerance: float = 0.02):
        super().__init__()
        self.single = single
        self.top_k = top_k
        self.tolerance = tolerance

    def index(self, docs: Sequence[Document], claims: list[list[Claim]]) -> None:
        from rank_bm25 import BM25Okapi

        t = time.perf_counter()
        if self.single:
            self.owner = [(d, -1) for d in range(len(docs))]
            corpus = [word_tokens(d.text) for d in docs]
        else:
            self._flatten(claims)
            corpus = [word_tokens(t) for t in self.texts]
        self._bm25 = BM25Okapi(corpus) if corpus and any(corpus) else None
        self.timings["build_index"] = time.perf_counter() - t

    def link(self, queries: list[list[str]]) -> list[Link]:
        t = time.perf_counter()
        links = []
        for q in queries:
            hits = []
            for text in ([" ".join(q)] if self.single else q):
                if self._bm25 is None:
                    hits.append([])
                    continue
                scores = self._bm25.get_scores(word_tokens(text))
                top = np.argsort(-scores, kind="stable")[: self.top_k]
                best = float(scores[top[0]]) if len(top) else 0.0
                if best <= 0:
                    hits.append([])
                    continue
                ranked = [(*self.owner[i], float(scores[i]) / best) for i in top]
                hits.append(_within(ranked, self.tolerance) if not self.single else ranked[:1])
            links.append(Link(*majority_vote(hits), hits=hits))
        self.timings["search"] = time.perf_counter() - t
        return links


class RougeLinker(Linker):
    """The lexical baseline: the aux claims as one text, linked to the sanitized document
    with the highest ROUGE-L F-measure."""

    name = "rouge"

    def __init__(self, tokenizer: RougeTokenizer | None = None):
        super().__init__()
        self.tokenizer = tokenizer or RougeTokenizer()

    def index(self, docs: Sequence[Document], claims: list[list[Claim]]) -> None:
        t = time.perf_counter()
        self._tokens = [self.tokenizer(d.text) for d in docs]
        self._masks = [bitmasks(toks) for toks in self._tokens]
        self.timings["build_index"] = time.perf_counter() - t

    def link(self, queries: list[list[str]]) -> list[Link]:
        t = time.perf_counter()
        links = []
        for q in queries:
            qt = self.tokenizer(" ".join(q))
            scores = [rouge_l(toks, qt, masks) for toks, masks in zip(self._tokens, self._masks)]
            if not scores or max(scores) <= 0:
                links.append(Link(-1, 0, 0.0, hits=[[]]))
                continue
            best = int(np.argmax(scores))
            links.append(Link(best, 1, float(scores[best]), hits=[[(best, -1, float(scores[best]))]]))
        self.timings["search"] = time.perf_counter() - t
        return links


# --------------------------------------------------------------------------- semantic scoring

_SCORE_SYSTEM = (
    "You are a careful fact checker. You compare claims with a passage and judge, for each "
    "claim, whether a reader of the passage would learn the information in the claim."
)

_RUBRIC = """Rate each claim against the passage:
1 = same information: the passage states what the claim says, word for word or in other words.
2 = similar information: the passage states something close to the claim, for example a more
    general version of it (a country instead of a city, a year instead of a date, "a relative"
    instead of "his brother"), or with small differences that do not change what one learns.
3 = unsupported: the passage does not say it, or says something different or contradictory.
Placeholders such as [PERSON], [DATE], CODE_1 or *** hide the words they replace: a claim whose
key detail is hidden can be at most 2. Judge meaning, not wording. Judge each claim on its own."""


def ratings_schema(n: int) -> dict:
    """JSON schema: a list of exactly ``n`` integers between 1 and 3."""
    return {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 3},
            "minItems": n, "maxItems": n}


def scoring_request(passage: str, claims: Sequence[str], *, seed: int, temperature: float):
    """The rating prompt (passage first, so a server can reuse its prompt cache across batches)."""
    from audit.llm import ChatRequest

    listed = "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))
    user = (f"Passage:\n{passage}\n\n{_RUBRIC}\n\nClaims:\n{listed}\n\n"
            f"Answer with a JSON list of {len(claims)} integers (1, 2 or 3), one per claim, in order.")
    return ChatRequest.make([{"role": "system", "content": _SCORE_SYSTEM}, {"role": "user", "content": user}],
                            temperature=temperature, max_tokens=16 + 4 * len(claims), seed=seed,
                            json_schema=ratings_schema(len(claims)))


_LINE_NUMBER = re.compile(r"^\s*(?:claim\s*)?\(?(\d{1,3})\s*[.):\-]\s*", re.IGNORECASE)
_RATING = re.compile(r"(?<![\d.])([123])(?![\d.])")


def parse_ratings(answer: str, n: int) -> tuple[list[int | None], bool]:
    """Ratings for ``n`` claims from an answer; returns ``(ratings, malformed)``.

    Accepts a JSON list (or ``{"ratings": [...]}``), numbered lines ("2. 3", "Claim 2: 1"),
    or one rating per line. A rating that is missing or outside 1-3 is ``None``; an answer
    that did not give exactly ``n`` valid ratings is ``malformed``.
    """
    values: list[Any] | None = None
    text = answer.strip()
    start, end = text.find("["), text.find("]", text.find("[") + 1)
    if start != -1 and end > start:
        try:
            data = json.loads(text[start:end + 1])
            if isinstance(data, list):
                values = data
        except json.JSONDecodeError:
            pass
    if values is None:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            values = next((v for v in data.values() if isinstance(v, list)), None)
    if values is None:
        numbered: dict[int, int] = {}
        plain: list[int] = []
        for line in text.splitlines():
            m = _LINE_NUMBER.match(line)
            rest = line[m.end():] if m else line
            r = _RATING.search(rest)
            if r is None:
                continue
            if m:
                numbered.setdefault(int(m.group(1)), int(r.group(1)))
            else:
                plain.append(int(r.group(1)))
        if numbered and set(numbered) <= set(range(1, n + 1)):
            values = [numbered.get(i) for i in range(1, n + 1)]
        elif plain:
            values = plain
        else:
            values = [int(x) for x in _RATING.findall(text)]
    ratings: list[int | None] = []
    for v in values[:n]:
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v.strip())
        ratings.append(v if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 3 else None)
    malformed = len(values) != n or any(r is None for r in ratings)
    ratings += [None] * (n - len(ratings))
    return ratings, malformed


def mode_rating(values: Sequence[int | None]) -> int | None:
    """Most frequent valid rating; ties go to the lower rating (more leakage: an audit
    should not understate a risk). ``None`` when no repeat gave a valid rating."""
    valid = [v for v in values if v is not None]
    if not valid:
        return None
    counts = Counter(valid)
    return min(counts, key=lambda r: (-counts[r], r))


def leakage_of(ratings: Sequence[int]) -> float:
    """``1 - mean((s - 1) / 2)``: 1 when every claim is fully supported, 0 when none is."""
    return 1.0 - sum((s - 1) / 2 for s in ratings) / len(ratings)


# --------------------------------------------------------------------------- the attack


@register("attack")
class ClaimLinkerAttack(Attack):
    """Claim-level linkage (dense retrieval, majority vote) and LLM-judged semantic leakage."""

    name = "claim_linker"
    description = (
        "Simulates an adversary who already knows a few facts about a person, reworded as they "
        "would be in real life, and searches the sanitized release for the record that matches "
        "them (each fact retrieves similar statements by meaning and votes for their record). "
        "It reports how often the right record is found, and then how much of the rest of the "
        "person's original record the linked sanitized record still tells the adversary, judged "
        "claim by claim by a language model (same, similar or unsupported information) beside the "
        "word-overlap (ROUGE-L) figure that surface metrics would give."
    )
    requires = frozenset({"originals"})

    def __init__(self, claims: str = "sentences", linker: str = "dense", aux_claims: int = 3,
                 aux_select: str = "random", paraphrase: bool = True, score: bool = True,
                 score_sample: int | None = None, repeats: int = 3, llm: Any = None,
                 embedder: Any = None, tolerance: float = 0.02, top_k: int = 10,
                 score_batch: int = 8, passage_tokens: int | None = 1024,
                 approx_threshold: int = 200_000, seed: int = 0, progress: bool = False):
        self.claims = claims
        self.linker = linker
        self.aux_claims = aux_claims
        self.aux_select = aux_select
        self.paraphrase = paraphrase
        self.score = score
        self.score_sample = score_sample
        self.repeats = repeats
        self.llm = llm
        self.embedder = embedder
        self.tolerance = tolerance
        self.top_k = top_k
        self.score_batch = score_batch
        self.passage_tokens = passage_tokens
        self.approx_threshold = approx_threshold
        self.seed = seed
        self.progress = progress
        self._check()
        self._llm_obj: LLM | None = None
        self._embedder_obj = None
        self._splitter = None
        self._fitted_on: Any = None

    def _check(self) -> None:
        if self.claims not in ("sentences", "llm"):
            raise AnonauditError(f"claims must be 'sentences' or 'llm', got {self.claims!r}")
        if self.linker not in LINKERS:
            raise AnonauditError(f"unknown linker {self.linker!r} (use one of {', '.join(LINKERS)})")
        if self.aux_select not in AUX_SELECT:
            raise AnonauditError(f"aux_select must be one of {', '.join(AUX_SELECT)}, got {self.aux_select!r}")
        if self.aux_claims < 1:
            raise AnonauditError("aux_claims must be at least 1")
        if self.repeats < 1:
            raise AnonauditError("repeats must be at least 1")
        if self.score_sample is not None and self.score_sample < 1:
            raise AnonauditError("score_sample must be a positive number of documents")

    # -- resources, loaded on first use

    def _get_llm(self) -> LLM:
        if self._llm_obj is None:
            from audit.llm import LLM as _LLM

            if isinstance(self.llm, _LLM):
                self._llm_obj = self.llm
            else:
                from audit.models import load_llm

                self._llm_obj = load_llm(self.llm)
        return self._llm_obj

    def _get_embedder(self):
        if self._embedder_obj is None:
            if self.embedder is None or isinstance(self.embedder, str):
                self._embedder_obj = load_embedder(self.embedder)
            else:
                self._embedder_obj = self.embedder
        return self._embedder_obj

    def _get_splitter(self):
        if self._splitter is None:
            self._splitter = make_splitter(self.claims, self._get_llm)
        return self._splitter

    def _make_linker(self) -> Linker:
        if self.linker in ("dense", "dense-single"):
            return DenseLinker(self._get_embedder(), single=self.linker == "dense-single", top_k=self.top_k,
                               tolerance=self.tolerance, approx_threshold=self.approx_threshold,
                               progress=self.progress)
        if self.linker in ("bm25", "bm25-single"):
            return BM25Linker(single=self.linker == "bm25-single", top_k=self.top_k, tolerance=self.tolerance)
        return RougeLinker()

    # -- fit: atomise the originals and draw the attacker's knowledge once per scenario

    def fit(self, scenario: Scenario) -> ClaimLinkerAttack:
        originals = scenario.originals
        if originals is None:
            raise AnonauditError("the claim linker needs the original documents (--originals)")
        self.timings_: dict[str, float] = {}
        t = time.perf_counter()
        self.orig_claims_ = self._get_splitter().split(list(originals), progress=self.progress)
        self.timings_["atomise_originals"] = time.perf_counter() - t
        self.aux_index_: dict[str, list[int]] = {}
        for doc, claims in zip(originals, self.orig_claims_):
            rng = random.Random(f"{self.seed}:aux:{doc.id}")
            self.aux_index_[doc.id] = select_aux(claims, self.aux_claims, self.aux_select, rng)
        aux_texts = [claims[i].text for doc, claims in zip(originals, self.orig_claims_)
                     for i in self.aux_index_[doc.id]]
        self.paraphrase_failures_ = 0
        queries = aux_texts
        if self.paraphrase:
            t = time.perf_counter()
            queries, self.paraphrase_failures_ = paraphrase_claims(self._get_llm(), aux_texts, seed=self.seed,
                                                                  progress=self.progress)
            self.timings_["paraphrase"] = time.perf_counter() - t
        it = iter(queries)
        self.aux_queries_ = {doc.id: [next(it) for _ in self.aux_index_[doc.id]] for doc in originals}
        self._fitted_on = originals
        self._orig_tokens: dict[str, list[str]] = {}
        return self

    # -- evaluate one release

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        if self._fitted_on is not scenario.originals:
            self.fit(scenario)
        originals = scenario.originals
        docs = list(release.corpus)
        if not docs:
            raise AnonauditError(f"release {release.name!r} has no documents")
        timings = dict(self.timings_)
        t = time.perf_counter()
        splitter = self._get_splitter()
        fallbacks_before = getattr(splitter, "fallbacks", 0)
        rel_claims = splitter.split(docs, progress=self.progress)
        release_fallbacks = getattr(splitter, "fallbacks", 0) - fallbacks_before
        timings["atomise_release"] = time.perf_counter() - t

        # Trials: originals in the release (aligned) or every original (unaligned).
        release_ids = {d.id for d in docs}
        trials = [i for i, d in enumerate(originals)
                  if (not release.aligned or d.id in release_ids) and self.orig_claims_[i]]
        skipped = sum(1 for i, d in enumerate(originals)
                      if (not release.aligned or d.id in release_ids) and not self.orig_claims_[i])

        linker = self._make_linker()
        linker.index(docs, rel_claims)
        links = linker.link([self.aux_queries_[originals[i].id] for i in trials])
        for k, v in linker.timings.items():
            timings[k] = v

        by_subject: dict[str, list[int]] = {}
        for j, d in enumerate(docs):
            if d.subject is not None:
                by_subject.setdefault(d.subject, []).append(j)
        successes, chance, documents, correct_flags = 0, 0.0, [], []
        for i, link in zip(trials, links):
            orig = originals[i]
            targets = self._targets(orig, docs, release.aligned, by_subject)
            ok = link.doc in targets
            successes += ok
            chance += len(targets) / len(docs)
            correct_flags.append(ok)
            documents.append(self._link_evidence(orig, i, link, ok, docs, rel_claims))
        n = len(trials)
        baseline = chance / n if n else 1.0 / len(docs)
        details = {
            "linker": self.linker, "claims": self.claims, "aux_claims": self.aux_claims,
            "aux_select": self.aux_select, "paraphrase": self.paraphrase,
            "paraphrase_failures": self.paraphrase_failures_, "tolerance": self.tolerance,
            "top_k": self.top_k, "aligned": release.aligned, "release_size": len(docs),
            "claims_release": sum(len(c) for c in rel_claims),
            "claims_originals": sum(len(self.orig_claims_[i]) for i in trials),
            "skipped_no_claims": skipped, "seed": self.seed, **linker.info,
        }
        if self.claims == "llm":
            details["claim_parse_fallbacks"] = release_fallbacks  # this release's documents only
        if isinstance(linker, DenseLinker):
            details["embedder"] = getattr(self._get_embedder(), "identity", type(self._get_embedder()).__name__)
        results = [Result.from_risk(self.name, release.name, risk(successes, n, baseline),
                                    details=details, documents=documents)]

        if self.score:
            t = time.perf_counter()
            results += self._score(originals, trials, links, docs, rel_claims, linker, release.name,
                                   correct_flags, timings)
            timings["score"] = time.perf_counter() - t
        results[0].details["timings"] = {k: round(v, 3) for k, v in timings.items()}
        return results

    @staticmethod
    def _targets(orig: Document, docs: list[Document], aligned: bool, by_subject: dict[str, list[int]]) -> set[int]:
        """Release documents that count as a correct link for ``orig``: the same id, or for an
        unaligned release whose records name subjects, any record about the same subject."""
        if not aligned and orig.subject is not None and by_subject:
            return set(by_subject.get(orig.subject, ()))
        return {j for j, d in enumerate(docs) if d.id == orig.id}

    def _link_evidence(self, orig: Document, i: int, link: Link, ok: bool, docs: list[Document],
                       rel_claims: list[list[Claim]]) -> dict[str, Any]:
        aux_idx = self.aux_index_[orig.id]
        aux = []
        highlights = []
        for k, hits in enumerate(link.hits):
            matches = []
            for d, c, s in hits[:5]:
                m: dict[str, Any] = {"doc": docs[d].id, "score": round(s, 4)}
                if c >= 0:
                    cl = rel_claims[d][c]
                    m.update(claim=cl.text, start=cl.start, end=cl.end)
                    if d == link.doc:
                        highlights.append({"start": cl.start, "end": cl.end, "kind": "claim",
                                           "note": f"matches aux claim {k + 1}"})
                matches.append(m)
            entry: dict[str, Any] = {"matches": matches}
            if len(link.hits) == len(aux_idx):
                c = self.orig_claims_[i][aux_idx[k]]
                entry.update(claim=c.text, query=self.aux_queries_[orig.id][k], orig_start=c.start, orig_end=c.end)
            else:  # single-query linkers: one query made of every aux claim
                entry.update(claims=[self.orig_claims_[i][a].text for a in aux_idx],
                             query=" ".join(self.aux_queries_[orig.id]))
            aux.append(entry)
        return {"id": orig.id, "linked": docs[link.doc].id if link.doc >= 0 else None, "correct": ok,
                "votes": link.votes, "score": round(link.score, 4), "aux": aux,
                "highlights_in": docs[link.doc].id if link.doc >= 0 else None, "highlights": highlights}

    # -- scoring

    def _sample(self, trials: list[int]) -> list[int]:
        """Positions (into ``trials``) of the documents to score: all, or a seeded sample."""
        positions = list(range(len(trials)))
        if self.score_sample is None or self.score_sample >= len(positions):
            return positions
        return sorted(random.Random(f"{self.seed}:score-sample").sample(positions, self.score_sample))

    def _passage(self, llm: LLM, doc: Document, claims: list[Claim], batch: list[str]) -> tuple[str, bool]:
        """The linked document, or its sentences most related to ``batch`` (in document order)
        when it is longer than ``passage_tokens`` or than the model's context allows: small
        judges rate far better against a short, relevant passage."""
        budget = llm.context_size - 64 - 16 - 4 * len(batch) - llm.count_tokens(_RUBRIC + "\n".join(batch)) - 200
        if self.passage_tokens is not None:
            budget = min(budget, self.passage_tokens)
        if llm.count_tokens(doc.text) <= budget:
            return doc.text, False
        sents = sorted({(c.sent_start, c.sent_end) for c in claims})
        ranked = sorted(sents, key=lambda r: -max(word_overlap(b, doc.text[r[0]:r[1]]) for b in batch))
        chosen, used = [], 0
        for s, e in ranked:
            cost = llm.count_tokens(doc.text[s:e])
            if used + cost > budget:
                continue
            chosen.append((s, e))
            used += cost
        return " [...] ".join(doc.text[s:e].strip() for s, e in sorted(chosen)), True

    def _support(self, claim: str, j: int, rel_claims: list[list[Claim]], linker: Linker,
                 qvec: np.ndarray | None) -> Claim | None:
        """The sanitized claim of document ``j`` closest to ``claim`` (evidence to highlight)."""
        cands = rel_claims[j]
        if not cands:
            return None
        if qvec is not None and isinstance(linker, DenseLinker) and linker.vectors is not None:
            offset = sum(len(c) for c in rel_claims[:j])
            sims = linker.vectors[offset:offset + len(cands)] @ qvec
            return cands[int(np.argmax(sims))]
        return max(cands, key=lambda c: word_overlap(claim, c.text))

    def _score(self, originals, trials, links, docs, rel_claims, linker, release_name, correct_flags,
               timings) -> list[Result]:
        chosen = self._sample(trials)
        tok = RougeTokenizer()
        # Lexical leakage: ROUGE-L of each original with its linked document (every trial).
        t = time.perf_counter()
        lexical = []
        for i, link in zip(trials, links):
            if link.doc < 0:
                lexical.append(0.0)
                continue
            key = originals[i].id
            if key not in self._orig_tokens:
                self._orig_tokens[key] = tok(originals[i].text)
            lexical.append(rouge_l(self._orig_tokens[key], tok(docs[link.doc].text)))
        timings["lexical"] = time.perf_counter() - t

        # Semantic scoring of the sampled, linked trials: every claim except the aux ones.
        llm = self._get_llm()
        plan = []  # (position, claims to score, batches)
        requests = []
        passages_trimmed = 0
        for p in chosen:
            i, link = trials[p], links[p]
            if link.doc < 0:
                continue
            aux = set(self.aux_index_[originals[i].id])
            claims = [c for k, c in enumerate(self.orig_claims_[i]) if k not in aux]
            if not claims:
                continue
            batches = [claims[b:b + self.score_batch] for b in range(0, len(claims), self.score_batch)]
            plan.append((p, claims, batches))
            for batch in batches:
                texts = [c.text for c in batch]
                passage, trimmed = self._passage(llm, docs[link.doc], rel_claims[link.doc], texts)
                passages_trimmed += trimmed
                for r in range(self.repeats):
                    requests.append(scoring_request(passage, texts, seed=self.seed + r,
                                                    temperature=0.0 if self.repeats == 1 else 0.7))
        answers = llm.complete_batch(requests, progress=self.progress)

        use_vectors = isinstance(linker, DenseLinker)
        malformed, missing, rating_counts = 0, 0, Counter()
        values, documents, lexical_sample = [], [], []
        pos = 0
        for p, claims, batches in plan:
            i, link = trials[p], links[p]
            j = link.doc
            ratings: list[int | None] = []
            for batch in batches:
                per_repeat = []
                for _ in range(self.repeats):
                    parsed, bad = parse_ratings(answers[pos], len(batch))
                    malformed += bad
                    per_repeat.append(parsed)
                    pos += 1
                ratings += [mode_rating([rep[k] for rep in per_repeat]) for k in range(len(batch))]
            valid = [r for r in ratings if r is not None]
            missing += len(ratings) - len(valid)
            rating_counts.update(valid)
            if not valid:
                continue
            value = leakage_of(valid)
            values.append(value)
            lexical_sample.append(lexical[p])
            qvecs = None
            leaked = [(c, r) for c, r in zip(claims, ratings) if r in (1, 2)]
            if use_vectors and leaked:
                qvecs = self._get_embedder().encode([c.text for c, _ in leaked])
            evidence, highlights = [], []
            for k, (c, r) in enumerate(leaked):
                sup = self._support(c.text, j, rel_claims, linker, None if qvecs is None else qvecs[k])
                item: dict[str, Any] = {"claim": c.text, "rating": r, "orig_start": c.start, "orig_end": c.end}
                if sup is not None:
                    item.update(support=sup.text, start=sup.start, end=sup.end)
                    highlights.append({"start": sup.start, "end": sup.end, "kind": "claim",
                                       "note": f"{'same' if r == 1 else 'similar'} information: {c.text}"})
                evidence.append(item)
            documents.append({
                "id": originals[i].id, "linked": docs[j].id, "correct": correct_flags[p],
                "leakage": round(value, 4), "lexical_leakage": round(lexical[p], 4),
                "claims_scored": len(valid), "claims_unrated": len(ratings) - len(valid),
                "ratings": dict(sorted(Counter(valid).items())), "leaked": evidence,
                "highlights_in": docs[j].id, "highlights": highlights,
            })
        mean, ci = mean_interval(values)
        sampled = self.score_sample is not None and self.score_sample < len(trials)
        llm_id = getattr(llm, "identity", "") or type(llm).__name__
        details = {
            "scored_documents": len(values), "linked_documents": len(trials), "sampled": sampled,
            "score_sample": self.score_sample, "sample_seed": self.seed, "repeats": self.repeats,
            "score_batch": self.score_batch, "llm": llm_id, "malformed_answers": malformed,
            "llm_requests": len(requests), "unrated_claims": missing,
            "rating_counts": {str(k): v for k, v in sorted(rating_counts.items())},
            "passages_trimmed": passages_trimmed,
            "lexical_leakage_same_documents": (sum(lexical_sample) / len(lexical_sample)) if lexical_sample else None,
            "note": (f"semantic leakage scored on a seeded sample of {len(chosen)} of {len(trials)} linked documents"
                     if sampled else "semantic leakage scored on every linked document"),
        }
        semantic = Result(kind="attack", name=f"{self.name}.leakage", release=release_name, value=mean, ci=ci,
                          n=len(values), details=details, documents=documents)
        lmean, lci = mean_interval(lexical)
        lex = Result(kind="attack", name=f"{self.name}.lexical_leakage", release=release_name, value=lmean,
                     ci=lci, n=len(lexical),
                     details={"metric": "ROUGE-L F-measure between each original and its linked document",
                              "semantic_on_same_sample": mean if values else None},
                     documents=[{"id": originals[i].id, "linked": docs[link.doc].id if link.doc >= 0 else None,
                                 "rouge_l": round(v, 4)} for i, link, v in zip(trials, links, lexical)])
        return [semantic, lex]

    # -- command line

    @classmethod
    def cli_command(cls) -> click.Command:
        import click

        from audit import cli_common as cc

        @click.command(help="Link known facts to sanitized records by meaning, then measure what else leaks.")
        @cc.originals_option
        @cc.releases_option
        @cc.format_option
        @click.option("--claims", type=click.Choice(["sentences", "llm"]), default="sentences", show_default=True,
                      help="How documents are split into claims: spaCy sentences/clauses (fast) or the LLM.")
        @click.option("--linker", type=click.Choice(list(LINKERS)), default="dense", show_default=True,
                      help="dense = per-claim embedding search with majority vote (the paper's attack); "
                           "the others are baselines.")
        @click.option("--aux-claims", type=int, default=3, show_default=True,
                      help="Claims of each original that the attacker knows.")
        @click.option("--aux-select", type=click.Choice(list(AUX_SELECT)), default="random", show_default=True)
        @click.option("--paraphrase/--no-paraphrase", default=True, show_default=True,
                      help="Reword the attacker's claims with the LLM before searching.")
        @click.option("--score-sample", type=int, default=None, metavar="N",
                      help="Score semantic leakage on a seeded sample of N linked documents (linking "
                           "always covers every document).")
        @click.option("--no-scoring", is_flag=True, help="Only link; skip semantic and lexical leakage.")
        @click.option("--repeats", type=int, default=3, show_default=True,
                      help="Times each rating is asked; the mode is kept.")
        @click.option("--embedder", default=None, metavar="PATH",
                      help="sentence-transformers folder for the dense linker (default: MiniLM).")
        @click.option("--tolerance", type=float, default=0.02, show_default=True,
                      help="Matches within this score of a claim's best match also vote.")
        @cc.llm_option
        @cc.seed_option
        @cc.out_option
        def command(originals, releases, fmt, claims, linker, aux_claims, aux_select, paraphrase, score_sample,
                    no_scoring, repeats, embedder, tolerance, llm_spec, seed, out):
            from audit.data import Scenario

            started = time.time()
            corpus = cc.load_originals(originals, fmt)
            rels = cc.load_release_specs(releases, corpus, fmt)
            attack = cls(claims=claims, linker=linker, aux_claims=aux_claims, aux_select=aux_select,
                         paraphrase=paraphrase, score=not no_scoring, score_sample=score_sample,
                         repeats=repeats, llm=llm_spec, embedder=embedder, tolerance=tolerance, seed=seed,
                         progress=sys.stderr.isatty())
            scenario = Scenario(originals=corpus, releases=tuple(rels))
            attack.fit(scenario)
            results = []
            for rel in rels:
                results += attack.evaluate(scenario, rel)
            params = {k: v for k, v in attack.get_params().items() if k not in ("progress",)}
            params["llm"] = llm_spec
            params["embedder"] = embedder
            extra = {}
            if attack._llm_obj is not None:
                extra["llm"] = getattr(attack._llm_obj, "identity", "")
            cc.write_results(out, results, cc.provenance(command="attack claim-linker", params=params,
                                                         inputs={"originals": originals, "releases": list(releases)},
                                                         started=started, extra=extra))
            cc.echo_summary(results)

        return command
