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
2. **Semantic scoring.** Each of the original's other claims (never the aux claims) is
   judged by an LLM against the ``evidence_sentences`` sentences of the linked sanitized
   document most related to it (dense retrieval): same information (1), similar (2) or not
   stated (3); each question is asked ``repeats`` times and the mode kept. Leakage per
   document is ``1 - mean((s - 1) / 2)``: 1 means everything is still there. The lexical
   counterpart is ROUGE-L between the original and the linked document, which misses
   reworded facts. Before scoring, the judge passes a self-consistency control once per fit:
   original claims against their own document must leak (near 1) and against another
   document must not; a judge that fails it is named in the result as unreliable.

Releases that are not one-to-one with the originals (synthetic data) work too: a link is
correct when the linked record is about the same subject, and claims are always scored
against the true original.
"""

from __future__ import annotations

import random
import re
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

import numpy as np

from attackers.claims import (
    AUX_SELECT,
    AuxSelect,
    Claim,
    make_splitter,
    paraphrase_claims,
    select_aux,
    word_overlap,
)
from audit.core.errors import AnonauditError
from audit.core.interfaces import Attack
from audit.core.registry import register
from audit.core.results import Finding, Highlight, Result
from audit.core.stats import mean_interval, risk
from audit.core.text import RougeTokenizer, bitmasks, rouge_l, word_tokens
from audit.models.resources import resources_of

if TYPE_CHECKING:
    from audit.core.data import Document, Release, Scenario
    from audit.models.llm import LLM

#: The linkers: ``dense`` is the paper's attack, the others are baselines.
LinkerName = Literal["dense", "dense-single", "bm25", "bm25-single", "rouge"]
LINKERS: tuple[str, ...] = get_args(LinkerName)


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

_JUDGE_SYSTEM = (
    "You check what a text reveals. Read the text, then decide whether it tells the reader "
    "the given fact. Reply with one word: same, similar or no."
)

#: The judge passes its self-consistency control when claims judged against their own document
#: leak at least this much ...
JUDGE_SELF_MIN = 0.7
#: ... and against another document at most this much (a judge that calls everything "similar"
#: scores 0.5 there and fails).
JUDGE_OTHER_MAX = 0.4

#: The judge's answers and the ratings they stand for (1 same, 2 similar, 3 unsupported).
VERDICTS = {"same": 1, "similar": 2, "no": 3}


def judge_request(evidence: str, claim: str, *, seed: int, temperature: float):
    """One claim against the few sentences of the sanitized document most related to it.

    Small judges fail at rating a batch of claims against a whole document (an unsanitized
    document judged against itself came out mostly "unsupported"); one claim at a time
    against retrieved evidence is a question they can answer. The rubric comes after the
    evidence and the claim, and the answer is one word from a closed set (a grammar where
    the backend supports JSON schemas).
    """
    from audit.models.llm import ChatRequest

    user = (f"Text:\n{evidence}\n\nFact: {claim}\n\n"
            "same = the text states this fact, in the same or other words.\n"
            "similar = the text states a vaguer or partly different version of it (a year instead of "
            "the exact date, 'a relative' instead of 'his brother'), or the fact with its key detail "
            "hidden by a placeholder such as [PERSON], [DATE] or ***.\n"
            "no = the text does not state this fact.\n"
            "Does the text state the fact? Answer same, similar or no.")
    return ChatRequest.make([{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": user}],
                            temperature=temperature, max_tokens=10, seed=seed,
                            json_schema={"type": "string", "enum": list(VERDICTS)})


_VERDICT_WORD = re.compile(r"\b(?:same|similar|no|not|none|unsupported|[123])\b")
_VERDICT_ALIASES = {**VERDICTS, "1": 1, "2": 2, "3": 3, "unsupported": 3, "not": 3, "none": 3}


def parse_verdict(answer: str) -> int | None:
    """The rating in a judge's answer: the first word that is a verdict (``same``, ``similar``,
    ``no``, or the digits 1-3), ignoring quotes, JSON and case; ``None`` when there is none."""
    m = _VERDICT_WORD.search(answer.lower())
    return _VERDICT_ALIASES[m.group(0)] if m else None


def rank_evidence(claim: str, candidates: Sequence[Claim], qvec: np.ndarray | None = None,
                  cand_vecs: np.ndarray | None = None) -> list[int]:
    """Indices of ``candidates``, most related to ``claim`` first: cosine of the embeddings
    when given, else word overlap."""
    if qvec is not None and cand_vecs is not None and len(cand_vecs):
        order = np.argsort(-(cand_vecs @ qvec), kind="stable")
        return [int(k) for k in order]
    return sorted(range(len(candidates)), key=lambda k: -word_overlap(claim, candidates[k].text))


def evidence_text(doc: Document, candidates: Sequence[Claim], ranked: Sequence[int], k: int) -> str:
    """The sentences of the ``k`` best-ranked claims, each once, in document order."""
    spans: list[tuple[int, int]] = []
    for idx in ranked:
        c = candidates[idx]
        span = (c.sent_start, c.sent_end)
        if span not in spans:
            spans.append(span)
        if len(spans) == k:
            break
    return " ".join(doc.text[a:b].strip() for a, b in sorted(spans))


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


def _link_summary(linked: str | None, ok: bool, votes: int, known: int) -> str:
    """One sentence on a link, for the report (names no claim: claims quote the original)."""
    if linked is None:
        return "Not linked: none of the known claims matched a record"
    by = f"{votes} of {known} known claim{'s' if known != 1 else ''}"
    return f"Linked to the right record by {by}" if ok else f"Linked to the wrong record ({linked}) by {by}"


def _leakage_summary(correct: bool, leaked: int, scored: int, value: float) -> str:
    """One sentence on what the linked record says about the person (no claim quoted)."""
    s = (f"The linked record supports {leaked} of {scored} further claim{'s' if scored != 1 else ''} "
         f"of the original (leakage {value:.2f})")
    return s if correct else s + ", but it is the wrong record"


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
    #: Older command-line spellings (``--no-scoring``).
    cli_aliases: ClassVar[dict[str, str]] = {"no_scoring": "no_score"}

    def __init__(self, claims: Literal["sentences", "llm"] = "sentences", linker: LinkerName = "dense",
                 aux_claims: int = 3, aux_select: AuxSelect = "random", paraphrase: bool = True, score: bool = True,
                 score_sample: int | None = None, repeats: int = 3, llm: Any = None,
                 embedder: Any = None, tolerance: float = 0.02, top_k: int = 10,
                 evidence_sentences: int = 3, judge_check: int = 8,
                 approx_threshold: int = 200_000, seed: int = 0, progress: bool = False):
        """
        claims: how documents are split into claims: spaCy sentences and clauses (fast) or the LLM.
        linker: dense = per-claim embedding search with majority vote (the paper's attack); the
            others are baselines.
        aux_claims: claims of each original that the attacker knows.
        aux_select: which claims of each original the attacker knows.
        paraphrase: reword the attacker's claims with the LLM before searching.
        score: measure semantic and lexical leakage after linking (off: only link).
        score_sample: score semantic leakage on a seeded sample of N linked documents (linking
            always covers every document).
        repeats: times each rating is asked; the mode is kept.
        llm: the LLM that paraphrases, judges (and splits claims with claims=llm).
        embedder: sentence embedder of the dense linker (default: MiniLM).
        tolerance: matches within this score of a claim's best match also vote.
        top_k: claims each known claim retrieves.
        evidence_sentences: sentences of the linked record shown to the judge with each claim.
        judge_check: claims in the judge's self-consistency control (own vs another document); 0 = off.
        approx_threshold: above this many claims the dense index is approximate (HNSW).
        """
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
        self.evidence_sentences = evidence_sentences
        self.judge_check = judge_check
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
        if self.evidence_sentences < 1:
            raise AnonauditError("evidence_sentences must be at least 1")
        if self.judge_check < 0:
            raise AnonauditError("judge_check must be 0 (off) or a number of claims")

    # -- resources: the run's shared models (see audit.models.resources), asked for on first use

    def _get_llm(self) -> LLM:
        if self._llm_obj is None:
            self._llm_obj = resources_of(self).llm(self.llm)
        return self._llm_obj

    def close(self) -> None:
        self._llm_obj = None
        self._embedder_obj = None
        self._splitter = None
        super().close()

    def _get_embedder(self):
        if self._embedder_obj is None:
            self._embedder_obj = resources_of(self).embedder(self.embedder)
        return self._embedder_obj

    def _get_splitter(self):
        if self._splitter is None:
            self._splitter = make_splitter(self.claims, self._get_llm,
                                           spacy=resources_of(self).spacy(disable=("ner",)))
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
        self._judge_check_: dict[str, Any] | None = None
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
        results[0] = replace(results[0], details={**results[0].details,
                                                  "timings": {k: round(v, 3) for k, v in timings.items()}})
        return results

    @staticmethod
    def _targets(orig: Document, docs: list[Document], aligned: bool, by_subject: dict[str, list[int]]) -> set[int]:
        """Release documents that count as a correct link for ``orig``: the same id, or for an
        unaligned release whose records name subjects, any record about the same subject."""
        if not aligned and orig.subject is not None and by_subject:
            return set(by_subject.get(orig.subject, ()))
        return {j for j, d in enumerate(docs) if d.id == orig.id}

    def _link_evidence(self, orig: Document, i: int, link: Link, ok: bool, docs: list[Document],
                       rel_claims: list[list[Claim]]) -> Finding:
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
                        highlights.append(Highlight(cl.start, cl.end, "claim", f"matches aux claim {k + 1}"))
                matches.append(m)
            entry: dict[str, Any] = {"matches": matches}
            if len(link.hits) == len(aux_idx):
                c = self.orig_claims_[i][aux_idx[k]]
                entry.update(claim=c.text, query=self.aux_queries_[orig.id][k], orig_start=c.start, orig_end=c.end)
            else:  # single-query linkers: one query made of every aux claim
                entry.update(claims=[self.orig_claims_[i][a].text for a in aux_idx],
                             query=" ".join(self.aux_queries_[orig.id]))
            aux.append(entry)
        linked = docs[link.doc].id if link.doc >= 0 else None
        # The evidence lies in the linked record, which for a wrong link is another document
        # (and for an unaligned release never has the original's id): ``highlights_in`` says which.
        return Finding(
            id=orig.id, success=ok, summary=_link_summary(linked, ok, link.votes, len(aux)),
            highlights=highlights, highlights_in=linked,
            facts={"linked": linked, "correct": ok, "votes": link.votes, "score": round(link.score, 4), "aux": aux},
            private={"aux"})  # the original's claims the attacker knew, and their rewordings

    # -- scoring

    def _sample(self, trials: list[int]) -> list[int]:
        """Positions (into ``trials``) of the documents to score: all, or a seeded sample."""
        positions = list(range(len(trials)))
        if self.score_sample is None or self.score_sample >= len(positions):
            return positions
        return sorted(random.Random(f"{self.seed}:score-sample").sample(positions, self.score_sample))

    def _evidence(self, claims: Sequence[str], doc: Document, cands: list[Claim],
                  cand_vecs: np.ndarray | None) -> tuple[list[str], list[list[int]]]:
        """For each claim, the sentences of ``doc`` most related to it (the judge's evidence)
        and the ranking of ``doc``'s claims behind them. Dense embeddings rank when the attack
        links densely (vectors already exist), word overlap otherwise."""
        if not cands:
            return ["" for _ in claims], [[] for _ in claims]
        qvecs = self._get_embedder().encode(list(claims)) if cand_vecs is not None else None
        ranked = [rank_evidence(c, cands, None if qvecs is None else qvecs[k], cand_vecs)
                  for k, c in enumerate(claims)]
        return [evidence_text(doc, cands, r, self.evidence_sentences) for r in ranked], ranked

    def _judge(self, llm: LLM, items: Sequence[tuple[str, str]], *, repeats: int) -> tuple[list[int | None], int]:
        """Ratings (mode over ``repeats`` answers) of ``(evidence, claim)`` pairs, and the
        number of answers that held no verdict."""
        temperature = 0.0 if repeats == 1 else 0.7
        requests = [judge_request(ev, claim, seed=self.seed + r, temperature=temperature)
                    for ev, claim in items for r in range(repeats)]
        answers = llm.complete_batch(requests, progress=self.progress)
        verdicts = [parse_verdict(a) for a in answers]
        ratings = [mode_rating(verdicts[k * repeats:(k + 1) * repeats]) for k in range(len(items))]
        return ratings, sum(v is None for v in verdicts)

    def _check_judge(self, llm: LLM, originals, dense: bool) -> dict[str, Any] | None:
        """Self-consistency control of the judge, once per fit: ``judge_check`` claims of the
        originals (never aux claims) rated against their own document, where the true
        leakage is 1, and against another original, where it is near 0. A judge that cannot
        tell the two apart makes every leakage figure meaningless, and the result says so."""
        if self.judge_check == 0 or len(originals) < 2:
            return None
        if self._judge_check_ is not None:
            return self._judge_check_
        rng = random.Random(f"{self.seed}:judge-check")
        aux = [set(self.aux_index_[d.id]) for d in originals]  # claims the adversary already holds
        pool = [(i, k) for i in range(len(originals)) for k in range(len(self.orig_claims_[i])) if k not in aux[i]]
        with_claims = [i for i in range(len(originals)) if self.orig_claims_[i]]
        if not pool or len(with_claims) < 2:
            return None
        picks = sorted(rng.sample(pool, min(self.judge_check, len(pool))))
        targets = [(i, rng.choice([o for o in with_claims if o != i])) for i, _ in picks]
        vecs: dict[int, np.ndarray | None] = {}  # claim vectors of each document used, embedded once
        for t in {t for pair in targets for t in pair}:
            vecs[t] = self._get_embedder().encode([c.text for c in self.orig_claims_[t]]) if dense else None
        pairs = {"self": [], "unrelated": []}
        for (i, k), (own, other) in zip(picks, targets):
            claim = self.orig_claims_[i][k].text
            for kind, t in (("self", own), ("unrelated", other)):
                (ev,), _ = self._evidence([claim], originals[t], self.orig_claims_[t], vecs[t])
                pairs[kind].append((ev, claim))
        ratings, _ = self._judge(llm, pairs["self"] + pairs["unrelated"], repeats=1)  # one batch
        out: dict[str, Any] = {"claims": len(picks)}
        for kind, part in (("self", ratings[:len(picks)]), ("unrelated", ratings[len(picks):])):
            valid = [r for r in part if r is not None]
            out[kind] = round(leakage_of(valid), 4) if valid else None
            out[f"{kind}_ratings"] = dict(sorted(Counter(valid).items()))
        ok = (out["self"] is not None and out["unrelated"] is not None
              and out["self"] >= JUDGE_SELF_MIN and out["unrelated"] <= JUDGE_OTHER_MAX)
        out["passed"] = ok
        out["rule"] = (f"leakage of claims against their own document >= {JUDGE_SELF_MIN}, "
                       f"against another document <= {JUDGE_OTHER_MAX}")
        self._judge_check_ = out
        return out

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

        # Semantic scoring of the sampled, linked trials: every claim except the aux ones, each
        # against the sentences of the linked document most related to it.
        llm = self._get_llm()
        dense = isinstance(linker, DenseLinker) and linker.vectors is not None
        offsets = np.cumsum([0] + [len(c) for c in rel_claims])
        plan = []  # (position, claims, evidence rankings)
        items: list[tuple[str, str]] = []
        for p in chosen:
            i, link = trials[p], links[p]
            if link.doc < 0:
                continue
            aux = set(self.aux_index_[originals[i].id])
            claims = [c for k, c in enumerate(self.orig_claims_[i]) if k not in aux]
            if not claims:
                continue
            j = link.doc
            vecs = linker.vectors[offsets[j]:offsets[j + 1]] if dense else None
            evidence, ranked = self._evidence([c.text for c in claims], docs[j], rel_claims[j], vecs)
            plan.append((p, claims, ranked))
            items += [(ev, c.text) for ev, c in zip(evidence, claims)]
        t = time.perf_counter()
        check = self._check_judge(llm, originals, dense) if plan else None
        timings["judge_check"] = time.perf_counter() - t
        all_ratings, malformed = self._judge(llm, items, repeats=self.repeats)

        missing, rating_counts = 0, Counter()
        values, documents, lexical_sample = [], [], []
        pos = 0
        for p, claims, ranked in plan:
            i, link = trials[p], links[p]
            j = link.doc
            ratings = all_ratings[pos:pos + len(claims)]
            pos += len(claims)
            valid = [r for r in ratings if r is not None]
            missing += len(ratings) - len(valid)
            rating_counts.update(valid)
            if not valid:
                continue
            value = leakage_of(valid)
            values.append(value)
            lexical_sample.append(lexical[p])
            evidence, highlights = [], []
            for c, r, rank in zip(claims, ratings, ranked):
                if r not in (1, 2):
                    continue
                item: dict[str, Any] = {"claim": c.text, "rating": r, "orig_start": c.start, "orig_end": c.end}
                if rank:
                    sup = rel_claims[j][rank[0]]
                    item.update(support=sup.text, start=sup.start, end=sup.end)
                    highlights.append(Highlight(sup.start, sup.end, "claim",
                                                f"{'same' if r == 1 else 'similar'} information: {c.text}"))
                evidence.append(item)
            # Success: the attacker linked the right record and it tells something more about the person.
            documents.append(Finding(
                id=originals[i].id, success=bool(correct_flags[p] and evidence),
                summary=_leakage_summary(correct_flags[p], len(evidence), len(valid), value),
                highlights=highlights, highlights_in=docs[j].id,
                facts={"linked": docs[j].id, "correct": correct_flags[p],
                       "leakage": round(value, 4), "lexical_leakage": round(lexical[p], 4),
                       "claims_scored": len(valid), "claims_unrated": len(ratings) - len(valid),
                       "ratings": dict(sorted(Counter(valid).items())), "leaked": evidence},
                private={"leaked"}))  # claims of the original, with what supports them
        mean, ci = mean_interval(values)
        sampled = self.score_sample is not None and self.score_sample < len(trials)
        llm_id = getattr(llm, "identity", "") or type(llm).__name__
        note = (f"semantic leakage scored on a seeded sample of {len(chosen)} of {len(trials)} linked documents"
                if sampled else "semantic leakage scored on every linked document")
        warning = None
        if check is not None and not check["passed"]:
            warning = (f"the judge ({llm_id}) failed its self-consistency control: claims judged against their own "
                       f"document leaked {check['self']}, against another document {check['unrelated']}, so the "
                       "semantic leakage figure is not reliable; use a stronger --llm")
            note += "; WARNING: " + warning
        details = {
            "scored_documents": len(values), "linked_documents": len(trials), "sampled": sampled,
            "score_sample": self.score_sample, "sample_seed": self.seed, "repeats": self.repeats,
            "evidence_sentences": self.evidence_sentences, "evidence_ranking": "dense" if dense else "word overlap",
            "llm": llm_id, "malformed_answers": malformed, "llm_requests": len(items) * self.repeats,
            "unrated_claims": missing, "rating_counts": {str(k): v for k, v in sorted(rating_counts.items())},
            "judge_check": check, "warning": warning,
            "lexical_leakage_same_documents": (sum(lexical_sample) / len(lexical_sample)) if lexical_sample else None,
            "note": note,
        }
        semantic = Result(kind="attack", name=f"{self.name}.leakage", release=release_name, value=mean, ci=ci,
                          n=len(values), details=details, documents=documents)
        lmean, lci = mean_interval(lexical)
        lex = Result(kind="attack", name=f"{self.name}.lexical_leakage", release=release_name, value=lmean,
                     ci=lci, n=len(lexical),
                     details={"metric": "ROUGE-L F-measure between each original and its linked document",
                              "semantic_on_same_sample": mean if values else None},
                     documents=[Finding(id=originals[i].id, success=ok,
                                        summary=(f"ROUGE-L {v:.2f} between the original and the record it was "
                                                 f"linked to{'' if ok else ' (a wrong link)'}"
                                                 if link.doc >= 0 else "Not linked to any record"),
                                        facts={"linked": docs[link.doc].id if link.doc >= 0 else None,
                                               "rouge_l": round(v, 4)})
                                for i, link, v, ok in zip(trials, links, lexical, correct_flags)])
        return [semantic, lex]
