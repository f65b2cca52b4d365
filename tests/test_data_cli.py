"""`anonaudit data validate` and `anonaudit data convert`."""

import json

from click.testing import CliRunner

from anonaudit.cli import main
from audit.io.loaders import load_corpus, load_releases, load_tri

TEXT = "Mr Galip Yalman lives in Ankara."


def run(*args):
    return CliRunner().invoke(main, ["data", *map(str, args)])


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_validate_ok(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": TEXT, "spans": [[3, 15, "PERSON"]]},
                                              {"id": "b", "text": "Other."}])
    res = run("validate", path)
    assert res.exit_code == 0, res.output
    assert res.output.strip() == f"OK: {path}: 2 documents, 1 spans, format jsonl"


def test_validate_lists_every_problem_without_traceback(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "text": "x"}\n{oops\n{"id": "a", "text": "y"}\n', encoding="utf-8")
    res = run("validate", path)
    assert res.exit_code == 2
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert f"{path}:2: invalid JSON" in res.output
    assert f"{path}:3 (document 'a'): duplicate id" in res.output


def test_validate_missing_file_and_bad_format(tmp_path):
    res = run("validate", tmp_path / "nope.json")
    assert res.exit_code == 2 and "file not found" in res.output and "Traceback" not in res.output
    res = run("validate", "--format", "xml", tmp_path / "nope.json")
    assert res.exit_code == 2  # click usage error lists the choices
    assert "jsonl" in res.output


def test_validate_span_file_needs_and_uses_originals(tmp_path):
    orig = write_jsonl(tmp_path / "orig.jsonl", [{"id": "a", "text": TEXT}])
    spans = tmp_path / "spans.json"
    spans.write_text(json.dumps({"a": [[3, 15, "PERSON"], [25, 31]]}))
    res = run("validate", spans)
    assert res.exit_code == 2 and "--originals" in res.output
    res = run("validate", spans, "--originals", orig)
    assert res.exit_code == 0, res.output
    assert "1 documents, 2 spans, format spans" in res.output
    spans.write_text(json.dumps({"a": [[3, 99]], "zz": [[0, 1]]}))
    res = run("validate", spans, "--originals", orig)
    assert res.exit_code == 2 and "outside the original text" in res.output and "'zz'" in res.output


def test_convert_round_trip_jsonl_csv_map(tmp_path):
    src = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": TEXT, "subject": "p",
                                              "spans": [{"start": 3, "end": 15, "label": "PERSON"}]}])
    dst = tmp_path / "out.jsonl"
    res = run("convert", src, dst)
    assert res.exit_code == 0, res.output
    assert list(load_corpus(dst)) == list(load_corpus(src))
    csv_src = tmp_path / "c.csv"
    csv_src.write_text('id,text\nx,"one, two"\n', encoding="utf-8")
    assert run("convert", csv_src, dst).exit_code == 0
    assert list(load_corpus(dst)) == list(load_corpus(csv_src))
    assert json.loads(dst.read_text()) == {"id": "x", "text": "one, two"}


def test_convert_span_file_writes_sanitized_release(tmp_path):
    orig = write_jsonl(tmp_path / "orig.jsonl", [{"id": "a", "text": TEXT}])
    spans = tmp_path / "spans.json"
    spans.write_text(json.dumps({"a": [[25, 31, "a city"], [3, 15]]}))
    dst = tmp_path / "rel.jsonl"
    res = run("convert", spans, dst, "--originals", orig)
    assert res.exit_code == 0, res.output
    (release,) = load_releases(str(spans), originals=load_corpus(orig))
    back = load_corpus(dst)
    assert list(back) == list(release.corpus)
    assert back["a"].text == "Mr  lives in a city."
    assert [(s.original, s.orig_start) for s in back["a"].spans] == [("Galip Yalman", 3), ("Ankara", 25)]


def test_convert_tri_writes_one_file_per_method(tmp_path):
    src = tmp_path / "tri.json"
    src.write_text(json.dumps([{"name": "p1", "public_knowledge": "bio", "orig": TEXT, "masked": "Mr ***."}]))
    res = run("convert", src, tmp_path / "bk.jsonl")
    assert res.exit_code == 0, res.output
    background, releases = load_tri(src)
    assert list(load_corpus(tmp_path / "bk.jsonl")) == list(background)
    for r in releases:
        assert list(load_corpus(tmp_path / f"bk.{r.name}.jsonl")) == list(r.corpus)


def test_convert_refuses_non_jsonl_output(tmp_path):
    src = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": TEXT}])
    res = run("convert", src, tmp_path / "out.csv")
    assert res.exit_code == 2 and ".jsonl" in res.output


def test_validate_tri_lists_methods(tmp_path):
    src = tmp_path / "tri.json"
    src.write_text(json.dumps([{"name": "p1", "public_knowledge": "bio", "orig": TEXT, "masked": ""},
                               {"name": "p2", "public_knowledge": "bio 2", "orig": "Other.", "masked": "O."}]))
    res = run("validate", src)
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == [f"OK: {src}: 2 documents, 0 spans, format tri",
                                       "  method orig: 2 documents", "  method masked: 1 documents"]
