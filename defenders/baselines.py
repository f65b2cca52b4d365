"""Baseline sanitizers: the bars every real sanitizer should clear.

* ``suppression`` — delete the annotated spans (gold PII annotations of the originals);
* ``labels`` — replace each annotated span with its label, e.g. ``[PERSON]``;
* ``spacy_ner`` — mask what spaCy's named-entity recogniser finds, with the entity label;
* ``presidio`` — Microsoft Presidio's analyzer and anonymizer, offline, with the same
  spaCy model (needs the ``presidio`` extra).

The last two mask what their detector (:mod:`defenders.detectors`) finds.

All of them go through :func:`audit.core.data.sanitize_corpus`, so every released
document records each replacement (its offsets in the sanitized text, the label and
the original it replaced), which the attacks and utility metrics read. Models come from
the run's :class:`~audit.models.resources.Resources` (``resources_of(self)``; a private
set when used alone, released by ``close()``), and the runner fills a sanitizer's ``seed``
and ``llm`` parameters from the audit spec when it takes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from audit.core.paramtypes import PositiveInt
from audit.core.data import Corpus, Release, Span, sanitize_corpus
from audit.core.errors import AnonauditError
from audit.core.interfaces import Detector, Sanitizer
from audit.models.nlp import DEFAULT_SPACY_MODEL
from audit.models.resources import resources_of
from audit.core.registry import register
from audit.core.templates import fill_template, template_fields
from defenders.detectors.labels import (SPACY_ENGLISH_LABELS, SPACY_PII_LABELS, check_labels,  # noqa: F401
                                        wanted)
from defenders.detectors.presidio import (PRESIDIO_GROUP, PresidioDetector, offline_spacy_engine,  # noqa: F401
                                          tldextract_offline)
from defenders.detectors.spacy_ner import SpacyDetector

def _label_text(template: str, label: str) -> str:
    return fill_template(template, {"label": (label or "REDACTED").upper()})


def check_template(template: str) -> str:
    """``template`` if it makes a replacement text from ``{label}`` (and nothing else), else a
    :class:`~audit.core.templates.TemplateError` (a ValueError) naming the field, when the
    sanitizer is made, not on the first document. Substituted, never evaluated
    (:mod:`audit.core.templates`): no attribute or index access, no format spec."""
    template_fields(template, ("label",), "template")
    return template


def _wanted(labels: Sequence[str] | None, label: str) -> bool:
    return wanted(labels, label)


class _AnnotationSanitizer(Sanitizer):
    """Common part of the two sanitizers that act on the originals' annotated spans."""

    labels: Sequence[str] | None

    def _replacement(self, span: Span) -> str:
        raise NotImplementedError

    def sanitize(self, corpus: Corpus, *, name: str | None = None) -> Release:
        if not any(doc.spans for doc in corpus):
            raise AnonauditError(
                f"{corpus.source or corpus.name}: no document has annotated spans, so {self.name!r} would "
                "release the originals unchanged; annotate the PII spans, or use a detector "
                "(spacy_ner, presidio)")
        try:
            check_labels(self.labels, {s.label for doc in corpus for s in doc.spans},
                         f"the annotations of {corpus.source or corpus.name}")
        except ValueError as exc:
            raise AnonauditError(f"{self.name}: {exc}") from None
        spans = {doc.id: [Span(s.start, s.end, s.label, s.entity_id, s.identifier_type,
                               replacement=self._replacement(s))
                          for s in doc.spans if _wanted(self.labels, s.label)]
                 for doc in corpus}
        return sanitize_corpus(corpus, spans, name=name or self.name, sanitizer=self.name, source=corpus.source)


@register("sanitizer")
class Suppression(_AnnotationSanitizer):
    """Delete every annotated span (optionally only those with the given labels)."""

    name = "suppression"
    description = ("Deletes every annotated personal detail from the text, leaving nothing in its place: "
                   "the simplest redaction a data owner can do with gold annotations.")

    def __init__(self, labels: Sequence[str] | None = None):
        """labels: only spans with these labels (default: every annotated span)."""
        self.labels = check_labels(labels, None, "")

    def _replacement(self, span: Span) -> str:
        return ""


