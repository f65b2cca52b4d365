"""numpy's CPU dispatch on AMD Zen 4 (audit.runtime.cpu): the command line starts numpy without its
AVX-512 sort there, keeps what the user chose, and the library says what to do when it is too late."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from audit.runtime import cpu

ZEN4 = {"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "17", "flags": "fpu avx2 avx512f avx512dq"}
ZEN3 = {**ZEN4, "flags": "fpu avx2"}  # the same family, no AVX-512
ZEN5 = {**ZEN4, "cpu family": "26"}
INTEL = {"vendor_id": "GenuineIntel", "cpu family": "6", "flags": "fpu avx2 avx512f"}


def test_cpuinfo_is_read_for_the_first_processor(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nflags\t\t: fpu avx512f\n\n"
                    "processor\t: 1\nvendor_id\t: Other\n")
    info = cpu.cpu_info(path)
    assert info["vendor_id"] == "AuthenticAMD" and cpu.is_zen4(info)
    assert cpu.cpu_info(tmp_path / "missing") == {}  # not Linux: nothing known, nothing changed


def test_only_zen4_with_numpy_2_4_gets_numpy_without_its_avx512_dispatch(monkeypatch):
    monkeypatch.delitem(sys.modules, "numpy", raising=False)  # as in a fresh process, before numpy is imported
    assert cpu.numpy_dispatch_setting({}, ZEN4, (2, 4)) == "X86_V4"
    assert cpu.numpy_dispatch_setting({}, ZEN4, (3, 0)) == "X86_V4"
    for info in (ZEN3, ZEN5, INTEL, {}):
        assert cpu.numpy_dispatch_setting({}, info, (2, 4)) is None
    assert cpu.numpy_dispatch_setting({}, ZEN4, (2, 3)) is None  # other feature names: left alone
    # what the user chose is kept
    assert cpu.numpy_dispatch_setting({"NPY_DISABLE_CPU_FEATURES": ""}, ZEN4, (2, 4)) is None
    assert cpu.numpy_dispatch_setting({"NPY_ENABLE_CPU_FEATURES": "X86_V4"}, ZEN4, (2, 4)) is None


def test_nothing_is_set_once_numpy_runs():
    import numpy  # noqa: F401  (running: a setting now would not be read, so none is made)

    assert cpu.numpy_dispatch_setting({}, ZEN4, (2, 4)) is None


def test_library_hint_names_the_setting_only_where_it_helps():
    hint = cpu.slow_sort_hint({}, ZEN4, (2, 4))
    assert hint and "NPY_DISABLE_CPU_FEATURES=X86_V4" in hint
    assert cpu.slow_sort_hint({"NPY_DISABLE_CPU_FEATURES": "AVX512_ICL X86_V4"}, ZEN4, (2, 4)) is None
    assert cpu.slow_sort_hint({}, INTEL, (2, 4)) is None and cpu.slow_sort_hint({}, ZEN4, (2, 2)) is None


def test_the_command_line_starts_numpy_as_this_machine_needs():
    """In a fresh process, importing the command line sets the variable exactly where this
    machine is a Zen 4 (numpy 2.4+), and numpy then runs without its AVX-512 sort; elsewhere
    the environment is left as it was."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPY_")}
    code = ("import os, json, anonaudit.cli, numpy\n"
            "try:\n    from numpy._core._multiarray_umath import __cpu_features__ as f\n"
            "except ImportError:  # numpy 1\n    from numpy.core._multiarray_umath import __cpu_features__ as f\n"
            "print(json.dumps([os.environ.get('NPY_DISABLE_CPU_FEATURES'), f.get('X86_V4')]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    value, avx512 = json.loads(out.stdout.strip().splitlines()[-1])
    info = cpu.cpu_info()
    major, minor = (int(x) for x in __import__("numpy").__version__.split(".")[:2])
    if cpu.is_zen4(info) and (major, minor) >= (2, 4):
        assert value == "X86_V4" and avx512 is False
    else:
        assert value is None


def test_index_builds_say_once_a_process_that_numpy_sorts_slowly_here(monkeypatch, caplog, tmp_path):
    import logging

    from audit.ngrams import NgramIndex
    from audit.ngrams import layout
    from audit.ngrams.shards import build_sharded

    monkeypatch.setattr(layout, "slow_sort_hint", lambda: "numpy sorts slowly here: set X")
    layout.hint_slow_sort.cache_clear()
    texts = ["The court heard the case of Anna Berg in Oslo.", "Anna Berg appealed in Bergen."] * 3
    with caplog.at_level(logging.WARNING, logger=layout.__name__):
        build_sharded(tmp_path / "idx", texts, shards=2)  # the sharded build says it too
        assert [r.getMessage() for r in caplog.records] == ["numpy sorts slowly here: set X"]
        NgramIndex.build(texts)
    assert len(caplog.records) == 1  # once a process
    layout.hint_slow_sort.cache_clear()
