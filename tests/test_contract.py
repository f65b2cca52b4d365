"""The plugin contract check (issue 45, item 7): every built-in component passes
``anonaudit.testing.check_component``, and a component that breaks a rule is told which.

Components that need a language model or an embedder get the scripted stand-ins their own
tests use (``llm=ScriptedLLM(...)``, a hashed bag-of-words embedder); TRIR's classifier is
replaced by the fake trained model of tests/test_trir.py, so its evaluation runs for real on a
prediction it is given. Everything else runs as installed, on the contract's six invented
people."""

from __future__ import annotations

import json
import re

import pytest

from anonaudit.testing import ContractError, check_component, roles
from anonaudit.testing import scenario as invented_people
from audit.core.interfaces import Attack, Detector, Sanitizer
from audit.core.registry import registry
from audit.core.results import Finding, Result
from audit.core.stats import risk
from audit.models.llm import ScriptedLLM
from tests.test_claim_linker import BagOfWords
from tests.test_claim_linker import judge as claim_judge
from tests.test_utility import FakeEmbedder, FakeLLM


def _intact_answer(req) -> str:
    """Candidates for a marked span: two vaguer words; the attacker's guesses: two towns."""
    if "candidate" in req.messages[-1][1].lower() or (req.schema or {}).get("type") == "array":
        return json.dumps(["a person", "a place"])
    return json.dumps(["Marrowby", "Tollmere"])


def _rewrites(req) -> str:
    """The delinker's rewriter: every marked phrase becomes a few plain words."""
    marked = re.findall(r"\[\[(.+?)\]\]", req.messages[-1][1])
    return json.dumps({"reasoning": "r", "rewrites": [{"marked": m, "new": "a local thing"} for m in marked]})


def _trir():
    """TRIR whose classifier is the fake trained model of tests/test_trir.py (document i is
    predicted as person i), so the contract runs its evaluation without training."""
    from attackers.trir import TRIRAttack
    from tests.test_trir import fake_trained

    class FakeTrainedTRIR(TRIRAttack):
        def fit(self, scenario):
            if scenario.background is None:
                return super().fit(scenario)  # refuses, as the real one does
            labels = sorted({d.subject for d in scenario.background})
            return fake_trained(self, labels, list(range(len(scenario.releases[0]))))

    FakeTrainedTRIR.__module__ = TRIRAttack.__module__
    return FakeTrainedTRIR


#: Constructor arguments (models as scripted stand-ins, small sizes) per built-in, by role.
PARAMS = {
    ("attack", "claim_linker"): lambda: dict(llm=ScriptedLLM(claim_judge), embedder=BagOfWords(), claims="sentences",
                                             paraphrase=False, repeats=1, judge="rating", judge_check=4),
    ("attack", "span_guess"): lambda: dict(progress=False, dense=False),  # no embedder load: 5 s less
    ("attack", "trir"): lambda: dict(progress=False),
    ("sanitizer", "intact"): lambda: dict(llm=ScriptedLLM(_intact_answer), frequent_lemmas=0, progress=False),
    ("sanitizer", "prompt"): lambda: dict(llm=ScriptedLLM(lambda r: '["Zorbulon Quettle", "Marrowby"]'),
                                          progress=False),
    ("sanitizer", "delinker"): lambda: dict(llm=ScriptedLLM(_rewrites), progress=False, max_rounds=1,
                                            on_failure="keep", collection=invented_people().originals),
    ("metric", "tpi"): lambda: dict(llm=FakeLLM(), embedder=FakeEmbedder()),
    ("metric", "tps"): lambda: dict(llm=FakeLLM(), embedder=FakeEmbedder()),
    ("metric", "similarity"): lambda: dict(llm=FakeLLM(), embedder=FakeEmbedder()),
    ("metric", "precision"): lambda: dict(llm=FakeLLM(), embedder=FakeEmbedder()),
    ("metric", "recall"): lambda: dict(llm=FakeLLM(), embedder=FakeEmbedder()),
    ("metric", "nmi"): lambda: dict(llm=FakeLLM(), embedder=FakeEmbedder(), runs=2, n_init=2),
    ("metric", "tae_tps"): lambda: dict(llm=FakeLLM(), embedder=FakeEmbedder()),
    ("metric", "tae_nmi"): lambda: dict(embedder=FakeEmbedder(), n_clusterings=2, n_tries_per_clustering=2),
}
BUILTINS = [(kind, name) for kind in roles() for name in registry.names(kind)]


