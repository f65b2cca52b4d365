"""Property-based fuzzing of the Python API: every public function's arguments, drawn by type.

The functions are found in ``anonaudit.__all__`` (and the methods of what they return:
``Results.gate``, ``report``, ``save``, ``get``, ``GateOutcome.write_junit``), and each call's
arguments are drawn from the function's own signature, by each argument's type hint: at most one
argument gets any value a Python user could pass, right or wrong (strings where a list of names
is expected, lists where a string is, negative, zero, huge, NaN and infinite numbers, booleans
for numbers, missing files, folders, the inputs as the output, tables with wrong columns, objects
of no use at all, numpy scalars as pandas hands them out, a registry that is not one), and the
others are left out or given a right value, so that a call often
gets past its arguments to the work behind them (a real phrase-search audit of the 3-person demo
population, a sanitizer, a report).

The rule, for every call (the command line's rule, ``tests/test_cli_fuzz.py``, for the API):
**a result or an** :class:`~audit.core.errors.AnonauditError` **that says what is wrong**:
never another exception (a ``TypeError`` from deep inside), an
:class:`~audit.core.errors.ArgumentError` always names the function and an argument the call
gave, and no input file is ever changed.

No model loads: as in the CLI fuzz test, every model load and Ray's start raise
:class:`HeavyWork` (a ``BaseException`` nothing catches), which counts as success (the call
validated its arguments and reached the real work). Examples per function:
``ANONAUDIT_API_FUZZ_EXAMPLES`` (default 10).
"""

from __future__ import annotations

import hashlib
import inspect
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the fuzz suite needs hypothesis: pip install -e '.[test]'")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import anonaudit  # noqa: E402
from audit.core.errors import AnonauditError, ArgumentError  # noqa: E402
from tests.test_cli_fuzz import HeavyWork, no_models, template  # noqa: E402,F401  (fixtures)

