"""LLM span guessing: MATCH rules, list parsing, prompt building, the attack end to end."""

from __future__ import annotations

import json

import pytest

from attackers.span_guess import (Matcher, SpanGuessAttack, SpanGuesser, match, match_reason,
                                  parse_guesses)
from audit.core.data import Corpus, Document, Release, Scenario, Span, sanitize_corpus
from audit.models.llm import ScriptedLLM
from audit.core.registry import registry

# --------------------------------------------------------------------------- MATCH

MATCH_CASES = [
    # (original, guess, label, expected rule or None)
    # the paper's cases
    ("Turkey", "Turkish", "LOC", "ngram"),  # 4-gram overlap for named entities
    ("Turkey", "Turkish", None, "ngram"),  # title-cased original counts as a named entity
    ("European Court of Human Rights", "ECHR", "ORG", "acronym"),
    ("ECHR", "the European Court of Human Rights", "ORG", "acronym"),
    ("3 August 2003", "August 2003", "DATETIME", None),  # partial date does not recover a full one
    ("3 August 2003", "August 2003", None, None),  # detected as a date without a label
    ("3 August 2003", "August 3, 2003", "DATETIME", "date"),
    ("3 August 2003", "03 Aug 2003", "DATETIME", "date"),
    ("3 August 2003", "3 August 2004", "DATETIME", None),
    ("3 August 2003", "3 or 4 August 2003", "DATETIME", None),  # hedging with another number
    ("seven years", "seven years' imprisonment", "DATETIME", "date"),  # a more specific guess
    ("Warsaw", "a European capital", "LOC", None),  # unrelated generalisation
    ("Warsaw", "Krakow", "LOC", None),
    ("the", "the", None, None),  # stop words only: nothing to recover
    ("of the", "of the", None, None),
    ("Catholic", "monotheist", "MISC", None),
    # lemma overlap, substring, exact
    ("Mr Galip Yalman", "Galip Yalman", "PERSON", "lemma"),
    ("three dogs", "a dog", None, "lemma"),
    ("Yalman", "Yalmanoglu", "PERSON", "substring"),
    ("36110/97", "36110/97", "CODE", "exact"),
    # own edge cases
    ("36110/97", "36111/97", "CODE", None),  # no 4-gram rule for codes
    ("Turkey", "Turkish", "QUANTITY", None),  # nor for non-entities
    ("Ankara", "", "LOC", None),  # empty guess
    ("Ankara", "...", "LOC", None),  # punctuation-only guess
    ("ANKARA", "ankara", "LOC", "exact"),  # case-insensitive
    ("Bob", "Bobby", "PERSON", None),  # lemmas of 3 characters do not count as substrings
]


@pytest.mark.parametrize(("original", "guess", "label", "rule"), MATCH_CASES)
def test_match_rules(original, guess, label, rule):
    assert match_reason(original, guess, label) == rule
    assert match(original, guess, label) is (rule is not None)


def test_frequent_lemmas_are_ignored_but_exact_guesses_still_count():
    m = Matcher(frequent=frozenset({"court", "state"}))
    assert m.match_reason("Ankara State Security Court", "Istanbul State Court", "ORG") is None
    assert Matcher().match_reason("Ankara State Security Court", "Istanbul State Court", "ORG") == "lemma"
    assert m.match_reason("the Court", "the court", "ORG") == "exact"
    # dates keep every lemma, frequent or not
    d = Matcher(frequent=frozenset({"august", "2003"}))
    assert d.match_reason("3 August 2003", "3 August 2003.", "DATETIME") == "exact"
    assert d.match_reason("3 August 2003", "4 August 2003", "DATETIME") is None


def test_matcher_from_corpus_counts_content_lemmas():
    texts = ["The applicant complained to the court.", "The applicants appealed; the court dismissed it.",
             "The court of appeal heard the applicant in Ankara."]
    m = Matcher.from_corpus(texts, top=2)
    assert m.frequent == {"applicant", "court"}
    assert m.match("the applicant Galip", "the applicant", "PERSON") is False


# --------------------------------------------------------------------------- parsing

