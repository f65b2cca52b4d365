"""Every ``anonaudit`` command and every Python block of the guide runs here, parsed from the pages.

The pages are README.md and every ``docs/**/*.md`` (:func:`guide_pages`): a page added to the
guide is covered with no list to keep. The commands are read from the pages' ``bash`` blocks at
test time (lines joined across backslash continuations, comments dropped, ``a && b`` split, an
optional ``[--flag]`` run both without and with it; a command shown on several pages runs once),
so the guide and the CLI cannot drift apart: a command that a page adds is run by the next test
run, and one whose options the CLI no longer takes fails here. Pages may move: the commands run
in the order of what they need (data first, then sanitizers and attacks, then the report, the
gate and the model commands), the pages' order within each step. The Python blocks of each page
run in order, in one namespace (:func:`test_every_python_block_runs`), except on the pages whose
blocks a test of their own runs with its assertions (:data:`PYTHON_TESTED_ELSEWHERE`).

What the test changes, and only that (each listed below with its reason):

- ``SIZES``: sizes made tiny so CI stays quick (the demo population, samples, rounds). A size
  never changes what a command does.
- ``ANONAUDIT_LLM=qwen2.5-coder-0.5b`` (a documented variable: the default LLM): commands
  that load an LLM use the small embedded model, the one the test extras install.
- ``INPUTS``: the pages' placeholder inputs that no earlier command writes (``spans.json``,
  ``originals.json``, ``audit.yaml``, ``release.csv``; for ``bench``, three TAB-format judgments,
  their background, a release, a TRI file and ``examples/regex_masker.py``) are written first.
- ``../shared/data/tab``: the researcher's tutorial reads a few TAB judgments from the development
  data beside the checkout (never committed); the commands run in ``work/`` of the test's folder,
  beside a link ``shared`` to it. Without that data those commands are not run, and the test says
  so as a skip with the reason, after running the others.
- ``EXCLUDED``: the few commands that cannot run in a test, with the reason; the test checks
  that each still appears in the guide, so the list cannot go stale.

Every command must exit 0 (``EXIT_CODES`` lists the commands whose line states other exit
codes), with no traceback. ``test_readme_commands_without_models`` runs the model-free commands
on every test run; ``test_every_readme_command_runs`` (slow: it loads the real models) runs all
of them, in three independent parts (:data:`PARTS`) that test workers share.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: The development data beside the checkout that the researcher's tutorial reads (``../shared``).
SHARED = ROOT.parent / "shared"


def guide_pages() -> list[Path]:
    """The pages whose blocks run: README.md, then every page of the guide (``docs/**/*.md``)."""
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def page_name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else page.name

#: Commands that cannot run in a test: (the command's words, as in the guide, up to the
#: first option that decides it) -> why.
EXCLUDED: dict[str, str] = {
    "anonaudit run audit.yaml --executor ray --ray-address auto":
        "needs a running Ray cluster (`ray start --head`); `--ray-address local` is run instead",
    "anonaudit run audit.yaml --ray-address ray://head:10001":
        "needs a Ray Client server at a named host",
}

#: Sizes made tiny: (command prefix, words, replacement, why). Only sizes, never a meaning.
SIZES: list[tuple[str, list[str], list[str], str]] = [
    ("anonaudit demo-data", ["--n", "40"], ["--n", "3"], "3 people instead of 40 (NMI needs 3 documents)"),
    ("anonaudit attack span-guess", ["--sample", "50"], ["--sample", "2"], "2 spans guessed, not 50"),
    ("anonaudit attack claim-linker", ["--score-sample", "10"], ["--score-sample", "1"], "1 record judged"),
    ("anonaudit harden", ["--max-rounds", "3"], ["--max-rounds", "1"], "one repair round"),
    # INTACT asks the LLM for candidates, truth checks and guesses per entity of every document:
    # 12.5 minutes on the 3 documents on 2 cores at load 2, 77 s on the first whole document
    ("anonaudit sanitize intact", ["--input", "demo/originals.jsonl"], ["--input", "demo/first.jsonl"],
     "the first sentence of 1 document of the 3 (7 of its 11 entities; written when the command runs)"),
    # the LLM sanitizers rewrite document by document: 1 of the 3 shows each works (2.5 and 1.5 min on 3)
    ("anonaudit sanitize prompt", ["--input", "demo/originals.jsonl"], ["--input", "demo/first.jsonl"],
     "the first sentence of 1 document of the 3"),
    ("anonaudit sanitize delinker", ["--input", "spacy.jsonl"], ["--input", "spacy-first.jsonl"],
     "1 document of the 3 delinked (the collection it is compared with stays the 3)"),
]
#: Inputs that SIZES make smaller, written just before the command that reads them:
#: path -> (the README's file, how many of its first lines, whether each is cut after its first
#: sentence: its gold spans past the cut dropped; only for originals, whose spans no other file
#: refers to, not for a release, whose spans point into its originals).
FIRST_LINES: dict[str, tuple[str, int, bool]] = {"demo/first.jsonl": ("demo/originals.jsonl", 1, True),
                                                 "spacy-first.jsonl": ("spacy.jsonl", 1, False)}
#: Placeholder inputs made from the demo data, written just before the first command that reads
#: them: path -> (the demo file, the format it is rewritten in). ``release.csv`` is the officer's
#: release in CSV (the tutorial's "your release"): the demo's gold-masked release, as a CSV.
DERIVED: dict[str, tuple[str, str]] = {"release.csv": ("demo/releases/labels.jsonl", "csv")}


def as_csv(jsonl: str) -> str:
    """A JSONL release as CSV with the columns ``id``, ``text``, ``subject`` and ``spans`` (JSON)."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "text", "subject", "spans"])
    for line in jsonl.splitlines():
        doc = json.loads(line)
        writer.writerow([doc["id"], doc["text"], doc.get("subject", ""), json.dumps(doc.get("spans", []))])
    return out.getvalue()


