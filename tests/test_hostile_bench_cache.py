"""Hostile input for ``anonaudit bench`` and ``anonaudit cache`` (issue 56, part B1), through the
real command line (click's runner) and the Python API, with no model loaded (phrase search and
ROUGE-L on the demo population; the comparison points are the annotation-based ones).

Classes (the README's Reliability section lists them with these tests):
1. names that become part of a file name (``--name``, ``--also NAME=FILE``, a default name taken
   from a file's stem): one check, before anything is read or written;
2. outputs that would destroy an input of the bench (the leaderboard over the originals);
3. silent no-ops and silently dropped releases (an unknown ``--compare``, ``--also`` named like
   ``--name``) and errors that blame the wrong option;
4. a sanitizer command that never ends or leaves children running, and time limits that are no
   limit (NaN, infinity);
5. the cache's home holding other files, links, and removals that fail.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from anonaudit.cli import main
from tests.test_bounded_work import alive

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "regex_masker.py"
CMD = f"{sys.executable} {EXAMPLE} {{input}} {{output}}"
CHEAP = ["--attacks", "phrase_search", "--metrics", "rouge"]


def run(args: list[str], env: dict[str, str] | None = None):
    return CliRunner().invoke(main, args, catch_exceptions=False, env=env)


def bench(args: list[str]):
    return run(["bench", *args])


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ 1. names that become file names

NAMES = ["{victim}", "../victim", "..", ".", "sub/victim", "back\\slash", "a=b", "tab\there", ""]


@pytest.mark.parametrize("name", NAMES)
def test_a_name_that_is_a_path_is_refused_before_anything_is_written(tmp_path, name):
    """``bench --name /abs/victim`` used to write the private originals to
    ``/abs/victim.command-input.jsonl`` and delete ``/abs/victim.command-output`` before the name
    was refused; every name is now checked before any I/O, and whatever a name holds, the files
    made for it are plain names inside OUT."""
    home = tmp_path / "home"
    home.mkdir()
    victim = home / "victim"
    (home / "victim.command-output").write_text("mine\n", encoding="utf-8")
    name = name.format(victim=victim)
    before = _snapshot(tmp_path)
    out = home / "out"
    res = bench(["--command", CMD, "--name", name, "--demo-people", "3", "--compare", "none", *CHEAP,
                 "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "--name" in res.output and "Traceback" not in res.output
    assert _snapshot(tmp_path) == before and not out.exists()  # nothing written, nothing deleted


def test_names_given_by_also_or_taken_from_a_file_are_checked_before_any_work(tmp_path):
    import anonaudit

    data = anonaudit.sample_data(n=3, seed=0)
    rel = tmp_path / "x=y.jsonl"  # a default name taken from a file's stem: '=' cannot be written NAME=FILE
    rel.write_text("".join(json.dumps(d) + "\n" for d in data["releases"]["suppressed"]), encoding="utf-8")
    orig = tmp_path / "orig.jsonl"
    orig.write_text("".join(json.dumps(d) + "\n" for d in data["originals"]), encoding="utf-8")
    out = tmp_path / "out"
    res = bench(["--release", str(rel), "--originals", str(orig), "--compare", "none", *CHEAP, "--out", str(out)])
    assert res.exit_code == 2 and "give --name" in res.output and not out.exists(), res.output
    for also in ("..=" + str(orig), ".=" + str(orig), "tab\tx=" + str(orig)):
        res = bench(["--release", str(rel), "--name", "ours", "--originals", str(orig), "--also", also,
                     "--compare", "none", *CHEAP, "--out", str(out)])
        assert res.exit_code == 2 and "--also" in res.output and not out.exists(), res.output
    with pytest.raises(anonaudit.AnonauditError, match="name="):
        anonaudit.bench(command=CMD, name=str(tmp_path / "abs"), demo_people=3, comparisons=[],
                        attacks=["phrase_search"], metrics=["rouge"], out=out, progress=False)
    with pytest.raises(anonaudit.AnonauditError, match=r"spec\.releases"):
        anonaudit.bench(command=CMD, spec=anonaudit.Spec(releases={"a/b": str(rel)}), name="ok", demo_people=3,
                        comparisons=[],
                        attacks=["phrase_search"], metrics=["rouge"], out=out, progress=False)
    assert not out.exists() and not (tmp_path / "abs.command-input.jsonl").exists()


# ------------------------------------------------------------------ 2. outputs over the bench's inputs

def test_the_leaderboard_never_overwrites_the_benchs_inputs_even_forced(tmp_path):
    """``BenchResults.report(path, force=True)`` knew only the bench's own copy of the originals:
    the user's originals, background, release and ``--also`` files could be written over."""
    import anonaudit

    data = anonaudit.sample_data(n=3, seed=0)
    files = {"originals": tmp_path / "mine.csv"}  # the CSV a page named mine.html writes beside it
    with open(files["originals"], "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows([("id", "text", "subject"),
                                  *((d["id"], d["text"], d["subject"]) for d in data["originals"])])
    for role, docs in (("background", data["background"]), ("published", data["releases"]["suppressed"])):
        files[role] = tmp_path / f"{role}.jsonl"
        files[role].write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    before = _snapshot(tmp_path)
    board = anonaudit.bench(command=CMD, name="ours", originals=str(files["originals"]),
                            spec=anonaudit.Spec(background=str(files["background"]),
                                                releases={"pub": str(files["published"])}),
                            comparisons=[], attacks=["phrase_search"], metrics=["rouge"], progress=False)
    for target in (files["originals"], files["background"], files["published"], tmp_path / "mine.html"):
        with pytest.raises(anonaudit.AnonauditError, match="input"):
            board.report(target, force=True)
    assert _snapshot(tmp_path) == before
    assert board.report(tmp_path / "board" / "leaderboard.html").is_file()


