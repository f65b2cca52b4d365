"""Span guessing's candidate tables (issue 57): each person's candidates worked out once, every span
scored on them by array arithmetic, with the per-mention loop's results; spaCy's parse of the
background kept on disk (reused, parsed again where the background changed, off with the cache)."""

from __future__ import annotations

import pytest

from attackers.span_guess import SpanGuessAttack
from attackers.span_guess.background import Background, Context
from audit.core.data import Corpus, Document, Scenario
from anonaudit.demo.population import generate
from audit.models.nlp import Spacy


@pytest.fixture(scope="module")
def nlp():
    return Spacy(disable=("parser", "lemmatizer"))


@pytest.fixture(scope="module")
def demo():
    return generate(n=12, seed=3)


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _spans(release):
    """Every labelled span of the release: (document text, start, end, label, replacement shown)."""
    return [(d.text, s.start, s.end, s.label, d.text[s.start:s.end]) for d in release for s in d.spans]


def _same(fast, slow) -> bool:
    """The same candidates, shown the same way, in the same order, with the same tier and the same
    score to the last bit."""
    return fast == slow and all(type(a) is type(b) for x, y in zip(fast, slow) for a, b in zip(x, y))


def test_tables_score_every_span_as_the_mention_loop_does(nlp, demo, home):
    tables = Background(demo.background, nlp)
    loop = Background(demo.background, nlp, scoring="mention")
    spans = _spans(demo.releases["labels"]) + _spans(demo.releases["suppressed"])
    assert len(spans) > 200
    compared = 0
    for text, start, end, label, shown in spans:
        ctx = Context.of(text, start, end)
        for person, _ in tables.rank_people(text, 3):
            fast = tables.candidates(person, label, ctx, exclude=[shown])
            slow = loop.candidates(person, label, ctx, exclude=[shown])
            assert _same(fast, slow)
            assert tables.person_only(person, label, [shown]) == loop.person_only(person, label, [shown])
            got, want = tables.distribution(person, label, ctx, [shown]), loop.distribution(person, label, ctx, [shown])
            assert got == want  # the same probabilities, bit for bit
            compared += bool(fast)
    assert compared > 300  # most spans have candidates: the comparison is not empty


def test_a_span_with_no_context_no_candidate_type_or_no_background(nlp, home):
    bg = Background(Corpus([Document("a", "Anna Berg moved to Oslo on 3 May 2001. Anna Berg works for Statoil.",
                                     subject="p"), Document("b", "", subject="q")]), nlp)
    loop = Background(bg.corpus, nlp, scoring="mention")
    for ctx in (Context((), ()), Context(("moved", "to"), ("on",)), Context(("unknown", "words"), ("here",))):
        for label in ("LOC", "PERSON", "DATETIME", "CODE", "WEIRD", ""):
            for person in ("p", "q", "nobody"):
                assert _same(bg.candidates(person, label, ctx), loop.candidates(person, label, ctx))
                assert bg.person_only(person, label) == loop.person_only(person, label)
    assert bg.candidates("p", "CODE", Context((), ())) == []  # no code in the text
    # the replacement shown in the span is never a candidate, in either path
    assert "Oslo" not in [c for c, *_ in bg.candidates("p", "LOC", Context(("to",), ()), exclude=["oslo"])]


def test_the_attack_guesses_the_same_on_tables_and_mention_by_mention(demo, home):
    scenario = Scenario(originals=demo.originals, background=demo.background,
                        releases=tuple(demo.releases.values()))
    release = demo.releases["labels"]
    fast = SpanGuessAttack(guesses=5, dense=False, progress=False, frequent_lemmas=0).fit(scenario)
    (a,) = fast.evaluate(scenario, release)
    slow = SpanGuessAttack(guesses=5, dense=False, progress=False, frequent_lemmas=0).fit(scenario)
    slow._background = Background(demo.background, fast.background(scenario).nlp, scoring="mention")
    slow._background_key = demo.background.fingerprint()
    (b,) = slow.evaluate(scenario, release)
    assert a.n == b.n and a.value == b.value and a.ci == b.ci and a.details["recovered_by_source"] == \
        b.details["recovered_by_source"]
    for x, y in zip(a.documents, b.documents, strict=True):
        assert [s["guesses_by_source"] for s in x.facts["spans"]] == [s["guesses_by_source"] for s in y.facts["spans"]]
    assert a.details["recovered_by_source"]["background"]["recovered"] > 0


