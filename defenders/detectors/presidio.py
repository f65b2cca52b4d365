"""The ``presidio`` detector: what Microsoft Presidio's recognisers find, offline, with a local
spaCy model (needs the ``presidio`` extra)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from audit.core.data import Span
from audit.core.errors import AnonauditError
from audit.core.interfaces import Detector
from audit.core.registry import register
from audit.models.nlp import DEFAULT_SPACY_MODEL
from audit.models.resources import resources_of
from audit.runtime.progress import bar as progress_bar
from defenders.detectors.labels import check_labels

#: Documents a Presidio worker takes at once on a cluster (each is analysed on its own).
PRESIDIO_GROUP = 16


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


@register("detector")
class PresidioDetector(Detector):
    """Microsoft Presidio's analyzer, offline with a local spaCy model; overlapping detections are
    all returned (highest score first among those starting at one place)."""

    name = "presidio"
    description = ("What Microsoft Presidio's recognisers find (names, places, dates, e-mail addresses, phone "
                   "and ID numbers), labelled with the entity type.")

    def __init__(self, model: str = DEFAULT_SPACY_MODEL, entities: Sequence[str] | None = None,
                 score_threshold: float = 0.35, language: str = "en"):
        """
        model: the spaCy pipeline Presidio's NLP engine uses.
        entities: the Presidio entity types found (default: every type it knows).
        score_threshold: lowest recogniser score that counts as a detection.
        language: the documents' language.
        """
        self.model = model
        self.entities = check_labels(entities, None, "")
        self.score_threshold = score_threshold
        self.language = language
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

    def detect_one(self, text: str) -> list[Span]:
        """The spans of one text."""
        found = self.analyzer.analyze(text=text, language=self.language,
                                      entities=list(self.entities) if self.entities else None,
                                      score_threshold=self.score_threshold)
        # Highest score first among detections starting at the same place; outermost kept by apply_spans.
        found = sorted(found, key=lambda r: (r.start, -(r.end - r.start), -r.score))
        return [Span(r.start, r.end, r.entity_type) for r in found]

    def detect(self, texts: Sequence[str]) -> list[list[Span]]:
        """The spans of each text; on a distributed executor each worker loads the analyzer once."""
        texts = list(texts)
        executor = resources_of(self).executor
        if executor.distributed:
            return executor.map(PresidioWorker(self.get_params()), texts, group=PRESIDIO_GROUP, label="Presidio")
        return [self.detect_one(t) for t in progress_bar(texts, total=len(texts), desc="Presidio", unit="doc")]


class PresidioWorker:
    """:meth:`PresidioDetector.detect` for a group of texts, as an executor's worker: a detector
    made from the run's one's parameters, its analyzer loaded once per worker."""

    def __init__(self, params: dict[str, Any]):
        self.params = dict(params)
        self._detector: PresidioDetector | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_detector": None}

    def setup(self) -> None:
        if self._detector is None:
            self._detector = PresidioDetector(**self.params)
            self._detector.analyzer  # noqa: B018 - loaded here, once per worker

    def __call__(self, texts: list[str]) -> list[list[Span]]:
        self.setup()
        assert self._detector is not None
        return [self._detector.detect_one(t) for t in texts]