PARSE_CASES = [
    ('["Warsaw", "Krakow", "Gdansk"]', ["Warsaw", "Krakow", "Gdansk"]),
    ('Sure, here you go:\n```json\n["Warsaw", "Krakow"]\n```\nHope it helps!', ["Warsaw", "Krakow"]),
    ('{"guesses": ["Warsaw", "Krakow"]}', ["Warsaw", "Krakow"]),
    ('[{"guess": "Warsaw"}, {"guess": "Krakow"}]', ["Warsaw", "Krakow"]),
    ("Here are my guesses:\n1. Warsaw\n2) \"Krakow\"\n3 - Lodz\n\nThese are likely.", ["Warsaw", "Krakow"]),
    ("- Warsaw (the capital)\n* Krakow\n• Gdansk - a port", ["Warsaw", "Krakow", "Gdansk"]),
    ("Guess 1: Warsaw\nGuess 2: Krakow", ["Warsaw", "Krakow"]),
    ("Warsaw, Krakow, Gdansk", ["Warsaw", "Krakow", "Gdansk"]),
    ("Guesses: Warsaw; Krakow; Gdansk.", ["Warsaw", "Krakow", "Gdansk"]),
    ('I think "Warsaw" or “Krakow”.', ["Warsaw", "Krakow"]),
    ("1. **Warsaw**\n2. Warsaw\n3. warsaw\n4. Krakow", ["Warsaw", "Krakow"]),  # markdown, duplicates
    ("Warsaw", ["Warsaw"]),
    ("", []),
]


@pytest.mark.parametrize(("answer", "expected"), PARSE_CASES)
def test_parse_guesses_of_messy_answers(answer, expected):
    assert parse_guesses(answer) == expected


def test_parse_guesses_limits_the_count():
    assert parse_guesses('["a1", "b2", "c3", "d4"]', 2) == ["a1", "b2"]


# --------------------------------------------------------------------------- guesser


def _doc_with_span(prefix: str, replacement: str, suffix: str) -> tuple[str, Span]:
    text = prefix + replacement + suffix
    return text, Span(len(prefix), len(prefix) + len(replacement), replacement=replacement)


def test_guesser_marks_span_and_asks_for_a_fixed_size_json_array():
    llm = ScriptedLLM(lambda req: '["Warsaw", "Krakow", "Gdansk"]')
    llm.supports_schema = True
    text, span = _doc_with_span("She moved to ", "a European capital", " in 2001.")
    guesses = SpanGuesser(llm, guesses=3).guess(text, span)
    assert guesses == ["Warsaw", "Krakow", "Gdansk"]
    (req,) = llm.calls
    last = req.messages[-1][1]
    assert "She moved to [[a European capital]] in 2001." in last
    assert req.schema == {"type": "array", "items": {"type": "string", "minLength": 1},
                          "minItems": 3, "maxItems": 3}
    assert "3" in req.messages[0][1] and "exact date" in req.messages[0][1]
    # the one-shot example answers with exactly p guesses
    assert len(json.loads(req.messages[2][1])) == 3


def test_guesser_without_schema_support_sends_no_schema():
    llm = ScriptedLLM(lambda req: "1. Warsaw")
    text, span = _doc_with_span("In ", "a city", ".")
    assert SpanGuesser(llm).guess(text, span) == ["Warsaw"]
    assert llm.calls[0].json_schema is None


def test_guesser_trims_long_documents_around_the_span():
    llm = ScriptedLLM(lambda req: "[]")
    llm.context_size = 1200
    words = [f"word{i}" for i in range(4000)]
    prefix = " ".join(words[:2000]) + " "
    text, span = _doc_with_span(prefix, "a European capital", " " + " ".join(words[2000:]))
    guesser = SpanGuesser(llm)
    budget = guesser.context_budget()
    context = guesser.context(text, span)
    assert "[[a European capital]]" in context
    assert llm.count_tokens(context) <= budget
    assert context.startswith("…") and context.endswith("…")
    # roughly centred: as many words kept before the span as after
    before, after = context.split("[[a European capital]]")
    assert abs(len(before) - len(after)) < 0.2 * len(context)
    # a user cap on context applies too
    assert llm.count_tokens(SpanGuesser(llm, context_tokens=100).context(text, span)) <= 100


