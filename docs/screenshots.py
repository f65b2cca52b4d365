"""Take the README's screenshots of a demo report with headless Chromium.

    python docs/screenshots.py anonaudit-demo/report.html --out docs/

Writes ``report-verdict.png`` (the first screen: verdict and risk matrix), ``report-chart.png``
(the privacy and utility chart) and ``report-document.png`` (the documents, the first one
opened). Each shot is of a copy of the report with a style that leaves only its part on the
page, so no scrolling or clicking is needed; the report itself is not changed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-extensions", "--hide-scrollbars"]

#: name -> (window size, CSS that leaves only the part to show)
SHOTS = {
    "report-verdict.png": ("1280,1930", ""),
    "report-chart.png": ("1280,680", "header.top, main > section:not(#picture) { display: none !important; }"),
    "report-document.png": ("1280,800", "header.top, main > section:not(#documents) { display: none !important; }"),
}


def shoot(report: Path, out: Path) -> list[Path]:
    html = report.read_text(encoding="utf-8")
    made = []
    with tempfile.TemporaryDirectory(prefix="anonaudit-shots-") as tmp:
        for name, (size, css) in SHOTS.items():
            page = Path(tmp) / f"{name}.html"
            page.write_text(html.replace("</head>", f"<style>{css}</style></head>", 1), encoding="utf-8")
            shot = out / name
            cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp}/profile-{name}", f"--window-size={size}",
                   f"--screenshot={shot}", page.as_uri()]
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if run.returncode != 0 or not shot.exists():
                sys.exit(f"chromium failed on {name}: {run.stderr[-2000:]}")
            made.append(shot)
    return made


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args()
    for shot in shoot(args.report, args.out):
        print(shot)


if __name__ == "__main__":
    main()
