"""The API's arguments as pandas and numpy hand them out, and parameters given twice (issue 67,
item 7): numpy integers, floats and bools are accepted wherever Python's are (and checked as their
value is); a parameter given as a keyword and in ``params=`` with two values is refused naming
both; a registry that is not one is an ArgumentError, never an AttributeError. The contract
harness over every public function is ``tests/test_api_fuzz.py``, which draws numpy scalars too.

Model-free: phrase search on three invented documents. Cost: about 3 s."""

from __future__ import annotations

import numpy as np
import pytest

import anonaudit
from audit.core.errors import AnonauditError, ArgumentError

ROWS = [{"id": "a", "text": "Alice Smith lives in Oslo near the old harbour.", "subject": "Alice Smith"},
        {"id": "b", "text": "Bob Jones works in Bergen at the fish market.", "subject": "Bob Jones"},
        {"id": "c", "text": "Carol White was born in 1970 in Tromso.", "subject": "Carol White"}]
MASKED = [{**r, "text": r["text"].replace(r["subject"], "[PERSON]")} for r in ROWS]


def _figures(results):
    return [(r.release, r.name, r.value, r.n) for r in results.results]


def test_numpy_scalars_are_plain_values_inside_containers_too():
    from audit.core.arguments import plain

    assert plain(np.int64(3)) == 3 and type(plain(np.int64(3))) is int
    assert type(plain(np.float32(0.5))) is float and plain(np.bool_(True)) is True
    given = {"k": [np.int64(2), (np.float64(1.5),)], "x": "y"}
    out = plain(given)
    assert out == {"k": [2, (1.5,)], "x": "y"} and type(out["k"][0]) is int
    same = {"k": [2], "x": "y"}
    assert plain(same) is same  # nothing to change: the very object


def test_numpy_integers_floats_and_bools_are_accepted_as_ints_floats_and_bools():
    assert anonaudit.sample_data(n=np.int64(3), seed=np.uint32(1)) == anonaudit.sample_data(n=3, seed=1)
    plain_run = anonaudit.attack("phrase_search", {"masked": MASKED}, originals=ROWS, seed=0, sample=2,
                                 params={"k": 2}, progress=False)
    numpy_run = anonaudit.attack("phrase_search", {"masked": MASKED}, originals=ROWS, seed=np.int64(0),
                                 sample=np.int32(2), params={"k": np.int64(2)}, progress=np.bool_(False))
    assert _figures(numpy_run) == _figures(plain_run)
    assert numpy_run.gate(max={"phrase_search": np.float32(1.0)}).passed


@pytest.mark.parametrize("call, words", [
    (lambda: anonaudit.sample_data(n=np.bool_(True)), "n=True: must be a whole number"),
    (lambda: anonaudit.sample_data(seed=np.int64(-1)), "seed=-1: must be a whole number of at least 0"),
    (lambda: anonaudit.bench(command="true", command_timeout=np.float64("nan")), "command_timeout=nan"),
])
def test_numpy_scalars_are_checked_as_their_values_are(call, words):
    with pytest.raises(ArgumentError, match=words):
        call()


@pytest.mark.parametrize("call, words", [
    (lambda: anonaudit.attack("phrase_search", {"m": MASKED}, originals=ROWS, params={"k": 3}, k=4),
     "'k' is given twice with two values: params={'k': 3} and k=4"),
    (lambda: anonaudit.sanitize("labels", ROWS, params={"template": "[{label}]"}, template="<{label}>"),
     "'template' is given twice with two values: params={'template': '[{label}]'} and template='<{label}>'"),
    (lambda: anonaudit.sanitize("intact", ROWS, params={"seed": 5}, seed=3),
     "seed is given twice with two values: seed=3 and params={'seed': 5}"),
])
def test_one_parameter_given_two_values_is_refused_naming_both(call, words):
    with pytest.raises(ArgumentError) as err:
        call()
    assert words in str(err.value), err.value


def test_one_parameter_given_twice_with_one_value_is_fine():
    once = anonaudit.attack("phrase_search", {"m": MASKED}, originals=ROWS, params={"k": 2}, progress=False)
    twice = anonaudit.attack("phrase_search", {"m": MASKED}, originals=ROWS, params={"k": 2}, k=2, progress=False)
    assert _figures(once) == _figures(twice)