def test_guesser_keeps_whole_context_near_the_document_start():
    llm = ScriptedLLM(lambda req: "[]")
    llm.context_size = 1200
    text, span = _doc_with_span("", "PERSON_1", " " + " ".join(f"w{i}" for i in range(5000)))
    context = SpanGuesser(llm).context(text, span)
    assert context.startswith("[[PERSON_1]]") and context.endswith("…")


# --------------------------------------------------------------------------- attack


def _scenario() -> tuple[Scenario, Release]:
    texts = {
        "d1": ("Mr Galip Yalman lives in Warsaw. He was arrested on 3 August 2003 in Ankara.",
               [("Galip Yalman", "PERSON", "PERSON_1"), ("Warsaw", "LOC", "a European capital"),
                ("3 August 2003", "DATETIME", "August 2003"), ("Ankara", "LOC", "a city")]),
        "d2": ("Ms Anna Nowak works for the European Court of Human Rights in Strasbourg.",
               [("Anna Nowak", "PERSON", "PERSON_2"), ("European Court of Human Rights", "ORG", "an international court"),
                ("Strasbourg", "LOC", "a French city")]),
    }
    docs, spans = [], {}
    for doc_id, (text, marks) in texts.items():
        docs.append(Document(doc_id, text, subject=doc_id))
        spans[doc_id] = [Span(text.index(o), text.index(o) + len(o), label=lab, replacement=r) for o, lab, r in marks]
    originals = Corpus(docs, name="orig")
    release = sanitize_corpus(originals, spans, name="intact")
    return Scenario(originals=originals, releases=(release,)), release


# What the scripted model answers for each replacement shown in [[...]].
ANSWERS = {
    "PERSON_1": '["Ahmet Yilmaz", "Mehmet Kaya"]',
    "a European capital": "1. Warsaw\n2. Prague",
    "August 2003": '["August 2003", "1 August 2003"]',  # no exact date: not recovered
    "a city": '["Istanbul", "Izmir"]',
    "PERSON_2": '["Anna Kowalska"]',  # shares "Anna": recovered by lemma
    "an international court": '["ECHR", "ICJ"]',
    "a French city": '["Paris", "Lyon"]',
}


def _scripted() -> ScriptedLLM:
    def answer(req):
        last = req.messages[-1][1]
        target = last.rsplit("Guesses for [[", 1)[1].split("]]")[0]
        return ANSWERS[target]

    return ScriptedLLM(answer)


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    return tmp_path


def test_attack_end_to_end_with_scripted_llm(home):
    scenario, release = _scenario()
    llm = _scripted()
    attack = SpanGuessAttack(llm=llm, guesses=2, frequent_lemmas=0, progress=False).fit(scenario)
    (result,) = attack.evaluate(scenario, release)
    assert result.name == "span_guess" and result.kind == "attack" and result.release == "intact"
    # n counts documents (the independent units); the 7 spans in them are the trials.
    assert result.n == 2 and result.details["trials"] == 7 and result.details["successes"] == 3
    assert result.details["unit"] == "documents"
    assert result.value == pytest.approx(3 / 7)
    # the LLM guessed on both documents (the first look takes 10): the figure is exact about this
    # release, its interval the point (prediction-powered, audit.core.ppi's ratio form)
    assert result.ci == pytest.approx((3 / 7, 3 / 7)) and result.details["value_from"] == "sum:recovered/attacked"
    assert result.details["made"] == "every document judged (2), exact, about this release"
    per = result.details["per_label"]
    assert (per["PERSON"]["spans"], per["PERSON"]["successes"]) == (2, 1)
    assert (per["LOC"]["spans"], per["LOC"]["n"], per["LOC"]["successes"]) == (3, 2, 1)
    assert (per["ORG"]["successes"], per["DATETIME"]["successes"]) == (1, 0)
    assert result.details["rules"] == {"lemma": 1, "exact": 1, "acronym": 1}
    d1 = next(d for d in result.documents if d.id == "d1")
    warsaw = next(s for s in d1.facts["spans"] if s["original"] == "Warsaw")
    assert warsaw["replacement"] == "a European capital" and warsaw["guesses"] == ["Warsaw", "Prague"]
    assert warsaw["rule"] == "exact" and warsaw["matched_guess"] == "Warsaw"
    # highlights point at the replacement in the sanitized text
    text = release.corpus["d1"].text
    (hl,) = d1.highlights
    assert text[hl.start:hl.end] == "a European capital" and hl.kind == "span"
    # per document: a success when a guess recovered one of its spans; the spans (originals, guesses) private
    assert d1.success is True and (d1.facts["attacked"], d1.facts["recovered"]) == (4, 1)
    assert d1.summary == "1 of 4 replaced spans recovered by the guesses" and d1.private == {"spans"}
    # every span was asked once; re-evaluation of the same release asks the same requests
    assert len(llm.calls) == 7


