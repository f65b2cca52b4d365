"""Span guessing with the public background (issue 44): retrieval of the person, candidates of
the span's type, context fit, per-source recovery, warnings, and nothing private shared."""

from __future__ import annotations

import json

import pytest

from attackers.span_guess import SpanGuessAttack
from attackers.span_guess.background import Background, Context, allowed_types, llm_rerank, sentences
from audit.core.data import Corpus, Document, Scenario, Span, sanitize_corpus
from audit.core.errors import AnonauditError
from audit.core.results import ResultsFile
from audit.models.llm import ScriptedLLM
from audit.models.nlp import Spacy
from reports.shareable import shareable

ORIGINALS = {
    "d1": ("The applicant, Mr Galip Yalman, was born on 3 August 1961 and lives in Izmir. "
           "He was arrested on 12 May 2003 after a protest at the harbour.",
           [("Galip Yalman", "PERSON"), ("3 August 1961", "DATETIME"), ("Izmir", "LOC"), ("12 May 2003", "DATETIME")]),
    "d2": ("The applicant, Ms Anna Nowak, works for Baltic Shipping Ltd in Gdansk. "
           "She was dismissed on 4 June 2010 after speaking to a newspaper.",
           [("Anna Nowak", "PERSON"), ("Baltic Shipping Ltd", "ORG"), ("Gdansk", "LOC"), ("4 June 2010", "DATETIME")]),
}
BACKGROUND = [
    ("bg1a", "p1", "Galip Yalman, a fisherman from Izmir, was arrested on 12 May 2003 after a protest at the harbour. "
                   "Yalman later moved to Ankara. He had met the mayor on 1 January 2001."),
    ("bg1b", "p1", "Profile: Galip Yalman was born on 3 August 1961. Friends say he restores boats in Izmir."),
    ("bg2a", "p2", "Anna Nowak, a clerk at Baltic Shipping Ltd in Gdansk, was dismissed on 4 June 2010 after speaking "
                   "to a newspaper. Nowak grew up in Warsaw."),
    ("bg3a", "p3", "Ivan Petrov, a baker in Sofia, opened a shop in March 1999."),
]


def _scenario(background=True, labels=True, subjects=("p1", "p2")):
    docs, spans = [], {}
    for (doc_id, (text, marks)), subject in zip(ORIGINALS.items(), subjects):
        docs.append(Document(doc_id, text, subject=subject))
        spans[doc_id] = [Span(text.index(o), text.index(o) + len(o), label=lab,
                              replacement=f"[{lab}]" if labels else "") for o, lab in marks]
    originals = Corpus(docs, name="orig")
    release = sanitize_corpus(originals, spans, name="labels")
    bg = Corpus([Document(i, t, subject=s) for i, s, t in BACKGROUND], name="bg") if background else None
    return Scenario(originals=originals, background=bg, releases=(release,)), release


@pytest.fixture(scope="module")
def nlp():
    return Spacy(disable=("parser", "lemmatizer"))


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    return tmp_path


def _attack(**kw) -> SpanGuessAttack:
    kw.setdefault("dense", False)
    return SpanGuessAttack(guesses=kw.pop("guesses", 2), frequent_lemmas=0, progress=False, **kw)


def test_background_adversary_recovers_spans_by_person_and_context(home):
    scenario, release = _scenario()
    attack = _attack().fit(scenario)
    assert attack.knowledge_of(scenario) == "background"
    (res,) = attack.evaluate(scenario, release)
    spans = {s["original"]: s for d in res.documents for s in d.facts["spans"]}
    # the person is found from the whole document; the right date of two is chosen by the words
    # around it ("was arrested on ... after a protest"), not by frequency
    assert spans["12 May 2003"]["guesses"][0] == "12 May 2003"
    assert spans["3 August 1961"]["guesses"][0] == "3 August 1961"
    assert spans["Baltic Shipping Ltd"]["recovered"] and spans["Gdansk"]["recovered"]
    assert spans["Galip Yalman"]["background_person"] == "p1"
    assert res.value == 1.0 and res.details["knowledge"] == "background"
    assert res.details["person_found_rate"] == 1.0
    by = res.details["recovered_by_source"]
    assert by["background"] == {"recovered": 8, "of": 8, "rate": 1.0}
    assert "context_llm" not in by and by["background_person_only"]["of"] == 8
    assert "knew the public background (4 documents about 3 people)" in res.details["attacker"]
    assert "Background candidates recovered 8 of 8 spans" in res.details["attacker"]
    assert "warning" not in res.details and res.details["llm"] == ""


