"""The utility metrics: TPI, TPS, NMI, precision/recall, similarity, ROUGE-L.

Each is a :class:`~audit.core.interfaces.Metric` returning ``Result(kind="utility")``
with per-document values in ``documents`` (higher = more utility). They share one
:class:`~audit.metrics.utility_context.UtilityContext` per set of originals: pass the same
``context`` to several metrics, or give them the same
:class:`~audit.models.resources.Resources` with ``use()`` (the runner does), which keeps one
context per originals and settings; a metric used alone builds its own (IC and embeddings are
then shared through the disk caches). The registry is the one list of metrics.

* ``tpi`` — text preserved information: sum IC(kept terms) / sum IC(all terms).
* ``tps`` — text preserved similarity: sum IC(t) * SIM(t, replacement) / sum IC(t);
  kept terms count 1, deleted terms 0.
* ``nmi`` — agreement of the k-means clustering of released documents with the
  clustering of the originals (normalised mutual information, averaged over seeds).
* ``precision`` / ``recall`` — replaced regions against the originals' gold spans
  (TAB's definitions): token-level precision; entity-level recall (headline) and
  token-level recall; each uniform and IC-weighted.
* ``similarity`` — cosine of the document embeddings of each original and its release.
* ``rouge`` — ROUGE-L F1 between each original and its release.

This module gathers them; each family lives in its own module: :mod:`~audit.metrics.base`
(:class:`UtilityMetric`, shared helpers), :mod:`~audit.metrics.preserved` (TPI, TPS),
:mod:`~audit.metrics.clustering` (NMI), :mod:`~audit.metrics.gold` (precision, recall) and
:mod:`~audit.metrics.overlap` (similarity, ROUGE-L).
"""

from __future__ import annotations

from audit.metrics.base import UtilityMetric, bootstrap_ratio
from audit.metrics.clustering import NMI_STABLE_MIN, NMIMetric
from audit.metrics.gold import PrecisionMetric, RecallMetric
from audit.metrics.overlap import RougeMetric, SimilarityMetric
from audit.metrics.preserved import TPIMetric, TPSMetric

__all__ = ["NMI_STABLE_MIN", "NMIMetric", "PrecisionMetric", "RecallMetric", "RougeMetric", "SimilarityMetric",
           "TPIMetric", "TPSMetric", "UtilityMetric", "bootstrap_ratio"]