# ------------------------------------------------------------------ 3. no-ops, dropped releases, blame

def test_an_unknown_comparison_point_is_refused_before_any_work(tmp_path):
    out = tmp_path / "out"
    for option in ("--compare", "--with"):
        res = bench(["--command", CMD, "--demo-people", "3", option, "suppression,no_such_thing", *CHEAP,
                     "--out", str(out)])
        assert res.exit_code == 2, res.output
        assert "no_such_thing" in res.output and "known:" in res.output and "labels" in res.output
        assert option in res.output and "SKIPPED" not in res.output and not out.exists()
    import anonaudit

    for kw in ({"comparisons": ["no_such_thing"]}, {"with_": ["no_such_thing"]}, {"comparisons": "labels"}):
        with pytest.raises(anonaudit.AnonauditError, match="no_such_thing|one string"):
            anonaudit.bench(command=CMD, demo_people=3, attacks=["phrase_search"], metrics=["rouge"], out=out,
                            progress=False, **kw)
    assert not out.exists()


def test_two_releases_of_one_name_are_refused_naming_the_options_that_gave_them(tmp_path):
    import anonaudit

    data = anonaudit.sample_data(n=3, seed=0)
    pub = tmp_path / "pub.jsonl"
    pub.write_text("".join(json.dumps(d) + "\n" for d in data["releases"]["suppressed"]), encoding="utf-8")
    out = tmp_path / "out"
    # --also named as --name used to be dropped without a word
    res = bench(["--command", CMD, "--name", "regex", "--also", f"regex={pub}", "--demo-people", "3",
                 "--compare", "none", *CHEAP, "--out", str(out)])
    assert res.exit_code == 2 and "'regex'" in res.output and "--name" in res.output and "--also" in res.output
    # a clash of --also and --compare used to be blamed on --name
    res = bench(["--command", CMD, "--name", "regex", "--also", f"labels={pub}", "--demo-people", "3",
                 "--compare", "labels", *CHEAP, "--out", str(out)])
    assert res.exit_code == 2 and "--also" in res.output and "--compare" in res.output, res.output
    assert "--name" not in res.output
    res = bench(["--command", CMD, "--also", f"p={pub}", "--also", f"p={pub}", "--demo-people", "3",
                 "--compare", "none", *CHEAP, "--out", str(out)])
    assert res.exit_code == 2 and "--also" in res.output and "'p'" in res.output
    assert not out.exists()


