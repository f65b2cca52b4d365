"""The run's shared resources (audit.models.resources), atomic writes and file hashes
(audit.core.files), and the one provenance builder (audit.pipeline.provenance). No models."""

from __future__ import annotations

import hashlib
import json

import pytest

from audit.core.files import atomic_open, atomic_write, atomic_write_json, sha256_file
from audit.core.interfaces import Attack
from audit.models.answer_cache import CachedLLM
from audit.models.llm import ScriptedLLM
from audit.models.resources import Resources, resources_of


class Backend(ScriptedLLM):
    closed = 0

    def close(self):
        type(self).closed += 1


@pytest.fixture
def loads(monkeypatch, tmp_path):
    """``audit.models.specs.load_llm`` replaced by a cached scripted backend; returns the specs loaded."""
    seen: list = []

    def fake_load_llm(spec=None, *, cache=True, cache_path=None, **kw):
        seen.append((spec, cache))
        return CachedLLM(Backend(lambda r: "answer", identity=f"fake:{spec}"), tmp_path / "llm.sqlite", enabled=cache)

    monkeypatch.setattr("audit.models.specs.load_llm", fake_load_llm)
    monkeypatch.setattr("audit.models.specs.check_llm_spec", lambda spec: None)  # every fake spec is known
    Backend.closed = 0
    return seen


def test_one_llm_per_spec_shared_and_closed_once(loads, tmp_path):
    res = Resources(llm_cache_path=tmp_path / "llm.sqlite")
    a = res.llm("x")
    assert res.llm("x") is a and res.llm(None) is not a and loads == [("x", True), (None, True)]
    uncached = res.llm("x", cache=False)  # another cache setting shares the loaded backend
    assert uncached is not a and uncached.backend is a.backend and len(loads) == 2
    a.complete([{"role": "user", "content": "hi"}])
    a.complete([{"role": "user", "content": "hi"}])
    assert res.llm_stats() == {"hits": 1, "misses": 1, "backend_calls": 1}
    given = ScriptedLLM(["x"])
    assert res.llm(given) is given  # an object passes through and is never closed here
    res.close()
    assert Backend.closed == 2  # the two loaded backends, each once
    res.close()
    assert Backend.closed == 2


def test_spacy_embedder_and_shared_state(monkeypatch):
    res = Resources()
    nlp = res.spacy(disable=("ner",))
    assert res.spacy(disable=["ner"]) is nlp and res.spacy() is not nlp
    assert res.spacy(disable=("ner",), enable=("senter",)).enable == ("senter",)
    made = []
    monkeypatch.setattr("audit.models.embed.Embedder",
                        lambda model=None, cache=False, precision="fp32": made.append((model, cache, precision))
                        or object())
    e = res.embedder()
    assert res.embedder("minilm") is e and res.embedder(cache=True) is not e
    assert res.embedder(precision="bf16") is not e  # one embedder per precision: vectors differ
    assert made == [(None, False, "fp32"), (None, True, "fp32"), (None, False, "bf16")]
    custom = object()
    assert res.embedder(custom) is custom

    class Closable:
        closed = False

        def close(self):
            self.closed = True

    thing = res.shared("k", Closable)
    assert res.shared("k", Closable) is thing
    res.close()
    assert thing.closed and res.shared("k", Closable) is not thing


class Probe(Attack):
    name = "probe"

    def __init__(self, llm: str | None = None, seed: int = 0, progress: bool = False):
        self.llm = llm
        self.seed = seed
        self.progress = progress

    def evaluate(self, scenario, release):  # pragma: no cover
        return []


def test_a_component_alone_gets_private_resources_that_close_releases(loads):
    probe = Probe(llm="x", seed=7)
    res = resources_of(probe)
    assert res.seed == 7 and resources_of(probe) is res
    res.llm("x")
    probe.close()
    assert Backend.closed == 1 and probe.resources is None
    with Resources(seed=1) as shared:
        probe = Probe().use(shared)
        assert resources_of(probe) is shared
        shared.llm("x")
        probe.close()  # given, not owned: stays open
        assert Backend.closed == 1 and probe.resources is shared
    assert Backend.closed == 2


