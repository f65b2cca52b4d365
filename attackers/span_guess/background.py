"""What the adversary knows: candidates for a hidden span from the public background.

The adversary that TRIR models holds public documents about the people (the scenario's
``background``: news items, register entries, public judgments, a TRI file's
``public_knowledge``). It does not know whose document a release holds, so it first
ranks the *people* of the background by how well their documents match the whole
sanitized document (BM25 over each person's documents, with MiniLM sentence similarity
when an embedder is given) and turns the scores into a posterior over the best few
(``people``; :meth:`Background.rank_people`). For each of those people:

1. **candidates** — the entities of the span's type in that person's background (spaCy NER,
   parsed once per person and cached; codes such as ``36110/97`` by pattern), then, for
   name-like labels, names of other types and capitalised sequences NER left untyped;
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

The "person only" ranking (:meth:`Background.person_only`) orders the same person's
candidates by frequency alone, without the span's context: it shows what reading the
context adds to knowing whose document it is.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from attackers.span_guess.prior import Dist, candidate_key, top
from audit.core.text import word_tokens

if TYPE_CHECKING:
    from audit.core.data import Corpus
    from audit.models.llm import LLM
    from audit.models.nlp import Spacy

#: Entity labels a release may use (TAB's, Presidio's, spaCy's own) -> the spaCy NER labels
#: (and ``CODE`` for the pattern) whose entities are candidates for it.
_DATES = frozenset({"DATE", "TIME"})
_PLACES = frozenset({"GPE", "LOC", "FAC"})
_NUMBERS = frozenset({"CARDINAL", "QUANTITY", "MONEY", "PERCENT", "ORDINAL", "DATE"})
_OTHER = frozenset({"EVENT", "LAW", "PRODUCT", "WORK_OF_ART", "LANGUAGE", "NORP", "FAC"})
TYPE_MAP: dict[str, frozenset[str]] = {
    "PERSON": frozenset({"PERSON"}), "PER": frozenset({"PERSON"}),
    "ORG": frozenset({"ORG"}), "ORGANIZATION": frozenset({"ORG"}),
    "LOC": _PLACES, "LOCATION": _PLACES, "GPE": _PLACES, "FAC": _PLACES, "ADDRESS": _PLACES,
    "DATETIME": _DATES, "DATE": _DATES, "DATE_TIME": _DATES, "TIME": _DATES,
    "DEM": frozenset({"NORP", "GPE"}), "NRP": frozenset({"NORP", "GPE"}), "NORP": frozenset({"NORP", "GPE"}),
    "QUANTITY": _NUMBERS, "CARDINAL": _NUMBERS, "MONEY": _NUMBERS, "PERCENT": _NUMBERS, "ORDINAL": _NUMBERS,
    "CODE": frozenset({"CODE"}), "ID": frozenset({"CODE"}),
    "MISC": _OTHER, "EVENT": _OTHER, "LAW": _OTHER, "PRODUCT": _OTHER, "WORK_OF_ART": _OTHER,
}
#: application numbers (36110/97), record numbers (MRN-7615008), case codes (A-12/2004)
_CODE = re.compile(r"\b(?:[A-Z]{1,6}[-‐ ]?)?\d+(?:[-/.]\d+)+\b|\b[A-Z]{2,6}-?\d{4,}\b")
#: capitalised word sequences (names NER missed, "TAMPERE —" datelines): second-tier candidates of
#: the name-like labels, after the entities of the span's type
_PROPN = re.compile(r"\b[A-Z][\w'’.-]*[A-Za-z](?:\s+(?:(?:of|and|de|la|van|von|der|the)\s+)?[A-Z][\w'’.-]*[A-Za-z])*")
_NAME_LABELS = frozenset({"PERSON", "PER", "ORG", "ORGANIZATION", "LOC", "LOCATION", "GPE", "FAC", "ADDRESS",
                          "DEM", "NRP", "NORP", "MISC", "EVENT", "PRODUCT", "WORK_OF_ART"})
_NAME_MENTIONS = frozenset({"PERSON", "ORG", "GPE", "LOC", "FAC", "NORP", "PRODUCT", "EVENT", "WORK_OF_ART",
                            "LAW", "LANGUAGE", "PROPN"})
#: words of context read on each side of a span (fit) and a mention
EDGE = 4
WINDOW = 30
_PASSAGE = re.compile(r"\n\s*\n")
_MAX_PASSAGE = 2000
SHARE = 1.0  # weight of the bag-of-words share: all surrounding words shared = one adjacent word


def allowed_types(label: str) -> frozenset[str] | None:
    """The candidate types for a span's label; ``None`` (any entity) for an unknown label."""
    return TYPE_MAP.get((label or "").upper())