EXAMPLES = int(os.environ.get("ANONAUDIT_API_FUZZ_EXAMPLES", "10"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("ANONAUDIT_FUZZ_RANDOM"),
                suppress_health_check=list(HealthCheck), database=None, phases=[Phase.explicit, Phase.generate])

NAN, INF = math.nan, math.inf
ROWS = [{"id": "a", "text": "Alice Smith lives in Oslo.", "subject": "Alice Smith"},
        {"id": "b", "text": "Bob Jones works in Bergen.", "subject": "Bob Jones"},
        {"id": "c", "text": "Carol White was born in 1970.", "subject": "Carol White"}]
#: Values of no type in particular: every argument may get any of them.
ANYTHING = [None, "", "labels", "x", "ünï", -1, 0, 1, 3, 10**12, 1.5, NAN, INF, -INF, True, False, [], [""],
            ["labels"], ("phrase_search",), {}, {"x": 1}, b"bytes", object(), Path("missing.jsonl"),
            "missing.jsonl", "folder", "originals.jsonl/child.json"]
#: Good and bad values by what an argument holds (chosen by its hint or its name).
BY_KIND = {
    "int": [1, 2, 3, 20, np.int64(3), 0, -1, -5, 10**9, 2**40, 1.0, "3", NAN, True, np.int64(-1), np.bool_(True),
            np.float64(2.0)],
    "float": [0.5, 1.0, 30.0, np.float32(0.5), 0.0, -1.0, NAN, INF, -INF, 1e308, "1", True, np.float64("nan")],
    "bool": [True, False, np.bool_(False), 0, 1, "yes", None, np.int64(1)],
    "registry": [None, object(), "default", 3, {}, [None]],
    "str": ["labels", "phrase_search", "x", "", " ", "../evil", "a/b", "nosuch", 3, ["labels"], None],
    "names": [["labels"], ["suppressed", "labels"], ("labels",), [], "labels", "l", [1], ["nosuch"], None,
              {"labels": 1}],
    "mapping": [{}, {"phrase_search": 0.5}, {"rouge": 0.5}, {"phrase_search": NAN}, {"phrase_search": -1},
                {"phrase_search": "x"}, {"nosuch": 0.1}, {1: 0.1}, "phrase_search=0.5", [("phrase_search", 0.5)]],
    "path": ["new.json", "new.html", "sub/new.json", "results.json", "originals.jsonl", "audit.yaml", "folder",
             "missing/dir/x.json", "", Path("new2.json"), 5, None, b"new.json"],
    "data": ["originals.jsonl", "releases/labels.jsonl", ROWS, "missing.jsonl", "garbage.bin", "empty.jsonl", "folder",
             ROWS[:1], [], [{"text": 1}], [{"id": "a"}], [1, 2], "a", {"path": "originals.jsonl"},
             {"nope": 1}, 5, None],
    "releases": [{"labels": "releases/labels.jsonl"}, {"mine": ROWS}, ["releases/labels.jsonl"],
                 "releases/labels.jsonl", {"labels": "missing.jsonl"}, {"ner": {"sanitizer": "suppression"}},
                 {"x": {"sanitizer": "nosuch"}}, ROWS, "labels", {"": ROWS}, {"a/b": ROWS}, [], {}, 7],
    "components": ["phrase_search", ["phrase_search"], {"phrase_search": {"k": 3}}, {"phrase_search": {"k": -1}},
                   [{"name": "phrase_search", "params": "x"}], ["nosuch"], [1], "p", {"rouge": None}, [], None],
    "spec": ["audit.yaml", {"originals": "originals.jsonl", "releases": [{"name": "x", "path": "releases/labels.jsonl"}],
                            "attacks": ["phrase_search"], "gate": {"max": {"phrase_search": 0.5}}},
             "missing.yaml", "originals.jsonl", "folder", {"originals": "originals.jsonl"}, {"seed": -1}, [], 3],
}
DATA = {"originals", "background", "data", "tri", "release"}
COMPONENTS = {"attacks", "metrics"}
PATHS = {"path", "out", "reference"}
#: Inputs of the workspace that no call may change (results.json may be merged into).
INPUT_FILES = ("originals.jsonl", "background.jsonl", "releases/labels.jsonl", "releases/suppressed.jsonl",
               "audit.yaml", "spans.json", "originals.json")


#: The project's own number types, by the kind of number.
NUMBERS = {"Seed": "int", "PositiveInt": "int", "NonNegativeInt": "int", "DemoPeople": "int", "BenchPeople": "int",
           "Seconds": "float", "int": "int", "float": "float"}


def _kind(name: str, hint: str) -> str:
    """What an argument holds, from its hint (as written) and its name."""
    if "Sequence[str]" in hint or "Iterable[str]" in hint:
        return "names"
    if name in ("releases", "spec") or name in DATA:
        return {"releases": "releases", "spec": "spec"}.get(name, "data")
    if name in COMPONENTS:
        return "components"
    if name == "registry":
        return "registry"
    if name in PATHS or "PathLike" in hint:
        return "path"
    if "Mapping" in hint:
        return "mapping"
    first = hint.split("|")[0].strip()
    if first in NUMBERS:
        return NUMBERS[first]
    return first if first in ("bool", "str") else "any"


#: Arguments always given (a call without them does nothing worth fuzzing).
ALWAYS = ("originals", "releases")
#: How many values at the head of each pool are right for the argument (the rest are wrong).
GOOD = {"int": 5, "float": 4, "bool": 3, "registry": 1, "str": 3, "names": 3, "mapping": 2, "path": 3, "data": 3, "releases": 3,
        "components": 3, "spec": 2}


def _pool(p: inspect.Parameter, *, hostile: bool) -> list:
    kind = _kind(p.name, str(p.annotation))
    pool = BY_KIND.get(kind, [])
    if hostile:
        return pool + ANYTHING
    if p.default is not p.empty and p.name not in ALWAYS and kind != "components" \
            and (p.default is None or kind in ("str", "int", "float", "bool", "any")):
        return [p.default]  # a column's name, a count, an optional model: right as it is
    return pool[:GOOD.get(kind, 0)] or [None]


def draw_call(data, fn) -> dict:
    """Keyword arguments for ``fn``: at most one of them drawn from every value, right or wrong;
    the others left out or given a right value (so a call gets past its arguments often enough
    to reach the work behind them). Required arguments are always given."""
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.name not in ("self", "echo", "executor", "command", "source")
              and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    hostile = data.draw(st.sets(st.sampled_from([p.name for p in params]), max_size=1), label="wrong")
    kwargs = {}
    for p in params:
        if p.default is p.empty or p.name in hostile or p.name in ALWAYS \
                or data.draw(st.booleans(), label=f"give {p.name}"):
            pool = _pool(p, hostile=p.name in hostile)
            kwargs[p.name] = data.draw(st.sampled_from(pool), label=p.name)
    if "progress" in inspect.signature(fn).parameters:
        kwargs.setdefault("progress", False)
    return kwargs


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def check_call(template: Path, label: str, call, kwargs: dict) -> None:
    """Run ``call(ws, **kwargs)`` in a fresh copy of the workspace and apply the module's rule."""
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        shutil.copytree(template, ws, symlinks=True)
        before = {f: _digest(ws / f) for f in INPUT_FILES}
        cwd, home = os.getcwd(), os.environ.get("ANONAUDIT_HOME")
        os.chdir(ws)
        os.environ["ANONAUDIT_HOME"] = str(Path(tmp) / "home")
        shown = f"{label}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"[:600]
        try:
            call(ws, **kwargs)
        except HeavyWork:
            pass  # validated, and got as far as the real work
        except ArgumentError as exc:
            named = [k for k in kwargs if k in str(exc)]
            assert "anonaudit." in str(exc) and (named or "argument" in str(exc)), \
                f"an ArgumentError that names no argument given: {exc}\nfrom {shown}"
        except AnonauditError as exc:
            assert str(exc).strip(), f"an AnonauditError without a message from {shown}"
        except Exception as exc:  # noqa: BLE001 - the very thing this test looks for
            import traceback

            raise AssertionError(f"{type(exc).__name__} from {shown}:\n"
                                 + "".join(traceback.format_exception(exc))) from None
        finally:
            os.chdir(cwd)
            if home is None:
                os.environ.pop("ANONAUDIT_HOME", None)
            else:
                os.environ["ANONAUDIT_HOME"] = home
        for f, digest in before.items():
            assert _digest(ws / f) == digest, f"the input {f} changed: {shown}"


# --------------------------------------------------------------------------- the calls


def _function(name):
    return lambda ws, **kw: getattr(anonaudit, name)(**kw)


def _method(name):
    def call(ws, **kw):
        return getattr(anonaudit.load_results("results.json"), name)(**kw)
    return call


def _junit(ws, **kw):
    outcome = anonaudit.load_results("results.json").gate(max={"phrase_search": 0.5})
    return outcome.write_junit(**kw)


FUNCTIONS = ("audit", "attack", "utility", "sanitize", "run", "bench", "harden", "load_results", "sample_data")
CALLS = {name: (getattr(anonaudit, name), _function(name)) for name in FUNCTIONS}
CALLS.update({f"Results.{m}": (getattr(anonaudit.Results, m), _method(m)) for m in ("gate", "report", "save", "get")})
CALLS["GateOutcome.write_junit"] = (anonaudit.GateOutcome.write_junit, _junit)


def test_every_public_function_is_fuzzed():
    """A function added to the API is fuzzed, or this test says which one is not."""
    callables = {n for n in anonaudit.__all__ if inspect.isfunction(getattr(anonaudit, n))}
    assert callables <= set(FUNCTIONS), sorted(callables - set(FUNCTIONS))


@pytest.mark.parametrize("label", sorted(CALLS))
def test_api_fuzz(label, template, no_models):
    fn, call = CALLS[label]

    @FUZZ
    @given(data=st.data())
    def run(data):
        check_call(template, label, call, draw_call(data, fn))

    run()


@pytest.mark.parametrize("call, words", [
    (lambda r: r.gate(max={"phrase_search": 0.5}, releases="labels"), "releases='labels': must be a list of strings, not one string"),
    (lambda r: r.report("x.html", notes="abc"), "notes='abc': must be a list of strings"),
    (lambda r: r.report("x.html", max_documents=-1), "max_documents=-1: must be a whole number of at least 0"),
    (lambda r: anonaudit.bench(command="true", command_timeout=-1.0), "command_timeout=-1.0: must be a finite number above 0"),
    (lambda r: anonaudit.bench(command="true", command_timeout=NAN), "command_timeout=nan: must be a finite number"),
    (lambda r: anonaudit.bench(command="true", demo_people=1), "demo_people=1: must be a whole number of at least 3"),
    (lambda r: anonaudit.sample_data(n=0), "n=0: must be a whole number of at least 1"),
    (lambda r: anonaudit.audit(originals=ROWS, releases={"x": ROWS}, seed=-1), "seed=-1: must be a whole number of at least 0"),
    (lambda r: anonaudit.Budget(sample=0), "sample=0: must be a whole number"),
    (lambda r: anonaudit.audit(originals=ROWS, releases={"x": ROWS}, colour=1), "unexpected keyword argument 'colour'"),
    (lambda r: anonaudit.load_results(3), "path=3: must be a string or a path"),
])
def test_wrong_arguments_are_named_before_any_work(template, call, words, monkeypatch):
    """Issue 56: the API checks what the command line checks (one validator), and a string
    given for a list of names is refused, never read a character at a time ("release 'l' is not
    in the results")."""
    monkeypatch.chdir(template)
    results = anonaudit.load_results("results.json")
    with pytest.raises(ArgumentError, match=words):
        call(results)


def test_the_command_line_refuses_what_the_api_refuses(template, monkeypatch):
    from click.testing import CliRunner

    from anonaudit.cli import main

    monkeypatch.chdir(template)
    for argv, words in ((["attack", "phrase-search", "--originals", "originals.jsonl", "--release",
                          "releases/labels.jsonl", "--out", "x.json", "--seed", "-1"], "at least 0"),
                        (["bench", "--command", "true", "--timeout", "nan"], "finite number above 0"),
                        (["bench", "--command", "true", "--demo-people", "2"], "at least 3")):
        res = CliRunner().invoke(main, argv)
        assert res.exit_code == 2 and words in res.output, res.output
    assert not Path("x.json").exists()


def test_run_returns_the_verdict_of_the_specs_gate(template, monkeypatch):
    """Issue 56: ``anonaudit.run`` returned normally when the spec's gate failed, and said nothing
    of it. The verdict comes back with the results (the CLI's exit code is ``outcome.exit_code``)."""
    monkeypatch.chdir(template)
    spec = {"seed": 0, "originals": "originals.jsonl",
            "releases": [{"name": "labels", "path": "releases/labels.jsonl"}], "attacks": ["phrase_search"]}
    loose = anonaudit.run({**spec, "gate": {"max": {"phrase_search": 1.0}}}, progress=False)
    assert loose.outcome.passed and loose.outcome.exit_code == 0
    strict = anonaudit.run({**spec, "gate": {"max": {"phrase_search": 0.0}}}, progress=False)
    assert strict.outcome.status == "fail" and strict.outcome.exit_code == 1 and not strict.outcome
    assert [c.release for c in strict.outcome.failed] == ["labels"]
    assert anonaudit.run(spec, progress=False).outcome is None
