"""What the adversary knows: candidates for a hidden span from the public background.

The adversary that TRIR models holds public documents about the people (the scenario's
``background``: news items, register entries, public judgments, a TRI file's
``public_knowledge``). It does not know whose document a release holds, so it first
ranks the *people* of the background by how well their documents match the whole
sanitized document (BM25 over each person's documents, with MiniLM sentence similarity
when an embedder is given) and turns the scores into a posterior over the best few
(``people``; :meth:`Background.rank_people`). For each of those people:

1. **candidates** — the entities of the span's type in that person's background (spaCy NER,
   parsed once per passage and kept on disk, :mod:`audit.models.parses`; codes such as
   ``36110/97`` by pattern), then, for name-like labels, names of other types and capitalised
   sequences NER left untyped (:mod:`attackers.span_guess.mentions`);
2. **context fit** — each mention of a candidate is scored by how much of the span's
   immediate context it shares: the words right before and right after the span that
   repeat, in order, right before and after the mention (a sentence copied into the
   background lines up word for word), plus the IDF-weighted share of the words around
   the span that occur around the mention (a paraphrase shares words, not order);
3. the candidates are scored by their best mention's fit plus how often, and how specifically,
   the person's background names them (:meth:`Background.candidates`), and the scores become a
   distribution (softmax, :meth:`Background.distribution`). The people's distributions are
   mixed, each weighted by its posterior (:func:`background_guesses`); the most probable
   candidates are the guesses, or are mixed with the label prior first
   (:mod:`attackers.span_guess.prior`). An optional re-ranking by the LLM's log-probability of
   the sanitized sentence with the candidate in the span's place (fixed answers scored, no free
   text) is in :func:`llm_rerank` (on TAB the 0.5B did worse: benchmarks/README.md).

Each person's candidates and the words around them are worked out once, as arrays
(:mod:`attackers.span_guess.table`), and every span is scored on them by array arithmetic: the
cost of a span does not grow with the length of the background (``scoring="mention"`` reads
every mention for every span: the slower definition, kept for the side-by-side check).

The "person only" ranking (:meth:`Background.person_only`) orders the same person's
candidates by frequency alone, without the span's context: it shows what reading the
context adds to knowing whose document it is.
"""

from __future__ import annotations

import copy
import math
import os
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from attackers.span_guess.bm25 import TermBM25
from attackers.span_guess.mentions import EDGE, WINDOW, Mention, allowed_types, key, mentions_of, passages, tier
from attackers.span_guess.prior import Dist, candidate_key, top
from attackers.span_guess.table import SHARE, CandidateTable
from audit.core.text import word_tokens

if TYPE_CHECKING:
    from audit.core.data import Corpus
    from audit.models.llm import LLM
    from audit.models.nlp import Spacy



@dataclass
class Context:
    """The words around a span in the sanitized document (what the adversary reads)."""

    left: tuple[str, ...]
    right: tuple[str, ...]

    @classmethod
    def of(cls, text: str, start: int, end: int) -> Context:
        return cls(tuple(word_tokens(text[max(0, start - 400):start])[-WINDOW:]),
                   tuple(word_tokens(text[end:end + 400])[:WINDOW]))

    @property
    def empty(self) -> bool:
        return not self.left and not self.right


