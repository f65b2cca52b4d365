"""TRIR's one training routine, run here or on each Ray Train worker.

A training has three parts, each written once and run wherever the engine runs the training
(:meth:`attackers.trir.training.TRIRTraining.train_attacker` hands it to the run's executor:
here, or data-parallel on Ray Train, :mod:`audit.runtime.trainer`):

1. what it reads, prepared once by the run's process: the tokenizer, the training texts and
   windows, the dev windows (:meth:`~attackers.trir.training.TRIRTraining.training_data`, a
   :class:`TrainingData`);
2. the epochs (:class:`FineTuning`): the epoch sampler, the plan of passes and early stopping
   (:mod:`attackers.trir.schedule`), the optimizer and its schedule, the resume from a
   checkpoint, the choice of the best epoch on the dev release; what one epoch does is an
   :class:`EpochSteps`, written once and world-size aware (:class:`attackers.trir.steps.Steps`:
   one worker's slice of every batch, the whole batch when it is the only worker, the
   gradients summed across the workers when there are several);
3. the record, with the fit check, written by the run's process
   (:meth:`~attackers.trir.training.TRIRTraining.training_record`).
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from attackers.trir.sampling import epoch_sampler, rotation_period
from attackers.trir.schedule import plan, selection_note, selection_record
from attackers.trir.token_windows import Windows

if TYPE_CHECKING:
    from audit.core.data import Release

log = logging.getLogger(__name__)

#: No epoch kept yet: (dev accuracy, epoch, its weights).
NO_BEST: tuple[float, int, Any] = (-1.0, 0, None)


@dataclass
class TrainingData:
    """What a training reads, prepared once by the run's process: the tokenizer, the people (one
    class each, sorted), the training texts (with masked copies and curation), their windows
    (de-duplicated) and classes, the dev release's windows and classes, and the notes of the
    preparation (of the texts, then of the windows: a masked-LM pre-training notes between)."""

    tokenizer: Any
    labels: list[str]
    texts: list[str]
    windows: Windows
    y: list[int]
    all_windows: int
    dev_set: tuple[Windows, np.ndarray] | None
    text_notes: list[str] = field(default_factory=list)
    window_notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    @property
    def label_of(self) -> dict[str, int]:
        return {s: i for i, s in enumerate(self.labels)}

    @property
    def pad_id(self) -> int:
        return self.tokenizer.pad_token_id or 0

    @property
    def dev_documents(self) -> int | None:
        return None if self.dev_set is None else len(self.dev_set[1])


class EpochSteps(Protocol):
    """What one epoch does, where the training runs."""

    def epoch(self, epoch: int, order: list[int]) -> dict[str, Any]:
        """Train one epoch on the windows ``order`` names; its history entry (``epoch``, ``loss``,
        ``seconds``, ``windows``, ...)."""

    def dev_accuracy(self) -> float:
        """The share of the dev documents whose subject the model names now."""

    def snapshot(self) -> dict[str, Any]:
        """A copy of the model's weights now (the best epoch's, kept)."""

    def checkpoint(self, epoch: int, history: list[dict[str, Any]], best: tuple[float, int, Any]) -> None:
        """Keep what a resume needs after ``epoch`` (or nothing)."""


@dataclass
class Start:
    """Where the epochs start: the history so far, the best epoch so far and the first epoch to train."""

    history: list[dict[str, Any]] = field(default_factory=list)
    best: tuple[float, int, Any] = NO_BEST
    epoch: int = 1


@dataclass
class FineTuned:
    """The epochs' outcome: one history entry per epoch, the epoch kept, the windows of an epoch,
    how the epoch was chosen (:func:`attackers.trir.schedule.selection_record`), the best epoch
    (dev accuracy, epoch, weights) and why the training stopped early (``None``: it did not)."""

    history: list[dict[str, Any]]
    chosen: int
    per_epoch: int
    selection: dict[str, Any]
    best: tuple[float, int, Any] = NO_BEST
    stopped: str | None = None

    def note(self, dev: Release | None) -> str:
        """The record's sentence on the epoch choice."""
        return selection_note(self.selection, len(self.history), None if dev is None else dev.name, self.best[0])


