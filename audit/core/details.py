"""The typed parts of a result that the report, the gate and the summary table read.

A result's ``details`` is open: an attack writes there anything that explains its figure.
A few keys mean the same for every component, and readers rely on them; :class:`Details`
is their typed view (``Result.info``), so no reader looks a key up by string:

* ``warning`` (str): the component doubts its own figure (an attacker that failed its own
  check); the gate makes a passing check INCONCLUSIVE, the report shows it beside the verdict;
* ``successes`` (int): the figure is a success rate (:meth:`Result.from_risk`); without it, a
  score averaged over documents;
* ``unit`` (str), ``trials`` (number), ``trial_unit`` (str): what ``n`` counts, and for a
  clustered result how many finer trials lie in it ("580 n-grams in 40 documents");
* ``sampled`` (:class:`Sampled`): the runner measured a seeded sample of the release (a
  boolean there is a component's own flag, read as no sample note);
* ``in_verdict`` (bool): a further measure (``attack.measure``) that passed its own check and
  counts in the verdict;
* ``residual_risk`` (number): the risk that remains beyond the baseline;
* ``attacker`` (str): one sentence on what the adversary knew and did;
* ``description`` (str): what the result measures, when the component did not describe itself;
* ``clamped`` (object): figures that fell outside [0, 1] by floating-point noise only and were
  clamped to the bound (``{"value": 1.0000000432612823}``: the field and the figure as computed;
  :data:`~audit.core.resultshape.SHARE_TOLERANCE`);
* ``value_from`` (str): how the value follows from the per-document findings, so that every
  reader recomputes it from them (:data:`VALUE_FROM`; :mod:`audit.core.consistency`).

Serialized, ``details`` stays the plain object it always was (byte for byte); a wrong type
under one of these keys is reported by :func:`details_problems` naming the key
(``"details.sampled.of" must be a whole number``), on read and on write. ``null`` reads as absent.

:class:`About` is what the run knew about a component (its description and the fix the report
proposes), recorded in the results file's provenance so a report rendered later, elsewhere, by
another version, shows the same text without asking the installed plugins.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audit.core.errors import AnonauditError
from audit.core.templates import fill_template

#: The typed keys of ``details`` and the JSON type each must have (see the module docstring).
TYPED_KEYS = {"warning": "string", "successes": "count", "unit": "string", "trials": "number",
              "trial_unit": "string", "sampled": "sampled", "in_verdict": "boolean", "residual_risk": "number",
              "attacker": "string", "description": "string", "clamped": "clamped",
              "value_from": "value_from"}
#: The forms of ``details.value_from``: ``"success"`` (the share of the scored findings that
#: succeeded), ``"sum:NUM/DEN"`` (the sum of the findings' fact NUM over that of DEN),
#: ``"mean:FACT"`` (the mean of the findings' fact FACT). See :mod:`audit.core.consistency`.
VALUE_FROM = re.compile(r"^(?:success|sum:(?P<num>[A-Za-z_]\w*)/(?P<den>[A-Za-z_]\w*)|mean:(?P<fact>[A-Za-z_]\w*))$")


@dataclass(frozen=True)
class Sampled:
    """The runner measured ``documents`` of the release's ``of`` documents, drawn with ``seed``;
    sampled to a precision (:mod:`audit.core.sequential`), also the ``target`` half-width, the
    ``half_width`` reached and whether it was ``reached``."""

    documents: int
    of: int
    seed: int | None = None
    target: float | None = None
    half_width: float | None = None
    reached: bool | None = None
    #: How the figure was made, when a component said so ("prediction-powered, 12 judged, 40
    #: scored, ±0.043, about this release": :meth:`audit.core.ppi.PPIEstimate.sentence`).
    made: str | None = None

    def to_dict(self) -> dict[str, Any]:
        extra = {} if self.target is None else {"target": self.target, "half_width": self.half_width,
                                                "reached": self.reached}
        if self.made is not None:
            extra["made"] = self.made
        return {"documents": self.documents, "of": self.of, "seed": self.seed, **extra}

    @property
    def sequential(self) -> bool:
        return self.target is not None

    def sentence(self) -> str:
        """One line on the sample, for the report."""
        from audit.core.sequential import describe

        if self.made:
            return self.made
        if self.target is None:
            return f"measured on a sample of {self.documents} of {self.of} documents"
        return describe(self.documents, self.of, self.target, self.half_width, self.reached)


@dataclass(frozen=True)
class Details:
    """The typed view of a result's ``details`` (see the module docstring for each field)."""

    warning: str = ""
    successes: int | None = None
    unit: str = ""
    trials: int | float | None = None
    trial_unit: str = ""
    sampled: Sampled | None = None
    in_verdict: bool = False
    residual_risk: float | None = None
    attacker: str = ""
    description: str = ""
    clamped: Mapping[str, float] | None = None
    value_from: str = ""

    @property
    def rate(self) -> bool:
        """Whether the figure is a success rate (else a score averaged over documents)."""
        return self.successes is not None

    @classmethod
    def of(cls, details: Mapping[str, Any]) -> Details:
        """The typed view of ``details``. A value of the wrong type is a ``ValueError`` naming
        the key (a results file is checked on read, so this only fails for results made in
        memory)."""
        wrong = details_problems(details)
        if wrong:
            raise ValueError("; ".join(wrong))
        get = details.get
        samp = get("sampled")
        return cls(
            warning=get("warning") or "", successes=None if get("successes") is None else int(get("successes")),
            unit=get("unit") or "", trials=get("trials"),
            trial_unit=get("trial_unit") or "",
            sampled=None if samp is None or _boolean(samp) else _sampled(samp),
            in_verdict=bool(get("in_verdict")), residual_risk=None if get("residual_risk") is None
            else float(get("residual_risk")),
            attacker=get("attacker") or "", description=get("description") or "",
            clamped=None if get("clamped") is None else {k: float(v) for k, v in get("clamped").items()},
            value_from=get("value_from") or "")


