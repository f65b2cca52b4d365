"""Loaders: every format, detection and override, span files, TRI, TAB, and every validation error."""

import csv
import json

import pytest

from audit.core.data import Corpus, Document, Span
from audit.core.errors import AnonauditError, DataError
from audit.io.loaders import (FORMATS, detect_format, load_corpus, load_releases, load_tri,
                           parse_release_spec, save_jsonl)

TEXT1 = 'Serco Limited ("Serco") hired Mr Galip Yalman in Ankara on 3 August 2003.'
TEXT2 = "Ms Ayse Demir was born in 1970 in Izmir."


def write(path, content):
    path.write_text(content, encoding="utf-8")
    return path


def write_jsonl(path, records):
    return write(path, "".join(json.dumps(r) + "\n" for r in records))


def errors_of(fn, *args, **kwargs):
    with pytest.raises(DataError) as info:
        fn(*args, **kwargs)
    return info.value.problems, str(info.value)


@pytest.fixture
def originals_file(tmp_path):
    i_name = TEXT1.index("Galip Yalman")
    return write_jsonl(tmp_path / "orig.jsonl", [
        {"id": "d1", "text": TEXT1, "subject": "yalman",
         "spans": [{"start": i_name, "end": i_name + 12, "label": "PERSON", "entity_id": "e1",
                    "identifier_type": "DIRECT"}]},
        {"id": "d2", "text": TEXT2, "subject": "demir"},
    ])


# --------------------------------------------------------------------------- formats


def test_jsonl_with_dict_and_list_spans(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [
        {"id": "d1", "text": TEXT1, "subject": "p1", "spans": [[30, 45, "PERSON"], {"start": 0, "end": 23,
                                                                                       "entity_type": "ORG"}]},
        {"id": "d2", "text": TEXT2, "source": "registry"},
    ])
    corpus = load_corpus(path)
    assert detect_format(path) == "jsonl"
    assert corpus.ids == ["d1", "d2"] and corpus.name == "c"
    d1 = corpus["d1"]
    assert d1.subject == "p1"
    assert [(s.start, s.end, s.label) for s in d1.spans] == [(0, 23, "ORG"), (30, 45, "PERSON")]
    assert d1.span_text(d1.spans[1]) == "Mr Galip Yalman"
    assert corpus["d2"].subject is None and corpus["d2"].meta == {"source": "registry"}


def test_utf8_bom_is_tolerated(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "a", "text": "caf\u00e9"}).encode() + b"\n")
    assert load_corpus(path)["a"].text == "caf\u00e9"
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"a": "x"}).encode())
    assert load_corpus(path)["a"].text == "x"


def test_csv_with_spans_column(tmp_path):
    path = tmp_path / "c.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "text", "subject", "spans", "year"])
        spans = json.dumps([{"start": 33, "end": 45, "label": "PERSON"}])
        w.writerow(["d1", TEXT1 + "\nsecond line", "p1", spans, "2003"])
        w.writerow(["d2", TEXT2, "", "", "1970"])
    corpus = load_corpus(path)
    assert detect_format(path) == "csv"
    assert corpus["d1"].text.endswith("second line")
    assert corpus["d1"].spans == (Span(33, 45, "PERSON"),)
    assert corpus["d2"].subject is None and corpus["d2"].meta == {"year": "1970"}


def test_json_map_subject_is_id(tmp_path):
    path = write(tmp_path / "bk.json", json.dumps({"001": TEXT1, "002": TEXT2}))
    corpus = load_corpus(path)
    assert detect_format(path) == "json-map"
    assert [(d.id, d.subject) for d in corpus] == [("001", "001"), ("002", "002")]


def test_json_list_accepts_doc_id_alias(tmp_path):
    path = write(tmp_path / "textonly.json", json.dumps([
        {"doc_id": "001", "text": TEXT1, "dataset_type": "test"},
        {"id": "x", "text": TEXT2, "subject": "s"},
    ]))
    corpus = load_corpus(path)
    assert detect_format(path) == "json-list"
    assert corpus["001"].subject == "001" and corpus["001"].meta == {"dataset_type": "test"}
    assert corpus["x"].subject == "s"


