"""TRIR's fine-tuning data-parallel on Ray Train (``--executor ray``).

The run prepares the training windows as a local run does (spaCy through the parse cache,
tokenizer, de-duplication) and hands them to a :class:`ray.train.torch.TorchTrainer`: N
workers (a cluster's GPUs, one each, or CPU workers of ``threads`` torch threads each) hold a
copy of the classifier (torch.distributed, set up by Ray Train; gradients summed as PyTorch's
DDP does, in buckets sent while the backward pass goes on, of the word embeddings only the rows
a batch touches: :mod:`attackers.trir.exchange`) and walk
the same epochs as a local run, same order, same batches, same learning-rate schedule: each
batch is cut into one slice per worker, and each worker's loss is its slice's share of the
whole batch's mean, so that the summed gradients are those of the whole batch. Each worker
steps its optimizer (AdamW, torch's fused kernel: the same update to rounding, and a step that
every worker repeats costs ~7x less than the loop over parameters). The dev accuracy is
computed data-parallel too (each worker predicts its share of the dev windows; the logits are
summed across workers), so every worker takes the same early-stopping decision.

Each epoch, worker 0 reports a checkpoint (:func:`attackers.trir.training._state`: weights,
optimizer, schedule, history, best epoch) to the storage the user names (``checkpoint_dir``,
a folder every node sees, or the attacker cache's ``checkpoints`` folder, removed once the
attacker is saved). A training that is killed, or whose worker dies, is run again under the
same name and storage and resumes from its last finished epoch: Ray Train restores its
checkpoints and :func:`ray.train.get_checkpoint` hands the last one to the workers. Dropout is
seeded per epoch and worker, so a resumed training is the uninterrupted one.

The arithmetic (``train_precision``, and ``predict_precision`` for the dev release) is agreed by
the workers, not taken from the driver: each resolves ``auto`` on its own device, they all-gather
their answers, and the training is bf16 only when every worker computes bf16 natively, else fp32
(:func:`cluster_precision`): a laptop driving GPU workers trains in bf16, a cluster mixing bf16
GPUs with CPUs without it trains one model in one arithmetic. The result records what the workers
used; a resumed training keeps its checkpoint's.

Not here: masked-LM pre-training (a run that asks for it trains on one worker, as before:
:class:`attackers.trir.distributed.TrainOnWorker`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attackers.trir.training_batches import freeze_lower, length_batches
from attackers.trir.encoder import PREDICT_PRECISIONS, TRAIN_PRECISIONS, autocast, resolve_precision
from attackers.trir.fine_tuning import FineTuned, FineTuning
from attackers.trir.token_windows import Windows, pad_batch
from audit.core.config import make_private

if TYPE_CHECKING:
    from attackers.trir.attacker_cache import TrainedTRIR
    from audit.core.data import Corpus, Release

STATE_FILE = "state.pt"
#: Test hook, read by the run: ``EPOCH:MARKER_FILE`` makes worker 0 raise after finishing that
#: epoch's checkpoint, once (it writes the marker file), so a test can kill a training mid-way.
FAIL_AFTER_EPOCH_ENV = "ANONAUDIT_TRIR_RAY_FAIL_AFTER_EPOCH"
#: The benchmark's ablation switches (read by the run, ``benchmarks/trir_scale.py``): the
#: gradient exchange overlapped with the backward pass, and the fused AdamW step.
OVERLAP, FUSED_ADAMW = True, True


def workers_and_threads(executor, num_threads: int | None) -> tuple[int, int, bool]:
    """How many Ray Train workers, torch threads each, and whether they use GPUs: one worker per
    GPU when the cluster has any; else the executor's ``--ray-workers`` (default: one per CPU
    over ``num_threads``), each with its share of the CPUs as threads."""
    info = executor.info()
    gpus, cpus = int(info.get("gpus") or 0), max(1, int(info.get("cpus") or 1))
    if gpus:
        return gpus, max(1, num_threads or cpus // gpus), True
    workers = getattr(executor, "workers", None) or max(1, cpus // max(1, num_threads or 1))
    return workers, max(1, num_threads or cpus // workers), False


def train_on_ray(attack, background: Corpus, base_path: str, dev: Release | None, device: str,
                 executor) -> TrainedTRIR:
    """Train ``attack``'s classifier data-parallel on Ray Train; the trained attacker, here."""
    import ray
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    data = attack.training_data(background, base_path, dev)
    notes = data.text_notes + data.window_notes
    dev_set = data.dev_set
    workers, threads, gpu = workers_and_threads(executor.start(), attack.num_threads)
    # device auto: a worker trains on the device Ray Train gives it, whatever this process has
    payload = {"attack": type(attack), "params": {**attack.get_params(), "progress": False, "device": "auto",
                          "window_rotation": attack.settings()["window_rotation"]}, "labels": data.labels,
               "ids": data.windows.ids, "y": list(data.y), "pad_id": data.pad_id, "threads": threads,
               "dev": None if dev_set is None else (dev_set[0].ids, dev_set[0].doc, dev_set[1].tolist()),
               "fail_after": os.environ.get(FAIL_AFTER_EPOCH_ENV), "overlap": OVERLAP, "fused": FUSED_ADAMW}
    root, name = ray_storage(attack, background, base_path, dev)
    trainer = TorchTrainer(
        _worker_loop, train_loop_config={"data": ray.put(payload)},
        scaling_config=ScalingConfig(num_workers=workers, use_gpu=gpu, resources_per_worker={"CPU": threads}),
        run_config=RunConfig(name=name, storage_path=str(root), checkpoint_config=CheckpointConfig(num_to_keep=1),
                             failure_config=FailureConfig(max_failures=2)))
    if attack.progress:
        print(f"    TRIR: training on Ray Train, {workers} worker(s) of {'a GPU' if gpu else f'{threads} thread(s)'}"
              f" (checkpoints in {root / name})", file=_stderr(), flush=True)
    result = trainer.fit()
    state = _load_state(result.checkpoint)
    if not attack.checkpoint_dir:  # the default storage is only for a killed training: it is over
        shutil.rmtree(root / name, ignore_errors=True)
        with contextlib.suppress(OSError):
            root.rmdir()
    trained = _trained(state, data.tokenizer, data.labels, base_path, device)
    history = json.loads(state["history"])
    tuned = FineTuned(history, state["chosen_epoch"], state["per_epoch"], state["selection"],
                      (state["best_accuracy"], state.get("best_epoch", 0), None), state.get("stopped"))
    notes += [tuned.note(dev), f"trained data-parallel on Ray Train: {workers} worker(s)"]
    trained.info = attack.training_record(background, base_path, dev, data, trained.model, device, tuned, notes)
    trained.info.update(device=device, threads=None, pretrained=False, pretrain_loss=[],
                        resumed_from_epoch=state.get("resumed_from_epoch"),
                        ray_train={"workers": workers, "threads_per_worker": threads, "gpus": gpu})
    if state.get("train_precision"):  # what the workers trained in, not what this process would resolve
        trained.info["settings"]["train_precision"] = state["train_precision"]
    return trained


