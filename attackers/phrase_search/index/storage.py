"""The index on disk: three ``.npy`` arrays, ``docs.json`` and ``config.json`` (written last,
so a folder with a ``config.json`` holds a complete index). Loading memory-maps the arrays."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attackers.phrase_search.index.build import FORMAT, DocInfo
from attackers.phrase_search.index.tokenizer import TOKENIZER_NAME, Tokenizer
from audit.core.errors import AnonauditError
from audit.core.files import atomic_open, atomic_write_json

if TYPE_CHECKING:
    from attackers.phrase_search.index.query import NgramIndex


def save_index(index: NgramIndex, folder: str | os.PathLike) -> Path:
    """Write ``index`` to ``folder`` (created): three .npy arrays, docs.json, config.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").unlink(missing_ok=True)  # an interrupted save leaves no valid index
    for name, arr in (("keys", index.keys), ("offsets", index.offsets), ("postings", index.posting_docs)):
        with atomic_open(folder / f"{name}.npy", "wb") as fh:
            np.save(fh, np.asarray(arr))
    atomic_write_json(folder / "docs.json", asdict(index.docs), allow_nan=True)
    atomic_write_json(folder / "config.json", index.config, allow_nan=True)  # last: marks a complete index
    return folder


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
        raise AnonauditError(f"{folder}: unsupported index format {config.get('format')!r} (expected {FORMAT})")
    mode = "r" if mmap else None
    arrays = {name: np.load(folder / f"{name}.npy", mmap_mode=mode) for name in ("keys", "offsets", "postings")}
    docs = DocInfo(**json.loads((folder / "docs.json").read_text(encoding="utf-8")))
    keys, offsets, posts = arrays["keys"], arrays["offsets"], arrays["postings"]
    if (len(offsets) != len(keys) + 1 or int(offsets[-1]) != len(posts) or len(docs.ids) != config.get("n_docs")
            or len(keys) != config.get("n_ngrams")):
        raise AnonauditError(f"{folder}: the index files do not match each other (interrupted save?); rebuild it")
    tcfg = config["tokenizer"]
    if tcfg.get("name") != TOKENIZER_NAME:
        raise AnonauditError(f"{folder}: built with tokeniser {tcfg.get('name')!r}, "
                             f"this version uses {TOKENIZER_NAME}")
    return dict(keys=arrays["keys"], offsets=arrays["offsets"], posting_docs=arrays["postings"], docs=docs,
                max_n=int(config["max_n"]), tokenizer=Tokenizer(lowercase=bool(tcfg["lowercase"])),
                hash_mask=int(config["hash"]["hash_mask"]), config=config)