def test_context_fit_ranks_a_date_above_a_more_frequent_one(nlp):
    bg = Background(Corpus([Document("a", "He was born on 1 May 1950. The trial opened on 2 June 1990 and "
                                          "closed on 2 June 1990; on 2 June 1990 he left.", subject="p")]), nlp)
    text = "The man was born on [DATETIME] in a village."
    i = text.index("[DATETIME]")
    ctx = Context.of(text, i, i + len("[DATETIME]"))
    ranked = [c for c, *_ in bg.candidates("p", "DATETIME", ctx)]
    assert ranked[0] == "1 May 1950"
    assert bg.person_only("p", "DATETIME")[0] == "2 June 1990"  # frequency alone picks the other


def test_type_map_and_untyped_names_come_second(nlp):
    assert allowed_types("DATETIME") == frozenset({"DATE", "TIME"}) and allowed_types("weird") is None
    bg = Background(Corpus([Document("a", "TAMPERE — Anna Virtanen met Pekka in Helsinki.", subject="p")]), nlp)
    ctx = Context(("lives", "in"), ())
    loc = [c for c, *_ in bg.candidates("p", "LOC", ctx)]
    assert "Helsinki" in loc and "TAMPERE" in loc  # the dateline NER may miss is still proposed
    assert not [c for c, *_ in bg.candidates("p", "CODE", ctx)]  # no code in the text


def test_both_interleaves_the_two_sources_and_reports_each(home):
    scenario, release = _scenario()
    llm = ScriptedLLM(lambda req: json.dumps(["Berlin", "Paris"]))
    (res,) = _attack(knowledge="both", llm=llm, guesses=2).fit(scenario).evaluate(scenario, release)
    by = res.details["recovered_by_source"]
    assert by["context_llm"]["recovered"] == 0 and by["background"]["recovered"] == 8
    first = res.documents[0].facts["spans"][0]
    assert first["guesses"][1] == "Berlin"  # background's best, then the LLM's best
    assert set(first["guesses_by_source"]) == {"background", "background_person_only", "prior", "background_and_prior",
                                               "context_llm"}
    assert "the context-only LLM guesser 0 of 8 spans" in res.details["attacker"]
    # the LLM asks per span: prediction-powered, every span scored by the background ranker alone
    assert res.details["predictor"].startswith("the same attack without the LLM")
    assert res.details["cheap_recovered"]["recovered"] == 8 and res.details["made"].endswith("exact, about this release")


def test_context_knowledge_keeps_the_old_guesser_and_says_so(home):
    scenario, release = _scenario(background=False)
    llm = ScriptedLLM(lambda req: json.dumps(["Izmir", "Gdansk"]))
    attack = _attack(llm=llm)
    assert attack.knowledge_of(scenario) == "context"
    (res,) = attack.fit(scenario).evaluate(scenario, release)
    assert res.details["knowledge"] == "context" and res.details["recovered_by_source"]["context_llm"]["recovered"] == 2
    assert res.details["attacker"].startswith("knew only the sanitized document")


def test_background_asked_for_without_one_is_a_clear_error(home):
    scenario, _ = _scenario(background=False)
    with pytest.raises(AnonauditError, match="needs public background documents"):
        _attack(knowledge="background").knowledge_of(scenario)
    with pytest.raises(AnonauditError, match="knowledge must be"):
        _attack(knowledge="everything")
    with pytest.raises(AnonauditError, match="people must be"):
        _attack(people=0)


