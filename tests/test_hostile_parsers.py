"""Hostile input, issue 56 part B2: parsers that never lose data silently, and errors that say
what is wrong. Each case goes through the command line (``data validate``, ``attack``, ``run``)
and the Python API, with the toy registry and helpers of tests/test_hostile.py (no model loads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from click.testing import CliRunner

import anonaudit
from anonaudit.cli import main
from audit.core.errors import AnonauditError, DataError
from audit.io.loaders import load_corpus, load_release_file
from tests.test_hostile import clear_error, demo, reg, run  # noqa: F401  (fixtures)

TAB = Path(__file__).resolve().parents[2] / "shared" / "data" / "tab"


def attack(reg, *args):
    return run(reg, "attack", "toy-survives", *args, "--out", "R.json")


def real_attack(*args):
    """Phrase search, the installed one (it takes --tri): the data is refused before its index."""
    return CliRunner().invoke(main, ["attack", "phrase-search", *args, "--out", "R.json"])


def spec_of(**columns: str) -> anonaudit.Spec:
    """An audit spec naming these columns (``anonaudit.Columns``), as the API takes them."""
    return anonaudit.Spec(columns=anonaudit.Columns(**columns))


def api_error(*needles: str, **kwargs) -> str:
    """``anonaudit.utility`` refuses with an AnonauditError naming each needle."""
    with pytest.raises(AnonauditError) as caught:
        anonaudit.utility(**{"metrics": ["toy_kept"], "progress": False, **kwargs})
    for needle in needles:
        assert needle in str(caught.value), f"{needle!r} not in: {caught.value}"
    return str(caught.value)


def rows(demo_dir: Path, n: int = 3) -> list[dict]:
    return [json.loads(line) for line in (demo_dir / "demo/originals.jsonl").read_text().splitlines()[:n]]


# --------------------------------------------------------------------------- duplicate columns and keys


def test_a_csv_header_that_names_a_column_twice_is_refused(demo, reg):
    (demo / "dup.csv").write_text("id,text,text\na,hello world,second text\n")
    needles = ("dup.csv:1", "the header names the column 'text' twice")
    clear_error(run(reg, "data", "validate", "dup.csv"), *needles)
    clear_error(attack(reg, "--originals", "dup.csv", "--release", "demo/releases/labels.jsonl"), *needles)
    api_error(*needles, originals=str(demo / "dup.csv"), releases={"labels": "demo/releases/labels.jsonl"},
              registry=reg)
    (demo / "tri.csv").write_text("name,public_knowledge,m,m\nA,pk a,x,y\n")  # a TRI table alike
    clear_error(run(reg, "data", "validate", "tri.csv"), "tri.csv:1", "the column 'm' twice")


def test_a_json_key_given_twice_is_refused_by_every_reader(demo, reg):
    """json keeps the last value of a key given twice: every reader refuses it, naming the file,
    the line and the key (safejson's one hook), whatever the format and however deep."""
    doc = '{"id": "a", "text": "hello there"}'
    files = {
        "dup.jsonl": (doc + '\n{"id": "b", "text": "first", "text": "second"}\n', 2, "text"),
        "map.json": ('{"a": "x y",\n "b": "z",\n "a": "w"}', 3, "a"),
        "list.json": (f'[{doc},\n {{"id": "b", "text": "t", "subject": "s", "subject": "u"}}]', 2, "subject"),
        "tab.json": ('[{"doc_id": "d", "text": "Alice here",\n "annotations": {"a1": {"entity_mentions": [\n'
                     '  {"start_offset": 0, "end_offset": 5, "entity_type": "PERSON", "entity_type": "ORG"}]}}}]',
                     3, "entity_type"),
        "tri.json": ('[{"name": "A", "public_knowledge": "pk", "m": "x",\n "m": "y"}]', 2, "m"),
    }
    for name, (content, line, key) in files.items():
        (demo / name).write_text(content)
        clear_error(run(reg, "data", "validate", name), f"{name}:{line}", f"the key {key!r} appears twice")
    clear_error(attack(reg, "--originals", "dup.jsonl", "--release", "demo/releases/labels.jsonl"),
                "dup.jsonl:2", "the key 'text' appears twice")
    api_error("dup.jsonl:2", "the key 'text' appears twice", originals=str(demo / "dup.jsonl"),
              releases={"labels": "demo/releases/labels.jsonl"}, registry=reg)
    # a CSV spans cell and a span file too
    (demo / "sp.csv").write_text('id,text,spans\na,hello there,"[{""start"": 0, ""start"": 1, ""end"": 5}]"\n')
    clear_error(run(reg, "data", "validate", "sp.csv"), "sp.csv:2", "the key 'start' appears twice")
    (demo / "spans.json").write_text('{"doc-0001": [[0, 4]],\n "doc-0001": [[5, 9]]}')
    clear_error(run(reg, "data", "validate", "spans.json", "--originals", "demo/originals.jsonl"),
                "spans.json:2", "the key 'doc-0001' appears twice")
    # a TAE config.json
    (demo / "config.json").write_text('{"corpus": "c.json", "anonymizations": {"a": "x.json"},\n'
                                      ' "metrics": {}, "metrics": {"TRIR": {}}}')
    clear_error(run(reg, "data", "convert", "config.json", "spec.yaml"), "config.json:2",
                "the key 'metrics' appears twice")
    # and a results file
    assert attack(reg, "--originals", "demo/originals.jsonl", "--release", "demo/releases/labels.jsonl").exit_code == 0
    text = (demo / "R.json").read_text()
    (demo / "R.json").write_text(text.replace('"schema": ', '"schema": "x", "schema": ', 1))
    (demo / "R.manifest.json").unlink()  # else the manifest refuses the edit first (tests/test_hostile_bundle.py)
    clear_error(run(reg, "report", "R.json", "--out", "r.html"), "R.json:", "the key 'schema' appears twice")


# --------------------------------------------------------------------------- CSV quotes


def test_an_unclosed_csv_quote_is_refused_naming_the_line_where_it_opened(demo, reg):
    cases = {  # a quote never closed; one closed by a quote followed by more text
        "eof.csv": ('id,text\na,first row\nb,"second row\nc,third row\nd,fourth row\n', "never closed"),
        "mid.csv": ('id,text\na,first row\nb,"second row\nc,third row\nd,"fourth" row\n', "followed by more text"),
    }
    for name, (content, what) in cases.items():
        (demo / name).write_text(content)
        clear_error(run(reg, "data", "validate", name), f"{name}:3", what)
        clear_error(attack(reg, "--originals", name, "--release", "demo/releases/labels.jsonl"), f"{name}:3", what)
        with pytest.raises(DataError, match=f"{name}:3"):
            load_corpus(demo / name)
    # quoted fields over several lines, with commas and doubled quotes, keep working
    (demo / "ok.csv").write_text('id,text\na,"line one\nline two, with a comma"\nb,"a ""quoted"" word"\nc,5" tall\n')
    corpus = load_corpus(demo / "ok.csv")
    assert [d.text for d in corpus] == ["line one\nline two, with a comma", 'a "quoted" word', '5" tall']


# --------------------------------------------------------------------------- detection


def test_a_one_line_jsonl_file_without_an_extension_is_one_document(demo, reg):
    (demo / "one").write_text('{"id": "a", "text": "hello there"}\n')
    res = run(reg, "data", "validate", "one")
    assert res.exit_code == 0 and "1 documents" in res.output and "format jsonl" in res.output, res.output
    (demo / "one.json").write_text('{"id": "a", "text": "hello there"}')
    assert load_corpus(demo / "one.json").ids == ["a"]
    (demo / "map").write_text('{"a": "hello there", "b": "general kenobi"}\n')  # a one-line map stays a map
    assert load_corpus(demo / "map").ids == ["a", "b"]


# --------------------------------------------------------------------------- TRI


def test_a_tri_method_column_with_a_non_text_cell_is_refused_naming_the_row(demo, reg):
    rows_ = [{"name": "Ann", "public_knowledge": "pk of Ann", "masked": "*** lives here", "age": 40},
             {"name": "Bob", "public_knowledge": "pk of Bob", "masked": 7, "age": 41}]
    (demo / "tri.json").write_text(json.dumps(rows_))
    needles = ("tri.json (document 'Bob')", "row 1", "column 'masked' must be text, got int 7")
    clear_error(run(reg, "data", "validate", "tri.json"), *needles)
    clear_error(attack(reg, "--originals", "demo/originals.jsonl", "--release", "tri.json"), *needles)
    clear_error(real_attack("--tri", "tri.json"), *needles)
    api_error(*needles, originals=None, releases=[str(demo / "tri.json")], registry=reg)
    rows_[1]["masked"] = "*** works there"  # all texts: audited; a column of numbers is no method
    (demo / "tri.json").write_text(json.dumps(rows_))
    assert [r.name for r in load_release_file(demo / "tri.json")] == ["masked"]


def test_a_tri_file_without_a_method_column_is_refused_as_releases(demo, reg):
    (demo / "tri.json").write_text(json.dumps([{"name": "Ann", "public_knowledge": "pk of Ann", "age": 40}]))
    needles = ("tri.json", "no method column to audit", "'name', 'public_knowledge', 'age'")
    clear_error(real_attack("--tri", "tri.json"), *needles)
    clear_error(attack(reg, "--originals", "demo/originals.jsonl", "--release", "tri.json"), *needles)
    assert not (demo / "R.json").exists()
    api_error(*needles, releases=[str(demo / "tri.json")], registry=reg)
    assert load_corpus(demo / "tri.json").ids == ["Ann"]  # as a background it is fine


# --------------------------------------------------------------------------- named columns


def test_a_column_option_that_names_no_column_is_refused(demo, reg):
    """--subject-column (and the text, id and spans columns; columns: in a spec; subject_column=
    in Python) naming no column of a file is refused, naming the column, the option and the
    columns there are; it was ignored (the subject silently left out)."""
    base = ["--originals", "demo/originals.jsonl", "--release", "demo/releases/labels.jsonl"]
    cols = "its records have id, text, subject, spans"
    clear_error(attack(reg, *base, "--subject-column", "persn"), "originals.jsonl", "missing column(s) persn",
                "named for the subject by --subject-column", cols)
    clear_error(run(reg, "data", "validate", "demo/originals.jsonl", "--text-column", "body"),
                "missing column(s) body (named for the text by --text-column", cols)
    (demo / "c.csv").write_text("case,body,person\na,hello there,p1\n")
    clear_error(run(reg, "data", "validate", "c.csv", "--text-column", "body", "--id-column", "case",
                    "--subject-column", "persn"), "c.csv:1", "persn (named for the subject", "'case', 'body'")
    ok = run(reg, "data", "validate", "c.csv", "--text-column", "body", "--id-column", "case",
             "--subject-column", "person")
    assert ok.exit_code == 0, ok.output
    (demo / "s.yaml").write_text("originals: {path: demo/originals.jsonl, columns: {subject: persn}}\n"
                                 "releases: [demo/releases/labels.jsonl]\nattacks: [toy_survives]\n")
    clear_error(run(reg, "run", "s.yaml", "--no-report"), "missing column(s) persn")
    data = rows(demo)
    api_error("missing column(s) persn (named for the subject by --subject-column, Columns(subject=...) or "
              "sanitize(subject_column=...) in Python)",
              originals=data, releases={"r": data}, spec=spec_of(subject="persn"), registry=reg)
    api_error("missing column(s) marks (named for the spans", originals=str(demo / "demo/originals.jsonl"),
              releases={"r": data}, spec=spec_of(spans="marks"), registry=reg)
    # --spans-column, as Columns(spans=...) in Python: read when there, refused when not
    (demo / "m.csv").write_text('id,text,marks\na,hello world,"[[0, 5, ""PERSON""]]"\n')
    ok = run(reg, "data", "validate", "m.csv", "--spans-column", "marks")
    assert ok.exit_code == 0 and "1 spans" in ok.output, ok.output
    clear_error(attack(reg, *base, "--spans-column", "marks"), "missing column(s) marks (named for the spans by "
                "--spans-column, Columns(spans=...) or sanitize(spans_column=...) in Python)")
    # a record without the named column is named by the column and the option, not 'text'
    (demo / "b.jsonl").write_text('{"id": "a", "body": "hello there"}\n{"id": "b", "text": "x y"}\n')
    clear_error(run(reg, "data", "validate", "b.jsonl", "--text-column", "body"),
                "b.jsonl:2", "missing field 'body' (named for the text by --text-column")


def test_one_column_named_for_two_fields_is_refused_up_front(demo, reg):
    needles = ("one column 'x' is named for two fields, the id and the text", "--id-column x and --text-column x")
    clear_error(run(reg, "data", "validate", "demo/originals.jsonl", "--text-column", "x", "--id-column", "x"),
                *needles)
    clear_error(attack(reg, "--originals", "demo/originals.jsonl", "--release", "demo/releases/labels.jsonl",
                       "--text-column", "x", "--id-column", "x"), *needles)
    clear_error(run(reg, "data", "validate", "demo/originals.jsonl", "--text-column", "id"),
                "'id' is the id column by default and --text-column id")
    (demo / "s.yaml").write_text("originals: {path: demo/originals.jsonl, columns: {text: x, id: x}}\n"
                                 "releases: [demo/releases/labels.jsonl]\nattacks: [toy_survives]\n")
    clear_error(run(reg, "run", "s.yaml", "--no-report"), "s.yaml", "one column 'x' is named for two fields")
    data = rows(demo)
    api_error("one column 'x' is named for two fields", "Columns(id=...)", "Columns(text=...)", originals=data,
              releases={"r": data}, spec=spec_of(text="x", id="x"), registry=reg)


# --------------------------------------------------------------------------- TAB span_text


def test_a_tab_span_text_that_disagrees_with_its_offsets_is_refused(demo, reg):
    text = "Mr Galip Yalman lives in\nAnkara now."
    mentions = [{"start_offset": 0, "end_offset": 15, "span_text": "Mr Galip Yalman", "entity_type": "PERSON"},
                {"start_offset": 16, "end_offset": 31, "span_text": "lives in Ankara", "entity_type": "MISC"},
                {"start_offset": 24, "end_offset": 31, "span_text": "Ankara", "entity_type": "LOC"}]
    doc = {"doc_id": "d1", "text": text, "annotations": {"a1": {"entity_mentions": mentions}}}
    (demo / "tab.json").write_text(json.dumps([doc]))
    # a line break for a space, a space kept at one end: the same mention
    assert len(load_corpus(demo / "tab.json")["d1"].spans) == 3
    mentions.append({"start_offset": 25, "end_offset": 31, "span_text": "Ankora", "entity_type": "LOC"})
    (demo / "tab.json").write_text(json.dumps([doc]))
    needles = ("tab.json (document 'd1')", "mention 3", "span_text 'Ankora' is not the text at its offsets [25, 31)",
               "'Ankara'")
    clear_error(run(reg, "data", "validate", "tab.json"), *needles)
    clear_error(attack(reg, "--originals", "tab.json", "--release", "demo/releases/labels.jsonl"), *needles)
    api_error(*needles, originals=str(demo / "tab.json"), releases={"r": str(demo / "tab.json")}, registry=reg)
    # a JSONL span's span_text alike
    (demo / "s.jsonl").write_text(json.dumps({"id": "a", "text": text, "spans": [
        {"start": 0, "end": 15, "label": "PERSON", "span_text": "Mr Galip Yalmen"}]}) + "\n")
    clear_error(run(reg, "data", "validate", "s.jsonl"), "s.jsonl:1", "span_text 'Mr Galip Yalmen'")


@pytest.mark.skipif(not TAB.is_dir(), reason=f"the TAB data is not at {TAB} (see /work/shared/data/tab/README.md)")
def test_every_tab_file_in_the_shared_data_still_loads():
    originals = load_corpus(TAB / "bks" / "TAB_test_BK=Original.json")
    assert len(originals) == 127
    for path in sorted((TAB / "bks").glob("*.json")) + sorted((TAB / "corpora").glob("*.json")):
        assert len(load_corpus(path)) >= 127, path
    for path in sorted((TAB / "anonymizations").glob("*.json")):
        (release,) = load_release_file(path, originals=originals)
        assert len(release) == 127, path


# --------------------------------------------------------------------------- control characters in ids


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\x1b[2Jb", "a\x00b", "a\u202eb", "::error::x\n"])
def test_a_document_id_with_control_characters_is_refused_by_every_loader(demo, reg, bad):
    """An id is printed in logs, tables and annotations: one holding a newline, CR, ESC, NUL or a
    bidirectional override (a forged ``::error`` line) is refused by every loader, naming the
    file, the line (where the format has lines) and the id as repr shows it (issue 67).
    Cost: ~0.2 s per id."""
    import csv
    import io

    esc = json.dumps(bad)  # the id as JSON writes it
    buf = io.StringIO()
    csv.writer(buf).writerows([["id", "text"], ["ok", "fine text"], [bad, "hello there"]])
    files = {
        "ids.jsonl": ('{"id": "ok", "text": "fine text"}\n{"id": %s, "text": "hello there"}\n' % esc, ":2"),
        "ids.csv": (buf.getvalue(), ":3"),
        "ids.tsv": (buf.getvalue().replace(",", "\t"), ":3"),
        "list.json": ('[{"id": "ok", "text": "fine"}, {"id": %s, "text": "hello there"}]' % esc, ""),
        "map.json": ('{"ok": "fine text", %s: "hello there"}' % esc, ""),
        "tab.json": ('[{"doc_id": %s, "text": "Alice here", "annotations": {}}]' % esc, ""),
        "tri.json": ('[{"name": %s, "public_knowledge": "pk", "m": "x"}]' % esc, ""),
        "subject.jsonl": ('{"id": "ok", "text": "fine text", "subject": %s}\n' % esc, ":1"),
    }
    for name, (content, line) in files.items():
        if name.endswith(".tsv") and ("\n" in bad or "\r" in bad):
            content = buf.getvalue().replace(",", "\t")  # quoted by csv: still one cell
        (demo / name).write_text(content, encoding="utf-8", newline="")
        out = clear_error(run(reg, "data", "validate", name), f"{name}{line}", repr(bad), "control character")
        assert bad not in out  # never printed raw
        with pytest.raises(AnonauditError, match="control character") as caught:
            load_corpus(demo / name)
        assert repr(bad) in str(caught.value)
    clear_error(attack(reg, "--originals", "ids.jsonl", "--release", "demo/releases/labels.jsonl"),
                "ids.jsonl:2", repr(bad), "control character")
    with pytest.raises(AnonauditError, match="control character"):  # a table in memory
        anonaudit.utility([{"id": bad, "text": "hello there"}], {"r": [{"id": bad, "text": "hello"}]},
                          metrics=["toy_kept"], registry=reg, progress=False)


# --------------------------------------------------------------------------- span files that empty a document


def test_a_span_file_that_removes_a_whole_document_is_refused_when_applied(demo, reg):
    """A released document with no text left would be refused when read back (``empty text``):
    a span file that removes all of one is refused when it is applied, before any work and before
    anything is written, naming the document; one that replaces it with a placeholder is kept
    and reads back (issue 67). Cost: ~0.3 s."""
    docs = rows(demo, 6)
    whole = {docs[0]["id"]: [[0, len(docs[0]["text"])]], docs[1]["id"]: [[0, 3]]}
    (demo / "whole.json").write_text(json.dumps(whole), encoding="utf-8")
    needles = ("whole.json", repr(docs[0]["id"]), "removes the whole text")
    clear_error(run(reg, "data", "validate", "whole.json", "--originals", "demo/originals.jsonl"), *needles)
    clear_error(run(reg, "data", "convert", "whole.json", "w.jsonl", "--originals", "demo/originals.jsonl"), *needles)
    clear_error(attack(reg, "--originals", "demo/originals.jsonl", "--release", "w=whole.json"), *needles)
    assert not (demo / "w.jsonl").exists() and not (demo / "R.json").exists()
    with pytest.raises(DataError, match="removes the whole text"):
        load_release_file(demo / "whole.json", originals=load_corpus(demo / "demo/originals.jsonl"))
    whole[docs[0]["id"]][0].append("[REDACTED]")  # a placeholder: a document that can be read back
    (demo / "whole.json").write_text(json.dumps(whole), encoding="utf-8")
    res = run(reg, "data", "convert", "whole.json", "w.jsonl", "--originals", "demo/originals.jsonl")
    assert res.exit_code == 0, res.output
    assert load_corpus(demo / "w.jsonl")[docs[0]["id"]].text == "[REDACTED]"


def test_documents_with_no_text_are_never_written_as_jsonl(tmp_path):
    """What the JSONL writer would write and no loader could read back (a sanitizer that left a
    document empty) is refused naming the document, and nothing is written."""
    from audit.core.data import Document
    from audit.io.loaders import save_jsonl

    with pytest.raises(DataError, match=r"'b'.*no text left"):
        save_jsonl([Document("a", "kept"), Document("b", "  ")], tmp_path / "r.jsonl")
    assert not (tmp_path / "r.jsonl").exists()