def agree_precision(answers: list[str]) -> str:
    """The one arithmetic of a data-parallel training, from each worker's own answer: the one
    they all gave, else fp32, which every device computes natively (a cluster of bf16 GPUs and
    CPUs without it trains in fp32 everywhere, never one model in two arithmetics)."""
    return answers[0] if answers and all(a == answers[0] for a in answers) else "fp32"


def cluster_precision(value: str | None, device: str, choices: tuple[str, ...], what: str, world: int) -> str:
    """``value`` (``auto``, or a precision) resolved by this worker on its own ``device``, then
    agreed with every other worker (:func:`agree_precision` over an all-gather), so that ``auto``
    follows the workers' hardware, not the driver's (a laptop driving GPU workers), and all of
    them compute alike. Every worker calls it at the same point (a collective)."""
    own = resolve_precision(value, device, choices, what)
    if world <= 1:
        return own
    import torch.distributed as dist

    answers: list[str] = [own] * world
    dist.all_gather_object(answers, own)
    return agree_precision(answers)


def ray_storage(attack, background: Corpus, base_path: str, dev: Release | None) -> tuple[Path, str]:
    """Where Ray Train keeps this training's checkpoints: the user's ``checkpoint_dir``, else the
    attacker cache's ``checkpoints`` folder (a temporary folder with caches off); the run's name
    comes from the attacker's cache key."""
    from attackers.trir.attacker_cache import cache_root
    from audit.core import config

    if attack.checkpoint_dir:
        root = Path(attack.checkpoint_dir)
    elif attack.use_cache and config.cache_enabled():
        root = cache_root(attack.cache_dir) / "checkpoints"
    else:
        root = Path(tempfile.mkdtemp(prefix="trir-ray-"))
    root.mkdir(parents=True, exist_ok=True)
    make_private(root)
    key = attack.training_key(background, base_path, dev)
    return root.resolve(), f"ray-{key[:24]}"