@pytest.mark.parametrize("kind,name", BUILTINS, ids=[f"{k}:{n}" for k, n in BUILTINS])
def test_every_builtin_keeps_the_contract(kind, name):
    cls = _trir() if (kind, name) == ("attack", "trir") else registry.get(kind, name)
    report = check_component(cls, params=PARAMS.get((kind, name), dict)())
    assert report.role == kind
    assert {"role", "parameters", "get_params", "typed results", "determinism", "bad input"} <= set(report.rules)


def test_the_builtins_cover_every_role_with_a_plugin():
    assert {k for k, _ in BUILTINS} == set(roles()) and len(BUILTINS) >= 18


class Sloppy(Attack):
    """An attack that breaks most rules at once."""

    name = "Sloppy Attack"
    description = "x"
    remedy = "Fix {nothing}."

    def __init__(self, k=3, *args, hidden: int = 1, **extra):
        self.k = k

    def evaluate(self, scenario, release):
        return []


class Leaky(Attack):
    """Keeps the class rules, but shows the originals it recovered as a public fact, and
    changes its figure from one instance to the next."""

    name = "leaky"
    description = "Guesses each masked name from nowhere, for the test."
    remedy = "Mask more in {exposed} of {total} documents."
    runs = 0
    vary = True
    keyed = False

    def __init__(self, seed: int = 0):
        """seed: unused."""
        self.seed = seed

    def evaluate(self, scenario, release):
        type(self).runs += 1
        docs = [Finding(d.id, True, facts={"recovered": [s.original for s in d.spans],
                                           **({"counts": {1: 2}} if self.keyed else {})},
                        private={"recovered"} if self.keyed else frozenset()) for d in release]
        return [Result.from_risk(self.name, release.name, risk(len(docs) - self.vary * (self.runs % 2), len(docs), 0.1),
                                 documents=docs)]


class Rude(Sanitizer):
    """A sanitizer that fails on an empty corpus with a raw Python error."""

    name = "rude"
    description = "Releases the first document only, for the test."

    def sanitize(self, corpus, *, name=None):
        corpus[0]  # IndexError on an empty corpus
        from audit.core.data import Release

        return Release(name or "rude", corpus)


class Sprawling(Detector):
    """A detector whose spans run past the end of the text."""

    name = "sprawling"
    description = "Marks every text from its start to far beyond its end, for the test."

    def detect(self, texts):
        from audit.core.data import Span

        return [[Span(0, len(t) + 10, "ANY")] for t in texts]


def test_a_component_that_breaks_the_rules_is_told_which():
    with pytest.raises(ContractError) as info:
        check_component(Sloppy)
    text = str(info.value)
    assert "name 'Sloppy Attack' must be a registry name" in text
    assert "description must say in words" in text and "remedy must be a sentence" in text
    assert "*args: every parameter must be named" in text and "*extra" in text
    assert "'k' has no type hint" in text
    with pytest.raises(ContractError) as info:
        check_component(Leaky)
    text = str(info.value)
    assert "determinism: two instances with the same parameters gave different results" in text
    Leaky.vary = False  # the same figure twice: now the public original is what breaks it
    with pytest.raises(ContractError, match=r"shareable: .*recovered show\(s\) the original .* not named private"):
        check_component(Leaky)
    Leaky.keyed = True  # a fact keyed by numbers: JSON gives the keys back as strings
    with pytest.raises(ContractError, match=r"reads back from JSON otherwise than it was written "
                                            r"\(documents\[0\]\.counts: the key 1 is not a string"):
        check_component(Leaky)
    with pytest.raises(ContractError, match=r"bad input: an empty corpus raised IndexError"):
        check_component(Rude)
    with pytest.raises(ContractError, match=r"typed results: text 0: .* is not a labelled Span inside the text"):
        check_component(Sprawling)
    with pytest.raises(ContractError, match="not a component class"):
        check_component(dict)


