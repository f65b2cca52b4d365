"""The small interfaces every attack, sanitizer, utility metric and detector implements.

Parameters are explicit keyword arguments of ``__init__``, stored under the same
names (as in scikit-learn), so an object can be logged, compared and rebuilt from
a config file: :meth:`Component.get_params` returns them.

Life of an attack (as in anonymeter): construct with parameters, :meth:`Attack.fit`
once per scenario (train a classifier, build an index), then :meth:`Attack.evaluate`
for each release. Everything an attack finds goes into :class:`~audit.core.results.Result`
objects, so the runner and the report need to know nothing about it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from audit.core.data import Corpus, Release, Scenario, Span
    from audit.core.evidence import RepairTarget
    from audit.core.results import Result


@runtime_checkable
class Closeable(Protocol):
    """What a component may own and must release: anything with ``close()`` (a set of
    :class:`audit.models.resources.Resources`). Closing twice must be harmless."""

    def close(self) -> None: ...


class Component(ABC):
    """Common base: a registry name, a one-paragraph description, and its parameters."""

    name: ClassVar[str] = ""
    #: What the component does, in plain words (shown in the report and the command's help).
    description: ClassVar[str] = ""
    #: Extra command-line spellings of parameters, for the generic driver (``anonaudit.cli``), which
    #: makes an option of each parameter from its type hint, default and docstring line
    #: ``name: help``: ``{"threads": "num_threads"}`` adds ``--threads`` for ``--num-threads``,
    #: ``{"no_scoring": "no_score"}`` adds ``--no-scoring`` for the off side of ``--score``.
    cli_aliases: ClassVar[dict[str, str]] = {}

    @classmethod
    def param_names(cls) -> list[str]:
        """The names of the constructor's parameters (the parameter model,
        :func:`audit.core.params.parameters`, reads them)."""
        from audit.core.params import parameters

        return [p.name for p in parameters(cls)]

    def get_params(self) -> dict[str, Any]:
        """Constructor parameters as given, JSON-friendly: a model object (anything with an
        ``identity``, e.g. an LLM or an embedder) becomes its identity, a tuple or set a list.
        Corpora and releases stay objects: the provenance records them by content fingerprint
        (``audit.pipeline.provenance.canonical``)."""
        return {k: _plain(getattr(self, k)) for k in self.param_names() if hasattr(self, k)}

    #: The run's shared models (an :class:`audit.models.resources.Resources`, typed loosely so
    #: the core does not depend on the models layer), given with :meth:`use`; ``None`` until a
    #: component used on its own is handed a private set with :meth:`own`
    #: (``audit.models.resources.resources_of``).
    resources: Any = None

    def use(self, resources: Any) -> Self:
        """Share ``resources`` (the run's LLMs, embedders, spaCy pipelines, seed) instead of
        loading models of its own. The runner calls it right after construction; the caller
        keeps ownership: the component never closes what it was given."""
        self.resources = resources
        return self

    def own(self, resources: Closeable) -> Self:
        """Use ``resources`` that were made for this component alone (it was not given a set with
        :meth:`use`): unlike a shared set, :meth:`close` releases them. How a set of resources and
        a component meet over lifetime: ``use`` lends, ``own`` hands over."""
        self.resources = resources
        self._private_resources = resources
        return self

    def record_timing(self, release: str, seconds: Mapping[str, float]) -> None:
        """Keep how long the parts of the work on ``release`` took. They reach the run's
        provenance through :meth:`stats`, never a result: results must be the same on any
        machine, cold or warm, so two runs with one seed can be compared byte for byte."""
        timings = self.__dict__.setdefault("timings_by_release_", {})
        timings.setdefault(release, {}).update({k: round(float(v), 3) for k, v in seconds.items()})

    def stats(self) -> dict[str, Any]:
        """What this run of the component did that is not a finding (timings, cache hits, how a
        model was obtained): the runner records it in the provenance after every release."""
        timings = self.__dict__.get("timings_by_release_")
        return {"timings": {k: dict(v) for k, v in timings.items()}} if timings else {}

    def close(self) -> None:
        """Release what the component loaded itself (a private set of resources, an index),
        never what it was given. The runner calls it once the component has evaluated every
        release; a closed component loads its resources again if it is used after all.
        Subclasses that hold more call ``super().close()``. What it releases it was handed with
        :meth:`own`."""
        private = self.__dict__.pop("_private_resources", None)
        if private is not None:
            if self.__dict__.get("resources") is private:
                del self.__dict__["resources"]
            private.close()

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"


class Attack(Component):
    """An attack on a release. Results have ``kind="attack"`` and values where
    higher means more risk."""

    #: Which parts of the scenario it needs: any of "originals", "background".
    requires: ClassVar[frozenset[str]] = frozenset({"originals"})
    #: Parts it can use without needing each one (its command offers their options; with
    #: nothing required, it needs at least one of them).
    accepts: ClassVar[frozenset[str]] = frozenset()
    #: The fix the report proposes when this attack decides a release: one sentence, with
    #: ``{exposed}`` and ``{total}`` for the documents it succeeded on and attacked.
    remedy: ClassVar[str] = ""

    def fit(self, scenario: Scenario) -> Attack:
        """Prepare once per scenario (train, index). Default: nothing to prepare."""
        return self

    @abstractmethod
    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        """Attack one release; return its results (first one = the headline risk)."""


class Sanitizer(Component):
    """A sanitizer (defender): originals in, a release out, recording every
    replaced span on the released documents."""

    #: The kinds of evidence :meth:`repair` fixes in a released document (``"text"``: visible
    #: words an attack used, to reword; ``"span"``: a recorded replacement an attack saw
    #: through, to make vaguer; see :mod:`audit.core.evidence`). Empty: it only sanitizes corpora.
    repairs: ClassVar[frozenset[str]] = frozenset()

    @abstractmethod
    def sanitize(self, corpus: Corpus, *, name: str | None = None) -> Release:
        """Sanitize every document of ``corpus``."""

    def warnings(self, name: str) -> list[str]:
        """What this sanitizer's own check of release ``name`` found degenerate (most of the
        text masked, a named person left in clear...): copied into the release's provenance and
        shown beside it in the report. Empty: nothing to say (the default)."""
        return []

    def repair(self, release: Release, targets: Mapping[str, Sequence[RepairTarget]], *, name: str,
               round: int = 1) -> Release:
        """A copy of ``release`` named ``name`` in which exactly ``targets`` (per document id, of the
        kinds in :attr:`repairs`) are fixed, every change recorded on the documents as spans;
        other documents and other text stay as they are. ``round`` (1, 2...) is the repair round
        of ``anonaudit harden``: a later round may ask its model differently."""
        from audit.core.errors import AnonauditError

        raise AnonauditError(f"sanitizer {self.name!r} cannot repair a release in place")


class Metric(Component):
    """A utility metric of a release against its originals. Results have
    ``kind="utility"`` and values where higher means more utility."""

    requires: ClassVar[frozenset[str]] = frozenset({"originals"})

    def fit(self, scenario: Scenario) -> Metric:
        """Prepare once per scenario (e.g. information content of the originals)."""
        return self

    @abstractmethod
    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        """Measure one release."""


class Detector(Component):
    """Finds the spans worth protecting in texts (names, places, dates...), as Presidio's
    recognisers do; what is done with them (masked, generalised, never rewritten) is the caller's.
    INTACT, the delinker and ``anonaudit harden`` take a detector by its registry name."""

    @abstractmethod
    def detect(self, texts: Sequence[str]) -> list[list[Span]]:
        """One list of spans per text, in the texts' order: character offsets into that text and
        a label (no replacement: the caller chooses it). The same texts give the same spans."""


def _plain(value: Any) -> Any:
    """``value`` as :meth:`Component.get_params` reports it (see there)."""
    if value is None or isinstance(value, (str, int, float, bool, list, dict)):
        return value
    if isinstance(value, (tuple, frozenset, set)):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    identity = getattr(value, "identity", None)
    if identity is not None or hasattr(value, "complete_batch"):
        return identity or type(value).__name__
    return value