def test_attack_baseline_uses_most_frequent_originals_of_the_label(home):
    # Ten documents, all about "Ankara"; a context-free guess of "Ankara" recovers every span.
    docs = [Document(f"d{i}", f"He lives in Ankara, case {i}.") for i in range(10)]
    originals = Corpus(docs)
    spans = {d.id: [Span(12, 18, label="LOC", replacement="a city")] for d in docs}
    release = sanitize_corpus(originals, spans, name="r")
    scenario = Scenario(originals=originals, releases=(release,))
    attack = SpanGuessAttack(llm=ScriptedLLM(lambda r: '["Ankara"]'), guesses=1, frequent_lemmas=0, progress=False)
    (result,) = attack.evaluate(scenario, release)
    assert result.value == 1.0 and result.baseline == 1.0 and result.beats_baseline is False
    # unique originals: the leave-one-out baseline cannot guess them
    cities = ["Oslo", "Rome", "Lima", "Kyiv", "Bern", "Riga", "Baku", "Doha", "Minsk", "Sofia"]
    docs = [Document(f"d{i}", f"He lives in {c}.") for i, c in enumerate(cities)]
    originals = Corpus(docs)
    spans = {d.id: [Span(12, len(d.text) - 1, label="LOC", replacement="a city")] for d in docs}
    release = sanitize_corpus(originals, spans, name="r")
    (result,) = attack.evaluate(Scenario(originals=originals), release)
    assert result.baseline == 0.0
    assert result.value == 0.0 and [d.success for d in result.documents] == [False] * 10
    assert result.documents[0].summary == "Its replaced span was not recovered by the guesses"


def test_attack_sample_and_labels_are_seeded_subsets(home):
    scenario, release = _scenario()
    a = SpanGuessAttack(llm=_scripted(), sample=3, seed=1, frequent_lemmas=0, progress=False)
    b = SpanGuessAttack(llm=_scripted(), sample=3, seed=1, frequent_lemmas=0, progress=False)
    ra, rb = a.evaluate(scenario, release)[0], b.evaluate(scenario, release)[0]
    spans = lambda r: [(d.id, s["original"]) for d in r.documents for s in d.facts["spans"]]  # noqa: E731
    assert ra.details["trials"] == 3 and len(spans(ra)) == 3 and spans(ra) == spans(rb)
    assert ra.details["spans_total"] == 7
    only = SpanGuessAttack(llm=_scripted(), labels=["loc"], frequent_lemmas=0, progress=False)
    r = only.evaluate(scenario, release)[0]
    assert r.details["trials"] == 3 and set(r.details["per_label"]) == {"LOC"}
    assert r.details["skipped"]["label not selected"] == 4


def test_attack_aligns_releases_without_recorded_spans(home):
    original = Document("d", "She moved to Warsaw in 2001 with Anna.")
    released = Document("d", "She moved to a European capital in 2001 with Anna.")
    scenario = Scenario(originals=Corpus([original]))
    release = Release("free-text", Corpus([released]))
    attack = SpanGuessAttack(llm=ScriptedLLM(lambda r: '["Warsaw"]'), frequent_lemmas=0, ner=False, progress=False)
    (result,) = attack.evaluate(scenario, release)
    assert result.n == 1 and result.value == 1.0
    assert result.documents[0].facts["spans"][0]["label"] == "UNKNOWN" and result.documents[0].success is True


