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
from anonaudit.demo.population import write as write_demo

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
    ({"results": [{**GOOD, "value": "high"}]}, r'"value" must be a number, not a string'),
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

    from anonaudit.cli import main

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

    from anonaudit.cli import main

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


def test_crossing_spans_in_a_span_file_merge_when_unambiguous_and_are_refused_otherwise(tmp_path):
    """Issue 58: TAE reads span files whose spans cross; suppression (or one replacement for both)
    means their union. Two different replacements are ambiguous and refused, naming both. A JSONL
    release's spans record applied replacements, so crossing ones there stay an error."""
    from audit.io.loaders import load_release_file

    orig = _originals(tmp_path)
    spans = tmp_path / "spans.json"
    spans.write_text(json.dumps({"a": [[0, 10], [5, 20]], "b": [[0, 5], [1, 3]]}))
    (rel,) = load_release_file(spans, originals=orig)
    assert rel.corpus["a"].text == " Oslo with Bob Jones." and rel.notes
    spans.write_text(json.dumps({"a": [[0, 10, "P"], [5, 20, "Q"]], "b": [[0, 5], [1, 3]]}))
    with pytest.raises(DataError) as info:
        load_release_file(spans, originals=orig)
    msg = str(info.value)
    assert f"{spans} (document 'a'): spans [0, 10) replaced by 'P' and [5, 20) replaced by 'Q' cross" in msg
    assert "'b'" not in msg  # nested spans are fine: the outermost is applied
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


# --------------------------------------------------------------------------- validation before the run


def _spec_problems(demo_dir, **over):
    from audit.pipeline.spec import parse_spec
    from tests.test_runner import toy_registry

    data = {"seed": 0, "out": "out", "originals": "data/originals.jsonl", "background": "data/background.jsonl",
            "releases": [{"name": "a", "path": "data/releases/suppressed.jsonl"}], "attacks": ["toy_leak"]}
    data.update(over)
    with pytest.raises(DataError) as info:
        parse_spec(data, base=demo_dir, source="audit.yaml", registry=toy_registry())
    return str(info.value)


def test_spec_problems_are_all_found_before_anything_runs(demo_dir):
    msg = _spec_problems(
        demo_dir,
        releases=[{"name": "x=y", "path": "data/releases/suppressed.jsonl"},
                  {"name": "a/b", "path": "data/releases/labels.jsonl"},
                  {"name": "m", "sanitizer": "labels", "params": {"labels": "PERSON"}}],
        attacks=[{"name": "toy_leak", "params": {"min_len": "six", "fail_on": 3}}],
        metrics=[{"name": "toy_keep"}],
        models={"llm": "no-such-model"},
        gate={"max": {"toy_leek": 0.2, "toy_leak": 1.5}, "min": {"toy_keep": -1}})
    assert "releases[0].name: release name 'x=y' contains '='" in msg
    assert "releases[1].name: release name 'a/b' contains '/'" in msg
    assert "attacks[0].params.min_len: attack 'toy_leak': parameter 'min_len' must be a whole number, got 'six'" in msg
    assert "attacks[0].params.fail_on: attack 'toy_leak': parameter 'fail_on' must be a string or null, got 3" in msg
    assert "models.llm: unknown model 'no-such-model'" in msg
    assert "gate.max.toy_leek: no attack or metric of this audit writes this result" in msg
    assert "gate.max.toy_leak: must be between 0 and 1" in msg and "gate.min.toy_keep: must be between 0 and 1" in msg
    assert msg.startswith("9 problems found") or "problems found" in msg


def test_sampling_parameters_are_checked_against_the_components_that_take_them(demo_dir):
    msg = _spec_problems(demo_dir, sampling={"min_len": 2.5})
    assert "sampling.min_len: attack 'toy_leak': parameter 'min_len' must be a whole number, got 2.5" in msg


def test_run_command_refuses_a_bad_spec_with_exit_2_before_running(demo_dir):
    from click.testing import CliRunner

    from anonaudit.cli import main
    from tests.test_runner import toy_registry

    spec = demo_dir / "audit.yaml"
    log = demo_dir / "calls.log"
    spec.write_text(f"""
originals: data/originals.jsonl
background: data/background.jsonl
releases: [{{name: a, path: data/releases/suppressed.jsonl}}]
attacks: [{{name: toy_leak, params: {{log: "{log}"}}}}]
gate: {{max: {{trir: 0.1}}}}
""", encoding="utf-8")
    res = CliRunner().invoke(main, ["run", str(spec)], obj={"registry": toy_registry()})
    assert res.exit_code == 2 and "gate.max.trir: no attack or metric" in res.output
    assert not log.exists()  # nothing ran


