"""TRIR's fine-tuning loop and its one epoch step, wherever the training runs (issue 71).

:func:`fine_tune` is the training loop the engine runs (:mod:`audit.runtime.trainer`): in this
process on the local executor, or on every Ray Train worker on the Ray executor. It reads where
it runs from its context (``rank`` of ``world`` workers, ``device``, ``distributed``) and never
imports Ray. :class:`Steps` is the one epoch step (an
:class:`~attackers.trir.fine_tuning.EpochSteps`), world-size aware:

- every worker takes the same batches of the same epochs (same order, same learning-rate
  schedule) and trains on its slice of each batch (worker ``r`` of ``w``: ``batch[r::w]``; one
  worker: the whole batch); its loss is its slice's share of the whole batch's mean, so that the
  gradients summed across the workers (:class:`~attackers.trir.exchange.GradientExchange`, with
  more than one worker) are those of the whole batch;
- the dev accuracy is computed data-parallel too (each worker predicts its share of the dev
  windows; the scores are summed), so every worker takes the same early-stopping decision;
- the arithmetic is agreed by the workers (:func:`cluster_precision`: each resolves ``auto`` on
  its own device), and a resumed training keeps its checkpoint's;
- dropout draws continue torch's random stream, seeded once: worker 0's is a local training's
  (seeded before the model is made), worker ``r > 0`` seeds its own once after it; the checkpoint
  keeps every worker's state (Ray Train restarts a dead worker in a new process, from the
  checkpoint alone), so that one worker on Ray Train trains bit for bit the local attacker, and a
  resumed training the uninterrupted one;
- after each epoch the state (weights, optimizer, schedule, random state, history, best epoch,
  what happened before fine-tuning) goes to the context's checkpoint: one format on both paths.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attackers.trir.encoder import PREDICT_PRECISIONS, TRAIN_PRECISIONS, autocast, resolve_precision
from attackers.trir.fine_tuning import FineTuning
from attackers.trir.token_windows import Windows, pad_batch, predict_logits, sum_window_logits
from attackers.trir.training_batches import freeze_lower, length_batches

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FineTuneJob:
    """What :func:`fine_tune` reads on every worker: the attack (``attack``, here) or its class and
    parameters (``attack_class``, ``params``: rebuilt on a Ray Train worker), the model to start
    from (``model_path``: the base or its masked-LM pre-trained copy; ``None``: the attack's base
    as the worker resolves it), the people (``labels``), the training windows' token ids and
    classes, the pad token, the dev windows ``(ids, doc, truth)`` or ``None``, what happened
    before fine-tuning (``pre``: kept in the checkpoint), and the step's switches: torch's fused
    AdamW, and the gradient exchange overlapped with the backward pass."""

    labels: list[str]
    ids: list[list[int]]
    y: list[int]
    pad_id: int
    dev: tuple[list[list[int]], list[int], list[int]] | None
    attack: Any = None
    attack_class: type | None = None
    params: dict[str, Any] = field(default_factory=dict)
    model_path: str | None = None
    pre: dict[str, Any] = field(default_factory=lambda: {"pretrained": False, "mlm_losses": [], "notes": []})
    fused: bool = False
    overlap: bool = True

    def make_attack(self):
        return self.attack if self.attack is not None else self.attack_class(**self.params)


def fine_tune(ctx, job: FineTuneJob) -> dict[str, Any]:
    """The training loop (see the module doc): the kept weights and the epochs' record."""
    import torch

    attack = job.make_attack()
    resume = ctx.resume()
    model = _classifier(attack, job, resume)
    model = ctx.place(model)
    tuning = FineTuning(attack, job.y, None if job.dev is None else len(job.dev[2]))
    optimizer, scheduler = tuning.optimizer(model, fused=job.fused)
    steps = Steps(attack, model, job, ctx, (optimizer, scheduler), tuning.epochs,
                  precision=None if resume is None else resume.get("train_precision"))
    start = tuning.start(resume, optimizer, scheduler, steps.snapshot)
    if ctx.rank > 0:  # its own dropout stream, seeded once (worker 0's is the local training's)
        torch.manual_seed(attack.seed * 100_003 + ctx.rank)
    if resume is not None:
        _restore_rng(resume, ctx.rank, ctx.world)
    tuned = tuning.run(steps, start)
    if steps.exchange is not None:
        steps.exchange.close()
    kept = tuned.best[2] if tuned.chosen != len(tuned.history) else model.state_dict()
    return {"final_model": kept, "history": tuned.history, "per_epoch": tuned.per_epoch, "chosen_epoch": tuned.chosen,
            "best_accuracy": tuned.best[0], "best_epoch": tuned.best[1], "stopped": tuned.stopped,
            "selection": tuned.selection, "resumed_from_epoch": None if resume is None else resume["epoch"],
            "train_precision": steps.precision, "pre": job.pre if resume is None else resume["pre"]}


