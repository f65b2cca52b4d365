"""The claim linker's leakage as a prediction-powered figure: every linked document scored by the
cheap predictor, the judge asked on a seeded sample only, against the all-judged figure. Scripted
judge and bag-of-words embedder (model-free; ~15 s on 2 cores, most of it spaCy on 160 short
documents); the real models' test is at the end (slow)."""

from __future__ import annotations

import random

import pytest

from attackers.claim_linker import ClaimLinkerAttack
from attackers.claim_linker.claims import SentenceSplitter
from attackers.claim_linker.powered import LeakagePredictor, claim_features
from audit.core.data import Corpus, Document, Release, Scenario
from audit.core.ppi import PredictorUnavailable
from tests.test_claim_linker import BagOfWords, YesNoLLM

JOBS = ["baker", "pilot", "nurse", "welder", "teacher", "farmer", "painter", "chemist", "sailor", "judge"]
CITIES = ["Oslo", "Bergen", "Tromsø", "Bodø", "Molde", "Skien", "Hamar", "Larvik", "Narvik", "Alta"]
PETS = ["goat", "parrot", "donkey", "tortoise", "ferret", "horse"]
TOOLS = ["violin", "accordion", "trumpet", "cello", "banjo", "harp"]


def _population(n: int = 80, seed: int = 3):
    """``n`` people of five facts each, and a release that keeps each person's facts with a
    probability of its own (so leakage varies between documents) and masks every name."""
    rng = random.Random(seed)
    originals, released = [], []
    for k in range(n):
        name = f"Person{k} Surname{k * 7 % 97}"
        facts = [f"{name} works as a {rng.choice(JOBS)} in {rng.choice(CITIES)}.",
                 f"She was born in {rng.randint(1930, 2000)} in {rng.choice(CITIES)}.",
                 f"She owns a {rng.choice(PETS)} called Pet{rng.randint(1, 999)}.",
                 f"She plays the {rng.choice(TOOLS)} every {rng.choice(['Monday', 'Friday', 'Sunday'])}.",
                 f"She moved to {rng.choice(CITIES)} in {rng.randint(2001, 2020)} with {rng.randint(2, 9)} boxes."]
        keep = rng.random()
        kept = [f.replace(name, "[PERSON]") if rng.random() < keep else
                f"[PERSON] did something in [DATE] at [LOCATION]." for f in facts]
        originals.append(Document(f"p{k}", " ".join(facts), subject=f"p{k}"))
        released.append(Document(f"p{k}", " ".join(kept), subject=f"p{k}"))
    return Scenario(originals=Corpus(originals, name="originals"),
                    releases=(Release("masked", Corpus(released, name="masked")),))


@pytest.fixture(scope="module")
def scenario():
    return _population()


@pytest.fixture(scope="module")
def splitter():
    from audit.models.nlp import Spacy

    return SentenceSplitter(Spacy(disable=("ner",)))


def _semantic(scenario, splitter, **kw):
    params = dict(llm=YesNoLLM(), embedder=BagOfWords(), paraphrase=False, judge="yesno", judge_check=8,
                  identifying=False, seed=0)
    params.update(kw)
    attack = ClaimLinkerAttack(**params)
    attack._splitter = splitter
    release = scenario.releases[0]
    return attack.fit(scenario).evaluate(scenario, release)[1]


