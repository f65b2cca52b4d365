"""Templates are substituted, never evaluated (issue 67, item 5): a sanitizer's ``template`` and an
attack's remedy read back from a results file may use only their named fields, bare. Model-free;
well under a second."""

from __future__ import annotations

import pytest

from audit.core.details import About
from audit.core.errors import AnonauditError
from defenders.baselines import LabelMasking, check_template

EVIL = [
    ("[{label.__class__.__mro__[1].__subclasses__}]", "{label.__class__.__mro__[1].__subclasses__}",
     "attribute and index access"),
    ("[{label[0]}]", "{label[0]}", "attribute and index access"),
    ("[{label!r}]", "{label!r}", "conversion or format spec"),
    ("[{label:>999999999}]", "{label:>999999999}", "conversion or format spec"),
    ("[{label:{label}}]", "{label:{label}}", "conversion or format spec"),
    ("[{}]", "{}", "positional"),
    ("[{0}]", "{0}", "positional"),
    ("[{name}]", "{name}", "unknown field"),
]


@pytest.mark.parametrize("template,field,rule", EVIL)
def test_a_template_that_would_evaluate_is_refused_naming_the_field(template, field, rule):
    with pytest.raises(AnonauditError) as err:
        check_template(template)
    assert field in str(err.value) and rule in str(err.value)
    with pytest.raises(ValueError):  # a component's constructor refuses it as a wrong value
        LabelMasking(template=template)


def test_a_lone_brace_is_refused_and_doubled_braces_are_literal():
    from audit.core.templates import fill_template

    with pytest.raises(AnonauditError, match="literal braces"):
        check_template("[{label]")
    assert fill_template("{{{label}}}", {"label": "PERSON"}) == "{PERSON}"


def test_fields_are_substituted_as_text_never_formatted():
    from audit.core.templates import fill_template, template_fields

    assert template_fields("<{label}|{label}>", ("label",)) == ("label", "label")
    assert fill_template("<{label}>", {"label": "{label.__class__}"}) == "<{label.__class__}>"


def test_a_remedy_from_a_results_file_is_substituted_or_shown_as_written():
    assert About("attack", "x", remedy="{exposed} of {total}").fix(3, 9) == "3 of 9"
    evil = "{exposed.__class__.__mro__[1].__subclasses__}"
    fixed = About("attack", "x", remedy=evil).fix(3, 9)
    assert fixed == evil and "<class" not in fixed
