"""Span guessing on documents taken to the interval target (:mod:`audit.core.sequential`):
the attacked documents in a seeded order, guessed batch by batch (10, 20, 40, ... documents),
until the cluster-bootstrap interval of the recovery rate is narrow enough or every document is
done. With a cheap score of every document (:class:`Cheap`, span guessing's LLM modes) the
batches are the LLM's sample of a prediction-powered estimate instead (:mod:`audit.core.ppi`,
its ratio form: recovered spans / spans over documents of unequal size). The guesses of the batches are put back in the spans' order, and the background's
diagnostics of the batches are combined as if computed on all chosen spans at once."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from audit.core.ppi import PPIRun, sequential_ppi
from audit.core.sequential import SequentialSample, sample_sequentially
from audit.core.stats import cluster_bootstrap

#: Diagnostics that are the same for every batch (the background's own size and method).
_SAME = ("retrieval", "background_documents", "background_people")
#: Counts over the attacked documents or spans: summed over batches.
_SUMMED = ("documents_attacked", "documents_without_background", "spans_without_candidates")
#: Means over the attacked documents whose subject is known: weighted by those documents.
_MEANS = ("person_found_rate", "person_in_retrieved_rate", "person_posterior")


@dataclass(frozen=True)
class Cheap:
    """The cheap score of every document: ``recovered`` spans by a guesser that asks no LLM,
    what that guesser is (``name``), and which question the interval answers (``estimand``)."""

    recovered: Mapping[str, float]
    name: str
    estimand: str = "release"


def guess_in_batches(targets: Sequence[Any], *, seed: int, target: float | None, say: Callable[[str], None] | None,
                     sources_of: Callable[[list[Any]], tuple[dict[str, list[list[str]]], str, dict[str, Any]]],
                     hits_of: Callable[[list[Any], dict[str, list[list[str]]], str], list[bool]],
                     cheap: Cheap | None = None
                     ) -> tuple[list[Any], dict[str, list[list[str]]], str, dict[str, Any], SequentialSample | PPIRun]:
    """``(targets attacked, their guesses per source, the head source, diagnostics, the sample)``.
    ``sources_of(batch)`` guesses a batch of targets (the attack's ``_sources``); ``hits_of(batch,
    sources, head)`` says which of them a guess recovered (for the interval between looks); ``say``
    is told what the rest may cost after the first batch. ``cheap``: every document's cheap score;
    the sample is then a prediction-powered one (a :class:`~audit.core.ppi.PPIRun`), in the same
    seeded order of documents."""
    by_doc: dict[str, list[int]] = {}
    for i, t in enumerate(targets):
        by_doc.setdefault(t.doc_id, []).append(i)
    guesses: dict[int, dict[str, list[str]]] = {}
    per_span: dict[int, dict] = {}
    diags: list[tuple[dict[str, Any], int]] = []
    units: list[tuple[int, int]] = []
    heads: list[str] = []

    def run(docs: list[str]) -> dict[str, float]:
        idx = sorted(i for d in docs for i in by_doc[d])
        batch = [targets[i] for i in idx]
        sources, head, diag = sources_of(batch)
        heads.append(head)
        for k, i in enumerate(idx):
            guesses[i] = {name: gl[k] for name, gl in sources.items()}
        for k, extra in zip(idx, diag.get("per_span") or []):
            per_span[k] = extra
        diags.append((diag, len({t.doc_id for t in batch if t.subject is not None})))
        per: dict[str, list[int]] = {}
        for t, ok in zip(batch, hits_of(batch, sources, head)):
            per.setdefault(t.doc_id, [0, 0])
            per[t.doc_id][0] += ok
            per[t.doc_id][1] += 1
        units.extend((a, b) for a, b in per.values())
        return {d: float(a) for d, (a, _) in per.items()}

    def interval() -> tuple[float, float] | None:
        return cluster_bootstrap(units, seed=seed).ci if units else None

    seq: SequentialSample | PPIRun
    if cheap is None:
        seq = sample_sequentially(list(by_doc), seed=seed, salt="span-documents", target=target, run=run,
                                  interval=interval, say=say)
    else:
        seq = sequential_ppi(list(by_doc), seed=seed, salt="span-documents", target=target, label=run,
                             predict=lambda _labels: {d: float(cheap.recovered[d]) for d in by_doc},
                             predictor=cheap.name, estimand=cheap.estimand, say=say,
                             sizes={d: float(len(ix)) for d, ix in by_doc.items()})
    chosen = sorted(guesses)
    names = list(guesses[chosen[0]]) if chosen else []
    sources = {name: [guesses[i][name] for i in chosen] for name in names}
    diag = merge_diagnostics(diags)
    if per_span:
        diag["per_span"] = [per_span.get(i, {}) for i in chosen]
    return [targets[i] for i in chosen], sources, heads[0] if heads else "", diag, seq


def merge_diagnostics(parts: list[tuple[dict[str, Any], int]]) -> dict[str, Any]:
    """The diagnostics of disjoint batches of documents as one: ``parts`` = ``(diagnostics,
    documents with a known subject in that batch)``. Keys this module does not know are taken
    from the first batch only when every batch agrees on them, and left out otherwise."""
    if not parts:
        return {}
    out: dict[str, Any] = {}
    keys = {k for d, _ in parts for k in d if k != "per_span"}
    for k in keys:
        values = [d.get(k) for d, _ in parts]
        if k in _SUMMED:
            out[k] = sum(v or 0 for v in values)
        elif k in _MEANS:
            weighted = [(v, w) for v, (_, w) in zip(values, parts) if v is not None and w]
            total = sum(w for _, w in weighted)
            out[k] = sum(v * w for v, w in weighted) / total if total else None
        elif k in _SAME or all(v == values[0] for v in values):
            out[k] = values[0]
    return out