def first_sentence(line: str) -> str:
    """A JSONL document cut after its first sentence (``". "``), keeping the spans inside it."""
    doc = json.loads(line)
    cut = doc["text"].find(". ")
    if cut > 0:
        doc["text"] = doc["text"][:cut + 1] + "\n"
        doc["spans"] = [sp for sp in doc.get("spans", []) if sp["end"] <= cut + 1]
    return json.dumps(doc) + "\n"


#: Size options added to a command that would otherwise run at full size: (command prefix,
#: options, why). Sizes only, as above.
ADDED: list[tuple[str, list[str], str]] = [
    ("anonaudit demo", ["--n", "3", "--sample", "1"], "the demo on 3 people, its LLM stages on 1 document"),
    ("anonaudit attack trir", ["--epochs", "2"], "the paper's attacker trained 2 epochs, not 15"),
    ("anonaudit sanitize intact", ["--candidates", "2", "--guesses", "2"], "2 generalisations, 2 guesses each"),
    ("anonaudit sanitize delinker", ["--max-rounds", "1"], "one rewrite per phrase (in a 3-document collection "
                                                           "almost every phrase is rare)"),
    # the bench's demo corpus: 20 people by default, spaCy and Presidio releases of each (~28 s)
    ("anonaudit bench --command", ["--demo-people", "8"], "a demo corpus of 8 people, not 20"),
    ("anonaudit bench --sanitizer", ["--demo-people", "8"], "a demo corpus of 8 people, not 20"),
    # the judge's control asks 3 questions per claim (its own record, another, a reference): with
    # the 16 claims of the default, 48 of the 0.5B's answers and most of the command's 100 s
    ("anonaudit attack claim-linker", ["--judge-check", "4", "--claim-sample", "3"],
     "4 claims in the judge's control, not 16; 3 claims of the scored record judged, not all"),
]
#: Exit codes a README line states (anything else must exit 0).
EXIT_CODES: dict[str, set[int]] = {
    "anonaudit gate": {0, 1, 3},  # "exit 0/1/3"
    "anonaudit run": {0, 1, 3},  # a spec's gate is judged at the end of the run (Exit codes)
    "anonaudit harden": {0, 1, 3},  # "exit 1 while the gate fails", 3 when inconclusive (Hardening)
}

