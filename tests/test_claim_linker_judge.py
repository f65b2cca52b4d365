"""Tests of the claim linker's contrastive judge: identifying claims, the reference record, and a
control that a judge fooled by shared wording fails unless it contrasts (scripted LLM)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from attackers.claim_linker import ClaimLinkerAttack, SentenceSplitter
from attackers.claim_linker.judge import yesno_messages
from attackers.claim_linker.reference import (NO_DETAIL, DetailFrequency, NOT_UNIQUE, OriginalsIndex, detail_spans, mask_spans,
                                             null_threshold, specific_details, stated_details)
from audit.core.data import Corpus, Document, Release, Scenario
from audit.models.llm import LLM
from audit.models.resources import Resources
from tests.test_claim_linker import STOP, BagOfWords, spacy_resource  # noqa: F401 - a fixture

# Six people whose records share their wording, as court judgments do: every record has the same
# kinds of facts with other details, one sentence that is the same everywhere and one with no
# specific detail.
PEOPLE = [("Anna Berg", "Bergen", "1961", "3 May 1999", "teacher"),
          ("Jon Lie", "Oslo", "1975", "5 June 2001", "baker"),
          ("Mia Dahl", "Tromsø", "1968", "9 March 2003", "nurse"),
          ("Ola Nord", "Bodø", "1959", "2 July 1998", "pilot"),
          ("Eva Strand", "Molde", "1980", "7 April 2005", "farmer"),
          ("Per Holm", "Hamar", "1971", "4 August 2000", "judge")]


def _record(name, city, year, date, job):
    return [f"{name} was born in {city} in {year} and works there as a {job}.",
            f"On {date} the applicant lodged an appeal with the regional court in {city}.",
            f"The regional court in {city} dismissed the appeal of the {job} in {year}.",
            "The Government were represented by their Agent, Mr K. Larsen, of the Ministry of Justice.",
            "The hearing was public and the room was full.",
            f"{name} asked the supreme court in {city} to reopen the case of the {job}."]


def _corpus() -> Corpus:
    return Corpus([Document(f"p{k}", " ".join(_record(*p)), subject=f"p{k}") for k, p in enumerate(PEOPLE)],
                  name="originals")


class SharedWordingLLM(LLM):
    """A judge fooled by shared wording: its Yes/No margin grows with the share of the fact's
    content words found in the passage (Yes above one half), so a fact of one person is "stated"
    by another's record that tells the same kind of fact with other details."""

    identity = "scripted-shared-wording"

    def __init__(self):
        self.scored = 0

    def _complete(self, request):
        raise AssertionError("the yes/no judges must not generate text")

    def chat_text(self, messages):
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def logprobs(self, prefix, continuation):
        self.scored += 1
        passage = prefix.split("Passage: ", 1)[1].split("\n\nFact: ", 1)[0]
        fact = prefix.split("Fact: ", 1)[1].split("\n", 1)[0]
        words = set(re.findall(r"\w+", fact.lower())) - STOP
        share = len(words & set(re.findall(r"\w+", passage.lower()))) / len(words)
        margin = 4 * share - 2
        return [margin / 2 if continuation == "Yes" else -margin / 2]


@pytest.fixture(scope="module")
def resources():
    """One set of models for the module's attacks: spaCy's entity recogniser is loaded once."""
    with Resources() as res:
        yield res


def _attack(spacy_resource, res: Resources | None = None, **kw) -> ClaimLinkerAttack:  # noqa: F811
    params = dict(llm=SharedWordingLLM(), embedder=BagOfWords(), paraphrase=False, judge_check=16, aux_claims=1,
                  aux_select="first")
    params.update(kw)
    attack = ClaimLinkerAttack(**params)
    if res is not None:
        attack.use(res)
    attack._splitter = SentenceSplitter(spacy_resource, clauses=False)
    return attack


def test_specific_details_are_entities_of_identifying_kinds_and_numbers():
    ents = [("Anna Berg", "PERSON"), ("Article 6", "LAW"), ("first", "ORDINAL"), ("3 May 1999", "DATE")]
    assert specific_details(ents, "Anna Berg cited Article 6 first on 3 May 1999, case 123/04.") == \
        ["Anna Berg", "3 May 1999", "6", "123", "04"]
    assert specific_details([], "The hearing was public.") == []


