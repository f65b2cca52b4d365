"""A TRIR training's checkpoint after every epoch, so that a killed training resumes from its
last finished epoch and trains the same attacker as one that was never interrupted.

A checkpoint is a folder named after the trained attacker's cache key (a checkpoint of another
configuration or background is never resumed) under the user's ``checkpoint_dir`` or
``ANONAUDIT_HOME/trir/checkpoints``. It holds ``state.pt`` (the model's, the optimizer's and the
learning-rate schedule's states, torch's random state, the best epoch's weights when they are
not the last epoch's, and the history so far) and is written through a temporary folder renamed
at the end, sealed (:func:`audit.runtime.integrity.seal`), owner-only: a half-written, corrupt or
changed checkpoint is never resumed (the training starts again, and says so). It is read with
``torch.load(weights_only=True)``: tensors and plain values only, never code.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from audit.core.config import make_private, record

STATE_FILE = "state.pt"


class Checkpoint:
    """The checkpoint of one training (``key``: the trained attacker's cache key) in ``root``."""

    def __init__(self, root: str | os.PathLike[str], key: str):
        self.root = Path(root)
        self.key = key
        self.folder = self.root / key[:24]

    def load(self) -> dict[str, Any] | None:
        """The last finished epoch's state, or ``None`` when there is none to trust."""
        import torch

        from audit.runtime.integrity import rebuild_message, verify

        if not (self.folder / STATE_FILE).is_file():
            return None
        problem = verify(self.folder)
        if problem is None:
            try:
                state = torch.load(self.folder / STATE_FILE, map_location="cpu", weights_only=True)
                if state.get("key") == self.key:
                    state["history"] = json.loads(state["history"])
                    return state
                problem = "it belongs to another training"
            except Exception as exc:  # noqa: BLE001 - an unreadable checkpoint is retrained, not fatal
                problem = f"unreadable: {exc}"
        print(f"    TRIR: {rebuild_message('the training checkpoint', self.folder, problem)} from epoch 1",
              file=sys.stderr, flush=True)
        return None

    def save(self, state: dict[str, Any]) -> None:
        """Replace the checkpoint with ``state`` (its ``history`` a list of dicts)."""
        import torch

        from audit.core.files import sweep_temporaries, temporary_prefix
        from audit.runtime.integrity import seal

        self.root.mkdir(parents=True, exist_ok=True)
        make_private(self.root)
        record(self.root)  # anonaudit's: `cache clear` may remove it
        sweep_temporaries(self.root)  # half-written checkpoints of killed runs
        tmp = Path(tempfile.mkdtemp(prefix=temporary_prefix(self.folder.name), suffix=".tmp", dir=self.root))
        try:
            torch.save({**state, "key": self.key, "history": json.dumps(state["history"])}, tmp / STATE_FILE)
            seal(tmp)
            for f in [tmp, *tmp.rglob("*")]:  # it has learnt the background: owner only
                make_private(f)
            if self.folder.exists():
                shutil.rmtree(self.folder)
            os.replace(tmp, self.folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def remove(self) -> None:
        """Remove the checkpoint, Ray Train's too (and their root, when that is left empty)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.rmtree(self.root / f"ray-{self.key[:24]}", ignore_errors=True)
        try:
            self.root.rmdir()
        except OSError:
            pass
