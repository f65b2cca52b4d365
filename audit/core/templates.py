"""Templates that a user or a data file gives (a sanitizer's ``--template "[{label}]"``, an
attack's remedy read back from a results file): substituted, never evaluated.

``str.format`` on a user's text is code in data: ``{label.__class__.__mro__[1]}`` walks Python
objects and writes their reprs (and memory addresses) into a release, and a format spec such as
``{label:>99999999}`` asks for gigabytes. Here a template may hold only named fields from a fixed
set, written bare (``{label}``): no attribute or index access, no conversion (``!r``), no format
spec (``:>10``), no positional field (``{}``, ``{0}``); ``{{`` and ``}}`` are literal braces. A
template that breaks a rule is refused naming the field and the rule, when it is given, not on
the first document.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping

from audit.core.errors import AnonauditError


class TemplateError(AnonauditError, ValueError):
    """A template with a field it may not use or a form it may not take; the message names the
    field. (A :class:`ValueError` too: a component's constructor refuses it as a wrong value.)"""


def template_fields(template: object, allowed: Iterable[str], what: str = "template") -> tuple[str, ...]:
    """The fields ``template`` uses, in order, or a :class:`TemplateError` naming ``what``, the
    field and the rule it breaks. ``allowed``: the names it may use."""
    allowed = tuple(allowed)
    names = ", ".join("{" + a + "}" for a in allowed)
    if not isinstance(template, str):
        raise TemplateError(f"{what} must be a text with {names}, got {type(template).__name__} {template!r:.60}")
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:  # a lone { or }
        raise TemplateError(f"{what} {template!r:.80} cannot be filled: {exc} (the fields it may use are {names}; "
                            "write {{ and }} for literal braces)") from None
    used: list[str] = []
    for _, field, spec, conversion in parts:
        if field is None:
            continue
        shown = "{" + field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        if field not in allowed:
            raise TemplateError(f"{what} {template!r:.80} cannot be filled: field {shown:.60} is not allowed: "
                                + _why(field, allowed) + f"; the fields it may use are {names}")
        if conversion or spec:
            raise TemplateError(f"{what} {template!r:.80} cannot be filled: field {shown:.60} has a conversion or "
                                f"format spec; "
                                f"write the field bare ({{{field}}})")
        used.append(field)
    return tuple(used)


def _why(field: str, allowed: tuple[str, ...]) -> str:
    if field == "" or field.isdigit():
        return "positional fields are not filled"
    head = field.split(".", 1)[0].split("[", 1)[0]
    if head in allowed:
        return "attribute and index access are not allowed"
    return "unknown field"


def fill_template(template: str, values: Mapping[str, object], what: str = "template") -> str:
    """``template`` with each field replaced by ``str(values[field])``: plain substitution
    (checked by :func:`template_fields` against the names of ``values`` first)."""
    template_fields(template, values, what)
    out: list[str] = []
    for literal, field, _, _ in string.Formatter().parse(template):
        out.append(literal)
        if field is not None:
            out.append(str(values[field]))
    return "".join(out)