@pytest.mark.parametrize("registry", [object(), "default", 3, {}], ids=["object", "str", "int", "dict"])
@pytest.mark.parametrize("fn", ["audit", "attack", "sanitize", "run", "bench", "harden"])
def test_a_registry_that_is_not_one_is_an_argument_error(fn, registry, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = {
        "audit": lambda: anonaudit.audit(originals=ROWS, releases={"m": MASKED}, attacks=["phrase_search"],
                                         registry=registry),
        "attack": lambda: anonaudit.attack("phrase_search", {"m": MASKED}, originals=ROWS, registry=registry),
        "sanitize": lambda: anonaudit.sanitize("labels", ROWS, registry=registry),
        "run": lambda: anonaudit.run({"originals": ROWS, "releases": {"m": MASKED}, "attacks": ["phrase_search"]},
                                     registry=registry),
        "bench": lambda: anonaudit.bench("labels", demo_people=3, registry=registry),
        "harden": lambda: anonaudit.harden({"originals": ROWS, "releases": {"m": MASKED}}, "m", registry=registry),
    }
    with pytest.raises(AnonauditError) as err:
        calls[fn]()
    assert isinstance(err.value, ArgumentError) and "registry=" in str(err.value), err.value
    assert not any(tmp_path.iterdir()), "something was written before the registry was refused"


def _seeded_registry():
    from audit.core.data import Corpus, Document, Release
    from audit.core.interfaces import Sanitizer
    from audit.core.registry import Registry

    class Seeded(Sanitizer):
        """Appends its seed to every document.

        seed: the seed.
        progress: show progress."""

        name = "toy_seeded"

        def __init__(self, seed: int = 7, progress: bool = False):
            self.seed, self.progress = seed, progress

        def sanitize(self, corpus, *, name=None):
            docs = [Document(d.id, f"{d.text} seed={self.seed} progress={self.progress}") for d in corpus]
            return Release(name or "seeded", Corpus(docs))

    reg = Registry()
    reg._entry_points_loaded = True
    reg.register("sanitizer")(Seeded)
    return reg


def test_an_explicit_seed_of_zero_is_told_from_the_default():
    """``seed=0`` (and ``progress=False``) given as keywords beside another value in ``params``
    is refused naming both (the default, 0, used to hide the conflict and ``params`` won); left
    out, the seed is still 0, so no result changes (issue 67)."""
    reg = _seeded_registry()

    def text(**kw):
        return anonaudit.sanitize("toy_seeded", ROWS[:1], registry=reg, **kw)[0]["text"]

    for kw, words in (({"seed": 0, "params": {"seed": 5}}, "seed=0 and params={'seed': 5}"),
                      ({"progress": False, "params": {"progress": True}}, "progress=False and params={'progress': True}")):
        with pytest.raises(ArgumentError, match="given twice with two values") as err:
            text(**kw)
        assert words in str(err.value), err.value
    assert text().endswith("seed=0 progress=False")  # the default seed stays 0, not the class's 7
    assert text(seed=0) == text() and text(params={"seed": 0}, seed=0) == text()
    assert text(params={"seed": 5}).endswith("seed=5 progress=False") and text(seed=3).endswith("seed=3 progress=False")
    assert text(params={"progress": True}).endswith("progress=True")


def test_the_command_line_tells_an_explicit_seed_from_its_default(tmp_path):
    """``sanitize NAME --param seed=5`` uses 5 (``--seed`` left at its default); ``--seed 0``
    beside it is refused naming both, as the API refuses it."""
    import json

    from tests.test_hostile import clear_error, run

    reg = _seeded_registry()
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(ROWS[0]) + "\n", encoding="utf-8")
    base = ["sanitize", "toy-seeded", "--input", src, "--out", tmp_path / "out.jsonl", "--param", "seed=5"]
    res = run(reg, *base)
    assert res.exit_code == 0, res.output
    assert "seed=5" in (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    clear_error(run(reg, *base, "--seed", "0", "--force"), "seed=0 and params={'seed': 5}")


def _in_thread(call):
    """What ``call()`` returns or raises, run in a thread that is not the main one."""
    import threading

    box = {}

    def target():
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    worker = threading.Thread(target=target, name="worker")
    worker.start()
    worker.join(120)
    return box


def test_a_time_limit_that_cannot_be_enforced_is_refused_not_ignored(tmp_path, monkeypatch):
    """The limit is a SIGALRM timer, which only the main thread of a POSIX process receives:
    asked from another thread, or where there is no SIGALRM, the API raises an AnonauditError
    saying so before any work or write (it used to run on with no limit); no limit runs there as
    before. Cost: ~1 s."""
    from audit.runtime import deadline

    out = tmp_path / "r" / "results.json"
    attack = lambda **kw: anonaudit.attack("phrase_search", {"m": MASKED}, originals=ROWS, progress=False, **kw)  # noqa: E731
    limited = anonaudit.Spec(budget=anonaudit.Budget(time_limit=5))
    box = _in_thread(lambda: attack(spec=limited, out=out))
    assert isinstance(box.get("error"), AnonauditError), box
    assert "main thread" in str(box["error"]) and "time_limit" in str(box["error"]) and not out.parent.exists()
    spec = anonaudit.Spec(attacks=["phrase_search"], metrics=["rouge"], budget=anonaudit.Budget(time_limit=5))
    box = _in_thread(lambda: anonaudit.bench("labels", spec, demo_people=3, out=tmp_path / "b", progress=False))
    assert isinstance(box.get("error"), AnonauditError) and "main thread" in str(box["error"]), box
    assert not (tmp_path / "b").exists()
    assert _figures(_in_thread(lambda: attack())["value"]) == _figures(attack())  # no limit: as before
    monkeypatch.setattr(deadline, "platform_has_timer", lambda: False)  # Windows: no SIGALRM, main thread or not
    with pytest.raises(AnonauditError, match="SIGALRM"):
        attack(spec=limited)


def test_utility_with_an_empty_list_of_metrics_names_metrics():
    """``utility(metrics=[])`` is refused naming ``metrics=`` (it blamed the spec's ``attacks``)."""
    with pytest.raises(ArgumentError, match=r"anonaudit.utility\(\): metrics=\[\]") as err:
        anonaudit.utility(ROWS, {"m": MASKED}, metrics=[], progress=False)
    assert "attacks" not in str(err.value)