def _run(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading words of ``a`` and ``b`` are equal (up to EDGE)."""
    n = 0
    for x, y in zip(a[:EDGE], b[:EDGE]):
        if x != y:
            break
        n += 1
    return n


@dataclass
class Background:
    """The background corpus, grouped by person, with BM25 over each person's documents."""

    corpus: Corpus
    nlp: Spacy | None = None
    embedder: object = None  # an Embedder (MiniLM): dense retrieval fused with BM25 when given
    progress: bool = False  # progress bars while the background's sentences are embedded and parsed
    #: ``table``: each person's candidates worked out once and every span scored on them by array
    #: arithmetic; ``mention``: every mention read for every span (the slower definition; the
    #: people :meth:`prepare` is given are parsed as for the tables, any other when first asked)
    scoring: Literal["table", "mention"] = "table"
    #: keep spaCy's parse of the background on disk (``table`` only): the parse cache (True), off
    #: (False) or an sqlite file of its own
    cache: bool | str | os.PathLike[str] = True
    _people: list[str] = field(default_factory=list, init=False)
    _texts: dict[str, list[str]] = field(default_factory=dict, init=False)
    _bm25: object = field(default=None, init=False)
    _mentions: dict[str, list[Mention]] = field(default_factory=dict, init=False)
    _idf: dict[str, float] = field(default_factory=dict, init=False)
    _tables: dict[str, CandidateTable] = field(default_factory=dict, init=False)
    _candidate_keys: dict[str, str] = field(default_factory=dict, init=False)
    _parses: object = field(default=None, init=False)  # the parse cache (audit.models.parses.ParseCache)

    def __post_init__(self) -> None:
        for doc in self.corpus:
            person = doc.subject or doc.id
            if person not in self._texts:
                self._people.append(person)
                self._texts[person] = []
            self._texts[person].append(doc.text)
        tokens = [word_tokens("\n".join(self._texts[p])) for p in self._people]
        if any(tokens):  # rank_bm25's Okapi BM25, scored a term's weights at a time (bm25.py)
            self._bm25 = TermBM25(tokens)
        df = Counter(w for toks in tokens for w in set(toks))
        n = max(1, len(tokens))
        self._idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}
        self._idf_default = math.log(1 + (n + 0.5) / 0.5)
        self._idf_one = math.log(1 + (n - 1 + 0.5) / 1.5)  # a word in one person's background
        self._vectors = None
        if self.embedder is not None:
            chunks = [(i, c) for i, p in enumerate(self._people) for t in self._texts[p] for c in sentences(t)]
            import numpy as np

            owner = np.array([i for i, _ in chunks])  # people in order, each with one sentence or more
            self._starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            self._vectors = self.embedder.encode([c for _, c in chunks], progress=self.progress)

    @property
    def parse_stats(self) -> dict[str, int]:
        """Passages of the background whose spaCy parse came from the parse cache, and parsed now."""
        return dict(self._parses.stats) if self._parses is not None else {"cached": 0, "parsed": 0}

    @property
    def people(self) -> list[str]:
        return list(self._people)

    def has(self, person: str | None) -> bool:
        return person is not None and bool(self._texts.get(person)) and any(t.strip() for t in self._texts[person])

    def rank_people(self, text: str, k: int = 1) -> list[tuple[str, float]]:
        """The ``k`` people whose background best matches ``text``, best first, each with the
        adversary's posterior that the document is about them (summing to 1 over the ``k``).

        Two retrievals: BM25 over each person's documents and, when there is an embedder, the
        dense similarity (for each sentence of ``text``, how much better the person's best-matching
        background sentence matches it than the average person's does, summed over the sentences;
        boilerplate every person's background matches alike counts for nothing). Each score is
        standardised over the people (z-scores, so the two scales are comparable) and the two are
        added (CombSUM of z-scores); the posterior is the softmax of the sum over the ``k`` people:
        a person whose evidence stands one standard deviation higher is e times as likely. A clear
        winner takes nearly all the weight; two close candidates share it."""
        if self._bm25 is None:
            return []
        import numpy as np

        rankings = [np.asarray(self._bm25.get_scores(word_tokens(text)), dtype=float)]
        if self._vectors is not None and len(self._vectors):
            q = self.embedder.encode(sentences(text))
            sims = q @ self._vectors.T  # query sentences x background sentences
            best = np.maximum.reduceat(sims, self._starts, axis=1)  # each person's best sentence
            rankings.append(np.clip(best - best.mean(axis=1, keepdims=True), 0, None).sum(axis=0))
        fused = sum(_standardise(r) for r in rankings)
        order = sorted(range(len(self._people)), key=lambda i: (-fused[i], i))[:k]
        weights = np.exp(fused[order] - fused[order[0]])
        weights /= weights.sum()
        return [(self._people[i], float(w)) for i, w in zip(order, weights)]

    # ------------------------------------------------------------------ mentions

    def mentions(self, person: str) -> list[Mention]:
        """Every entity (and code) in ``person``'s background, parsed once."""
        if person not in self._mentions:
            if self.scoring == "table":
                self.prepare([person])
            else:  # the per-mention path parses each person when first asked, in memory
                self._mentions[person] = self._parse(self._texts.get(person, []))
        return self._mentions[person]

    def _parse(self, texts: list[str]) -> list[Mention]:
        pieces = passages(texts)
        docs = self.nlp.nlp.pipe(pieces, batch_size=64) if self.nlp is not None else [None] * len(pieces)
        return [m for text, doc in zip(pieces, docs)
                for m in mentions_of(text, [(e.start_char, e.end_char, e.label_) for e in doc.ents]
                                     if doc is not None else [])]

    def prepare(self, people: Iterable[str]) -> None:
        """Work out the candidates of ``people`` once (:mod:`attackers.span_guess.table`): spaCy
        over their passages in one batch, through the parse cache (:mod:`audit.models.parses`:
        on disk by content, so a second run parses nothing), then each person's table."""
        todo = [p for p in dict.fromkeys(people) if p not in self._mentions]
        if not todo:
            return
        pieces = {p: passages(self._texts.get(p, [])) for p in todo}
        flat = [t for p in todo for t in pieces[p]]
        ents: list = [()] * len(flat)
        if self.nlp is not None and flat:
            if self._parses is None:
                from audit.models.parses import ParseCache

                path = self.cache if not isinstance(self.cache, bool) else None if self.cache else False
                self._parses = ParseCache(self.nlp, path, tokens=False,
                                          who="span guessing", batch_size=64)
            desc = f"span guess: spaCy over the background of {len(todo)} people" if self.progress else None
            ents = [p.ents for p in self._parses.parse(flat, progress=desc)]
        at = 0
        for p in todo:
            n = len(pieces[p])
            self._mentions[p] = [m for text, e in zip(pieces[p], ents[at:at + n]) for m in mentions_of(text, e)]
            at += n

    def rescored(self, scoring: Literal["table", "mention"], cache: bool | str | os.PathLike[str] | None = None
                 ) -> Background:
        """The same people, index and vectors, scoring by ``scoring``, nothing parsed yet (and the
        parse cache at ``cache`` when given): the benchmark's side-by-side of the two paths."""
        other = copy.copy(self)
        other.scoring, other.cache = scoring, self.cache if cache is None else cache
        other._mentions, other._tables, other._candidate_keys, other._parses = {}, {}, {}, None
        return other

    def table(self, person: str) -> CandidateTable:
        """``person``'s candidates as arrays, built once (:class:`CandidateTable`)."""
        found = self._tables.get(person)
        if found is None:
            found = self._tables[person] = CandidateTable(self.mentions(person), self.idf, self.specificity)
        return found

    # ------------------------------------------------------------------ ranking

    def fit(self, ctx: Context, m: Mention) -> tuple[int, float]:
        """How well a mention sits in the span's context: ``(edge, share)``. ``edge``: the words next
        to the span that repeat, in order, next to the mention (0 to 2*EDGE; a copied sentence lines
        up word for word); ``share``: the IDF-weighted share (0 to 1) of the words around the span
        that are also around the mention (a paraphrase shares words, not order). The IDFs are added
        smallest first: a sum in a set's order would change in its last bit from one process to the
        next (string hashes are salted), and so would the order of two candidates that tie."""
        edge = _run(ctx.left[::-1], m.left[::-1]) + _run(ctx.right, m.right)
        want = set(ctx.left) | set(ctx.right)
        have = set(m.left) | set(m.right)
        total = self._idf_sum(want)
        share = self._idf_sum(want & have) / total if total else 0.0
        return edge, share

    def idf(self, word: str) -> float:
        """The word's IDF over the people of the background."""
        return self._idf.get(word, self._idf_default)

    def _idf_sum(self, words: Iterable[str]) -> float:
        return sum(sorted(self._idf.get(w, self._idf_default) for w in words))

    def specificity(self, key: str) -> float:
        """How specific a name is to one person: the mean IDF of its words over the people of the
        background, relative to a word only one person's background holds (0 to 1)."""
        words = key.split()
        if not words or self._idf_default <= 0:
            return 0.0
        return min(1.0, sum(self._idf.get(w, self._idf_default) for w in words) / len(words) / self._idf_one)

    def candidates(self, person: str, label: str, ctx: Context,
                   exclude: Iterable[str] = ()) -> list[tuple[str, float, int]]:
        """``person``'s candidates for the span, best first: ``(text, score, tier)`` (tier 0: of the
        span's type; 1: another name, see :func:`~attackers.span_guess.mentions.tier`). Scored on
        the person's table (array arithmetic) or, with ``scoring="mention"``, mention by mention
        (:meth:`candidates_by_mention`, the definition the table reproduces)."""
        if self.scoring == "mention":
            return self.candidates_by_mention(person, label, ctx, exclude)
        want = set(ctx.left) | set(ctx.right)
        return self.table(person).rank(label, ctx.left[::-1], ctx.right, want, self._idf_sum(want),
                                       {key(x) for x in exclude})

    def candidates_by_mention(self, person: str, label: str, ctx: Context,
                              exclude: Iterable[str] = ()) -> list[tuple[str, float, int]]:
        """:meth:`candidates`, read mention by mention."""
        skip = {key(x) for x in exclude}
        best: dict[str, tuple[int, tuple[int, float], str]] = {}
        counts = Counter[str]()
        for m in self.mentions(person):
            t = tier(label, m.label)
            k = key(m.text)
            if t is None or not k or k in skip:
                continue
            counts[k] += 1
            f = self.fit(ctx, m)
            if k not in best:
                best[k] = (t, f, m.text)
            else:  # the name's most specific type and its best-fitting mention
                old_tier, old_f, text = best[k]
                best[k] = (min(t, old_tier), max(f, old_f), m.text if f > old_f else text)
        # Evidence for a candidate: the context words its best mention repeats in order; the share
        # of the span's surrounding words around it (all of them count as one adjacent word: a
        # paraphrase shares words, not order); being of the span's type (one more word: the small
        # NER model mistypes names, and a copied sentence around a mistyped name weighs more); and
        # the log of how often the person's background names it (as a BM25 term weight grows with
        # its frequency). The last two weigh by how specific the name is to this person (its
        # words' IDF over the people, 0 to 1): "the Court" of every judgment says nothing of whose.
        score = {k: best[k][1][0] + SHARE * best[k][1][1]
                 + ((best[k][0] == 0) + math.log1p(counts[k])) * self.specificity(k) for k in best}
        ranked = sorted(best, key=lambda k: (-score[k], -best[k][1][1], best[k][0], -counts[k], k))
        return [(best[k][2], score[k] + best[k][1][1] / 10, best[k][0]) for k in ranked]

    def distribution(self, person: str, label: str, ctx: Context, exclude: Iterable[str] = ()) -> Dist:
        """``person``'s candidates for the span as a probability distribution: the softmax of
        their :meth:`candidates` scores (each piece of evidence counts in nats: a word of context
        repeated in order makes a candidate e times as likely), spellings of one name merged."""
        ranked = self.candidates(person, label, ctx, exclude)
        if not ranked:
            return {}
        top_score = ranked[0][1]
        weights = [(text, math.exp(score - top_score)) for text, score, _ in ranked]
        total = sum(w for _, w in weights)
        out: Dist = {}
        merged = self._candidate_keys
        for text, w in weights:  # best first: a merged name keeps its best spelling
            k = merged.get(text)
            if k is None:
                k = merged[text] = candidate_key(text)
            have, shown = out.get(k, (0.0, text))
            out[k] = (have + w / total, shown)
        return out

    def person_only(self, person: str, label: str, exclude: Iterable[str] = ()) -> list[str]:
        """``person``'s candidates of the span's type, most frequent first (no span context)."""
        skip = {key(x) for x in exclude}
        if self.scoring == "table":
            return self.table(person).plain(label, skip)
        counts = Counter[str]()
        tiers: dict[str, int] = {}
        shown: dict[str, str] = {}
        for m in self.mentions(person):
            k, t = key(m.text), tier(label, m.label)
            if t is not None and k and k not in skip:
                counts[k] += 1
                tiers[k] = min(t, tiers.get(k, t))
                shown.setdefault(k, m.text)
        return [shown[k] for k in sorted(counts, key=lambda k: (tiers[k], -counts[k], k))]


