"""Bounded work (issue 67, item 5): an external command has a default timeout that its message
names; SIGTERM stops the bench and the command's whole process group as Ctrl-C does (no orphan);
``--time-limit`` is enforced, the calibration included, not only estimated; a closed stdout pipe
ends a command quietly. No model is loaded (phrase search and ROUGE-L on the demo population).

Cost: about 25 s on 2 cores, most of it the three real ``anonaudit`` processes of the signal test
(each imports the package and starts a bench before the signal) and the 6-second limit of the
resumed run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from anonaudit.cli import main

CHEAP = ["--attacks", "phrase_search", "--metrics", "rouge", "--demo-people", "3", "--compare", "none"]
LINUX = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc (Linux)")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie no one reaps counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _gone(pids: list[int], within: float = 5.0) -> list[int]:
    """The processes of ``pids`` still running after ``within`` seconds; those are then killed
    (this test's own processes: a failing test leaves no orphan behind)."""
    deadline = time.monotonic() + within
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if alive(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def _hanging_command(tmp_path: Path, deaf: bool = False) -> tuple[str, Path]:
    """A sanitizer command that starts a child, writes both pids, and never ends (neither does the
    child, which with ``deaf`` ignores SIGTERM and SIGINT)."""
    script, pids = tmp_path / "forever.py", tmp_path / "pids"
    child = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
             "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)" if deaf else "import time; time.sleep(600)")
    script.write_text("import os, subprocess, sys, time\n"
                      f"child = subprocess.Popen([sys.executable, '-c', {child!r}])\n"
                      "open(sys.argv[3] + '.tmp', 'w').write(f'{os.getpid()} {child.pid}')\n"
                      "os.replace(sys.argv[3] + '.tmp', sys.argv[3])\n"
                      "time.sleep(600)\n", encoding="utf-8")
    return f"{sys.executable} {script} {{input}} {{output}} {pids}", pids


def test_a_command_without_a_timeout_gets_the_default_and_the_message_names_it(tmp_path, monkeypatch):
    from audit.pipeline import external

    monkeypatch.setattr(external, "DEFAULT_COMMAND_TIMEOUT", 1.0)
    command, pids = _hanging_command(tmp_path)
    res = CliRunner().invoke(main, ["bench", "--command", command, *CHEAP, "--out", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    assert "still running after 1 s (the default limit of an external command; give another with --timeout" \
        in res.output, res.output
    assert not _gone([int(p) for p in pids.read_text().split()])


@LINUX
def test_the_time_limit_stops_a_hung_command_during_the_calibration(tmp_path):
    command, pids = _hanging_command(tmp_path)
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["bench", "--command", command, "--timeout", "30", "--time-limit", "0.05",
                                    *CHEAP, "--out", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    orphans = _gone([int(p) for p in pids.read_text().split()])
    assert "the time limit of 0.05 min (--time-limit) was reached" in res.output, res.output
    assert time.monotonic() - t0 < 25
    assert not orphans, "a process the command started still runs"


def test_the_limit_interrupts_work_that_catches_every_exception_and_restores_the_timer_before():
    from audit.runtime.deadline import TimeLimitReached, enforced

    def stubborn():
        while True:
            try:
                time.sleep(0.01)
            except Exception:  # noqa: BLE001 - a component that swallows its errors cannot hide the limit
                pass

    signal.setitimer(signal.ITIMER_REAL, 100.0)  # as pytest-timeout's would be
    try:
        with pytest.raises(TimeLimitReached, match=r"0\.01 min \(--time-limit\)"), enforced(0.01):
            stubborn()
        assert 90 < signal.getitimer(signal.ITIMER_REAL)[0] <= 100
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)



@pytest.mark.parametrize("minutes", [float("inf"), 1e12])
def test_a_limit_beyond_the_timer_is_no_limit_not_an_overflow(minutes):
    """``--time-limit inf`` (and a limit longer than the interval timer holds) runs the block with
    no timer; it was an OverflowError from setitimer (found by tests/test_cli_fuzz.py)."""
    from audit.runtime.deadline import enforced

    with enforced(minutes):
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0

@LINUX
@pytest.mark.parametrize("sig,code,deaf", [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, False),
                                           (signal.SIGTERM, 143, True)],
                         ids=["SIGTERM", "SIGINT", "SIGTERM-a-child-that-ignores-it"])
def test_a_signal_stops_the_bench_and_every_process_of_its_command(tmp_path, sig, code, deaf):
    command, pids = _hanging_command(tmp_path, deaf)
    proc = subprocess.Popen([sys.executable, "-c", "from anonaudit.cli import main; main()", "bench", "--command",
                             command, *CHEAP, "--out", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not pids.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pids.exists(), proc.communicate(timeout=30)
        started = [int(p) for p in pids.read_text().split()]
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    orphans = _gone(started)
    assert proc.returncode == code, err
    assert "finished work is saved" in err and "Traceback" not in err, err
    assert not orphans, "the command or its child outlived the bench (an orphan)"


@pytest.mark.parametrize("args", [["gate", "--help"], ["data", "validate", "{docs}"]], ids=["help", "validate"])
def test_a_closed_pipe_ends_the_command_quietly(tmp_path, args):
    """``anonaudit gate ... | head -1``: the reader is gone before the command writes; it used to
    exit 2 with a message about disk space."""
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "a", "text": "Some text."}\n', encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-c", "from anonaudit.cli import main; main()",
                             *[a.format(docs=docs) for a in args]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    proc.stdout.close()  # the reader left before the first line
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141, err
    assert err == "", err


@pytest.mark.timeout(120)  # without an enforced limit the metric would hang: a failure, not a hung suite
def test_a_run_stopped_by_its_limit_keeps_what_finished_and_resumes(tmp_path, monkeypatch):
    """A metric that is quick on the calibration's few documents and hangs on the whole release (and
    swallows every exception): the estimate passes, the limit stops it, the metric that finished is
    saved, and a re-run reuses it. Cost: the limit, 6 s, and the re-run (about 1 s)."""
    import anonaudit
    from anonaudit.demo.population import write as write_demo
    from audit.core.errors import AnonauditError
    from audit.runtime.deadline import TimeLimitReached
    from tests.test_hostile import Kept, toy_registry

    class Stubborn(Kept):
        name = "toy_stubborn"
        hang = True

        def evaluate(self, scenario, release):
            while self.hang and len(release) > 5:  # the calibration's slices hold 2 and 3 documents
                try:
                    time.sleep(0.01)
                except Exception:  # noqa: BLE001, S110 - a plugin that swallows errors cannot hide the limit
                    pass
            return super().evaluate(scenario, release)

    write_demo(tmp_path, n=8, seed=0)
    reg = toy_registry()
    reg.register("metric")(Stubborn)
    spec = {"originals": str(tmp_path / "originals.jsonl"), "out": str(tmp_path / "out"),
            "releases": [{"name": "labels", "path": str(tmp_path / "releases" / "labels.jsonl")}],
            "metrics": ["toy_kept", "toy_stubborn"]}
    with pytest.raises(TimeLimitReached, match=r"time limit of 0\.1 min \(--time-limit\) was reached") as err:
        anonaudit.run(spec, registry=reg, progress=False, time_limit=0.1)
    assert isinstance(err.value, AnonauditError)
    saved = anonaudit.load_results(tmp_path / "out" / "results.json")
    assert [(r.name, r.release) for r in saved.results] == [("toy_kept", "labels")]
    monkeypatch.setattr(Stubborn, "hang", False)
    again = anonaudit.run(spec, registry=reg, progress=False)
    assert sorted(r.name for r in again.results) == ["toy_kept", "toy_stubborn"]
    assert len(again.reused) == 1 and len(again.computed) == 1
