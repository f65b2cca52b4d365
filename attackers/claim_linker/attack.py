"""The registered claim-linker attack: fit (atomise the originals, draw the attacker's
knowledge), link each release's records, then score what the linked records leak."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from attackers.claim_linker.auxiliary import AUX_SELECT, AuxSelect, paraphrase_documents, select_aux
from attackers.claim_linker.claims import Claim, make_splitter
from attackers.claim_linker.control import JudgeControl
from attackers.claim_linker.judge import JUDGES, Judging
from attackers.claim_linker.linkers import LINKERS, BM25Linker, DenseLinker, Link, Linker, LinkerName, RougeLinker
from attackers.claim_linker.scoring import LeakageScoring
from audit.core.errors import AnonauditError
from audit.core.interfaces import Attack
from audit.core.registry import register
from audit.core.results import Finding, Highlight, Result
from audit.core.ppi import ESTIMANDS
from audit.core.sequential import DEFAULT_HALF_WIDTH, check_target
from audit.core.stats import risk
from audit.models.resources import UsesLLM, resources_of

if TYPE_CHECKING:
    from audit.core.data import Document, Release, Scenario
    from audit.models.llm import LLM


@register("attack")
class ClaimLinkerAttack(UsesLLM, LeakageScoring, Judging, JudgeControl, Attack):
    """Claim-level linkage (dense retrieval, majority vote) and LLM-judged semantic leakage."""

    name = "claim_linker"
    description = (
        "Simulates an adversary who already knows a few facts about a person, reworded as they "
        "would be in real life, and searches the sanitized release for the record that matches "
        "them (each fact retrieves similar statements by meaning and votes for their record). "
        "It reports how often the right record is found, and then how much of the rest of the "
        "person's original record the linked sanitized record still tells the adversary, judged "
        "claim by claim by a language model (does the record state the fact: yes or no), beside the "
        "word-overlap (ROUGE-L) figure that surface metrics would give."
    )
    requires = frozenset({"originals"})
    #: The fix the report proposes when this attack decides a release ({exposed}/{total} documents).
    remedy: ClassVar[str] = (
        "Facts an adversary already knows link {exposed} of {total} records: generalise or drop the "
        "distinctive facts in the marked claims (e.g. `anonaudit sanitize prompt`).")
    #: The parameter that sets the leakage's interval target, and what the quick budget turns off
    #: (:mod:`audit.pipeline.budget`).
    precision_param: ClassVar[str] = "score_target"
    #: quick stops the judge at ±0.20: at ±0.10 a document's leakage (0, 0.5 or 1) needed every one of
    #: the demo's 40 documents a release, so quick took longer than standard (568 against 491 s)
    budget_params: ClassVar[dict[str, dict[str, Any]]] = {"quick": {"paraphrase": False, "score_target": 0.20}}
    #: Older command-line spellings (``--no-scoring``).
    cli_aliases: ClassVar[dict[str, str]] = {"no_scoring": "no_score"}

    def __init__(self, claims: Literal["sentences", "llm"] = "sentences", linker: LinkerName = "dense",
                 aux_claims: int = 3, aux_select: AuxSelect = "random", paraphrase: bool = True, score: bool = True,
                 score_sample: int | None = None, score_target: float | None = DEFAULT_HALF_WIDTH,
                 score_estimand: Literal["release", "population"] = "release",
                 score_predictor: Literal["features", "none"] = "features",
                 claim_sample: int | None = None, repeats: int = 3, llm: Any = None,
                 embedder: Any = None, tolerance: float = 0.02, top_k: int = 10, evidence_sentences: int = 1,
                 judge: Literal["details", "contrast", "yesno", "yesno-calibrated", "rating"] = "details",
                 judge_llm: Any = None, judge_check: int = 16, identifying: bool = True,
                 approx_threshold: int = 200_000, seed: int = 0, progress: bool = False):
        """
        claims: how documents are split into claims: spaCy sentences and clauses (fast) or the LLM.
        linker: dense = per-claim embedding search with majority vote (the paper's attack); the
            others are baselines.
        aux_claims: claims of each original that the attacker knows.
        aux_select: which claims of each original the attacker knows.
        paraphrase: reword the attacker's claims with the LLM before searching.
        score: measure semantic and lexical leakage after linking (off: only link).
        score_sample: score semantic leakage on at most N linked documents, taken in a seeded order
            (linking always covers every document).
        score_target: score linked documents in a seeded order, in batches of 10, 20, 40, ...,
            until the 95% interval of the leakage is at most this wide on each side (none: every
            linked document, up to score_sample).
        score_estimand: the question the leakage's interval answers: release = about this release (the
            documents not judged are the only uncertainty; exact when every one is judged); population =
            about documents like these (to compare sanitizers).
        score_predictor: the cheap score on every linked document that the judge's sample corrects
            (prediction-powered, audit.core.ppi): features = a logistic regression on each claim's
            similarity, word and detail overlap with its evidence, cross-fitted by document; none = the
            plain sample of judged documents.
        claim_sample: judge at most N seeded claims of each scored document (all when None).
        repeats: times each rating is asked, the mode kept (the rating judge; the yes/no judge is
            deterministic and asks once).
        llm: the LLM that paraphrases, judges (and splits claims with claims=llm).
        embedder: sentence embedder of the dense linker (default: MiniLM).
        tolerance: matches within this score of a claim's best match also vote.
        top_k: claims each known claim retrieves.
        evidence_sentences: sentences of the linked record shown to the judge with each claim (1: the
            judge's control passes as it did with 3, at ~40% fewer tokens per claim; benchmarks/README.md).
        judge: details = as contrast, and only where the passage states one of the claim's specific details in
            so many words (a masked detail states nothing; the finding lists those stated); contrast = stated when log P(Yes) - log P(No) exceeds what the control's claims get on the
            records of other people most like them; yesno = P(Yes) > P(No); yesno-calibrated = against
            a content-free passage; rating = a generated word of {same, similar, no}.
        judge_llm: the LLM that judges leakage, when not ``llm``.
        judge_check: claims in the judge's control (own document, another document, masked twin); 0 = off.
        identifying: judge only claims that single the person out (a specific detail, and no near-equal
            claim in another person's original), in the releases and in the control; off: every claim.
        approx_threshold: above this many claims the dense index is approximate (HNSW).
        """
        self.claims = claims
        self.linker = linker
        self.aux_claims = aux_claims
        self.aux_select = aux_select
        self.paraphrase = paraphrase
        self.score = score
        self.score_sample = score_sample
        self.score_target = score_target
        self.score_estimand = score_estimand
        self.score_predictor = score_predictor
        self.claim_sample = claim_sample
        self.repeats = repeats
        self.llm = llm
        self.embedder = embedder
        self.tolerance = tolerance
        self.top_k = top_k
        self.evidence_sentences = evidence_sentences
        self.judge = judge
        self.judge_llm = judge_llm
        self.judge_check = judge_check
        self.identifying = identifying
        self.approx_threshold = approx_threshold
        self.seed = seed
        self.progress = progress
        self._check()
        self._embedder_obj = self._splitter = self._fitted_on = None
        self._judge_fallback_: str | None = None  # why the yes/no judge could not run (no log-probabilities)

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
        check_target(self.score_target, "claim_linker score_target")
        if self.score_estimand not in ESTIMANDS:
            raise AnonauditError(f"score_estimand must be one of {', '.join(ESTIMANDS)}, got {self.score_estimand!r}")
        if self.score_predictor not in ("features", "none"):
            raise AnonauditError(f"score_predictor must be 'features' or 'none', got {self.score_predictor!r}")
        if self.claim_sample is not None and self.claim_sample < 1:
            raise AnonauditError("claim_sample must be a positive number of claims")
        if self.evidence_sentences < 1:
            raise AnonauditError("evidence_sentences must be at least 1")
        if self.judge not in JUDGES:
            raise AnonauditError(f"judge must be one of {', '.join(JUDGES)}, got {self.judge!r}")
        if self.judge_check < 0:
            raise AnonauditError("judge_check must be 0 (off) or a number of claims")

    # -- resources: the run's shared models (see audit.models.resources), asked for on first use;
    #    both LLMs through UsesLLM._get_llm, in its one memo (always with the answer cache: there is no
    #    cache parameter)

    def _get_judge_llm(self) -> LLM:
        if self.judge_llm is None:
            return self._get_llm()
        return self._get_llm("judge_llm", what="the leakage judge")

    def close(self) -> None:
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
                               progress=self.progress, executor=resources_of(self).executor)
        if self.linker in ("bm25", "bm25-single"):
            return BM25Linker(single=self.linker == "bm25-single", top_k=self.top_k, tolerance=self.tolerance)
        return RougeLinker()

    # -- fit: atomise the originals and draw the attacker's knowledge once per scenario

    def fit(self, scenario: Scenario) -> ClaimLinkerAttack:
        originals = scenario.originals
        if originals is None:
            raise AnonauditError("the claim linker needs the original documents (--originals)")
        self.fit_timings_: dict[str, float] = {}
        self.once_seconds_ = 0.0  # work done once per fit whatever the data (the judge's control)
        t = time.perf_counter()
        self.orig_claims_ = self._get_splitter().split(list(originals), progress=self.progress)
        self.fit_timings_["atomise_originals"] = time.perf_counter() - t
        self.aux_index_: dict[str, list[int]] = {}
        for doc, claims in zip(originals, self.orig_claims_):
            rng = random.Random(f"{self.seed}:aux:{doc.id}")
            self.aux_index_[doc.id] = select_aux(claims, self.aux_claims, self.aux_select, rng)
        aux_texts = [[claims[i].text for i in self.aux_index_[doc.id]]
                     for doc, claims in zip(originals, self.orig_claims_)]
        self.paraphrase_failures_ = 0
        queries = aux_texts
        if self.paraphrase:  # one request a document, its claims together (auxiliary.py)
            t = time.perf_counter()
            queries, self.paraphrase_failures_ = paraphrase_documents(self._get_llm(), aux_texts, seed=self.seed,
                                                                     progress=self.progress)
            self.fit_timings_["paraphrase"] = time.perf_counter() - t
        self.aux_queries_ = {doc.id: list(q) for doc, q in zip(originals, queries)}
        self._fitted_on = originals
        self._orig_tokens: dict[str, list[str]] = {}
        self._judge_check_: dict[str, Any] | None = None
        self._orig_index_ = None  # the originals' claim vectors (identifying claims, reference records)
        self._details_: dict[int, list[list[str]]] = {}  # specific details of each original's claims
        self._claim_details_: dict[str, list[str]] = {}  # specific details of a claim's text
        self._detail_freq_ = None  # who states each detail (the details judge leaves common ones out)
        self._margins_: dict[tuple[str, str], float] = {}  # yes/no margins asked this fit
        self._null_threshold_: float | None = None  # the contrastive judge's threshold, set by its control
        self.powered_inputs_: dict[str, tuple] = {}  # per release: the leakage predictor and the judge's claim values
        return self

    # -- evaluate one release

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        if self._fitted_on is not scenario.originals:
            self.fit(scenario)
        originals = scenario.originals
        docs = list(release.corpus)
        if not docs:
            raise AnonauditError(f"release {release.name!r} has no documents")
        timings = dict(self.fit_timings_)
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

        documents, correct_flags, baseline = self._check_links(originals, trials, links, docs, rel_claims,
                                                               release.aligned)
        successes, n = sum(correct_flags), len(trials)
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
                                    details={**details, "value_from": "success"}, documents=documents)]

        if self.score:
            t = time.perf_counter()
            results += self._score(originals, trials, links, docs, rel_claims, linker, release.name,
                                   correct_flags, timings)
            timings["score"] = time.perf_counter() - t
        self.record_timing(release.name, timings)
        return results

    def _check_links(self, originals, trials: list[int], links: list[Link], docs: list[Document],
                     rel_claims: list[list[Claim]], aligned: bool) -> tuple[list[Finding], list[bool], float]:
        """One finding per trial, whether each link is correct, and the chance that a record picked
        at random is a correct link, averaged over the trials (the baseline)."""
        by_subject: dict[str, list[int]] = {}
        for j, d in enumerate(docs):
            if d.subject is not None:
                by_subject.setdefault(d.subject, []).append(j)
        chance, documents, correct_flags = 0.0, [], []
        for i, link in zip(trials, links):
            orig = originals[i]
            targets = self._targets(orig, docs, aligned, by_subject)
            ok = link.doc in targets
            chance += len(targets) / len(docs)
            correct_flags.append(ok)
            documents.append(self._link_evidence(orig, i, link, ok, docs, rel_claims))
        n = len(trials)
        return documents, correct_flags, chance / n if n else 1.0 / len(docs)

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


def _link_summary(linked: str | None, ok: bool, votes: int, known: int) -> str:
    """One sentence on a link, for the report (names no claim: claims quote the original)."""
    if linked is None:
        return "Not linked: none of the known claims matched a record"
    by = f"{votes} of {known} known claim{'s' if known != 1 else ''}"
    return f"Linked to the right record by {by}" if ok else f"Linked to the wrong record ({linked}) by {by}"