def tab_doc(doc_id, text, annotations):
    return {"doc_id": doc_id, "text": text, "dataset_type": "test", "annotations": {
        ann: {"entity_mentions": [
            {"entity_type": t, "entity_mention_id": f"{doc_id}_{i}", "start_offset": s, "end_offset": e,
             "span_text": text[s:e], "identifier_type": idt, "entity_id": f"{doc_id}_e{i}"}
            for i, (s, e, t, idt) in enumerate(mentions)]}
        for ann, mentions in annotations.items()}}


def test_tab_annotator_selection_and_merge(tmp_path):
    name = (TEXT1.index("Galip"), TEXT1.index("Galip") + 12)
    org = (0, 23)
    city = (TEXT1.index("Ankara"), TEXT1.index("Ankara") + 6)
    path = write(tmp_path / "tab.json", json.dumps([
        tab_doc("001", TEXT1, {
            "annotator1": [(*name, "PERSON", "DIRECT"), (*org, "ORG", "QUASI")],
            "annotator2": [(*name, "PERSON", "DIRECT"), (*city, "LOC", "QUASI")],
        }),
        tab_doc("002", TEXT2, {"annotator2": [(3, 13, "PERSON", "DIRECT")]}),
    ]))
    assert detect_format(path) == "tab"
    merged = load_corpus(path)
    assert [(s.start, s.end) for s in merged["001"].spans] == sorted([name, org, city])
    assert merged["001"].subject == "001"
    person = next(s for s in merged["001"].spans if s.label == "PERSON")
    assert person.identifier_type == "DIRECT" and person.entity_id == "001_e0"
    one = load_corpus(path, annotator="annotator1")
    assert [(s.start, s.end, s.label) for s in one["001"].spans] == [(*org, "ORG"), (*name, "PERSON")]
    assert one["002"].spans == ()
    _, msg = errors_of(load_corpus, path, annotator="nobody")
    assert "annotator1, annotator2" in msg


TRI_ROWS = [
    {"name": "Ayse Demir", "public_knowledge": "Public bio of Ayse.", "original": TEXT2,
     "manual": "Ms *** was born in *** in ***.", "age": 54},
    {"name": "Galip Yalman", "public_knowledge": "Public bio of Galip.", "original": TEXT1, "manual": None,
     "age": 60},
]


def check_tri(background, releases):
    assert [(d.id, d.subject, d.text) for d in background] == [
        ("Ayse Demir", "Ayse Demir", "Public bio of Ayse."), ("Galip Yalman", "Galip Yalman", "Public bio of Galip.")]
    by_name = {r.name: r for r in releases}
    assert set(by_name) == {"original", "manual"}  # the numeric column is not a method
    assert by_name["original"].corpus.ids == ["Ayse Demir", "Galip Yalman"]
    assert by_name["manual"].corpus.ids == ["Ayse Demir"]  # empty cell: no document
    assert by_name["manual"].corpus["Ayse Demir"].subject == "Ayse Demir"


def test_tri_records_columns_and_csv(tmp_path):
    records = write(tmp_path / "tri.json", json.dumps(TRI_ROWS))
    columns = {c: {str(i): r[c] for i, r in enumerate(TRI_ROWS)} for c in TRI_ROWS[0]}
    cols = write(tmp_path / "tri_cols.json", json.dumps(columns))
    csv_path = tmp_path / "tri.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["", *TRI_ROWS[0]])  # pandas writes its index as an unnamed first column
        for i, r in enumerate(TRI_ROWS):
            w.writerow([i, *("" if v is None else v for v in r.values())])
    for path in (records, cols, csv_path):
        assert detect_format(path) == "tri"
        check_tri(*load_tri(path))
    assert load_corpus(records).ids == ["Ayse Demir", "Galip Yalman"]  # the background