def _stderr():
    import sys

    return sys.stderr


def _load_state(checkpoint) -> dict[str, Any]:
    import torch

    with checkpoint.as_directory() as folder:
        return torch.load(Path(folder) / STATE_FILE, map_location="cpu", weights_only=True)


def _trained(state: dict[str, Any], tokenizer, labels: list[str], base_path: str, device: str) -> TrainedTRIR:
    from transformers import AutoModelForSequenceClassification

    from attackers.trir.attacker_cache import TrainedTRIR
    from attackers.trir.encoder import quiet_transformers

    with quiet_transformers():
        model = AutoModelForSequenceClassification.from_pretrained(
            base_path, num_labels=len(labels), id2label=dict(enumerate(labels)),
            label2id={s: i for i, s in enumerate(labels)})
    model.load_state_dict(state["final_model"])
    model.to(device).eval()
    return TrainedTRIR(model=model, tokenizer=tokenizer, labels=labels, info={})


# --------------------------------------------------------------------------- on each worker


def _worker_loop(config: dict[str, Any]) -> None:
    """One Ray Train worker: TRIR's fine-tuning routine (:class:`~attackers.trir.fine_tuning.FineTuning`)
    with this worker's steps (:class:`WorkerSteps`: its share of each batch, a checkpoint each epoch
    from worker 0), the kept weights reported at the end."""
    import ray
    import ray.train
    import torch

    data = ray.get(config["data"])
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    torch.set_num_threads(data["threads"])
    torch.use_deterministic_algorithms(True, warn_only=True)
    attack = data["attack"](**data["params"])  # TRIRAttack, as the run made it
    tuning = FineTuning(attack, data["y"], None if data["dev"] is None else len(data["dev"][2]))
    model, resume = _worker_model(data, attack)
    if resume is not None and "final_model" in resume:  # a finished training, run again: report it as it is
        _report(rank, {"done": 1}, {**resume, "history": json.loads(resume["history"])})
        return
    optimizer, scheduler = tuning.optimizer(model, fused=data.get("fused", True))
    start = tuning.start(resume, optimizer, scheduler, lambda: _copy(model.state_dict()))
    steps = WorkerSteps(attack, _prepare(model), model, data, rank, world, (optimizer, scheduler),
                        precision=None if resume is None else resume.get("train_precision"))
    tuned = tuning.run(steps, start)
    kept = tuned.best[2] if tuned.chosen != len(tuned.history) else model.state_dict()
    _report(rank, {"done": 1}, {"final_model": kept, "history": tuned.history, "per_epoch": tuned.per_epoch,
                                "chosen_epoch": tuned.chosen, "best_accuracy": tuned.best[0],
                                "best_epoch": tuned.best[1], "stopped": tuned.stopped, "selection": tuned.selection,
                                "resumed_from_epoch": None if resume is None else resume["epoch"],
                                "train_precision": steps.precision})


