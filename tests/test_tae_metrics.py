"""TAE's Precision, Recall and RecallPerEntityType (issue 58), counted by hand on a two-annotator
document in TAE's corpus layout: words are \\w+ runs, recall micro-averages over annotators and
leaves aside unmasked titles and function words, precision counts every listed span's words."""

from __future__ import annotations

import json

import pytest

TEXT = "Mr John Smith lives in Oslo, Norway. Case no. 123/45 of the University of Bergen."


def _at(s: str) -> list[int]:
    i = TEXT.index(s)
    return [i, i + len(s)]


def _mention(entity_id, entity_type, kind, s):
    start, end = _at(s)
    return {"entity_id": entity_id, "entity_type": entity_type, "identifier_type": kind, "start_offset": start,
            "end_offset": end, "span_text": s}


def _files(tmp_path, spans):
    corpus = [{"doc_id": "d1", "text": TEXT, "annotations": {
        "annotator1": {"entity_mentions": [
            _mention("a1", "PERSON", "DIRECT", "John Smith"), _mention("a2", "LOC", "QUASI", "Oslo"),
            _mention("a3", "LOC", "NO_MASK", "Norway"), _mention("a4", "CODE", "DIRECT", "123/45")]},
        "annotator2": {"entity_mentions": [
            _mention("b1", "PERSON", "DIRECT", "Mr John Smith"), _mention("b2", "LOC", "QUASI", "Oslo, Norway"),
            _mention("b3", "ORG", "QUASI", "University of Bergen")]}}}]
    (tmp_path / "corpus.json").write_text(json.dumps(corpus))
    (tmp_path / "spans.json").write_text(json.dumps({"d1": spans}))
    return str(tmp_path / "corpus.json"), str(tmp_path / "spans.json")


def _run(tmp_path, spans, metrics):
    from anonaudit.api import audit

    corpus, release = _files(tmp_path, spans)
    results = audit(originals=corpus, releases={"r": release}, metrics=metrics, seed=0)
    return {r.name: r for r in results.results}


BASE = [_at("Mr John Smith"), _at("lives"), _at("Oslo"), _at("123"), _at("University") + ["ORG"],
        _at("Bergen") + ["ORG"]]


def test_recall_and_recall_per_entity_type_by_hand(tmp_path):
    got = _run(tmp_path, BASE, [{"name": "tae_recall"}])["tae_recall"]
    # annotator1: John Smith 2/2, Oslo 1/1, 123/45 1/2 (Norway is NO_MASK);
    # annotator2: Mr John Smith 3/3, Oslo, Norway 1/2, University of Bergen 3/3 ("of" unmasked, an ADP)
    assert got.value == pytest.approx(11 / 13)
    assert got.details["per_entity_type"] == pytest.approx({"CODE": 1 / 2, "LOC": 2 / 3, "ORG": 1.0, "PERSON": 1.0})
    assert got.details["units"] == 13


def test_recall_options_mention_level_and_quasi_only(tmp_path):
    got = _run(tmp_path, BASE, [{"name": "tae_recall", "params": {"token_level": False}},
                                ])["tae_recall"]
    # mentions: John Smith, Oslo masked; 123/45 not; Mr John Smith, University of Bergen ("of" aside) masked;
    # "Oslo, Norway" not
    assert got.value == pytest.approx(4 / 6)
    quasi = _run(tmp_path, BASE, [{"name": "tae_recall", "params": {"include_direct": False}}])["tae_recall"]
    assert quasi.value == pytest.approx(5 / 6)  # Oslo 1/1; Oslo, Norway 1/2; University of Bergen 3/3


def test_an_unmasked_title_is_left_aside_but_a_name_is_not(tmp_path):
    only_names = [_at("John Smith")]
    got = _run(tmp_path, only_names, [{"name": "tae_recall"}])["tae_recall"]
    # annotator1: John Smith 2/2, Oslo 0/1, 123/45 0/2; annotator2: Mr (aside) John Smith 3/3, Oslo, Norway
    # 0/2, University of Bergen 1/3 (only "of", an adposition, left aside)
    assert got.value == pytest.approx(6 / 13)


def test_precision_by_hand_and_repeated_spans_count_twice(tmp_path):
    got = _run(tmp_path, BASE, [{"name": "tae_precision"}])["tae_precision"]
    # words (annotators containing it, of 2): Mr 1, John 2, Smith 2, lives 0, Oslo 2, 123 1, University 1, Bergen 1
    assert got.value == pytest.approx(10 / 16)
    twice = _run(tmp_path, BASE + [_at("Oslo")], [{"name": "tae_precision"}])["tae_precision"]
    assert twice.value == pytest.approx(12 / 18)
    assert "Precision_IC" in twice.details["not_computed"]


def test_our_precision_and_recall_show_tae_figures_beside_ours(tmp_path):
    got = _run(tmp_path, BASE, ["precision", "recall", "tae_recall", "tae_precision"])
    assert got["recall"].details["tae_recall"] == pytest.approx(got["tae_recall"].value)
    assert got["precision"].details["tae_precision"] == pytest.approx(got["tae_precision"].value)
    # entity level (ours): of the 6 entities to mask, the 3 whose every mention is replaced:
    # the headline differs from TAE's token-level figure, both are reported
    assert got["recall"].value != pytest.approx(got["tae_recall"].value)


def test_originals_without_gold_are_an_error_naming_the_metric(tmp_path):
    from anonaudit.api import audit
    from audit.core.errors import AnonauditError

    (tmp_path / "o.json").write_text(json.dumps({"d1": TEXT}))
    (tmp_path / "s.json").write_text(json.dumps({"d1": [[0, 2]]}))
    with pytest.raises(AnonauditError, match="tae_recall needs gold annotations"):
        audit(originals=str(tmp_path / "o.json"), releases={"r": str(tmp_path / "s.json")}, metrics=["tae_recall"])
