"""The base encoder of the TRIR attacker, quiet, repeatable torch/transformers settings, and the
arithmetic (fp32, bf16 autocast, dynamic int8) of its training and prediction."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from audit.core.errors import AnonauditError
from audit.runtime.cpu import native_bf16


def resolve_base(base: str | None) -> str:
    """A local Hugging Face encoder folder: the embedded MiniLM by default (``None``,
    ``"minilm"``), or a path to a folder with a ``config.json``. Nothing is downloaded."""
    from audit.models.specs import embedder_path

    path = embedder_path(None if base is None or base.lower() in {"default", "all-minilm-l6-v2"} else base)
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise AnonauditError(f"{base}: not a Hugging Face model folder (no config.json)")
    return path


def folder_digest(path: str) -> str:
    """sha256 over the content of the files that define a model (config, tokenizer, weights),
    never their path: the same base installed in two environments gives the same key."""
    from audit.models.specs import content_digest

    h = hashlib.sha256()
    root = Path(path)
    for f in sorted(root.iterdir()):
        if not f.is_file() or f.name.startswith(".") or f.suffix in {".md", ".txt"} and f.name != "vocab.txt":
            continue
        h.update(f"{f.name}:{content_digest(f)}\n".encode())
    return h.hexdigest()


def has_mlm_head(path: str) -> bool:
    """Whether the checkpoint at ``path`` carries a masked-LM head (per its config)."""
    with open(os.path.join(path, "config.json"), encoding="utf-8") as fh:
        archs = json.load(fh).get("architectures") or []
    return any("MaskedLM" in a or a.endswith("ForPreTraining") for a in archs)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' warnings and progress bars off for the duration, then restored."""
    from transformers.utils import logging as hf_logging

    old = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(old)
        if bars:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def torch_settings(seed: int, device: str, num_threads: int | None) -> Iterator[None]:
    """Seed everything and make CPU kernels deterministic for the duration, then restore."""
    import torch

    old_threads = torch.get_num_threads()
    old_det = torch.are_deterministic_algorithms_enabled()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if device == "cpu":
        # A fixed thread count (torch's default unless given): results are bitwise
        # repeatable only with the same count, so it must not depend on machine load.
        if num_threads:
            torch.set_num_threads(num_threads)
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(old_det)


# --------------------------------------------------------------------------- arithmetic

#: The arithmetic of the training steps (``train_precision``) and of prediction
#: (``predict_precision``: every release, the dev release each epoch, the fit check).
TRAIN_PRECISIONS = ("auto", "fp32", "bf16")
PREDICT_PRECISIONS = ("auto", "fp32", "bf16", "int8")


def resolve_precision(value: str | None, device: str, choices: tuple[str, ...], what: str) -> str:
    """``fp32``, ``bf16`` or ``int8`` for ``value`` on ``device``: ``auto`` (or ``None``) is bf16
    where the device computes it natively, else fp32; int8 (dynamic quantization of the linear
    layers) is for CPUs only."""
    if value in (None, "auto"):
        return "bf16" if native_bf16(device) else "fp32"
    if value not in choices:
        raise AnonauditError(f"trir: {what} must be one of {', '.join(choices)}, got {value!r}")
    if value == "int8" and device != "cpu":
        raise AnonauditError(f"trir: {what}=int8 (dynamic quantization) runs on a CPU only, not on {device}; "
                             "use bf16 or fp32 on a GPU")
    return value


@contextlib.contextmanager
def autocast(precision: str, device: str) -> Iterator[None]:
    """bfloat16 autocast on ``device`` for ``bf16`` (matrix products in bf16, weights, softmax and
    losses kept in fp32); nothing for the other precisions."""
    if precision != "bf16":
        yield
        return
    import torch

    with torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16):
        yield


def inference_model(model, precision: str):
    """The model to predict with: for ``int8`` a copy whose linear layers are dynamically
    quantized (int8 weights, activations quantized per batch), else ``model`` itself."""
    if precision != "int8":
        return model
    import warnings

    import torch

    with warnings.catch_warnings():  # torch >= 2.10 points to torchao for new code; this API still works
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