def test_tri_release_spec_selects_method(tmp_path):
    path = write(tmp_path / "tri.json", json.dumps(TRI_ROWS))
    assert [r.name for r in load_releases(str(path))] == ["original", "manual"]
    (manual,) = load_releases(f"manual={path}")
    assert manual.name == "manual" and len(manual) == 1
    with pytest.raises(AnonauditError, match="original, manual"):
        load_releases(f"nope={path}")


def test_tri_duplicate_and_missing_names(tmp_path):
    rows = [dict(TRI_ROWS[0]), dict(TRI_ROWS[0]), {**TRI_ROWS[1], "name": ""}]
    problems, msg = errors_of(load_tri, write(tmp_path / "t.json", json.dumps(rows)))
    assert "row 1: duplicate name" in msg and "row 2: missing or empty 'name'" in msg


# --------------------------------------------------------------------------- detection, override, specs


def test_format_override_and_unknown_format(tmp_path):
    path = write_jsonl(tmp_path / "data.txt", [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}])
    assert detect_format(path) == "jsonl"
    assert load_corpus(path, format="jsonl").ids == ["a", "b"]
    one = write(tmp_path / "one.data", json.dumps({"a": "x"}))
    assert load_corpus(one, format="json-map").ids == ["a"]
    with pytest.raises(AnonauditError, match="unknown format 'xml'"):
        load_corpus(one, format="xml")
    assert set(FORMATS) == {"jsonl", "csv", "parquet", "json-map", "json-list", "tab", "tri", "spans"}


def test_jsonl_content_in_a_json_file_is_detected(tmp_path):
    path = write_jsonl(tmp_path / "data.json", [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}])
    assert detect_format(path) == "jsonl"


def test_parse_release_spec(tmp_path):
    assert parse_release_spec("masked=out/r.jsonl") == ("masked", "out/r.jsonl")
    assert parse_release_spec("out/r.jsonl") == (None, "out/r.jsonl")
    assert parse_release_spec("dir/TAB_BK=Original.json") == (None, "dir/TAB_BK=Original.json")
    existing = write(tmp_path / "BK=Original.json", "{}")
    assert parse_release_spec(str(existing)) == (None, str(existing))
    assert parse_release_spec(f"bk={existing}") == ("bk", str(existing))


def test_release_name_defaults_to_file_stem(tmp_path, originals_file):
    orig = load_corpus(originals_file)
    rel = write_jsonl(tmp_path / "masked.jsonl", [{"id": "d2", "text": "Ms *** was born."}])
    (r,) = load_releases(str(rel), originals=orig)
    assert r.name == "masked" and r.aligned and r.corpus.ids == ["d2"]
    (r,) = load_releases(f"mine={rel}", originals=orig)
    assert r.name == "mine"


def test_release_file_takes_name_and_path_apart(tmp_path, originals_file):
    from audit.io.loaders import load_release_file

    orig = load_corpus(originals_file)
    rel = write_jsonl(tmp_path / "a=b.jsonl", [{"id": "d2", "text": "Ms *** was born."}])
    (r,) = load_release_file(rel, name="x=y", originals=orig)  # no string to split: "=" is fine on both sides
    assert r.name == "x=y" and r.corpus.ids == ["d2"] and r.source == str(rel)
    (r,) = load_release_file(rel, originals=orig)
    assert r.name == "a=b"


# --------------------------------------------------------------------------- span files


