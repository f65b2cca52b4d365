"""A component's training data-parallel on Ray Train: the Ray executor's way of
:meth:`audit.runtime.executor.Executor.train` (``--executor ray``).

The job's loop (:mod:`audit.runtime.trainer`) runs on ``WORKERS`` Ray Train workers of a
:class:`ray.train.torch.TorchTrainer` (torch.distributed set up by Ray Train: the loop sums its
gradients with it), each with a :class:`RayContext`: its rank and world size, the device Ray
Train gives it, ``torch`` on the job's threads and deterministic algorithms. Each epoch every
worker reports (Ray Train's barrier) and worker 0 writes the checkpoint in the one format
(:mod:`audit.runtime.checkpoints`) for Ray Train to keep in its storage: the user's
``checkpoint_dir`` (a folder every node sees), else the component's work folder's
``checkpoints``, else (caches off) a scratch folder for the run. A training that is killed, or
whose worker dies, is run again under the same name (``ray-KEY[:24]``) and storage and resumes
from its last finished epoch: Ray Train restores the checkpoint and hands it to the workers,
which read it as a local training reads its own. The loop's final state travels back as the
last checkpoint; a finished training run again hands its final state back as it is.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from audit.core.config import make_private
from audit.core.errors import AnonauditError
from audit.runtime.checkpoints import read_state, write_state
from audit.runtime.integrity import seal
from audit.runtime.trainer import TrainContext, TrainingJob
from audit.runtime.folders import scratch

#: Test hook, read by the run: ``EPOCH:MARKER_FILE`` makes worker 0 raise after finishing that
#: epoch's checkpoint, once (it writes the marker file), so a test can kill a training mid-way.
FAIL_AFTER_EPOCH_ENV = "ANONAUDIT_RAY_TRAIN_FAIL_AFTER_EPOCH"
#: The key that marks a checkpoint as the training's end (the loop's final state), not an epoch's.
FINAL = "final"
#: How many times Ray Train restarts a training whose workers died before it gives up.
MAX_FAILURES = 2


def check_ray_train() -> None:
    """Before any work: Ray Train can be imported (an error naming the fix otherwise)."""
    try:
        import ray.train.torch  # noqa: F401
    except ImportError as exc:
        raise AnonauditError(f"training on the ray executor needs Ray Train ({exc}): pip install 'anonaudit[ray]' "
                             "(or run with --executor local)") from None


def train_on_ray(job: TrainingJob) -> dict[str, Any]:
    """Run ``job`` on Ray Train (Ray connected by the executor); its loop's final state."""
    job.workspace.check()
    check_ray_train()
    import ray
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    root = job.workspace.checkpoint_root
    with contextlib.ExitStack() as stack:
        if root is None:  # caches off: Ray Train still needs a storage, for the run only
            root = stack.enter_context(job.workspace.scratch("ray-train-"))
        root.mkdir(parents=True, exist_ok=True)
        make_private(root)
        name = job.workspace.ray_name
        trainer = TorchTrainer(
            _worker_loop, train_loop_config={"job": ray.put(job), "fail_after": os.environ.get(FAIL_AFTER_EPOCH_ENV)},
            scaling_config=ScalingConfig(num_workers=job.workers, use_gpu=job.gpu,
                                         resources_per_worker={"CPU": job.threads or 1}),
            run_config=RunConfig(name=name, storage_path=str(root.resolve()),
                                 checkpoint_config=CheckpointConfig(num_to_keep=1),
                                 failure_config=FailureConfig(max_failures=MAX_FAILURES)))
        if job.progress:
            print(f"    {job.label}: on Ray Train, {job.workers} worker(s) of "
                  f"{'a GPU' if job.gpu else f'{job.threads} thread(s)'} (checkpoints in {root / name})",
                  file=sys.stderr, flush=True)
        try:
            result = trainer.fit()
        except ray.train.TrainingFailedError as exc:
            kept = job.workspace.checkpoint_root is not None
            raise AnonauditError(gave_up(job, root / name, exc, kept=kept)) from None
        with result.checkpoint.as_directory() as folder:
            state = read_state(Path(folder), key=job.workspace.key, trainer=job.trainer)
    if state is None or not state.get(FINAL):
        raise AnonauditError(f"{job.label}: Ray Train ended without the training's final state")
    return {k: v for k, v in state.items() if k not in (FINAL, "key", "trainer")}


