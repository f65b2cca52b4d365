"""The audit's budget (quick, standard, full): what each level sets per stage, where the user's
own parameters win, and the older spellings that still work with a deprecation note."""

from __future__ import annotations


import click

import anonaudit
import pytest

from attackers.claim_linker import ClaimLinkerAttack
from attackers.span_guess import SpanGuessAttack
from attackers.trir import TRIRAttack
from audit.core.errors import AnonauditError
from audit.core.registry import registry
from audit.pipeline.budget import budget_params, check_budget, table
from audit.pipeline.calls import component_params
from audit.pipeline.spec import parse_spec


def test_each_level_sets_the_interval_target_and_the_cheaper_settings():
    assert budget_params(ClaimLinkerAttack, "quick") == {"score_target": 0.20, "paraphrase": False}  # its own
    assert budget_params(ClaimLinkerAttack, "standard") == {"score_target": 0.05}
    assert budget_params(ClaimLinkerAttack, "full") == {"score_target": None}
    assert budget_params(SpanGuessAttack, "quick") == {"target": 0.10}
    assert budget_params(SpanGuessAttack, "full") == {"target": None}
    assert budget_params(TRIRAttack, "quick") == {"budget": "fast"} and budget_params(TRIRAttack, "full") == {}
    rows = {(c, p): v for c, p, v in table(registry)}
    assert rows[("claim_linker", "score_target")] == "quick: 0.2, standard: 0.05, full: None"


@pytest.fixture
def files(tmp_path):
    for name in ("o.jsonl", "r.jsonl"):
        (tmp_path / name).write_text('{"id": "a", "text": "x"}\n', encoding="utf-8")
    return tmp_path


def _spec(base, **extra):
    return parse_spec({"originals": "o.jsonl", "releases": [{"name": "r", "path": "r.jsonl"}],
                       "attacks": ["phrase_search"], **extra}, base=base, check_components=False)


def test_the_spec_takes_a_budget_and_names_a_wrong_one(files):
    assert _spec(files).budget == "standard" and _spec(files, budget="quick").budget == "quick"
    with pytest.raises(AnonauditError, match=r"budget.*must be one of quick, standard, full, got 'fast'"):
        _spec(files, budget="fast")
    with pytest.raises(AnonauditError, match="must be one of"):
        check_budget(3)


def test_the_users_own_parameters_win_over_the_budget(files):
    spec = _spec(files, budget="quick")
    got = component_params(spec, ClaimLinkerAttack.param_names(), {"paraphrase": True}, progress=False,
                           cls=ClaimLinkerAttack)
    assert got["paraphrase"] is True and got["score_target"] == 0.20
    assert "score_target" not in component_params(spec, ClaimLinkerAttack.param_names(), {}, progress=False)


def test_trirs_old_budget_spelling_still_works_with_a_note(capsys):
    from anonaudit.cli.driver import _budget

    params: dict = {}
    assert _budget("fast", params, {"budget"}, "trir") is None and params == {"budget": "fast"}
    assert "deprecated: write --param budget=fast" in capsys.readouterr().err
    assert _budget("quick", {}, {"budget"}, "trir") == "quick"
    with pytest.raises(AnonauditError, match="--budget fast: must be one of"):
        _budget("fast", {}, {"guesses"}, "span_guess")


def test_bench_reads_a_number_as_the_old_sanitizer_sample_on_the_command_line_only(capsys):
    """The command line's old spelling is read with a note; the API's budget is a level (issue 71:
    the old Python spellings went)."""
    from anonaudit.cli.bench_command import _budget as cli_budget

    assert cli_budget("25", 10) == (None, 25) and "--sanitizer-sample 25" in capsys.readouterr().err
    assert cli_budget("full", 10) == ("full", 10)
    with pytest.raises(AnonauditError):
        cli_budget("lots", 10)
    with pytest.raises(AnonauditError, match=r"Budget\(level=...\): must be one of quick, standard, full, got 7"):
        anonaudit.Budget(7)  # type: ignore[arg-type]
    assert click  # the CLI notes go to stderr through click