def test_span_file_applied_nested_unordered_suppression(tmp_path, originals_file):
    orig = load_corpus(originals_file)
    i_name = TEXT1.index("Galip Yalman")
    i_city = TEXT1.index("Ankara")
    spans = {"d1": [[i_city, i_city + 6, "a city"], [16, 21, "X"], [i_name, i_name + 12], [0, 23, "[ORG]"]],
             "d2": [[3, 13, ""]]}
    path = write(tmp_path / "Manual_Entity.json", json.dumps(spans))
    assert detect_format(path) == "spans"
    (rel,) = load_releases(str(path), originals=orig)
    assert rel.name == "Manual_Entity" and rel.aligned
    d1 = rel.corpus["d1"]
    assert d1.text == "[ORG] hired Mr  in a city on 3 August 2003."
    assert d1.subject == "yalman"
    assert [s.original for s in d1.spans] == ['Serco Limited ("Serco")', "Galip Yalman", "Ankara"]
    for s in d1.spans:
        assert d1.text[s.start:s.end] == s.replacement
        assert TEXT1[s.orig_start:s.orig_end] == s.original
    person = d1.spans[1]
    assert person.replacement == "" and person.length == 0  # suppression
    assert (person.label, person.entity_id, person.identifier_type) == ("PERSON", "e1", "DIRECT")  # from gold
    assert d1.spans[0].label == "" and d1.spans[2].label == ""  # no gold span at those offsets
    assert rel.corpus["d2"].text == "Ms  was born in 1970 in Izmir."


def test_span_file_needs_originals(tmp_path):
    path = write(tmp_path / "s.json", json.dumps({"d1": [[0, 2]]}))
    with pytest.raises(AnonauditError, match="--originals"):
        load_releases(str(path))
    with pytest.raises(AnonauditError, match="--originals"):
        load_corpus(path)


def test_span_file_errors_all_listed(tmp_path, originals_file):
    orig = load_corpus(originals_file)
    path = write(tmp_path / "s.json", json.dumps({
        "d1": [[0, 5000, "X"], [10, 4], ["a", 3], [1, 2, 3, 4]],
        "ghost": [[0, 1]],
    }))
    problems, msg = errors_of(load_releases, str(path), originals=orig)
    assert all(p.source == str(path) for p in problems)
    assert {p.doc_id for p in problems} == {"d1", "ghost"}
    assert "outside the original text (length 73)" in msg
    assert "end 4 is before start 10" in msg
    assert "must be integers" in msg
    assert "expected [start, end]" in msg
    assert "(document 'ghost'): id not found in the originals" in msg
    assert msg.startswith("5 problems found:")


# --------------------------------------------------------------------------- validation errors


def test_missing_file_and_empty_file(tmp_path):
    _, msg = errors_of(load_corpus, tmp_path / "nope.jsonl")
    assert msg == f"{tmp_path / 'nope.jsonl'}: file not found"
    _, msg = errors_of(load_corpus, write(tmp_path / "empty.jsonl", "\n"))
    assert "empty" in msg


def test_invalid_json_names_file_and_line(tmp_path):
    path = write(tmp_path / "bad.json", '{\n  "a": "x",\n  "b": oops\n}')
    (problem,), msg = errors_of(load_corpus, path)
    assert problem.line == 3 and msg.startswith(f"{path}:3: invalid JSON")


def test_jsonl_errors_each_with_its_line(tmp_path):
    lines = [
        json.dumps({"id": "a", "text": TEXT2}),                       # 1 ok
        "{not json",                                                  # 2
        json.dumps({"text": "no id"}),                                # 3
        json.dumps({"id": "b"}),                                      # 4
        json.dumps({"id": "c", "text": 5}),                           # 5
        json.dumps({"id": "a", "text": "again"}),                     # 6 duplicate
        json.dumps({"id": "d", "text": "   "}),                       # 7 empty
        json.dumps({"id": "e", "text": "short", "spans": [[0, 99]]}), # 8 out of range
        json.dumps({"id": "f", "text": "short", "spans": [{"start": 4, "end": 2}]}),  # 9 end < start
        json.dumps({"id": "g", "text": "abcdefgh", "spans": [[0, 4], [2, 6], [0, 8], [0, 1]]}),  # 10 crossing
        json.dumps({"id": "h", "text": "abc", "spans": [{"start": 0, "end": 1, "colour": "red"}]}),  # 11
    ]
    path = write(tmp_path / "bad.jsonl", "\n".join(lines) + "\n")
    problems, msg = errors_of(load_corpus, path)
    by_line = {p.line: p for p in problems}
    assert sorted(by_line) == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert "invalid JSON" in by_line[2].message
    assert "missing field 'id'" in by_line[3].message
    assert "missing field 'text'" in by_line[4].message and by_line[4].doc_id == "b"
    assert "must be a string" in by_line[5].message
    assert "duplicate id (first at line 1)" in by_line[6].message and by_line[6].doc_id == "a"
    assert "empty text" in by_line[7].message
    assert "outside the text (length 5)" in by_line[8].message
    assert "end 2 is before start 4" in by_line[9].message
    assert "[0, 4) and [2, 6) overlap" in by_line[10].message
    assert "unknown field(s) colour" in by_line[11].message
    assert f"{path}:6 (document 'a'): duplicate id" in msg


