"""The ``spacy_ner`` detector: the named entities an off-the-shelf spaCy model finds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from audit.core.data import Span
from audit.core.errors import AnonauditError
from audit.core.interfaces import Detector
from audit.core.paramtypes import PositiveInt
from audit.core.registry import register
from audit.models.nlp import DEFAULT_SPACY_MODEL
from audit.models.resources import resources_of
from audit.runtime.progress import bar as progress_bar
from defenders.detectors.labels import SPACY_ENGLISH_LABELS, SPACY_PII_LABELS, check_labels, wanted


@register("detector")
class SpacyDetector(Detector):
    """The named entities spaCy's recogniser finds, with their entity label."""

    name = "spacy_ner"
    description = ("The named entities an off-the-shelf spaCy model finds (people, places, organisations, "
                   "dates, numbers), labelled with their category.")

    def __init__(self, model: str = DEFAULT_SPACY_MODEL, labels: Sequence[str] | None = SPACY_PII_LABELS,
                 batch_size: PositiveInt = 16):
        """
        model: the spaCy pipeline (an installed package name or a folder).
        labels: the entity labels found (None: every label of the model).
        batch_size: documents per spaCy batch.
        """
        self.model = model
        # The default pipeline's labels are known without loading it; another model's are checked
        # when it is loaded (detect).
        self.labels = check_labels(labels, SPACY_ENGLISH_LABELS if model == DEFAULT_SPACY_MODEL else None,
                                   f"spaCy model {model}")
        self.batch_size = batch_size

    def detect(self, texts: Sequence[str]) -> list[list[Span]]:
        """Entity spans of each text. On a distributed executor the texts go to its workers in the
        same batches, each worker loading the pipeline once."""
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
        return [[Span(e.start_char, e.end_char, e.label_) for e in parsed.ents if wanted(self.labels, e.label_)]
                for parsed in parsed_all]


class NERWorker:
    """:meth:`SpacyDetector.detect` for one batch of texts, as an executor's worker: a detector made
    from the run's one's parameters (on the worker it runs locally), its pipeline loaded once per
    worker."""

    def __init__(self, params: dict[str, Any]):
        self.params = dict(params)
        self._detector: SpacyDetector | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_detector": None}

    def setup(self) -> None:
        if self._detector is None:
            self._detector = SpacyDetector(**self.params)
            self._detector.detect([])  # loads the pipeline here, once per worker

    def __call__(self, texts: list[str]) -> list[list[Span]]:
        self.setup()
        assert self._detector is not None
        return self._detector.detect(texts)
