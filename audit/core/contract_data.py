"""The small synthetic population :func:`audit.core.contract.check_component` runs a component
on when it is given no scenario of its own: six invented people, one document each with its
identifiers annotated, two public background documents per person, and a release that masks
every annotated span with its label (``[PERSON]``), recording the original it replaced."""

from __future__ import annotations

import re

from audit.core.data import Corpus, Document, Scenario, Span, sanitize_corpus

#: (subject, town, employer, year, a rare hobby): every name is invented.
PEOPLE = (
    ("Zorbulon Quettle", "Marrowby", "Fenwick Glassworks", "1987", "restores brass barometers"),
    ("Ysolde Prandtwick", "Ossingford", "Harlan Ferry Company", "1992", "breeds lavender snails"),
    ("Caspian Oduya-Brell", "Tollmere", "Vantreck Mills", "1979", "carves cedar chess sets"),
    ("Philippa Knausgard", "Wexleigh", "Corrow Bakery", "2001", "maps abandoned lighthouses"),
    ("Teodric Lamberne", "Quillhaven", "Ostrander Printers", "1968", "collects railway tickets"),
    ("Marisol Ehrentraut", "Braxton Vale", "Nettlefold Dairy", "1995", "sails a wooden dinghy"),
)

_ORIGINAL = ("{name} was born in {year} in {town}. After school {first} joined {employer}, where "
             "{first} still works. In the evenings {first} {hobby}, and neighbours in {town} know "
             "{first} for it. The complaint lodged by {name} concerned a delayed permit.")
_BACKGROUND = ("{first} from {town} {hobby}; a local paper wrote about it in {year}.",
               "A colleague at {employer} said {name} is the most patient person there.")
_LABELS = {"name": "PERSON", "first": "PERSON", "town": "LOC", "employer": "ORG", "year": "DATE"}


def _document(doc_id: str, template: str, fields: dict[str, str], subject: str) -> Document:
    """A document from ``template`` with a span (label, entity id) on every identifier it names."""
    pieces, spans, pos = [], [], 0
    for part in re.split(r"(\{\w+\})", template):
        key = part[1:-1] if part.startswith("{") else None
        value = fields[key] if key else part
        if key in _LABELS:
            spans.append(Span(pos, pos + len(value), _LABELS[key], entity_id=f"{subject}:{key}",
                              identifier_type="direct" if key in ("name", "first") else "quasi"))
        pieces.append(value)
        pos += len(value)
    return Document(doc_id, "".join(pieces), subject=subject, spans=tuple(spans))


def scenario() -> Scenario:
    """Originals, background and one release (``masked``: every span replaced by its label)."""
    originals, background = [], []
    for i, (name, town, employer, year, hobby) in enumerate(PEOPLE, 1):
        fields = {"name": name, "first": name.split()[0], "town": town, "employer": employer, "year": year,
                  "hobby": hobby}
        originals.append(_document(f"doc{i}", _ORIGINAL, fields, name))
        background += [_document(f"bg{i}.{j}", t, fields, name) for j, t in enumerate(_BACKGROUND, 1)]
    corpus = Corpus(originals, name="originals")
    masked = sanitize_corpus(corpus, {d.id: [Span(s.start, s.end, s.label, replacement=f"[{s.label}]")
                                             for s in d.spans] for d in corpus}, name="masked", sanitizer="labels")
    return Scenario(originals=corpus, background=Corpus(background, name="background"), releases=(masked,))


def secrets(scn: Scenario) -> set[str]:
    """The original text of every identifier a release of ``scn`` replaced (at least 4
    characters): what a finding may only show as a private fact."""
    return {s.original for rel in scn.releases for d in rel for s in d.spans
            if s.original and len(s.original) >= 4}
