"""The base of the utility metrics (:class:`UtilityMetric`: the shared context and its
settings) and the helpers every metric uses to build its result."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np

from audit.core.paramtypes import PositiveInt
from audit.core.data import Release, Scenario
from audit.core.errors import AnonauditError
from audit.core.interfaces import Metric
from audit.core.results import Finding, Result
from audit.core.stats import mean_interval
from audit.metrics.ic import CONTEXT_TOKENS
from audit.metrics.utility_context import UtilityContext
from audit.models.resources import resources_of


def bootstrap_ratio(num: Sequence[float], den: Sequence[float], *, seed: int = 0, reps: int = 1000,
                    confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval (over documents) of sum(num) / sum(den)."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    n = len(num)
    if n == 0:
        return (0.0, 1.0)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(reps, n))
    d = den[idx].sum(axis=1)
    r = np.where(d > 0, num[idx].sum(axis=1) / np.where(d > 0, d, 1.0), np.nan)
    r = r[~np.isnan(r)]
    if not len(r):
        return (0.0, 1.0)
    a = (1 - confidence) / 2
    return (float(np.quantile(r, a)), float(np.quantile(r, 1 - a)))


def findings_of(rows: Sequence[Mapping[str, Any]], summary: Callable[[Mapping[str, Any]], str]) -> list[Finding]:
    """Per-document rows as findings. A utility is not an attack, so ``success`` is None; every
    key but ``id`` is a fact (counts, scores, cluster numbers: nothing private)."""
    return [Finding(id=r["id"], summary=summary(r), facts={k: v for k, v in r.items() if k != "id"}) for r in rows]


def share_text(value: Any, what: str) -> str:
    return f"{what}: {value:.2f}" if isinstance(value, (int, float)) else f"{what}: not measurable here"


def mean_result(name: str, release: str, values: list[float], documents: list[Finding], details: dict) -> Result:
    mean, ci = mean_interval(values)
    # every reader recomputes the mean from the findings' "value" (audit.core.consistency)
    return Result(kind="utility", name=name, release=release, value=mean, ci=ci, n=len(values),
                  details={"value_from": "mean:value", **details}, documents=documents)


class UtilityMetric(Metric):
    """Base of the utility metrics: the shared context and its settings.

    ``context``: a :class:`UtilityContext` shared with other metrics (wins over the
    settings below). ``ic``: the information-content estimator, a causal LLM's
    log-probabilities ("causal") or a masked LM ("masked"); ``ic_model``: the masked-LM folder
    (or a causal model spec overriding ``llm``); ``llm``: the LLM spec for causal IC;
    ``embedder``: the sentence embedder spec (MiniLM by default); ``cache``: keep IC and
    embeddings on disk; ``seed``: for bootstrap intervals and clustering; ``progress``: show
    model loads and information-content scoring as they happen; ``context_tokens``: causal IC,
    most tokens of left context a term sees; ``mask_every``: masked IC, mask one term in every N;
    ``ic_precision``: causal IC through an in-process model, its arithmetic; auto is bfloat16
    where the CPU or GPU computes it natively, else float32.
    """

    requires: ClassVar[frozenset[str]] = frozenset({"originals"})

    def __init__(self, context: UtilityContext | None = None, ic: Literal["causal", "masked"] = "causal",
                 ic_model: str | None = None, llm: str | None = None, embedder: str | None = None,
                 cache: bool = True, seed: int = 0, progress: bool = False,
                 context_tokens: PositiveInt = CONTEXT_TOKENS, mask_every: PositiveInt = 6,
                 ic_precision: Literal["auto", "fp32", "bf16"] = "auto"):
        self.context = context
        self._given_context = context
        self.progress = progress
        self.ic = ic
        self.ic_model = ic_model
        self.llm = llm
        self.embedder = embedder
        self.cache = cache
        self.seed = seed
        self.context_tokens = context_tokens
        self.mask_every = mask_every
        self.ic_precision = ic_precision

    def provenance(self) -> dict[str, Any]:
        """The information-content estimator, once the shared context has made one (for the
        run's provenance)."""
        estimator = getattr(self.context, "_estimator", None)
        return {"ic_estimator": estimator.identity} if estimator is not None else {}

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        params.pop("context", None)  # not JSON; its settings are logged by the CLI
        return params

    def stats(self) -> dict[str, Any]:
        """Cache use of the shared context so far, for the run's provenance (never the results)."""
        out = super().stats()
        if self.context is not None:
            out["caches"] = self.context.cache_stats()
        return out

    def fit(self, scenario: Scenario) -> UtilityMetric:
        self._context(scenario)
        return self

    def _context(self, scenario: Scenario) -> UtilityContext:
        if scenario.originals is None:
            raise AnonauditError(f"utility metric {self.name!r} needs the originals")
        ctx = self.context
        if ctx is None or ctx.originals is not scenario.originals:
            # The metrics of a run share one context (the scorer model is loaded and the originals
            # are scored and embedded once): it lives in the run's resources, keyed by the
            # originals' content and the settings.
            res = resources_of(self)
            settings = dict(ic=self.ic, ic_model=self.ic_model, llm=self.llm, embedder=self.embedder,
                            cache=self.cache, progress=self.progress, context_tokens=self.context_tokens,
                            mask_every=self.mask_every, ic_precision=self.ic_precision)
            originals = scenario.originals
            if all(v is None or isinstance(v, (str, bool, int, float)) for v in settings.values()):
                key = ("utility-context", originals.fingerprint(), tuple(sorted(settings.items())))
                ctx = res.shared(key, lambda: UtilityContext(originals, **settings, resources=res))
            else:  # model objects given: not shareable by value
                ctx = UtilityContext(originals, **settings, resources=res)
            self.context = ctx
        return ctx

    def close(self) -> None:
        if self.context is not self._given_context:
            self.context = None  # made here: the run's resources (or our private ones) own it
        super().close()

    @staticmethod
    def _aligned_ids(ctx: UtilityContext, release: Release) -> list[str]:
        if not release.aligned:
            raise AnonauditError(f"release {release.name!r} is not aligned to the originals by id: "
                                 "this metric compares each document with its original")
        return [d.id for d in release.corpus if d.id in ctx.originals]
