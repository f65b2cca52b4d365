"""Where a component's training runs, owned by the engine: here, or data-parallel on Ray Train.

A component that trains (TRIR's attacker) writes its training loop once, as a function
``loop(ctx, payload) -> state`` that runs on every worker, and hands it to its executor as a
:class:`TrainingJob`: :meth:`audit.runtime.executor.Executor.train` runs it in this process
(:func:`train_here`, the local executor's way) or on ``WORKERS`` Ray Train workers
(:mod:`audit.pipeline.ray_train`, the Ray executor's way). The component never imports Ray.

The loop learns where it runs from its :class:`TrainContext`: its ``rank`` among ``world``
workers (``0`` of ``1`` here), its ``device``, whether it is ``distributed`` (a Ray Train
worker, which Ray Train may restart from the last checkpoint in a new process), the state to
resume from (:meth:`TrainContext.resume`), and where a checkpoint goes after an epoch
(:meth:`TrainContext.save`: one format, :mod:`audit.runtime.checkpoints`). It returns its final
state (a dict of tensors and plain values: on Ray Train it travels back as a checkpoint), which
:meth:`~audit.runtime.executor.Executor.train` returns.

The engine owns the folders (:class:`Workspace`, :mod:`audit.runtime.folders`): the checkpoint under the
user's ``checkpoint_dir`` or the component's work folder, scratch folders under the work folder,
checked before any work and cleaned when the training is over.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.runtime.checkpoints import Checkpoint
from audit.runtime.folders import scratch, writable

#: The checkpoints' folder inside a work folder, when the user names none.
CHECKPOINTS = "checkpoints"


class Workspace:
    """Where one training keeps its checkpoint and scratch folders.

    ``work_dir``: the component's cache or work folder (``None``: caches are off); the
    checkpoint's root is the user's ``checkpoint_dir`` when given (kept after the training),
    else ``work_dir/checkpoints`` (removed once the trained model is saved), else none: a
    training with caches off keeps no checkpoint locally, and a Ray Train one keeps its
    checkpoints in a scratch folder for the run (Ray Train restarts a worker from them).
    ``key`` names the checkpoint: the hash of everything that decides the trained model."""

    def __init__(self, key: str, work_dir: str | os.PathLike[str] | None,
                 checkpoint_dir: str | os.PathLike[str] | None = None):
        self.key = key
        self.work_dir = None if work_dir is None else Path(work_dir)
        self.user_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self._resumed: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:  # to a Ray Train worker: without what was read here
        return {**self.__dict__, "_resumed": {}}

    def resume(self, trainer: str) -> dict[str, Any] | None:
        """The state to resume the training on ``trainer`` from: its checkpoint under
        :attr:`checkpoint_root` (:mod:`audit.runtime.checkpoints`), read once, or ``None``."""
        if trainer not in self._resumed:
            root = self.checkpoint_root
            self._resumed[trainer] = None if root is None else Checkpoint(root, self.key, trainer).load()
        return self._resumed[trainer]

    @property
    def ray_name(self) -> str:
        """The name of this training's run in Ray Train's storage (under :attr:`checkpoint_root`)."""
        return f"ray-{self.key[:24]}"

    @property
    def checkpoint_root(self) -> Path | None:
        if self.user_dir is not None:
            return self.user_dir
        return None if self.work_dir is None else self.work_dir / CHECKPOINTS

    def check(self) -> None:
        """Before any work: the checkpoint folder the user named can be written."""
        if self.user_dir is not None:
            writable(self.user_dir, "checkpoint_dir")

    def scratch(self, prefix: str) -> contextlib.AbstractContextManager[Path]:
        """A scratch folder under the work folder (:func:`scratch`)."""
        return scratch(prefix, self.work_dir)

    def finish(self) -> None:
        """After the trained model is saved: remove the default checkpoint (a user's stays)."""
        root = self.checkpoint_root
        if self.user_dir is not None or root is None:
            return
        for name in (self.key[:24], self.ray_name):
            shutil.rmtree(root / name, ignore_errors=True)
        with contextlib.suppress(OSError):
            root.rmdir()


#: ``loop(ctx, payload) -> final state``: a module-level function (it is pickled to Ray Train's workers).
TrainingLoop = Callable[["TrainContext", Any], dict[str, Any]]


@dataclass(frozen=True)
class TrainingJob:
    """One training a component hands to its executor.

    ``loop`` and ``payload``: what every worker runs (``payload`` is pickled to Ray Train's
    workers; here it is passed as it is). ``workspace``: its folders and its key. ``device``:
    where it trains here (a Ray Train worker uses the device Ray Train gives it). ``workers``,
    ``threads``, ``gpu``: the Ray Train workers (:meth:`~audit.runtime.executor.Executor.train_workers`);
    here one worker on the component's threads. ``trainer``: where it trains, in words
    (``local``, ``ray-train:2x1``), recorded in each checkpoint so that the other path's is
    refused. ``label``: the training's name in progress lines."""

    loop: TrainingLoop
    payload: Any
    workspace: Workspace
    device: str = "cpu"
    workers: int = 1
    threads: int | None = None
    gpu: bool = False
    trainer: str = "local"
    label: str = "training"
    progress: bool = False


class TrainContext:
    """Where the loop runs (see the module doc); this one is the local executor's: rank 0 of 1,
    on the job's device, its checkpoint under the workspace's root (none with caches off)."""

    rank: int = 0
    world: int = 1
    distributed: bool = False

    def __init__(self, job: TrainingJob):
        self.job = job
        self.device = job.device
        root = job.workspace.checkpoint_root
        self._checkpoint = None if root is None else Checkpoint(root, job.workspace.key, job.trainer)

    def resume(self) -> dict[str, Any] | None:
        """The state of the last finished epoch to resume from (read once), or ``None``."""
        return self.job.workspace.resume(self.job.trainer)

    def save(self, state: dict[str, Any], metrics: dict[str, Any]) -> None:
        """Keep ``state`` as the checkpoint after an epoch (``metrics``: what it reports)."""
        if self._checkpoint is not None:
            self._checkpoint.save(state)

    def place(self, model: Any) -> Any:
        """``model`` on this worker's device (on Ray Train, with worker 0's weights)."""
        return model.to(self.device)


def trainer_name(placement: tuple[int, int | None, bool] | None) -> str:
    """Where a training runs, in words: ``local`` (``placement`` ``None``: in this process),
    else ``ray-train:WORKERSxTHREADS`` (or ``xgpu``) for the ``(workers, threads, gpu)`` of
    :meth:`~audit.runtime.executor.Executor.train_workers`. Part of a training's key (a
    data-parallel training is another draw of the same seed's spread) and of each checkpoint."""
    if placement is None:
        return "local"
    workers, threads, gpu = placement
    return f"ray-train:{workers}x{'gpu' if gpu else threads}"


def train_here(job: TrainingJob) -> dict[str, Any]:
    """Run ``job`` in this process: one worker, its checkpoint in the workspace."""
    job.workspace.check()
    return job.loop(TrainContext(job), job.payload)
