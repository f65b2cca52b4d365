"""TAE's published files read as published (issue 58): span files whose spans cross, TAE
corpora with and without annotations, background maps and TRI dataframes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.core.errors import AnonauditError
from audit.io.loaders import load_corpus, load_release_file, load_tri

ROOT = Path(__file__).resolve().parents[1]
TAB = ROOT.parent / "shared" / "data" / "tab"
needs_tab = pytest.mark.skipif(not TAB.is_dir(), reason=f"needs the shared TAB data in {TAB}")

TEXT = "Mr Galip Yalman was born in Istanbul in 1960."


def _originals(tmp_path: Path) -> Path:
    path = tmp_path / "originals.json"
    path.write_text(json.dumps({"d1": TEXT, "d2": "Nothing to see here."}))
    return path


def _release(tmp_path: Path, spans) -> object:
    originals = load_corpus(_originals(tmp_path))
    path = tmp_path / "spans.json"
    path.write_text(json.dumps({"d1": spans}))
    (release,) = load_release_file(path, name="r", originals=originals)
    return release


@pytest.mark.parametrize("a, b", [([3, 8], [6, 15]), ([3, 8, ""], [6, 15, "  "]), ([3, 8, "X"], [6, 15, "X"])])
def test_crossing_spans_with_one_meaning_are_applied_as_their_union(tmp_path, a, b):
    release = _release(tmp_path, [a, b])
    doc = release.corpus["d1"]
    assert "Galip" not in doc.text and "Yalman" not in doc.text and doc.text.startswith("Mr ")
    (span,) = doc.spans
    assert (span.orig_start, span.orig_end) == (3, 15)
    assert len(release.notes) == 1 and release.notes[0].startswith("1 pair(s) of crossing spans in 1 document(s)")
    assert doc.meta["span_file"] == [[3, 8], [6, 15]]  # as listed: TAE's precision counts each


def test_crossing_spans_with_different_replacements_are_refused_naming_both(tmp_path):
    with pytest.raises(AnonauditError) as err:
        _release(tmp_path, [[3, 8, "A"], [6, 15, "B"]])
    msg = str(err.value)
    assert "spans.json" in msg and "d1" in msg and "[3, 8)" in msg and "[6, 15)" in msg and "'A'" in msg
    with pytest.raises(AnonauditError, match=r"\[3, 8\) replaced by ''"):  # suppression against a replacement
        _release(tmp_path, [[3, 8], [6, 15, "B"]])


def test_a_span_file_without_crossing_spans_has_no_note_and_no_listing(tmp_path):
    release = _release(tmp_path, [[3, 15, "PERSON"], [28, 36]])
    assert release.notes == ()
    assert "span_file" not in release.corpus["d1"].meta
    assert release.corpus["d1"].text == "Mr PERSON was born in  in 1960."


def test_the_note_reaches_the_release_provenance(tmp_path):
    from anonaudit.api import audit

    originals = load_corpus(_originals(tmp_path))
    spans = tmp_path / "spans.json"
    spans.write_text(json.dumps({"d1": [[3, 8], [6, 15]]}))
    results = audit(originals=originals, releases={"r": str(spans)}, metrics=["rouge"], seed=0)
    notes = results.provenance["releases"]["r"]["notes"]
    assert notes and "merged into their union" in notes[0]


@needs_tab
@pytest.mark.parametrize("path", sorted((TAB / "anonymizations").glob("*.json")), ids=lambda p: p.stem)
def test_every_published_tab_span_file_loads(path):
    originals = load_corpus(TAB / "bks" / "TAB_test_BK=Original.json")
    (release,) = load_release_file(path, originals=originals)
    assert len(release) == 127
    listed = json.loads(path.read_text())
    masked = sum(1 for d in release.corpus for _ in d.spans)
    assert 0 < masked <= sum(len(v) for v in listed.values())


@needs_tab
def test_tae_corpus_without_annotations_and_background_maps_load_unchanged():
    corpus = load_corpus(TAB / "corpora" / "TAB_test_Corpus_textonly.json")
    raw = json.loads((TAB / "corpora" / "TAB_test_Corpus_textonly.json").read_text())
    assert [d.id for d in corpus] == [r["doc_id"] for r in raw]
    assert all(d.text == r["text"] and not d.spans for d, r in zip(corpus, raw))
    for bk in sorted((TAB / "bks").glob("*.json")):
        data = json.loads(bk.read_text())
        background = load_corpus(bk)
        assert {d.id: d.text for d in background} == data, bk.name
        assert all(d.subject == d.id for d in background)


@needs_tab
def test_tae_corpus_with_annotations_loads_every_annotator(tmp_path):
    """TAE's annotated layout (the TAB gold is not among the shared files, so two annotators'
    mentions are written here over the shared texts)."""
    raw = json.loads((TAB / "corpora" / "TAB_test_Corpus_textonly.json").read_text())[:3]
    text = raw[0]["text"]
    start = text.index("36110/97")
    raw[0]["annotations"] = {
        "annotator1": {"entity_mentions": [
            {"entity_type": "CODE", "entity_mention_id": "a1_em1", "start_offset": start, "end_offset": start + 8,
             "span_text": "36110/97", "edit_type": "check", "identifier_type": "DIRECT", "entity_id": "a1_e1",
             "confidential_status": "NOT_CONFIDENTIAL"}]},
        "annotator2": {"entity_mentions": [
            {"entity_type": "CODE", "start_offset": start, "end_offset": start + 5, "identifier_type": "QUASI",
             "entity_id": "a2_e1"}]}}
    path = tmp_path / "TAB_test_Corpus.json"
    path.write_text(json.dumps(raw))
    corpus = load_corpus(path)
    assert len(corpus) == 3 and corpus[0].text == text
    assert {(s.start, s.end, s.identifier_type) for s in corpus[0].spans} == {
        (start, start + 8, "DIRECT"), (start, start + 5, "QUASI")}
    gold = corpus[0].meta["annotations"]
    assert [m["annotator"] for m in gold] == ["annotator1", "annotator2"]


@needs_tab
def test_a_tri_dataframe_of_the_shared_files_loads_unchanged(tmp_path):
    public = json.loads((TAB / "bks" / "TAB_test_BK=Public10%.json").read_text())
    original = json.loads((TAB / "bks" / "TAB_test_BK=Original.json").read_text())
    ids = sorted(original)[:5]
    frame = {"name": {str(i): k for i, k in enumerate(ids)},
             "public_knowledge": {str(i): public[k] for i, k in enumerate(ids)},
             "Original": {str(i): original[k] for i, k in enumerate(ids)}}
    path = tmp_path / "tri.json"
    path.write_text(json.dumps(frame))
    background, releases = load_tri(path)
    assert [d.text for d in background] == [public[k] for k in ids]
    assert [r.name for r in releases] == ["Original"]
    assert [d.text for d in releases[0].corpus] == [original[k] for k in ids]


def _mention(**over):
    return {"entity_type": "PERSON", "start_offset": 3, "end_offset": 15, "identifier_type": "DIRECT",
            "entity_id": "e1", **over}


@pytest.mark.parametrize("mention, field", [
    (_mention(start_offset="3"), "'start_offset' must be an integer, got '3'"),
    (_mention(identifier_type="MAYBE"), "'identifier_type' must be one of DIRECT, QUASI, NO_MASK, got 'MAYBE'"),
    (_mention(entity_type=7), "'entity_type' must be a string, got 7"),
    ({"entity_type": "PERSON", "end_offset": 15}, "needs 'start_offset' and 'end_offset'")])
def test_an_unreadable_tae_corpus_names_the_file_the_document_and_the_field(tmp_path, mention, field):
    path = tmp_path / "TAB_test_Corpus.json"
    path.write_text(json.dumps([{"doc_id": "d1", "text": TEXT},
                                {"doc_id": "d2", "text": TEXT, "annotations": {"a1": {"entity_mentions": [mention]}}}]))
    with pytest.raises(AnonauditError) as err:
        load_corpus(path)
    assert f"{path} (document 'd2'): item 1: annotator 'a1' mention 0: {field}" in str(err.value)


def test_an_unreadable_span_file_names_the_file_the_document_and_the_span(tmp_path):
    with pytest.raises(AnonauditError, match=r"spans\.json \(document 'd1'\): span 1: the replacement must be a string"):
        _release(tmp_path, [[3, 15, "PERSON"], [28, 36, 5]])
