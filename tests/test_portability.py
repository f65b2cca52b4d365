"""Runs on every OS: no POSIX-only module at import time, locks through ``filelock``, and a lock
that cannot be taken is a clear error (exit 2), never a traceback (issue 46)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from anonaudit.cli import main
from audit.core.errors import AnonauditError
from audit.core.files import locked
from anonaudit.demo.population import write as write_demo

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["audit", "attackers", "defenders", "reports", "anonaudit"]
#: modules that exist on POSIX only (or Windows only): importing one at module level stops the
#: whole package from importing on the other OS.
OS_ONLY = {"fcntl", "termios", "tty", "pty", "pwd", "grp", "resource", "posix", "syslog", "msvcrt", "winreg",
           "_winapi", "winsound"}


def _module_level_imports(tree: ast.Module):
    """Imports executed when the module is imported: top level, and inside top-level if/try."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            yield from (a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module.split(".")[0]
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    stack.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])


def test_no_os_specific_module_is_imported_at_module_level():
    offenders = []
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")) if (ROOT / pkg).is_dir() else []:
            tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
            offenders += [f"{f.relative_to(ROOT)}: {m}" for m in _module_level_imports(tree) if m in OS_ONLY]
    assert not offenders, offenders


def test_the_core_imports_and_locks_without_fcntl(tmp_path):
    """As on Windows: with ``fcntl`` unimportable the files module still imports and locks."""
    code = ("import sys; sys.modules['fcntl'] = None\n"
            "from audit.core import files\n"
            f"with files.locked({str(tmp_path / 'r.json')!r}): files.atomic_write({str(tmp_path / 'r.json')!r}, 'x')\n"
            "print('ok')")
    # filelock picks its backend at import; without fcntl it falls back to a soft lock
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    assert (tmp_path / "r.json").read_text() == "x"


def test_a_lock_path_that_is_a_folder_is_a_clear_error(tmp_path):
    (tmp_path / ".results.json.lock").mkdir()
    with pytest.raises(AnonauditError, match=r"cannot lock .*results\.json.*\.results\.json\.lock.*folder"):
        with locked(tmp_path / "results.json"):
            pass


def test_a_lock_in_a_folder_that_cannot_exist_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(AnonauditError, match="cannot lock"):
        with locked(tmp_path / "file" / "results.json"):
            pass


def test_the_cli_exits_2_when_the_results_lock_is_a_folder(tmp_path):
    write_demo(tmp_path / "d", n=4, seed=0)
    (tmp_path / ".results.json.lock").mkdir()
    res = CliRunner().invoke(main, ["attack", "phrase-search", "--originals", str(tmp_path / "d/originals.jsonl"),
                                    "--release", str(tmp_path / "d/releases/labels.jsonl"),
                                    "--out", str(tmp_path / "results.json")])
    assert res.exit_code == 2, res.output
    assert "cannot lock" in res.output and ".results.json.lock" in res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "results.json").exists()
