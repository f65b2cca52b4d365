"""anonaudit: adversarial audits of sanitized text releases.

The ``audit`` package is the engine: the data model, file formats, the model and LLM layers,
statistics, results, the registry, the runner and the pipeline. It imports nothing above it:
the Python API, the command line (:mod:`anonaudit.cli`) and the demo (:mod:`anonaudit.demo`)
live in ``anonaudit``. Attacks live in ``attackers``, sanitizers in ``defenders``, rendering in
``reports``.
"""

__version__ = "0.1.0"
