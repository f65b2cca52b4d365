"""Models and the shared resources built from them: model specs and embedded models
(:mod:`~audit.models.specs`), the LLM interface, backends and answer cache, sentence embeddings,
spaCy, and the :class:`~audit.models.resources.Resources` a run shares between components."""
