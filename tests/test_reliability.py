"""Reliability: what a user relies on when things run in parallel, crash or are read back.

- The results file several commands share: parallel writers lose nothing, the file keeps its
  mode, and a new one is created like any file the user makes (umask, not 0600).
- Malformed results files and run folders are clear errors, never tracebacks.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audit.core.errors import AnonauditError, DataError
from audit.core.results import Result, ResultsFile
from audit.demo.data import write as write_demo

ROOT = Path(__file__).resolve().parents[1]

#: One writer: runs the toy attack on one release into the shared results file, once the
#: "go" file exists (so that every writer saves at about the same moment).
WRITER = r"""
import sys, time
from pathlib import Path
from audit.pipeline.runner import Audit
from audit.pipeline.spec import parse_spec
from tests.test_runner import toy_registry

root, out, i, go = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
reg = toy_registry()
spec = parse_spec({"seed": 0, "out": str(out.parent), "originals": "data/originals.jsonl",
                   "background": "data/background.jsonl",
                   "releases": [{"name": f"rel{i}", "path": "data/releases/suppressed.jsonl"},
                                {"name": f"other{i}", "path": "data/releases/labels.jsonl"}],
                   "attacks": ["toy_leak"], "metrics": ["toy_keep"]},
                  base=root, source="test", registry=reg)
while not go.exists():
    time.sleep(0.005)