def _classifier(attack, job: FineTuneJob, resume: dict[str, Any] | None):
    """The classifier to fine-tune: ``job.model_path`` (or the attack's base, resolved here) with
    a new head of one class per person, seeded (the same on every worker), with the checkpoint's
    weights when resuming."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from attackers.trir.encoder import quiet_transformers, resolve_base

    path = job.model_path if job.model_path is not None else resolve_base(attack.base)
    labels = job.labels
    torch.manual_seed(attack.seed)
    with quiet_transformers():
        model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=len(labels), id2label=dict(enumerate(labels)),
            label2id={s: i for i, s in enumerate(labels)})
    if resume is not None:
        model.load_state_dict(resume["model"])
    return model


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


class Steps:
    """The epochs of one worker (see the module doc): ``ctx`` says where it runs, ``steppers``
    are the optimizer and its schedule, ``epochs`` the plan's (for the progress line),
    ``precision`` a resumed training's arithmetic."""

    def __init__(self, attack, model, job: FineTuneJob, ctx, steppers, epochs: int, precision: str | None = None):
        import torch

        self.attack, self.model, self.job, self.ctx, self.epochs = attack, model, job, ctx, epochs
        self.rank, self.world = ctx.rank, ctx.world
        self.optimizer, self.scheduler = steppers
        self.y = torch.tensor(job.y, dtype=torch.long)
        self.lengths = [len(w) for w in job.ids]
        self.device = str(next(model.parameters()).device)
        agreed = cluster_precision(attack.train_precision, self.device, TRAIN_PRECISIONS, "train_precision",
                                   self.world)
        self.precision = precision or agreed
        self.predict_precision = cluster_precision(attack.predict_precision, self.device, PREDICT_PRECISIONS,
                                                   "predict_precision", self.world)
        getter = getattr(model, "get_input_embeddings", None)
        emb = getter() if callable(getter) else None
        self.embedding = getattr(emb, "weight", None)
        self.exchange = None
        if self.world > 1:
            from attackers.trir.exchange import GradientExchange

            self.exchange = GradientExchange(model, self.embedding, overlap=job.overlap)

    def _batches(self, epoch: int, order: list[int]) -> list[list[int]]:
        a, size = self.attack, self.attack.batch_size
        if a.settings()["bucket"]:
            return [list(b) for b in length_batches(order, self.lengths, size, a.seed * 1000 + epoch)]
        return [order[b : b + size] for b in range(0, len(order), size)]

    def epoch(self, epoch: int, order: list[int]) -> dict[str, Any]:
        """Train one epoch over ``order``; its history entry (the loss is the whole batch's mean),
        the lower layers frozen in the first ``freeze_epochs``."""
        import torch
        import torch.distributed as dist

        from audit.runtime.progress import bar as progress_bar

        a = self.attack
        freeze_lower(self.model, a.freeze_layers, epoch <= a.freeze_epochs and a.freeze_layers > 0)
        if self.exchange is not None:
            self.exchange.layout()  # the parameters that train this epoch
        self.model.train()
        t0 = time.time()
        total = torch.zeros(3, dtype=torch.float64)  # loss summed, windows, padded tokens
        bar = progress_bar(self._batches(epoch, order), desc=f"TRIR training, epoch {epoch}/{self.epochs}",
                           unit="batch", enabled=a.progress and self.rank == 0)
        for batch in bar:
            total += self._step(batch)
        bar.close()
        if self.world > 1:
            dist.all_reduce(total)
        freeze_lower(self.model, a.freeze_layers, False)
        return {"epoch": epoch, "loss": round(float(total[0] / max(1.0, float(total[1]))), 5),
                "seconds": round(time.time() - t0, 2), "windows": int(total[1]), "padded_tokens": int(total[2])}

    def _step(self, batch: list[int]):
        """One optimizer step on this worker's slice of ``batch``; its summed loss, windows, tokens."""
        import torch

        part = batch[self.rank :: self.world]
        idx = part or batch[:1]  # a worker with no slice still takes part in the step, with no weight
        ids, mask = pad_batch([self.job.ids[i] for i in idx], self.job.pad_id)
        with autocast(self.precision, self.device):
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
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
        return torch.tensor([float(losses.detach()) if part else 0.0, len(part), ids.numel() if part else 0],
                            dtype=torch.float64)

    def _rows(self, batch: list[int]):
        """The word-embedding rows the whole batch touches (the pad token's included): the only
        rows whose gradient is not zero on some worker."""
        import torch

        return torch.tensor(sorted({t for i in batch for t in self.job.ids[i]} | {self.job.pad_id}))

    def dev_accuracy(self) -> float:
        """Share of the dev documents whose subject the model names (summed window logits): each
        worker predicts its share of the windows."""
        import torch
        import torch.distributed as dist

        ids, doc, truth = self.job.dev
        mine = list(range(self.rank, len(ids), self.world))
        scores = torch.zeros(len(truth), len(self.job.labels), dtype=torch.float64)
        if mine:
            self.model.eval()
            sub = Windows(ids=[ids[i] for i in mine], doc=[doc[i] for i in mine], chars=[None] * len(mine))
            logits = predict_logits(self.model, sub, pad_id=self.job.pad_id, device=self.device,
                                    batch_size=self.attack.predict_batch_size,
                                    progress=self.attack.progress and self.rank == 0, desc="TRIR dev",
                                    precision=self.predict_precision)
            scores += torch.from_numpy(sum_window_logits(logits, sub.doc, len(truth)))
        if self.world > 1:
            dist.all_reduce(scores)
        return float(np.mean(scores.argmax(dim=1).numpy() == np.asarray(truth)))

    def snapshot(self) -> dict[str, Any]:
        return {k: v.detach().clone().cpu() for k, v in self.model.state_dict().items()}

    def checkpoint(self, epoch: int, history: list[dict[str, Any]], best: tuple[float, int, Any]) -> None:
        """The state after ``epoch`` to the context's checkpoint (one format, :mod:`audit.runtime.checkpoints`)."""
        import torch

        entry = history[-1]
        state = {"epoch": epoch, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "scheduler": self.scheduler.state_dict(), "rng": torch.get_rng_state(), "cuda_rng": _cuda_rng(),
                 "history": history, "best_accuracy": best[0], "best_epoch": best[1],
                 "best_model": best[2] if best[2] is not None and best[1] != epoch else None,
                 "train_precision": self.precision, "pre": self.job.pre}
        if self.world > 1:  # every worker's random state (a collective: every worker checkpoints)
            import torch.distributed as dist

            states: list[Any] = [None] * self.world
            dist.all_gather_object(states, {"cpu": torch.get_rng_state(), "cuda": _cuda_rng()})
            state["worker_rngs"] = states
        self.ctx.save(state, {"epoch": epoch, "loss": entry["loss"],
                              **({"dev_accuracy": entry["dev_accuracy"]} if "dev_accuracy" in entry else {})})


