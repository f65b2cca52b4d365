"""The index on disk: its five ``.npy`` arrays, ``docs.json`` and ``config.json`` (written last,
so a folder with a ``config.json`` holds a complete index). Loading memory-maps the arrays."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from audit.ngrams.build import FORMAT, DocInfo
from audit.ngrams.tokenizer import TOKENIZER_NAME, Tokenizer
from audit.core.errors import AnonauditError
from audit.core.files import atomic_open, atomic_write_json
from audit.runtime.integrity import seal, unseal

if TYPE_CHECKING:
    from audit.ngrams.query import NgramIndex


#: The index's arrays, each saved as ``NAME.npy``.
ARRAYS = ("directory", "keys", "first", "multi_offsets", "multi_docs")


def save_arrays(folder: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write the arrays :data:`ARRAYS` of ``arrays`` to ``folder`` (created), each atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ARRAYS:
        with atomic_open(folder / f"{name}.npy", "wb") as fh:
            np.save(fh, np.asarray(arrays[name]))


def load_arrays(folder: Path, mmap: bool, n_keys: int | None, dir_entries: int) -> dict[str, np.ndarray]:
    """The arrays :data:`ARRAYS` saved in ``folder`` (memory-mapped unless ``mmap=False``),
    checked against each other and against the ``n_keys`` keys and ``dir_entries`` directory
    entries the config gives."""
    try:
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r" if mmap else None) for name in ARRAYS}
    except (OSError, ValueError) as exc:
        raise AnonauditError(f"{folder}: unreadable index array ({exc}); rebuild the index") from None
    n = len(arrays["keys"])
    if (len(arrays["directory"]) != dir_entries + 1 or int(arrays["directory"][-1]) != n
            or len(arrays["first"]) != n or (n_keys is not None and n != n_keys)
            or int(arrays["multi_offsets"][-1]) != len(arrays["multi_docs"])):
        raise AnonauditError(f"{folder}: the index files do not match each other (interrupted save?); rebuild it")
    return arrays


def save_index(index: NgramIndex, folder: str | os.PathLike) -> Path:
    """Write ``index`` to ``folder`` (created): its .npy arrays, docs.json, config.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    unseal(folder)
    (folder / "config.json").unlink(missing_ok=True)  # an interrupted save leaves no valid index
    save_arrays(folder, {name: getattr(index, name) for name in ARRAYS})
    atomic_write_json(folder / "docs.json", asdict(index.docs), allow_nan=True)
    atomic_write_json(folder / "config.json", index.config, allow_nan=True)  # marks a complete index
    seal(folder)  # checksums last: verified before the folder is reused (audit.runtime.integrity)
    return folder


def saved_format(folder: str | os.PathLike) -> str | None:
    """The format of the index saved in ``folder`` (None if there is none, or it is unreadable)."""
    try:
        return json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")).get("format")
    except (OSError, ValueError, AttributeError):
        return None


def load_fields(folder: str | os.PathLike, *, mmap: bool = True) -> dict[str, Any]:
    """The fields of the index saved in ``folder``, checked for consistency; arrays are
    memory-mapped unless ``mmap=False``."""
    folder = Path(folder)
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise AnonauditError(f"{folder}: not an n-gram index folder (no config.json)")
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise AnonauditError(f"{cfg_path}: unreadable index config ({exc})") from None
    if config.get("format") != FORMAT:
        raise AnonauditError(f"{folder}: unsupported index format {config.get('format')!r} (this version reads "
                             f"{FORMAT}); rebuild the index")
    hash_bits = int(config["hash"]["hash_bits"])
    arrays = load_arrays(folder, mmap, config.get("n_ngrams"), 1 << (hash_bits - 32))
    docs = DocInfo(**json.loads((folder / "docs.json").read_text(encoding="utf-8")))
    if len(docs.ids) != config.get("n_docs"):
        raise AnonauditError(f"{folder}: the index files do not match each other (interrupted save?); rebuild it")
    tcfg = config["tokenizer"]
    if tcfg.get("name") != TOKENIZER_NAME:
        raise AnonauditError(f"{folder}: built with tokeniser {tcfg.get('name')!r}, "
                             f"this version uses {TOKENIZER_NAME}")
    return dict(**arrays, docs=docs, max_n=int(config["max_n"]), tokenizer=Tokenizer(lowercase=bool(tcfg["lowercase"])),
                hash_bits=hash_bits, config=config)