def test_a_person_without_background_is_a_warning_not_a_silent_zero(home):
    scenario, release = _scenario(subjects=("p1", "nobody"))
    (res,) = _attack().fit(scenario).evaluate(scenario, release)
    assert "1 of 2 attacked documents are about people with no passage in the background" in res.details["warning"]
    assert res.details["documents_without_background"] == 1


def test_a_span_without_context_is_a_warning(home):
    doc = Document("d", "Izmir", subject="p1")
    originals = Corpus([doc], name="o")
    release = sanitize_corpus(originals, {"d": [Span(0, 5, label="LOC", replacement="[LOC]")]}, name="r")
    bg = Corpus([Document(i, t, subject=s) for i, s, t in BACKGROUND], name="bg")
    scenario = Scenario(originals=originals, background=bg, releases=(release,))
    (res,) = _attack().fit(scenario).evaluate(scenario, release)
    assert "1 of 1 attacked spans have no context at all" in res.details["warning"]


def test_llm_rerank_orders_fixed_answers_by_log_probability():
    class LP(ScriptedLLM):
        def logprobs(self, prefix, continuation):
            return [-0.1] * 3 if continuation.startswith("Izmir") else [-2.0] * 3

    llm = LP(lambda r: "")
    text = "He lives in [LOC] with his family."
    i = text.index("[LOC]")
    ranked = llm_rerank(llm, text, i, i + 5, ["Ankara", "Izmir"])
    assert [c for c, _ in ranked] == ["Izmir", "Ankara"]

    scenario, release = _scenario()
    (res,) = _attack(rank="llm", llm=llm).fit(scenario).evaluate(scenario, release)
    spans = {s["original"]: s for d in res.documents for s in d.facts["spans"]}
    assert spans["Izmir"]["guesses"][0] == "Izmir" and "log-probability" in res.details["attacker"]
    assert res.details["estimate"]["scored"] == res.details["estimate"]["judged"] and "value_from" in res.details


def test_nothing_from_the_background_reaches_the_shareable_edition(home):
    scenario, release = _scenario()
    rf = ResultsFile()
    rf.extend(_attack().fit(scenario).evaluate(scenario, release))
    shared = json.dumps(shareable(rf).to_dict())
    for _, _, text in BACKGROUND:
        for word in ("Yalman", "Nowak", "Baltic", "Izmir", "Gdansk", "1961", "Ankara", "fisherman"):
            assert word not in shared, word
    assert '"p1"' not in shared and '"background_person":' not in shared
    assert '"background_person_weight":' not in shared and '"guesses_by_source":' not in shared
    assert shareable(rf).results[0].details["recovered_by_source"]["background"]["recovered"] == 8


def test_the_report_says_what_the_adversary_knew_and_warns(home):
    from reports.render import render

    scenario, release = _scenario(subjects=("p1", "nobody"))
    rf = ResultsFile()
    rf.extend(_attack().fit(scenario).evaluate(scenario, release))
    html = render(rf)
    assert "knew the public background (4 documents about 3 people)" in html
    assert "no passage in the background" in html  # the warning, beside the figure
    shared = render(rf, shareable=True)
    assert "Yalman" not in shared and "Baltic" not in shared


def test_sentences_cut_long_text_without_a_parser():
    assert sentences("One. Two! Three\n\nFour") == ["One.", "Two!", "Three", "Four"]
    assert all(len(s) <= 600 for s in sentences("x" * 1500))


@pytest.mark.slow
def test_background_adversary_on_the_demo_with_minilm(tmp_path, monkeypatch, minilm):
    """The real path: spaCy NER and MiniLM retrieval over the demo's background, all spans of
    the labels release of 12 people; it must beat its context-free baseline."""
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    import audit.models.resources as resources
    from anonaudit.demo.population import write
    from audit.io.loaders import load_corpus, load_release_file

    write(tmp_path / "data", n=12, seed=0)
    orig = load_corpus(str(tmp_path / "data" / "originals.jsonl"))
    bg = load_corpus(str(tmp_path / "data" / "background.jsonl"))
    rel = load_release_file(tmp_path / "data" / "releases" / "labels.jsonl", name="labels", originals=orig)[0]
    scenario = Scenario(originals=orig, background=bg, releases=(rel,))
    monkeypatch.setattr(resources.Resources, "embedder", lambda self, spec=None, **kw: minilm)
    (res,) = SpanGuessAttack(guesses=5, progress=False).fit(scenario).evaluate(scenario, rel)
    assert res.details["knowledge"] == "background" and res.n == 12
    assert res.details["spans_attacked"] >= 100
    assert res.value > res.baseline and res.details["person_found_rate"] >= 0.5


