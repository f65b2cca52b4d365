"""The judge: how much of an original's claims a linked record still states.

Each claim is judged against the sentence(s) of the linked record most related to it
(:func:`rank_evidence`, :func:`evidence_text`). The yes/no judges generate no
text: they ask "Does the passage state this fact?" and compare the log-probabilities of the
fixed answers Yes and No (:func:`yesno_prompt`, :func:`yesno_margin`, :func:`margin_rating`:
stated when P(Yes) > P(No)), through the LLM layer's :meth:`~audit.models.llm.LLM.logprobs`.
The contrastive judge (``contrast``) counts a claim stated only when Yes wins by more than it wins
for the control's claims on the records of other people most like them (their reference records:
:func:`~attackers.claim_linker.reference.null_threshold`); the judges see identifying claims only
(:mod:`.reference`). The default (``details``, issue 68) asks that question only where the passage
states one of the claim's specific details in so many words; the details it states are the
evidence a reader checks.
The earlier judge (``rating``) generates one word of {same, similar, no} (:func:`judge_request`,
:func:`parse_verdict`, :func:`mode_rating`); it is the fallback for a server that gives no
log-probabilities. :func:`leakage_of` turns ratings into a leakage figure. Before it is
trusted, the judge passes its control (:mod:`.control`: own, unrelated and masked-twin claims).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from attackers.claim_linker.claims import word_overlap
from attackers.claim_linker.reference import DetailFrequency, OriginalsIndex, specific_details, stated_details

if TYPE_CHECKING:
    from attackers.claim_linker.claims import Claim
    from audit.core.data import Document
    from audit.models.llm import LLM

log = logging.getLogger(__name__)

_JUDGE_SYSTEM = (
    "You check what a text reveals. Read the text, then decide whether it tells the reader "
    "the given fact. Reply with one word: same, similar or no."
)

#: The judge's answers and the ratings they stand for (1 same, 2 similar, 3 unsupported).
VERDICTS = {"same": 1, "similar": 2, "no": 3}


#: How the judge answers: ``details`` (the default, issue 68) asks the yes/no question only of a
#: passage that states at least one of the claim's specific details in so many words
#: (:func:`~attackers.claim_linker.reference.stated_details`: a passage with every detail masked
#: states nothing, whatever its wording) and counts the claim stated when Yes wins by more than it
#: wins for the control's claims on their masked twins (their own sentences with the details masked:
#: what a template alone earns); naming the details in the question was measured and rejected (the
#: 1.5B said Yes more often to masked and unrelated passages); ``contrast`` scores the fixed answers Yes and No by
#: their log-probabilities (no free text) and counts the claim stated when Yes wins by a wider
#: margin than the control's claims get on the records of other people most like them
#: (:mod:`.reference`); ``yesno`` the same against 0 (stated when P(Yes) > P(No));
#: ``yesno-calibrated`` compares that margin
#: with the margin the same question gets with a content-free passage (:data:`NULL_PASSAGE`),
#: for models biased towards one answer; ``rating`` generates one word of {same, similar, no}
#: (the earlier judge, kept for comparison and for servers without log-probabilities).
JUDGES = ("details", "contrast", "yesno", "yesno-calibrated", "rating")

_YESNO_SYSTEM = (
    "You check what a passage tells its reader. Given a passage and a fact, answer Yes if the passage "
    "states the fact (in the same or other words), No if it does not. A fact whose key detail (a name, "
    "date, place or number) the passage hides behind a placeholder such as [PERSON], [DATE] or *** is "
    "not stated. Answer Yes or No."
)


#: The question that closes the yes/no prompt (left out by the compact form, whose instructions,
#: shared by every question, already say "Answer Yes or No").
_YESNO_QUESTION = "\n\nDoes the passage state this fact? Answer Yes or No."
#: The question with the fact's specific details named (measured against the plain one on the
#: judge's controls and rejected: benchmarks/judge_masked_twin.py, benchmarks/README.md).
_DETAILS_QUESTION = "\n\nDoes the passage state this fact, with these details? Answer Yes or No."


def yesno_messages(evidence: str, claim: str, *, compact: bool = False,
                   details: Sequence[str] | None = None) -> list[dict[str, str]]:
    """The yes/no question: the instructions first (a prefix every claim shares, so a backend
    that keeps its evaluated prompt evaluates them once), then the passage and the fact, then
    the question (not when ``compact``: ~13 tokens fewer to evaluate per claim). With
    ``details`` the fact's specific details are named on a line of their own and the question
    asks for the fact with them (measured, not used by the attack: benchmarks/judge_masked_twin.py)."""
    if details:
        user = (f"Passage: {evidence}\n\nFact: {claim}\nIts specific details: {'; '.join(details)}"
                + _DETAILS_QUESTION)
        return [{"role": "system", "content": _YESNO_SYSTEM}, {"role": "user", "content": user}]
    user = f"Passage: {evidence}\n\nFact: {claim}" + ("" if compact else _YESNO_QUESTION)
    return [{"role": "system", "content": _YESNO_SYSTEM}, {"role": "user", "content": user}]


def yesno_prompt(llm: LLM, evidence: str, claim: str, *, compact: bool = False,
                 details: Sequence[str] | None = None) -> tuple[str, str, str]:
    """``(prefix, yes, no)``: the prompt as the model reads it and the two fixed answers to
    score after it. Where the backend does not know its chat template (a server) the
    question becomes plain text ending in ``Answer:``, with the answers after a space."""
    msgs = yesno_messages(evidence, claim, compact=compact, details=details)
    text = llm.chat_text(msgs)
    if text is None:
        return "\n\n".join(m["content"] for m in msgs) + "\nAnswer:", " Yes", " No"
    return text, "Yes", "No"


#: The content-free passage that calibrates a claim's yes/no margin (what the model answers
#: about the fact when the passage says nothing).
NULL_PASSAGE = "N/A"


def yesno_cuts(prefix: str, evidence: str, claim: str, *, passage: bool = False) -> tuple[int, ...]:
    """Where the parts of the yes/no prompt that other questions share end: the instructions
    (every question), and with ``passage`` the passage too (every claim asked against it); the
    claim comes last. Empty when the prompt does not hold the question as :func:`yesno_messages`
    writes it. The judge declares the instructions only: its passages are each claim's own best
    sentences, which seldom recur whole, and a declared part costs a token to cut the slot back to
    (benchmarks/README.md, the judge's LLM cost)."""
    head = f"Passage: {evidence}\n\n"
    start = prefix.find(f"{head}Fact: {claim}")
    if start <= 0:
        return ()
    return (start, start + len(head)) if passage else (start,)


def yesno_margin(llm: LLM, evidence: str, claim: str, *, compact: bool = False,
                 details: Sequence[str] | None = None) -> float:
    """``log P(Yes) - log P(No)`` for the claim against the evidence (each answer's tokens
    summed): positive when the judge finds the fact stated. Both answers are scored by
    :meth:`LLM.answer_logprobs` (one forward pass on llama.cpp), the instructions declared as
    shared (:func:`yesno_cuts`), so the margin is the same whatever was asked before it (the two
    forced calls before issue 57 reused whatever the slot held); an empty evidence is never
    support. ``compact``: the question without its closing sentence (:func:`yesno_messages`;
    measured in benchmarks/README.md, the judge's LLM cost, not the attack's); ``details``: the claim's specific
    details, named in the question (:func:`yesno_messages`)."""
    if not evidence.strip():
        return float("-inf")
    prefix, yes, no = yesno_prompt(llm, evidence, claim, compact=compact, details=details)
    lp_yes, lp_no = llm.answer_logprobs(prefix, [yes, no], shared=yesno_cuts(prefix, evidence, claim))
    return lp_yes - lp_no


def margin_rating(margin: float) -> int:
    """The rating a yes/no margin stands for: the fact stated (1) when ``P(Yes) > P(No)``,
    otherwise not stated (3). The rule needs no threshold tuned to any data."""
    return 1 if margin > 0 else 3


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


def rating_counts(ratings: Iterable[int]) -> dict[str, int]:
    """How many claims got each rating, keyed by the rating as text (``{"1": 3, "3": 1}``): the
    form JSON keeps, so a result read back from its file equals the one written."""
    return {str(k): v for k, v in sorted(Counter(ratings).items())}


def leakage_of(ratings: Sequence[int]) -> float:
    """``1 - mean((s - 1) / 2)``: 1 when every claim is fully supported, 0 when none is."""
    return 1.0 - sum((s - 1) / 2 for s in ratings) / len(ratings)


class Judging:
    """The judge's steps of :class:`~attackers.claim_linker.attack.ClaimLinkerAttack`, which
    mixes them in: the claims it judges, evidence for a claim, a batch of ratings, and the
    self-consistency control. They read the attack's parameters, its fitted claims and its
    models from ``self``.
    """

    # -- which claims: identifying ones (see attackers.claim_linker.reference)

    def _originals_index(self) -> OriginalsIndex:
        """Every original's claim vectors (embedded once per fit), with whom each is about."""
        if self._orig_index_ is None:
            flat = [c.text for claims in self.orig_claims_ for c in claims]
            vecs = self._get_embedder().encode(flat) if flat else np.zeros((0, 1), dtype=np.float32)
            people = [d.subject if d.subject is not None else f"id:{d.id}" for d in self._fitted_on]
            self._orig_index_ = OriginalsIndex(vecs, [len(c) for c in self.orig_claims_], people)
        return self._orig_index_

    def _details(self, i: int) -> list[list[str]]:
        """The specific details of each claim of original ``i`` (spaCy entities, numbers)."""
        if i not in self._details_:
            from audit.models.resources import resources_of

            nlp = resources_of(self).spacy(disable=("tagger", "parser", "attribute_ruler", "lemmatizer"))
            texts = [c.text for c in self.orig_claims_[i]]
            self._details_[i] = [self._uncommon(specific_details([(e.text, e.label_) for e in d.ents], t))
                                 for d, t in zip(nlp.pipe(texts), texts)]
            self._claim_details_.update(zip(texts, self._details_[i]))
        return self._details_[i]

    def _uncommon(self, details: list[str]) -> list[str]:
        """``details`` less those many people's originals state (the ``details`` judge only:
        :class:`~attackers.claim_linker.reference.DetailFrequency`)."""
        if self.judge != "details":
            return details
        if self._detail_freq_ is None:
            people = [d.subject if d.subject is not None else f"id:{d.id}" for d in self._fitted_on]
            self._detail_freq_ = DetailFrequency([d.text for d in self._fitted_on], people)
        return [d for d in details if not self._detail_freq_.common(d)]

    def _details_of(self, claim: str) -> list[str]:
        """The specific details of a claim's text (memoised; those of the originals' claims are
        found with :meth:`_details`)."""
        if claim not in self._claim_details_:
            from audit.models.resources import resources_of

            nlp = resources_of(self).spacy(disable=("tagger", "parser", "attribute_ruler", "lemmatizer"))
            found = specific_details([(e.text, e.label_) for e in nlp(claim).ents], claim)
            self._claim_details_[claim] = self._uncommon(found)
        return self._claim_details_[claim]

    def _stated(self, evidence: str, claim: str) -> list[str]:
        """The claim's specific details that ``evidence`` states in so many words."""
        return stated_details(self._details_of(claim), evidence)

    def _why_not_judged(self, i: int, k: int) -> str | None:
        """``None`` when claim ``k`` of original ``i`` is judged, else why not (it is not
        identifying; with ``identifying=False`` every claim is judged)."""
        if not self.identifying:
            return None
        return self._originals_index().why_not_identifying(i, k, self._details(i)[k], self.tolerance)

    def _judged_claims(self, originals, i: int) -> tuple[list[int], Counter[str]]:
        """The claims of original ``i`` the judge may judge (never the aux claims; identifying
        ones) and the number left out for each reason."""
        aux = set(self.aux_index_[originals[i].id])
        kept, dropped = [], Counter()
        for k in range(len(self.orig_claims_[i])):
            if k in aux:
                continue
            why = self._why_not_judged(i, k)
            if why is None:
                kept.append(k)
            else:
                dropped[why] += 1
        return kept, dropped

    def _reference(self, originals, i: int, k: int, exclude: set[int]) -> str | None:
        """The evidence that the reference record gives claim ``k`` of original ``i``: the
        sentences most related to it in the other original (not in ``exclude``) closest to it;
        (the ``contrast`` judge's threshold; ``details`` contrasts with masked twins)."""
        index = self._originals_index()
        vec = index.vecs[index.offsets[i] + k]
        o = index.nearest_other(vec, exclude | {i})
        if o < 0:
            return ""
        ranked = rank_evidence(self.orig_claims_[i][k].text, self.orig_claims_[o], vec, index.of(o))
        return evidence_text(originals[o], self.orig_claims_[o], ranked, self.evidence_sentences)

    # -- evidence and ratings

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

    def _margin(self, llm: LLM, evidence: str, claim: str) -> float:
        """:func:`yesno_margin`, asked once per fit for each (evidence, claim): a reference or
        an unchanged record recurs across releases."""
        key = (evidence, claim)
        if key not in self._margins_:
            self._margins_[key] = yesno_margin(llm, evidence, claim)
        return self._margins_[key]

    def _margin_rating(self, llm: LLM, evidence: str, claim: str) -> int:
        """The yes/no judges' rating of one claim (see :data:`JUDGES`); the ``details`` judge
        asks nothing of a passage that states none of the claim's details (not stated)."""
        if self.judge == "details" and not self._stated(evidence, claim):
            return 3
        m = self._margin(llm, evidence, claim)
        if self.judge == "yesno-calibrated":
            m -= self._margin(llm, NULL_PASSAGE, claim)
        elif self.judge in ("contrast", "details"):
            m -= self._null_threshold_ or 0.0
        return margin_rating(m)

    def _judge(self, llm: LLM, items: Sequence[tuple[str, str]], *, repeats: int) -> tuple[list[int | None], int]:
        """Ratings of ``(evidence, claim)`` pairs, and the number of answers that held no verdict.
        The yes/no judges score each pair once (they are deterministic; ``repeats`` is moot),
        the contrastive ones against the threshold their control set (:attr:`_null_threshold_`,
        0 before; ``details`` only where a detail is stated); the rating judge keeps the mode over ``repeats`` answers."""
        if self.judge != "rating" and self._judge_fallback_ is None:
            from audit.runtime.progress import bar as progress_bar
            from audit.models.llm import LLMError

            try:
                bar = progress_bar(items, enabled=self.progress, desc="judge", unit="claim")
                return [self._margin_rating(llm, ev, claim) for ev, claim in bar], 0
            except LLMError as exc:  # a server without log-probabilities: say so, judge by rating
                self._judge_fallback_ = str(exc)
                log.warning("claim linker: the yes/no judge needs log-probabilities (%s); judging by rating", exc)
        temperature = 0.0 if repeats == 1 else 0.7
        requests = [judge_request(ev, claim, seed=self.seed + r, temperature=temperature)
                    for ev, claim in items for r in range(repeats)]
        answers = llm.complete_batch(requests, progress=self.progress and "claim linker, judging leakage")
        verdicts = [parse_verdict(a) for a in answers]
        ratings = [mode_rating(verdicts[k * repeats:(k + 1) * repeats]) for k in range(len(items))]
        if self.judge == "details":  # the fallback too: a passage stating no detail states nothing
            ratings = [r if r is None or self._stated(ev, claim) else 3 for r, (ev, claim) in zip(ratings, items)]
        return ratings, sum(v is None for v in verdicts)

    @property
    def _judge_used(self) -> str:
        """The judge that actually answers: ``rating`` once the yes/no judge fell back."""
        return "rating" if self._judge_fallback_ is not None else self.judge
