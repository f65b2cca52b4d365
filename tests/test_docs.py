"""The API reference builds from the docstrings with warnings as errors (``mkdocs build
--strict``, mkdocs.yml), and the newcomer's pages the README links to exist and link back."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_api_reference_builds_with_warnings_as_errors(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("audit", "attack", "utility", "sanitize", "run", "bench", "harden"):  # every API function is documented
        assert re.search(rf'id="anonaudit\.\w+\.{name}"', api + (tmp_path / "site" / "bench" / "index.html").read_text()), name
    assert "check_component" in (tmp_path / "site" / "plugins" / "index.html").read_text()


def test_the_readme_links_the_glossary_first_and_contributing():
    readme = (ROOT / "README.md").read_text()
    contents = readme[readme.index("## Contents"):]
    first = re.search(r"\]\(([^)]+)\)", contents).group(1)
    assert first == "docs/glossary.md"
    assert "(CONTRIBUTING.md)" in readme
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    terms = re.findall(r"^\*\*([^*]+)\.\*\*", glossary, flags=re.M)  # each entry opens with its term in bold
    for word in ("TRIR", "TPI", "TPS", "IC", "NMI", "Linkage", "Leakage"):
        assert any(re.search(rf"\b{word}\b", t) for t in terms), word
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    for role in ("anonaudit.attacks", "anonaudit.sanitizers", "anonaudit.metrics", "anonaudit.detectors"):
        assert role in contributing and role in (ROOT / "pyproject.toml").read_text()


def test_the_benchmarks_readme_stays_a_page_of_latest_figures():
    """benchmarks/README.md holds the latest figure per question, ordered by capability, with a
    headline table first; history lives in git. Issue 59 set its size at 1,200 lines at most."""
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines <= 1200, f"benchmarks/README.md has {lines} lines (at most 1,200): condense, history is in git"
    assert "## Headline figures" in text[:3000], "the headline table comes first"
