"""Utility metrics: how much of the originals a sanitized release keeps.

:mod:`~audit.metrics.terms` (what a term is), :mod:`~audit.metrics.ic` (information
content estimators and their disk cache), :mod:`~audit.metrics.utility_context` (state shared
by the metrics of one scenario) and :mod:`~audit.metrics.utility` (TPI, TPS, NMI,
precision/recall, similarity, ROUGE-L as :class:`~audit.core.interfaces.Metric` classes, each
family in its own module: ``base``, ``preserved``, ``clustering``, ``gold``, ``overlap``).
"""

from audit.metrics.utility_context import TermFate, UtilityContext, term_fates
from audit.metrics.ic import CausalIC, ICCache, ICEstimator, MaskedIC, corpus_ic
from audit.metrics.utility import (
    NMIMetric,
    PrecisionMetric,
    RecallMetric,
    RougeMetric,
    SimilarityMetric,
    TPIMetric,
    TPSMetric,
    UtilityMetric,
)
from audit.metrics.terms import Term, TermExtractor, terms_of_doc

__all__ = [
    "CausalIC", "ICCache", "ICEstimator", "MaskedIC", "NMIMetric",
    "PrecisionMetric", "RecallMetric", "RougeMetric", "SimilarityMetric", "TPIMetric", "TPSMetric", "Term",
    "TermExtractor", "TermFate", "UtilityContext", "UtilityMetric", "corpus_ic", "term_fates",
    "terms_of_doc",
]