#: The order of what commands need: producers of data first, the report and gate after.
STEPS = [("anonaudit demo-data", 0), ("anonaudit data", 1), ("anonaudit demo", 1), ("anonaudit sanitize", 2),
         ("anonaudit attack", 3), ("anonaudit utility", 3), ("anonaudit run", 4), ("anonaudit harden", 5),
         ("anonaudit report", 6), ("anonaudit gate", 7), ("anonaudit models", 8), ("anonaudit llm", 8)]
#: Commands that remove cached files: run on a home of their own (see run_all).
OWN_HOME = ("anonaudit models prune", "anonaudit cache")
#: The slow test's three parts, each on a folder of its own so that two test workers share them:
#: part -> the commands it runs (prefixes). The data producers (``demo-data``, ``data``, spaCy's masking) run in
#: every part, before its own commands; every other command is in exactly one part (checked by
#: ``test_every_command_is_in_one_part``). ``bench`` runs in the model-free test only (below).
PRODUCERS = ("anonaudit demo-data", "anonaudit data",
             # spaCy's masking (seconds): a release that the delinker and the officer's comparison read
             "anonaudit sanitize spacy_ner")
PARTS: dict[str, tuple[str, ...]] = {
    "demo": ("anonaudit demo",),
    "sanitizers": ("anonaudit sanitize", "anonaudit llm"),
    "attacks": ("anonaudit attack", "anonaudit utility", "anonaudit run", "anonaudit harden", "anonaudit report",
                "anonaudit gate", "anonaudit models", "anonaudit cache"),
}
#: Commands that load no model (run on every test run, not only the slow one).
MODEL_FREE = ("anonaudit demo-data", "anonaudit data", "anonaudit attack phrase-search", "anonaudit report",
              "anonaudit models", "anonaudit cache",
              # spaCy's small pipeline (seconds): the officer's second release, which phrase search compares
              "anonaudit sanitize spacy_ner",
              # bench as the README runs it: phrase search and ROUGE-L; its default comparison points
              # spaCy NER and Presidio load spaCy's small pipeline (seconds), no LLM or encoder
              "anonaudit bench")


@dataclass(frozen=True)
class Command:
    line: int  # line of its page where it starts
    text: str  # as the page writes it (continuations joined)
    argv: tuple[str, ...]  # what runs (after SIZES/ADDED, optional part in or out)
    page: str = "README.md"  # the page that shows it (the first, when several do)

    @property
    def shown(self) -> str:
        return shlex.join(self.argv)


def bash_blocks(text: str) -> list[tuple[int, list[str]]]:
    """``(first line number, lines)`` of every fenced bash/sh/shell/console block."""
    fence = re.compile(r"^\s*```\s*(\w*)")
    blocks: list[tuple[int, list[str]]] = []
    inside, keep, start, lines = False, False, 0, []
    for no, line in enumerate(text.splitlines(), 1):
        m = fence.match(line)
        if m and not inside:
            inside, keep, start, lines = True, m.group(1).lower() in ("bash", "sh", "shell", "console"), no + 1, []
        elif m:
            if keep:
                blocks.append((start, lines))
            inside = False
        elif inside:
            lines.append(line)
    return blocks


def logical_lines(start: int, lines: list[str]) -> list[tuple[int, str]]:
    """Lines joined across backslash continuations, with the number of their first line."""
    out, buf, first = [], "", None
    for i, line in enumerate(lines):
        if first is None:
            first = start + i
        stripped = line.rstrip()
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        out.append((first, buf + line))
        buf, first = "", None
    if buf:
        out.append((first, buf))
    return out


