import json
import sys

import pytest
from click.testing import CliRunner

from anonaudit.cli import main
from audit.core.data import Corpus, Document, Span
from audit.core.errors import AnonauditError
from audit.core.registry import registry

TEXT = "Mr Galip Yalman was born in Ankara on 3 August 1961 and worked for Serco Limited."


def annotated() -> Corpus:
    def sp(s, label):
        i = TEXT.index(s)
        return Span(i, i + len(s), label)

    doc = Document("d1", TEXT, "p1", (sp("Galip Yalman", "PERSON"), sp("Ankara", "LOC"),
                                       sp("3 August 1961", "DATE")))
    return Corpus([doc, Document("d2", "Nothing to hide here.", "p2")], name="orig")


def test_suppression_records_replacements():
    rel = registry.create("sanitizer", "suppression").sanitize(annotated(), name="sup")
    doc = rel.corpus["d1"]
    assert doc.text == "Mr  was born in  on  and worked for Serco Limited."
    assert [(s.original, s.replacement, s.label) for s in doc.spans] == [
        ("Galip Yalman", "", "PERSON"), ("Ankara", "", "LOC"), ("3 August 1961", "", "DATE")]
    assert all(doc.text[s.start:s.end] == "" and TEXT[s.orig_start:s.orig_end] == s.original for s in doc.spans)
    assert rel.name == "sup" and rel.sanitizer == "suppression" and rel.corpus["d2"].text == "Nothing to hide here."


def test_label_masking_with_label_filter():
    rel = registry.create("sanitizer", "labels", labels=["person", "DATE"]).sanitize(annotated())
    doc = rel.corpus["d1"]
    assert doc.text == "Mr [PERSON] was born in Ankara on [DATE] and worked for Serco Limited."
    assert [doc.text[s.start:s.end] for s in doc.spans] == ["[PERSON]", "[DATE]"]
    assert [s.original for s in doc.spans] == ["Galip Yalman", "3 August 1961"]


def test_annotation_sanitizers_refuse_unannotated_corpus():
    corpus = Corpus([Document("d", "Galip lives in Ankara.")], name="plain")
    with pytest.raises(AnonauditError, match="no document has annotated spans"):
        registry.create("sanitizer", "suppression").sanitize(corpus)


@pytest.mark.slow  # loads the spaCy model
def test_spacy_ner_masks_entities_and_records_them():
    rel = registry.create("sanitizer", "spacy-ner").sanitize(annotated())
    doc = rel.corpus["d1"]
    assert "Galip Yalman" not in doc.text and "Ankara" not in doc.text
    assert "[PERSON]" in doc.text and "[GPE]" in doc.text
    for s in doc.spans:
        assert doc.text[s.start:s.end] == s.replacement == f"[{s.label}]"
        assert TEXT[s.orig_start:s.orig_end] == s.original


@pytest.mark.slow
def test_presidio_offline_records_replacements():
    pytest.importorskip("presidio_analyzer", reason="Presidio is optional: pip install 'anonaudit[presidio]' "
                                                    "(the test extra installs it)")
    rel = registry.create("sanitizer", "presidio").sanitize(annotated())
    doc = rel.corpus["d1"]
    assert "Galip Yalman" not in doc.text and "[PERSON]" in doc.text
    assert any(s.original == "Galip Yalman" for s in doc.spans)


def _one_signature(name: str) -> None:
    """Detector ``name`` returns one list of labelled spans per text, and its sanitizer masks exactly those."""
    texts = ["Maria Lopez moved from Oslo to Lima in 1999.", "", "nothing here"]
    found = registry.create("detector", name).detect(texts)
    assert len(found) == 3 and found[1] == []
    assert found[0] and all(s.label and s.replacement is None and 0 <= s.start < s.end <= len(texts[0])
                            for s in found[0])
    corpus = Corpus([Document(f"d{i}", t) for i, t in enumerate(texts)])
    rel = registry.create("sanitizer", name).sanitize(corpus)
    masked = {(s.orig_start, s.orig_end, s.label) for s in rel.corpus["d0"].spans}
    assert masked <= {(s.start, s.end, s.label) for s in found[0]}  # what it found, the outermost of overlaps
    assert all(any(a <= s.start and s.end <= b for a, b, _ in masked) for s in found[0])


def test_spacy_ner_is_a_detector_with_the_one_signature():
    _one_signature("spacy_ner")


@pytest.mark.slow
def test_presidio_is_a_detector_with_the_one_signature():
    pytest.importorskip("presidio_analyzer", reason="Presidio is optional: pip install 'anonaudit[presidio]' "
                                                    "(the test extra installs it)")
    _one_signature("presidio")


def test_presidio_missing_extra_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "presidio_analyzer", None)  # import now fails
    with pytest.raises(AnonauditError, match=r"pip install 'anonaudit\[presidio\]'"):
        registry.create("sanitizer", "presidio").sanitize(annotated())


def test_sanitize_cli(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(d.to_dict()) for d in annotated()) + "\n")
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(main, ["sanitize", "labels", "--input", str(src), "--out", str(out),
                                    "--param", "template=<{label}>"])
    assert res.exit_code == 0, res.output
    assert "sanitized 2 documents (3 spans replaced)" in res.output
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert docs[0]["text"].startswith("Mr <PERSON> was born in <LOC>")
    assert docs[0]["spans"][0]["original"] == "Galip Yalman"
    from audit.io.loaders import load_corpus

    assert load_corpus(out)["d1"].spans[0].original == "Galip Yalman"  # readable back, spans kept
    res = CliRunner().invoke(main, ["sanitize", "labels", "--input", str(src), "--out", str(out),
                                    "--param", "colour=red"])
    assert res.exit_code == 2 and "has no parameter(s) colour" in res.output