def test_a_bench_into_a_folder_made_for_another_corpus_or_command_is_refused(tmp_path):
    """A second bench into an existing --out resumes only the same corpus: other originals or
    another background (what OUT/data/ holds), or a results file another command wrote, is
    refused before any work, naming the difference, and the folder is left as it was (it used
    to exit 0, one results file then holding figures on two corpora). Cost: ~3 s."""
    import anonaudit

    out = tmp_path / "out"
    args = ["--command", CMD, "--name", "regex", "--compare", "suppression", *CHEAP, "--out", str(out)]
    assert bench([*args, "--demo-people", "3"]).exit_code == 0
    before = _snapshot(out)
    res = bench([*args, "--demo-people", "4"])
    assert res.exit_code == 2 and "another corpus" in res.output and "originals" in res.output, res.output
    assert "3 documents" in res.output and "4 documents" in res.output
    with pytest.raises(anonaudit.AnonauditError, match="another corpus"):
        anonaudit.bench(command=CMD, name="regex", demo_people=4, comparisons=["suppression"],
                        attacks=["phrase_search"], metrics=["rouge"], out=out, progress=False)
    assert _data(out) == _data(before)
    assert bench([*args, "--demo-people", "3"]).exit_code == 0  # the same corpus resumes
    other = tmp_path / "other"
    data = anonaudit.sample_data(n=3, seed=0)
    anonaudit.attack("phrase_search", {"s": data["releases"]["suppressed"]}, originals=data["originals"],
                     out=other / "results.json", progress=False)
    before = _snapshot(other)
    res = bench([*args[:-1], str(other), "--demo-people", "3"])
    assert res.exit_code == 2 and "not a bench" in res.output, res.output
    assert _data(other) == _data(before)


def _data(folder_or_snapshot) -> dict[str, bytes]:
    """A folder's files (or a snapshot's) less its lock files, which hold no data."""
    snap = folder_or_snapshot if isinstance(folder_or_snapshot, dict) else _snapshot(folder_or_snapshot)
    return {k: v for k, v in snap.items() if not k.endswith(".lock")}