def split_commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line (``a && b; c | d``), comments dropped."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    commands, current = [], []
    for tok in lex:
        if tok and set(tok) <= set(";&|"):
            commands.append(current)
            current = []
        else:
            current.append(tok)
    commands.append(current)
    return [c for c in commands if c]


def variants(words: list[str]) -> list[list[str]]:
    """An optional ``[--flag ...]`` part: the command without it, then with it."""
    if not any(w.startswith("[") for w in words):
        return [words]
    bare, full, inside = [], [], False
    for w in words:
        opens = w.startswith("[")
        inside = inside or opens
        closes = inside and w.endswith("]")
        if not inside:
            bare.append(w)
        full.append(w[1 if opens else 0: -1 if closes else None])
        inside = inside and not closes
    return [bare, full]


def _sized(words: list[str]) -> list[str]:
    text = " ".join(words)
    words = list(words)
    for prefix, old, new, _ in SIZES:
        if text.startswith(prefix):
            for i in range(len(words) - len(old) + 1):
                if words[i:i + len(old)] == old:
                    words[i:i + len(old)] = new
    for prefix, extra, _ in ADDED:
        if text == prefix or text.startswith(prefix + " "):
            words += extra
    return words


def readme_commands(*pages: Path) -> tuple[list[Command], list[Command]]:
    """``(to run, excluded)``: every ``anonaudit`` command of the bash blocks of ``pages`` (by
    default every page of the guide, :func:`guide_pages`); a command that several pages show (the
    same words once sized) is run once, where it first appears."""
    run, excluded, seen = [], [], set()
    for page in pages or guide_pages():
        for start, lines in bash_blocks(page.read_text(encoding="utf-8")):
            for no, line in logical_lines(start, lines):
                for words in split_commands(line):
                    if words[0] != "anonaudit":
                        continue
                    text = " ".join(words)
                    if any(text.startswith(e) for e in EXCLUDED):
                        excluded.append(Command(no, text, tuple(words), page_name(page)))
                        continue
                    for v in variants(words):
                        argv = tuple(_sized(v))
                        if argv not in seen:
                            seen.add(argv)
                            run.append(Command(no, text, argv, page_name(page)))
    order = {c: i for i, c in enumerate(run)}

    def step(c: Command) -> tuple[int, int]:
        shown = " ".join(c.argv)
        return max((s for p, s in STEPS if shown == p or shown.startswith(p + " ")), default=9), order[c]

    return sorted(run, key=step), excluded


def _is(c: Command, prefixes) -> bool:
    shown = " ".join(c.argv)
    return any(shown == p or shown.startswith(p + " ") for p in prefixes)


# --------------------------------------------------------------------------- the README's placeholder inputs


#: ``anonaudit bench``'s placeholder corpora: three TAB-format judgments (with annotations), their
#: public background (one more person than the release), the release under test, a TRI file.
CASES = [("001-1", "Mr Galip Yalman", "Turkey", "lodged on 3 May 1997 by a lorry driver from Ankara"),
         ("001-2", "Ms Anna Kowalska", "Poland", "lodged on 12 June 2001 by a nurse from Gdansk"),
         ("001-3", "Mr Peter Novak", "Slovakia", "lodged on 9 March 2004 by a teacher from Kosice")]


