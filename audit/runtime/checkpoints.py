"""A training's checkpoint: one format, whether the training runs here or on Ray Train.

A checkpoint is a folder holding ``state.pt`` (what the component's training loop saves after an
epoch: weights, optimizer, schedule, random state, history; tensors and plain values only, read
with ``torch.load(weights_only=True)``, never code) plus the training's ``key`` (the hash of
everything that decides the trained model) and ``trainer`` (where it trained: ``local``, or
``ray-train:WORKERSxTHREADS``), sealed (:func:`audit.runtime.integrity.seal`) and owner-only.
Here it is written whole or not at all (:func:`audit.runtime.folders.sealed_folder`) as
``ROOT/KEY[:24]``; on Ray Train, worker 0 writes the same folder and Ray Train keeps it in its
storage (:mod:`audit.pipeline.ray_train`).

Reading one (:func:`read_state`): a half-written, corrupt or changed checkpoint is not trusted
(the training starts again from epoch 1, and says so); a sound checkpoint of another training
(another configuration, or written by the other path, local or Ray) is refused with an
:class:`~audit.core.errors.AnonauditError` that says what differs and what to do: it is never
resumed, and never silently replaced.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from audit.core.config import make_private
from audit.core.errors import AnonauditError

STATE_FILE = "state.pt"


def write_state(folder: Path, state: dict[str, Any], *, key: str, trainer: str) -> None:
    """``state`` (its ``history`` a list of dicts) into ``folder/state.pt``, with its identity."""
    import torch

    torch.save({**state, "key": key, "trainer": trainer, "history": json.dumps(state.get("history", []))},
               folder / STATE_FILE)


def read_state(folder: Path, *, key: str, trainer: str) -> dict[str, Any] | None:
    """The state :func:`write_state` wrote in ``folder`` (sealed) for the training ``key`` on
    ``trainer``; ``None`` when there is none to trust (said on stderr); refused when it is
    another training's (see the module doc)."""
    import torch

    from audit.runtime.integrity import rebuild_message, verify

    if not (folder / STATE_FILE).is_file():
        return None
    problem = verify(folder)
    if problem is None:
        try:
            state = torch.load(folder / STATE_FILE, map_location="cpu", weights_only=True)
            state["history"] = json.loads(state["history"])
        except Exception as exc:  # noqa: BLE001 - an unreadable checkpoint is retrained, not fatal
            problem = f"unreadable: {exc}"
        else:
            _refuse_another(folder, state, key, trainer)
            return state
    print(f"    {rebuild_message('the training checkpoint', folder, problem)} from epoch 1", file=sys.stderr,
          flush=True)
    return None


def _refuse_another(folder: Path, state: dict[str, Any], key: str, trainer: str) -> None:
    theirs = str(state.get("trainer") or "local")
    if state.get("key") == key and theirs == trainer:
        return
    why = (f"it was written by a training on {theirs} and this one trains on {trainer}" if theirs != trainer
           else "it was written by a training of another configuration or on other data (its key "
                f"{str(state.get('key'))[:12]}..., this training's {key[:12]}...)")
    raise AnonauditError(f"the training checkpoint {folder} belongs to another training: {why}. It is never "
                         "resumed: remove that folder, or give checkpoint_dir a folder of its own for this training")


class Checkpoint:
    """The checkpoint of the training ``key`` on ``trainer``, in ``root`` (``ROOT/KEY[:24]``)."""

    def __init__(self, root: str | os.PathLike[str], key: str, trainer: str = "local"):
        self.root = Path(root)
        self.key = key
        self.trainer = trainer
        self.folder = self.root / key[:24]

    def load(self) -> dict[str, Any] | None:
        """The last finished epoch's state, ``None`` when there is none to trust (see
        :func:`read_state`)."""
        return read_state(self.folder, key=self.key, trainer=self.trainer)

    def save(self, state: dict[str, Any]) -> None:
        """Replace the checkpoint with ``state``, whole or not at all."""
        from audit.runtime.folders import sealed_folder

        self.root.mkdir(parents=True, exist_ok=True)
        make_private(self.root)
        with sealed_folder(self.folder) as tmp:
            write_state(tmp, state, key=self.key, trainer=self.trainer)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
