"""Open the demo's report in headless Chromium: no console errors, charts and tables there.

Chromium (Debian package ``chromium``) is installed by .ci/run when missing; elsewhere these
tests skip with a reason naming the package. Console
messages are read from Chromium's own log (``--enable-logging=stderr``), where every
page message appears as an ``INFO:CONSOLE`` line; the report logs nothing, so any
such line is an error. A second control page checks that this detection works.
"""

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from audit.cli.run import run_demo
from tests.test_runner import toy_registry

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--hide-scrollbars"]


pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason="needs headless Chromium, the optional Debian package 'chromium' (apt-get install chromium; "
           ".ci/run installs it)")


def chromium(page: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args,
           page.resolve().as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    path = run_demo(out, n=8, seed=0, registry=toy_registry(), attacks=["toy_leak", "toy_missing"],
                    metrics=["toy_keep"], sanitizers=[], progress=False)
    return path


def test_demo_report_opens_cleanly_in_chromium(demo_report, tmp_path):
    html = demo_report.read_text(encoding="utf-8")
    assert "Not run: " in html and "toy_missing" in html  # a component that cannot load is named
    run = chromium(demo_report, tmp_path, "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    assert console_lines(run.stderr) == []
    dom = run.stdout
    for anchor in ('id="chart-tradeoff"', 'id="chart-risk"', 'class="attack-table"', 'class="sortable docs"',
                   'id="provenance"'):
        assert anchor in dom, anchor
    assert len(re.findall(r"<circle", dom)) >= 4  # a point per release in each chart
    assert len(re.findall(r"<tr>", dom)) > 10
    # The drill-down reads each finding's success: hit or miss, never "·", with its summary.
    docs = dom[dom.index('id="documents"'):dom.index('id="provenance"')]
    chips = re.findall(r'<span class="chip (\w+)">', docs)
    assert chips and set(chips) == {"hit", "miss"}, set(chips)
    assert "Shares a rare word with public posts about its subject" in docs

    shot = tmp_path / "report.png"
    run = chromium(demo_report, tmp_path, "--window-size=1200,2400", f"--screenshot={shot}")
    assert run.returncode == 0, run.stderr[-2000:]
    assert console_lines(run.stderr) == []
    assert shot.stat().st_size > 20_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("ANONAUDIT_SCREENSHOT_DIR")
    if keep:  # for looking at the page by eye
        shutil.copy(shot, Path(keep) / "report.png")


def test_console_error_detection_works(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><p>x</p><script>undefinedFunction();</script>")
    run = chromium(page, tmp_path, "--dump-dom")
    assert any("undefinedFunction" in line for line in console_lines(run.stderr))


class _DocTables(HTMLParser):
    """Per drill-down table: the column names and, per column, the chip words of its cells."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict] = []
        self._in_th = self._in_chip = False
        self._col = -1

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "docs" in (a.get("class") or "").split():
            self.tables.append({"names": [], "chips": {}})
        elif not self.tables:
            return
        elif tag == "th":
            self._in_th = True
            self.tables[-1]["names"].append("")
        elif tag == "tr":
            self._col = -1
        elif tag == "td":
            self._col += 1
        elif tag == "span" and (a.get("class") or "").startswith("chip "):
            self._in_chip = True

    def handle_endtag(self, tag):
        if tag == "th":
            self._in_th = False
        elif tag == "span":
            self._in_chip = False

    def handle_data(self, data):
        if not self.tables:
            return
        t = self.tables[-1]
        if self._in_th:
            t["names"][-1] += data.strip()
        elif self._in_chip and data.strip():
            name = t["names"][self._col] if self._col < len(t["names"]) else "?"
            t["chips"].setdefault(name, set()).add(data.strip())


def test_drilldown_of_the_four_attacks_shows_hit_or_miss_in_chromium(tmp_path, monkeypatch):
    """Issue 14: the drill-down shows hit/miss for all four real attacks (run with scripted
    models), read from the DOM Chromium builds, not from our own template context."""
    from reports.render import write_report
    from tests.test_report import _four_attack_results

    page = write_report(tmp_path / "four.html", _four_attack_results(tmp_path, monkeypatch))
    run = chromium(page, tmp_path, "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    assert console_lines(run.stderr) == []
    parser = _DocTables()
    parser.feed(run.stdout)
    chips: dict[str, set[str]] = {}
    for table in parser.tables:
        for name, words in table["chips"].items():
            chips.setdefault(name, set()).update(words)
    for name in ("Phrase search", "Span guess", "Claim linker", "TRIR"):
        assert chips.get(name) and chips[name] <= {"hit", "miss"}, (name, chips.get(name))
    assert chips["TRIR"] == {"hit", "miss"}
