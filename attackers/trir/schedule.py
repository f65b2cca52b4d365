"""How long the TRIR attacker trains and which epoch it keeps, counted in passes over the data.

With the window rotation (:mod:`attackers.trir.sampling`) an epoch trains on a share of each
person's windows, so an epoch is no longer a pass over the training data: with a rotation of
``P`` epochs, ``P`` epochs make one pass, in which every window is trained on once. Everything
that decides how long the attacker trains is therefore counted in **passes**, never in rotated
epochs, so that the rotation changes how often the dev release is read (every ``1/P`` of a
pass), not how much the attacker has learned when it is read:

- ``epochs`` (the budget's maximum) and ``patience`` are passes: at most ``epochs * P`` rotated
  epochs, and the training stops ``patience * P`` epochs after the last strict improvement of
  the dev accuracy (paper: 3 passes, the TRI paper's 3 epochs when nothing rotates; a patience
  of 1 pass, 3 readings under a rotation of 3, stopped the rotated attacker 17-33 points short of
  the rotation-off one on a seed of the development population);
- it never stops before :data:`MIN_PASSES` passes (every window seen twice), and never keeps an
  epoch before them, whatever a small dev release says: a dev release of 15 documents moves by 7
  points with one document, so its early readings cannot tell an undertrained attacker from a
  trained one (on the development population, seed 0, a rotation-off attacker kept its first
  pass on such a lucky reading, 0.67 then 0.50-0.58, and named the subject of 75% of the originals
  against 92% for the rotated attacker kept after 4.5 passes: benchmarks/trir_fidelity.py);
- a tie of dev accuracy goes to the **later** epoch, the better-trained one (its loss is lower
  on the training data, and the dev release cannot tell the two apart);
- a dev release of fewer than :data:`MIN_DEV_DOCUMENTS` documents does not choose: the attacker
  trains a fixed number of passes (the budget's ``fixed_passes``), as without a dev release, and
  says so; one of fewer than :data:`SMALL_DEV_DOCUMENTS` chooses, with a warning.

Issue 55 is why: counted in rotated epochs, a patience of 3 was one pass, and a 15-document dev
release ended a 50-person training after 5 rotated epochs (1.7 passes), keeping epoch 2 (two
thirds of a pass) on a tie; the attacker understated TRIR by 18-36 points on every release.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Passes over the training windows before early stopping may end the training.
MIN_PASSES = 2
#: A dev release with fewer documents than this does not choose the epoch (fixed passes instead).
MIN_DEV_DOCUMENTS = 10
#: A dev release with fewer documents than this chooses, with a warning in the result.
SMALL_DEV_DOCUMENTS = 20


@dataclass(frozen=True)
class Plan:
    """The training's length in rotated epochs, from its settings in passes.

    period: rotated epochs per pass (the longest rotation of any person; 1 without rotation).
    max_passes: the most passes (the budget's ``epochs``).
    patience: passes without a strictly better dev accuracy before stopping (``None``: never early).
    select: whether a dev release chooses the epoch (``False``: a fixed number of passes).
    fixed_passes: the passes trained when nothing chooses.
    ties: a dev accuracy that ties the best restarts the patience too (``patience_ties``).
    """

    period: int
    max_passes: int
    patience: int | None
    select: bool
    fixed_passes: int
    ties: bool = False

    @property
    def max_epochs(self) -> int:
        """The most rotated epochs the training may run."""
        passes = self.max_passes if self.select else min(self.fixed_passes, self.max_passes)
        return max(1, passes) * self.period

    @property
    def min_epochs(self) -> int:
        """Rotated epochs before early stopping may end the training (at most all of them)."""
        return min(self.max_epochs, MIN_PASSES * self.period)

    @property
    def patience_epochs(self) -> int | None:
        """Rotated epochs without improvement before stopping: the patience's passes."""
        return None if self.patience is None else self.patience * self.period

    def passes(self, epoch: int) -> float:
        """Passes over the training windows after ``epoch`` rotated epochs."""
        return round(epoch / self.period, 3)

    def keeps(self, epoch: int, accuracy: float, best_accuracy: float) -> bool:
        """Whether ``epoch``, with dev ``accuracy``, replaces the kept epoch: a dev release
        chooses, the epoch completes the minimum passes, and it is as good or better."""
        return self.select and epoch >= self.min_epochs and is_better(accuracy, best_accuracy)

    def improved_at(self, history: list[dict]) -> int:
        """The last epoch of ``history`` that may be kept whose dev accuracy was strictly better
        than every earlier such epoch (0: none yet), from which the patience counts."""
        return last_improvement([h for h in history if h["epoch"] >= self.min_epochs], self.ties)

    def stop_reason(self, epoch: int, best_accuracy: float, improved_at: int) -> str | None:
        """Why the training stops after ``epoch`` (with a dev release), or ``None`` to go on.
        ``improved_at`` is the last epoch whose dev accuracy was strictly better than every
        earlier one (ties move the kept epoch, not the patience)."""
        if not self.select or epoch >= self.max_epochs or epoch < self.min_epochs:
            return None
        if best_accuracy >= 1.0:
            return f"stopped after epoch {epoch} ({self.passes(epoch):g} passes): every dev document named"
        if self.patience is not None and epoch - improved_at >= self.patience_epochs:
            return (f"stopped after epoch {epoch} ({self.passes(epoch):g} passes): no "
                    f"{'better or equal' if self.ties else 'better'} dev accuracy for {self.patience} pass(es)")
        return None


def plan(period: int, settings: dict, dev_documents: int | None) -> Plan:
    """The plan for a training with ``settings`` (the attack's, in passes), a rotation of
    ``period`` epochs and a dev release of ``dev_documents`` documents (``None``: none)."""
    select = dev_documents is not None and dev_documents >= MIN_DEV_DOCUMENTS
    return Plan(period=max(1, int(period)), max_passes=int(settings["epochs"]), patience=settings["patience"],
                select=select, fixed_passes=int(settings["fixed_passes"]), ties=bool(settings.get("patience_ties")))


def is_better(accuracy: float, best_accuracy: float) -> bool:
    """Whether an epoch with dev ``accuracy`` replaces the kept one: better, or as good and later."""
    return accuracy >= best_accuracy


def is_improvement(accuracy: float, best_accuracy: float) -> bool:
    """Whether ``accuracy`` restarts the patience: strictly better than every earlier epoch."""
    return accuracy > best_accuracy + 1e-12


def selection_warnings(plan_: Plan, chosen_epoch: int, dev_documents: int | None) -> tuple[list[str], list[str]]:
    """What the report should say about how the epoch was chosen: doubts about the figure (the
    kept epoch saw fewer than two passes: the result's warning, so a gate is inconclusive), and
    cautions about the choice (a small dev release: a note)."""
    doubts, cautions = [], []
    if dev_documents is not None and dev_documents < MIN_DEV_DOCUMENTS:
        cautions.append(f"the dev release has {dev_documents} document(s), too few to choose an epoch (at least "
                        f"{MIN_DEV_DOCUMENTS}): the attacker trained a fixed {plan_.passes(plan_.max_epochs):g} "
                        "passes instead")
    elif dev_documents is not None and dev_documents < SMALL_DEV_DOCUMENTS:
        cautions.append(f"the dev release has only {dev_documents} documents (one moves its accuracy by "
                        f"{1 / dev_documents:.0%}): the epoch it chose may be noise; a dev release of at least "
                        f"{SMALL_DEV_DOCUMENTS} documents chooses more reliably")
    if plan_.passes(chosen_epoch) < MIN_PASSES:
        doubts.append(f"the kept epoch saw {plan_.passes(chosen_epoch):g} passes over the training windows, fewer "
                      f"than {MIN_PASSES}: the attacker may be under-trained, so this TRIR may understate the risk")
    return doubts, cautions


def last_improvement(history: list[dict], ties: bool = False) -> int:
    """The last epoch of ``history`` whose dev accuracy was strictly better than every earlier
    one (with ``ties``: or as good as the best), 0 for none, from which the patience counts."""
    best, at = -1.0, 0
    for entry in history:
        accuracy = entry.get("dev_accuracy")
        if accuracy is not None and (is_improvement(accuracy, best) or ties and accuracy >= best):
            best, at = max(best, accuracy), entry["epoch"]
    return at


def selection_record(plan_: Plan, chosen_epoch: int, dev_documents: int | None, stopped: str | None) -> dict:
    """How the epoch was chosen, for the trained attacker's record and the result's details."""
    doubts, cautions = selection_warnings(plan_, chosen_epoch, dev_documents)
    return {"chosen_epoch": chosen_epoch, "rotation_period": plan_.period, "max_epochs": plan_.max_epochs,
            "max_passes": plan_.max_passes, "patience_passes": plan_.patience,
            "patience_epochs": plan_.patience_epochs, "min_passes": MIN_PASSES, "selected_on_dev": plan_.select,
            "dev_documents": dev_documents, "chosen_passes": plan_.passes(chosen_epoch), "stopped": stopped,
            "warnings": doubts, "cautions": cautions}


def selection_note(selection: dict, trained: int, dev_name: str | None, accuracy: float) -> str:
    """The attacker's note on how its epoch was chosen, in epochs and in passes."""
    chosen = selection["chosen_epoch"]
    seen = f"epoch {chosen} ({selection['chosen_passes']:g} passes over the windows)"
    if selection["selected_on_dev"]:
        stopped = selection.get("stopped")
        return (f"{seen} of at most {selection['max_epochs']} chosen by accuracy on the dev release {dev_name!r} "
                f"({accuracy:.3f}); the release under test was not used" + (f" ({stopped})" if stopped else ""))
    why = "no dev release" if dev_name is None else f"dev release {dev_name!r} too small to choose an epoch"
    return f"{why}: trained a fixed {trained} epoch(s), {seen}, no model selection"