@dataclass(frozen=True)
class Mention:
    """One entity in a person's background, with the words around it."""

    text: str
    label: str
    left: tuple[str, ...]  # up to WINDOW words before, nearest last
    right: tuple[str, ...]  # up to WINDOW words after, nearest first


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
    progress: bool = False  # a progress bar while the background's sentences are embedded
    _people: list[str] = field(default_factory=list, init=False)
    _texts: dict[str, list[str]] = field(default_factory=dict, init=False)
    _bm25: object = field(default=None, init=False)
    _mentions: dict[str, list[Mention]] = field(default_factory=dict, init=False)
    _idf: dict[str, float] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        for doc in self.corpus:
            person = doc.subject or doc.id
            if person not in self._texts:
                self._people.append(person)
                self._texts[person] = []
            self._texts[person].append(doc.text)
        tokens = [word_tokens("\n".join(self._texts[p])) for p in self._people]
        if any(tokens):
            from rank_bm25 import BM25Okapi

            self._bm25 = BM25Okapi(tokens)
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
        found = self._mentions.get(person)
        if found is None:
            found = self._mentions[person] = self._parse(self._texts.get(person, []))
        return found

    def _parse(self, texts: list[str]) -> list[Mention]:
        passages = [p[i:i + _MAX_PASSAGE] for t in texts for p in _PASSAGE.split(t) if p.strip()
                    for i in range(0, len(p), _MAX_PASSAGE)]
        out: list[Mention] = []
        docs = self.nlp.nlp.pipe(passages, batch_size=64) if self.nlp is not None else [None] * len(passages)
        for text, doc in zip(passages, docs):
            spans = [(e.start_char, e.end_char, e.label_) for e in doc.ents] if doc is not None else []
            spans += [(m.start(), m.end(), "CODE") for m in _CODE.finditer(text)]
            taken = [(s, e) for s, e, _ in spans]
            spans += [(m.start(), m.end(), "PROPN") for m in _PROPN.finditer(text)
                      if not any(s < m.end() and m.start() < e for s, e in taken) and not _initial(text, m)]
            for s, e, label in spans:
                out.append(Mention(text[s:e].strip(), label, tuple(word_tokens(text[max(0, s - 400):s])[-WINDOW:]),
                                   tuple(word_tokens(text[e:e + 400])[:WINDOW])))
        return [m for m in out if m.text]

    # ------------------------------------------------------------------ ranking

    def fit(self, ctx: Context, m: Mention) -> tuple[int, float]:
        """How well a mention sits in the span's context: ``(edge, share)``. ``edge``: the words next
        to the span that repeat, in order, next to the mention (0 to 2*EDGE; a copied sentence lines
        up word for word); ``share``: the IDF-weighted share (0 to 1) of the words around the span
        that are also around the mention (a paraphrase shares words, not order)."""
        edge = _run(ctx.left[::-1], m.left[::-1]) + _run(ctx.right, m.right)
        want = set(ctx.left) | set(ctx.right)
        have = set(m.left) | set(m.right)
        total = sum(self._idf.get(w, self._idf_default) for w in want)
        share = sum(self._idf.get(w, self._idf_default) for w in want & have) / total if total else 0.0
        return edge, share

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
        span's type; 1: another name, see :func:`_tier`)."""
        skip = {_key(x) for x in exclude}
        best: dict[str, tuple[int, tuple[int, float], str]] = {}
        counts = Counter[str]()
        for m in self.mentions(person):
            tier = _tier(label, m.label)
            key = _key(m.text)
            if tier is None or not key or key in skip:
                continue
            counts[key] += 1
            f = self.fit(ctx, m)
            if key not in best:
                best[key] = (tier, f, m.text)
            else:  # the name's most specific type and its best-fitting mention
                old_tier, old_f, text = best[key]
                best[key] = (min(tier, old_tier), max(f, old_f), m.text if f > old_f else text)
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
        for text, w in weights:  # best first: a merged name keeps its best spelling
            key = candidate_key(text)
            have, shown = out.get(key, (0.0, text))
            out[key] = (have + w / total, shown)
        return out

    def person_only(self, person: str, label: str, exclude: Iterable[str] = ()) -> list[str]:
        """``person``'s candidates of the span's type, most frequent first (no span context)."""
        skip = {_key(x) for x in exclude}
        counts = Counter[str]()
        tiers: dict[str, int] = {}
        shown: dict[str, str] = {}
        for m in self.mentions(person):
            key, tier = _key(m.text), _tier(label, m.label)
            if tier is not None and key and key not in skip:
                counts[key] += 1
                tiers[key] = min(tier, tiers.get(key, tier))
                shown.setdefault(key, m.text)
        return [shown[k] for k in sorted(counts, key=lambda k: (tiers[k], -counts[k], k))]


