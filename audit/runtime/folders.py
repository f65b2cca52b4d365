"""The folders of a training, owned by the engine: scratch folders and sealed, atomic saves.

A component never calls :mod:`tempfile` itself (issue 71). It asks for:

- :func:`scratch`: a scratch folder for the duration of a ``with`` block (a masked-LM's weights
  between pre-training and fine-tuning, a trained attacker's files on their way between
  processes), made under the component's work folder when it has one, removed at the end
  whatever happens;
- :func:`sealed_folder`: a folder written whole or not at all (a trained attacker, a training's
  checkpoint): written into a temporary folder beside it, sealed
  (:func:`audit.runtime.integrity.seal`), made owner-only, then renamed onto the folder, so that
  an interrupted save never leaves half a folder to be reused;
- :func:`writable`: a folder the user names for such saves, checked before any work.

One training's folders together are a :class:`audit.runtime.trainer.Workspace`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from audit.core.config import make_private, record
from audit.core.errors import AnonauditError

#: The scratch folders' parent inside a work folder (removed when left empty).
SCRATCH = ".scratch"


def new_scratch(prefix: str, work_dir: str | os.PathLike[str] | None = None) -> Path:
    """A new owner-only scratch folder, under ``work_dir``'s :data:`SCRATCH` folder when given,
    else in the system's temporary folder; the caller removes it (:func:`remove_scratch`)."""
    if work_dir is None:
        return Path(tempfile.mkdtemp(prefix=prefix))
    parent = Path(work_dir) / SCRATCH
    for _ in range(2):  # another process may remove the parent, left empty, in between: try again
        parent.mkdir(parents=True, exist_ok=True)
        make_private(parent)
        with contextlib.suppress(FileNotFoundError):
            return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def remove_scratch(folder: str | os.PathLike[str]) -> None:
    """Remove a :func:`new_scratch` folder with what it holds (and its :data:`SCRATCH` parent
    when that is left empty)."""
    folder = Path(folder)
    shutil.rmtree(folder, ignore_errors=True)
    if folder.parent.name == SCRATCH:
        with contextlib.suppress(OSError):
            folder.parent.rmdir()


@contextlib.contextmanager
def scratch(prefix: str, work_dir: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """A :func:`new_scratch` folder for the ``with`` block, removed when it ends whatever happens."""
    folder = new_scratch(prefix, work_dir)
    try:
        yield folder
    finally:
        remove_scratch(folder)


@contextlib.contextmanager
def sealed_folder(folder: str | os.PathLike[str]) -> Iterator[Path]:
    """Write ``folder`` whole or not at all: the block writes into the yielded temporary folder
    beside it; when it ends without an error the temporary is sealed, made owner-only (what is
    saved has learnt from documents) and renamed onto ``folder`` (replacing it), and ``folder``
    is recorded as anonaudit's (``cache clear`` may remove it). Temporaries of killed writers
    beside it are swept first."""
    from audit.core.files import sweep_temporaries, temporary_prefix
    from audit.runtime.integrity import seal

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    sweep_temporaries(folder.parent)
    tmp = Path(tempfile.mkdtemp(prefix=temporary_prefix(folder.name), suffix=".tmp", dir=folder.parent))
    try:
        yield tmp
        seal(tmp)
        for f in [tmp, *tmp.rglob("*")]:
            make_private(f)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
        record(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def writable(folder: Path, option: str) -> None:
    """Before any work: ``folder`` can be made and written (an :class:`AnonauditError` naming
    ``option`` and the fix otherwise)."""
    from audit.core.files import folder_problem

    if why := folder_problem(folder):
        raise AnonauditError(f"{option} {folder}: {why}: name a folder this process can write to, or leave "
                             f"{option} out to keep the checkpoints in the cache")
