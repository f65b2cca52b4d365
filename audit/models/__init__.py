"""Models and the shared resources built from them: model specs and the catalogue of named
models (:mod:`~audit.models.specs`), embedded model files and checksums
(:mod:`~audit.models.embedded`), the LLM interface, backends and answer cache, sentence
embeddings, spaCy, and the :class:`~audit.models.resources.Resources` a run shares between
components."""