def test_the_leakage_is_prediction_powered_and_agrees_with_the_all_judged_figure(scenario, splitter):
    ppi = _semantic(scenario, splitter, score_target=0.05)
    full = _semantic(scenario, splitter, score_target=None)
    plain = _semantic(scenario, splitter, score_target=0.05, score_predictor="none")
    e, f, p = (r.details["estimate"] for r in (ppi, full, plain))
    # every linked document with claims is scored; the judge answered on a seeded sample only
    assert e["scored"] == f["scored"] == f["judged"] >= 60 and e["judged"] < e["scored"]
    assert ppi.n == e["judged"] == len(ppi.documents) and ppi.details["sampled"]["reached"] is True
    assert ppi.details["llm_requests"] == ppi.details["trials"]  # one question a claim (repeats: the rating judge's)
    assert ppi.details["made"].startswith(f"prediction-powered, {e['judged']} judged, {e['scored']} scored, ±")
    assert ppi.details["made"].endswith("about this release") and ppi.details["made"] in ppi.details["note"]
    # --budget full: every document judged, the exact figure, which the estimate's interval holds
    assert f["half_width"] == 0 and "exact" in full.details["made"]
    assert ppi.ci[0] <= full.value <= ppi.ci[1]
    # the predictor tracks the judge (the scripted judge reads words; so do the features), and so
    # it saves judged documents against the plain sample at the same target
    assert e["agreement"] > 0.6 and e["lambda"] > 0 and ppi.details["predictor_fallback"] is None
    assert p["predictor"] == "none" and "score_predictor=none" in plain.details["predictor_fallback"]
    assert p["judged"] > e["judged"]  # here every one of the 80 (exact), against the predictor's few
    # the same seed gives the same sample, fit and figure
    again = _semantic(scenario, splitter, score_target=0.05)
    assert again.value == ppi.value and again.ci == ppi.ci and again.details["estimate"] == e


def test_no_judged_document_is_scored_by_a_model_that_saw_it():
    # eight documents of one claim each, five folds in the seeded order (d0 and d5 share fold 0):
    # flipping d0's own label leaves d0's score alone (its fold's model never saw it), while a
    # document of another fold, scored by models that did see it, moves
    feats = claim_features([("a b c", "a b c")] * 4 + [("x", "a b c")] * 4, [[]] * 8, [0.9] * 4 + [0.1] * 4)
    pred = LeakagePredictor(feats, tuple(f"d{k}" for k in range(8)), tuple(f"d{k}" for k in range(8)))
    values = {f"d{k}": [1.0 if k < 4 else 0.0] for k in range(8)}
    base, flipped = pred(values), pred({**values, "d0": [0.0]})
    assert base["d0"] == flipped["d0"] and base["d1"] != flipped["d1"]
    with pytest.raises(PredictorUnavailable, match="only 2 documents judged"):
        pred({"d0": [1.0, 0.0], "d1": [1.0, 0.0]})


@pytest.mark.slow
def test_the_real_judge_gives_a_prediction_powered_figure_with_its_counts(quality_llm, minilm):
    """The embedded 1.5B judge (the 0.5B says No to nearly everything: no predictor can be fitted
    on one class) and MiniLM on 12 people of the demo: the first look judges 10 documents (at most
    2 claims each), the predictor scores all 12, and the figure says so (~40 LLM questions, ~1 min).
    The contrastive judge: the default details judge finds no claim of the labels release stated
    here, and a predictor cannot be fitted on one class (the fallback it then takes is tested in
    tests/test_ppi.py)."""
    from anonaudit.demo.population import generate

    demo = generate(n=12, seed=0)
    release = demo.releases["labels"]
    scenario = Scenario(originals=demo.originals, releases=(release,))
    attack = ClaimLinkerAttack(llm=quality_llm, embedder=minilm, paraphrase=False, judge_check=4, claim_sample=2,
                               score_target=0.2, judge="contrast", seed=0)
    _, semantic, _ = attack.fit(scenario).evaluate(scenario, release)
    e, d = semantic.details["estimate"], semantic.details
    assert e["fallback"] is None and e["predictor"].startswith("logistic regression")
    assert e["judged"] == semantic.n == 10 and e["scored"] == 12
    assert d["made"] == f"prediction-powered, 10 judged, 12 scored, ±{e['half_width']:.3f}, about this release"
    assert semantic.ci[0] <= semantic.value <= semantic.ci[1] and e["half_width"] <= 0.2
    assert 0.0 <= e["lambda"] <= 1.0 and d["sampled"]["made"] == d["made"]