def test_a_claim_identifies_with_a_detail_and_no_near_equal_claim_elsewhere():
    vecs = np.array([[1, 0, 0], [0, 1, 0], [0.6, 0.8, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    index = OriginalsIndex(vecs, [3, 2])  # document 0: claims 0-2, document 1: claims 3-4
    assert index.why_not_identifying(0, 0, ["Bergen"], tolerance=0.02) is None
    assert index.why_not_identifying(0, 0, [], tolerance=0.02) == NO_DETAIL
    assert index.why_not_identifying(0, 1, ["1961"], tolerance=0.02) == NOT_UNIQUE  # document 1 repeats it
    # the reference record: the other document holding the closest claim, never an excluded one
    assert index.nearest_other(np.array([0.6, 0.8, 0]), exclude={0}) == 1
    assert index.nearest_other(np.array([0.6, 0.8, 0]), exclude={1}) == 0
    assert index.nearest_other(np.array([0.6, 0.8, 0]), exclude={0, 1}) == -1
    # several records about one person: none of them is "another original" or a reference
    same = OriginalsIndex(np.vstack([vecs, [[0, 1, 0]]]), [3, 2, 1], people=["ann", "ann", "bob"])
    assert same.why_not_identifying(0, 1, ["1961"], tolerance=0.02) == NOT_UNIQUE  # bob's record has it
    assert same.why_not_identifying(0, 0, ["Bergen"], tolerance=0.02) is None
    assert same.nearest_other(np.array([1, 0, 0]), exclude={0}) == 2  # not ann's other record
    assert OriginalsIndex(vecs[:3], [3], people=["ann"]).nearest_other(np.array([1, 0, 0]), exclude={0}) == -1



def test_the_threshold_is_a_conformal_bound_on_other_peoples_margins():
    # n = 16, alpha = 0.1: rank ceil(17 * 0.9) = 16, the largest (a new null beats it with p <= 1/17)
    null = [-2.0 + 0.25 * k for k in range(16)]
    assert null_threshold(null) == 1.75
    # n = 30: rank ceil(31 * 0.9) = 28 of 30
    assert null_threshold([float(k) for k in range(30)]) == 27.0
    # never below 0 (Yes must win), and 0 without a null (the plain rule)
    assert null_threshold([-3.0, -1.0]) == 0.0 and null_threshold([]) == 0.0
    assert null_threshold([float("-inf"), 0.5]) == 0.5


def test_shared_wording_fools_the_plain_judge_and_the_contrast_only_on_masked_twins(spacy_resource, resources):  # noqa: F811
    originals = _corpus()
    labels = Corpus([Document(d.id, d.text.replace(p[0], "[PERSON]").replace(p[1], "[LOC]").replace(p[3], "[DATE]"),
                              subject=d.subject) for d, p in zip(originals, PEOPLE)], name="labels")
    scenario = Scenario(originals=originals, releases=(Release("identity", originals), Release("labels", labels)))
    plain = _attack(spacy_resource, resources, judge="yesno")
    check = plain.fit(scenario).evaluate(scenario, scenario.releases[0])[1].details["judge_check"]
    assert check["self"] == 1.0 and check["unrelated"] > 0.2 and not check["passed"]  # another record "states" it

    attack = _attack(spacy_resource, resources, judge="contrast")  # identifying claims only (the default)
    assert attack.identifying
    identity = attack.fit(scenario).evaluate(scenario, scenario.releases[0])[1]
    d = identity.details
    check = d["judge_check"]
    assert check["judge"] == "contrast" and check["self"] == 1.0 and check["unrelated"] == 0.0, check
    # ... but shared wording still "states" a sentence with its details masked (issue 68): it fails there
    assert check["masked"] > 0.2 and [f.split()[0] for f in check["failed"]] == ["masked"] and not check["passed"]
    # the sentence every record has and the one without a detail are never judged
    assert set(check["left_out"]) <= {NO_DETAIL, NOT_UNIQUE}
    assert d["claims_left_out"] == {NO_DETAIL: 6, NOT_UNIQUE: 6}
    assert "records of other people most like them" in d["decision_rule"] and "failed its control (masked" in d["warning"]
    assert 0 < check["threshold"] < 1 and len(check["reference_margins"]) == 16
    assert d["documents_without_identifying_claims"] == [] and "claims left out: 6 (another" in d["note"]
    for doc in identity.documents:
        assert doc.facts["claims_left_out"] == {NO_DETAIL: 1, NOT_UNIQUE: 1}
        assert doc.facts["claims_scored"] == 3  # 6 claims less the attacker's one and the two left out
    assert identity.value == 1.0 and not d["in_verdict"]
    # labels hide the names, places and dates: what is left is what every record says
    labelled = attack.evaluate(scenario, scenario.releases[1])[1]
    assert labelled.value < identity.value
    # one question per (evidence, claim) in a fit: references and the identity record recur
    asked = attack._get_llm().scored
    attack.evaluate(scenario, scenario.releases[0])
    assert attack._get_llm().scored == asked


def test_too_few_identifying_claims_are_said(spacy_resource, resources):  # noqa: F811
    originals = Corpus([Document(f"q{k}", "The hearing was public and the room was full. "
                                          f"It rained on {d} in the town.", subject=f"q{k}")
                        for k, d in enumerate(["1 May 1990", "2 May 1991", "3 May 1992"])], name="originals")
    scenario = Scenario(originals=originals, releases=(Release("identity", originals),))
    semantic = _attack(spacy_resource, resources).fit(scenario).evaluate(
        scenario, scenario.releases[0])[1]
    check = semantic.details["judge_check"]
    assert check["claims"] == 3 and check["too_few"]
    assert semantic.details["warning"].startswith("the judge's control found only 3 identifying claims (asked for 16)")


def test_without_a_control_the_contrastive_judge_says_it_had_no_threshold(spacy_resource, resources):  # noqa: F811
    originals = _corpus()
    scenario = Scenario(originals=originals, releases=(Release("identity", originals),))
    attack = _attack(spacy_resource, resources, judge_check=0)
    semantic = attack.fit(scenario).evaluate(scenario, scenario.releases[0])[1]
    assert semantic.details["judge_check"] is None and semantic.details["in_verdict"] is False
    assert semantic.details["warning"].endswith("the contrastive judge has no threshold and used P(Yes) > P(No)")


# --------------------------------------------------------------------------- the masked twin (issue 68)


def test_detail_spans_mask_as_releases_do_and_stated_details_are_found_in_so_many_words():
    text = "Anna Berg was born in Bergen in 1961, case 123/04."
    ents = [(0, 9, "PERSON"), (22, 28, "GPE"), (32, 36, "DATE"), (0, 4, "LAW")]
    spans = detail_spans(ents, text)
    assert spans == [(0, 9, "PERSON"), (22, 28, "GPE"), (32, 36, "DATE"), (43, 46, "CARDINAL"), (47, 49, "CARDINAL")]
    assert mask_spans(text, spans, "suppression") == " was born in  in , case /."
    assert mask_spans(text, spans, "label") == "[PERSON] was born in [GPE] in [DATE], case [CARDINAL]/[CARDINAL]."
    assert mask_spans(text, spans, "stars") == "*** was born in *** in ***, case ***/***."
    with pytest.raises(ValueError, match="unknown mask style"):
        mask_spans(text, spans, "blur")
    details = ["Mr Dmitri Nieminen", "3 May 1999", "Cork", "1965"]
    assert stated_details(details, "Mr Nieminen wrote on May 3, 1999 from cork.") == ["Mr Dmitri Nieminen",
                                                                                    "3 May 1999", "Cork"]
    # a mask, a blank, a title or a month alone states nothing
    assert stated_details(details, "[PERSON] (Mr ***) wrote in May from  in [DATE].") == []
    assert stated_details(details, "born in the mid-sixties") == []
    # the question with the details named (measured by benchmarks/judge_masked_twin.py, not the attack's)
    msgs = yesno_messages("The passage.", "Anna was born in 1961.", details=["Anna", "1961"])
    assert msgs[1]["content"].endswith("Fact: Anna was born in 1961.\nIts specific details: Anna; 1961\n\n"
                                       "Does the passage state this fact, with these details? Answer Yes or No.")
    # a detail that many people's originals state is common, not specific
    freq = DetailFrequency(["The Supreme Court heard Anna.", "The Supreme Court heard Jon.", "Mia was heard."],
                           ["anna", "jon", "mia"])
    assert freq.stating("the Supreme Court") == 2 and freq.common("the Supreme Court")
    assert freq.stating("Anna") == 1 and not freq.common("Anna")


class TemplateLLM(SharedWordingLLM):
    """A judge that rewards a template: Yes when the passage has the fact's ordinary words and names
    no detail the fact does not (a capitalised word or a number elsewhere contradicts it; a label
    such as [LOC] does not), by a wider margin the more of the fact's details it has. Another person's record contradicts, a masked twin does not: the
    failure issue 68 found in the 1.5B on masked releases."""

    identity = "scripted-template"

    def logprobs(self, prefix, continuation):
        self.scored += 1
        passage = prefix.split("Passage: ", 1)[1].split("\n\nFact: ", 1)[0]
        fact = prefix.split("Fact: ", 1)[1].split("\n", 1)[0]
        fact_words = set(re.findall(r"\w+", fact))
        foreign = [w for w in re.findall(r"\w+", passage)
                   if w not in fact_words and not w.isupper() and (w[0].isupper() or w[0].isdigit())]
        plain = {w.lower() for w in fact_words if w.islower()} - STOP
        words = {w.lower() for w in re.findall(r"\w+", passage)}
        share = len(plain & words) / max(1, len(plain))
        specific = {w.lower() for w in fact_words if not w.islower()}
        found = len(specific & words) / max(1, len(specific))
        # a template with its details gone still earns half the margin of the fact: Yes wins
        margin = -2.0 if foreign else (4 * share - 2) * (0.5 + 0.5 * found)
        return [margin / 2 if continuation == "Yes" else -margin / 2]


def _masked_scenario():
    """The six people's records, their gold-suppressed release (names, places, dates and years
    removed) and a labels release that leaves the years."""
    originals = _corpus()
    suppressed, labels = [], []
    for d, p in zip(originals, PEOPLE):
        text = d.text
        for detail in (p[0], p[1], p[3], p[2]):
            text = text.replace(detail, "")
        suppressed.append(Document(d.id, text, subject=d.subject))
        text = d.text.replace(p[0], "[PERSON]").replace(p[1], "[LOC]").replace(p[3], "[DATE]")
        labels.append(Document(d.id, text, subject=d.subject))
    releases = (Release("identity", originals), Release("suppressed", Corpus(suppressed, name="suppressed")),
                Release("labels", Corpus(labels, name="labels")))
    return Scenario(originals=originals, releases=releases)


def test_a_template_rewarding_judge_fails_the_masked_twin_and_says_so(spacy_resource, resources):  # noqa: F811
    """~0.1 s: the contrastive judge of before issue 68 passes own and unrelated but counts masked
    twins as stated; the result names the failing control and keeps the figure out of the verdict."""
    scenario = _masked_scenario()
    attack = _attack(spacy_resource, resources, llm=TemplateLLM(), judge="contrast")
    semantic = attack.fit(scenario).evaluate(scenario, scenario.releases[1])[1]
    check = semantic.details["judge_check"]
    assert check["self"] == 1.0 and check["unrelated"] == 0.0 and check["masked_claims"] == 16
    assert check["masked"] > 0.2 and not check["passed"] and check["failed"][0].startswith("masked")
    assert "failed its control (masked" in semantic.details["warning"] and semantic.details["in_verdict"] is False
    assert semantic.value > 0.5  # the template "leaks" from a release with every detail suppressed


def test_the_details_judge_passes_the_masked_twin_and_shows_the_stated_details(spacy_resource, resources):  # noqa: F811
    """~0.2 s: the default judge asks only of a passage that states a detail of the claim, and a
    leaked claim's finding lists the details its passage states."""
    scenario = _masked_scenario()
    llm = TemplateLLM()
    attack = _attack(spacy_resource, resources, llm=llm)
    assert attack.judge == "details"
    identity, suppressed, labels = (attack.fit(scenario).evaluate(scenario, r)[1] if k == 0 else
                                    attack.evaluate(scenario, r)[1] for k, r in enumerate(scenario.releases))
    check = identity.details["judge_check"]
    assert check["judge"] == "details" and check["passed"] and check["failed"] == [], check
    assert check["self"] == 1.0 and check["unrelated"] == 0.0 and check["masked"] == 0.0
    # its threshold is what the masked twins earn (a template alone), each twin judged by the others'
    assert 1.0 <= check["threshold"] < 2.0 and len(check["masked_margins"]) == 16 and "reference_margins" not in check
    assert check["masked_llm"] is not None
    assert identity.value == 1.0 and identity.details["in_verdict"] and "specific details" in \
        identity.details["decision_rule"]
    asked = llm.scored
    assert attack.evaluate(scenario, scenario.releases[1])[1].value == suppressed.value == 0.0
    assert llm.scored == asked  # a passage with every detail suppressed is not asked about
    assert not any(d.success for d in suppressed.documents)
    # the labels release keeps the years: a claim leaks through its year, and says so
    assert 0.0 < labels.value < 1.0
    leaked = [item for d in labels.documents for item in d.facts["leaked"]]
    assert leaked and all(item["details_stated"] for item in leaked)
    for item in leaked:
        assert all(d in item["details"] for d in item["details_stated"])
        assert any(y in item["details_stated"] for y in (p[2] for p in PEOPLE)), item
        assert not any(p[1] in item["details_stated"] for p in PEOPLE)  # the city is labelled
    assert all("details stated: " in h.note for d in labels.documents for h in d.highlights)
    # the same seed gives the same control and figures, asked anew
    again = _attack(spacy_resource, resources, llm=TemplateLLM())
    again_labels = again.fit(scenario).evaluate(scenario, scenario.releases[2])[1]
    assert again_labels.details["judge_check"] == check and again_labels.value == labels.value