def write_bench_inputs(folder: Path) -> None:
    """The placeholder inputs of the README's ``anonaudit bench`` commands (see :data:`CASES`)."""
    tab, background, ours, tri = [], {}, [], []
    for doc_id, name, state, rest in CASES:
        text = f"The case originated in an application against {state} {rest}, {name}."
        start = text.index(name)
        tab.append({"doc_id": doc_id, "text": text, "annotations": {"annotator1": {"entity_mentions": [
            {"entity_type": "PERSON", "start_offset": start, "end_offset": start + len(name), "span_text": name,
             "identifier_type": "DIRECT", "entity_id": f"{doc_id}_e1"}]}}})
        background[doc_id] = f"CASE OF {name.split()[-1].upper()} v. {state.upper()}. {name} {rest.split(' by ')[1]}."
        ours.append({"id": doc_id, "text": text.replace(name, "the applicant")})
        tri.append({"name": doc_id, "public_knowledge": background[doc_id], "original": text,
                    "masked": text.replace(name, "***")})
    background["001-4"] = "CASE OF BRANDT v. GERMANY. Mr Jonas Brandt, a baker from Leipzig."
    (folder / "echr_test.json").write_text(json.dumps(tab), encoding="utf-8")
    (folder / "echr_background.json").write_text(json.dumps(background), encoding="utf-8")
    (folder / "ours.jsonl").write_text("".join(json.dumps(d) + "\n" for d in ours), encoding="utf-8")
    (folder / "tri.json").write_text(json.dumps(tri), encoding="utf-8")
    (folder / "examples").mkdir(exist_ok=True)
    (folder / "examples" / "regex_masker.py").write_text((ROOT / "examples" / "regex_masker.py").read_text())


def write_inputs(folder: Path) -> None:
    """The README's placeholder inputs that no README command writes: a span file with its
    originals for ``data convert``, a TAE ``config.json`` (:func:`write_tae_inputs`), an ``audit.yaml`` on the demo data (whose release
    ``ours`` is the name the README's harden command uses) for ``run`` and ``harden``, and the
    corpora and example sanitizer of the ``bench`` commands (:func:`write_bench_inputs`)."""
    write_bench_inputs(folder)
    (folder / "originals.json").write_text(json.dumps({"a": "Alice Smith lives in Oslo.",
                                                       "b": "Bob Jones works in Bergen."}), encoding="utf-8")
    (folder / "spans.json").write_text(json.dumps({"a": [[0, 11, "[PERSON]"]], "b": [[0, 9]]}), encoding="utf-8")
    write_tae_inputs(folder)
    (folder / "audit.yaml").write_text(
        "title: README test\nseed: 0\nout: audit-run\n"
        "originals: demo/originals.jsonl\nbackground: demo/background.jsonl\n"
        "releases:\n  - {name: ours, path: demo/releases/suppressed.jsonl}\n"
        "attacks:\n  - {name: phrase_search, params: {max_evidence: 3}}\n"
        "metrics: [recall]\n"
        "gate: {max: {phrase_search: 0.1}}\n", encoding="utf-8")


