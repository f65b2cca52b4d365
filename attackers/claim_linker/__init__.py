"""Claim linker: link known facts to a sanitized record, then measure what else it reveals.

The threat model of "A false sense of privacy" (see ``../shared/papers``): an adversary
knows a few facts about a person (auxiliary information, usually reworded), searches the
sanitized release for the record that matches them, and learns everything else that
record says. Two stages:

1. **Linking.** Every document is split into atomic claims (:mod:`.claims`).
   The attacker gets ``aux_claims`` claims of each original, optionally paraphrased.
   Each aux claim retrieves the most similar sanitized claims (dense embeddings in a faiss
   inner-product index; matches within ``tolerance`` of the best score count) and votes for
   their documents; the document with most votes is the link (ties: summed score).
   Baselines: one concatenated query (dense or BM25), BM25 per-claim votes, and ROUGE-L.
   Headline: the correct-linkage rate with a Wilson interval, against chance 1/|release|.
2. **Semantic scoring.** Each of the original's other claims (never the aux claims) is
   judged by an LLM against the ``evidence_sentences`` sentences of the linked sanitized
   document most related to it (dense retrieval). The default judge scores the fixed
   answers Yes and No to "Does the passage state this fact?" by their log-probabilities
   (stated when P(Yes) > P(No)); the ``rating`` judge generates same (1), similar (2) or no
   (3), asked ``repeats`` times with the mode kept. Leakage per document is
   ``1 - mean((s - 1) / 2)`` (with yes/no: the share of claims stated): 1 means everything
   is still there. The lexical counterpart is ROUGE-L between the original and the linked
   document, which misses reworded facts. Before scoring, the judge passes a
   control once per fit (:mod:`.control`): original claims against their own document must
   leak (>= 0.8), against another document must not (<= 0.2), nor against their masked twin
   (the same sentence with its specific details masked, <= 0.2); a judge that fails any is
   named in the result as unreliable, with the failing control, and its figure does not count
   in the report's verdict. The default judge (``details``) counts a claim only where the passage
   states one of its specific details in so many words; a leaked claim's finding lists
   the details stated.

Releases that are not one-to-one with the originals (synthetic data) work too: a link is
correct when the linked record is about the same subject, and claims are always scored
against the true original.

Modules: :mod:`~attackers.claim_linker.attack` (the attack: fit, link, evaluate),
:mod:`~attackers.claim_linker.linkers` (dense, BM25 and ROUGE-L linkers, majority vote),
:mod:`~attackers.claim_linker.judge` (judge requests, verdict parsing),
:mod:`~attackers.claim_linker.control` (the judge's three controls), :mod:`~attackers.claim_linker.scoring` (semantic and lexical leakage),
:mod:`~attackers.claim_linker.claims` (claims and the splitters) and
:mod:`~attackers.claim_linker.auxiliary` (the attacker's known claims and their paraphrases).
"""

from attackers.claim_linker.attack import ClaimLinkerAttack
from attackers.claim_linker.auxiliary import (AUX_SELECT, AuxSelect, paraphrase_claims, paraphrase_documents,
                                              paraphrase_group_request, paraphrase_request,
                                              parse_paraphrase, parse_paraphrase_group, select_aux)
from attackers.claim_linker.claims import (Claim, ClaimSplitter, LLMSplitter, SentenceSplitter, claims_schema,
                                           make_splitter, parse_claim_list, word_overlap)
from attackers.claim_linker.control import JUDGE_MASKED_MAX, JUDGE_OTHER_MAX, JUDGE_SELF_MIN
from attackers.claim_linker.judge import (JUDGES, VERDICTS, evidence_text,
                                          judge_request, leakage_of, margin_rating, mode_rating, parse_verdict,
                                          rank_evidence, yesno_margin, yesno_prompt)
from attackers.claim_linker.linkers import (LINKERS, BM25Linker, DenseLinker, Link, Linker, LinkerName, RougeLinker,
                                            majority_vote)

__all__ = [
    "AUX_SELECT", "AuxSelect", "BM25Linker", "Claim", "ClaimLinkerAttack", "ClaimSplitter", "DenseLinker",
    "JUDGE_MASKED_MAX", "JUDGE_OTHER_MAX", "JUDGE_SELF_MIN", "JUDGES", "LINKERS", "LLMSplitter", "Link", "Linker", "LinkerName", "RougeLinker",
    "SentenceSplitter", "VERDICTS", "claims_schema", "evidence_text", "judge_request", "leakage_of",
    "majority_vote", "margin_rating", "make_splitter", "mode_rating", "paraphrase_claims", "paraphrase_documents", "paraphrase_group_request",
    "paraphrase_request", "parse_claim_list",
    "parse_paraphrase", "parse_paraphrase_group", "parse_verdict", "rank_evidence", "select_aux", "word_overlap", "yesno_margin", "yesno_prompt",
]
