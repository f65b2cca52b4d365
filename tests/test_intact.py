"""INTACT sanitizer: candidates, placeholders, date rules, the three selections, the release, resume."""

from __future__ import annotations

import json
import re

import pytest

from audit.core.data import Corpus, Document, Release, Span
from audit.core.errors import AnonauditError
from audit.models.answer_cache import CachedLLM
from audit.models.llm import ChatRequest, ScriptedLLM
from defenders.intact import IntactSanitizer, date_generalisations

TEXT = ("Galip Yalman was born in Ankara on 12 March 1999. Yalman later left ankara to work for "
        "Serco Limited under reference 36110/97; his brother Ali Yalman stayed.")

CANDIDATES = {
    "Ankara": ["the capital of Turkey", "a city in central Anatolia", "a Turkish city", "a city in Asia", "a city"],
    "Serco Limited": ["a British outsourcing company", "an outsourcing company", "a services company",
                      "a company", "an organisation"],
}
#: attack answers by the candidate shown in [[...]]; anything else gets harmless guesses
RISKY = {"the capital of Turkey": ["Ankara", "Istanbul"], "March 1999": ["12 March 1999"],
         **{c: ["Serco Limited"] for c in CANDIDATES["Serco Limited"]}}


def _sp(text: str, s: str, label: str, entity_id: str | None = None, nth: int = 0) -> Span:
    i = -1
    for _ in range(nth + 1):
        i = text.index(s, i + 1)
    return Span(i, i + len(s), label, entity_id)


def corpus() -> Corpus:
    spans = (_sp(TEXT, "Galip Yalman", "PERSON", "e1"), _sp(TEXT, "Ankara", "LOC"),
             _sp(TEXT, "12 March 1999", "DATETIME"), _sp(TEXT, "Yalman", "PERSON", "e1", nth=1),
             _sp(TEXT, "ankara", "LOC"), _sp(TEXT, "Serco Limited", "ORG"), _sp(TEXT, "36110/97", "CODE"),
             _sp(TEXT, "Ali Yalman", "PERSON", "e2"))
    other = "Serco Limited hired Maria Lopez in 2003-07-15."
    return Corpus([Document("d1", TEXT, "p1", spans),
                   Document("d2", other, "p2", (_sp(other, "Serco Limited", "ORG"), _sp(other, "Maria Lopez", "PERSON"),
                                                _sp(other, "2003-07-15", "DATE")))], name="orig")


def _marked(request: ChatRequest) -> str:
    """The span a request asks about: marked in its last message, or (the attack's shared layout)
    quoted there, the document with the span blanked coming just before."""
    quoted = re.match(r'The sanitized text at \[\[\?\]\] says: "(.*)"\. Guesses', request.messages[-1][1])
    return quoted.group(1) if quoted else re.findall(r"\[\[(.*?)\]\]", request.messages[-1][1])[-1]


def is_candidate_request(request: ChatRequest) -> bool:
    return request.messages[0][1].startswith("You help publish")


def script(candidates=CANDIDATES, risky=RISKY):
    def answer(request: ChatRequest) -> str:
        if is_candidate_request(request):
            return json.dumps(candidates.get(_marked(request), []))
        return json.dumps(risky.get(_marked(request), ["Izmir", "Bursa"]))
    return answer


def sanitize(llm, **kw) -> tuple[IntactSanitizer, Release]:
    san = IntactSanitizer(llm=llm, frequent_lemmas=0, progress=False, **kw)
    return san, san.sanitize(corpus(), name="rel")


def check_release(orig: Corpus, rel: Release) -> None:
    rel.check_against(orig)
    assert rel.aligned and rel.corpus.ids == orig.ids
    for doc in rel.corpus:
        src = orig[doc.id]
        for s in doc.spans:
            assert doc.text[s.start:s.end] == s.replacement
            assert src.text[s.orig_start:s.orig_end] == s.original
            assert s.replacement and s.replacement.lower() != s.original.lower()


