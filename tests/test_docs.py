"""The user guide: the site builds with warnings as errors (``mkdocs build --strict``: a broken
link or anchor, a page left out of the nav or a docstring that does not render fails), its
command-line reference is generated from the click definitions, the README stays a front page,
and every page spells out the glossary's terms where it first uses them. Every command and code
block of the pages runs in tests/test_readme.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: The glossary's terms, each with the words that spell it out (lower case): where a page first
#: uses the term (outside code), those words stand earlier on the page or in the same paragraph
#: (for linkage and leakage, the word their definition turns on: a document's source, its original).
TERMS = {
    "TRIR": ("re-identification risk",),
    "TPI": ("preserved", "information"),
    "TPS": ("preserved", "similarity"),
    "IC": ("information content",),
    "NMI": ("mutual information",),
    "linkage": ("source",),
    "leakage": ("original",),
}


def pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def test_the_guide_builds_with_warnings_as_errors(site):
    api = (site / "api" / "api.html").read_text() + (site / "api" / "bench.html").read_text()
    for name in ("audit", "attack", "utility", "sanitize", "run", "bench", "harden"):  # every API function is documented
        assert re.search(rf'id="anonaudit\.\w+\.{name}"', api), name
    assert "check_component" in (site / "api" / "plugins.html").read_text()
    for page in ("index", "tutorials/officer", "tutorials/researcher", "tutorials/ci", "figures", "reference/cli"):
        assert (site / f"{page}.html").is_file(), page


def test_the_command_reference_is_generated_from_every_command_and_option(site):
    import click

    html = (site / "reference" / "cli.html").read_text()
    commands = _commands()
    for path, cmd in commands:
        if len(path) > 1:
            assert f"<h2 id=\"{'-'.join(path)}\"" in html, " ".join(path)
        for param in cmd.params:
            if not isinstance(param, click.Option) or param.hidden:  # hidden: kept for older scripts only
                continue
            for opt in getattr(param, "opts", []):
                assert opt in html, f"{' '.join(path)} {opt}"
    assert len(commands) >= 25


def test_the_readme_is_a_front_page():
    text = README.read_text(encoding="utf-8")
    assert text.count("\n") <= 250, "README.md is the front page (<= 250 lines): move detail into docs/"
    assert not re.search(r"\bissues? \d+|#\d{2,}\b", text), "no issue numbers on the front page"
    assert not re.search(r"`[0-9a-f]{7,40}`|\bcommit\b", text), "no commit hashes on the front page"
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "no dated measurements: figures live in benchmarks/README.md"
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
    for needed in ("docs/glossary.md", "CONTRIBUTING.md", "benchmarks/README.md", "docs/tutorials/officer.md",
                   "docs/tutorials/researcher.md", "docs/tutorials/ci.md", "docs/reference/cli.md"):
        assert f"]({needed}" in text, needed
    assert re.search(r"!\[[^]]+\]\(docs/report-\w+\.png\)", text), "one picture of the report"
    # the second set-up command is exactly what CI runs (.ci/run, on a clean clone)
    tests = re.search(r"^(pip install torch.*pytest -n 2)$", text, flags=re.M).group(1)
    assert tests in (ROOT / ".ci" / "run").read_text()


def _prose(text: str) -> str:
    """A page without its code (fenced blocks, inline code, link targets and HTML comments)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def test_every_page_spells_out_a_term_where_it_first_uses_it():
    problems = []
    for page in pages():
        prose = _prose(page.read_text(encoding="utf-8"))
        for term, words in TERMS.items():
            flags = 0 if term.isupper() else re.I
            m = re.search(rf"\b{term}\b", prose, flags)
            if not m:
                continue
            end = prose.find("\n\n", m.start())
            paragraph_end = len(prose) if end < 0 else end
            before = re.sub(r"\s+", " ", prose[:paragraph_end].lower())  # words broken across lines
            if not all(w in before for w in words):
                problems.append(f"{page.relative_to(ROOT)}: {term} (line {prose[:m.start()].count(chr(10)) + 1}) "
                                f"without {' and '.join(words)} before it or in its paragraph")
    assert not problems, "spell out each term where a page first uses it:\n" + "\n".join(problems)


