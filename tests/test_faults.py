"""Fault injection: ``anonaudit run`` killed with SIGKILL at random points, then run again.

A small audit (10 releases, an attack that asks a scripted LLM one question per document,
behind the real answer cache) runs in a child process that is killed with ``kill -9`` after a
seeded random delay, several times over, and is finally run to the end. After every kill:

* ``results.json`` is absent or valid (it is only ever replaced whole);
* in the later runs no pair whose results were already in ``results.json`` is evaluated
  again, and no question the cache had answered reaches the LLM again (a question in flight
  at the kill, asked but not yet stored, may be asked once more: at most one per kill).

The final results hold every pair.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from audit.core.results import ResultsFile
from anonaudit.demo.population import write as write_demo

ROOT = Path(__file__).resolve().parents[1]
RELEASES = [f"r{i}" for i in range(10)]

CHILD = r"""
import os, sys, time
from pathlib import Path

import audit.models.specs as specs
from audit.core import config
from audit.core.interfaces import Attack
from audit.core.registry import Registry
from audit.core.results import Result
from audit.models.answer_cache import CachedLLM
from audit.models.llm import ScriptedLLM
from audit.models.resources import resources_of

log = Path(sys.argv[2])


def note(line):
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


class SlowScript(ScriptedLLM):
    def _complete(self, request):
        time.sleep(0.03)
        question = request.messages[-1][1]
        note("call " + question)
        return "answer to " + question


def load_llm(spec=None, *, cache=True, cache_path=None, **kw):
    path = cache_path or config.subdir("cache") / "llm.sqlite"
    return CachedLLM(SlowScript(lambda r: "", identity="scripted-slow"), path, enabled=cache)


specs.load_llm = load_llm
specs.check_llm_spec = lambda spec: None  # "scripted" is this file's model


class Asker(Attack):
    name = "toy_asker"
    requires = frozenset({"originals"})

    def __init__(self, llm: str | None = None):
        self.llm = llm

    def evaluate(self, scenario, release):
        note("start " + release.name)
        llm = resources_of(self).llm(self.llm)
        answers = [llm.complete([{"role": "user", "content": f"{release.name}:{d.id}"}]) for d in release]
        note("end " + release.name)
        return [Result("attack", self.name, release.name, len(answers) / max(1, len(release)), None, len(release))]


reg = Registry()
reg._entry_points_loaded = True
reg.register("attack")(Asker)
from anonaudit.cli import main

main(["run", sys.argv[1], "--no-report"], obj={"registry": reg})
"""


def _lines(log: Path, kind: str) -> list[str]:
    if not log.exists():
        return []
    return [line.split(" ", 1)[1] for line in log.read_text(encoding="utf-8").splitlines()
            if line.startswith(kind + " ")]


def test_run_survives_kill_9_at_random_points(tmp_path):
    write_demo(tmp_path / "data", n=6, seed=2)
    spec = tmp_path / "audit.yaml"
    spec.write_text(yaml.safe_dump({
        "originals": "data/originals.jsonl", "out": "out",
        "releases": [{"name": r, "path": "data/releases/suppressed.jsonl"} for r in RELEASES],
        "attacks": ["toy_asker"], "models": {"llm": "scripted"}}), encoding="utf-8")
    log = tmp_path / "calls.log"
    results = tmp_path / "out" / "results.json"
    env = {**os.environ, "ANONAUDIT_HOME": str(tmp_path / "home"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def start() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", CHILD, str(spec), str(log)], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def start_over() -> None:  # fresh output and answer cache for the next kill point
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        shutil.rmtree(tmp_path / "home", ignore_errors=True)
        log.write_text("", encoding="utf-8")

    rng = random.Random(int(os.environ.get("ANONAUDIT_KILL_SEED", "17")))
    kills = 0
    saved_at_kill = []
    for _ in range(int(os.environ.get("ANONAUDIT_KILLS", "6"))):
        proc = start()
        # Let the child get past its imports (its first LLM call), then kill it at a random point.
        seen = len(_lines(log, "call"))
        deadline = time.time() + 60
        while proc.poll() is None and len(_lines(log, "call")) == seen and time.time() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 2.0))
        if proc.poll() is not None:
            assert proc.returncode == 0, proc.communicate()[1]
            start_over()
            continue  # it finished before the kill: nothing left to interrupt
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        done = set()
        if results.exists():
            rf = ResultsFile.load(results)  # never half a file, whatever the kill interrupted
            done = {r.release for r in rf.results}
        saved_at_kill.append(len(done))
        starts_before = len(_lines(log, "start"))
        calls_before = _lines(log, "call")
        # The next run must not evaluate again what was saved; checked once it has run.
        proc = start()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        again = set(_lines(log, "start")[starts_before:]) & done
        assert not again, f"pairs saved before the kill were computed again: {sorted(again)}"
        new_calls = _lines(log, "call")[len(calls_before):]
        repeated = [c for c in new_calls if c in set(calls_before)]
        assert len(repeated) <= 1, f"answered questions were asked again: {repeated}"
        final = ResultsFile.load(results)
        assert {r.release for r in final.results} == set(RELEASES) and all(r.value == 1.0 for r in final.results)
        start_over()
    print(f"killed {kills} times; pairs saved at each kill: {saved_at_kill} of {len(RELEASES)}")
    assert kills >= 3  # most runs were really interrupted, not finished before the kill