def test_attack_selection_takes_the_first_safe_candidate_and_records_every_replacement():
    llm = ScriptedLLM(script())
    san, rel = sanitize(llm)
    doc = rel.corpus["d1"]
    assert doc.text == ("PERSON_1 was born in a city in central Anatolia on 1999. PERSON_1 later left a city in "
                        "central Anatolia to work for [ORG] under reference CODE_1; his brother PERSON_2 stayed.")
    assert [(s.original, s.replacement) for s in doc.spans][:3] == [
        ("Galip Yalman", "PERSON_1"), ("Ankara", "a city in central Anatolia"), ("12 March 1999", "1999")]
    check_release(corpus(), rel)
    assert rel.sanitizer == "intact" and rel.name == "rel"
    # d2: placeholders restart per document; the date's first generalisation is safe
    assert rel.corpus["d2"].text == "[ORG] hired PERSON_1 in July 2003."
    counts = san.stats()["counts"]["rel"]
    assert counts["selection"] == "attack"
    assert counts["entities"] == 6 + 3 and counts["mentions"] == 8 + 3
    assert counts["placeholders"] == 3 + 1 and counts["date_rules"] == 2
    assert counts["candidate_requests"] == 2 + 1  # Ankara and Serco in d1, Serco in d2
    assert counts["fallbacks"] == counts["fallbacks_all_risky"] == 2
    assert counts["unparsable_candidates"] == counts["unparsable_guesses"] == 0
    # Ankara: 2nd candidate; d1's date: 2nd (year); d2's date: 1st (month year)
    assert counts["chosen_rank"] == {"1": 1, "2": 2}
    assert counts["llm_requests"] == counts["candidate_requests"] + counts["attack_requests"] == len(llm.calls)


def test_attack_prompt_shows_chosen_and_most_specific_replacements_document_first():
    llm = ScriptedLLM(script())
    sanitize(llm)
    attacks = [r for r in llm.calls if not is_candidate_request(r)]
    first_ankara = next(r for r in attacks if _marked(r) == "the capital of Turkey")
    text = first_ankara.messages[-2][1]
    # the document first, its span blanked; what replaced it in the last message
    assert text.startswith("Document:") and "was born in [[?]] on" in text
    assert first_ankara.shared == (4, 5) and len(first_ankara.messages) == 6
    # entities still to come show their most specific candidate, the other mention the candidate under test
    assert "on March 1999." in text and "left the capital of Turkey" in text and "Galip" not in text
    serco = next(r for r in attacks if _marked(r) == "a company" and "to work for [[?]]" in r.messages[-2][1])
    assert "in a city in central Anatolia on 1999." in serco.messages[-2][1]  # choices already made
    # the candidates of one span share the document: every request about Serco in d1 has the same one
    sercos = [r for r in attacks if "to work for [[?]]" in r.messages[-2][1]]
    assert len(sercos) == 5 and len({r.messages[:5] for r in sercos}) == 1


def test_inline_layout_and_lookahead_give_the_same_release():
    """The prompt layout and how many candidates are attacked at once change the cost, not the
    method: with the same answers, the same choices (lookahead 1 asks only until a safe one)."""
    base_llm = ScriptedLLM(script())
    san, base = sanitize(base_llm)
    for kw in ({"layout": "inline"}, {"lookahead": 5}, {"lookahead": 2, "layout": "inline"}, {"batch": 1},
               {"batch": 1, "lookahead": 3}):
        llm = ScriptedLLM(script())
        other_san, rel = sanitize(llm, **kw)
        assert [d.text for d in rel.corpus] == [d.text for d in base.corpus]
        assert other_san.stats()["counts"]["rel"]["chosen_rank"] == san.stats()["counts"]["rel"]["chosen_rank"]
        if kw.get("layout") == "inline":
            inline = [r for r in llm.calls if not is_candidate_request(r)]
            assert inline and all(len(r.messages) == 4 and r.shared == (3,) for r in inline)
    # asked one at a time, the attack stops at the first safe candidate: Ankara's 2nd, Serco never
    attacks = san.stats()["counts"]["rel"]["attack_requests"]
    assert attacks < other_san.stats()["counts"]["rel"]["attack_requests"]
    with pytest.raises(AnonauditError, match="lookahead"):
        IntactSanitizer(lookahead=0)
    with pytest.raises(AnonauditError, match="batch"):
        IntactSanitizer(batch=0)


