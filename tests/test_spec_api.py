"""The Python-first spec (issue 71, item 4): ``anonaudit.audit`` takes a typed, frozen
:class:`anonaudit.Spec`, built in Python or loaded from YAML, with a few keyword shortcuts; the
command line's plumbing is not in its signature; its help fits on one screen; ``attack`` and
``utility`` take the same spec. Model-free
(phrase_search and rouge on 6 synthetic people): ~6 s."""

from __future__ import annotations

import dataclasses
import inspect
import json
import pydoc

import pytest
import yaml

import anonaudit
from audit.core.errors import AnonauditError

#: One screen: a terminal's 40 lines of 80 columns.
SCREEN, WIDTH = 40, 80


def test_the_signature_is_the_spec_and_a_few_shortcuts_and_help_fits_on_one_screen():
    params = inspect.signature(anonaudit.audit).parameters
    assert list(params)[0] == "spec" and params["spec"].kind is inspect.Parameter.POSITIONAL_ONLY
    shortcuts = {"originals", "releases", "attacks", "metrics", "seed"}
    run = {"out", "force", "progress", "on_error", "registry"}
    assert set(params) == {"spec", *shortcuts, *run}
    assert not {"command", "source", "llm", "budget", "text_column"} & set(params)
    assert "command" not in inspect.signature(anonaudit.run).parameters
    text = pydoc.render_doc(anonaudit.audit, renderer=pydoc.plaintext)
    assert _screen_lines(anonaudit.audit) <= SCREEN, text  # wrapped


def _screen_lines(function) -> int:
    return sum(-(-max(len(line), 1) // WIDTH) for line in pydoc.render_doc(function, renderer=pydoc.plaintext)
               .splitlines())


def test_attack_and_utility_take_the_spec_and_a_few_shortcuts_and_help_fits_on_one_screen():
    """attack() and utility() take the same Spec as audit() (``spec=``: background, budget,
    models, columns...), with audit's shortcuts and run arguments; no flat spec keyword is left."""
    run = {"seed", "out", "force", "progress", "on_error", "registry"}
    attack = inspect.signature(anonaudit.attack).parameters
    assert set(attack) == {"name", "releases", "spec", "originals", "params", "sample", "keywords", *run}
    utility = inspect.signature(anonaudit.utility).parameters
    assert set(utility) == {"originals", "releases", "metrics", "spec", "keywords", *run}
    for function in (anonaudit.attack, anonaudit.utility):
        assert _screen_lines(function) <= SCREEN
        assert not {"llm", "budget", "background", "text_column", "time_limit"} & set(
            inspect.signature(function).parameters)


def test_attack_and_utility_give_audit_s_results_and_name_where_a_spec_field_goes():
    data = anonaudit.sample_data(n=6, seed=1)
    rows, labels = data["originals"], data["releases"]["labels"]
    body = [{**{k: v for k, v in r.items() if k != "text"}, "body": r["text"]} for r in rows]
    spec = anonaudit.Spec(originals=body, releases={"labels": [
        {**{k: v for k, v in r.items() if k != "text"}, "body": r["text"]} for r in labels]},
        columns=anonaudit.Columns(text="body"), seed=2, budget=anonaudit.Budget("full"))
    a = anonaudit.attack("phrase_search", spec=spec, params={"max_n": 5}, progress=False)
    b = anonaudit.audit(spec.replace(attacks=[{"name": "phrase_search", "params": {"max_n": 5}}]), progress=False)
    assert [r.to_dict() for r in a.results] == [r.to_dict() for r in b.results] and a.provenance["seed"] == 2
    u = anonaudit.utility(spec=spec, metrics=["rouge"], seed=4, progress=False)
    assert [r.name for r in u.results] == ["rouge"] and u.provenance["seed"] == 4
    with pytest.raises(AnonauditError, match=r"anonaudit\.attack\(\): budget= is part of the audit's spec: give "
                                             r"spec=anonaudit\.Spec\(budget=anonaudit\.Budget\(\.\.\.\)\)"):
        anonaudit.attack("phrase_search", {"labels": labels}, originals=rows, budget="quick")
    with pytest.raises(AnonauditError, match=r"anonaudit\.utility\(\): text_column= is part of the audit's spec: "
                                             r"give spec=anonaudit\.Spec\(columns=anonaudit\.Columns\(text=\.\.\.\)\)"):
        anonaudit.utility(rows, {"labels": labels}, metrics=["rouge"], text_column="body")
    with pytest.raises(AnonauditError, match=r"anonaudit\.utility\(\): unexpected keyword\(s\) colour"):
        anonaudit.utility(rows, {"labels": labels}, metrics=["rouge"], colour=1)


def test_a_spec_is_frozen_and_checked_when_built():
    spec = anonaudit.Spec(attacks=["phrase_search"], seed=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 4  # type: ignore[misc]
    assert spec.replace(seed=4).seed == 4 and spec.seed == 3
    with pytest.raises(AnonauditError, match="seed=-1: must be a whole number of at least 0"):
        anonaudit.Spec(seed=-1)
    with pytest.raises(AnonauditError, match=r"Budget\(level=...\): must be one of quick, standard, full"):
        anonaudit.Budget("fast")
    with pytest.raises(AnonauditError, match="budget must be an anonaudit.Budget, got 'quick'"):
        anonaudit.Spec(budget="quick")  # type: ignore[arg-type]
    with pytest.raises(AnonauditError, match=r"anonaudit.audit\(\): spec=.*: must be Spec or a string or a path"):
        anonaudit.audit({"attacks": ["phrase_search"]})


def test_python_and_yaml_give_the_same_results_and_the_shortcuts_replace_fields(tmp_path):
    data = anonaudit.sample_data(n=6, seed=1)
    for name, rows in (("originals", data["originals"]), ("labels", data["releases"]["labels"])):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = anonaudit.Spec(originals=str(tmp_path / "originals.jsonl"), releases=[str(tmp_path / "labels.jsonl")],
                          attacks=["phrase_search"], metrics=["rouge"], seed=2, budget=anonaudit.Budget("full"))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "audit.yaml").write_text(yaml.safe_dump({
        "originals": "../originals.jsonl", "releases": ["../labels.jsonl"], "attacks": ["phrase_search"],
        "metrics": ["rouge"], "seed": 2, "budget": "full"}))
    loaded = anonaudit.Spec.load(tmp_path / "sub" / "audit.yaml")
    assert loaded.budget == anonaudit.Budget("full") and loaded.seed == 2
    a = anonaudit.audit(spec, progress=False)
    b = anonaudit.audit(loaded, progress=False)
    assert [r.to_dict() for r in a.results] == [r.to_dict() for r in b.results]
    assert a.provenance["seed"] == 2
    c = anonaudit.audit(spec, metrics=[], seed=5, progress=False)
    assert {r.name for r in c.results} == {r.name for r in a.results if r.kind == "attack"}
    assert c.provenance["seed"] == 5


def test_a_spec_file_with_a_runs_keys_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump({"attacks": ["phrase_search"], "out": "x", "colour": 1}))
    with pytest.raises(AnonauditError, match=r"audit\.yaml: colour, out: not part of an anonaudit\.Spec .*"
                                             r"out: a run's, anonaudit\.run\("):
        anonaudit.Spec.load(path)
