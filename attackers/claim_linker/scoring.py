"""Semantic scoring: what the linked record still tells the adversary about the person.

Each of the original's claims other than the aux claims is judged against the sentences of
the linked record most related to it (:mod:`attackers.claim_linker.judge`), on every linked
document or a seeded sample; leakage per document is ``1 - mean((s - 1) / 2)``. The lexical
counterpart is ROUGE-L between the original and the linked record, on every trial.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from attackers.claim_linker.control import failed_controls
from attackers.claim_linker.judge import evidence_text, leakage_of, rating_counts
from attackers.claim_linker.linkers import DenseLinker, Link, Linker
from audit.core.results import Finding, Highlight, Result
from attackers.claim_linker import powered
from audit.core.ppi import PPIRun, PredictorUnavailable, describe_fallback, sequential_ppi
from audit.core.sequential import seeded_order
from audit.core.stats import cluster_bootstrap, clustered_details
from audit.core.text import RougeTokenizer, rouge_l
from audit.runtime.progress import say

if TYPE_CHECKING:
    from attackers.claim_linker.claims import Claim
    from audit.core.data import Document


#: How each judge turns its answers into a claim's rating (stated in the result's details).
DECISION_RULES = {
    "contrast": "a claim is stated (rating 1) when log P(Yes) - log P(No) for 'Does the passage state this fact?' "
                "exceeds 0 and the margins that the control's claims get on the records of other people most like "
                "them (their conformal 90% quantile: the threshold in judge_check), else not stated (3)",
    "details": "a claim is stated (rating 1) when the passage states at least one of its specific details in so "
               "many words (the finding lists them) and log P(Yes) - log P(No) for 'Does the passage state this fact?' "
               "exceeds 0 and the margins that the control's claims get on their masked twins (their own sentences "
               "with the specific details masked; the conformal 90% quantile: the threshold in judge_check), else "
               "not stated (3)",
    "yesno": "a claim is stated (rating 1) when log P(Yes) > log P(No) for 'Does the passage state this fact?', "
             "else not stated (3)",
    "yesno-calibrated": "a claim is stated (rating 1) when log P(Yes) - log P(No) for 'Does the passage state "
                        "this fact?' is larger with the passage than with a content-free passage ('N/A'), else not "
                        "stated (3)",
    "rating": "the generated word: same (1), similar (2) or no (3), the mode over the repeats",
}


@dataclass
class _Judged:
    """What the judge said so far, batch by batch: the plan entries with their ratings."""

    entries: list[tuple[Any, list[int | None]]] = field(default_factory=list)
    malformed: int = 0
    items: int = 0
    check: dict[str, Any] | None = None
    checked: bool = False

    def add(self, plan: list, ratings: list[int | None], malformed: int, items: int) -> None:
        pos = 0
        for entry in plan:
            self.entries.append((entry, ratings[pos:pos + len(entry[1])]))
            pos += len(entry[1])
        self.malformed += malformed
        self.items += items

    def in_order(self) -> tuple[list, list[int | None]]:
        """The plan in the trials' order and the ratings in the plan's order."""
        ordered = sorted(self.entries, key=lambda e: e[0][0])
        return [e for e, _ in ordered], [r for _, rs in ordered for r in rs]


@dataclass
class _Tally:
    """What the judge's ratings add up to over the scored documents."""

    values: list[float] = field(default_factory=list)  # leakage of each scored document
    lexical: list[float] = field(default_factory=list)  # ROUGE-L of the same documents
    documents: list[Finding] = field(default_factory=list)
    unrated: int = 0  # claims no answer gave a rating for
    ratings: Counter[int] = field(default_factory=Counter)
    left_out: Counter[str] = field(default_factory=Counter)  # claims not judged, per reason
    without_claims: list[str] = field(default_factory=list)  # scored documents with no claim to judge


