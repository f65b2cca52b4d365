"""``anonaudit.bench()`` without ``out=`` writes nothing to disk (issue 59, item 2): the corpus,
the releases and the results stay in memory and come back in the returned object.

What counts as a write is observed through Python's audit hooks (PEP 578), which see every file
this process opens for writing (``open``, ``os.open``, sqlite), every folder it makes, every
rename, removal and temporary file or folder; the current folder and the temporary folder
(``$TMPDIR``) are also compared before and after, for writes no hook sees. Allowed: the shared
caches under ``ANONAUDIT_HOME`` (they are on, as in every run: a phrase index, parses), and
Python's own byte-code files (``__pycache__``), which a first import may write, and
``/dev/null`` (a child process's silenced output: nothing is kept). The one honest
exception is an external ``command=``: a program that reads a file and writes one; its two files
are in a temporary folder of their own, which is gone when the bench returns.

No language model is loaded: labels and suppression are the sanitizers, phrase search and
ROUGE-L the attack and the metric.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "regex_masker.py"
CHEAP = {"comparisons": ["suppression"], "attacks": ["phrase_search"], "metrics": ["rouge"], "progress": False}

#: The writes seen while a test watches (``None``: nobody watches). One hook for the process:
#: an audit hook cannot be removed.
_SEEN: list[tuple[str, str]] | None = None
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATH_EVENTS = {"os.truncate", "os.symlink", "os.link", "shutil.copyfile", "shutil.rmtree", "tempfile.mkstemp",
                "tempfile.mkdtemp"}


def _hook(event: str, args: tuple) -> None:
    if _SEEN is None:
        return
    found: list[tuple] = []  # (path, folder descriptor it is relative to, or None)
    if event == "open":
        path, mode, flags = args
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (mode is None and flags & _WRITE_FLAGS):
            found = [(path, None)]
    elif event == "sqlite3.connect":
        found = [(args[0], None)] if args and args[0] not in (":memory:", b":memory:", "") else []
    elif event == "os.rename":
        found = [(args[0], args[2]), (args[1], args[3])]
    elif event in ("os.remove", "os.rmdir"):
        found = [(args[0], args[1])]
    elif event in ("os.mkdir", "os.chmod"):
        found = [(args[0], args[2])]
    elif event in _PATH_EVENTS:
        found = [(args[0], None)]
    for path, folder in found:
        if isinstance(path, (str, bytes, os.PathLike)):
            path = os.fsdecode(path)
            if isinstance(folder, int) and folder >= 0 and not os.path.isabs(path):  # shutil.rmtree's
                path = os.path.join(os.readlink(f"/proc/self/fd/{folder}"), path)
            _SEEN.append((event, os.path.abspath(path)))


sys.addaudithook(_hook)


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _watched(monkeypatch, tmp_path: Path, call):
    """Run ``call`` in an empty current folder with a fresh ``$TMPDIR`` and ``ANONAUDIT_HOME``;
    ``(its value, the writes but those allowed (see the module doc), the temporary folder's and
    the current folder's files afterwards)``."""
    global _SEEN
    home, tmp, cwd = tmp_path / "home", tmp_path / "tmp", tmp_path / "cwd"
    for folder in (tmp, cwd):
        folder.mkdir()
    monkeypatch.setenv("ANONAUDIT_HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.chdir(cwd)
    _SEEN = []
    try:
        value = call()
        seen = _SEEN
    finally:
        _SEEN = None
    outside = [(e, p) for e, p in seen if not p.startswith(str(home) + os.sep) and p != str(home)
               and "__pycache__" not in Path(p).parts and p != os.devnull]
    return value, outside, _files(tmp) | {f"cwd/{f}" for f in _files(cwd)}


def test_a_bench_without_out_writes_nothing_and_returns_everything_in_memory(monkeypatch, tmp_path):
    import anonaudit

    data = anonaudit.sample_data(n=5, seed=0)
    board, writes, left = _watched(monkeypatch, tmp_path, lambda: anonaudit.bench(
        "labels", anonaudit.Spec(background=data["background"], releases={"given": data["releases"]["suppressed"]}),
        originals=data["originals"], **CHEAP))
    assert writes == [] and left == set()
    assert board.out is None and board.results.path is None
    names = {r.name for r in board.leaderboard.rows}
    assert names == {"labels", "suppression", "given"}
    # each release's sanitized texts came back in memory, recorded as data in memory, not as a file
    releases = board.results.provenance["releases"]
    assert set(releases) == names
    for name, info in releases.items():
        assert info["source"].startswith("<in memory>") and info["path"] in board.results.copies
    assert {(r.name, r.release) for r in board.results.results} >= {("phrase_search", n) for n in names}
    assert "[" in board.results.copies[releases["labels"]["path"]].decode()  # the labels' placeholders


def test_a_command_without_out_writes_only_its_two_files_in_a_folder_removed_after(monkeypatch, tmp_path):
    """An external sanitizer reads a file and writes one: the only writes, in one temporary folder
    made for the call and gone when the bench returns."""
    import anonaudit

    command = f"{sys.executable} {EXAMPLE} {{input}} {{output}}"
    board, writes, left = _watched(monkeypatch, tmp_path, lambda: anonaudit.bench(
        command=command, name="regex", demo_people=4, **CHEAP))
    assert left == set()  # the command's folder is gone
    folders = [p for e, p in writes if e == "tempfile.mkdtemp"]
    assert len(folders) == 1 and Path(folders[0]).parent == tmp_path / "tmp"
    assert Path(folders[0]).name.startswith("anonaudit-command-")
    assert all(p == folders[0] or p.startswith(folders[0] + os.sep) for _, p in writes), writes
    assert board.out is None and {r.name for r in board.leaderboard.rows} == {"regex", "suppression"}
