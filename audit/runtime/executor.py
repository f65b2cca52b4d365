"""Where the per-document work of a run goes: this process (local) or a cluster (Ray).

Components never know which. A component that has per-document work to spread asks its
resources for ``executor`` and calls :meth:`Executor.map` with a *worker*: a picklable
callable that takes a list of items (a *group*) and returns one output per item. A worker
with a ``setup()`` method has it called once in every process that runs it, before its first
group (load a model once per worker, not once per group). A worker with a ``threads``
attribute is told, before ``setup()``, how many CPUs it has on a cluster (its share of the
cluster's CPUs, at least the stage's ``num_cpus``), so a model can run that many threads;
locally it is left as it is (the component's own setting).
A worker whose ``light_setup`` is true loads nothing in ``setup()`` (or has none), so that a
cluster may run it as plain tasks, calling ``setup()`` again for every group, instead of as
actors that each start a process of their own (:meth:`audit.pipeline.executors.RayExecutor._run`).
A worker whose ``readonly_outputs`` is true accepts that the numpy arrays of its outputs come
back from a cluster read-only (views of the cluster's shared memory, not copied into this
process: large outputs, such as an index's keys, travel several times faster); otherwise they
come back writable, as locally.

A component asks :func:`sends_to_workers` first: work of one group stays with it.

``map`` cuts the items into groups of exactly ``group`` items in their order, so a worker sees
the same groups whatever runs it: a model that batches its inputs (an embedder pads a batch to
its longest text) computes the same numbers locally and on a cluster, and results are
identical. Outputs come back in the items' order.

:class:`LocalExecutor` runs the groups here, one after the other (the default; it needs and
imports nothing). The Ray executor (``audit.pipeline.executors.RayExecutor``) runs them as Ray
Data ``map_batches`` over a pool of actors. Both keep, per stage label, how many items and
seconds it took (:attr:`Executor.timings`), which the runner records in the provenance,
never in a result.

A component that trains a model hands the executor a training job instead
(:meth:`Executor.train`, :mod:`audit.runtime.trainer`): the local executor runs it here, the
Ray executor data-parallel on Ray Train. :meth:`Executor.train_workers` says on how many
workers, and :meth:`Executor.check_training` checks, before any work, that it can run.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from audit.runtime.trainer import TrainingJob
    from audit.runtime.trainer import Workspace

#: A worker: ``worker(group) -> outputs`` (one per item), optionally with ``setup()``.
Worker = Callable[[list[Any]], list[Any]]


def sends_to_workers(executor: Any, n_items: int, group: int) -> bool:
    """Whether a component sends ``n_items`` (in groups of ``group``) to ``executor``'s workers
    rather than doing the work itself: only on a distributed executor, and only when they make
    more than one group. One group keeps one worker busy and gains nothing from a cluster, whose
    stage costs seconds to start (a worker, its imports, its model); the component does it here,
    where its model or index is, in the same group, so the results are the same."""
    return executor is not None and bool(getattr(executor, "distributed", False)) and n_items > group


class Executor(ABC):
    """Runs workers over groups of items (see the module doc)."""

    kind: ClassVar[str] = ""
    #: True when groups run in other processes (so a component may prefer sending its work there).
    distributed: ClassVar[bool] = False

    def __init__(self) -> None:
        self.timings: dict[str, dict[str, float]] = {}

    @abstractmethod
    def _run(self, worker: Worker, groups: list[list[Any]], *, label: str, num_cpus: float,
             num_gpus: float) -> list[list[Any]]:
        """The outputs of every group, in order."""

    def map(self, worker: Worker, items: Sequence[Any], *, group: int = 64, label: str = "work",
            num_cpus: float = 1.0, num_gpus: float = 0.0) -> list[Any]:
        """``worker`` over ``items`` in groups of ``group`` (the last may be shorter); one output
        per item, in order. ``label`` names the stage in timings and progress; ``num_cpus`` and
        ``num_gpus`` are what one worker needs on a cluster (ignored locally)."""
        items = list(items)
        if not items:
            return []
        group = max(1, int(group))
        groups = [items[i:i + group] for i in range(0, len(items), group)]
        t0 = time.perf_counter()
        outs = self._run(worker, groups, label=label, num_cpus=num_cpus, num_gpus=num_gpus)
        flat: list[Any] = []
        for g, out in zip(groups, outs):
            out = list(out)
            if len(out) != len(g):
                raise RuntimeError(f"{label}: a worker returned {len(out)} outputs for {len(g)} items")
            flat.extend(out)
        entry = self.timings.setdefault(label, {"items": 0, "seconds": 0.0, "calls": 0})
        entry["items"] += len(items)
        entry["seconds"] = round(entry["seconds"] + time.perf_counter() - t0, 3)
        entry["calls"] += 1
        return flat

    def info(self) -> dict[str, Any]:
        """What the provenance records about where the run ran (kind, cluster size)."""
        return {"kind": self.kind}

    def train_workers(self, num_threads: int | None) -> tuple[int, int | None, bool]:
        """``(workers, threads each, GPUs?)`` of a training (:meth:`train`): here one worker on
        the component's own ``num_threads``."""
        return 1, num_threads, False

    def check_training(self, workspace: Workspace) -> None:
        """Before any work: that a training can run here and keep its checkpoint (an
        :class:`~audit.core.errors.AnonauditError` naming the fix otherwise)."""
        workspace.check()

    def train(self, job: TrainingJob) -> dict[str, Any]:
        """Run the training ``job`` (:mod:`audit.runtime.trainer`): here, one worker."""
        from audit.runtime.trainer import train_here

        return train_here(job)

    def start(self) -> Executor:
        """Connect (a cluster) or do nothing (local); returns itself."""
        return self

    def close(self) -> None:
        """Disconnect; what the executor started, it stops."""

    def __enter__(self) -> Executor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalExecutor(Executor):
    """Every group in this process, in order (the default)."""

    kind = "local"

    def _run(self, worker: Worker, groups: list[list[Any]], *, label: str, num_cpus: float,
             num_gpus: float) -> list[list[Any]]:
        setup = getattr(worker, "setup", None)
        if callable(setup):
            setup()
        return [worker(g) for g in groups]

    def info(self) -> dict[str, Any]:
        return {"kind": "local", "nodes": 1, "workers": 1}
