"""Hostile input, classes 5 and 6 of issue 43 (part A): inputs and outputs that used to end in a
traceback, and pipes. The rule, the toy registry and the helpers are those of tests/test_hostile.py."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from anonaudit.cli import main
from audit.core.results import Result, ResultsFile
from tests.test_hostile import attack, clear_error, demo, reg, run  # noqa: F401  (fixtures)


# --------------------------------------------------------------------------- 5. tracebacks


def test_demo_data_sizes_are_the_ones_the_generator_can_make(tmp_path):
    from anonaudit.demo.population import MAX_PEOPLE, MAX_RELEASED, generate

    assert MAX_RELEASED + MAX_RELEASED // 2 <= MAX_PEOPLE < (MAX_RELEASED + 1) + (MAX_RELEASED + 1) // 2
    res = CliRunner().invoke(main, ["demo-data", "--out", str(tmp_path / "d"), "--n", str(MAX_RELEASED + 1)])
    assert res.exit_code == 2 and f"1<=x<={MAX_RELEASED}" in res.output and "Traceback" not in res.output
    with pytest.raises(ValueError, match="at most"):
        generate(MAX_RELEASED + 1)
    assert len(generate(MAX_RELEASED).originals) == MAX_RELEASED  # the advertised top works


def test_an_output_that_cannot_be_written_is_a_clear_error_before_any_work(demo, reg):
    (demo / "afile").write_text("x")
    clear_error(attack(reg, "--release", "demo/releases/labels.jsonl", "--out", "afile/R.json"),
                "afile is a file, not a folder")
    clear_error(run(reg, "report", "R.json", "--out", "afile/x/r.html"), "afile is a file, not a folder")
    clear_error(run(reg, "sanitize", "suppression", "--input", "demo/originals.jsonl", "--out", "demo"),
                "is a directory")


def test_a_folder_option_that_cannot_be_a_folder_is_refused_before_the_work(demo, monkeypatch):
    """TRIR's --cache-dir and --checkpoint-dir and phrase search's --index-dir are checked before
    the training or the index build, not when its result is saved (it was a FileExistsError,
    reported as the attack's own failure, after the work); so is TRIR's --device (a GPU torch
    does not see failed at the first step). The real components; no model loads."""
    import attackers.trir.attack

    def no_training(*a, **k):
        raise AssertionError("the training started")

    monkeypatch.setattr(attackers.trir.attack, "resolve_base", no_training)
    (demo / "afile").write_text("x")
    release = ["--release", "demo/releases/labels.jsonl", "--out", "R.json"]
    cases = [(["phrase-search", "--originals", "demo/originals.jsonl", "--index-dir", "afile"],
              "index_dir afile: is a file, not a folder"),
             (["trir", "--background", "demo/background.jsonl", "--cache-dir", "afile"],
              "cache_dir afile: is a file, not a folder"),
             (["trir", "--background", "demo/background.jsonl", "--checkpoint-dir", "afile/ckpt"],
              "checkpoint_dir afile/ckpt: cannot be created: afile is a file, not a folder: name a folder this "
              "process can write to, or leave checkpoint_dir out"),
             # a GPU this machine does not have: said at once, not after the preparation
             (["trir", "--background", "demo/background.jsonl", "--device", "cuda:7"],
              "device cuda:7: torch sees "),
             (["trir", "--background", "demo/background.jsonl", "--device", "cudaX1"],
              "device must be auto, cpu, cuda or cuda:N, got 'cudaX1'")]
    for args, message in cases:
        out = clear_error(CliRunner().invoke(main, ["attack", *args, *release]), message)
        assert "FileExistsError" not in out and "failed" not in out
    assert (demo / "afile").read_text() == "x"


def test_a_missing_file_given_to_a_component_option_is_named_by_that_option(demo):
    """A component's file option (TRIR's --dev, phrase search's --extra-corpus) that names no file
    was reported as 'command line: corpora.KEY: file not found': a key the user never typed."""
    release = ["--release", "demo/releases/labels.jsonl", "--release", "sup=demo/releases/suppressed.jsonl",
               "--out", "R.json"]
    for args, message in ((["trir", "--background", "demo/background.jsonl", "--dev", "sup"],
                           "--dev sup: file not found"),
                          (["phrase-search", "--originals", "demo/originals.jsonl", "--extra-corpus", "x=none.jsonl"],
                           "--extra-corpus x=none.jsonl: file not found")):
        out = clear_error(CliRunner().invoke(main, ["attack", *args, *release]), message)
        assert "corpora." not in out


def test_a_release_whose_documents_name_nobody_of_the_background_is_refused_before_the_work(demo, monkeypatch):
    """A release without subjects and no originals (who is each document about?), or one about
    people the background does not cover, ended in '"n" must be at least 1' (for TRIR after
    the whole training). Now both re-identification attacks say why, before the work."""
    import attackers.trir.attack
    from audit.core.data import Release, Scenario
    from audit.io.loaders import load_corpus

    def no_training(*a, **k):
        raise AssertionError("the training started")

    monkeypatch.setattr(attackers.trir.attack, "resolve_base", no_training)
    rows = [json.loads(line) for line in (demo / "demo/releases/labels.jsonl").read_text().splitlines()]
    (demo / "nosubj.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "subject"}) + "\n"
                                               for r in rows))
    others = [json.loads(line) for line in (demo / "demo/background.jsonl").read_text().splitlines()]
    (demo / "others.jsonl").write_text("".join(json.dumps({**r, "subject": "x-" + r["subject"]}) + "\n"
                                               for r in others))
    nosubj = "of its 6 documents, 6 do not say who they are about (the release has no subject for them and no " \
             "originals were given"
    cases = [(["phrase-search", "--background", "demo/background.jsonl", "--release", "nosubj.jsonl"], nosubj),
             (["trir", "--background", "demo/background.jsonl", "--release", "nosubj.jsonl"], nosubj),
             (["trir", "--background", "others.jsonl", "--originals", "demo/originals.jsonl", "--release",
               "demo/releases/labels.jsonl"], "6 are about people the background does not cover")]
    for args, message in cases:
        out = clear_error(CliRunner().invoke(main, ["attack", *args, "--out", "R.json"]), message,
                          "no document can be scored")
        assert "must be at least 1" not in out
    scenario = Scenario(background=load_corpus(demo / "demo/background.jsonl"))
    people = {d.subject for d in scenario.background}
    assert scenario.unscorable(Release("labels", load_corpus(demo / "demo/releases/labels.jsonl")), people) == ""


def test_a_full_disk_is_a_clear_error_and_replaces_nothing(demo, reg, monkeypatch):
    import errno

    import audit.core.files

    assert attack(reg, "--release", "demo/releases/labels.jsonl", "--out", "R.json").exit_code == 0
    before = (demo / "R.json").read_bytes()

    def full(fd, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", "R.json")

    monkeypatch.setattr(audit.core.files.os, "fsync", full)
    res = attack(reg, "--release", "demo/releases/suppressed.jsonl", "--out", "R.json")
    clear_error(res, "R.json", "no space left on the device")
    assert (demo / "R.json").read_bytes() == before
    assert not list(demo.glob(".R.json.*.tmp"))


def test_deeply_nested_json_is_refused_by_every_reader(demo, reg):
    deep = "[" * 5000 + "]" * 5000
    doc = '{"id": "a", "text": "x", "meta": ' + "[" * 300 + "]" * 300 + "}"
    (demo / "deep.json").write_text(deep)
    (demo / "deep.jsonl").write_text(doc + "\n")
    (demo / "R.json").write_text('{"schema": "anonaudit.results/1", "results": ' + deep + "}")
    for args, where in ((["data", "validate", "deep.json"], "deep.json"),
                        (["data", "validate", "deep.jsonl"], "deep.jsonl:1"),
                        (["gate", "R.json", "--max", "x=0.5"], "R.json"),
                        (["report", "R.json"], "R.json")):
        clear_error(run(reg, *args), where, "nested deeper than")
    (demo / "deep.yaml").write_text("releases: " + "[" * 3000 + "]" * 3000 + "\n")
    clear_error(run(reg, "run", "deep.yaml"), "deep.yaml", "nested")


def test_a_lone_surrogate_is_refused_by_data_validate_and_every_loader(demo, reg):
    bad = '{"id": "a", "text": "Ada \\ud800 Lovelace"}'
    (demo / "s.jsonl").write_text('{"id": "b", "text": "fine"}\n' + bad + "\n")
    (demo / "s.json").write_text("[" + bad + "]")
    (demo / "m.json").write_text('{"a": "Ada \\udc00"}')
    for name, where in (("s.jsonl", "s.jsonl:2"), ("s.json", "s.json"), ("m.json", "m.json")):
        clear_error(run(reg, "data", "validate", name), where, "not valid Unicode", "lone surrogate")
    clear_error(attack(reg, "--release", "s.jsonl", "--out", "R.json"), "s.jsonl:2", "not valid Unicode")
    assert not (demo / "R.json").exists()


@pytest.mark.parametrize("template", ["[{foo}]", "[{0}]", "[{label.x}]", "[{label"])
def test_a_bad_sanitizer_template_is_refused_when_the_sanitizer_is_made(demo, reg, template):
    for name in ("labels", "spacy-ner"):
        res = run(reg, "sanitize", name, "--input", "demo/originals.jsonl", "--out", "o.jsonl", "--template", template)
        clear_error(res, "template", "cannot be filled", "{label}")
    assert not (demo / "o.jsonl").exists()
    assert run(reg, "sanitize", "labels", "--input", "demo/originals.jsonl", "--out", "o.jsonl",
               "--template", "<{label}> {{x}}").exit_code == 0
    assert "<PERSON> {x}" in (demo / "o.jsonl").read_text()


def test_a_tri_method_named_like_a_path_is_refused_before_anything_is_written(demo, reg):
    rows = [{"name": f"P{i}", "public_knowledge": f"P{i} was born in Oslo.", "../evil": f"P{i} was born in *."}
            for i in range(3)]
    (demo / "t.json").write_text(json.dumps(rows))
    res = run(reg, "data", "convert", "t.json", "out.jsonl")
    clear_error(res, "t.json", "method column '../evil'", "'/'")
    assert not list(demo.glob("out*"))
    clear_error(run(reg, "data", "validate", "t.json"), "method column '../evil'")
    assert not (demo / "evil.jsonl").exists()


def test_a_yaml_alias_bomb_is_refused_before_it_expands(demo, reg):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    bomb = "\n".join(lines).replace("a0: ", "x0: ", 1)
    spec = ("title: &t [" + ", ".join(["*a9"] * 9) + "]\n").replace("&t ", "")
    text = "\n".join(f"{ln}" for ln in ["x:"] + ["  " + ln for ln in bomb.splitlines()]) + "\n" + spec
    text += "originals: demo/originals.jsonl\nreleases: [demo/releases/labels.jsonl]\nattacks: [toy_survives]\n"
    (demo / "bomb.yaml").write_text(text)
    assert len(text) < 2000
    res = run(reg, "run", "bomb.yaml")
    clear_error(res, "bomb.yaml", "expands to more than")
    assert not (demo / "audit-out").exists()

def test_non_finite_figures_never_reach_the_report(tmp_path):
    from audit.core.errors import DataError
    from reports.render import render

    rf = ResultsFile(results=[Result("attack", "trir", "r", 0.5, (0.1, math.inf), 12),
                              Result("utility", "tpi", "r", math.nan, None, 12)])
    with pytest.raises(DataError, match=r"'trir' on release 'r': \"ci\[1\]\" is null: the bound was not finite") as info:
        render(rf)
    assert "'tpi' on release 'r'" in str(info.value)

def test_a_file_name_that_is_not_utf8_is_a_clear_error(demo, reg):
    # bytes that are not UTF-8 in a name reach Python as lone surrogates (os.fsdecode)
    assert attack(reg, "--release", "demo/releases/labels.jsonl", "--out", "R.json").exit_code == 0
    clear_error(run(reg, "report", "R.json", "--out", "\udcff.html"), "not valid UTF-8")
    clear_error(attack(reg, "--release", "demo/releases/labels.jsonl", "--out", "\udcfe.json"), "not valid UTF-8")
    clear_error(run(reg, "report", "R.json", "--title", "Ada \udcff"), "not valid UTF-8")  # any argument
    (demo / "deep.yaml").write_text("originals: demo/originals.jsonl\nreleases: [demo/releases/labels.jsonl]\n"
                                    "attacks: [{name: toy_survives, params: {x: " + "[" * 60 + "]" * 60 + "}}]\n")
    clear_error(run(reg, "run", "deep.yaml"), "nested deeper than 50 levels")  # a spec nests less than JSON


# --------------------------------------------------------------------------- 6. pipes and FIFOs


def test_a_pipe_is_read_whole_once_and_detected_from_memory(demo, reg, monkeypatch):
    import os

    from audit.core import files
    from audit.io.loaders import load_corpus

    text = (demo / "demo/originals.jsonl").read_bytes()
    assert 4096 < len(text) < 60000  # more than the old detection read; less than a pipe's buffer
    for _ in range(2):
        r, w = os.pipe()
        os.write(w, text)
        os.close(w)
        path = f"/dev/fd/{r}"
        monkeypatch.setattr(files, "_STREAMS", {})
        corpus = load_corpus(path)
        os.close(r)
        assert len(corpus) == 6  # no document dropped, no false "invalid JSON"


def test_a_fifo_fed_once_is_read_once_and_never_hangs(demo, reg):
    import os
    import threading

    fifo = demo / "in.fifo"
    os.mkfifo(fifo)
    text = (demo / "demo/originals.jsonl").read_bytes()

    def feed():
        with open(fifo, "wb") as fh:  # blocks until the command opens it, then feeds it once
            fh.write(text)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    res = run(reg, "attack", "toy-survives", "--originals", fifo, "--release", "demo/releases/labels.jsonl",
              "--out", "R.json")
    feeder.join(timeout=5)
    assert res.exit_code == 0, res.output
    rf = ResultsFile.load(demo / "R.json")
    assert rf.get("toy_survives", "labels").n == 6
    assert rf.provenance["inputs"]["originals"]["documents"] == 6

def test_a_fifo_that_nothing_writes_is_a_clear_error_not_a_hang(demo, reg, monkeypatch):
    """A named pipe with no writer used to block the command for ever on ``open``: it is waited
    for (ANONAUDIT_PIPE_WAIT seconds, short here), then refused naming the file, exit 2."""
    import os
    import threading

    fifo = demo / "nobody.jsonl"
    os.mkfifo(fifo)
    monkeypatch.setenv("ANONAUDIT_PIPE_WAIT", "0.3")
    done: list = []
    worker = threading.Thread(target=lambda: done.append(run(reg, "data", "validate", str(fifo))), daemon=True)
    worker.start()
    worker.join(timeout=10)
    try:
        assert done, "the command still waits on a FIFO that nothing writes"
        clear_error(done[0], "nobody.jsonl", "named pipe (FIFO) that no program wrote to", "ANONAUDIT_PIPE_WAIT")
    finally:
        if worker.is_alive():  # let the blocked reader go: a writer that comes and leaves gives it end-of-file
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_an_empty_anonymous_pipe_is_an_empty_file_at_once(demo, reg, monkeypatch):
    """``<(cmd)`` whose command wrote nothing: its writer has come and gone, so end-of-file is
    the answer, not a wait for a writer as on a named pipe."""
    import os
    import time

    from audit.core import files

    monkeypatch.setattr(files, "_STREAMS", {})
    r, w = os.pipe()
    os.close(w)
    t0 = time.monotonic()
    try:
        clear_error(run(reg, "data", "validate", f"/dev/fd/{r}"), "the file is empty")
    finally:
        os.close(r)
    assert time.monotonic() - t0 < 5
    monkeypatch.setenv("ANONAUDIT_PIPE_WAIT", "soon")
    fifo = demo / "f.jsonl"
    os.mkfifo(fifo)
    clear_error(run(reg, "data", "validate", str(fifo)), "ANONAUDIT_PIPE_WAIT='soon': give a number of seconds")


def test_a_device_or_a_folder_given_as_an_input_is_refused_naming_it(demo, reg):
    # (/dev/zero or /dev/urandom were read until memory ran out; /dev/null stands for them here)
    clear_error(run(reg, "data", "validate", "/dev/null"), "/dev/null: is a character device, not a file")
    clear_error(attack(reg, "--release", "/dev/null", "--out", "R.json"), "/dev/null: is a character device")
    (demo / "adir.jsonl").mkdir()
    clear_error(attack(reg, "--release", "adir.jsonl", "--out", "R.json"), "adir.jsonl", "folder")


def test_format_detection_and_loading_read_a_regular_file_once(demo, monkeypatch):
    """Detection (JSONL or JSON? CSV header?) and the loader parse the bytes of one read."""
    import csv as csvmod

    from audit.io import detect
    from audit.io.loaders import load_corpus, load_release_file

    opened: list[str] = []
    real = detect.read_input
    monkeypatch.setattr(detect, "read_input", lambda p: opened.append(str(p)) or real(p))
    rows = [json.loads(line) for line in (demo / "demo/originals.jsonl").read_text().splitlines()]
    (demo / "docs.json").write_text(json.dumps(rows))
    with open(demo / "docs.txt", "w", newline="") as fh:  # no extension to go by: the header decides
        w = csvmod.writer(fh)
        w.writerow(["id", "text"])
        w.writerows([r["id"], r["text"]] for r in rows)
    originals = load_corpus(demo / "demo/originals.jsonl")
    for path in ("demo/originals.jsonl", "docs.json", "docs.txt"):
        opened.clear()
        assert len(load_corpus(demo / path)) == 6
        assert opened == [str(demo / path)]
    opened.clear()
    assert len(load_release_file(demo / "demo/releases/labels.jsonl", originals=originals)[0].corpus) == 6
    assert opened == [str(demo / "demo/releases/labels.jsonl")]
    opened.clear()
    load_corpus(demo / "docs.txt")  # the scope ended: the next load reads the file again (it may have changed)
    assert opened == [str(demo / "docs.txt")]


def test_a_results_file_from_a_pipe_is_read_once_by_every_reader(demo, reg, monkeypatch):
    import os

    from audit.core import files

    assert attack(reg, "--release", "demo/releases/labels.jsonl", "--out", "R.json").exit_code == 0
    r, w = os.pipe()
    os.write(w, (demo / "R.json").read_bytes())
    os.close(w)
    monkeypatch.setattr(files, "_STREAMS", {})
    # --max makes report read the results twice (the checks, then the page)
    res = run(reg, "report", f"/dev/fd/{r}", "--max", "toy_survives=0.5", "--out", "p.html")
    os.close(r)
    assert res.exit_code == 0, res.output
    assert "toy_survives" in (demo / "p.html").read_text()