@register("sanitizer")
class LabelMasking(_AnnotationSanitizer):
    """Replace every annotated span with its label (``[PERSON]``, ``[DATE]``, ...)."""

    name = "labels"
    description = ("Replaces every annotated personal detail with its category, such as [PERSON] or [DATE], "
                   "so a reader still sees that something was there and what kind it was.")

    def __init__(self, labels: Sequence[str] | None = None, template: str = "[{label}]"):
        """
        labels: only spans with these labels (default: every annotated span).
        template: the replacement, with {label} for the span's label.
        """
        self.labels = check_labels(labels, None, "")
        self.template = check_template(template)

    def _replacement(self, span: Span) -> str:
        return _label_text(self.template, span.label)


def _masked(detector: Detector, owner: Sanitizer, corpus: Corpus, template: str, name: str) -> Release:
    """``corpus`` with what ``detector`` finds (on ``owner``'s resources) replaced by ``template``."""
    found = detector.use(resources_of(owner)).detect([doc.text for doc in corpus])
    spans = {doc_id: [dataclasses.replace(s, replacement=_label_text(template, s.label)) for s in doc_spans]
             for doc_id, doc_spans in zip(corpus.ids, found)}
    return sanitize_corpus(corpus, spans, name=name, sanitizer=owner.name, source=corpus.source)


@register("sanitizer")
class SpacyNER(Sanitizer):
    """Mask the named entities spaCy finds with their label (no annotations needed): the
    ``spacy_ner`` detector's spans, masked."""

    name = "spacy_ner"
    description = ("Masks the named entities that an off-the-shelf spaCy model detects (people, places, "
                   "organisations, dates, numbers) with their category; a common, cheap de-identification.")

    def __init__(self, model: str = DEFAULT_SPACY_MODEL, labels: Sequence[str] | None = SPACY_PII_LABELS,
                 template: str = "[{label}]", batch_size: PositiveInt = 16):
        """
        model: the spaCy pipeline (an installed package name or a folder).
        labels: the entity labels masked.
        template: the replacement, with {label} for the entity label.
        batch_size: documents per spaCy batch.
        """
        self.model = model
        self.template = check_template(template)
        self.batch_size = batch_size
        self.detector_ = SpacyDetector(model=model, labels=labels, batch_size=batch_size)
        self.labels = self.detector_.labels

    def sanitize(self, corpus: Corpus, *, name: str | None = None) -> Release:
        return _masked(self.detector_, self, corpus, self.template, name or self.name)


@register("sanitizer")
class PresidioSanitizer(Sanitizer):
    """Microsoft Presidio (analyzer + anonymizer), offline with a local spaCy model: the
    ``presidio`` detector's spans, masked.

    Detected entities are replaced by ``template`` filled with Presidio's entity type
    (``[PERSON]``, ``[EMAIL_ADDRESS]``); overlapping detections keep the outermost.
    """

    name = "presidio"
    description = ("Masks what Microsoft Presidio's recognisers detect (names, places, dates, e-mail "
                   "addresses, phone and ID numbers) with the entity type.")

    def __init__(self, model: str = DEFAULT_SPACY_MODEL, entities: Sequence[str] | None = None,
                 score_threshold: float = 0.35, language: str = "en", template: str = "[{label}]"):
        """
        model: the spaCy pipeline Presidio's NLP engine uses.
        entities: the Presidio entity types masked (default: every type it knows).
        score_threshold: lowest recogniser score that counts as a detection.
        language: the documents' language.
        template: the replacement, with {label} for the entity type.
        """
        self.model = model
        self.score_threshold = score_threshold
        self.language = language
        self.template = check_template(template)
        self.detector_ = PresidioDetector(model=model, entities=entities, score_threshold=score_threshold,
                                          language=language)
        self.entities = self.detector_.entities

    @property
    def analyzer(self):
        """Presidio's analyzer, loaded on first use."""
        return self.detector_.analyzer

    def sanitize(self, corpus: Corpus, *, name: str | None = None) -> Release:
        return _masked(self.detector_, self, corpus, self.template, name or self.name)