def test_the_parse_is_kept_on_disk_reused_and_parsed_again_where_the_background_changed(nlp, demo, home):
    people = list(dict.fromkeys(d.subject for d in demo.background))
    first = Background(demo.background, nlp)
    first.prepare(people)
    passages = first.parse_stats["parsed"]
    assert passages > 0 and first.parse_stats["cached"] == 0
    db = home / "parses" / "parses.sqlite"
    assert db.is_file() and not db.stat().st_mode & 0o077  # derived from the documents: owner only
    # a second run (a new background object, a new process alike) parses nothing and finds the same
    again = Background(demo.background, nlp)
    again.prepare(people)
    assert again.parse_stats == {"cached": passages, "parsed": 0}
    assert all(again.mentions(p) == first.mentions(p) for p in people)
    # one person's background changes: only that passage is parsed again, and its new name is a candidate
    changed = [Document(d.id, d.text + "\n\nShe later moved to Reykjavik." if i == 0 else d.text, subject=d.subject)
               for i, d in enumerate(demo.background)]
    third = Background(Corpus(changed, name="bg"), nlp)
    third.prepare(people)
    assert third.parse_stats == {"cached": passages, "parsed": 1}
    ctx = Context(("moved", "to"), ())
    assert "Reykjavik" in [c for c, *_ in third.candidates(changed[0].subject, "LOC", ctx)]
    assert "Reykjavik" not in [c for c, *_ in first.candidates(changed[0].subject, "LOC", ctx)]
    # the attack keeps its background while the scenario's is the same, and builds a new one when it changes
    attack = SpanGuessAttack(dense=False, progress=False)
    kept = attack.background(Scenario(originals=demo.originals, background=demo.background))
    assert attack.background(Scenario(originals=demo.originals, background=demo.background)) is kept
    assert attack.background(Scenario(originals=demo.originals, background=Corpus(changed, name="bg"))) is not kept
    # caches off: nothing read or written
    off = Background(demo.background, nlp, cache=False)
    off.prepare(people[:2])
    assert off.parse_stats["cached"] == 0 and off.parse_stats["parsed"] > 0


def test_same_guesses_cold_and_warm(demo, home):
    scenario = Scenario(originals=demo.originals, background=demo.background, releases=(demo.releases["labels"],))
    runs = []
    for _ in range(2):  # the first fills the parse cache, the second reads it
        attack = SpanGuessAttack(guesses=3, dense=False, progress=False, frequent_lemmas=0, sample=60, seed=4)
        (res,) = attack.fit(scenario).evaluate(scenario, demo.releases["labels"])
        runs.append((res.value, [s["guesses"] for d in res.documents for s in d.facts["spans"]],
                     attack.background(scenario).parse_stats))
    assert runs[0][:2] == runs[1][:2]
    assert runs[0][2]["parsed"] > 0 and runs[1][2] == {"cached": runs[0][2]["parsed"], "parsed": 0}


def test_bm25_by_term_scores_as_rank_bm25_does_bit_for_bit(demo):
    """Finding the people: each distinct term's weights over the people worked out once per query
    give ``BM25Okapi.get_scores``'s scores to the last bit (repeated words, words no person's
    background holds, and words most backgrounds hold, whose IDF rank_bm25 floors)."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    from attackers.span_guess.bm25 import TermBM25
    from audit.core.text import word_tokens

    people = [word_tokens(d.text) for d in demo.background]
    fast, slow = TermBM25(people), BM25Okapi(people)
    queries = [word_tokens(d.text) for d in demo.releases["labels"]] + [["the", "the", "zzz-unknown", "of"], []]
    assert any(slow.idf[w] == slow.epsilon * slow.average_idf for w in slow.idf)  # a floored IDF is queried
    for query in queries:
        got, want = fast.get_scores(query), slow.get_scores(query)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert Background(demo.background)._bm25.get_scores(queries[0]).any()  # the attack's people use it
    assert np.count_nonzero(fast.get_scores(["zzz-unknown"])) == 0