Audit(spec, registry=reg, progress=False, echo=None, results_path=out, resume=False).run()
"""


@pytest.fixture
def demo_dir(tmp_path):
    write_demo(tmp_path / "data", n=6, seed=1)
    return tmp_path


def test_parallel_writers_into_one_results_file_lose_nothing(demo_dir):
    n = 6
    out = demo_dir / "shared" / "results.json"
    go = demo_dir / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(demo_dir), str(out), str(i), str(go)],
                              cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True) for i in range(n)]
    time.sleep(3)  # let every writer import and wait at the start line
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    rf = ResultsFile.load(out)
    want = {(kind, name, f"{rel}{i}") for i in range(n) for rel in ("rel", "other")
            for kind, name in (("attack", "toy_leak"), ("utility", "toy_keep"))}
    assert {r.key for r in rf.results} == want
    # Every writer's releases and resume pairs are described, not only the last one's.
    assert set(rf.provenance["releases"]) == {f"{rel}{i}" for i in range(n) for rel in ("rel", "other")}
    assert len(rf.provenance["pairs"]) == 4 * n
    for info in rf.provenance["releases"].values():
        assert (out.parent / info["path"]).is_file()


def _result(release: str, value: float = 0.5) -> Result:
    return Result("attack", "x", release, value, (0.1, 0.9), 10)


def test_results_file_keeps_its_mode_and_a_new_one_follows_the_umask(tmp_path):
    path = tmp_path / "results.json"
    old = os.umask(0o022)
    try:
        ResultsFile(results=[_result("a")]).save(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not 0600 from the temporary file
    path.chmod(0o640)
    ResultsFile.update(path, lambda cur: ResultsFile(results=[*cur.results, _result("b")]))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [r.release for r in ResultsFile.load(path).results] == ["a", "b"]


def test_update_rereads_the_file_under_the_lock(tmp_path):
    """A writer that loaded the file earlier does not overwrite what was added since."""
    path = tmp_path / "results.json"
    ResultsFile(results=[_result("a")]).save(path)
    stale = ResultsFile.load(path)
    ResultsFile.update(path, lambda cur: ResultsFile(results=[*cur.results, _result("b")]))
    seen = []

    def merge(cur):
        seen.append([r.release for r in cur.results])
        out = ResultsFile(results=list(cur.results))
        out.add(_result("c"))
        return out

    ResultsFile.update(path, merge)
    assert seen == [["a", "b"]] and len(stale.results) == 1
    assert [r.release for r in ResultsFile.load(path).results] == ["a", "b", "c"]


GOOD = {"kind": "attack", "name": "x", "release": "r", "value": 0.5, "ci": [0.1, 0.9], "n": 3, "documents": []}


@pytest.mark.parametrize("data, message", [
    ({"results": [{**GOOD, "ci": [0.1]}]}, r'results\[0\]: "ci" must be a list of two numbers'),
    ({"results": [{**GOOD, "documents": "abc"}]}, r'"documents" must be a list of findings, not a string'),
    ({"results": [{**GOOD, "documents": [1, "x"]}]}, r"documents\[0\]: must be a finding"),
    ({"results": {"a": GOOD}}, r'"results" must be a list of results, not an object'),
    ({"results": [GOOD], "provenance": "abc"}, r'"provenance" must be an object, not a string'),
    ({"results": [3]}, r"results\[0\]: must be an object, not a number"),
    ({"results": [{**GOOD, "value": "high"}]}, r'"value" must be a number or null, not a string'),
    ({"results": [{**GOOD, "documents": [{"id": "d", "highlights": [{"start": 5, "end": 2}]}]}]},
     r"each highlight must be an object with whole-number offsets"),
])
def test_malformed_results_files_are_clear_errors(tmp_path, data, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"schema": "anonaudit.results/1", **data}), encoding="utf-8")
    with pytest.raises(DataError, match=message) as info:
        ResultsFile.load(path)
    assert str(path) in str(info.value)


def test_report_command_on_a_malformed_results_file_says_what_is_wrong(tmp_path):
    from click.testing import CliRunner

    from audit.cli import main

    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema": "anonaudit.results/1", "results": [{**GOOD, "ci": [1]}]}))
    res = CliRunner().invoke(main, ["report", str(path)])
    assert res.exit_code == 2
    assert '"ci" must be a list of two numbers' in res.output and "Traceback" not in res.output


# --------------------------------------------------------------------------- release copies


def _run_toy(demo_dir, releases, out="out"):
    from audit.pipeline.runner import Audit
    from audit.pipeline.spec import parse_spec
    from tests.test_runner import toy_registry

    reg = toy_registry()
    spec = parse_spec({"seed": 0, "out": out, "originals": "data/originals.jsonl",
                       "background": "data/background.jsonl", "releases": releases, "attacks": ["toy_leak"]},
                      base=demo_dir, source="test", registry=reg)
    return Audit(spec, registry=reg, progress=False, echo=None).run()


def test_release_names_that_differ_only_in_unsafe_characters_keep_their_own_copies(demo_dir):
    from reports.render import load_release_texts

    outcome = _run_toy(demo_dir, [{"name": "rel a", "path": "data/releases/suppressed.jsonl"},
                                  {"name": "rel_a", "path": "data/releases/labels.jsonl"},
                                  {"name": "REL_A", "sanitizer": "suppression"}])
    prov = outcome.results.provenance["releases"]
    paths = {prov[n]["path"] for n in ("rel a", "rel_a", "REL_A")}
    assert len({p.lower() for p in paths}) == 3  # distinct even on a case-insensitive file system
    texts = load_release_texts(outcome.path, outcome.results)
    for name, source in (("rel a", "suppressed"), ("rel_a", "labels")):
        want = {json.loads(line)["id"]: json.loads(line)["text"]
                for line in (demo_dir / f"data/releases/{source}.jsonl").read_text().splitlines()}
        assert texts[name] == want


def test_report_refuses_a_release_copy_that_changed_after_the_run(demo_dir):
    from click.testing import CliRunner

    from audit.cli import main

    outcome = _run_toy(demo_dir, [{"name": "a", "path": "data/releases/suppressed.jsonl"},
                                  {"name": "b", "path": "data/releases/labels.jsonl"}])
    prov = outcome.results.provenance["releases"]
    copy_a, copy_b = (outcome.path.parent / prov[n]["path"] for n in ("a", "b"))
    copy_a.write_bytes(copy_b.read_bytes())  # another release's text under a's name
    res = CliRunner().invoke(main, ["report", str(outcome.path)])
    assert res.exit_code == 2, res.output
    assert "release 'a' was changed after the audit wrote it" in res.output and "Traceback" not in res.output
    # A truncated copy is refused the same way, whatever line it stops in.
    copy_a.write_bytes(copy_b.read_bytes()[:-40])
    res = CliRunner().invoke(main, ["report", str(outcome.path)])
    assert res.exit_code == 2 and "was changed after the audit wrote it" in res.output


def test_truncated_release_copy_without_a_recorded_checksum_names_the_line(demo_dir):
    from reports.render import load_release_texts

    outcome = _run_toy(demo_dir, [{"name": "a", "path": "data/releases/suppressed.jsonl"}])
    rf = outcome.results
    info = rf.provenance["releases"]["a"]
    del info["sha256"]  # a results file written by an older version records none
    copy = outcome.path.parent / info["path"]
    copy.write_bytes(copy.read_bytes()[:-40])
    lines = copy.read_text().splitlines()
    with pytest.raises(AnonauditError, match=rf"{copy.name}:{len(lines)}: damaged copy of release 'a'"):
        load_release_texts(outcome.path, rf)


def test_truncated_sanitizer_output_in_a_run_folder_is_made_again_on_resume(demo_dir):
    first = _run_toy(demo_dir, [{"name": "masked", "sanitizer": "labels"}])
    copy = first.path.parent / first.results.provenance["releases"]["masked"]["path"]
    whole = copy.read_bytes()
    copy.write_bytes(whole[: len(whole) // 2])
    again = _run_toy(demo_dir, [{"name": "masked", "sanitizer": "labels"}])
    assert copy.read_bytes() == whole and len(again.releases["masked"]) == 6


# --------------------------------------------------------------------------- span files


def _originals(tmp_path):
    from audit.io.loaders import load_corpus

    path = tmp_path / "orig.jsonl"
    path.write_text(json.dumps({"id": "a", "text": "Alice Smith lives in Oslo with Bob Jones."}) + "\n"
                    + json.dumps({"id": "b", "text": "Carol went to Bergen."}) + "\n", encoding="utf-8")
    return load_corpus(path)


def test_crossing_spans_in_a_span_file_are_an_error_like_in_jsonl(tmp_path):
    from audit.io.loaders import load_release_file

    orig = _originals(tmp_path)
    spans = tmp_path / "spans.json"
    spans.write_text(json.dumps({"a": [[0, 10], [5, 20]], "b": [[0, 5], [1, 3]]}))
    with pytest.raises(DataError) as info:
        load_release_file(spans, originals=orig)
    msg = str(info.value)
    assert f"{spans} (document 'a'): spans [0, 10) and [5, 20) overlap without one containing the other" in msg
    assert "'b'" not in msg  # nested spans are fine: the outermost is applied
    # The same spans in JSONL are refused the same way.
    jl = tmp_path / "rel.jsonl"
    jl.write_text(json.dumps({"id": "a", "text": orig["a"].text, "spans": [[0, 10], [5, 20]]}) + "\n")
    with pytest.raises(DataError, match=r"spans \[0, 10\) and \[5, 20\) overlap without one containing"):
        load_release_file(jl, originals=orig)
    spans.write_text(json.dumps({"a": [[0, 10], [12, 20]], "b": [[0, 5], [1, 3]]}))
    (rel,) = load_release_file(spans, originals=orig)
    assert rel.corpus["a"].text.startswith(" lives") or "Alice" not in rel.corpus["a"].text


def test_a_json_object_that_is_neither_format_is_an_error(tmp_path):
    from audit.io.loaders import load_corpus, load_release_file

    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps({"a": [[0, 3]], "b": {"text": "x"}}))
    with pytest.raises(DataError, match=r"neither documents \{id: text\} nor a span file.*'b' is an object"):
        load_corpus(mixed)
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"doc": "abc"}))
    with pytest.raises(AnonauditError, match=r"a JSON object \{id: text\} given as a release"):
        load_release_file(odd)
    with pytest.raises(DataError, match="id not found in the originals"):
        load_release_file(odd, originals=_originals(tmp_path))
    assert len(load_release_file(odd, format="json-map")[0]) == 1  # said explicitly: taken as meant
    assert len(load_corpus(odd)) == 1  # a background file {subject: text}