def test_duplicate_yaml_keys_are_refused(tmp_path):
    from audit.pipeline.spec import read_spec_file

    path = tmp_path / "audit.yaml"
    path.write_text("seed: 1\ngate: {max: {trir: 0.1}}\nout: x\ngate: {min: {tpi: 0.5}}\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"audit.yaml:4: duplicate key 'gate' \(first given on line 2\)"):
        read_spec_file(path)
    path.write_text("releases:\n  - {name: a, path: x, name: b}\n", encoding="utf-8")
    with pytest.raises(DataError, match="duplicate key 'name'"):
        read_spec_file(path)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_input_gives_one_clear_error(tmp_path, encoding):
    from audit.io.loaders import load_corpus
    from audit.pipeline.spec import read_spec_file

    lines = "".join(json.dumps({"id": f"d{i}", "text": f"Text number {i}."}) + "\n" for i in range(30))
    for name in ("docs.jsonl", "docs.json", "docs.csv"):
        path = tmp_path / name
        path.write_text(lines if name != "docs.csv" else "id,text\na,hello\n", encoding=encoding)
        with pytest.raises(DataError) as info:
            load_corpus(path)
        assert len(info.value.problems) == 1
        assert "not UTF-8 text: it looks like UTF-16" in str(info.value)
    spec = tmp_path / "audit.yaml"
    spec.write_text("seed: 1\n", encoding=encoding)
    with pytest.raises(AnonauditError, match="looks like UTF-16"):
        read_spec_file(spec)


@pytest.mark.parametrize("threshold", ["x=150%", "x=-1", "x=1.5", "x=-0%"])
def test_gate_thresholds_out_of_range_are_refused(threshold):
    from audit.pipeline.gate import GateInputError, parse_threshold

    if threshold == "x=-0%":
        assert parse_threshold(threshold, "max").value == 0.0
        return
    with pytest.raises(GateInputError, match="between 0 and 1"):
        parse_threshold(threshold, "max")


def test_gate_command_bad_threshold_exits_2_before_reading_results(tmp_path):
    from click.testing import CliRunner

    from anonaudit.cli import main

    path = tmp_path / "results.json"
    ResultsFile(results=[_result("a")]).save(path)
    res = CliRunner().invoke(main, ["gate", str(path), "--max", "x=150%"])
    assert res.exit_code == 2 and "between 0 and 1" in res.output


def test_release_option_names_a_file_whose_name_holds_equals_signs(demo_dir, monkeypatch):
    from audit.io.loaders import parse_release_spec

    monkeypatch.chdir(demo_dir)
    src = demo_dir / "data/releases/suppressed.jsonl"
    (demo_dir / "word2vec_t=0.5.jsonl").write_bytes(src.read_bytes())
    assert parse_release_spec("word2vec_t=0.5.jsonl") == (None, "word2vec_t=0.5.jsonl")  # the file as given
    assert parse_release_spec("w2v=word2vec_t=0.5.jsonl") == ("w2v", "word2vec_t=0.5.jsonl")
    assert parse_release_spec("data/x=y.jsonl") == (None, "data/x=y.jsonl")  # a path, not a name


# --------------------------------------------------------------------------- network and secrets


@pytest.mark.parametrize("url, env, sent", [
    ("http://127.0.0.1:8080/v1", {}, True),
    ("http://localhost:8000/v1", {}, True),
    ("http://[::1]:8000/v1", {}, True),
    ("https://api.example.com/v1", {}, True),
    ("http://gpu-box:8000/v1", {}, False),
    ("http://10.0.0.5:8000/v1", {}, False),
    ("http://gpu-box:8000/v1", {"ANONAUDIT_HTTP_KEY_HOSTS": "other, gpu-box"}, True),
    ("http://gpu-box:8000/v1", {"ANONAUDIT_HTTP_KEY_HOSTS": "gpu-box:9000"}, False),
    ("http://gpu-box:8000/v1", {"ANONAUDIT_HTTP_KEY_HOSTS": "gpu-box:8000"}, True),
])
def test_api_key_goes_over_plain_http_only_to_this_machine_or_named_hosts(monkeypatch, url, env, sent):
    from audit.models.server import OpenAILLM

    monkeypatch.delenv("ANONAUDIT_API_KEY", raising=False)
    monkeypatch.delenv("ANONAUDIT_HTTP_KEY_HOSTS", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    llm = OpenAILLM("m", url)  # no request is made: the client's headers say what would go out
    try:
        assert (llm._client.headers.get("Authorization") == "Bearer sk-secret") is sent
    finally:
        llm.close()


def test_tldextract_answers_from_its_snapshot_without_the_network(monkeypatch):
    pytest.importorskip("tldextract")
    import socket

    import tldextract
    import tldextract.tldextract as tld

    from defenders.baselines import tldextract_offline

    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network is off in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(tld, "TLD_EXTRACTOR", tld.TLDExtract())  # as imported: online, with a disk cache
    tldextract_offline()
    assert tld.TLD_EXTRACTOR.suffix_list_urls == ()
    assert tldextract.extract("mail.example.co.uk").fqdn == "mail.example.co.uk"
    assert attempts == []


def test_presidio_missing_spacy_model_is_a_clear_error_and_never_downloads(monkeypatch):
    pytest.importorskip("presidio_analyzer")
    import spacy.cli

    from defenders.baselines import PresidioSanitizer

    downloads = []
    monkeypatch.setattr(spacy.cli, "download", lambda *a, **k: downloads.append(a) or sys.exit(1))
    corpus = _originals_corpus()
    with pytest.raises(AnonauditError, match=r"spaCy model 'xx_no_such_model' is not installed, and nothing is "
                                             "downloaded"):
        PresidioSanitizer(model="xx_no_such_model").sanitize(corpus)
    assert downloads == []


def _originals_corpus():
    from audit.core.data import Corpus, Document

    return Corpus([Document("a", "Write to alice@example.com today.")])


# --------------------------------------------------------------------------- doubtful releases


def test_a_release_missing_originals_or_contradicting_them_is_audited_with_a_warning(demo_dir):
    lines = (demo_dir / "data/releases/labels.jsonl").read_text(encoding="utf-8").splitlines()
    half = demo_dir / "half.jsonl"
    half.write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    docs = [json.loads(line) for line in lines]
    span = next(s for s in docs[0]["spans"] if s.get("original"))
    span["original"] = "Somebody Else"
    wrong = demo_dir / "wrong.jsonl"
    wrong.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    messages = []
    from audit.pipeline.runner import Audit
    from audit.pipeline.spec import parse_spec
    from tests.test_runner import toy_registry

    reg = toy_registry()
    spec = parse_spec({"out": "out", "originals": "data/originals.jsonl", "background": "data/background.jsonl",
                       "releases": [{"name": "half", "path": "half.jsonl"}, {"name": "wrong", "path": "wrong.jsonl"},
                                    {"name": "fine", "path": "data/releases/labels.jsonl"}],
                       "attacks": ["toy_leak"]}, base=demo_dir, source="test", registry=reg)
    outcome = Audit(spec, registry=reg, progress=False, echo=messages.append).run()
    warnings = [m for m in messages if "warning" in m]  # counted in the log, never quoted (issue 67)
    assert any("release 'half': 1 warning(s) against the originals, not printed" in m for m in warnings)
    assert any("release 'wrong': 1 warning(s) against the originals, not printed" in m for m in warnings)
    assert len(warnings) == 2  # nothing about the release that is fine
    prov = outcome.results.provenance["releases"]
    assert any("release 'half' has 3 of the 6 original documents; 3 are missing" in m for m in prov["half"]["warnings"])
    assert any(f"release 'wrong': 1 recorded replacement(s) contradict the originals (document '{docs[0]['id']}': "
               "recorded 'Somebody Else'" in m for m in prov["wrong"]["warnings"])
    assert "warnings" not in prov["fine"]


def test_two_runs_are_byte_identical_outside_provenance(demo_dir):
    releases = [{"name": "a", "path": "data/releases/suppressed.jsonl"},
                {"name": "m", "sanitizer": "labels"}]
    first = _run_toy(demo_dir, releases, out="run1")
    second = _run_toy(demo_dir, releases, out="run2")

    def body(path):
        data = json.loads(path.read_text(encoding="utf-8"))
        return json.dumps(data["results"], sort_keys=True)

    assert body(first.path) == body(second.path)
    copies = [[(p.name, p.read_bytes()) for p in sorted((o.path.parent / "releases").iterdir())]
              for o in (first, second)]
    assert copies[0] == copies[1]


def test_sanitize_command_names_every_parameter_of_the_wrong_type(tmp_path):
    from click.testing import CliRunner

    from anonaudit.cli import main

    src = tmp_path / "o.jsonl"
    src.write_text('{"id": "a", "text": "Alice went home."}\n')
    res = CliRunner().invoke(main, ["sanitize", "labels", "--input", str(src), "--out", str(tmp_path / "r.jsonl"),
                                    "--param", "labels=3", "--param", "template=[1, 2]"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "parameter 'labels' must be" in res.output and "parameter 'template' must be a string" in res.output
    assert not (tmp_path / "r.jsonl").exists()


def test_report_never_reads_a_release_copy_outside_the_results_folder(tmp_path):
    from audit.core.files import sha256_file
    from reports.render import load_release_texts

    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"id": "d", "text": "private notes"}) + "\n")
    folder = tmp_path / "run"
    folder.mkdir()
    rf = ResultsFile(results=[_result("a")], provenance={
        "command": "run", "releases": {"a": {"path": "../secret.jsonl", "sha256": sha256_file(secret)}}})
    rf.save(folder / "results.json")
    with pytest.raises(AnonauditError, match="outside the results folder"):
        load_release_texts(folder / "results.json", ResultsFile.load(folder / "results.json"))