def _sampled(samp: Mapping[str, Any]) -> Sampled:
    def num(key: str) -> float | None:
        return None if samp.get(key) is None else float(samp[key])

    return Sampled(int(samp["documents"]), int(samp["of"]), None if samp.get("seed") is None else int(samp["seed"]),
                   num("target"), num("half_width"), None if samp.get("reached") is None else bool(samp["reached"]),
                   samp.get("made"))


def _boolean(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy's too


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not _boolean(value) and math.isfinite(value)


def _count(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not _boolean(value) and value >= 0


_WORDS = {"string": "a string", "count": "a whole number (0 or more)", "number": "a finite number",
          "boolean": "true or false"}


def details_problems(details: Any) -> list[str]:
    """What is wrong with the typed keys of one result's ``details`` (empty when nothing);
    each message names the key, as ``"details.KEY"``."""
    if not isinstance(details, Mapping):
        return []  # the shape check of the result says "details must be an object"
    out = []
    for key, kind in TYPED_KEYS.items():
        value = details.get(key)
        if value is None:
            continue
        if kind == "sampled":
            out += _sampled_problems(value)
            continue
        if kind == "clamped":
            out += _clamped_problems(value)
            continue
        if kind == "value_from":
            if not (isinstance(value, str) and VALUE_FROM.match(value)):
                out.append(f"\"details.value_from\" must be \"success\", \"sum:NUM/DEN\" or \"mean:FACT\", "
                           f"not {_shown(value)}")
            continue
        ok = {"string": isinstance(value, str), "count": _count(value), "number": _number(value),
              "boolean": _boolean(value)}[kind]
        if not ok:
            out.append(f"\"details.{key}\" must be {_WORDS[kind]}, not {_shown(value)}")
    return out


def _sampled_problems(value: Any) -> list[str]:
    if _boolean(value):  # a component's own flag (the claim linker's): not the runner's sample
        return []
    if not isinstance(value, Mapping):
        return [f"\"details.sampled\" must be an object {{\"documents\", \"of\", \"seed\"}}, not {_shown(value)}"]
    out = [f"\"details.sampled.{k}\" must be a whole number (0 or more), not {_shown(value.get(k))}"
           for k in ("documents", "of") if not _count(value.get(k))]
    seed = value.get("seed")
    if seed is not None and not (isinstance(seed, numbers.Integral) and not _boolean(seed)):
        out.append(f"\"details.sampled.seed\" must be a whole number or null, not {_shown(seed)}")
    out += [f"\"details.sampled.{k}\" must be a finite number or null, not {_shown(value.get(k))}"
            for k in ("target", "half_width") if value.get(k) is not None and not _number(value.get(k))]
    if value.get("reached") is not None and not _boolean(value.get("reached")):
        out.append(f"\"details.sampled.reached\" must be true, false or null, not {_shown(value.get('reached'))}")
    if value.get("made") is not None and not isinstance(value.get("made"), str):
        out.append(f"\"details.sampled.made\" must be a string or null, not {_shown(value.get('made'))}")
    return out


def _clamped_problems(value: Any) -> list[str]:
    if not isinstance(value, Mapping):
        return [f"\"details.clamped\" must be an object {{field: figure as computed}}, not {_shown(value)}"]
    return [f"\"details.clamped.{k}\" must be a finite number, not {_shown(v)}" for k, v in value.items()
            if not _number(v)]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class About:
    """What the run knew about a component, recorded in the results file's provenance
    (``provenance.components``): its ``kind`` and ``name``, its ``description``, and for an
    attack the ``remedy`` the report proposes when it decides a release (one sentence, with
    ``{exposed}`` and ``{total}`` for the documents it succeeded on and attacked)."""

    kind: str
    name: str
    description: str = ""
    remedy: str = ""

    def fix(self, exposed: int, total: int) -> str:
        """The remedy with its counts filled in (as written when it has no valid fields)."""
        try:  # substituted, never evaluated: the remedy is read from a results file
            return fill_template(self.remedy, {"exposed": exposed, "total": total}, "remedy")
        except AnonauditError:
            return self.remedy


def about_problems(components: Any) -> list[str]:
    """What is wrong with ``provenance.components`` as :class:`About` records read it."""
    if components is None:
        return []
    if not isinstance(components, Mapping):
        return ["\"provenance.components\" must be an object"]
    out = []
    for label, entry in components.items():
        if not isinstance(entry, Mapping):
            out.append(f"\"provenance.components.{label}\" must be an object")
            continue
        for key in ("kind", "name", "description", "remedy"):
            if entry.get(key) is not None and not isinstance(entry[key], str):
                out.append(f"\"provenance.components.{label}.{key}\" must be a string, not {_shown(entry[key])}")
    return out


#: The result kind of each component kind (a metric writes utility results).
RESULT_KIND = {"attack": "attack", "metric": "utility"}


def abouts(components: Any) -> dict[tuple[str, str], About]:
    """``{(result kind, name): About}`` from ``provenance.components`` (checked on read by
    :func:`about_problems`). One component may appear under several labels (run twice with
    other parameters): the first description and the first remedy found are kept."""
    texts: dict[tuple[str, str], tuple[str, str]] = {}
    for entry in components.values() if isinstance(components, Mapping) else ():
        if not isinstance(entry, Mapping) or not entry.get("name"):
            continue
        kind = str(entry.get("kind") or "")
        key = (RESULT_KIND.get(kind, kind), str(entry["name"]))
        description, remedy = texts.get(key, ("", ""))
        texts[key] = (description or str(entry.get("description") or ""), remedy or str(entry.get("remedy") or ""))
    return {key: About(key[0], key[1], description, remedy) for key, (description, remedy) in texts.items()}
