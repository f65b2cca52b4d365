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