class LeakageScoring:
    """The scoring steps of :class:`~attackers.claim_linker.attack.ClaimLinkerAttack`, which
    mixes them in (with :class:`~attackers.claim_linker.judge.Judging`). They read the attack's
    parameters, its fitted claims and its models from ``self``.
    """

    def _score(self, originals, trials: list[int], links: list[Link], docs: list[Document],
               rel_claims: list[list[Claim]], linker: Linker, release_name: str, correct_flags: list[bool],
               timings: dict[str, float]) -> list[Result]:
        """The semantic leakage result (LLM-judged, on the linked trials taken to the interval
        target) and the lexical one (ROUGE-L, on every trial)."""
        t = time.perf_counter()
        lexical = self._lexical_leakage(originals, trials, links, docs)
        timings["lexical"] = time.perf_counter() - t

        # Semantic scoring: every claim except the aux ones, each against the sentences of the linked
        # document most related to it; a cheap score on every document, the judge on documents taken
        # in a seeded order until the prediction-powered interval is narrow enough.
        llm = self._get_judge_llm()
        dense = isinstance(linker, DenseLinker) and linker.vectors is not None
        plan, items = self._plan(originals, [(p, trials[p], links[p].doc) for p in range(len(trials))], docs,
                                 rel_claims, linker.vectors if dense else None)
        judged = _Judged()
        run = self._powered(llm, originals, trials, plan, items, judged, dense, release_name, timings)
        timings.setdefault("judge_check", 0.0)
        chosen = {e[0] for e, _ in judged.entries}
        plan_judged, all_ratings = judged.in_order()
        rest = [e for e in plan if e[0] not in chosen and not e[1]]  # documents without identifying claims
        tally = self._tally(originals, trials, links, docs, rel_claims, sorted(plan_judged + rest, key=lambda e: e[0]),
                            all_ratings, lexical, correct_flags)
        est = run.estimate
        mean, ci = est.value, est.ci
        llm_id = getattr(llm, "identity", "") or type(llm).__name__
        details = self._semantic_details(tally, judged.check, llm_id, dense, run, len(trials), judged.malformed,
                                         judged.items * (self.repeats if self._judge_used == "rating" else 1))
        details.update(unit="documents", trials=sum(tally.ratings.values()), trial_unit="claims",
                       interval=est.to_dict()["interval"], tiny_sample=est.judged < 10 and not est.exact)
        baseline, beats, details["in_verdict"] = _checked_baseline(judged.check, ci, bool(tally.values))
        semantic = Result(kind="attack", name=f"{self.name}.leakage", release=release_name, value=mean, ci=ci,
                          n=est.judged, baseline=baseline, beats_baseline=beats, details=details,
                          documents=tally.documents)
        lexc = cluster_bootstrap([(v, 1) for v in lexical], seed=self.seed)
        lex = Result(kind="attack", name=f"{self.name}.lexical_leakage", release=release_name, value=lexc.value,
                     ci=lexc.ci, n=len(lexical),
                     details={"metric": "ROUGE-L F-measure between each original and its linked document",
                              "semantic_on_same_sample": mean if tally.values else None,
                              **clustered_details(lexc, "documents")},
                     documents=[_lexical_finding(originals[i].id, docs, link, v, ok)
                                for i, link, v, ok in zip(trials, links, lexical, correct_flags)])
        return [semantic, lex]

    def _powered(self, llm, originals, trials: list[int], plan: list, items: list[tuple[str, str]], judged: _Judged,
                 dense: bool, release_name: str, timings: dict[str, float]) -> PPIRun:
        """The judge on documents of ``plan`` (every linked trial's claims and their evidence) in a
        seeded order, the cheap predictor on all of them (:mod:`.powered`), until the
        prediction-powered interval reaches ``score_target`` (:func:`audit.core.ppi.sequential_ppi`)."""
        spans, pos = {}, 0
        for entry in plan:
            spans[originals[trials[entry[0]]].id] = (entry, pos, pos + len(entry[1]))
            pos += len(entry[1])
        ids = [d for d, (e, _, _) in spans.items() if e[1]]
        claim_values: dict[str, list[float]] = {}

        def label(batch: list[str]) -> dict[str, float]:
            chosen = [spans[d] for d in batch]
            if chosen and not judged.checked:
                started = time.perf_counter()
                judged.check, judged.checked = self._check_judge(llm, originals, dense), True
                timings["judge_check"] = time.perf_counter() - started
                self.once_seconds_ = getattr(self, "once_seconds_", 0.0) + timings["judge_check"]  # per fit, any size
            asked = [it for _, a, b in chosen for it in items[a:b]]
            ratings, malformed = self._judge(llm, asked, repeats=self.repeats)
            judged.add([e for e, _, _ in chosen], ratings, malformed, len(asked))
            out, at = {}, 0
            for d, (e, _, _) in zip(batch, chosen):
                rs, at = ratings[at:at + len(e[1])], at + len(e[1])
                valid = [r for r in rs if r is not None]
                if valid:
                    out[d] = leakage_of(valid)
                    claim_values[d] = [out[d] if r is None else 1 - (r - 1) / 2 for r in rs]
            return out

        predict = self._leakage_predictor(spans, ids, items)
        # what the predictor read and the judge's claim values, per release (the predictor table of
        # benchmarks/claim_linker_ppi.py measures each feature against the judge from them)
        self.powered_inputs_[release_name] = (predict, claim_values)
        return sequential_ppi(ids, seed=self.seed, salt="score-sample", target=self.score_target, label=label,
                              predict=lambda _labels: predict(claim_values), predictor=powered.NAME,
                              estimand=self.score_estimand, limit=self.score_sample,
                              say=lambda m: say(f"claim_linker leakage on {release_name}: {m}", enabled=self.progress))

    def _leakage_predictor(self, spans: dict, ids: list[str], items: list[tuple[str, str]]):
        """The cheap predictor of each document's leakage (:class:`.powered.LeakagePredictor`),
        or a stand-in that says why there is none (``score_predictor="none"``, no claims)."""
        def unavailable(why: str):
            def fail(_values):
                raise PredictorUnavailable(why)
            return fail

        if self.score_predictor == "none":
            return unavailable("none asked for (score_predictor=none)")
        if not items:
            return unavailable("no claim to score")
        rows, details = [], []
        for d in ids:
            entry, a, b = spans[d]
            details += [self._details_of(c.text) for c in entry[1]]  # the judge's details (common ones left out)
            rows += list(range(a, b))
        pairs = [items[r] for r in rows]
        emb = self._get_embedder()
        cv = np.asarray(emb.encode([c for _, c in pairs]))
        ev = np.asarray(emb.encode([e or " " for e, _ in pairs]))
        cos = (cv * ev).sum(axis=1) / np.maximum(np.linalg.norm(cv, axis=1) * np.linalg.norm(ev, axis=1), 1e-12)
        docs_of = tuple(d for d in ids for _ in range(spans[d][2] - spans[d][1]))
        return powered.LeakagePredictor(powered.claim_features(pairs, details, cos), docs_of,
                                        tuple(seeded_order(ids, self.seed, "score-sample")))

    def _tally(self, originals, trials: list[int], links: list[Link], docs: list[Document],
               rel_claims: list[list[Claim]], plan: list, all_ratings: list[int | None], lexical: list[float],
               correct_flags: list[bool]) -> _Tally:
        """What the judge's ratings (of every item of ``plan``, in order) say per document."""
        tally = _Tally()
        pos = 0
        for p, claims, ranked, dropped in plan:
            i, j = trials[p], links[p].doc
            ratings = all_ratings[pos:pos + len(claims)]
            pos += len(claims)
            tally.left_out.update(dropped)
            if not claims:
                tally.without_claims.append(originals[i].id)
                continue
            valid = [r for r in ratings if r is not None]
            tally.unrated += len(ratings) - len(valid)
            tally.ratings.update(valid)
            if not valid:
                continue
            value = leakage_of(valid)
            tally.values.append(value)
            tally.lexical.append(lexical[p])
            tally.documents.append(self._leakage_finding(originals[i], docs[j], rel_claims[j], claims, ratings,
                                                         ranked, correct_flags[p], value, lexical[p], dropped))
        return tally

    def _lexical_leakage(self, originals, trials: list[int], links: list[Link], docs: list[Document]) -> list[float]:
        """ROUGE-L of each original with its linked document (0 when not linked), every trial."""
        tok = RougeTokenizer()
        lexical = []
        for i, link in zip(trials, links):
            if link.doc < 0:
                lexical.append(0.0)
                continue
            key = originals[i].id
            if key not in self._orig_tokens:
                self._orig_tokens[key] = tok(originals[i].text)
            lexical.append(rouge_l(self._orig_tokens[key], tok(docs[link.doc].text)))
        return lexical

    def _plan(self, originals, chosen: list[tuple[int, int, int]], docs: list[Document],
              rel_claims: list[list[Claim]], vectors: np.ndarray | None):
        """What to ask the judge about the ``chosen`` trials ``(position, original, linked
        document)``: per linked trial with claims beyond the aux ones, ``(position, claims,
        evidence rankings, claims left out per reason)`` (no claims when none identifies), and
        every ``(evidence, claim)`` pair, in that order. ``vectors``: the dense linker's claim
        vectors, which rank the evidence when given."""
        offsets = np.cumsum([0] + [len(c) for c in rel_claims])
        plan = []
        items: list[tuple[str, str]] = []
        for p, i, j in chosen:
            if j < 0 or not any(k not in self.aux_index_[originals[i].id] for k in range(len(self.orig_claims_[i]))):
                continue
            ks, dropped = self._judged_claims(originals, i)
            if self.claim_sample is not None and len(ks) > self.claim_sample:
                rng = random.Random(f"{self.seed}:claim-sample:{originals[i].id}")
                ks = [ks[k] for k in sorted(rng.sample(range(len(ks)), self.claim_sample))]
            claims = [self.orig_claims_[i][k] for k in ks]
            vecs = vectors[offsets[j]:offsets[j + 1]] if vectors is not None else None
            evidence, ranked = self._evidence([c.text for c in claims], docs[j], rel_claims[j], vecs)
            plan.append((p, claims, ranked, dropped))
            items += [(ev, c.text) for ev, c in zip(evidence, claims)]
        return plan, items

    def _leakage_finding(self, orig: Document, linked: Document, linked_claims: list[Claim], claims: list[Claim],
                         ratings: list[int | None], ranked: list[list[int]], correct: bool, value: float,
                         lexical: float, dropped: Counter[str]) -> Finding:
        """What the judge found ``linked`` to state of the original's ``claims``."""
        valid = [r for r in ratings if r is not None]
        word = {1: "stated", 2: "similar information"} if self._judge_used != "rating" else \
            {1: "same information", 2: "similar information"}
        evidence, highlights = [], []
        for c, r, rank in zip(claims, ratings, ranked):
            if r not in (1, 2):
                continue
            item: dict[str, Any] = {"claim": c.text, "rating": r, "orig_start": c.start, "orig_end": c.end}
            if rank:
                sup = linked_claims[rank[0]]
                # the claim's specific details, and those the judged passage states in so many words
                stated = self._stated(evidence_text(linked, linked_claims, rank, self.evidence_sentences), c.text)
                item.update(support=sup.text, start=sup.start, end=sup.end, details=self._details_of(c.text),
                            details_stated=stated)
                said = f" (details stated: {'; '.join(stated)})" if stated else " (no specific detail stated)"
                highlights.append(Highlight(sup.start, sup.end, "claim", f"{word[r]}: {c.text}{said}"))
            evidence.append(item)
        # Success: the attacker linked the right record and it tells something more about the person.
        return Finding(
            id=orig.id, success=bool(correct and evidence),
            summary=_leakage_summary(correct, len(evidence), len(valid), value),
            highlights=highlights, highlights_in=linked.id,
            facts={"linked": linked.id, "correct": correct,
                   "leakage": round(value, 4), "lexical_leakage": round(lexical, 4),
                   "claims_scored": len(valid), "claims_unrated": len(ratings) - len(valid),
                   "claims_left_out": dict(sorted(dropped.items())),
                   "ratings": rating_counts(valid), "leaked": evidence},
            private={"leaked"})  # claims of the original, with what supports them

    def _semantic_details(self, tally: _Tally, check: dict[str, Any] | None, llm_id: str, dense: bool,
                          run: PPIRun, linked: int, malformed: int, requests: int) -> dict[str, Any]:
        """The semantic result's details, with a warning when the judge failed its control.
        ``run``: how the figure was made (:func:`audit.core.ppi.sequential_ppi`); ``linked``: the
        linked trials, of which those with claims to judge are the figure's documents. Long because
        each warning is one branch of one chain (the first reason the figure is weak is said)."""
        est = run.estimate
        n_chosen, n_trials = est.judged, linked
        sampled = run.target is not None or not est.exact
        note = f"semantic leakage of the linked documents: {describe_fallback(est)}"
        if self.claim_sample is not None:
            note += f", at most {self.claim_sample} seeded claims of each"
        if self.identifying:
            left = ", ".join(f"{n} ({why})" for why, n in sorted(tally.left_out.items())) or "none"
            note += (f"; only claims that single the person out are judged (claims left out: {left}; documents "
                     f"with none: {len(tally.without_claims)})")
        warning = None
        judge = self._judge_used
        if check is not None and not check["passed"]:
            failed = "; ".join(check.get("failed") or failed_controls(check))
            warning = (f"the judge ({llm_id}, {judge}) failed its control ({failed}; the leakage of claims judged "
                       f"against their own document, another document, their masked twin: {check['self']}, "
                       f"{check['unrelated']}, {check.get('masked')}), so the semantic leakage figure is inconclusive "
                       "and does not count in the verdict; use a stronger --llm")
        elif check is not None and check.get("too_few"):
            kind = "identifying claims" if self.identifying else "claims beyond the attacker's"
            warning = (f"the judge's control found only {check['claims']} {kind} (asked for {self.judge_check}), "
                       "so it is weak evidence that the judge is reliable")
        elif n_trials and len(tally.without_claims) * 2 > n_trials:
            warning = (f"{len(tally.without_claims)} of {n_trials} linked documents have no claim that singles "
                       "the person out, so the leakage figure rests on few documents")
        elif check is None and tally.values:
            warning = ("the judge's self-consistency control could not run (judge_check=0 or fewer than two "
                       "originals with claims), so the semantic leakage figure is unchecked and does not count "
                       "in the verdict" + ("; without it the contrastive judge has no threshold and used "
                                           "P(Yes) > P(No)" if judge in ("contrast", "details") else ""))
        fallback = None
        if self._judge_fallback_ is not None:  # said in the note; a warning only with a failed control
            fallback = (f"the yes/no judge needs log-probabilities, which {llm_id} did not give "
                        f"({self._judge_fallback_[:200]}); it judged by generated ratings instead")
            note += "; " + fallback
            warning = None if warning is None else f"{fallback}; {warning}"
        if warning is not None:
            note += "; WARNING: " + warning
        return {
            "judge": judge, "judge_fallback": fallback, "decision_rule": DECISION_RULES[judge],
            "scored_documents": len(tally.values), "linked_documents": n_trials,
            # the typed sample note the report reads (audit.core.details.Sampled); the runner
            # widens "of" to the release when it sampled the release first
            **({"sampled": run.sampled()} if sampled else {}),
            **est.details(),
            "score_sample": self.score_sample, "score_target": self.score_target, "claim_sample": self.claim_sample, "sample_seed": self.seed,
            "repeats": self.repeats if judge == "rating" else 1,
            "evidence_sentences": self.evidence_sentences, "evidence_ranking": "dense" if dense else "word overlap",
            "llm": llm_id, "malformed_answers": malformed, "llm_requests": requests,
            "unrated_claims": tally.unrated, "identifying_only": self.identifying,
            "claims_left_out": dict(sorted(tally.left_out.items())),
            "documents_without_identifying_claims": tally.without_claims,
            "rating_counts": rating_counts(tally.ratings.elements()),
            "judge_check": check, "warning": warning,
            "lexical_leakage_same_documents": (sum(tally.lexical) / len(tally.lexical)) if tally.lexical else None,
            "note": note,
        }


