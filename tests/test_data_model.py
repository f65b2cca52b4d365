import pytest

from audit.core.data import Corpus, Document, Release, Span, apply_spans, outermost, sanitize_corpus
from audit.core.errors import DataError

TEXT = 'Serco Limited ("Serco") hired Mr Galip Yalman in Ankara on 3 August 2003.'


def spans_of(*triples):
    return [Span(s, e, replacement=r) for s, e, r in triples]


def test_nested_spans_keep_outermost_in_any_order():
    outer = Span(0, 23, "ORG", replacement="[ORG]")
    inner = Span(16, 21, "ORG", replacement="[ORG]")
    kept, dropped = outermost([inner, outer])
    assert kept == [outer] and dropped == [inner]


def test_apply_spans_unordered_with_suppression_and_records():
    doc = Document("d1", TEXT, subject="p1")
    i_name = TEXT.index("Galip Yalman")
    i_city = TEXT.index("Ankara")
    spans = [
        Span(i_city, i_city + 6, "LOC", replacement="a city"),
        Span(i_name, i_name + len("Galip Yalman"), "PERSON"),  # no replacement: suppressed
        Span(0, 23, "ORG", replacement="[ORG]"),
        Span(16, 21, "ORG", replacement="X"),  # nested, dropped
    ]
    out = apply_spans(doc, spans)
    assert out.text == "[ORG] hired Mr  in a city on 3 August 2003."
    assert out.subject == "p1"
    assert [s.original for s in out.spans] == ['Serco Limited ("Serco")', "Galip Yalman", "Ankara"]
    for s in out.spans:
        assert out.text[s.start:s.end] == s.replacement
        assert TEXT[s.orig_start:s.orig_end] == s.original
    assert out.spans[1].length == 0


def test_apply_spans_default_and_bounds():
    doc = Document("d", "abc def")
    assert apply_spans(doc, [Span(4, 7)], default="***").text == "abc ***"
    with pytest.raises(ValueError, match="past the text"):
        apply_spans(doc, [Span(4, 9)])


def test_corpus_rejects_duplicate_ids_and_looks_up():
    with pytest.raises(DataError, match="duplicate document id"):
        Corpus([Document("a", "x"), Document("a", "y")], source="f.jsonl")
    c = Corpus([Document("a", "x"), Document("b", "y")])
    assert c["b"].text == "y" and c[0].id == "a" and "a" in c and len(c[1:]) == 1
    assert c.fingerprint() != Corpus([Document("a", "x"), Document("b", "z")]).fingerprint()


def test_release_check_against_originals():
    originals = Corpus([Document("a", "x")])
    release = sanitize_corpus(originals, {"a": [Span(0, 1, replacement="Y")]}, name="r")
    release.check_against(originals)
    stray = Release("r", Corpus([Document("zz", "q")]), source="r.jsonl")
    with pytest.raises(DataError, match="zz"):
        stray.check_against(originals)
    assert Release("s", Corpus([Document("zz", "q")]), aligned=False).check_against(originals) is None


def test_span_from_dict_validation():
    assert Span.from_dict({"start": 1, "end": 3, "label": "X"}) == Span(1, 3, "X")
    with pytest.raises(ValueError, match="unknown span field"):
        Span.from_dict({"start": 1, "end": 2, "colour": "red"})
    with pytest.raises(ValueError, match="integer"):
        Span.from_dict({"start": "1", "end": 2})
    with pytest.raises(ValueError):
        Span(5, 2)


def test_spans_sort_without_comparing_optional_fields():
    # Two adjacent suppressions collapse onto the same offsets in the sanitized text.
    a = Span(3, 3, "PERSON", entity_id=None, orig_start=3, orig_end=8)
    b = Span(3, 3, "PERSON", entity_id="e1", orig_start=9, orig_end=12)
    doc = Document("d", "abc def").with_spans([b, a])
    assert doc.spans == (a, b)
