"""Utility metrics: how much of the originals a sanitized release keeps.

:mod:`~audit.utility.terms` (what a term is), :mod:`~audit.utility.ic` (information
content estimators and their disk cache), :mod:`~audit.utility.context` (state shared
by the metrics of one scenario) and :mod:`~audit.utility.metrics` (TPI, TPS, NMI,
precision/recall, similarity, ROUGE-L as :class:`~audit.interfaces.Metric` classes).
"""

from audit.utility.context import TermFate, UtilityContext, term_fates
from audit.utility.ic import CausalIC, ICCache, ICEstimator, MaskedIC, corpus_ic
from audit.utility.metrics import (
    ALL_METRICS,
    METRIC_CLASSES,
    NMIMetric,
    PrecisionMetric,
    RecallMetric,
    RougeMetric,
    SimilarityMetric,
    TPIMetric,
    TPSMetric,
    UtilityMetric,
)
from audit.utility.terms import Term, TermExtractor, terms_of_doc

__all__ = [
    "ALL_METRICS", "METRIC_CLASSES", "CausalIC", "ICCache", "ICEstimator", "MaskedIC", "NMIMetric",
    "PrecisionMetric", "RecallMetric", "RougeMetric", "SimilarityMetric", "TPIMetric", "TPSMetric", "Term",
    "TermExtractor", "TermFate", "UtilityContext", "UtilityMetric", "corpus_ic", "term_fates",
    "terms_of_doc",
]