def _checked_baseline(check: dict[str, Any] | None, ci: tuple[float, float] | None,
                      scored: bool) -> tuple[float | None, bool | None, bool]:
    """``(baseline, beats_baseline, in_verdict)`` of the semantic result. What another person's
    record "states" of someone (the control's other-document level) is the baseline: leakage
    above it is what a record tells about its own person. Only a figure whose judge passed its
    control has one, and only such a figure counts in the report's verdict."""
    passed = check is not None and bool(check["passed"])
    baseline = check["unrelated"] if passed else None
    beats = None if baseline is None or ci is None or not scored else bool(ci[0] > baseline)
    return baseline, beats, passed and scored


def _lexical_finding(orig_id: str, docs: list[Document], link: Link, value: float, ok: bool) -> Finding:
    return Finding(id=orig_id, success=ok,
                   summary=(f"ROUGE-L {value:.2f} between the original and the record it was "
                            f"linked to{'' if ok else ' (a wrong link)'}"
                            if link.doc >= 0 else "Not linked to any record"),
                   facts={"linked": docs[link.doc].id if link.doc >= 0 else None, "rouge_l": round(value, 4)})


def _leakage_summary(correct: bool, leaked: int, scored: int, value: float) -> str:
    """One sentence on what the linked record says about the person (no claim quoted)."""
    s = (f"The linked record supports {leaked} of {scored} further claim{'s' if scored != 1 else ''} "
         f"of the original (leakage {value:.2f})")
    return s if correct else s + ", but it is the wrong record"