def _worker_model(data: dict[str, Any], attack):
    """The classifier of this worker (same initial weights on every worker), and the checkpoint
    state it resumes from (``None``: a fresh start)."""
    import ray.train
    import torch
    from transformers import AutoModelForSequenceClassification

    from attackers.trir.encoder import quiet_transformers, resolve_base

    labels = data["labels"]
    torch.manual_seed(attack.seed)
    with quiet_transformers():  # the base as the attack names it, resolved here (a node's own MiniLM)
        model = AutoModelForSequenceClassification.from_pretrained(
            resolve_base(attack.base), num_labels=len(labels), id2label=dict(enumerate(labels)),
            label2id={s: i for i, s in enumerate(labels)})
    resume = None
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:
        resume = _load_state(checkpoint)
        if "final_model" not in resume:
            model.load_state_dict(resume["model"])
    return model, resume


def _prepare(model):
    """The model on this worker's device, with worker 0's weights (as DDP would start it).

    Not wrapped in PyTorch's DDP: DDP sums every gradient, the word embeddings' whole
    matrix included (half of MiniLM's 22.7 M parameters), although a batch touches a few hundred
    of its 30,522 rows; :class:`~attackers.trir.exchange.GradientExchange` sums those rows only,
    and the rest as DDP does.
    """
    import ray.train.torch
    import torch.distributed as dist

    model = model.to(ray.train.torch.get_device())
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        for tensor in [*model.parameters(), *model.buffers()]:
            dist.broadcast(tensor.data, src=0)
    return model


def _copy(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v.detach().clone().cpu() for k, v in state.items()}


def _report(rank: int, metrics: dict[str, Any], state: dict[str, Any]) -> None:
    """Report ``metrics`` from every worker (Ray Train's barrier) and, from worker 0, ``state``
    as the checkpoint."""
    import ray.train
    import torch

    if rank != 0:
        ray.train.report(metrics)
        return
    with tempfile.TemporaryDirectory(prefix="trir-ray-") as tmp:
        saved = {**state, "history": json.dumps(state["history"])}
        for k in ("model", "best_model", "final_model"):
            if saved.get(k) is not None:
                saved[k] = _copy(saved[k])
        torch.save(saved, Path(tmp) / STATE_FILE)
        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(tmp))


def _maybe_fail(spec: str | None, epoch: int, rank: int) -> None:
    """The test hook of :data:`FAIL_AFTER_EPOCH_ENV` (read by the run): ``EPOCH:MARKER_FILE``."""
    if not spec or rank != 0:
        return
    at, _, marker = spec.partition(":")
    if int(at) == epoch and marker and not os.path.exists(marker):
        Path(marker).write_text("failed once\n")
        time.sleep(3)  # as a real failure would come later: Ray Train has taken in the epoch's checkpoint
        raise RuntimeError(f"killed after epoch {epoch} (test hook)")


