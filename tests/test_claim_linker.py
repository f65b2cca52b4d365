"""Tests of the claim linker: claim and rating parsing, linking by majority vote, scoring rules."""

from __future__ import annotations

import json
import random
import re
import zlib

import numpy as np
import pytest

from attackers.claim_linker import (
    BM25Linker, Claim, ClaimLinkerAttack, DenseLinker, LLMSplitter, SentenceSplitter, evidence_text, judge_request,
    leakage_of, majority_vote, margin_rating, mode_rating, parse_claim_list, parse_paraphrase, parse_verdict,
    rank_evidence, select_aux, yesno_prompt,
)
from audit.core.data import Corpus, Document, Release, Scenario
from audit.core.details import Details
from audit.core.errors import AnonauditError
from audit.core.results import Result
from audit.core.text import RougeTokenizer, rouge_l
from audit.models.llm import LLM, ScriptedLLM

STOP = {"the", "a", "an", "in", "on", "of", "her", "his", "she", "he", "and", "at", "was", "to", "from", "while", "for"}


class BagOfWords:
    """A deterministic stand-in for a sentence embedder: hashed bag of content words."""

    identity = "bag-of-words"

    def __init__(self, dim: int = 1024):
        self.dim = dim
        self.calls = 0

    def encode(self, texts, batch_size=64, progress=False):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for w in re.findall(r"\w+", text.lower()):
                if w not in STOP:
                    out[i, zlib.crc32(w.encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)


def claims_of(doc_id: str, sentences: list[str]) -> list[Claim]:
    out, pos = [], 0
    for k, s in enumerate(sentences):
        out.append(Claim(doc_id, k, s, pos, pos + len(s), pos, pos + len(s)))
        pos += len(s) + 1
    return out


def doc_of(doc_id: str, sentences: list[str], subject: str | None = None) -> Document:
    return Document(doc_id, " ".join(sentences), subject=subject)


# A release where the facts of T are spread over three sentences, and one sentence of D
# happens to mention words from all three: the merged query prefers D, per-claim votes T.
TARGET = ["[PERSON] keeps three goats on her farm.", "She repaired the old red tractor in spring.",
          "Her sister teaches chemistry in Oslo."]
DECOY = ["At the spring fair in Oslo, a sister teaches chemistry while goats from a farm pull a tractor.",
         "The fair ended late."]
OTHERS = [["The harbour closed for repairs.", "Fishing boats stayed in port for a week."],
          ["A new library opened downtown.", "It lends tools as well as books."]]
AUX = ["Anna Berg keeps three goats on her farm.", "She repaired the old red tractor in spring.",
       "Her sister teaches chemistry in Oslo."]


def _release_docs():
    sents = [TARGET, DECOY] + OTHERS
    ids = ["T", "D", "O1", "O2"]
    return [doc_of(i, s) for i, s in zip(ids, sents)], [claims_of(i, s) for i, s in zip(ids, sents)]


# --------------------------------------------------------------------------- parsing


def test_parse_claim_list_accepts_json_numbered_and_bulleted_output():
    assert parse_claim_list('["Anna lives in Oslo.", "Anna is 40 years old."]') == [
        "Anna lives in Oslo.", "Anna is 40 years old."]
    assert parse_claim_list('{"claims": ["Anna lives in Oslo."]}') == ["Anna lives in Oslo."]
    numbered = "Here are the facts:\n1. Anna lives in Oslo.\n2) Anna is 40 years old.\n\n- Anna owns a farm.\n• Anna owns a farm."
    assert parse_claim_list(numbered) == ["Anna lives in Oslo.", "Anna is 40 years old.", "Anna owns a farm."]
    fenced = '```json\n["The court met on [DATE]."]\n```'
    assert parse_claim_list(fenced) == ["The court met on [DATE]."]
    # A truncated JSON list (the model ran out of tokens) still yields its lines.
    assert parse_claim_list('[\n"Anna lives in Oslo.",\n"Anna is') != []
    assert parse_claim_list("") == []
    assert parse_claim_list("OK") == []


def test_llm_splitter_parses_answers_points_to_sentences_and_falls_back_on_garbage():
    text = "Anna Berg lives in Oslo. She keeps goats. The court rejected her appeal in 2001."
    answers = {"Anna": '["Anna Berg lives in Oslo.", "Anna Berg keeps goats.", "The court rejected Anna\'s appeal in 2001."]'}

    def script(req):
        assert req.schema is not None and req.schema["type"] == "array"  # structured output asked for
        user = req.messages[-1][1]
        return answers["Anna"] if "Anna Berg" in user else "I cannot help with that"

    llm = ScriptedLLM(script)
    splitter = LLMSplitter(llm, chunk_chars=2000)
    docs = [Document("a", text), Document("b", "Nothing to see here today. The weather was mild all week.")]
    claims = splitter.split(docs)
    assert [c.text for c in claims[0]] == ["Anna Berg lives in Oslo.", "Anna Berg keeps goats.",
                                          "The court rejected Anna's appeal in 2001."]
    third = claims[0][2]
    assert text[third.sent_start:third.sent_end].startswith("The court rejected her appeal")
    # Unparseable answer: the sentences of the passage become the claims, and it is counted.
    assert [c.text for c in claims[1]] == ["Nothing to see here today.", "The weather was mild all week."]
    assert splitter.fallbacks == 1


def test_parse_verdict_reads_one_word_answers_in_any_wrapping():
    assert parse_verdict('"same"') == 1 and parse_verdict("Similar.") == 2 and parse_verdict("no") == 3
    assert parse_verdict('{"answer": "similar"}') == 2
    assert parse_verdict("Answer: no, the text does not say so") == 3
    assert parse_verdict("2") == 2 and parse_verdict("unsupported") == 3
    # The first verdict word wins; an answer without one is unrated.
    assert parse_verdict("same, not similar") == 1
    assert parse_verdict("") is None and parse_verdict("I cannot tell.") is None
    assert parse_verdict("Born in 1961: no") == 3  # digits inside a number are not a rating


def test_judge_request_asks_one_claim_against_its_evidence_with_a_closed_answer():
    req = judge_request("The applicant was born in 1961.", "He was born in Bergen in 1961.", seed=4, temperature=0.7)
    user = req.messages[-1][1]
    assert user.startswith("Text:\nThe applicant was born in 1961.\n\nFact: He was born in Bergen in 1961.\n")
    assert req.schema == {"type": "string", "enum": ["same", "similar", "no"]}
    assert req.seed == 4 and req.temperature == 0.7


def test_evidence_is_the_best_ranked_sentences_in_document_order():
    text = "Anna keeps goats. She sold cheese on Friday. Her sister lives in Oslo. The goats are old."
    doc = Document("d", text)
    cands = claims_of("d", ["Anna keeps goats.", "She sold cheese on Friday.", "Her sister lives in Oslo.",
                            "The goats are old."])
    ranked = rank_evidence("Anna's goats are old", cands)
    assert ranked[:2] == [3, 0] or ranked[:2] == [0, 3]
    assert evidence_text(doc, cands, ranked, 2) == "Anna keeps goats. The goats are old."
    assert evidence_text(doc, cands, ranked, 1) == cands[ranked[0]].text
    # Dense ranking when vectors are given.
    vecs = np.eye(4, dtype=np.float32)
    assert rank_evidence("x", cands, vecs[2], vecs)[0] == 2


def test_mode_keeps_most_frequent_rating_and_breaks_ties_towards_leakage():
    assert mode_rating([3, 1, 3]) == 3
    assert mode_rating([3, 2, None]) == 2
    assert mode_rating([None, None]) is None
    assert leakage_of([1, 1]) == 1.0 and leakage_of([3, 3]) == 0.0 and leakage_of([2]) == 0.5


def test_parse_paraphrase():
    assert parse_paraphrase('"Anna farms goats."') == "Anna farms goats."
    assert parse_paraphrase('{"paraphrase": "Anna farms goats."}') == "Anna farms goats."
    assert parse_paraphrase("Paraphrase: Anna farms goats.\nHope this helps!") == "Anna farms goats."
    assert parse_paraphrase("Fact: Anna farms goats.") == "Anna farms goats."
    assert parse_paraphrase("") == ""


def test_parse_paraphrase_group_keeps_order_and_pads_what_is_missing():
    from attackers.claim_linker import parse_paraphrase_group

    assert parse_paraphrase_group('["Anna farms goats.", "She lives in Oslo."]', 2) == [
        "Anna farms goats.", "She lives in Oslo."]
    assert parse_paraphrase_group('{"facts": ["Anna farms goats."]}', 2) == ["Anna farms goats.", ""]
    # cut short by the token limit: the whole strings are kept, the cut one is not
    assert parse_paraphrase_group('["Anna farms goats.", "She lives in Os', 3) == ["Anna farms goats.", "", ""]
    assert parse_paraphrase_group("no array here", 2) == ["", ""]


def test_paraphrase_documents_asks_once_a_document_and_keeps_failures_verbatim():
    from attackers.claim_linker import paraphrase_documents
    from audit.models.llm import ScriptedLLM

    llm = ScriptedLLM(['["Goats are farmed by Anna.", "Anna lives in Oslo."]', '["Bo was born in 1990."]'])
    groups = [["Anna farms goats.", "Anna lives in Oslo."], [], ["Bo was born in 1990."]]
    paras, failed = paraphrase_documents(llm, groups, seed=3)
    assert paras == [["Goats are farmed by Anna.", "Anna lives in Oslo."], [], ["Bo was born in 1990."]]
    assert failed == 2  # one repeats its claim, one is the claim itself
    assert len(llm.calls) == 2 and all(c.shared == (1,) and c.seed == 3 for c in llm.calls)
    assert "1. Anna farms goats.\n2. Anna lives in Oslo." in llm.calls[0].messages[1][1]


def test_rouge_l_matches_rouge_score():
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    tok = RougeTokenizer()
    rng = random.Random(1)
    words = "the court applicant detained ankara 1990 released judges prison appeal".split()
    for _ in range(100):
        a = " ".join(rng.choice(words) for _ in range(rng.randint(0, 30)))
        b = " ".join(rng.choice(words) for _ in range(rng.randint(0, 30)))
        assert rouge_l(tok(a), tok(b)) == pytest.approx(scorer.score(a, b)["rougeL"].fmeasure)


# --------------------------------------------------------------------------- linking


def test_majority_vote_counts_one_vote_per_query_and_breaks_ties_by_score():
    hits = [[(0, 0, 0.9), (0, 1, 0.89), (1, 0, 0.5)], [(1, 2, 0.8)], [(2, 0, 0.7)]]
    assert majority_vote(hits)[:2] == (1, 2)  # doc 0 matched twice by one query: still one vote
    assert majority_vote([[(0, 0, 0.5)], [(1, 0, 0.6)]])[0] == 1
    assert majority_vote([[], []]) == (-1, 0, 0.0)


def test_per_claim_majority_vote_links_where_single_query_does_not():
    docs, claims = _release_docs()
    votes = DenseLinker(BagOfWords(), single=False)
    votes.index(docs, claims)
    single = DenseLinker(BagOfWords(), single=True)
    single.index(docs, claims)
    assert docs[votes.link([AUX])[0].doc].id == "T"
    assert docs[single.link([AUX])[0].doc].id == "D"
    link = votes.link([AUX])[0]
    assert link.votes == 3 and len(link.hits) == 3
    bm25 = BM25Linker(single=False)
    bm25.index(docs, claims)
    assert docs[bm25.link([AUX])[0].doc].id == "T"


def test_dense_linker_uses_an_approximate_index_above_the_threshold():
    docs, claims = _release_docs()
    linker = DenseLinker(BagOfWords(), approx_threshold=3)
    linker.index(docs, claims)
    assert linker.info["index"] == "hnsw"
    assert docs[linker.link([AUX])[0].doc].id == "T"


# --------------------------------------------------------------------------- the attack


def judge(req):
    """A fake LLM judge: "same" when all content words of the fact are in the evidence, else
    "no"; paraphrases by echoing the fact."""
    user = req.messages[-1][1]
    fact = user.split("Fact: ", 1)[1].split("\n", 1)[0]
    if req.schema and req.schema.get("enum"):
        evidence = set(re.findall(r"\w+", user.split("Text:\n", 1)[1].split("\n\nFact: ", 1)[0].lower()))
        return json.dumps("same" if set(re.findall(r"\w+", fact.lower())) - STOP <= evidence else "no")
    return json.dumps(fact)


def judged_facts(calls) -> list[str]:
    return [r.messages[-1][1].split("Fact: ", 1)[1].split("\n", 1)[0] for r in calls if r.schema and r.schema.get("enum")]


ORIGINALS = {
    "p1": ["Anna Berg keeps three goats on her farm.", "She repaired the old red tractor in spring.",
           "Her sister teaches chemistry in Oslo.", "Anna Berg was born in Bergen in 1961.",
           "She sold cheese at the market every Friday."],
    "p2": ["Jon Lie runs a bakery near the station.", "He opened the bakery in 2004 with a loan.",
           "His son studies law in Trondheim.", "Jon Lie sings in a church choir.",
           "The bakery burned down in 2019."],
    "p3": ["Mia Dahl repairs violins in Tromsø.", "She learned the craft from her grandfather.",
           "Her workshop is above a bookshop.", "Mia Dahl won a national award in 2015.",
           "She teaches evening classes twice a week."],
    "p4": ["Ola Nord drives a ferry between two islands.", "He has worked on the ferry for twenty years.",
           "His wife is a nurse at the local clinic.", "Ola Nord collects old maps.",
           "He once rescued a swimmer in a storm."],
}


def _originals():
    return Corpus([doc_of(k, v, subject=k) for k, v in ORIGINALS.items()], name="originals")


def _masked(names=("Anna Berg", "Jon Lie", "Mia Dahl", "Ola Nord")):
    docs = []
    for d in _originals():
        text = d.text
        for n in names:
            text = text.replace(n, "[PERSON]")
        docs.append(Document(d.id, text, subject=d.subject))
    return Release("masked", Corpus(docs, name="masked"))


@pytest.fixture(scope="module")
def spacy_resource():
    from audit.models.nlp import Spacy

    return Spacy(disable=("ner",))


def _attack(spacy_resource, **kw) -> ClaimLinkerAttack:
    params = dict(llm=ScriptedLLM(judge), embedder=BagOfWords(), paraphrase=False, repeats=3, judge="rating",
                  judge_check=8, identifying=False)  # every claim: the toy people have few specific details
    params.update(kw)
    attack = ClaimLinkerAttack(**params)
    attack._splitter = SentenceSplitter(spacy_resource)
    return attack


def test_sentence_splitter_keeps_offsets_and_cuts_clauses(spacy_resource):
    text = "PROCEDURE\n\nThe applicant was arrested on 3 May 1990 and he was released a week later. Short."
    claims = SentenceSplitter(spacy_resource).split([Document("x", text)])[0]
    assert [c.text for c in claims] == ["The applicant was arrested on 3 May 1990",
                                        "and he was released a week later."]
    for c in claims:
        assert " ".join(text[c.start:c.end].split()) == c.text
        assert c.sent_start <= c.start and c.end <= c.sent_end


def test_attack_links_and_scores_without_ever_scoring_aux_claims(spacy_resource):
    llm = ScriptedLLM(judge)
    attack = _attack(spacy_resource, llm=llm)
    originals = _originals()
    release = _masked()
    scenario = Scenario(originals=originals, releases=(release,))
    link, semantic, lexical = attack.fit(scenario).evaluate(scenario, release)
    assert (link.name, semantic.name, lexical.name) == ("claim_linker", "claim_linker.leakage",
                                                         "claim_linker.lexical_leakage")
    assert link.value == 1.0 and link.n == 4 and link.baseline == pytest.approx(0.25)
    # timings go to the provenance (stats), never the result: results must not depend on the machine
    assert "timings" not in link.details
    assert {"atomise_originals", "atomise_release", "embed_release", "search", "score"} <= \
        set(attack.stats()["timings"][release.name])
    assert semantic.kind == "attack" and semantic.n == 4
    # Masked names: claims naming a person are unsupported, the others leak.
    assert 0.0 < semantic.value < 1.0
    for doc in semantic.documents:
        aux = {c.text for c in [attack.orig_claims_[originals.ids.index(doc.id)][i]
                                for i in attack.aux_index_[doc.id]]}
        assert doc.facts["claims_scored"] == 5 - len(aux)
        assert not aux & {e["claim"] for e in doc.facts["leaked"]}
        text = release.corpus[doc.facts["linked"]].text
        assert doc.highlights_in == doc.facts["linked"]
        for h, e in zip(doc.highlights, doc.facts["leaked"]):
            assert h.kind == "claim" and text[h.start:h.end] == e["support"]
        # success: the right record, and it supports some further claim; the claims are private
        assert doc.success is (doc.facts["correct"] and bool(doc.facts["leaked"]))
        assert doc.private == {"leaked"} and doc.summary.startswith("The linked record supports ")
    assert {d.success for d in semantic.documents} == {True, False}  # one record supports no further claim
    assert [d.success for d in link.documents] == [True] * 4
    assert link.documents[0].summary == "Linked to the right record by 3 of 3 known claims"
    assert link.documents[0].private == {"aux"}
    assert [d.success for d in lexical.documents] == [True] * 4
    judged = judged_facts(llm.calls)
    for d in link.documents:
        for a in d.facts["aux"]:
            assert a["claim"] not in judged  # neither scored nor used in the judge's control
    # 4 documents x 2 scored claims x 3 repeats, plus the control: 8 claims x (own, other document) and
    # the masked twins of those whose evidence has a detail to mask
    check = semantic.details["judge_check"]
    assert len(judged) == 4 * 2 * 3 + 8 * 2 + check["masked_claims"] and 0 < check["masked_claims"] <= 8
    assert {r.seed for r in llm.calls} == {0, 1, 2}
    assert check["claims"] == 8 and check["self"] == 1.0 and check["unrelated"] <= 0.4 and check["passed"]
    assert "WARNING" not in semantic.details["note"]
    assert 0.0 < lexical.value < 1.0 and lexical.n == 4


def test_a_judge_that_cannot_tell_documents_apart_is_flagged(spacy_resource):
    def yes_sayer(req):
        return '"same"' if req.schema and req.schema.get("enum") else json.dumps("x")

    originals, release = _originals(), _masked()
    scenario = Scenario(originals=originals, releases=(release,))
    attack = _attack(spacy_resource, llm=ScriptedLLM(yes_sayer), repeats=1)
    _, semantic, _ = attack.fit(scenario).evaluate(scenario, release)
    check = semantic.details["judge_check"]
    assert check["self"] == 1.0 and check["unrelated"] == 1.0 and not check["passed"]
    assert "WARNING: the judge (scripted, rating) failed its control (unrelated 1.0" in semantic.details["note"]
    assert semantic.details["warning"].startswith("the judge (scripted, rating) failed")
    # The control runs once per fit, not once per release.
    calls = len(attack._get_llm().calls)
    attack.evaluate(scenario, release)
    assert len(attack._get_llm().calls) - calls == 4 * 2
    # judge_check=0 switches the control off.
    off = _attack(spacy_resource, llm=ScriptedLLM(yes_sayer), repeats=1, judge_check=0)
    assert off.fit(scenario).evaluate(scenario, release)[1].details["judge_check"] is None


class YesNoLLM(LLM):
    """A scripted judge that answers only by log-probabilities (it generates nothing): "Yes" is
    likelier when every content word of the fact is in the passage (``says`` forces one answer).
    ``template``: whether it knows a chat template (an embedded model) or not (a server)."""

    identity = "scripted-logprobs"

    def __init__(self, says: str | None = None, template: bool = True):
        self.says, self.template = says, template
        self.scored: list[tuple[str, str]] = []

    def _complete(self, request):
        raise AssertionError("the yes/no judge must not generate text")

    def chat_text(self, messages):
        return "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages) + "<assistant>" \
            if self.template else None

    def logprobs(self, prefix, continuation):
        self.scored.append((prefix, continuation))
        passage = prefix.split("Passage: ", 1)[1].split("\n\nFact: ", 1)[0]
        fact = prefix.split("Fact: ", 1)[1].split("\n", 1)[0]
        stated = set(re.findall(r"\w+", fact.lower())) - STOP <= set(re.findall(r"\w+", passage.lower()))
        answer = continuation.strip()
        assert answer in ("Yes", "No")
        likely = (self.says or ("Yes" if stated else "No")) == answer
        return [-0.1 if likely else -2.4]


def test_yesno_prompt_uses_the_chat_template_or_plain_text():
    with_template = YesNoLLM(template=True)
    prefix, yes, no = yesno_prompt(with_template, "She farms goats.", "She keeps goats.")
    assert prefix.startswith("<system>") and prefix.endswith("<assistant>") and (yes, no) == ("Yes", "No")
    # the instructions come first (a prefix every claim shares), passage and fact last
    assert prefix.index("Answer Yes or No") < prefix.index("Passage: She farms goats.") < prefix.index("Fact: ")
    prefix, yes, no = yesno_prompt(YesNoLLM(template=False), "She farms goats.", "She keeps goats.")
    assert prefix.endswith("\nAnswer:") and (yes, no) == (" Yes", " No")
    # the rule: stated when P(Yes) > P(No); a tie is not support
    assert margin_rating(0.3) == 1 and margin_rating(0.0) == 3 and margin_rating(-2.0) == 3
    assert margin_rating(float("-inf")) == 3


def test_the_yesno_judge_scores_fixed_answers_and_passes_its_control(spacy_resource):
    originals, release = _originals(), _masked()
    scenario = Scenario(originals=originals, releases=(release,))
    llm = YesNoLLM()
    attack = _attack(spacy_resource, llm=llm, judge="yesno", judge_check=16)
    results = attack.fit(scenario).evaluate(scenario, release)
    link, semantic, _ = results
    d = semantic.details
    assert d["judge"] == "yesno" and "log P(Yes) > log P(No)" in d["decision_rule"] and d["repeats"] == 1
    # written to JSON and read back, every result is the one written (the ratings' keys were ints)
    assert [Result.from_dict(json.loads(json.dumps(r.to_dict()))) for r in results] == results
    assert all(set(f.facts["ratings"]) <= {"1", "2", "3"} for f in semantic.documents if "ratings" in f.facts)
    assert set(d["judge_check"]["self_ratings"]) == {"1"}
    assert d["malformed_answers"] == 0
    assert d["warning"] == ("the judge's control found only 8 claims beyond the attacker's (asked for 16), so it "
                            "is weak evidence that the judge is reliable")
    # two continuations per distinct question, never a generated answer; at most 8 scored claims + 2 x 8
    # control claims (only 8 claims of the 4 originals are not the attacker's: the control takes what there
    # is), fewer where a claim's one sentence of evidence makes the same question twice (asked once)
    asked = {p for p, _ in llm.scored}
    assert {c for _, c in llm.scored} == {"Yes", "No"} and len(llm.scored) == 2 * len(asked)
    assert len(asked) == len(attack._margins_) and 16 <= len(asked) <= 4 * 2 + 8 * 3
    check = d["judge_check"]
    assert check["judge"] == "yesno" and check["self"] == 1.0 and check["unrelated"] == 0.0 and check["passed"]
    # masked names: the claims naming a person are not stated, the others are
    assert 0.0 < semantic.value < 1.0
    assert set(d["rating_counts"]) <= {"1", "3"}
    # a checked figure counts in the verdict, against what another record "states" (the control's level)
    assert d["in_verdict"] is True and semantic.baseline == 0.0 and semantic.beats_baseline is True
    aux = {c.text for i, doc in enumerate(originals) for k, c in enumerate(attack.orig_claims_[i])
           if k in attack.aux_index_[doc.id]}
    judged = {p.split("Fact: ", 1)[1].split("\n", 1)[0] for p, _ in llm.scored}
    assert not aux & judged


def test_claim_sample_judges_a_seeded_few_claims_of_each_document(spacy_resource):
    originals, release = _originals(), _masked()
    scenario = Scenario(originals=originals, releases=(release,))

    def scored(seed):
        attack = _attack(spacy_resource, llm=YesNoLLM(), judge="yesno", claim_sample=1, seed=seed)
        _, semantic, _ = attack.fit(scenario).evaluate(scenario, release)
        assert all(d.facts["claims_scored"] == 1 for d in semantic.documents)
        assert "at most 1 seeded claims of each" in semantic.details["note"]
        return semantic.details["rating_counts"], [d.facts["leakage"] for d in semantic.documents]

    assert scored(0) == scored(0)
    with pytest.raises(Exception, match="claim_sample"):
        ClaimLinkerAttack(claim_sample=0)


def test_the_calibrated_yesno_judge_compares_with_a_content_free_passage(spacy_resource):
    class NoSayer(YesNoLLM):
        """Biased towards No everywhere (a small model's habit), less so where the fact is stated."""

        def logprobs(self, prefix, continuation):
            (value,) = super().logprobs(prefix, continuation)
            return [value - 3.0 if continuation.strip() == "Yes" else value]

    originals, release = _originals(), _masked()
    scenario = Scenario(originals=originals, releases=(release,))
    raw = _attack(spacy_resource, llm=NoSayer(), judge="yesno")
    check = raw.fit(scenario).evaluate(scenario, release)[1].details["judge_check"]
    assert check["self"] == 0.0 and not check["passed"]  # P(Yes) < P(No) everywhere
    llm = NoSayer()
    calibrated = _attack(spacy_resource, llm=llm, judge="yesno-calibrated")
    semantic = calibrated.fit(scenario).evaluate(scenario, release)[1]
    check = semantic.details["judge_check"]
    assert check["judge"] == "yesno-calibrated" and check["self"] == 1.0 and check["unrelated"] == 0.0
    assert "content-free passage" in semantic.details["decision_rule"]
    assert any(p.split("Passage: ", 1)[1].startswith("N/A\n") for p, _ in llm.scored)


def test_a_yes_saying_yesno_judge_fails_its_control_and_says_so(spacy_resource):
    originals, release = _originals(), _masked()
    scenario = Scenario(originals=originals, releases=(release,))
    attack = _attack(spacy_resource, llm=YesNoLLM(says="Yes"), judge="yesno")
    _, semantic, _ = attack.fit(scenario).evaluate(scenario, release)
    check = semantic.details["judge_check"]
    assert check["self"] == 1.0 and check["unrelated"] == 1.0 and not check["passed"]
    assert semantic.details["warning"].startswith("the judge (scripted-logprobs, yesno) failed its control (unrelated 1.0")
    assert "does not count in the verdict" in semantic.details["warning"]
    assert semantic.details["in_verdict"] is False and semantic.baseline is None
    assert semantic.value == 1.0  # the figure is still there, never a silent zero, with its warning


def test_a_server_without_logprobs_falls_back_to_ratings_and_says_so(spacy_resource):
    originals, release = _originals(), _masked()
    scenario = Scenario(originals=originals, releases=(release,))
    llm = ScriptedLLM(judge)  # generates, but cannot give log-probabilities
    attack = _attack(spacy_resource, llm=llm, judge="yesno", repeats=1)
    _, semantic, _ = attack.fit(scenario).evaluate(scenario, release)
    d = semantic.details
    assert d["judge"] == "rating" and d["judge_check"]["judge"] == "rating" and d["judge_check"]["passed"]
    assert d["judge_fallback"].startswith("the yes/no judge needs log-probabilities, which scripted did not give")
    assert d["judge_fallback"] in d["note"]
    # the rating judge passed its control here: the figure is checked and counts, with the fallback said
    assert d["warning"] is None and d["in_verdict"] is True
    assert judged_facts(llm.calls)  # it did judge, by ratings


def test_score_sample_is_seeded_and_reported(spacy_resource):
    originals = _originals()
    release = _masked()
    scenario = Scenario(originals=originals, releases=(release,))

    def scored(seed):
        attack = _attack(spacy_resource, score_sample=2, score_target=None, seed=seed)
        _, semantic, _ = attack.fit(scenario).evaluate(scenario, release)
        samp = semantic.details["sampled"]
        assert semantic.n == 2 and {k: samp[k] for k in ("documents", "of", "seed", "target")} == \
            {"documents": 2, "of": 4, "seed": seed, "target": None}
        assert "plain sample, 2 judged, 4 scored, too few judged for an interval, about this release" in \
            semantic.details["note"]
        assert semantic.details["predictor_fallback"] == "only 2 documents judged (a fit needs 6)"
        return [d.id for d in semantic.documents]

    first = scored(0)
    assert scored(0) == first
    assert any(scored(s) != first for s in range(1, 6))


def test_leakage_is_scored_to_the_interval_target_and_says_so(spacy_resource):
    """The default samples sequentially: four documents never reach +-0.05 before the last one,
    so every one is judged, which is exact about this release (no document left unasked); about
    documents like these the interval stays wide and the note says the target was not reached."""
    originals = _originals()
    release = _masked()
    scenario = Scenario(originals=originals, releases=(release,))
    _, semantic, _ = _attack(spacy_resource).fit(scenario).evaluate(scenario, release)
    samp = semantic.details["sampled"]
    assert samp["target"] == 0.05 and samp["documents"] == samp["of"] == 4 and samp["reached"] is True
    assert semantic.ci == (semantic.value, semantic.value) and semantic.details["estimate"]["half_width"] == 0
    assert "every document judged (4), exact, about this release" in semantic.details["note"]
    _, pop, _ = _attack(spacy_resource, score_estimand="population").fit(scenario).evaluate(scenario, release)
    assert pop.value == semantic.value and pop.details["sampled"]["reached"] is False
    assert "about documents like these" in pop.details["note"] and pop.ci[1] - pop.ci[0] > 0.1
    assert Details.of(pop.details).sampled.reached is False
    with pytest.raises(AnonauditError, match="score_target"):
        _attack(spacy_resource, score_target=0.7)
    with pytest.raises(AnonauditError, match="score_estimand"):
        _attack(spacy_resource, score_estimand="everyone")


def test_unaligned_release_is_linked_by_subject_and_scored_against_the_true_original(spacy_resource):
    originals = _originals()
    synthetic = [Document(f"syn-{i}", d.text.replace("goats", "sheep"), subject=d.subject)
                 for i, d in enumerate(reversed(list(originals)))]
    release = Release("synthetic", Corpus(synthetic, name="synthetic"), aligned=False)
    scenario = Scenario(originals=originals, releases=(release,))
    link, semantic, _ = _attack(spacy_resource, aux_select="first").fit(scenario).evaluate(scenario, release)
    assert link.value == 1.0 and link.n == 4
    by_id = {d.id: d for d in link.documents}
    assert by_id["p1"].facts["linked"] == "syn-3" and by_id["p1"].success is True
    # the evidence lies in the linked record, not in a document with the original's id
    assert by_id["p1"].highlights_in == "syn-3" and by_id["p1"].highlights
    assert {d.id for d in semantic.documents} == set(ORIGINALS)


def test_paraphrased_aux_claims_are_the_queries(spacy_resource):
    def script(req):  # one request a document: its claims numbered, one a line
        facts = req.messages[-1][1].split("Facts:\n", 1)[1].splitlines()
        return json.dumps(["Reportedly, " + f.split(". ", 1)[1] for f in facts])

    originals = _originals()
    release = _masked()
    scenario = Scenario(originals=originals, releases=(release,))
    attack = _attack(spacy_resource, llm=ScriptedLLM(script), paraphrase=True, score=False)
    (link,) = attack.fit(scenario).evaluate(scenario, release)
    assert all(a["query"].startswith("Reportedly, ") for d in link.documents for a in d.facts["aux"])
    assert link.details["paraphrase_failures"] == 0


def test_leakage_is_the_same_cold_and_warm_on_llama_cpp(spacy_resource, tmp_path, monkeypatch):
    """Issue 13: leakage 0.312 from a warm cache, 0.375 from a cold one, same seed. llama.cpp
    answers a judge question differently beside other requests or on a reused prompt
    (tests/test_llm.py:FakeLlamaServer); with such a server behind the cache, a cold run, a
    run on a cache that earlier runs filled with other batches, and the same judge asked one
    question at a time must all give the same ratings."""
    xlc = pytest.importorskip("xllamacpp")
    from audit.models.llm import ChatRequest
    from audit.models.llamacpp import LlamaCppLLM
    from audit.models.answer_cache import CachedLLM
    from tests.test_llm import FakeLlamaServer

    class JudgeServer(FakeLlamaServer):
        @staticmethod
        def answer(body, disturbed):
            verdict = judge(ChatRequest.make(body["messages"], json_schema=body.get("json_schema")))
            return '"similar"' if disturbed and verdict == '"same"' else verdict

    monkeypatch.setattr(xlc, "Server", JudgeServer)
    originals, release = _originals(), _masked()
    scenario = Scenario(originals=originals, releases=(release,))

    def semantic(llm, **kw):
        attack = _attack(spacy_resource, llm=llm, repeats=1, **kw)
        return attack.fit(scenario).evaluate(scenario, release)[1]

    def cached(name):
        return CachedLLM(LlamaCppLLM("/nonexistent/model.gguf", identity="llamacpp:fake"), tmp_path / name)

    alone = semantic(ScriptedLLM(judge))
    cold = semantic(cached("cold.sqlite"))
    semantic(cached("warm.sqlite"), score_sample=2)  # earlier runs: part of the questions,
    semantic(cached("warm.sqlite"), score_sample=1, seed=3)  # in other batches
    warm_llm = cached("warm.sqlite")
    warm = semantic(warm_llm)
    assert warm_llm.stats["hits"] > 0 and warm_llm.stats["misses"] > 0
    assert 0.0 < alone.value < 1.0
    assert cold.value == warm.value == alone.value
    assert all(d.get("ratings") for d in cold.documents)
    assert [d.get("ratings") for d in cold.documents] == [d.get("ratings") for d in warm.documents] \
        == [d.get("ratings") for d in alone.documents]
    assert cold.details["judge_check"] == warm.details["judge_check"] == alone.details["judge_check"]


def test_select_aux_modes():
    claims = claims_of("x", [f"Claim number {i} here." for i in range(6)])
    assert select_aux(claims, 3, "first", random.Random(0)) == [0, 1, 2]
    assert select_aux(claims, 3, "last", random.Random(0)) == [3, 4, 5]
    assert select_aux(claims, 3, "random", random.Random(5)) == select_aux(claims, 3, "random", random.Random(5))
    assert select_aux(claims[:2], 3, "random", random.Random(0)) == [0, 1]


def test_construction_loads_nothing_and_is_registered():
    from audit.core.registry import registry

    attack = ClaimLinkerAttack(llm="no-such-model", embedder="/no/such/folder")
    assert "_llms" not in attack.__dict__ and attack._embedder_obj is None
    assert attack.get_params()["aux_claims"] == 3 and attack.get_params()["linker"] == "dense"
    assert registry.get("attack", "claim-linker") is ClaimLinkerAttack
    with pytest.raises(Exception, match="unknown linker"):
        ClaimLinkerAttack(linker="magic")


# --------------------------------------------------------------------------- real models


@pytest.mark.slow
def test_real_models_link_and_score_the_demo_population(small_llm, minilm):
    from anonaudit.demo.population import generate

    demo = generate(n=6, seed=0)
    release = demo.releases["labels"]
    scenario = Scenario(originals=demo.originals, releases=(release,))
    # Paraphrasing is exercised by the unit tests; here the real models link and rate.
    attack = ClaimLinkerAttack(llm=small_llm, embedder=minilm, paraphrase=False, repeats=1, score_sample=1,
                               judge_check=4, seed=0)
    link, semantic, lexical = attack.fit(scenario).evaluate(scenario, release)
    assert link.n == 6 and link.baseline == pytest.approx(1 / 6)
    # Masking names and places leaves each record's distinctive facts: the dense linker finds it.
    assert link.value >= 0.5 and link.beats_baseline
    assert semantic.n == 1 and semantic.details["sampled"]["documents"] == 1
    doc = semantic.documents[0]
    assert 0.0 <= doc.facts["leakage"] <= 1.0 and doc.facts["claims_scored"] + doc.facts["claims_unrated"] > 0
    text = release.corpus[doc.highlights_in].text
    assert all(text[h.start:h.end] for h in doc.highlights)
    check = semantic.details["judge_check"]
    assert check["claims"] == 4 and check["self"] is not None and isinstance(check["passed"], bool)
    assert semantic.details["evidence_ranking"] == "dense"
    # the contrastive yes/no judge ran on the real log-probabilities (no fallback); a failed control
    # is said (the 0.5B answers No to nearly everything: benchmarks/README.md), a passed one counts
    assert semantic.details["judge"] == "details" and semantic.details["judge_fallback"] is None
    assert (semantic.details["warning"] is None) == check["passed"] == semantic.details["in_verdict"]
    # Masking keeps most words: the lexical figure is high.
    assert lexical.value > 0.5


@pytest.mark.slow
def test_the_real_yesno_judge_passes_its_control_on_the_demo_population(quality_llm, minilm):
    """The default judge on the embedded 1.5B (the 0.5B says No to nearly everything, see
    benchmarks/README.md): 16 identifying control claims, own document >= 0.8, another <= 0.2,
    masked twin <= 0.2, by
    the log-probabilities of Yes and No against the threshold that the claims' reference records
    set; the checked figure counts in the verdict."""
    from anonaudit.demo.population import generate

    demo = generate(n=8, seed=0)
    release = demo.releases["labels"]
    scenario = Scenario(originals=demo.originals, releases=(release,))
    attack = ClaimLinkerAttack(llm=quality_llm, embedder=minilm, paraphrase=False, score_sample=2, claim_sample=2,
                               judge_check=16, seed=0)
    _, semantic, _ = attack.fit(scenario).evaluate(scenario, release)
    check = semantic.details["judge_check"]
    assert semantic.details["judge"] == "details" and check["claims"] == 16 and check["threshold"] >= 0
    assert check["self"] >= 0.8 and check["unrelated"] <= 0.2 and check["passed"], check
    # the masked twins (issue 68): the claims' own sentences with spaCy's details masked are not stated
    assert check["masked_claims"] >= 12 and check["masked"] <= 0.2, check
    assert semantic.details["warning"] is None and semantic.details["in_verdict"] is True
    assert semantic.n == 2 and 0.0 <= semantic.value <= 1.0


def test_cli_links_a_release_without_models(tmp_path):
    from click.testing import CliRunner

    from anonaudit.cli import main
    from audit.io.loaders import save_jsonl
    from audit.core.results import ResultsFile

    save_jsonl(_originals(), tmp_path / "originals.jsonl")
    save_jsonl(_masked().corpus, tmp_path / "masked.jsonl")
    out = tmp_path / "results.json"
    args = ["attack", "claim-linker", "--originals", str(tmp_path / "originals.jsonl"),
            "--release", f"masked={tmp_path / 'masked.jsonl'}", "--linker", "bm25", "--aux-select", "first",
            "--no-paraphrase", "--no-scoring", "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rf = ResultsFile.load(out)
    res = rf.get("claim_linker", "masked")
    assert res is not None and res.value == 1.0 and res.details["linker"] == "bm25"
    assert rf.get("claim_linker.leakage", "masked") is None
    assert "claim_linker" in result.output
    bad = CliRunner().invoke(main, args[:-2] + ["--aux-claims", "0", "--out", str(out)])
    assert bad.exit_code == 2 and "aux_claims must be at least 1" in bad.output


def test_close_releases_only_a_model_the_attack_loaded_itself(monkeypatch):
    from audit.models.resources import Resources

    class Recording(ScriptedLLM):
        closed = 0

        def close(self):
            type(self).closed += 1

    given = Recording(judge)
    attack = ClaimLinkerAttack(llm=given)
    assert attack._get_llm() is given
    attack.close()
    assert Recording.closed == 0 and "_llms" not in attack.__dict__  # the caller's model stays open
    loads = []
    monkeypatch.setattr("audit.models.specs.load_llm", lambda spec=None, **kw: loads.append(spec) or Recording(judge))
    loaded = ClaimLinkerAttack(llm="some-spec")  # used alone: a private set of resources
    loaded._get_llm()
    loaded.close()
    assert Recording.closed == 1 and "_llms" not in loaded.__dict__ and loaded.resources is None
    # With the run's resources, the model is loaded once for every component and released by its owner.
    with Resources() as shared:
        first, second = (ClaimLinkerAttack(llm="some-spec").use(shared) for _ in range(2))
        assert first._get_llm() is second._get_llm()
        first.close()
        second.close()
        assert Recording.closed == 1
    assert Recording.closed == 2 and loads == ["some-spec", "some-spec"]


def test_the_judge_llm_is_kept_in_the_one_llm_memo_and_closed_with_it():
    """The judge's LLM (``judge_llm``) is asked of the resources once, kept beside the attack's
    LLM in UsesLLM's memo, and forgotten by the same close(): no component keeps a memo of its own."""
    from audit.models.resources import UsesLLM

    asked = []

    class Counting:
        def llm(self, spec, *, cache=True, what=""):
            asked.append((spec, what))
            return ScriptedLLM(judge)

        def close(self):
            pass

    attack = ClaimLinkerAttack(llm="attacker-spec", judge_llm="judge-spec").use(Counting())
    judge_llm = attack._get_judge_llm()
    assert attack._get_judge_llm() is judge_llm and attack._get_llm() is not judge_llm
    assert asked == [("judge-spec", "the leakage judge"), ("attacker-spec", "the LLM")]
    assert set(attack.__dict__["_llms"]) == {"llm", "judge_llm"}
    attack.close()
    assert "_llms" not in attack.__dict__
    attack._get_judge_llm()
    assert [spec for spec, _ in asked] == ["judge-spec", "attacker-spec", "judge-spec"]
    # one memo: nothing outside UsesLLM asks the resources for an LLM of a component's own
    import inspect

    import attackers.claim_linker.attack as module

    assert "resources_of(self).llm(" not in inspect.getsource(module)
    assert isinstance(attack, UsesLLM)
