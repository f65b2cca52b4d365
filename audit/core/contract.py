"""The contract every component keeps, as one check a plugin author runs on a class.

As scikit-learn's ``check_estimator`` does for estimators, :func:`check_component` runs an
attack, sanitizer, metric or detector class through the rules
the rest of anonaudit relies on, and raises :class:`ContractError` listing every rule it
breaks. A plugin author calls it in a test, from its public place :mod:`anonaudit.testing`::

    from anonaudit.testing import check_component

    def test_my_attack_keeps_the_contract():
        check_component(MyAttack)

The rules:

1. **role**: the class implements exactly one role (:class:`~audit.core.interfaces.Attack`,
   ``Sanitizer``, ``Metric``, ``Detector``); its ``name`` is a registry name (lower case, ``_``), its
   ``description`` says what it does, an attack's ``remedy`` fills ``{exposed}``/``{total}``;
2. **parameters**: explicit named parameters (no ``*args``/``**kwargs``), each with a type
   hint that resolves (so a spec or a command line with a wrong value is refused before
   anything runs, naming the parameter), a default that fits it or a documented requirement;
3. **get_params**: returns every parameter under its own name (a shared object left at its
   default may stay out), as JSON values, and ``cls(**get_params())`` gives them back;
4. **typed results**: ``evaluate`` returns :class:`~audit.core.results.Result` s of the role's
   kind, the headline first and named after the component (further measures
   ``name.measure``), figures that can be read back, typed details, one
   :class:`~audit.core.results.Finding` per document of the release (offsets inside the text
   they mark), and a round trip through JSON that changes nothing (no key that is not a
   string: ``{1: 3}`` reads back as ``{"1": 3}``); a sanitizer returns an
   aligned :class:`~audit.core.data.Release` of the same documents whose recorded spans lie in
   the text, and leaves its input alone; a detector returns one list of labelled
   :class:`~audit.core.data.Span` s per text, inside that text;
5. **determinism**: two fresh instances with the same parameters (and seed) give the same
   results, byte for byte;
6. **bad input**: a scenario without a part the component ``requires`` is refused with an
   :class:`~audit.core.errors.AnonauditError`, never a Python error from deep inside (a
   sanitizer given an empty corpus, a detector given no text: an answer in kind or that error);
7. **shareable**: no finding shows an original the release replaced outside a fact it names
   ``private`` (the shareable edition drops those), and no typed detail quotes one.

Rules 4 to 7 run the component on a small scenario: :mod:`audit.core.contract_data`'s six
invented people by default, or ``scenario=`` (its first release is attacked). A component
that needs models takes them as parameters (``params=``) or from ``resources=`` (given with
``use``); without them it loads its own, as in a run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from audit.core import contract_data
from audit.core.data import Corpus, Release, Scenario, Span
from audit.core.errors import AnonauditError
from audit.core.interfaces import Attack, Component, Detector, Metric, Sanitizer
from audit.core.params import EMPTY, Unknown, parameters, variadic
from audit.core.paramtypes import check_params
from audit.core.registry import normalise
from audit.core.templates import template_fields
from audit.core.results import Finding, Result
from audit.core.resultshape import figure_problems
from audit.core.details import details_problems


class ContractError(AnonauditError):
    """A component breaks the contract: ``problems`` lists every broken rule, each with its name."""

    def __init__(self, cls: type, problems: list[str]):
        self.problems = list(problems)
        super().__init__(f"{getattr(cls, '__qualname__', cls)} breaks the component contract:\n"
                         + "\n".join(f"  - {p}" for p in self.problems))


@dataclass(frozen=True)
class ContractReport:
    """What :func:`check_component` checked on a class that keeps the contract."""

    cls: type
    role: str
    rules: tuple[str, ...] = field(default=())


def roles() -> dict[str, type]:
    """``{role: base class}``: every role a component can implement."""
    return {"attack": Attack, "sanitizer": Sanitizer, "metric": Metric, "detector": Detector}


def check_component(cls: type, *, params: Mapping[str, Any] | None = None, scenario: Scenario | None = None,
                    resources: Any = None, run: bool = True) -> ContractReport:
    """Check ``cls`` against the component contract (see the module docstring); raise
    :class:`ContractError` listing every broken rule, or return what was checked.

    ``params``: constructor arguments for the run (models, small sizes); ``scenario``: the data
    to run on (default: :func:`audit.core.contract_data.scenario`); ``resources``: shared
    models given to each instance with ``use``; ``run=False`` checks the class only (rules 1-3).
    """
    problems: list[str] = []
    role = _role(cls, problems)
    problems += [f"parameters: {p}" for p in _parameter_problems(cls)]
    rules = ["role", "parameters"]
    if problems or role is None:
        raise ContractError(cls, problems)
    params = dict(params or {})
    try:
        obj = cls(**params)
    except Exception as exc:  # noqa: BLE001 - the contract reports it
        raise ContractError(cls, [f"construct: {cls.__name__}(**params) raised {type(exc).__name__}: {exc}"]) from exc
    problems += [f"get_params: {p}" for p in _get_params_problems(cls, obj)]
    rules.append("get_params")
    if run and not problems:
        scn = scenario or contract_data.scenario()
        runner = _RUNNERS.get(role)
        if runner is not None:
            problems += runner(cls, params, scn, resources)
            rules += ["typed results", "determinism", "bad input"] + (["shareable"] if role == "attack" else [])
    if problems:
        raise ContractError(cls, problems)
    return ContractReport(cls, role, tuple(rules))


# --------------------------------------------------------------------------- rules 1-3: the class


def _role(cls: type, problems: list[str]) -> str | None:
    if not isinstance(cls, type) or not issubclass(cls, Component):
        problems.append(f"role: {cls!r} is not a component class (a subclass of audit.core.interfaces.Component)")
        return None
    mine = [r for r, base in roles().items() if issubclass(cls, base)]
    if len(mine) != 1:
        problems.append(f"role: implements {len(mine)} roles ({', '.join(mine) or 'none'}); a component has one "
                        f"of {', '.join(roles())}")
        return None
    name, description = getattr(cls, "name", ""), getattr(cls, "description", "")
    if not isinstance(name, str) or not name or normalise(name) != name:
        problems.append(f"role: name {name!r} must be a registry name (lower case letters, digits and _)")
    if not isinstance(description, str) or len(description.split()) < 3:
        problems.append("role: description must say in words what the component does (the report and --help show it)")
    if mine[0] == "attack":
        remedy = getattr(cls, "remedy", "")
        try:
            template_fields(remedy, ("exposed", "total"), "remedy")
        except AnonauditError as exc:
            problems.append(f"role: remedy must be a sentence whose only fields are {{exposed}} and {{total}} ({exc})")
        if not set(getattr(cls, "requires", ())) <= {"originals", "background"}:
            problems.append(f"role: requires {sorted(cls.requires)}: only originals and background exist")
    return mine[0]


def _parameter_problems(cls: type) -> list[str]:
    out = [f"*{n}: every parameter must be named, so a spec maps one-to-one onto the constructor"
           for n in variadic(cls)]
    plist = parameters(cls)
    for p in plist:
        if p.hint is EMPTY:
            out.append(f"{p.name!r} has no type hint: a wrong value could not be refused before the run")
        elif p.hint is Unknown or Unknown in getattr(p.hint, "__args__", ()):
            out.append(f"{p.name!r}: its type hint does not resolve at run time (import the names it uses)")
        elif p.required and not p.help:
            out.append(f"{p.name!r} is required but not documented (a docstring line '{p.name}: what it is')")
    defaults = {p.name: p.default for p in plist if not p.required and p.default is not None}
    out += [f"{k!r}: its default {v}" for k, v in check_params(cls, defaults).items()]
    return out


def _get_params_problems(cls: type, obj: Component) -> list[str]:
    got = obj.get_params()
    # a shared object left at its default (a metric's context: not configuration) may stay out
    names = [p.name for p in parameters(cls)
             if p.name in got or not (p.kind == "other" and getattr(obj, p.name, p.default) is p.default)]
    out = [f"{n!r} is not stored under its own name (get_params leaves it out)" for n in names if n not in got]
    if out:
        return out
    try:
        json.dumps({k: v for k, v in got.items() if not isinstance(v, (Corpus, Release))})
    except (TypeError, ValueError) as exc:
        out.append(f"get_params() must be JSON values (models as their identity): {exc}")
    try:
        again = cls(**got).get_params()
    except Exception as exc:  # noqa: BLE001 - the contract reports it
        return out + [f"cls(**get_params()) raised {type(exc).__name__}: {exc}"]
    out += [f"{k!r} does not round-trip: {got[k]!r} became {again.get(k)!r}" for k in names if again.get(k) != got[k]]
    return out


# --------------------------------------------------------------------------- rules 4-7: a run


def _fresh(cls: type, params: Mapping[str, Any], resources: Any) -> Component:
    obj = cls(**params)
    return obj.use(resources) if resources is not None else obj


def _attempt(cls: type, params: Mapping[str, Any], resources: Any,
             call: Callable[[Any], Any]) -> tuple[Any, Exception | None]:
    """``call`` on a fresh instance, closed after: ``(its answer, None)``, or ``(None, what it raised)``."""
    obj = _fresh(cls, params, resources)
    try:
        return call(obj), None
    except Exception as exc:  # noqa: BLE001 - the contract reports it
        return None, exc
    finally:
        obj.close()


def _twice(cls: type, params: Mapping[str, Any], resources: Any, call: Callable[[Any], Any],
           what: str) -> tuple[list[Any], list[str]]:
    """Rules 4 and 5 start here for every role: ``call`` on two fresh instances with the same
    parameters, for the answers to check and compare; or, when one raised, the problem (``what``:
    the call on valid input, in words)."""
    answers = []
    for _ in range(2):
        answer, exc = _attempt(cls, params, resources, call)
        if exc is not None:
            return [], [f"typed results: {what} raised {type(exc).__name__}: {exc}"]
        answers.append(answer)
    return answers, []


def _refused(exc: Exception | None, what: str, hint: str) -> list[str]:
    """Rule 6: what is wrong with ``exc``, raised on bad input ``what`` (none, or an
    :class:`AnonauditError`, is fine): a Python error from deep inside is not."""
    if exc is None or isinstance(exc, AnonauditError):
        return []
    return [f"{what} raised {type(exc).__name__}: {exc} ({hint})"]


def _run_scoring(cls: type, params: Mapping[str, Any], scn: Scenario, resources: Any) -> list[str]:
    """Rules 4-7 for an attack or a metric: results of ``evaluate`` on the first release."""
    release = scn.releases[0]
    runs, out = _twice(cls, params, resources, lambda obj: obj.fit(scn).evaluate(scn, release),
                       "evaluate on a valid scenario")
    if out:
        return out
    out += [f"typed results: {p}" for p in _result_problems(cls, runs[0], scn, release)]
    if not out and _dump(runs[0]) != _dump(runs[1]):
        out.append("determinism: two instances with the same parameters gave different results")
    if issubclass(cls, Attack) and not out:
        out += [f"shareable: {p}" for p in _private_problems(runs[0], contract_data.secrets(scn))]
    out += [f"bad input: {p}" for p in _missing_part_problems(cls, params, scn, resources)]
    return out


def _dump(results: Any) -> str:
    return json.dumps([r.to_dict() for r in results], sort_keys=True, default=str)


def _result_problems(cls: type, results: Any, scn: Scenario, release: Release) -> list[str]:
    want = "attack" if issubclass(cls, Attack) else "utility"
    if not isinstance(results, list) or not results or not all(isinstance(r, Result) for r in results):
        return [f"evaluate must return a non-empty list of Result, got {type(results).__name__}"]
    out = []
    if results[0].name != cls.name:
        out.append(f"the first result (the headline) must be named {cls.name!r}, not {results[0].name!r}")
    for r in results:
        where = f"result {r.name!r}"
        if r.kind != want:
            out.append(f"{where}: kind {r.kind!r}, expected {want!r}")
        if r.name != cls.name and not r.name.startswith(cls.name + "."):
            out.append(f"{where}: a further measure is named {cls.name}.MEASURE")
        if r.release != release.name:
            out.append(f"{where}: release {r.release!r}, expected {release.name!r}")
        out += [f"{where}: {w}" for w in figure_problems(r.to_dict()) + details_problems(r.details)]
        try:
            text = json.dumps(r.to_dict(), sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            out.append(f"{where}: details and facts must be JSON values ({exc})")
        else:
            changed = _json_change(r.to_dict(), json.loads(text), "") or \
                _json_change(r.to_dict(), Result.from_dict(json.loads(text)).to_dict(), "")
            if changed:
                out.append(f"{where}: reads back from JSON otherwise than it was written ({changed})")
        out += [f"{where}: {w}" for w in _finding_problems(r.documents, release, scn)]
    return out


def _json_change(written: Any, read: Any, where: str) -> str:
    """Where ``read`` (a value read back from JSON) differs from ``written``, in words ("" when
    nowhere). Tuples read back as lists, which is no change; a key that is not a string (it
    reads back as one: ``{1: 3}`` becomes ``{"1": 3}``) or any other difference is."""
    if isinstance(written, Mapping) and isinstance(read, Mapping):
        odd = next((k for k in written if not isinstance(k, str)), None)
        if odd is not None:
            return f"{where or 'the result'}: the key {odd!r} is not a string, and reads back as {str(odd)!r}"
        for key in written:
            change = _json_change(written[key], read.get(key), f"{where}.{key}" if where else key)
            if change:
                return change
        return "" if set(written) == set(read) else f"{where or 'the result'}: other keys"
    if isinstance(written, (list, tuple)) and isinstance(read, list) and len(written) == len(read):
        return next((c for i, (a, b) in enumerate(zip(written, read)) if (c := _json_change(a, b, f"{where}[{i}]"))),
                    "")
    same = type(written) is type(read) or {type(written), type(read)} <= {int, float}
    return "" if same and written == read else f"{where}: {written!r} reads back as {read!r}"


def _finding_problems(documents: tuple[Finding, ...], release: Release, scn: Scenario) -> list[str]:
    texts = {d.id: d.text for d in release}
    for corpus in (scn.originals, scn.background):
        texts.update({d.id: d.text for d in corpus or ()} if corpus is not None else {})
    out = []
    ids = [f.id for f in documents]
    if len(set(ids)) != len(ids):
        out.append("two findings for one document")
    for f in documents:
        if f.id not in texts:
            out.append(f"finding {f.id!r} names no document of the scenario")
            continue
        text = texts.get(f.highlights_in or f.id)
        if text is None:
            out.append(f"finding {f.id!r}: highlights_in {f.highlights_in!r} names no document")
            continue
        out += [f"finding {f.id!r}: highlight [{h.start}, {h.end}) lies outside its text ({len(text)} characters)"
                for h in f.highlights if not 0 <= h.start <= h.end <= len(text)]
        unknown = set(f.private) - set(f.facts) - {"summary"}
        if unknown:
            out.append(f"finding {f.id!r}: private names facts it does not have: {sorted(unknown)}")
    return out[:10]


def _private_problems(results: list[Result], secrets: set[str]) -> list[str]:
    """Originals the release replaced, shown where the shareable edition keeps them."""
    out = []
    for r in results:
        for f in r.documents:
            shown = {k: v for k, v in f.facts.items() if k not in f.private}
            if "summary" not in f.private:
                shown["summary"] = f.summary
            text = json.dumps(shown, ensure_ascii=False, default=str)
            leaked = sorted(s for s in secrets if s in text)
            if leaked:
                keys = sorted(k for k, v in shown.items() if any(s in json.dumps(v, ensure_ascii=False, default=str)
                                                                  for s in leaked))
                out.append(f"result {r.name!r}, finding {f.id!r}: {', '.join(keys)} show(s) the original "
                           f"{leaked[0]!r} but are not named private")
        info = r.info
        out += [f"result {r.name!r}: details.{k} quotes an original" for k in ("warning", "attacker", "description")
                if any(s in getattr(info, k) for s in secrets)]
    return out[:10]


def _missing_part_problems(cls: type, params: Mapping[str, Any], scn: Scenario, resources: Any) -> list[str]:
    """Rule 6: a scenario without a required part is refused clearly."""
    out = []
    for part in sorted(getattr(cls, "requires", ())):
        if part not in ("originals", "background") or getattr(scn, part) is None:
            continue
        broken = Scenario(**{**{k: getattr(scn, k) for k in ("originals", "background", "releases", "dev")},
                             part: None})
        _, exc = _attempt(cls, params, resources, lambda obj: obj.fit(broken).evaluate(broken, broken.releases[0]))
        if exc is None:
            out.append(f"without {part} (which it requires) evaluate ran instead of refusing")
        out += _refused(exc, f"without {part} (which it requires) it",
                        "refuse with an AnonauditError naming what is missing")
    return out


def _run_sanitizer(cls: type, params: Mapping[str, Any], scn: Scenario, resources: Any) -> list[str]:
    """Rules 4-6 for a sanitizer: ``sanitize`` on the originals."""
    corpus = scn.originals
    if corpus is None:
        return ["typed results: the scenario has no originals to sanitize"]
    before = [d.to_dict() for d in corpus]
    releases, out = _twice(cls, params, resources, lambda obj: obj.sanitize(corpus, name="contract"),
                           "sanitize on a valid corpus")
    if out:
        return out
    rel = releases[0]
    if not isinstance(rel, Release):
        return [f"typed results: sanitize must return a Release, got {type(rel).__name__}"]
    if rel.name != "contract":
        out.append(f"typed results: the release is named {rel.name!r}, not the name it was given")
    if [d.id for d in rel] != [d.id for d in corpus] or not rel.aligned:
        out.append("typed results: the release must hold the same documents, in order, aligned")
    out += [f"typed results: document {d.id!r}: a recorded span [{s.start}, {s.end}) lies outside its text"
            for d in rel for s in d.spans if not 0 <= s.start <= s.end <= len(d.text)][:5]
    if [d.to_dict() for d in corpus] != before:
        out.append("typed results: sanitize changed its input corpus")
    if [d.to_dict() for d in rel] != [d.to_dict() for d in releases[1]]:
        out.append("determinism: two instances with the same parameters gave different releases")
    _, exc = _attempt(cls, params, resources, lambda obj: obj.sanitize(Corpus([], name="empty"), name="empty"))
    return out + [f"bad input: {p}" for p in _refused(exc, "an empty corpus",
                                                       "refuse with an AnonauditError or return an empty release")]


def _run_detector(cls: type, params: Mapping[str, Any], scn: Scenario, resources: Any) -> list[str]:
    """Rules 4-6 for a detector: ``detect`` on the originals' texts."""
    if scn.originals is None:
        return ["typed results: the scenario has no originals to detect in"]
    texts = [d.text for d in scn.originals]
    found, broke = _twice(cls, params, resources, lambda obj: obj.detect(list(texts)), "detect on valid texts")
    if broke:
        return broke
    spans = found[0]
    if not isinstance(spans, list) or len(spans) != len(texts) or not all(isinstance(x, list) for x in spans):
        return [f"typed results: detect must return one list of spans per text ({len(texts)} lists)"]
    out = [f"typed results: text {i}: {s!r} is not a labelled Span inside the text"
           for i, (text, spans_i) in enumerate(zip(texts, spans)) for s in spans_i
           if not (isinstance(s, Span) and s.label and 0 <= s.start < s.end <= len(text))][:5]
    if found[0] != found[1]:
        out.append("determinism: two instances with the same parameters found different spans")
    none, exc = _attempt(cls, params, resources, lambda obj: obj.detect([]))
    if exc is None and none != []:
        out.append("bad input: detect([]) must return []")
    return out + [f"bad input: {p}" for p in _refused(exc, "no texts", "return [] or refuse with an AnonauditError")]


_RUNNERS: dict[str, Callable[[type, Mapping[str, Any], Scenario, Any], list[str]]] = {
    "attack": _run_scoring, "metric": _run_scoring, "sanitizer": _run_sanitizer, "detector": _run_detector}