def test_attack_is_registered_and_has_params():
    cls = registry.get("attack", "span-guess")
    assert cls is SpanGuessAttack
    params = SpanGuessAttack(llm=ScriptedLLM(["x"]), labels=("LOC",)).get_params()
    assert params["llm"] == "scripted" and params["labels"] == ["LOC"] and params["guesses"] == 5


def test_cli_writes_results(home, monkeypatch):
    from click.testing import CliRunner

    from anonaudit.cli import main

    scenario, release = _scenario()
    orig_path = home / "orig.jsonl"
    orig_path.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in scenario.originals))
    span_file = {d.id: [[s.orig_start, s.orig_end, s.replacement] for s in d.spans] for d in release}
    (home / "intact.json").write_text(json.dumps(span_file))
    llm = _scripted()
    monkeypatch.setattr("audit.models.specs.load_llm", lambda spec=None, **kw: llm)
    out = home / "results.json"
    res = CliRunner().invoke(main, ["attack", "span-guess", "--originals", str(orig_path), "--release",
                                    f"intact={home / 'intact.json'}", "--guesses", "2", "--sample", "5",
                                    "--frequent-lemmas", "0", "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    (r,) = data["results"]
    assert r["name"] == "span_guess" and r["release"] == "intact" and r["details"]["trials"] == 5
    assert "span_guess" in res.output


# --------------------------------------------------------------------------- real model


@pytest.mark.slow
def test_real_llm_guesses_an_obvious_span(small_llm, home):
    text, span = _doc_with_span(
        "The applicant was born in Paris, the capital of France. Every morning she walks along the Seine from "
        "the Eiffel Tower to the Louvre, the famous museums of ", "a European capital", ".")
    guesses = SpanGuesser(small_llm, guesses=3, context_tokens=200).guess(text, span)
    assert 1 <= len(guesses) <= 3 and all(isinstance(g, str) and g for g in guesses)
    assert any(match("Paris", g, "LOC") for g in guesses), guesses


@pytest.mark.slow
def test_real_llm_attack_end_to_end(small_llm, home):
    scenario, release = _scenario()
    attack = SpanGuessAttack(llm=small_llm, guesses=3, sample=3, frequent_lemmas=0, context_tokens=120,
                             progress=False)
    (result,) = attack.evaluate(scenario, release)
    # three spans attacked, clustered in their documents: n counts the documents
    assert result.details["trials"] == 3 and result.n == len({d.id for d in result.documents if d.facts["spans"]})
    spans = [s for d in result.documents for s in d.facts["spans"]]
    assert len(spans) == 3 and all(1 <= len(s["guesses"]) <= 3 for s in spans)
    assert all((s["rule"] is None) is (not s["recovered"]) for s in spans)
    # a second run is answered from the cache: same guesses
    (again,) = attack.evaluate(scenario, release)
    assert [s["guesses"] for d in again.documents for s in d.facts["spans"]] == [s["guesses"] for s in spans]


def test_a_guesser_below_its_context_free_baseline_is_flagged_as_weak(home):
    """Ten spans a context-free guess recovers, and a guesser that recovers none: the result
    carries a warning (the gate calls it inconclusive), not a quiet "no risk"."""
    docs = [Document(f"d{i}", f"He lives in Ankara, case {i}.") for i in range(10)]
    originals = Corpus(docs)
    spans = {d.id: [Span(12, 18, label="LOC", replacement="a city")] for d in docs}
    release = sanitize_corpus(originals, spans, name="r")
    weak = SpanGuessAttack(llm=ScriptedLLM(lambda r: '["Paris"]'), guesses=1, frequent_lemmas=0, progress=False)
    (result,) = weak.evaluate(Scenario(originals=originals), release)
    assert result.value == 0.0 and result.baseline == 1.0
    assert "weaker than its own context-free baseline" in result.details["warning"]
    strong = SpanGuessAttack(llm=ScriptedLLM(lambda r: '["Ankara"]'), guesses=1, frequent_lemmas=0, progress=False)
    (result,) = strong.evaluate(Scenario(originals=originals), release)
    assert "warning" not in result.details and result.n == 10 and result.details["trials"] == 10