def test_nested_annotation_spans_are_fine(tmp_path):
    path = write_jsonl(tmp_path / "n.jsonl", [{"id": "a", "text": TEXT1, "spans": [[0, 23], [16, 21], [0, 23]]}])
    assert len(load_corpus(path)["a"].spans) == 3


def test_csv_missing_columns_and_bad_rows(tmp_path):
    path = write(tmp_path / "c.csv", "id,body\n1,hello\n")
    (problem,), msg = errors_of(load_corpus, path)
    assert problem.line == 1 and "missing column(s) text" in msg and "'body'" in msg
    path = write(tmp_path / "d.csv", 'id,text,spans\n1,hello,\n1,"multi\nline",\n2,,\n3,x,y,z\n4,abc,"[[0,9]]"\n')
    problems, _ = errors_of(load_corpus, path)
    got = {(p.line, p.message.split(" (")[0].split(":")[0]) for p in problems}
    assert got == {(3, "duplicate id"), (5, "empty text"), (6, "row has 4 fields, the header has 3"),
                   (7, "span 0")}


def test_json_map_errors(tmp_path):
    path = write(tmp_path / "m.json", '{"a": "x", "b": "", "d": "y", "c": 3}')
    problems, msg = errors_of(load_corpus, path)
    assert {(p.doc_id, p.message.split(" (")[0]) for p in problems} == {
        ("b", "empty text"), ("c", "the value must be a text string, got int")}
    # an id given twice: JSON would keep the last text; refused when the file is parsed, with its line
    path = write(tmp_path / "m2.json", '{"a": "x",\n "b": "z",\n "a": "y"}')
    (problem,), _ = errors_of(load_corpus, path)
    assert problem.line == 3 and "the key 'a' appears twice in one JSON object" in problem.message


def test_json_list_errors_name_item(tmp_path):
    path = write(tmp_path / "l.json", json.dumps([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}, "str"]))
    _, msg = errors_of(load_corpus, path)
    assert "item 1: duplicate id" in msg and "item 2: expected a JSON object" in msg


def test_not_utf8_names_the_line(tmp_path):
    for name, content in [("c.csv", b"id,text\n1,caf\xe9\n"), ("m.json", b'{"a": "x",\n "b": "caf\xe9"}'),
                          ("l.jsonl", b'{"id": "a", "text": "x"}\n{"id": "b", "text": "caf\xe9"}\n')]:
        path = tmp_path / name
        path.write_bytes(content)
        (problem,), _ = errors_of(load_corpus, path)
        assert problem.line == 2 and "not valid UTF-8" in problem.message, name


def test_tab_mention_errors(tmp_path):
    doc = tab_doc("001", TEXT2, {"a1": [(3, 500, "PERSON", "DIRECT"), (20, 10, "DATETIME", "QUASI")]})
    doc["annotations"]["a1"]["entity_mentions"].append({"entity_type": "LOC"})
    problems, msg = errors_of(load_corpus, write(tmp_path / "tab.json", json.dumps([doc])))
    assert [p.doc_id for p in problems] == ["001"] * 3
    assert "annotator 'a1' mention 0: [3, 500) is outside the text" in msg
    assert "mention 1: end 10 is before start 20" in msg
    assert "mention 2: needs 'start_offset' and 'end_offset'" in msg