class WorkerSteps:
    """One worker's epochs (an :class:`~attackers.trir.fine_tuning.EpochSteps`): its slice of every
    batch, its share of the dev windows, in the arithmetic every worker agreed on
    (:func:`cluster_precision`; a resumed training keeps its checkpoint's, ``precision``), and
    worker 0's checkpoint after each epoch."""

    def __init__(self, attack, ddp, model, data: dict[str, Any], rank: int, world: int, steppers,
                 precision: str | None = None):
        import torch

        self.attack, self.ddp, self.model, self.data = attack, ddp, model, data
        self.rank, self.world = rank, world
        self.optimizer, self.scheduler = steppers
        self.y = torch.tensor(data["y"], dtype=torch.long)
        self.lengths = [len(w) for w in data["ids"]]
        self.device = next(ddp.parameters()).device
        agreed = cluster_precision(attack.train_precision, str(self.device), TRAIN_PRECISIONS, "train_precision",
                                   world)
        self.precision = precision or agreed
        self.predict_precision = cluster_precision(attack.predict_precision, str(self.device), PREDICT_PRECISIONS,
                                                   "predict_precision", world)
        getter = getattr(model, "get_input_embeddings", None)
        emb = getter() if callable(getter) else None
        self.embedding = getattr(emb, "weight", None)
        self.exchange = None
        if world > 1:
            from attackers.trir.exchange import GradientExchange

            self.exchange = GradientExchange(model, self.embedding, overlap=data.get("overlap", True))

    def epoch(self, epoch: int, order: list[int]) -> dict[str, Any]:
        """Train one epoch over ``order``; its history entry (the loss is the whole batch's mean)."""
        import torch
        import torch.distributed as dist

        a = self.attack
        torch.manual_seed(a.seed * 100_003 + epoch * 1_009 + self.rank)  # dropout: the same after a resume
        frozen = epoch <= a.freeze_epochs and a.freeze_layers > 0
        freeze_lower(self.model, a.freeze_layers, frozen)
        if self.exchange is not None:
            self.exchange.layout()  # the parameters that train this epoch
        size = a.batch_size
        batches = (length_batches(order, self.lengths, size, a.seed * 1000 + epoch) if a.settings()["bucket"]
                   else [order[b : b + size] for b in range(0, len(order), size)])
        self.ddp.train()
        t0 = time.time()
        total = torch.zeros(2, dtype=torch.float64)
        for batch in batches:
            part = batch[self.rank :: self.world]
            idx = part or batch[:1]  # a worker with no slice still takes part in the step, with no weight
            ids, mask = pad_batch([self.data["ids"][i] for i in idx], self.data["pad_id"])
            with autocast(self.precision, str(self.device)):  # the attack's train_precision
                logits = self.ddp(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
            losses = torch.nn.functional.cross_entropy(logits.float(), self.y[idx].to(self.device), reduction="sum")
            loss = losses * ((1.0 if part else 0.0) / len(batch))  # this slice's share of the batch's mean
            if self.exchange is not None:
                self.exchange.start(self._rows(batch))
            loss.backward()
            if self.exchange is not None:
                self.exchange.finish()
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            total += torch.tensor([float(losses.detach()) if part else 0.0, len(part)], dtype=torch.float64)
        if self.world > 1:
            dist.all_reduce(total)
        freeze_lower(self.model, a.freeze_layers, False)
        return {"epoch": epoch, "loss": round(float(total[0] / max(1.0, float(total[1]))), 5),
                "seconds": round(time.time() - t0, 2), "windows": int(total[1])}

    def _rows(self, batch: list[int]):
        """The word-embedding rows the whole batch touches (the pad token's included): the only
        rows whose gradient is not zero on some worker."""
        import torch

        ids = self.data["ids"]
        return torch.tensor(sorted({t for i in batch for t in ids[i]} | {self.data["pad_id"]}))

    def dev_accuracy(self) -> float:
        """Accuracy on the dev documents: each worker predicts its share of the windows."""
        import torch
        import torch.distributed as dist

        from attackers.trir.token_windows import predict_logits, sum_window_logits

        ids, doc, truth = self.data["dev"]
        mine = list(range(self.rank, len(ids), self.world))
        scores = torch.zeros(len(truth), len(self.data["labels"]), dtype=torch.float64)
        if mine:
            self.ddp.eval()
            sub = Windows(ids=[ids[i] for i in mine], doc=[doc[i] for i in mine], chars=[None] * len(mine))
            logits = predict_logits(self.model, sub, pad_id=self.data["pad_id"], device=str(self.device),
                                    batch_size=self.attack.predict_batch_size, progress=False,
                                    precision=self.predict_precision)
            scores += torch.from_numpy(sum_window_logits(logits, sub.doc, len(truth)))
        if self.world > 1:
            dist.all_reduce(scores)
        return float(np.mean(scores.argmax(dim=1).numpy() == np.asarray(truth)))

    def snapshot(self) -> dict[str, Any]:
        return _copy(self.model.state_dict())

    def checkpoint(self, epoch: int, history: list[dict[str, Any]], best: tuple[float, int, Any]) -> None:
        """Report the epoch from every worker, its checkpoint from worker 0 (Ray Train keeps it)."""
        entry = history[-1]
        state = {"epoch": epoch, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "scheduler": self.scheduler.state_dict(), "history": history, "best_accuracy": best[0],
                 "best_epoch": best[1], "best_model": best[2] if best[1] != epoch else None,
                 "train_precision": self.precision}
        _report(self.rank, {"epoch": epoch, "loss": entry["loss"], **({"dev_accuracy": entry["dev_accuracy"]}
                                                                       if "dev_accuracy" in entry else {})}, state)
        _maybe_fail(self.data.get("fail_after"), epoch, self.rank)
