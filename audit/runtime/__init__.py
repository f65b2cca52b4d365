"""How a run runs, as opposed to what it is about (the data model, :mod:`audit.core`): where
per-document work goes (:mod:`~audit.runtime.executor`), progress for long work
(:mod:`~audit.runtime.progress`), numpy's CPU dispatch chosen before numpy loads
(:mod:`~audit.runtime.cpu`), the sealing of folders saved for reuse
(:mod:`~audit.runtime.integrity`) and what the caches hold (:mod:`~audit.runtime.caches`).

It imports only :mod:`audit.core`; the models, file formats, plugins and pipeline above it use it.
"""
