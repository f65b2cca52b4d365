"""The judge's control: three questions whose true answers are known, asked once per fit.

``judge_check`` seeded identifying claims of the originals are judged

* against their **own** document (the fact is there: leakage near 1, at least
  :data:`JUDGE_SELF_MIN`);
* against an **unrelated** original (another person: at most :data:`JUDGE_OTHER_MAX`);
* against their **masked twin** (issue 68): the claim's own evidence with every specific detail
  masked as a release would mask it (:func:`masked_twin`: spaCy's entities of
  :data:`~attackers.claim_linker.reference.DETAIL_LABELS` and numbers, suppressed, labelled or
  starred in turn). The sentence's template is all that is left, so the fact is not stated: at most
  :data:`JUDGE_MASKED_MAX`. A judge that rewards a template ("The applicant was born in and lives
  in .") fails here, whatever it does on the other two.

A judge that fails any of the three makes the leakage figure inconclusive; the result names the
failing control (:func:`failed_controls`).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from attackers.claim_linker.judge import leakage_of, rating_counts
from attackers.claim_linker.reference import MASK_STYLES, detail_spans, mask_spans, null_threshold

if TYPE_CHECKING:
    from audit.models.llm import LLM

#: The judge passes its control when claims judged against their own document (true leakage 1)
#: leak at least this much ...
JUDGE_SELF_MIN = 0.8
#: ... against another document (true leakage near 0) at most this much: a judge that calls
#: everything "similar" scores 0.5 there and fails ...
JUDGE_OTHER_MAX = 0.2
#: ... and against their masked twin (every specific detail masked) at most this much.
JUDGE_MASKED_MAX = 0.2

#: The controls, their levels and which way each must go (the names results and reports use).
CONTROLS = (("self", JUDGE_SELF_MIN, ">="), ("unrelated", JUDGE_OTHER_MAX, "<="), ("masked", JUDGE_MASKED_MAX, "<="))


def control_rule() -> str:
    """The pass rule, in words."""
    what = {"self": "against their own document", "unrelated": "against another document",
            "masked": "against their masked twin (specific details masked)"}
    return "; ".join(f"leakage of claims {what[name]} {op} {level}" for name, level, op in CONTROLS)


def failed_controls(check: dict[str, Any]) -> list[str]:
    """The controls the judge failed, as ``"masked 0.62 (needed <= 0.2)"``; a control with no
    answer (``None``) fails too. A check written before the masked twin existed has no ``masked``."""
    failed = []
    for name, level, op in CONTROLS:
        if name not in check:
            continue
        value = check[name]
        ok = value is not None and (value >= level if op == ">=" else value <= level)
        if not ok:
            failed.append(f"{name} {value} (needed {op} {level})")
    return failed


def masked_twin(nlp, evidence: str, style: str) -> str | None:
    """``evidence`` with its specific details masked in ``style`` (:data:`MASK_STYLES`), found as
    a sanitizer would find them (spaCy's entities, words with a digit); ``None`` when it has none."""
    doc = nlp(evidence)
    spans = detail_spans([(e.start_char, e.end_char, e.label_) for e in doc.ents], evidence)
    return mask_spans(evidence, spans, style) if spans else None


class JudgeControl:
    """The control's steps of :class:`~attackers.claim_linker.attack.ClaimLinkerAttack`, which mixes
    them in (with :class:`~attackers.claim_linker.judge.Judging`, whose questions it asks)."""

    def _control_claims(self, originals, rng: random.Random) -> tuple[list[tuple[int, int]], Counter[str]]:
        """``judge_check`` seeded claims ``(original, claim)`` of the originals, never aux
        claims, only those the judge judges (identifying ones), and how many claims looked at
        were left out, per reason. The claims are looked at in a seeded order until enough
        are found, so a large corpus is not parsed whole."""
        aux = [set(self.aux_index_[d.id]) for d in originals]
        pool = [(i, k) for i in range(len(originals)) for k in range(len(self.orig_claims_[i])) if k not in aux[i]]
        if not self.identifying:  # every claim (the draw of the earlier control, unchanged)
            return sorted(rng.sample(pool, min(self.judge_check, len(pool)))), Counter()
        picks: list[tuple[int, int]] = []
        dropped: Counter[str] = Counter()
        for i, k in rng.sample(pool, len(pool)):
            why = self._why_not_judged(i, k)
            if why is None:
                picks.append((i, k))
                if len(picks) == self.judge_check:
                    break
            else:
                dropped[why] += 1
        return sorted(picks), dropped

    def _control_pairs(self, originals, dense: bool, references: bool | None = None):
        """The control's questions: ``judge_check`` seeded claims of the originals
        (:meth:`_control_claims`), each with its evidence from its own document, from another
        original and its masked twin, as ``(own, other, masked, references, dropped)``: pairs of
        ``(evidence, claim)`` (``masked`` only for the claims whose evidence has a detail to
        mask), the reference of each claim (the closest original other than both; ``None``
        unless ``references``, by default when the judge is ``contrast``) and the claims left
        out, per reason. ``None`` when the
        originals cannot make a control (fewer than two with claims)."""
        if self.judge_check == 0 or len(originals) < 2:
            return None
        references = self.judge == "contrast" if references is None else references
        rng = random.Random(f"{self.seed}:judge-check")
        with_claims = [i for i in range(len(originals)) if self.orig_claims_[i]]
        if len(with_claims) < 2:
            return None
        picks, dropped = self._control_claims(originals, rng)
        if not picks:
            return None
        targets = [(i, rng.choice([o for o in with_claims if o != i])) for i, _ in picks]
        vecs: dict[int, np.ndarray | None] = {}  # claim vectors of each document used, embedded once
        for t in {t for pair in targets for t in pair}:
            vecs[t] = self._get_embedder().encode([c.text for c in self.orig_claims_[t]]) if dense else None
        own: list[tuple[str, str]] = []
        other: list[tuple[str, str]] = []
        refs: list[str | None] = []
        for (i, k), (_, t) in zip(picks, targets):
            claim = self.orig_claims_[i][k].text
            for out, doc in ((own, i), (other, t)):
                (ev,), _ = self._evidence([claim], originals[doc], self.orig_claims_[doc], vecs[doc])
                out.append((ev, claim))
            refs.append(self._reference(originals, i, k, {t}) if references else None)
        return own, other, self._masked_pairs(own), refs, dropped

    def _masked_pairs(self, own: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Each own question with its evidence's specific details masked, the styles of
        :data:`MASK_STYLES` in turn (claim by claim); a claim whose evidence has no detail to mask
        is left out."""
        from audit.models.resources import resources_of

        nlp = resources_of(self).spacy(disable=("tagger", "parser", "attribute_ruler", "lemmatizer"))
        out = []
        for n, (ev, claim) in enumerate(own):
            twin = masked_twin(nlp, ev, MASK_STYLES[n % len(MASK_STYLES)])
            if twin is not None:
                out.append((twin, claim))
        return out

    def _masked_ratings(self, masked: list[tuple[str, str]], margins: list[float], out: dict[str, Any]) -> list[int]:
        """The ``details`` judge's ratings of the masked twins: each against the threshold that the
        other twins' margins set (leave one out), and only where the twin states a detail of its
        claim; ``out["masked_llm"]`` gets the share the margins alone would rate stated."""
        llm_says = [m > max(0.0, null_threshold(margins[:j] + margins[j + 1:])) for j, m in enumerate(margins)]
        out["masked_llm"] = round(sum(llm_says) / len(llm_says), 4) if llm_says else None
        return [1 if says and self._stated(ev, claim) else 3 for says, (ev, claim) in zip(llm_says, masked)]

    def _check_judge(self, llm: LLM, originals, dense: bool) -> dict[str, Any] | None:
        """The judge's control, once per fit (see the module): ``judge_check`` claims of the
        originals (never aux claims; identifying ones) rated against their own document, another
        original and their masked twin. A judge that fails any makes every leakage figure
        meaningless, and the result says which.

        The ``contrast`` judge first asks each claim of the control against its reference record
        (the original closest to it other than its own and the other one) and sets its threshold
        from those margins (:func:`~attackers.claim_linker.reference.null_threshold`); the
        other-document and masked questions, asked after, test that threshold on passages it
        never saw. The ``details`` judge sets its threshold from the masked twins' margins
        (:meth:`_masked_threshold`); each twin is then rated against the threshold of the others
        (leave one out), so no twin is judged by a threshold it set."""
        if self._judge_check_ is not None:
            return self._judge_check_
        pairs = self._control_pairs(originals, dense)
        if pairs is None:
            return None
        own, other, masked, refs, dropped = pairs
        out: dict[str, Any] = {"claims": len(own), "judge": self._judge_used, "masked_claims": len(masked),
                               "left_out": dict(sorted(dropped.items()))}
        null: list[float] | None = None
        if self.judge in ("contrast", "details") and self._judge_fallback_ is None:
            from audit.models.llm import LLMError

            try:
                if self.judge == "contrast":
                    null = [self._margin(llm, ref, claim) for ref, (_, claim) in zip(refs, own)]
                    out["reference_margins"] = [round(m, 4) for m in null]
                else:
                    null = [self._margin(llm, ev, claim) for ev, claim in masked]
                    out["masked_margins"] = [round(m, 4) for m in null]
                self._null_threshold_ = null_threshold(null)
                out["threshold"] = round(self._null_threshold_, 4)
            except LLMError as exc:  # judged by rating (see _judge)
                self._judge_fallback_ = str(exc)
        judged_masked = masked if self.judge != "details" or self._judge_fallback_ is not None else []
        ratings, _ = self._judge(llm, own + other + judged_masked, repeats=1)  # one batch
        masked_ratings = ratings[2 * len(own):] if judged_masked else self._masked_ratings(masked, null or [], out)
        out["judge"] = self._judge_used
        parts = (("self", ratings[:len(own)]), ("unrelated", ratings[len(own):2 * len(own)]),
                 ("masked", masked_ratings))
        for kind, part in parts:
            valid = [r for r in part if r is not None]
            out[kind] = round(leakage_of(valid), 4) if valid else None
            out[f"{kind}_ratings"] = rating_counts(valid)
        if not masked:  # no claim's evidence had a detail to mask: nothing to test, said as such
            out["masked"] = None
        out["failed"] = failed_controls(out) if masked else failed_controls({k: out[k] for k in ("self", "unrelated")})
        out["passed"] = not out["failed"]
        out["rule"] = control_rule()
        out["too_few"] = len(own) < self.judge_check
        self._judge_check_ = out
        return out
