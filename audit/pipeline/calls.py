"""How a run calls a component (or sanitizer): the parameters it completes from the spec
(:func:`component_params`), the audit's one seed handed as the keyword ``seed``
(:func:`seed_keyword`: never through the parameters, so the seed has one representation from
``anonaudit.Spec.seed`` to the component), and the record of what the component was given
(:func:`as_given`: its resume key and the provenance)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from audit.core.errors import AnonauditError
from audit.pipeline.budget import budget_params

if TYPE_CHECKING:
    from audit.pipeline.spec import AuditSpec

#: Component (and sanitizer) parameters the runner fills from the spec when the spec does not set them
#: (the seed is not one: :func:`seed_keyword`).
INJECTED = {"llm": "models.llm", "embedder": "models.embedder"}


def component_params(spec: AuditSpec, accepted: Sequence[str], params: Mapping[str, Any], *,
                     progress: bool, sampling: bool = True, cls: type | None = None) -> dict[str, Any]:
    """``params`` completed from the spec for a component (or sanitizer) that takes the
    parameters ``accepted``: :data:`INJECTED` (llm, embedder), the ``sampling`` parameters
    (components only), ``progress`` and what the spec's budget sets on ``cls``
    (:func:`audit.pipeline.budget.budget_params`), each where nothing before sets it. The seed is
    not among them: :func:`seed_keyword`; a ``seed`` in ``params`` is refused."""
    if "seed" in params:
        raise AnonauditError(f"{spec.source}: seed={params['seed']!r} among a component's parameters: the seed is "
                             "the audit's, one for every component; give it as the spec's seed")
    out = dict(params)
    values = {"models.llm": spec.llm, "models.embedder": spec.embedder}
    for param, source in INJECTED.items():
        if param in accepted and param not in out and values[source] is not None:
            out[param] = values[source]
    if sampling:
        for k, v in spec.sampling_params.items():
            if k in accepted and k not in out:
                out[k] = v
    if "progress" in accepted and "progress" not in out:
        out["progress"] = progress
    if cls is not None:
        for k, v in budget_params(cls, spec.budget).items():
            out.setdefault(k, v)
    return out


def seed_keyword(seed: int, accepted: Sequence[str]) -> dict[str, int]:
    """The audit's seed as the keyword ``seed`` of a component (or sanitizer) that takes one,
    nothing for one that does not: how every run hands a component its seed."""
    return {"seed": seed} if "seed" in accepted else {}


def as_given(params: Mapping[str, Any], seed: Mapping[str, int], completed: Mapping[str, Any]) -> dict[str, Any]:
    """What a component was given, for its resume key and the provenance: its own ``params``, the
    seed (:func:`seed_keyword`), then what :func:`component_params` completed, in that order."""
    return {**params, **seed, **completed}
