"""The linkers: index the sanitized documents as claims, then find the record a set of aux claims points to.

:class:`DenseLinker` is the paper's attack (each aux claim retrieves the most similar
sanitized claims by embedding and votes for their documents, :func:`majority_vote`);
:class:`BM25Linker` and :class:`RougeLinker` are the lexical baselines.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

import numpy as np

from audit.core import config
from audit.runtime.executor import sends_to_workers
from audit.core.text import RougeTokenizer, bitmasks, rouge_l, word_tokens

if TYPE_CHECKING:
    from attackers.claim_linker.claims import Claim
    from audit.core.data import Document

#: The linkers: ``dense`` is the paper's attack, the others are baselines.
LinkerName = Literal["dense", "dense-single", "bm25", "bm25-single", "rouge"]
LINKERS: tuple[str, ...] = get_args(LinkerName)


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
    HNSW (approximate) instead of exact. The queries are searched in groups of
    :data:`SEARCH_GROUP`, here or, with a distributed ``executor``, on its workers
    (:class:`FaissSearch`): the same groups, so the same answers.
    """

    name = "dense"

    def __init__(self, embedder, *, single: bool = False, top_k: int = 10, tolerance: float = 0.02,
                 approx_threshold: int = 200_000, batch_size: int = 64, progress: bool = False,
                 executor: Any = None):
        super().__init__()
        self.embedder = embedder
        self.executor = executor
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
            scores, ids = self._search(np.ascontiguousarray(qvec, dtype=np.float32), k)
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

    def _search(self, qvec: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best claims of each query vector, ``(scores, ids)``, in groups of
        :data:`SEARCH_GROUP` (:func:`search_groups`), here or, with more than one group, on the
        executor's workers (one group would keep one worker busy for milliseconds, after a
        stage's seconds of start)."""
        if sends_to_workers(self.executor, len(qvec), SEARCH_GROUP):
            rows = self.executor.map(FaissSearch(self._index, k), list(qvec), group=SEARCH_GROUP,
                                     label="claim linker: faiss search")
            return np.stack([s for s, _ in rows]), np.stack([i for _, i in rows])
        return search_groups(self._index, qvec, k, threads=config.threads())


#: Query vectors searched in one faiss call, here and on a cluster's workers: the groups are the
#: same wherever they run, and so are the answers (:func:`search_groups`).
SEARCH_GROUP = 1024


def search_groups(index: Any, qvec: np.ndarray, k: int, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``index.search`` of ``qvec`` in groups of :data:`SEARCH_GROUP`, each group on one thread
    (up to ``threads`` groups side by side; faiss releases the GIL). faiss's scores depend in
    their last bits on how many threads share one call (its OpenMP threads split the queries
    and its BLAS computes the parts), and a last bit can reorder ties, so one thread a call
    keeps the answers of a group the same on any machine and any worker."""
    import faiss
    from threadpoolctl import threadpool_limits

    def one(group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        faiss.omp_set_num_threads(1)  # OpenMP's setting is each thread's own: the pool's too
        return index.search(group, k)

    groups = [qvec[i:i + SEARCH_GROUP] for i in range(0, len(qvec), SEARCH_GROUP)]
    # and the BLAS libraries' (process-wide) for as long as any group is searched
    with threadpool_limits(limits=1), ThreadPoolExecutor(max(1, min(threads, len(groups)))) as pool:
        found = list(pool.map(one, groups))
    return np.concatenate([s for s, _ in found]), np.concatenate([i for _, i in found])


class FaissSearch:
    """The faiss search of a group of query vectors, as an executor's worker
    (:mod:`audit.runtime.executor`): pickled, it carries the index serialised (faiss's own format),
    read back once per worker; an item is one query vector, its output ``(scores, ids)`` of its
    ``k`` best claims (:func:`search_groups`: the group on one thread)."""

    def __init__(self, index: Any, k: int):
        import faiss

        self.data = faiss.serialize_index(index)
        self.k = k
        self._index: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"data": self.data, "k": self.k}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _index=None)

    def setup(self) -> None:
        import faiss

        if self._index is None:
            self._index = faiss.deserialize_index(self.data)

    def __call__(self, group: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        self.setup()
        scores, ids = search_groups(self._index, np.stack(group).astype(np.float32, copy=False), self.k)
        return list(zip(scores, ids))


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