def test_tri_releases_aligned_only_when_names_are_original_ids(tmp_path):
    path = write(tmp_path / "tri.json", json.dumps(TRI_ROWS))
    by_name = Corpus([Document("Ayse Demir", TEXT2), Document("Galip Yalman", TEXT1)])
    assert all(r.aligned for r in load_releases(str(path), originals=by_name))
    other = Corpus([Document("d1", TEXT1)])
    assert not any(r.aligned for r in load_releases(str(path), originals=other))


def test_release_ids_absent_from_originals(tmp_path, originals_file):
    orig = load_corpus(originals_file)
    rel = write_jsonl(tmp_path / "r.jsonl", [{"id": "d1", "text": "x"}, {"id": "zz", "text": "y"}])
    (problem,), _ = errors_of(load_releases, str(rel), originals=orig)
    assert problem.doc_id == "zz" and "not found in the originals" in problem.message


def test_problem_count_is_capped(tmp_path, monkeypatch):
    from audit.core.errors import Problems

    monkeypatch.setattr(Problems.__init__, "__defaults__", (3,))
    path = write(tmp_path / "many.jsonl", "{bad\n" * 10)
    problems, msg = errors_of(load_corpus, path)
    assert len(problems) == 4 and "7 more problems not listed" in msg


# --------------------------------------------------------------------------- saving


def test_save_jsonl_round_trip_keeps_release_records(tmp_path, originals_file):
    orig = load_corpus(originals_file)
    path = write(tmp_path / "s.json", json.dumps({"d1": [[0, 23, "[ORG]"], [30, 45]]}))
    (rel,) = load_releases(str(path), originals=orig)
    out = save_jsonl(rel.corpus, tmp_path / "out" / "rel.jsonl")
    back = load_corpus(out)
    assert list(back) == list(rel.corpus)
    assert list(load_corpus(save_jsonl(orig, tmp_path / "o.jsonl"))) == list(orig)
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temp file left


def test_release_record_whose_replacement_is_not_at_its_offsets_is_refused(tmp_path, originals_file):
    """A release record locates its replacement in the released text; offsets gone wrong (here
    shifted by two characters after an edit of the text) would make the attacks block the wrong
    words, so loading names the line, the document and what stands there instead."""
    orig = load_corpus(originals_file)
    path = write(tmp_path / "s.json", json.dumps({"d1": [[0, 23, "[ORG]"], [30, 45]]}))
    (rel,) = load_releases(str(path), originals=orig)
    out = save_jsonl(rel.corpus, tmp_path / "rel.jsonl")
    assert list(load_corpus(out)) == list(rel.corpus)
    rec = json.loads(out.read_text().splitlines()[0])
    assert rec["spans"][0]["replacement"] == "[ORG]"
    rec["text"] = "> " + rec["text"]  # the text edited, the offsets not
    write(out, json.dumps(rec) + "\n")
    problems, msg = errors_of(load_corpus, out)
    assert len(problems) == 1 and "rel.jsonl:1 (document 'd1')" in msg
    assert "replacement '[ORG]' is not the text at its offsets [0, 5), which is '> [OR'" in msg


def test_save_jsonl_is_atomic_on_failure(tmp_path):
    target = write(tmp_path / "keep.jsonl", "old\n")

    def docs():
        yield Document("a", "x")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        save_jsonl(docs(), target)
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["keep.jsonl"]


def test_loaded_corpus_is_a_corpus(tmp_path):
    corpus = load_corpus(write(tmp_path / "m.json", json.dumps({"a": "x"})), name="bk")
    assert isinstance(corpus, Corpus) and corpus.name == "bk" and corpus.source == str(tmp_path / "m.json")