class FineTuning:
    """The epochs of one training of ``attack`` (its parameters and settings) on windows of
    classes ``y``, with ``dev_documents`` dev documents to choose the epoch (``None``: no dev
    release): which windows each epoch trains on, for how many epochs, with which optimizer, and
    which epoch is kept. Run the same here and on every Ray Train worker."""

    def __init__(self, attack, y: list[int], dev_documents: int | None):
        cfg = attack.settings()
        self.attack, self.dev_documents = attack, dev_documents
        self.next_order, self.per_epoch = epoch_sampler(y, attack.seed, rotation=cfg["window_rotation"],
                                                        max_per_class=attack.max_windows_per_class,
                                                        min_share=attack.batch_size)
        period = rotation_period(y, cfg["window_rotation"], attack.max_windows_per_class, attack.batch_size)
        self.plan = plan(period, cfg, dev_documents)

    @property
    def epochs(self) -> int:
        return self.plan.max_epochs

    def optimizer(self, model, fused: bool = False):
        """AdamW with a linear warm-up over 6% of the steps, then linear decay to zero;
        ``fused``: torch's one-kernel AdamW (the same update up to rounding, ~7x faster on a CPU)."""
        import torch

        a = self.attack
        total_steps = math.ceil(self.per_epoch / a.batch_size) * self.epochs
        optimizer = torch.optim.AdamW(model.parameters(), lr=a.learning_rate, weight_decay=a.weight_decay,
                                      **({"fused": True} if fused else {}))
        warmup = max(1, int(0.06 * total_steps))
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total_steps - s) / max(1, total_steps - warmup))))
        return optimizer, scheduler

    def start(self, resume: dict[str, Any] | None, optimizer, scheduler, snapshot) -> Start:
        """Where the epochs start: after the checkpoint's epoch when resuming from ``resume`` (the
        optimizer and schedule restored; ``snapshot()``: the weights now, the best epoch's when it
        is the checkpoint's), else at the first."""
        if resume is None:
            return Start()
        optimizer.load_state_dict(resume["optimizer"])
        scheduler.load_state_dict(resume["scheduler"])
        best_model = resume.get("best_model")
        if best_model is None and resume["best_epoch"] == resume["epoch"]:  # the best epoch is the last one
            best_model = snapshot()
        history = resume["history"]
        return Start(json.loads(history) if isinstance(history, str) else list(history),
                     (float(resume["best_accuracy"]), int(resume["best_epoch"]), best_model), resume["epoch"] + 1)

    def run(self, steps: EpochSteps, start: Start | None = None) -> FineTuned:
        """Train for the plan's passes; with a dev release that chooses, stop ``patience`` passes
        after the last better dev accuracy (never before two passes) and keep the best epoch (a
        tie: the later one). A resumed run (``start``) draws the finished epochs' orders again, so
        that the sampler is where it was, and trains from the epoch after them."""
        start = start or Start()
        a, the_plan = self.attack, self.plan
        for _ in range(start.epoch - 1):
            self.next_order()
        history, best = list(start.history), start.best
        stopped = the_plan.stop_reason(history[-1]["epoch"], best[0], the_plan.improved_at(history)) if history else None
        for epoch in range(start.epoch, self.epochs + 1):
            if stopped:
                break
            entry = steps.epoch(epoch, self.next_order())
            entry["passes"] = the_plan.passes(epoch)
            if epoch <= a.freeze_epochs and a.freeze_layers > 0:
                entry["frozen_layers"] = a.freeze_layers
            if self.dev_documents is not None:
                entry["dev_accuracy"] = round(steps.dev_accuracy(), 5)
                if the_plan.keeps(epoch, entry["dev_accuracy"], best[0]):
                    best = (entry["dev_accuracy"], epoch, steps.snapshot())
            history.append(entry)
            say_epoch(a.progress, entry, self.epochs, best if the_plan.select else None)
            steps.checkpoint(epoch, history, best)
            stopped = the_plan.stop_reason(epoch, best[0], the_plan.improved_at(history))
        chosen = best[1] if the_plan.select and best[2] is not None else len(history)
        return FineTuned(history, chosen, self.per_epoch, selection_record(the_plan, chosen, self.dev_documents, stopped),
                         best, stopped)


def say_epoch(progress: bool, entry: dict[str, Any], epochs: int, best: tuple[float, int, Any] | None) -> None:
    """One line per epoch (stderr, with ``progress``): its loss, dev accuracy and time."""
    log.info("TRIR epoch %s: %s", entry["epoch"], entry)
    if not progress:
        return
    line = f"    TRIR epoch {entry['epoch']}/{epochs}: loss {entry['loss']:.4f}"
    if "passes" in entry and entry["passes"] != entry["epoch"]:
        line += f" ({entry['passes']:g} passes)"
    if "dev_accuracy" in entry:
        line += f", dev accuracy {entry['dev_accuracy']:.3f}"
        line += (" (not choosing: too few dev documents)" if best is None else
                 " (no candidate before two passes)" if best[1] == 0 else f" (best {best[0]:.3f}, epoch {best[1]})")
    print(f"{line}, {entry['seconds']:.0f} s", file=sys.stderr, flush=True)
