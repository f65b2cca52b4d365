"""A rerun of issue 43's hostile-input probe, class by class, as a new user would: each case runs
``anonaudit`` in a fresh folder as a subprocess and is judged on what the user would see.

A case counts as a **traceback** when the command prints one (or dies outside the exit codes
0/1/2/3), and as **silent-wrong** when it exits 0 with a wrong result or lost data: an input
overwritten, a sanitizer that masked nothing, a tampered index reused, a document half masked, a
person's name in the shareable edition, a temporary left behind... Every case is an example the
probe reported (the issue lists them); ``tests/test_hostile.py`` and ``tests/test_integrity.py``
hold each class's mechanism in-process, this script shows the whole thing from the outside.

    python tests/probe_issue43.py            # prints one line per case and the totals; exit 1 if any
    pytest tests/test_probe_issue43.py       # the same, as a test

Cases that load an LLM or an embedder are left out (a metric on a corrupt embeddings cache: see
``tests/test_integrity.py``); spaCy's small pipeline is loaded by the spaCy cases. The probe runs
in about a minute on two cores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Case:
    cls: str
    name: str
    argv: list[str]
    setup: Callable[[Path], None] | None = None
    #: ``check(folder, exit code, output) -> None`` when right, else what is silently wrong.
    check: Callable[[Path, int, str], str | None] | None = None
    stdin_fifo: bytes | None = None


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("anonaudit")
    return [str(script)] if script.exists() else [sys.executable, "-c", "from anonaudit.cli import main; main()"]


def anonaudit(folder: Path, *argv: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANONAUDIT_HOME": str(folder / ".home"), "ANONAUDIT_PROGRESS_SECONDS": "600"}
    return subprocess.run([*_cli(), *argv], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)


# --------------------------------------------------------------------------- checks


def refused(code: int, out: str) -> str | None:
    return None if code == 2 and "error" in out.lower() else f"not refused (exit {code})"


def unchanged(*names: str) -> Callable[[Path, int, str], str | None]:
    def check(folder: Path, code: int, out: str) -> str | None:
        for n in names:
            if (folder / n).read_bytes() != (folder / ".before" / n).read_bytes():
                return f"{n} was overwritten (exit {code})"
        return refused(code, out)
    return check


def keep(*names: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        (folder / ".before").mkdir(exist_ok=True)
        for n in names:
            shutil.copy(folder / n, folder / ".before" / n)
    return setup


def results_with(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        data = json.loads((folder / "results.json").read_text())
        change(data["results"][0])
        (folder / "bad.json").write_text(json.dumps(data, allow_nan=True))
    return setup


def _tamper_index(folder: Path) -> None:
    first = anonaudit(folder, "attack", "phrase-search", "--originals", "originals.jsonl", "--release",
                      "releases/labels.jsonl", "--out", "fresh.json", "--index-dir", "idx")
    assert first.returncode == 0, first.stderr
    docs = json.loads((folder / "idx" / "docs.json").read_text())
    docs["ids"] = ["x" + i for i in docs["ids"]]  # another collection's ids: nothing would link
    (folder / "idx" / "docs.json").write_text(json.dumps(docs))


def _same_risk_as_fresh(folder: Path, code: int, out: str) -> str | None:
    def risk(name: str) -> list[float]:
        return [r["value"] for r in json.loads((folder / name).read_text())["results"] if r["name"] == "phrase_search"]
    if code != 0:
        return f"exit {code}"
    return None if risk("again.json") == risk("fresh.json") else "the tampered index was reused (another risk)"


def _crossing_tab(folder: Path) -> None:
    text = "The applicant, Mr Hakan Yilmaz Ozturk, was born in Izmir."
    a = text.index("Hakan")
    (folder / "tab.json").write_text(json.dumps([{"doc_id": "d", "text": text, "annotations": {
        "a1": {"entity_mentions": [{"start_offset": a, "end_offset": a + 12, "entity_type": "PERSON"}]},
        "a2": {"entity_mentions": [{"start_offset": a + 6, "end_offset": a + 19, "entity_type": "PERSON"}]}}}]))


def _nothing_of(*words: str, file: str) -> Callable[[Path, int, str], str | None]:
    def check(folder: Path, code: int, out: str) -> str | None:
        if code != 0:
            return f"exit {code}"
        text = " ".join(json.loads(line)["text"] for line in (folder / file).read_text().splitlines() if line)
        left = [w for w in words if w in text]
        return f"{left} left in the clear" if left else None
    return check


def _tri(folder: Path) -> None:
    (folder / "case-Marwood").mkdir()
    rows = [{"name": n, "public_knowledge": f"{n} keeps a lighthouse in {t} and sings.", "spacy_abstract":
             f"[PERSON] keeps a lighthouse in {t} and sings."} for n, t in
            (("Alice Marwood", "Tromso"), ("Bertil Quandt", "Uppsala"), ("Chiara Vessel", "Genoa"))]
    (folder / "case-Marwood" / "tri.json").write_text(json.dumps(rows))
    res = anonaudit(folder, "attack", "phrase-search", "--tri", "case-Marwood/tri.json", "--out", "tri.json")
    assert res.returncode == 0, res.stderr


def _no_names(folder: Path, code: int, out: str) -> str | None:
    if code != 0:
        return f"exit {code}"
    for f in ("pub/report.html", "pub/findings.csv"):
        text = (folder / f).read_text()
        for private in ("Alice Marwood", "Bertil Quandt", "Chiara Vessel", "case-Marwood", str(folder)):
            if private in text:
                return f"{private!r} in {f}"
    return None


def _surrogate(folder: Path) -> None:
    (folder / "s.jsonl").write_text('{"id": "a", "text": "Alice \\ud800 Smith"}\n')


def _deep(folder: Path) -> None:
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)


def _bomb(folder: Path) -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]"
                                                       for p, c in zip("abcdefgh", "bcdefghi")]
    (folder / "bomb.yaml").write_text("\n".join(lines) + "\ntitle: *i\nreleases: [{path: releases/labels.jsonl}]\n"
                                      "originals: originals.jsonl\nattacks: [phrase_search]\n")


def _tri_evil(folder: Path) -> None:
    rows = [{"name": f"P{i}", "public_knowledge": f"P{i} was born in Oslo.", "../evil": f"P{i} was born in *."}
            for i in range(3)]
    (folder / "t.json").write_text(json.dumps(rows))


def _nothing_outside(folder: Path, code: int, out: str) -> str | None:
    return "a file was written outside the folder" if (folder.parent / "evil.jsonl").exists() else refused(code, out)


def _empty_releases(folder: Path) -> None:
    (folder / "empty.yaml").write_text("originals: originals.jsonl\nreleases: []\nattacks: [phrase_search]\n")


def cases() -> list[Case]:
    fresh_out = ["--release", "releases/labels.jsonl"]
    return [
        # 1. outputs that destroy inputs
        Case("1 outputs", "report R.json --out R.json", ["report", "results.json", "--out", "results.json"],
             keep("results.json"), unchanged("results.json")),
        Case("1 outputs", "report --out originals.jsonl", ["report", "results.json", "--out", "originals.jsonl"],
             keep("originals.jsonl"), unchanged("originals.jsonl")),
        Case("1 outputs", "findings csv over an unrelated data.csv", ["report", "results.json", "--out", "data.html"],
             lambda f: ((f / "data.csv").write_text("name,salary\nA,1\n"), keep("data.csv")(f)), unchanged("data.csv")),
        Case("1 outputs", "sanitize --input X --out X", ["sanitize", "suppression", "--input", "originals.jsonl",
                                                         "--out", "originals.jsonl"],
             keep("originals.jsonl"), unchanged("originals.jsonl")),
        # 2. one release name, two files
        Case("2 release names", "attack then utility, one name, two files",
             ["utility", "--metrics", "recall", "--originals", "originals.jsonl", "--release",
              "labels=releases/suppressed.jsonl", "--out", "results.json"], None,
             lambda f, c, o: refused(c, o)),
        # 3. silent no-ops
        Case("3 no-ops", "suppression --labels NOSUCHLABEL", ["sanitize", "suppression", "--input", "originals.jsonl",
                                                              "--out", "s.jsonl", "--labels", "NOSUCHLABEL"],
             None, lambda f, c, o: refused(c, o)),
        Case("3 no-ops", "spacy-ner --labels PERSN,DATEE", ["sanitize", "spacy-ner", "--input", "originals.jsonl",
                                                            "--out", "s.jsonl", "--labels", "PERSN,DATEE"],
             None, lambda f, c, o: refused(c, o)),
        Case("3 no-ops", "spacy-ner --batch-size 0", ["sanitize", "spacy-ner", "--input", "originals.jsonl",
                                                      "--out", "s.jsonl", "--batch-size", "0"],
             None, lambda f, c, o: refused(c, o)),
        Case("3 no-ops", "releases: []", ["run", "empty.yaml"], _empty_releases, lambda f, c, o: refused(c, o)),
        Case("3 no-ops", "a tampered --index-dir", ["attack", "phrase-search", "--originals", "originals.jsonl",
                                                    *fresh_out, "--out", "again.json", "--index-dir", "idx"],
             _tamper_index, _same_risk_as_fresh),
        # 4. lenient results files
        Case("4 results", "a reversed interval", ["gate", "bad.json", "--max", "phrase_search=0.5"],
             results_with(lambda r: r.update(ci=[r["ci"][1], r["ci"][0]])), lambda f, c, o: refused(c, o)),
        Case("4 results", "a NaN value", ["report", "bad.json", "--out", "nan.html"],
             results_with(lambda r: r.update(value=float("nan"))), lambda f, c, o: refused(c, o)),
        Case("4 results", "n = 0", ["gate", "bad.json", "--max", "phrase_search=0.5"],
             results_with(lambda r: r.update(n=0)), lambda f, c, o: refused(c, o)),
        Case("4 results", "an infinite interval in the chart", ["report", "bad.json", "--out", "inf.html"],
             results_with(lambda r: r.update(ci=[0.1, float("inf")])), lambda f, c, o: refused(c, o)),
        # 5. tracebacks
        Case("5 tracebacks", "an output whose parent is a file", ["attack", "phrase-search", "--originals",
                                                                  "originals.jsonl", *fresh_out, "--out",
                                                                  "originals.jsonl/r.json"],
             None, lambda f, c, o: refused(c, o)),
        Case("5 tracebacks", "deeply nested JSON", ["data", "validate", "deep.json"], _deep,
             lambda f, c, o: refused(c, o)),
        Case("5 tracebacks", "a lone surrogate", ["data", "validate", "s.jsonl"], _surrogate,
             lambda f, c, o: refused(c, o)),
        Case("5 tracebacks", "template '[{foo}]'", ["sanitize", "labels", "--input", "originals.jsonl", "--out",
                                                    "l.jsonl", "--template", "[{foo}]"], None,
             lambda f, c, o: refused(c, o)),
        Case("5 tracebacks", "template '[{0}]'", ["sanitize", "labels", "--input", "originals.jsonl", "--out",
                                                  "l.jsonl", "--template", "[{0}]"], None,
             lambda f, c, o: refused(c, o)),
        Case("5 tracebacks", "demo-data --n 1500", ["demo-data", "--out", "big", "--n", "1500"], None,
             lambda f, c, o: None if c in (0, 2) else f"exit {c}"),
        Case("5 tracebacks", "a corrupt index folder", ["attack", "phrase-search", "--originals", "originals.jsonl",
                                                        *fresh_out, "--out", "again.json", "--index-dir", "idx"],
             lambda f: (_tamper_index(f), (f / "idx" / "keys.npy").write_bytes(b"\x93NUMPY garbage")),
             _same_risk_as_fresh),
        Case("5 tracebacks", "a TRI method named ../evil", ["attack", "phrase-search", "--tri", "t.json", "--out",
                                                            "r2.json"], _tri_evil, _nothing_outside),
        Case("5 tracebacks", "a YAML alias bomb as the title", ["run", "bomb.yaml"], _bomb,
             lambda f, c, o: refused(c, o)),
        # 6. pipes
        Case("6 pipes", "a FIFO fed once", ["data", "validate", "fifo.jsonl"], None,
             lambda f, c, o: None if c == 0 and "3" in o else f"exit {c}: {o.strip()[-160:]}",
             stdin_fifo=b"originals.jsonl"),
        # 7. crossing mentions
        Case("7 crossing", "crossing mentions of two annotators", ["sanitize", "suppression", "--input", "tab.json",
                                                                   "--out", "x.jsonl"],
             _crossing_tab, _nothing_of("Hakan", "Yilmaz", "Ozturk", file="x.jsonl")),
        # 8. the shareable edition
        Case("8 shareable", "names and paths in the shareable edition", ["report", "tri.json", "--out",
                                                                         "pub/report.html", "--shareable"],
             _tri, _no_names),
    ]


def _leftovers(folder: Path) -> tuple[str, str | None, bool]:
    """9. A run killed with SIGKILL and one with SIGTERM, then a run into the same folder."""
    writer = ("import sys, time\nfrom audit.core.files import atomic_open\n"
              "with atomic_open(sys.argv[1]) as fh:\n    fh.write('x'); fh.flush(); print('go', flush=True); "
              "time.sleep(60)\n")
    for sig in (signal.SIGKILL, signal.SIGTERM):
        p = subprocess.Popen([sys.executable, "-c", writer, str(folder / "results.json")], stdout=subprocess.PIPE,
                             text=True, cwd=ROOT)
        p.stdout.readline()
        p.send_signal(sig)
        p.wait()
    res = anonaudit(folder, "attack", "phrase-search", "--originals", "originals.jsonl", "--release",
                    "releases/labels.jsonl", "--out", "results.json")
    left = list(folder.glob(".*.tmp"))
    tb = "Traceback (most recent call last)" in res.stdout + res.stderr
    return "9 leftovers: .tmp files of killed runs", (f"{len(left)} left" if left else None), tb


def run_case(case: Case, template: Path) -> tuple[str, str | None, bool]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "w"
        shutil.copytree(template, folder)
        if case.setup:
            case.setup(folder)
        feeder = None
        if case.stdin_fifo is not None:
            os.mkfifo(folder / "fifo.jsonl")
            data = (folder / case.stdin_fifo.decode()).read_bytes()

            def feed() -> None:
                with open(folder / "fifo.jsonl", "wb") as fh:
                    fh.write(data)

            import threading

            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()
        try:
            res = anonaudit(folder, *case.argv, timeout=60)
            code, out = res.returncode, res.stdout + res.stderr
        except subprocess.TimeoutExpired:
            return f"{case.cls}: {case.name}", "hung (60 s)", False
        tb = "Traceback (most recent call last)" in out or code not in (0, 1, 2, 3)
        wrong = None if tb else case.check(folder, code, out)
        return f"{case.cls}: {case.name}", wrong, tb


def make_template(folder: Path) -> Path:
    from anonaudit.demo.population import write

    write(folder, n=3, seed=0)
    res = anonaudit(folder, "attack", "phrase-search", "--originals", "originals.jsonl", "--release",
                    "labels=releases/labels.jsonl", "--out", "results.json")
    assert res.returncode == 0, res.stderr
    shutil.rmtree(folder / ".home", ignore_errors=True)
    return folder


def probe() -> tuple[list[tuple[str, str | None, bool]], float]:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        template = make_template(Path(tmp) / "template")
        with ThreadPoolExecutor(4) as pool:
            rows = list(pool.map(lambda c: run_case(c, template), cases()))
        with tempfile.TemporaryDirectory() as tmp2:
            folder = Path(tmp2) / "w"
            shutil.copytree(template, folder)
            rows.append(_leftovers(folder))
    return rows, time.perf_counter() - t0


def main() -> int:
    rows, seconds = probe()
    for name, wrong, tb in rows:
        print(f"{'TRACEBACK' if tb else 'WRONG' if wrong else 'ok':9s}  {name}{': ' + wrong if wrong else ''}")
    tbs, wrongs = sum(tb for _, _, tb in rows), sum(bool(w) for _, w, tb in rows if not tb)
    print(f"{len(rows)} cases in {seconds:.0f} s: {tbs} tracebacks, {wrongs} silent-wrong")
    return 1 if tbs or wrongs else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