def test_a_one_document_release_written_as_jsonl_is_read_as_jsonl(tmp_path):
    """A command's output has no extension; one JSONL line ``{"id", "text"}`` parses as a JSON
    object, and was read as a map of two documents named ``id`` and ``text``."""
    script = tmp_path / "one.py"
    script.write_text("import json, sys\n"
                      "(doc,) = [json.loads(l) for l in open(sys.argv[1])]\n"
                      "doc['text'] = ' '.join('X' if w[:1].isupper() else w for w in doc['text'].split())\n"
                      "doc.pop('spans', None)\n"
                      "open(sys.argv[2], 'w').write(json.dumps(doc) + '\\n')\n", encoding="utf-8")
    out = tmp_path / "out"
    res = bench(["--command", f"{sys.executable} {script} {{input}} {{output}}", "--name", "one",
                 "--demo-people", "3", "--documents", "1", "--compare", "suppression", *CHEAP, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "one" in (out / "leaderboard.csv").read_text(encoding="utf-8")


def test_a_bench_release_named_after_its_file_is_hidden_in_the_shareable_edition(tmp_path):
    """The sanitizer under test named after its ``--release`` file (and an ``--also`` file without
    a name) is recorded as such; ``report --shareable`` names it by pseudonym, ``--keep-ids`` keeps it."""
    import anonaudit

    data = anonaudit.sample_data(n=3, seed=0)
    orig = tmp_path / "orig.jsonl"
    orig.write_text("".join(json.dumps(d) + "\n" for d in data["originals"]), encoding="utf-8")
    person = tmp_path / "Jane_Marwood.jsonl"
    person.write_text("".join(json.dumps(d) + "\n" for d in data["releases"]["suppressed"]), encoding="utf-8")
    other = tmp_path / "Bertil_Quandt.jsonl"
    other.write_text("".join(json.dumps(d) + "\n" for d in data["releases"]["labels"]), encoding="utf-8")
    out = tmp_path / "out"
    res = bench(["--release", str(person), "--originals", str(orig), "--also", str(other), "--compare", "suppression",
                 *CHEAP, "--out", str(out)])
    assert res.exit_code == 0, res.output
    releases = json.loads((out / "results.json").read_text(encoding="utf-8"))["provenance"]["releases"]
    assert releases["Jane_Marwood"]["name_from"] == "file" and releases["Bertil_Quandt"]["name_from"] == "file"
    assert "name_from" not in releases["suppression"]
    # what the bench publishes (its leaderboard files and stdout) follows the same rule (issue 67)
    table = res.output[res.output.index("| # | release |"):]  # the leaderboard printed on stdout
    for name in ("leaderboard.md", "leaderboard.tex", "leaderboard.csv", "leaderboard.html", None):
        text = table if name is None else (out / name).read_text(encoding="utf-8")
        assert "Marwood" not in text and "Quandt" not in text and "R1" in text, name
    share = run(["report", str(out / "results.json"), "--shareable", "--out", str(tmp_path / "s" / "report.html")])
    assert share.exit_code == 0, share.output
    for name in ("report.html", "findings.csv"):
        text = (tmp_path / "s" / name).read_text(encoding="utf-8")
        assert "Marwood" not in text and "Quandt" not in text and "R1" in text and "suppression" in text, name
    kept = run(["report", str(out / "results.json"), "--shareable", "--keep-ids", "--out",
                str(tmp_path / "k" / "report.html")])
    assert kept.exit_code == 0 and "Jane_Marwood" in (tmp_path / "k" / "report.html").read_text(encoding="utf-8")


# ------------------------------------------------------------------ 4. commands that never end

@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0"])
def test_a_timeout_that_is_no_limit_is_refused(tmp_path, value):
    import anonaudit

    out = tmp_path / "out"
    res = bench(["--command", CMD, "--timeout", value, "--demo-people", "3", "--compare", "none", *CHEAP,
                 "--out", str(out)])
    assert res.exit_code == 2 and "--timeout" in res.output and "Traceback" not in res.output, res.output
    assert not out.exists()
    with pytest.raises(anonaudit.AnonauditError, match="command_timeout="):
        anonaudit.bench(command=CMD, command_timeout=float(value), demo_people=3, comparisons=[],
                        attacks=["phrase_search"], metrics=["rouge"], out=out, progress=False)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc (Linux)")
@pytest.mark.parametrize("spawns", [True, False], ids=["spawns-a-child-that-never-ends", "never-ends-itself"])
def test_a_command_past_its_time_is_stopped_with_every_process_it_started(tmp_path, spawns):
    script = tmp_path / "forever.py"
    pids = tmp_path / "pids"
    script.write_text("import os, subprocess, sys, time\n"
                      "pids = [os.getpid()]\n"
                      + ("child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                         "pids.append(child.pid)\n" if spawns else "")
                      + "open(sys.argv[3], 'w').write(' '.join(map(str, pids)))\n"
                      "time.sleep(600)\n", encoding="utf-8")
    out = tmp_path / "out"
    t0 = time.monotonic()
    res = bench(["--command", f"{sys.executable} {script} {{input}} {{output}} {pids}", "--timeout", "1.5",
                 "--demo-people", "3", "--compare", "none", *CHEAP, "--out", str(out)])
    assert res.exit_code == 2 and "still running after 1.5 s (its --timeout); stopped" in res.output, res.output
    assert time.monotonic() - t0 < 30
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == (2 if spawns else 1)
    deadline = time.monotonic() + 5
    while any(alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in started if alive(p)], "a process the command started still runs"


# ------------------------------------------------------------------ 5. the cache's home

@pytest.fixture
def home(tmp_path, monkeypatch):
    """ANONAUDIT_HOME set to a folder that already holds the user's own files, some of them in
    folders named like anonaudit's kinds."""
    from audit.core import config

    h = tmp_path / "documents"
    for rel in ("cache/notes.txt", "utility/photo.jpg", "models/mine.gguf", "trir/thesis/chapter1.tex",
                "span_guess/list.json", "embeddings/embeddings.sqlite.bak", "letter.txt"):
        (h / rel).parent.mkdir(parents=True, exist_ok=True)
        (h / rel).write_text("mine\n", encoding="utf-8")
    monkeypatch.setenv("ANONAUDIT_HOME", str(h))
    monkeypatch.delenv(config.NO_CACHE_ENV, raising=False)
    return h


def _made_by_anonaudit(home: Path) -> list[Path]:
    """Cache items written by anonaudit's own writers: the LLM answer cache, an IC file, a trained
    attacker's folder, an assembled model."""
    from audit.core import config
    from audit.core.files import atomic_write
    from audit.models.answer_cache import AnswerStore

    store = AnswerStore(config.subdir("cache") / "llm.sqlite")
    store.put_many({"k": 1})
    store.close()
    ic = atomic_write(config.subdir("utility") / "ic-0123.json", "{}")
    atomic_write(config.subdir("trir") / "abc" / "model.safetensors", b"w" * 10)
    model = atomic_write(config.subdir("models") / "qwen.gguf", b"x")
    return [home / "cache" / "llm.sqlite", ic, home / "trir" / "abc", model]


def test_cache_clear_removes_only_what_anonaudit_made(home):
    """``cache clear`` with ANONAUDIT_HOME set to a folder that held other files deleted the user's
    files in the kind folders; each kind's folder now lists what anonaudit made there."""
    ours = _made_by_anonaudit(home)
    theirs = {p: p.read_bytes() for p in home.rglob("*") if p.is_file() and p.read_bytes() == b"mine\n"}
    assert len(theirs) == 7
    info = run(["cache", "info"])
    rows = {line.split()[0]: line.split() for line in info.output.splitlines()[2:]}
    assert rows["utility" if "utility" in rows else "ic"][1] == "1"  # the user's photo is not counted
    res = run(["cache", "clear", "--models"])
    assert res.exit_code == 0, res.output
    assert not [p for p in ours if p.exists()], res.output
    assert {p: p.read_bytes() for p in theirs if p.exists()} == theirs  # every file of the user's is there
    assert "left ic:" in res.output and "photo.jpg" in res.output and "never touched" in res.output
    assert "left trir:" in res.output and "thesis" in res.output
    again = run(["cache", "clear", "--models"])  # nothing of anonaudit's is left; the user's stay
    assert again.exit_code == 0 and "removed llm: 0 item(s)" in again.output
    assert {p: p.read_bytes() for p in theirs if p.exists()} == theirs


def test_cache_clear_never_follows_a_link(home, tmp_path):
    from audit.core import config

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("mine\n", encoding="utf-8")
    _made_by_anonaudit(home)
    # a kind folder that is a link: left whatever --older-than says (it used to be unlinked)
    shared = tmp_path / "shared-parses"
    shared.mkdir()
    (shared / "parses.sqlite").write_text("x", encoding="utf-8")
    (home / "parses").symlink_to(shared, target_is_directory=True)
    # a link inside a kind folder: one anonaudit did not make, and one inside an attacker's folder
    (home / "utility" / "elsewhere").symlink_to(outside, target_is_directory=True)
    (home / "trir" / "abc" / "data").symlink_to(outside, target_is_directory=True)
    # an item anonaudit recorded that has become a link (replaced by someone): unlinked, not followed
    (home / "span_guess" / "frequent-lemmas-x.json").symlink_to(outside / "precious.txt")
    config.record(home / "span_guess" / "frequent-lemmas-x.json")
    for args in (["--older-than", "1000d"], []):
        res = run(["cache", "clear", *args])
        assert res.exit_code == 0, res.output
        assert (home / "parses").is_symlink() and (shared / "parses.sqlite").exists()
        assert "left parses:" in res.output and "links are never followed" in res.output
    assert (outside / "precious.txt").read_text(encoding="utf-8") == "mine\n"
    assert (home / "utility" / "elsewhere").is_symlink() and "elsewhere" in res.output
    assert not (home / "trir" / "abc").exists() and not os.path.lexists(home / "span_guess" / "frequent-lemmas-x.json")


def test_a_removal_that_fails_is_reported_as_failed_not_removed(home, monkeypatch):
    ours = _made_by_anonaudit(home)
    real_unlink = os.unlink

    def refuse(path, *args, **kwargs):  # what a read-only folder or a file in use does (root ignores chmod)
        if os.path.basename(os.fspath(path)) in ("model.safetensors", "ic-0123.json"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refuse)
    res = run(["cache", "clear"])
    assert res.exit_code == 2, res.output
    assert "could not remove" in res.stderr and "model.safetensors" in res.stderr and "ic-0123.json" in res.stderr
    assert "Permission denied" in res.stderr and "Traceback" not in res.stderr
    assert "removed ic: 0 item(s)" in res.stdout and "removed trir: 0 item(s)" in res.stdout
    assert "removed llm: 1 item(s)" in res.output and not ours[0].exists()
    monkeypatch.setattr(os, "unlink", real_unlink)
    again = run(["cache", "clear"])  # still anonaudit's: removed once it can be
    assert again.exit_code == 0 and not ours[1].exists() and not ours[2].exists(), again.output