def _standardise(scores):
    """``scores`` as z-scores over the people (all zeros when they do not vary)."""
    sd = scores.std()
    return (scores - scores.mean()) / sd if sd > 0 else scores * 0.0


_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9\[(\"“])|\n+|\s+—\s+")


def sentences(text: str, longest: int = 600) -> list[str]:
    """``text`` cut into sentences (a rule, no parser: fast on long judgments), each at most
    ``longest`` characters; at least one piece."""
    out = [p[i:i + longest].strip() for s in _SENTENCE.split(text) if s.strip()
           for p in [s.strip()] for i in range(0, len(p), longest)]
    return [s for s in out if s] or [text[:longest]]


# =========================================================================== LLM re-ranking

def llm_rerank(llm: LLM, text: str, start: int, end: int, candidates: list[str], *,
               left_chars: int = 600, right_words: int = 8) -> list[tuple[str, float]]:
    """``candidates`` ordered by the LLM's mean log-probability per token of the candidate followed
    by the next ``right_words`` words of the sanitized text, given the text before the span:
    which fixed answer fits the sentence best (no free text). Returns ``(candidate, score)``."""
    prefix = text[max(0, start - left_chars):start]
    rest = text[end:end + 400]
    words = re.findall(r"\S+\s*", rest)[:right_words]
    suffix = "".join(words).rstrip()
    scored = []
    for i, cand in enumerate(candidates):
        lps = llm.logprobs(prefix, cand + suffix)
        scored.append((cand, sum(lps) / len(lps) if lps else float("-inf"), i))
    scored.sort(key=lambda x: (-x[1], x[2]))
    return [(c, s) for c, s, _ in scored]


# =========================================================================== the adversary's guesses

@dataclass
class BackgroundGuesses:
    """What the background gives, per target: ``fitted`` (the ``p`` best of ``dists``, re-ranked
    by the LLM when asked), ``plain`` (the same people's most frequent candidates, no span
    context), ``dists`` (the candidate distribution: a mixture over the retrieved people,
    weighted by their posterior), ``diag`` (diagnostics; ``per_span`` is private) and ``seconds``
    (how long finding the people, working out their candidates and scoring the spans took)."""

    fitted: list[list[str]]
    plain: list[list[str]]
    dists: list[Dist]
    diag: dict
    seconds: dict[str, float] = field(default_factory=dict)


def background_guesses(bg: Background, targets: Sequence, p: int, *, people: int = 1, llm: LLM | None = None,
                       progress: bool = False) -> BackgroundGuesses:
    """For each target (``doc_id``, ``text``, ``span``, ``subject``): the candidates of the
    ``people`` best-matching people, each person's distribution (:meth:`Background.distribution`)
    weighted by the posterior that the document is about them (:meth:`Background.rank_people`).
    Diagnostics: documents whose person has no background, spans without candidates, how often
    the retrieved person (or one of the ``people``) is the document's subject (the auditor knows
    it, the adversary does not)."""
    from audit.runtime.progress import bar as progress_bar

    started = time.perf_counter()
    targets = list(targets)
    docs = {t.doc_id: t.text for t in targets}
    # the people of each document, retrieved once per document; then their candidates, once
    ranked = {d: bg.rank_people(text, people) for d, text in
              progress_bar(list(docs.items()), enabled=progress and len(docs) > 1, desc="span guess: finding the people",
                           unit="doc")}
    found = time.perf_counter()
    bg.prepare(p for r in ranked.values() for p, _ in r)
    prepared = time.perf_counter()
    out = BackgroundGuesses([], [], [], {})
    per_span: list[dict] = []
    for t in progress_bar(targets, enabled=progress, desc="span guess (background)", unit="span"):
        ctx = Context.of(t.text, t.span.start, t.span.end)
        shown = [t.text[t.span.start:t.span.end]]
        mix: Dist = {}
        for person, weight in ranked[t.doc_id]:
            for k, (prob, text) in bg.distribution(person, t.span.label, ctx, exclude=shown).items():
                have, first = mix.get(k, (0.0, text))
                mix[k] = (have + weight * prob, first)
        cands = top(mix, max(2 * p, p))
        if llm is not None and cands:
            cands = [c for c, _ in llm_rerank(llm, t.text, t.span.start, t.span.end, cands)]
        out.fitted.append(cands[:p])
        out.dists.append(mix)
        out.plain.append(_most_frequent(bg, [person for person, _ in ranked[t.doc_id]], t.span.label, shown, p))
        who = ranked[t.doc_id][0] if ranked[t.doc_id] else (None, None)
        per_span.append({"background_person": who[0], "background_person_weight": who[1]})
    out.diag = _diagnostics(bg, targets, ranked, per_span, sum(not d for d in out.dists))
    out.seconds = {"background_people": found - started, "background_candidates": prepared - found,
                   "background_spans": time.perf_counter() - prepared}
    return out


def _most_frequent(bg: Background, people: list[str], label: str, shown: list[str], p: int) -> list[str]:
    """The ``p`` first of the people's most frequent candidates (:meth:`Background.person_only`),
    person after person, each name once."""
    out: list[str] = []
    seen: set[str] = set()
    for person in people:
        for c in bg.person_only(person, label, exclude=shown):
            k = key(c)
            if k not in seen:
                seen.add(k)
                out.append(c)
                if len(out) == p:
                    return out
    return out


def _diagnostics(bg: Background, targets: Sequence, ranked: dict[str, list[tuple[str, float]]],
                 per_span: list[dict], no_candidates: int) -> dict:
    subjects = {t.doc_id: t.subject for t in targets}
    known = {d: s for d, s in subjects.items() if s is not None}

    def rate(hit) -> float | None:
        return sum(bool(ranked.get(d)) and hit(ranked[d], s) for d, s in known.items()) / len(known) if known else None

    return {
        "retrieval": "BM25 and MiniLM sentence similarity" if bg.embedder is not None else "BM25",
        "background_documents": len(bg.corpus),
        "background_people": len(bg.people),
        "documents_attacked": len(subjects),
        "documents_without_background": sum(not bg.has(s) for s in known.values()),
        "spans_without_candidates": no_candidates,
        "person_found_rate": rate(lambda r, s: r[0][0] == s),
        "person_in_retrieved_rate": rate(lambda r, s: any(w == s for w, _ in r)),
        "person_posterior": (sum(next((w for p, w in ranked[d] if p == s), 0.0) for d, s in known.items()
                                 if d in ranked) / len(known)) if known else None,
        "per_span": per_span,
    }
