"""anonaudit: adversarial audits of sanitized text releases.

The ``audit`` package is the core: data model and loaders, model and LLM layers,
statistics, results, the registry, the runner and the CLI. Attacks live in
``attackers``, sanitizers in ``defenders``, rendering in ``reports``.
"""

__version__ = "0.1.0"