def test_documents_are_sanitized_side_by_side():
    """The candidate requests of all documents go out in one batch, and each attack step asks
    about every document's current entity at once; one document at a time asks the same."""
    sizes = {}
    for batch in (1, 16):
        llm = ScriptedLLM(script())
        real = llm.complete_batch
        sizes[batch] = []
        llm.complete_batch = lambda reqs, _s=sizes[batch], **kw: _s.append(len(reqs)) or real(reqs, **kw)  # type: ignore[method-assign]
        sanitize(llm, batch=batch)
    assert sizes[16][0] == 3 and sizes[1][:1] == [2]  # candidates: Ankara and Serco of d1 with d2's Serco
    assert sum(sizes[16]) == sum(sizes[1]) and len(sizes[16]) < len(sizes[1])
    assert 2 in sizes[16][1:]  # an attack step with d1's and d2's entity together


def test_candidate_order_is_kept_and_one_request_per_entity():
    llm = ScriptedLLM(script())
    _, rel = sanitize(llm, selection="most_specific")
    cand = [r for r in llm.calls if is_candidate_request(r)]
    assert sorted(_marked(r) for r in cand) == ["Ankara", "Serco Limited", "Serco Limited"]
    assert all(is_candidate_request(r) for r in llm.calls)  # no attack requests
    ankara = next(r for r in cand if _marked(r) == "Ankara")
    assert "was born in [[Ankara]] on 12 March 1999." in ankara.messages[-1][1]  # its sentence only
    assert "Serco" not in ankara.messages[-1][1]
    doc = rel.corpus["d1"]
    assert [s.replacement for s in doc.spans if s.original.lower() == "ankara"] == ["the capital of Turkey"] * 2
    assert [s.replacement for s in doc.spans if s.label == "DATETIME"] == ["March 1999"]


def test_least_specific_selection():
    _, rel = sanitize(ScriptedLLM(script()), selection="least_specific")
    reps = {s.original: s.replacement for s in rel.corpus["d1"].spans}
    assert reps["Ankara"] == "a city" and reps["Serco Limited"] == "an organisation"
    assert reps["12 March 1999"] == "20th century"


def test_placeholders_are_consistent_within_a_document():
    _, rel = sanitize(ScriptedLLM(script()), selection="most_specific")
    reps = [(s.original, s.replacement) for s in rel.corpus["d1"].spans if s.label in ("PERSON", "CODE")]
    assert reps == [("Galip Yalman", "PERSON_1"), ("Yalman", "PERSON_1"), ("36110/97", "CODE_1"),
                    ("Ali Yalman", "PERSON_2")]


def test_dates_need_no_llm():
    llm = ScriptedLLM(script())
    _, rel = sanitize(llm, selection="most_specific")
    assert not any("1999" in _marked(r) or "2003" in _marked(r) for r in llm.calls)
    assert date_generalisations("12 March 1999") == ["March 1999", "1999", "late 1990s", "1990s", "20th century"]
    assert date_generalisations("March 12, 1999") == date_generalisations("1999-03-12")
    assert date_generalisations("the 3rd of June 2004")[0] == "June 2004"
    assert date_generalisations("March 1999") == ["1999", "late 1990s", "1990s", "20th century"]
    assert date_generalisations("2001") == ["early 2000s", "2000s", "21st century"]
    assert date_generalisations("1985") == ["mid 1980s", "1980s", "20th century"]
    assert date_generalisations("last Tuesday") is None and date_generalisations("1999-13-01") is None


