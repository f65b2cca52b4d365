"""Span guessing's LLM modes are prediction-powered (attackers/span_guess/llm_sample.py, issue 69
item 1): every span guessed without the LLM, the LLM asked on a seeded sample of documents until
the interval of recovered spans / spans reaches the target, ``target=None`` asks it on every
document (exact). Scripted LLM (logic, ~10 s) and the embedded 0.5B (slow, 10.8 s)."""

from __future__ import annotations

import pytest

from attackers.span_guess import SpanGuessAttack
from attackers.span_guess.llm_sample import BASELINE
from audit.core.data import Corpus, Document, Scenario, Span, sanitize_corpus
from audit.models.llm import ScriptedLLM

CITIES = ["Ankara", "Ankara", "Izmir", "Bursa", "Konya", "Ankara", "Adana", "Izmir"]


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    return tmp_path


def _release(n_docs: int = 60):
    """``n_docs`` documents of 1-3 replaced cities (unequal sizes); the LLM guesses a span's city
    right when the sentence says "east" (about half), the baseline recovers the frequent ones."""
    docs, spans = [], {}
    for i in range(n_docs):
        parts, marks = [], []
        for k in range(1 + i % 3):
            city = CITIES[(i * 3 + k) % len(CITIES)]
            side = "east" if (i * 7 + k) % 5 < 2 else "west"
            start = sum(len(p) + 1 for p in parts) + len(f"He went {side} to ")
            parts.append(f"He went {side} to {city} on day {i}.")
            marks.append(Span(start, start + len(city), label="LOC", replacement="a city"))
        docs.append(Document(f"d{i:02d}", " ".join(parts)))
        spans[f"d{i:02d}"] = marks
    originals = Corpus(docs)
    return Scenario(originals=originals), sanitize_corpus(originals, spans, name="r")


def _llm() -> ScriptedLLM:
    """Guesses right after "east", wrong after "west"."""
    def answer(req):
        text = req.messages[-1][1]
        before = text.split("[[a city]]")[0]
        if before.rstrip().endswith("east to"):
            day = text.split("[[a city]]")[1].split("on day ")[1].split(".")[0]
            k = before.count("He went") - 1
            return f'["{CITIES[(int(day) * 3 + k) % len(CITIES)]}"]'
        return '["Paris"]'

    return ScriptedLLM(answer)


def _run(target, seed=0, n_docs=60):
    scenario, release = _release(n_docs)
    llm = _llm()
    attack = SpanGuessAttack(llm=llm, guesses=1, frequent_lemmas=0, progress=False, target=target, seed=seed,
                             knowledge="context", ner=False)
    (result,) = attack.fit(scenario).evaluate(scenario, release)
    return result, llm


def test_the_llm_is_asked_on_a_seeded_sample_of_documents_and_the_figure_says_how_it_was_made(home):
    exact, llm_all = _run(None)
    assert exact.details["made"] == "every document judged (60), exact, about this release"
    assert exact.ci == (exact.value, exact.value) and len(llm_all.calls) == exact.details["spans_total"] == 120
    assert exact.details["value_from"] == "sum:recovered/attacked" and 0.25 < exact.value < 0.6
    got, llm = _run(0.1)
    est = got.details["estimate"]
    assert est["judged"] < 60 and est["scored"] == 60 and got.n == est["judged"]
    assert got.details["made"] == (f"prediction-powered, {est['judged']} judged, 60 scored, ±{est['half_width']:.3f}, "
                                   "about this release")
    # the LLM was asked only about the spans of the judged documents, which are the findings
    assert len(llm.calls) == got.details["trials"] == sum(len(d.facts["spans"]) for d in got.documents)
    assert len(got.documents) == est["judged"] and "value_from" not in got.details
    # every span scored cheaply: with no background, by the context-free baseline
    assert got.details["cheap_recovered"]["of"] == 120 and got.details["predictor"] == BASELINE
    # a valid interval: the exact figure lies in it
    assert got.ci[0] <= exact.value <= got.ci[1]
    again, _ = _run(0.1)
    assert again.to_dict() == got.to_dict()
    other, _ = _run(0.1, seed=1)
    assert [d.id for d in other.documents] != [d.id for d in got.documents]


@pytest.mark.slow
def test_real_llm_span_guessing_is_prediction_powered(small_llm, home):
    # 12 one-span documents, the 0.5B guessing from the context; target ±0.5: the first look
    # (10 documents) reaches it, so 10 of 12 documents are asked. 10.8 s on 2 cores (heavy lock, load 1.8).
    texts = ["The applicant was born in Paris, the capital of France, near the Louvre.",
             "She moved to Berlin, the German capital, and worked near the Brandenburg Gate.",
             "He studied in Rome, the Italian capital, close to the Colosseum."] * 4
    docs = [Document(f"d{i:02d}", t.replace("applicant", f"applicant {i}")) for i, t in enumerate(texts)]
    spans = {}
    for d in docs:
        city = next(c for c in ("Paris", "Berlin", "Rome") if c in d.text)
        spans[d.id] = [Span(d.text.index(city), d.text.index(city) + len(city), label="LOC",
                            replacement="a European capital")]
    originals = Corpus(docs)
    release = sanitize_corpus(originals, spans, name="r")
    scenario = Scenario(originals=originals)
    attack = SpanGuessAttack(llm=small_llm, guesses=3, frequent_lemmas=0, context_tokens=120, target=0.5,
                             progress=False, knowledge="context", ner=False)
    (result,) = attack.fit(scenario).evaluate(scenario, release)
    est = result.details["estimate"]
    assert (est["judged"], est["scored"]) == (10, 12) and result.details["trials"] == 10
    assert "10 judged, 12 scored" in result.details["made"] and result.details["made"].endswith("about this release")
    assert result.ci[0] <= result.value <= result.ci[1] and est["half_width"] <= 0.5
    assert all(1 <= len(s["guesses"]) <= 3 for d in result.documents for s in d.facts["spans"])
