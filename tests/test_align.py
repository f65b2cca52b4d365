"""Alignment of sanitized texts with their originals (audit.core.align)."""

from __future__ import annotations

import pytest

from audit.core.align import UNKNOWN, align, replaced_spans
from audit.core.data import Document, Span, apply_spans


def _pairs(original: str, sanitized: str) -> list[tuple[str, str]]:
    spans = align(original, sanitized)
    for s in spans:  # offsets always point at the texts they claim
        assert sanitized[s.start:s.end] == s.replacement
        assert original[s.orig_start:s.orig_end] == s.original
    return [(s.original, s.replacement) for s in spans]


@pytest.mark.parametrize(
    ("original", "sanitized", "expected"),
    [
        # entity-label masks, several per document
        ("The case against the Republic of Turkey was lodged by Mr Galip Yalman on 3 August 2003.",
         "The case against [ORG] was lodged by [PERSON] on [DATETIME].",
         [("the Republic of Turkey", "[ORG]"), ("Mr Galip Yalman", "[PERSON]"), ("3 August 2003", "[DATETIME]")]),
        # suppression: empty replacement, placed where the words were
        ("Mr Galip Yalman lodged it.", "Mr  lodged it.", [("Galip Yalman", "")]),
        # free-text generalisations, two separate regions around an unchanged "on"
        ("He lived in Warsaw on 3 May 2003.", "He lived in a European capital on a date in May 2003.",
         [("Warsaw", "a European capital"), ("3", "a date in")]),
        # a generalisation sharing words with the original is one region, not three
        ("the European Commission of Human Rights decided", "a European human rights body decided",
         [("the European Commission of Human Rights", "a European human rights body")]),
        # comma-separated entities stay separate
        ("in Warsaw, Poland, and", "in a city, a country, and", [("Warsaw", "a city"), ("Poland", "a country")]),
        # insertion: empty original
        ("He was born.", "He was born in a city.", [("", "in a city")]),
        # case-only changes are not replacements
        ("The Court", "the court", []),
        ("identical text", "identical text", []),
    ],
)
def test_align_recovers_replaced_regions(original, sanitized, expected):
    assert _pairs(original, sanitized) == expected


def test_suppression_offset_sits_between_remaining_words():
    (span,) = align("Mr Galip Yalman lodged it.", "Mr  lodged it.")
    assert (span.start, span.end) == (2, 2)
    assert (span.orig_start, span.orig_end) == (3, 15)


def test_align_matches_recorded_spans_of_apply_spans():
    text = "On 3 May 2001 the applicant, Ms Anna Kowalska, moved from Gdansk to Warsaw."
    doc = Document("d1", text)
    marks = [("3 May 2001", "a date"), ("Anna Kowalska", "PERSON_1"), ("Gdansk", "a city"), ("Warsaw", "a capital")]
    spans = [Span(text.index(o), text.index(o) + len(o), label="X", replacement=r) for o, r in marks]
    released = apply_spans(doc, spans)
    aligned = align(text, released.text)
    assert [(s.original, s.replacement) for s in aligned] == marks
    assert [(s.start, s.end, s.orig_start, s.orig_end) for s in aligned] == [
        (s.start, s.end, s.orig_start, s.orig_end) for s in released.spans]


def test_replaced_spans_prefers_recorded_spans_and_their_labels():
    text = "Mr Galip Yalman lives in Ankara."
    doc = Document("d", text, spans=(Span(3, 15, label="PERSON"),))
    released = apply_spans(doc, [Span(3, 15, label="PERSON", replacement="someone"),
                                 Span(25, 31, replacement="a city")])
    spans = replaced_spans(doc, released)
    assert [(s.original, s.replacement, s.label) for s in spans] == [
        ("Galip Yalman", "someone", "PERSON"), ("Ankara", "a city", UNKNOWN)]


def test_replaced_spans_without_records_aligns_and_labels_unknown():
    original = Document("d", "She moved to Warsaw in 2001.")
    released = Document("d", "She moved to a European capital in 2001.")
    (span,) = replaced_spans(original, released)
    assert (span.original, span.replacement, span.label) == ("Warsaw", "a European capital", UNKNOWN)


class _FakeEnt:
    def __init__(self, start, end, label):
        self.start_char, self.end_char, self.label_ = start, end, label


class _FakeNlp:
    """Stands in for audit.models.nlp.Spacy: records calls, returns fixed entities."""

    def __init__(self, ents):
        self.ents, self.calls = ents, 0

    def __call__(self, text):
        self.calls += 1
        return type("Doc", (), {"ents": self.ents})()


def test_replaced_spans_labels_from_ner_only_when_needed():
    original = Document("d", "She moved to Warsaw in 2001.")
    released = Document("d", "She moved to a European capital in 2001.")
    nlp = _FakeNlp([_FakeEnt(13, 19, "GPE"), _FakeEnt(23, 27, "DATE")])
    (span,) = replaced_spans(original, released, nlp=nlp)
    assert span.label == "GPE"
    # identical texts: no span, so spaCy never runs
    assert replaced_spans(original, original, nlp=nlp) == []
    assert nlp.calls == 1


@pytest.mark.slow
def test_replaced_spans_with_real_spacy():
    from audit.models.nlp import Spacy

    original = Document("d", "Mr John Smith was arrested in London on 3 May 2001.")
    released = Document("d", "Mr PERSON was arrested in a city on a day.")
    spans = replaced_spans(original, released, nlp=Spacy())
    assert [s.original for s in spans] == ["John Smith", "London", "3 May 2001"]
    assert [s.label for s in spans] == ["PERSON", "GPE", "DATE"]


def test_align_finds_every_replacement_in_a_long_document():
    # (no wall-time bound here: speed belongs in benchmarks, and a timed test fails on a busy machine)
    words = [f"w{i % 300}" for i in range(6000)]
    original = " ".join(words)
    sanitized = " ".join("X" if i % 50 == 0 else w for i, w in enumerate(words))
    spans = align(original, sanitized)
    assert len(spans) == 120
    assert all(s.replacement == "X" and s.original == f"w{(50 * k) % 300}" for k, s in enumerate(spans))