def test_the_glossary_defines_every_term_and_contributing_names_the_roles():
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    terms = re.findall(r"^\*\*([^*]+)\.\*\*", glossary, flags=re.M)  # each entry opens with its term in bold
    for word in ("TRIR", "TPI", "TPS", "IC", "NMI", "Linkage", "Leakage"):
        assert any(re.search(rf"\b{word}\b", t) for t in terms), word
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    for role in ("anonaudit.attacks", "anonaudit.sanitizers", "anonaudit.metrics", "anonaudit.detectors"):
        assert role in contributing and role in (ROOT / "pyproject.toml").read_text()


def test_the_guide_never_sends_the_user_to_a_model_hub():
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for bad in ("huggingface-cli download", "hf download", "from_pretrained(\"", "snapshot_download",
                    "ollama pull"):
            assert bad not in text, f"{page.relative_to(ROOT)}: {bad}"


def test_the_benchmarks_readme_stays_a_page_of_latest_figures():
    """benchmarks/README.md holds the latest figure per question, ordered by capability, with a
    headline table first; history lives in git. Its size: 1,200 lines at most."""
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines <= 1200, f"benchmarks/README.md has {lines} lines (at most 1,200): condense, history is in git"
    assert "## Headline figures" in text[:3000], "the headline table comes first"


def _commands():
    """Every command path of the CLI (``["anonaudit", "attack", "trir"]``...), with its command."""
    import click

    from anonaudit.cli import main

    def walk(cmd: click.Command, path: list[str], ctx: click.Context):
        yield path, cmd
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                yield from walk(sub, [*path, name], click.Context(sub, info_name=name, parent=ctx))

    return list(walk(main, ["anonaudit"], click.Context(main, info_name="anonaudit")))


def test_every_commands_help_ends_with_the_guide_page_to_read():
    from click.testing import CliRunner

    from anonaudit.cli import main

    commands = [path for path, _ in _commands() if len(path) > 1]
    assert len(commands) >= 25
    for path in commands:
        res = CliRunner().invoke(main, [*path[1:], "--help"], terminal_width=100)
        assert res.exit_code == 0, (path, res.output)
        last = res.output.strip().splitlines()[-1]
        m = re.match(r"\s*Guide: docs/(\S+\.md) ", last)
        assert m, f"{' '.join(path)} --help ends with {last!r}, not its guide page"
        assert (ROOT / "docs" / m.group(1)).is_file(), m.group(1)


def test_every_part_of_the_report_links_its_explanation_in_the_guide(site, tmp_path):
    """Each part of the HTML report links to its anchor on the guide's report page, relative
    (``docs/report.html#part``: the site built beside the report), or where ``guide=`` says."""
    import anonaudit

    data = anonaudit.sample_data(n=4)
    results = anonaudit.audit(originals=data["originals"], releases={"labels": data["releases"]["labels"]},
                              attacks=["phrase_search"], metrics=["rouge"], seed=0)
    html = results.report(tmp_path / "report.html").read_text(encoding="utf-8")
    parts = re.findall(r'<section id="([\w-]+)">\s*<h2>[^<]*<a class="guide" href="([^"]+)"', html)
    assert {p for p, _ in parts} >= {"verdict", "matrix", "picture", "attacks", "utility", "documents", "provenance",
                                     "limitations"}
    assert len(parts) == html.count("<section id="), "a part of the report without its guide link"
    guide = (site / "report.html").read_text(encoding="utf-8")
    for part, href in parts:
        assert href == f"docs/report.html#{part}"
        assert f'id="{part}"' in guide, f"the guide's report page has no anchor #{part}"
    again = results.report(tmp_path / "other.html", guide="https://example.org/anonaudit/").read_text(encoding="utf-8")
    assert 'href="https://example.org/anonaudit/report.html#verdict"' in again
    # the bench's leaderboard, in the report's style, links the same page's leaderboard parts
    board = anonaudit.bench("suppression", demo_people=4, comparisons=["labels"], attacks=["phrase_search"],
                            metrics=["rouge"], progress=False)
    page = board.report(tmp_path / "board" / "leaderboard.html").read_text(encoding="utf-8")
    links = re.findall(r'<section id="([\w-]+)">\s*<h2>[^<]*<a class="guide" href="docs/report\.html#([\w-]+)"', page)
    assert {part for part, _ in links} >= {"ranking", "picture"}
    for part, anchor in links:
        assert anchor == f"leaderboard-{part}" and f'id="{anchor}"' in guide, anchor