class Careless(Attack):
    """Reads the background it requires without checking that it was given."""

    name = "careless"
    description = "Counts the background's documents, for the test."
    remedy = "Mask more in {exposed} of {total} documents."
    requires = frozenset({"originals", "background"})

    def evaluate(self, scenario, release):
        n = len(scenario.background)  # TypeError when there is none
        docs = [Finding(d.id, False) for d in release]
        return [Result.from_risk(self.name, release.name, risk(0, len(docs), 1 / n), documents=docs)]


class Brittle(Careless):
    name = "brittle"
    fail = True

    def evaluate(self, scenario, release):
        if type(self).fail:
            raise ValueError("no luck")
        return super().evaluate(scenario, release)


class Chatty(Detector):
    """Finds nothing in each text, but answers no texts with a list of one list."""

    name = "chatty"
    description = "Finds no span anywhere, for the test."
    boom = False

    def detect(self, texts):
        if not texts and self.boom:
            raise KeyError("nothing")
        return [[] for _ in texts] or [[]]


def test_every_role_is_run_twice_and_given_bad_input_the_same_way():
    """The contract's steps shared by every role (two fresh instances, then bad input), each
    failure named as the role's own step."""
    with pytest.raises(ContractError, match=r"bad input: without background \(which it requires\) it raised "
                                            r"TypeError: .*refuse with an AnonauditError naming what is missing"):
        check_component(Careless)
    with pytest.raises(ContractError, match=r"typed results: evaluate on a valid scenario raised ValueError: no luck"):
        check_component(Brittle)
    with pytest.raises(ContractError, match=r"bad input: detect\(\[\]\) must return \[\]"):
        check_component(Chatty)
    Chatty.boom = True
    with pytest.raises(ContractError, match=r"bad input: no texts raised KeyError: 'nothing' \(return \[\] or"):
        check_component(Chatty)


def test_the_check_is_at_one_path_and_gives_the_invented_people():
    """``anonaudit.testing`` is the check's one path (the old ``audit.core`` one went with issue 71's
    shims); it gives the six invented people."""
    import audit.core

    assert not hasattr(audit.core, "check_component")
    from anonaudit.testing import PEOPLE, secrets

    people = invented_people()
    assert [d.subject for d in people.originals] == [p[0] for p in PEOPLE]
    assert "Marrowby" in secrets(people)


def _guide_page(page: str) -> str:
    from pathlib import Path

    return (Path(__file__).resolve().parents[1] / page).read_text(encoding="utf-8")


def test_the_readme_plugin_example_runs_and_its_entry_point_names_a_group():
    import tomllib

    section = _guide_page("docs/how-to/plugin.md")
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1 and "check_component(NameLeft)" in blocks[0]
    namespace: dict = {}
    exec(compile(blocks[0], "docs/how-to/plugin.md", "exec"), namespace)  # noqa: S102 - runs the check
    report = check_component(namespace["NameLeft"])
    assert report.role == "attack" and "shareable" in report.rules
    # without its refusal of a scenario with no originals, the example breaks rule 6
    careless = blocks[0].replace("        if scenario.originals is None:\n", "        if False:\n")
    careless = careless.replace("test_name_left_keeps_the_contract()\n", "")
    namespace = {}
    exec(compile(careless, "docs/how-to/plugin.md (careless)", "exec"), namespace)  # noqa: S102
    with pytest.raises(ContractError, match="bad input: without originals .* raised TypeError"):
        check_component(namespace["NameLeft"])
    (toml,) = re.findall(r"```toml\n(.*?)```", section, flags=re.S)
    groups = tomllib.loads(toml)["project"]["entry-points"]
    assert set(groups) <= {"anonaudit.attacks", "anonaudit.sanitizers", "anonaudit.metrics", "anonaudit.detectors"}