def _restore_rng(resume: dict[str, Any], rank: int, world: int) -> None:
    """This worker's random state from ``resume`` (worker 0 alone: ``rng`` and ``cuda_rng``, as a
    local training keeps them; several: ``worker_rngs[rank]``)."""
    import torch

    from audit.core.errors import AnonauditError

    if world == 1:
        cpu, cuda = resume["rng"], resume.get("cuda_rng")
    else:
        states = resume.get("worker_rngs")
        if not states or len(states) != world:
            raise AnonauditError("TRIR resume: the training's checkpoint holds no random state for each of its "
                                 f"{world} workers (written by an older anonaudit); it is not resumed: remove its ray-* "
                                 "folder (under checkpoint_dir, or the attacker cache's checkpoints) to train again")
        cpu, cuda = states[rank]["cpu"], states[rank]["cuda"]
    torch.set_rng_state(cpu)
    _restore_cuda_rng(cuda)


def _cuda_rng() -> list | None:
    """The GPUs' random states when training used one (dropout on a GPU draws from them, not from
    the CPU's), so that a training resumed on a GPU draws what the uninterrupted one would."""
    import torch

    return torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None


def _restore_cuda_rng(states: list | None) -> None:
    """Restore :func:`_cuda_rng`'s states where the same number of GPUs is there; a checkpoint
    written on a CPU (``None``) or resumed on other hardware keeps the seeded draws (warned)."""
    import torch

    if states is None:
        return
    if not torch.cuda.is_available() or torch.cuda.device_count() != len(states):
        log.warning("TRIR resume: the checkpoint holds the random state of %d GPU(s) and this machine has %d; "
                    "dropout draws differ from the uninterrupted training", len(states),
                    torch.cuda.device_count() if torch.cuda.is_available() else 0)
        return
    torch.cuda.set_rng_state_all(states)