def write_tae_inputs(folder: Path) -> None:
    """``config.json`` of "Coming from TAE": a TAE config over a two-judgment corpus in TAE's
    annotated layout and two span files, in the subfolder ``tae/`` as TAE users lay them out."""
    tae = folder / "tae"
    tae.mkdir(exist_ok=True)
    text = "Mr Galip Yalman lodged application no. 36110/97 against Turkey in Ankara."
    mentions = [("PERSON", "DIRECT", "Galip Yalman"), ("CODE", "DIRECT", "36110/97"), ("LOC", "NO_MASK", "Turkey"),
                ("LOC", "QUASI", "Ankara")]
    corpus = [{"doc_id": d, "text": text, "annotations": {"annotator1": {"entity_mentions": [
        {"entity_id": f"{d}_e{n}", "entity_type": t, "identifier_type": k, "start_offset": text.index(m),
         "end_offset": text.index(m) + len(m)} for n, (t, k, m) in enumerate(mentions)]}}} for d in ("001-1", "001-2")]
    (tae / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    ner = {d: [[3, 15, "PERSON"], [text.index("Turkey"), text.index("Turkey") + 6, "GPE"]] for d in ("001-1", "001-2")}
    (tae / "ner.json").write_text(json.dumps(ner), encoding="utf-8")
    (tae / "manual.json").write_text(json.dumps({d: [[3, 15], [39, 47], [66, 72]] for d in ("001-1", "001-2")}),
                                     encoding="utf-8")
    (folder / "config.json").write_text(json.dumps({
        "corpus": "tae/corpus.json", "anonymizations": {"NER": "tae/ner.json", "Manual": "tae/manual.json"},
        "results_file_path": "outputs/results.csv",
        "metrics": {"Precision": {}, "PrecisionWeighted": {}, "Recall": {"token_level": True},
                    "RecallPerEntityType": {}, "_TRIR": {}}}), encoding="utf-8")


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("anonaudit")
    return [str(script)] if script.exists() else [sys.executable, "-c", "from anonaudit.cli import main; main()"]


def work_folder(folder: Path) -> tuple[Path, bool]:
    """``(folder/work, whether ../shared/data/tab is there)``: the guide's commands run in
    ``work/``, beside a link ``shared`` to the development data when the machine has it."""
    work = folder / "work"
    work.mkdir(exist_ok=True)
    if (SHARED / "data" / "tab").is_dir() and not (folder / "shared").exists():
        (folder / "shared").symlink_to(SHARED, target_is_directory=True)
    return work, (folder / "shared" / "data" / "tab").is_dir()


def needs_shared(c: Command) -> bool:
    return any("../shared/" in w for w in c.argv)


def _write_derived(c: Command, folder: Path) -> None:
    """The inputs of :data:`FIRST_LINES` and :data:`DERIVED` that ``c`` reads, made before it runs."""
    for path, (source, lines, cut) in FIRST_LINES.items():
        if path in c.argv and not (folder / path).exists():
            head = (folder / source).read_text(encoding="utf-8").splitlines(keepends=True)[:lines]
            (folder / path).write_text("".join(map(first_sentence, head) if cut else head), encoding="utf-8")
    for path, (source, _fmt) in DERIVED.items():
        if any(w == path or w.endswith("=" + path) for w in c.argv) and not (folder / path).exists():
            (folder / path).write_text(as_csv((folder / source).read_text(encoding="utf-8")), encoding="utf-8")


def run_all(commands: list[Command], folder: Path, *, timeout: int) -> None:
    """Run ``commands`` in ``folder/work`` (see :func:`work_folder`); fail naming the page and
    line of each that fails; skip, after running the others, naming those that need the TAB
    data when the machine has none."""
    folder, has_shared = work_folder(folder)
    write_inputs(folder)
    env = {**os.environ, "ANONAUDIT_LLM": "qwen2.5-coder-0.5b", "ANONAUDIT_PROGRESS_SECONDS": "600",
           "PYTHONUNBUFFERED": "1"}
    failures, not_run = [], []
    started = time.perf_counter()
    for c in commands:
        if needs_shared(c) and not has_shared:
            not_run.append(f"{c.page} line {c.line}: {c.shown}")
            continue
        run_env = env
        if _is(c, OWN_HOME):
            # these remove cached or converted files; the test home's models/ is the machine's
            # shared folder, so they run on an empty home of their own (the command runs the same).
            run_env = {**env, "ANONAUDIT_HOME": str(folder / "own-home")}
        _write_derived(c, folder)
        t0 = time.perf_counter()
        res = subprocess.run([*_cli(), *c.argv[1:]], cwd=folder, env=run_env, capture_output=True, text=True,
                             timeout=timeout)
        print(f"{time.perf_counter() - t0:6.1f}s exit {res.returncode}  {c.shown}")
        allowed = next((codes for p, codes in EXIT_CODES.items() if _is(c, [p])), {0})
        output = res.stdout + res.stderr
        if res.returncode not in allowed or "Traceback (most recent call last)" in output:
            failures.append(f"{c.page} line {c.line}: {c.shown}\n  exit {res.returncode}\n"
                            + "\n".join("  | " + x for x in output.strip().splitlines()[-15:]))
    print(f"{time.perf_counter() - started:6.1f}s in all, {len(commands) - len(not_run)} commands")
    assert not failures, "guide commands that fail:\n" + "\n".join(failures)
    if not_run:
        pytest.skip(f"the TAB data is not at {SHARED / 'data' / 'tab'}: not run: " + "; ".join(not_run))


# --------------------------------------------------------------------------- the tests


def test_the_readme_parser_finds_every_command():
    run, excluded = readme_commands()
    texts = {c.text for c in run}
    # The commands the guide has always shown; a restructured guide keeps them somewhere.
    for needed in ("anonaudit demo", "anonaudit models list"):
        assert needed in texts
    assert any(c.argv[:3] == ("anonaudit", "sanitize", "delinker") for c in run)
    assert any("--shareable" in c.argv for c in run) and any(
        c.argv[:2] == ("anonaudit", "report") and "--shareable" not in c.argv for c in run)
    assert len(run) >= 20
    # Every exclusion still names a command of the guide, and the exclusions stay few.
    assert len(EXCLUDED) <= 3
    for e in EXCLUDED:
        assert any(c.text.startswith(e) for c in excluded), f"EXCLUDED names a command the guide lost: {e}"
    # No optional part is left in brackets.
    for c in run:
        assert not any(w.startswith("[--") or (w.startswith("--") and w.endswith("]")) for w in c.argv), c.shown


def test_the_parser_joins_continuations_splits_and_expands_optional_parts(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("text\n```bash\npip install x && anonaudit demo   # comment\n"
                      "anonaudit attack trir --release a.jsonl \\\n    --out r.json\n"
                      "anonaudit report r.json --out x.html [--shareable]   # and findings.csv\n```\n"
                      "```yaml\nanonaudit: not a command\n```\n"
                      "```python\nanonaudit.audit()\n```\n", encoding="utf-8")
    run, _ = readme_commands(readme, readme)  # a page given twice: each command still runs once
    shown = [" ".join(c.argv) for c in run]
    assert "anonaudit attack trir --release a.jsonl --out r.json --epochs 2" in shown
    assert "anonaudit report r.json --out x.html" in shown
    assert "anonaudit report r.json --out x.html --shareable" in shown
    assert "anonaudit demo --n 3 --sample 1" in shown and len(shown) == 4
    assert shown.index("anonaudit demo --n 3 --sample 1") < shown.index("anonaudit report r.json --out x.html")


def test_readme_commands_without_models(tmp_path):
    """The model-free commands, in the order of what they need, on every test run."""
    run, _ = readme_commands()
    free = [c for c in run if _is(c, MODEL_FREE)]
    assert len(free) >= 8
    run_all(free, tmp_path, timeout=300)


def _part(c: Command) -> str | None:
    """The slow test's part that runs ``c`` (None: a producer, or ``bench``)."""
    if _is(c, PRODUCERS) or _is(c, ("anonaudit bench",)):
        return None
    (part,) = [name for name, prefixes in PARTS.items() if _is(c, prefixes)]  # exactly one
    return part


def test_every_command_is_in_one_part():
    run, _ = readme_commands()
    parts = {c.shown: _part(c) for c in run}
    assert set(parts.values()) == {None, *PARTS}, parts  # no part is empty
    assert parts["anonaudit demo --n 3 --sample 1"] == "demo" and parts["anonaudit demo-data --out demo --n 3"] is None


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("part", list(PARTS))
def test_every_readme_command_runs(tmp_path, part):
    """Every command of the guide (but the EXCLUDED ones), real models, on the demo data, in three
    parts that need nothing of each other (each runs the data producers first). The ``bench``
    commands load no model and write nothing another command reads: the model-free test above
    runs them, so they are not run twice."""
    run, _ = readme_commands()
    run_all([c for c in run if _is(c, PRODUCERS) or _part(c) == part], tmp_path, timeout=900)


def test_every_test_the_readme_names_exists():
    """The guide names the test that holds each promise (the reliability page, class by class):
    each test and test file it names must exist."""
    text = "\n".join(page.read_text(encoding="utf-8") for page in guide_pages())
    named = set(re.findall(r"`(test_\w+)`", text))
    files = set(re.findall(r"`tests/(test_\w+\.py)`", text))
    assert len(named) >= 20 and len(files) >= 5
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").glob("test_*.py"))
    missing = sorted(n for n in named if not re.search(rf"^def {n}\(", source, re.MULTILINE))
    assert not missing, f"the guide names tests that do not exist: {missing}"
    assert not [f for f in files if not (ROOT / "tests" / f).is_file()]


# --------------------------------------------------------------------------- the Python blocks

#: Pages whose Python blocks a test of their own runs, in order, with assertions on what the
#: blocks promise: page -> that test's file (checked to read the page, so the list cannot go stale).
PYTHON_TESTED_ELSEWHERE = {
    "docs/how-to/python-api.md": "test_api.py",
    "docs/how-to/bench.md": "test_bench.py",
    "docs/how-to/notebook-paper-tracker.md": "test_use_it_from.py",
    "docs/how-to/plugin.md": "test_contract.py",
}


def python_blocks(page: Path) -> list[str]:
    """The ```python blocks of a page, in order."""
    return re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)


def _pages_with_python() -> list[str]:
    return [page_name(p) for p in guide_pages() if python_blocks(p)]


def test_the_pages_whose_python_runs_elsewhere_are_read_by_their_test():
    for page, test in PYTHON_TESTED_ELSEWHERE.items():
        assert python_blocks(ROOT / page), f"{page} has no Python block: drop it from PYTHON_TESTED_ELSEWHERE"
        assert page in (ROOT / "tests" / test).read_text(encoding="utf-8"), f"tests/{test} does not read {page}"


@pytest.mark.parametrize("page", [p for p in _pages_with_python() if p not in PYTHON_TESTED_ELSEWHERE])
def test_every_python_block_runs(page, tmp_path, monkeypatch):
    """A page's Python blocks, in order, in one namespace, in a fresh folder with the pages'
    placeholder inputs (and the TAB data beside it, as for the commands)."""
    work, has_shared = work_folder(tmp_path)
    write_inputs(work)
    blocks = python_blocks(ROOT / page)
    if any("../shared/" in b for b in blocks) and not has_shared:
        pytest.skip(f"{page} reads the TAB data, which is not at {SHARED / 'data' / 'tab'}")
    monkeypatch.chdir(work)
    monkeypatch.setenv("ANONAUDIT_LLM", "qwen2.5-coder-0.5b")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{page} Python block {i + 1}", "exec"), namespace)  # noqa: S102


def test_every_data_block_parses():
    """The YAML, TOML and JSON blocks of the guide (audit specs, CI files, entry points, result
    shapes) are valid in their language: the ones with ``...`` stand for more and are skipped."""
    import tomllib

    import yaml

    for page in guide_pages():
        text = page.read_text(encoding="utf-8")
        for lang, block in re.findall(r"^```(yaml|toml|json)\n(.*?)^```", text, flags=re.S | re.M):
            where = f"{page_name(page)}: a {lang} block starting {block[:40]!r}"
            if lang == "yaml":
                assert yaml.safe_load(block) is not None, where
            elif lang == "toml":
                assert tomllib.loads(block), where
            elif "..." not in block:
                json.loads(block)


def test_the_default_llm_can_be_named_by_the_environment(monkeypatch):
    from audit.models.specs import default_llm_name, parse_llm_spec

    monkeypatch.setenv("ANONAUDIT_LLM", "qwen2.5-coder-0.5b")
    assert default_llm_name() == "qwen2.5-coder-0.5b"
    assert parse_llm_spec(None).name == "qwen2.5-coder-0.5b"
    monkeypatch.setenv("ANONAUDIT_LLM", "openai:m@http://127.0.0.1:9/v1")
    assert parse_llm_spec(None).backend == "openai"