def test_atomic_writes_and_hash(tmp_path):
    p = atomic_write(tmp_path / "sub" / "a.txt", "héllo\n")
    assert p.read_text(encoding="utf-8") == "héllo\n"
    assert sha256_file(p) == hashlib.sha256("héllo\n".encode()).hexdigest()
    atomic_write(p, b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01"
    atomic_write_json(tmp_path / "d.json", {"k": "é", "n": [1]})
    assert (tmp_path / "d.json").read_text(encoding="utf-8") == '{\n "k": "é",\n "n": [\n  1\n ]\n}\n'
    with pytest.raises(ValueError):
        atomic_write_json(tmp_path / "d.json", {"x": float("nan")})
    assert json.loads((tmp_path / "d.json").read_text())["k"] == "é"  # the old file is intact
    with pytest.raises(RuntimeError), atomic_open(p, "wb") as fh:
        fh.write(b"half")
        raise RuntimeError("interrupted")
    assert p.read_bytes() == b"\x00\x01"
    assert sorted(f.name for f in tmp_path.rglob("*")) == ["a.txt", "d.json", "sub"]  # no temporary left


def test_one_provenance_layout_for_runs_and_commands(tmp_path):
    from audit.pipeline.provenance import build_provenance, input_record

    f = tmp_path / "o.jsonl"
    f.write_text("x")
    prov = build_provenance(command="attack trir", started=0.0, params={"k": (1, 2)},
                            inputs={"originals": input_record(f)}, extra={"trir": {"a": 1}})
    assert list(prov)[:3] == ["tool", "version", "command"] and prov["params"] == {"k": [1, 2]}
    assert prov["inputs"]["originals"] == {"path": str(f), "sha256": sha256_file(f)} and prov["trir"] == {"a": 1}
    assert "seed" not in prov and "pairs" not in prov  # no spec, no run: those keys are left out


def test_the_runner_records_each_component_share_of_the_shared_llm(loads, tmp_path):
    from audit.core.registry import Registry
    from audit.core.results import Result, ResultsFile
    from anonaudit.demo.population import write
    from audit.pipeline.runner import Audit, parse_spec

    class Asker(Attack):
        name = "toy_asker"

        def __init__(self, llm: str | None = None, questions: int = 1):
            self.llm = llm
            self.questions = questions

        def evaluate(self, scenario, release):
            llm = resources_of(self).llm(self.llm)
            for i in range(self.questions):
                llm.complete([{"role": "user", "content": f"q{i}"}])
            return [Result("attack", self.name, release.name, 0.0, None, len(release))]

    class Other(Asker):
        name = "toy_other"

    reg = Registry()
    reg._entry_points_loaded = True
    reg.register("attack")(Asker)
    reg.register("attack")(Other)
    write(tmp_path / "data", n=4, seed=0)
    spec = parse_spec({"originals": "data/originals.jsonl", "out": "out", "models": {"llm": "m"},
                       "releases": [{"name": "s", "path": "data/releases/suppressed.jsonl"}],
                       "attacks": [{"name": "toy_asker", "questions": 2}, "toy_other"]},
                      base=tmp_path, registry=reg)
    Audit(spec, registry=reg, progress=False, echo=None).run()
    comps = ResultsFile.load(tmp_path / "out" / "results.json").provenance["components"]
    assert loads == [("m", True)] and Backend.closed == 1  # loaded once for both, released at the end
    assert comps["attack:toy_asker"]["stats"]["llm_cache"]["misses"] == 2
    assert comps["attack:toy_other"]["stats"]["llm_cache"] == {"hits": 1, "misses": 0, "backend_calls": 0}