def gave_up(job: TrainingJob, folder: Path, exc: Exception, *, kept: bool) -> str:
    """What to say when Ray Train gives up on ``job`` (its workers failed more than
    :data:`MAX_FAILURES` times): the workers' own errors in a line each, where the last finished
    epoch is kept (``folder``; none when ``kept`` is false: caches off) and what to do."""
    failures = getattr(exc, "worker_failures", None) or {}
    causes = [f"worker {rank}: {_first_line(err)}" for rank, err in sorted(failures.items())]
    if not causes:
        cause = getattr(exc, "controller_failure", None) or exc
        causes = [_first_line(cause)]
    where = (f"its last finished epoch is kept in {folder}: run the same command again (same checkpoint_dir) to "
             "resume from it" if kept else "nothing is kept (caches off): name a checkpoint_dir to keep its epochs")
    return (f"{job.label}: Ray Train gave up after {MAX_FAILURES} restarts of its {job.workers} worker(s) "
            f"({'; '.join(causes)}); {where}, or run with --executor local")


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


class RayContext(TrainContext):
    """A Ray Train worker's context: its rank, the device Ray Train gives it, its checkpoint
    restored by Ray Train, and its checkpoints reported to Ray Train."""

    distributed = True

    def __init__(self, job: TrainingJob, fail_after: str | None):
        import ray.train
        import ray.train.torch

        super().__init__(job)
        ctx = ray.train.get_context()
        self.rank, self.world = ctx.get_world_rank(), ctx.get_world_size()
        self.device = str(ray.train.torch.get_device())
        self._checkpoint = None
        self._fail_after = fail_after
        self._resume: dict[str, Any] | None = None
        self._read = False

    def resume(self) -> dict[str, Any] | None:
        """The checkpoint Ray Train restored (read once), or ``None``."""
        if not self._read:
            import ray.train

            checkpoint = ray.train.get_checkpoint()
            if checkpoint is not None:
                with checkpoint.as_directory() as folder:
                    self._resume = read_state(Path(folder), key=self.job.workspace.key, trainer=self.job.trainer)
            self._read = True
        return self._resume

    def save(self, state: dict[str, Any], metrics: dict[str, Any]) -> None:
        """Report ``metrics`` from every worker and, from worker 0, ``state`` as the checkpoint."""
        import ray.train

        if self.rank != 0:
            ray.train.report(metrics)
            return
        with scratch("ray-train-checkpoint-") as tmp:
            write_state(tmp, _on_cpu(state), key=self.job.workspace.key, trainer=self.job.trainer)
            seal(tmp)
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(str(tmp)))
        if not state.get(FINAL):
            self._maybe_fail(int(state["epoch"]))

    def place(self, model: Any) -> Any:
        """The model on this worker's device, with worker 0's weights (as DDP would start it)."""
        import torch.distributed as dist

        model = model.to(self.device)
        if self.world > 1 and dist.is_available() and dist.is_initialized():
            for tensor in [*model.parameters(), *model.buffers()]:
                dist.broadcast(tensor.data, src=0)
        return model

    def _maybe_fail(self, epoch: int) -> None:
        """The test hook of :data:`FAIL_AFTER_EPOCH_ENV`: ``EPOCH:MARKER_FILE``."""
        if not self._fail_after:
            return
        at, _, marker = self._fail_after.partition(":")
        if int(at) == epoch and marker and not os.path.exists(marker):
            Path(marker).write_text("failed once\n")
            time.sleep(3)  # as a real failure would come later: Ray Train has taken in the epoch's checkpoint
            raise RuntimeError(f"killed after epoch {epoch} (test hook)")


def _on_cpu(value: Any) -> Any:
    """``value`` with every tensor in it a CPU copy (a checkpoint is read on any node)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone().cpu()
    if isinstance(value, dict):
        return {k: _on_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(v) for v in value)
    return value


def _worker_loop(config: dict[str, Any]) -> None:
    """One Ray Train worker: the job's loop with a :class:`RayContext`; its final state reported
    as the last checkpoint (a finished training run again reports it as it is)."""
    import ray
    import torch

    job: TrainingJob = ray.get(config["job"])
    if job.threads:
        torch.set_num_threads(job.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    ctx = RayContext(job, config.get("fail_after"))
    resume = ctx.resume()
    if resume is not None and resume.get(FINAL):
        ctx.save(resume, {"done": 1})
        return
    ctx.save({**job.loop(ctx, job.payload), FINAL: True}, {"done": 1})
