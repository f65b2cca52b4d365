"""pyproject.toml names what exists: entry points import, package data matches the templates.

Modules move (issue 14 split the grab-bags); an entry point left behind only fails once the
package is installed again, far from the move that broke it. These checks read the source.
"""

from __future__ import annotations

import fnmatch
import importlib
import tomllib
from pathlib import Path

import pytest

from audit.core.registry import KIND_BASES, normalise

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
ENTRY_POINTS = [(group, name, target)
                for group, entries in PYPROJECT["project"]["entry-points"].items() if group.startswith("anonaudit.")
                for name, target in entries.items()]


@pytest.mark.parametrize("group,name,target", ENTRY_POINTS, ids=lambda v: str(v))
def test_entry_points_name_registered_components(group, name, target):
    kind = group.removeprefix("anonaudit.").removesuffix("s")
    module, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    assert issubclass(cls, KIND_BASES[kind]) and normalise(cls.name) == name


def test_package_data_ships_every_report_template():
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["reports"]
    templates = [p.relative_to(ROOT / "reports").as_posix() for p in (ROOT / "reports" / "templates").iterdir()]
    assert "templates/report.html" in templates
    for t in templates:
        assert any(fnmatch.fnmatch(t, pat) for pat in patterns), t


# --------------------------------------------------------------------------- the built wheel

#: What the wheel is built from (a copy: the build writes build/ and *.egg-info beside its source).
SOURCES = ["pyproject.toml", "README.md", *PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built offline with the environment's setuptools."""
    import shutil
    import subprocess
    import sys

    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        for path in ROOT.glob(name):
            if path.is_dir():
                shutil.copytree(path, src / path.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(path, src / path.name)
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-q", "-w", str(out), str(src)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (found,) = out.glob("anonaudit-*.whl")
    return found


def test_the_wheel_carries_the_templates_every_package_and_the_entry_points(wheel):
    import configparser
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        (ep_name,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = configparser.ConfigParser(delimiters=("=",))
        entry_points.optionxform = str  # type: ignore[assignment]
        entry_points.read_string(zf.read(ep_name).decode())
    templates = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "reports" / "templates").iterdir()
                       if p.is_file())
    assert templates and not [t for t in templates if t not in names], "templates missing from the wheel"
    packages = [pat.rstrip("*") for pat in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]]
    sources = sorted(p.relative_to(ROOT).as_posix() for pkg in packages if (ROOT / pkg).is_dir()
                     for p in (ROOT / pkg).rglob("*.py"))
    assert not [s for s in sources if s not in names], "modules missing from the wheel"
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/"))]
    assert dict(entry_points["console_scripts"]) == PYPROJECT["project"]["scripts"]
    for group, entries in PYPROJECT["project"]["entry-points"].items():
        assert dict(entry_points[group]) == entries, group