def test_unparsable_answers_fall_back_to_the_label():
    def answer(request):
        return "" if is_candidate_request(request) and _marked(request) == "Ankara" else script()(request)
    san, rel = sanitize(ScriptedLLM(answer), selection="most_specific")
    reps = {s.original: s.replacement for s in rel.corpus["d1"].spans}
    assert reps["Ankara"] == reps["ankara"] == "[LOC]"
    counts = san.stats()["counts"]["rel"]
    assert counts["unparsable_candidates"] == 1 and counts["fallbacks"] == counts["fallbacks_no_candidate"] == 1


def test_unreadable_attack_answers_count_as_risky():
    def answer(request):
        return script()(request) if is_candidate_request(request) else ""
    san, rel = sanitize(ScriptedLLM(answer))
    assert {s.replacement for s in rel.corpus["d1"].spans if s.label == "LOC"} == {"[LOC]"}
    counts = san.stats()["counts"]["rel"]
    assert counts["fallbacks"] == counts["fallbacks_all_risky"] == 3 + 2  # LOC, DATETIME, ORG in d1; ORG, DATE in d2
    assert counts["unparsable_guesses"] == counts["attack_requests"] and counts["chosen_rank"] == {}


def test_candidates_repeating_the_original_are_dropped():
    cands = {**CANDIDATES, "Ankara": ["Ankara, Turkey", "a Turkish city"]}
    san, rel = sanitize(ScriptedLLM(script(candidates=cands)), selection="most_specific")
    assert {s.original: s.replacement for s in rel.corpus["d1"].spans}["Ankara"] == "a Turkish city"
    assert san.stats()["counts"]["rel"]["dropped_candidates"] == 1


def test_candidates_naming_another_entity_are_dropped():
    cands = {**CANDIDATES, "Serco Limited": ["Ali Yalman", "a company run by ali yalman",
                                             "I am sorry but I cannot help with replacing the names of real companies in legal documents like this one",
                                             "a company", "a firm"]}
    san, rel = sanitize(ScriptedLLM(script(candidates=cands)), selection="most_specific")
    assert {s.original: s.replacement for s in rel.corpus["d1"].spans}["Serco Limited"] == "a company"
    assert san.stats()["counts"]["rel"]["dropped_candidates"] == 3 + 1  # d2 has no Ali Yalman: only the refusal goes


def test_structured_requests_ask_for_exactly_m_strings():
    llm = ScriptedLLM(script())
    sanitize(llm, selection="most_specific", structured=True, candidates=3)
    schema = llm.calls[0].schema
    assert schema == {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 3, "maxItems": 3}
    assert "exactly 3" in llm.calls[0].messages[0][1]


def test_documents_without_spans_are_an_error():
    bare = Corpus([Document("d9", "Nothing annotated here.")], name="x")
    with pytest.raises(AnonauditError, match="document 'd9' has no spans to sanitize.*detector=spacy_ner"):
        IntactSanitizer(llm=ScriptedLLM([]), progress=False).sanitize(bare)
    with pytest.raises(AnonauditError, match="selection"):
        IntactSanitizer(selection="random")


def test_detector_finds_the_spans():
    text = "Maria Lopez moved to Berlin in 1999."
    llm = ScriptedLLM(script(candidates={"Berlin": ["the German capital", "a German city"]}))
    san = IntactSanitizer(llm=llm, detector="spacy_ner", selection="most_specific", progress=False)
    rel = san.sanitize(Corpus([Document("a", text)]))
    doc = rel.corpus["a"]
    assert "Maria" not in doc.text and "Berlin" not in doc.text and "1999" not in doc.text
    check_release(Corpus([Document("a", text)]), rel)