def _standardise(scores):
    """``scores`` as z-scores over the people (all zeros when they do not vary)."""
    sd = scores.std()
    return (scores - scores.mean()) / sd if sd > 0 else scores * 0.0


def _initial(text: str, m: re.Match) -> bool:
    """A single capitalised word that starts a sentence ("Friends say ...", "Counsel: ..."): capital
    because of where it stands, not because it is a name."""
    before = text[:m.start()].rstrip()
    return " " not in m.group() and m.group().istitle() and (not before or before[-1] in ".:!?;\n\"“(")


def _tier(label: str, mention: str) -> int | None:
    """0: a mention of the span's type; 1, for a name-like label: a name of another type (the
    small NER model mistypes names: a city tagged as a person) or a capitalised sequence it left
    untyped; None: not a candidate (dates, numbers and codes keep to their type)."""
    types = allowed_types(label)
    if types is None or mention in types:
        return 0
    return 1 if (label or "").upper() in _NAME_LABELS and mention in _NAME_MENTIONS else None


_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9\[(\"“])|\n+|\s+—\s+")


def sentences(text: str, longest: int = 600) -> list[str]:
    """``text`` cut into sentences (a rule, no parser: fast on long judgments), each at most
    ``longest`` characters; at least one piece."""
    out = [p[i:i + longest].strip() for s in _SENTENCE.split(text) if s.strip()
           for p in [s.strip()] for i in range(0, len(p), longest)]
    return [s for s in out if s] or [text[:longest]]


def _key(text: str) -> str:
    return " ".join(word_tokens(text))


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
    weighted by their posterior) and ``diag`` (diagnostics; ``per_span`` is private)."""

    fitted: list[list[str]]
    plain: list[list[str]]
    dists: list[Dist]
    diag: dict


def background_guesses(bg: Background, targets: Sequence, p: int, *, people: int = 1, llm: LLM | None = None,
                       progress: bool = False) -> BackgroundGuesses:
    """For each target (``doc_id``, ``text``, ``span``, ``subject``): the candidates of the
    ``people`` best-matching people, each person's distribution (:meth:`Background.distribution`)
    weighted by the posterior that the document is about them (:meth:`Background.rank_people`).
    Diagnostics: documents whose person has no background, spans without candidates, how often
    the retrieved person (or one of the ``people``) is the document's subject (the auditor knows
    it, the adversary does not)."""
    from audit.runtime.progress import bar as progress_bar

    ranked: dict[str, list[tuple[str, float]]] = {}  # doc id -> people, retrieved once per document
    out = BackgroundGuesses([], [], [], {})
    per_span: list[dict] = []
    for t in progress_bar(list(targets), enabled=progress, desc="span guess (background)", unit="span"):
        if t.doc_id not in ranked:
            ranked[t.doc_id] = bg.rank_people(t.text, people)
        ctx = Context.of(t.text, t.span.start, t.span.end)
        shown = [t.text[t.span.start:t.span.end]]
        mix: Dist = {}
        for person, weight in ranked[t.doc_id]:
            for key, (prob, text) in bg.distribution(person, t.span.label, ctx, exclude=shown).items():
                have, first = mix.get(key, (0.0, text))
                mix[key] = (have + weight * prob, first)
        cands = top(mix, max(2 * p, p))
        if llm is not None and cands:
            cands = [c for c, _ in llm_rerank(llm, t.text, t.span.start, t.span.end, cands)]
        out.fitted.append(cands[:p])
        out.dists.append(mix)
        freq: list[str] = []
        for person, _ in ranked[t.doc_id]:
            freq += [c for c in bg.person_only(person, t.span.label, exclude=shown)
                     if _key(c) not in {_key(x) for x in freq}]
        out.plain.append(freq[:p])
        who = ranked[t.doc_id][0] if ranked[t.doc_id] else (None, None)
        per_span.append({"background_person": who[0], "background_person_weight": who[1]})
    out.diag = _diagnostics(bg, targets, ranked, per_span, sum(not d for d in out.dists))
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