def test_label_prior_leaves_the_span_out_and_discounts_singletons():
    from attackers.span_guess.prior import LabelPrior, candidate_key, combine, top

    prior = LabelPrior([("LOC", "London"), ("LOC", "London"), ("LOC", "the London"), ("LOC", "Paris"),
                        ("DATE", "1 May 1990"), ("DATE", "2 May 1990")])
    assert candidate_key("the Court of Appeal") == candidate_key("Court of Appeal") == "court of appeal"
    dist = prior.distribution("LOC", "Paris")  # Paris left out: London three times of three
    assert dist == {"london": (1.0, "London")}
    assert prior.guesses("LOC", "London", 2) == ["London", "Paris"]  # two of the three others
    # Good-Turing: of the other LOC spans (London x2, Paris) one is a singleton -> 2/3 are "seen" values
    assert abs(prior.seen_mass("LOC", "London") - 2 / 3) < 1e-9
    assert prior.seen_mass("DATE", "1 May 1990") == 0.0  # every other date is new: the stock says nothing
    # no background candidate: exactly the prior, so the baseline's guesses
    assert top(combine({}, prior.distribution("LOC", "London"), 0.5), 2) == ["London", "Paris"]
    mixed = combine({"rome": (0.9, "Rome"), "paris": (0.1, "Paris")}, prior.distribution("LOC", "London"), 2 / 3)
    assert top(mixed, 3) == ["Rome", "London", "Paris"]
    assert abs(sum(p for p, _ in mixed.values()) - (0.5 + 0.5 * 2 / 3)) < 1e-9


def test_people_are_weighted_by_their_posterior(nlp):
    bg = Background(Corpus([Document(i, t, subject=s) for i, s, t in BACKGROUND], name="bg"), nlp)
    ranked = bg.rank_people(ORIGINALS["d1"][0], 3)
    assert [p for p, _ in ranked][0] == "p1" and abs(sum(w for _, w in ranked) - 1) < 1e-9
    assert ranked[0][1] > 0.5 and ranked[0][1] > ranked[1][1] >= ranked[2][1]


def test_the_prior_fills_in_where_the_background_has_nothing(home):
    """Spans of a type the background never states (codes): the combined adversary guesses the
    prior's originals, so it recovers what the context-free baseline recovers, and says it knew it."""
    codes = ["4411/00", "4411/00", "4411/00", "9120/01"]
    texts = {f"d{i}": (f"The applicant lodged application no. {c} about Izmir.", f"p{i}") for i, c in enumerate(codes)}
    originals = Corpus([Document(d, t, subject=s) for d, (t, s) in texts.items()], name="o")
    spans = {d: [Span(t.index(c), t.index(c) + len(c), label="CODE", replacement="[CODE]")]
             for (d, (t, _)), c in zip(texts.items(), codes)}
    release = sanitize_corpus(originals, spans, name="r")
    bg = Corpus([Document(f"b{i}", f"Person {i} lives in Izmir.", subject=f"p{i}") for i in range(4)], name="bg")
    scenario = Scenario(originals=originals, background=bg, releases=(release,))
    (res,) = _attack(guesses=1).fit(scenario).evaluate(scenario, release)
    by = res.details["recovered_by_source"]
    assert by["background"]["recovered"] == 0 and by["prior"]["recovered"] == 3 == round(res.baseline * 4)
    assert res.value == 0.75 and res.details["prior"] is True
    assert "what the context-free baseline knows" in res.details["attacker"]
    (off,) = _attack(guesses=1, prior=False).fit(scenario).evaluate(scenario, release)
    assert off.value == 0.0 and "prior" not in off.details["recovered_by_source"]