def test_a_plugin_detector_plugs_in_through_the_registry(monkeypatch):
    """Any registered detector: INTACT looks it up by name and sanitizes exactly what it found."""
    import re as re_

    from audit.core.interfaces import Detector
    from audit.core.registry import registry

    calls = []

    class CityDetector(Detector):
        name = "toy_cities"

        def detect(self, texts):
            calls.append(list(texts))
            return [[Span(m.start(), m.end(), "LOC") for m in re_.finditer(r"Berlin|Lima", t)] for t in texts]

    monkeypatch.setattr(registry, "_classes", {k: dict(v) for k, v in registry._classes.items()})
    registry.register("detector")(CityDetector)
    text = "Maria Lopez moved to Berlin in 1999."
    llm = ScriptedLLM(script(candidates={"Berlin": ["the German capital", "a German city"]}))
    rel = IntactSanitizer(llm=llm, detector="toy_cities", selection="most_specific", progress=False).sanitize(
        Corpus([Document("a", text)]))
    doc = rel.corpus["a"]
    assert calls == [[text]]
    assert "Berlin" not in doc.text and "Maria Lopez" in doc.text and "1999" in doc.text  # only what it found
    assert [(text[s.orig_start:s.orig_end], s.label) for s in doc.spans] == [("Berlin", "LOC")]
    with pytest.raises(AnonauditError, match=r"intact: detector: unknown detector 'nope' \(known: .*toy_cities"):
        IntactSanitizer(detector="nope")


def test_resume_makes_no_backend_call(tmp_path):
    first = ScriptedLLM(script())
    _, rel1 = sanitize(CachedLLM(first, tmp_path / "c.sqlite"))
    assert first.calls
    again = ScriptedLLM(script())
    cached = CachedLLM(again, tmp_path / "c.sqlite")
    _, rel2 = sanitize(cached)
    assert again.calls == [] and cached.stats["backend_calls"] == 0
    assert [d.text for d in rel1.corpus] == [d.text for d in rel2.corpus]


def test_registered_and_driver_options():
    from audit.core.registry import registry

    assert registry.get("sanitizer", "intact") is IntactSanitizer
    assert "selection" in IntactSanitizer.param_names()


@pytest.mark.slow
def test_real_model_on_two_documents(small_llm):
    orig = corpus()
    san = IntactSanitizer(llm=small_llm, frequent_lemmas=0, progress=False, guesses=3, candidates=3)
    rel = san.sanitize(orig, name="real")
    check_release(orig, rel)
    for doc, src in zip(rel.corpus, orig):
        assert len(doc.spans) == len(src.spans)
    counts = san.stats()["counts"]["real"]
    assert counts["entities"] == 9 and counts["llm_requests"] >= counts["candidate_requests"] >= 2


# --------------------------------------------------------------------------- truth checks (issue 49)

@pytest.mark.parametrize(("original", "candidate", "verdict"), [
    ("1997", "the 1990s", True), ("1997", "the late 1990s", True), ("1997", "the early 1990s", False),
    ("spring 1997", "the 1980s", False), ("1997", "the 20th century", True), ("1997", "between 1995 and 1999", True),
    ("1997", "1990-1995", False), ("1997", "the '90s", True), ("1997", "before 2000", True),
    ("1997", "after 2000", False), ("March 1997", "June 1997", False), ("March 1997", "in the spring of 1997", True),
    ("18 years", "more than 10 years", True), ("18 years", "less than 10 years", False),
    ("18 years", "10 to 20 years", True), ("18 years", "20 years", False), ("5,000 euros", "over 1,000 euros", True),
    ("18 years", "about 20 years", None), ("18 years", "over a decade", None), ("Oslo", "a city in Norway", None),
    ("1997", "a recent year", None), ("3 children", "one child", None),
])
def test_years_and_numbers_are_checked_by_rule(original, candidate, verdict):
    from defenders.intact.truth import rule_verdict

    assert rule_verdict(original, candidate) is verdict


