"""Issue 43's probe, rerun from the outside (see tests/probe_issue43.py): 0 tracebacks, 0 silent-wrong."""

from __future__ import annotations

from tests.probe_issue43 import probe


def test_a_rerun_of_the_probe_gives_no_traceback_and_no_silent_wrong_result():
    rows, _ = probe()
    assert len(rows) >= 25
    bad = [f"{'TRACEBACK' if tb else 'WRONG'}: {name}: {wrong or ''}" for name, wrong, tb in rows if tb or wrong]
    assert not bad, "\n".join(bad)