def test_a_year_in_a_quantity_is_a_number():
    from defenders.intact.truth import rule_verdict

    assert rule_verdict("1500 euros", "more than 1000 euros", "MONEY") is True
    assert rule_verdict("1500 euros", "1990 euros", "MONEY") is False  # not read as a year


class _Scoring(ScriptedLLM):
    """A scripted LLM that also scores: "No" is likelier for the descriptions in ``false``."""

    def __init__(self, script, false=()):
        super().__init__(script)
        self.false = set(false)
        self.scored: list[str] = []

    def logprobs(self, prefix, continuation):
        said = re.findall(r"Description: (.*)\nTrue\?$", prefix)[-1]
        self.scored.append(said)
        likely = continuation.strip() == ("No" if said in self.false else "Yes")
        return [-0.1 if likely else -3.0]


def test_untruthful_candidates_are_dropped_by_the_model_and_counted():
    cands = {"Ankara": ["a city in Greece", "a Turkish city", "a city"],
             "Serco Limited": ["a fishing village", "a company"]}
    llm = _Scoring(script(cands, risky={}), false={"a city in Greece", "a fishing village"})
    san, rel = sanitize(llm, selection="most_specific")
    doc = rel.corpus["d1"]
    assert "a Turkish city" in doc.text and "a company" in doc.text and "Greece" not in doc.text
    counts = san.stats()["counts"]["rel"]
    assert counts["untruthful_model"] == 3  # Greece, and the fishing village in each document
    assert counts["truth_checked_model"] == 7 and counts["truth_unchecked"] == 0
    assert "a city in Greece" in llm.scored  # each candidate scored with its fixed answers


def test_without_log_probabilities_candidates_stay_unchecked():
    cands = {"Ankara": ["a city in Greece"], "Serco Limited": ["a company"]}
    san, rel = sanitize(ScriptedLLM(script(cands, risky={})), selection="most_specific")
    assert "a city in Greece" in rel.corpus["d1"].text
    counts = san.stats()["counts"]["rel"]
    assert counts["truth_unchecked"] == 3 and counts["untruthful_model"] == 0


def test_check_truth_off_keeps_every_candidate():
    cands = {"Ankara": ["a city in Greece"], "Serco Limited": ["a company"]}
    llm = _Scoring(script(cands, risky={}), false={"a city in Greece"})
    san, rel = sanitize(llm, selection="most_specific", check_truth=False)
    assert "a city in Greece" in rel.corpus["d1"].text and not llm.scored


def test_intact_self_check_counts_what_was_replaced():
    san, _ = sanitize(_Scoring(script(CANDIDATES)), selection="most_specific")
    check = san.stats()["counts"]["rel"]["self_check"]
    assert check["documents"] == 2 and 0.3 < check["share_words_changed"] < 0.7
    assert check["documents_person_in_clear"] == 0 and check["documents_mostly_changed"] == 1
    # d2 is a short sentence that is mostly names and a date: its release hides most of it
    (warning,) = san.warnings("rel")
    assert "1 of 2 document(s) have most of their words replaced" in warning


@pytest.mark.slow
def test_real_model_scores_a_true_and_an_absurd_generalisation(small_llm):
    from defenders.intact.truth import TruthCheck

    check = TruthCheck(small_llm)
    sentence = "After the war she moved to [[Oslo]], where she opened a bakery."
    assert check.model_verdict("Oslo", sentence, "a city in Norway") is True
    assert check.model_verdict("Oslo", sentence, "a kind of fruit") is False
    counts: dict = {}
    kept = check.keep("1997", "DATETIME", "He was born in [[1997]].", ["the late 1990s", "the 1980s"], counts)
    assert kept == ["the late 1990s"] and counts == {"truth_checked_rule": 2, "untruthful_rule": 1}
