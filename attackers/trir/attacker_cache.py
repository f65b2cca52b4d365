"""The trained-attacker cache: a trained classifier as a self-describing folder, and its key.

A folder holds ``trir.json`` (the class labels and how the classifier was made) beside the
Hugging Face model and tokenizer. It is named after :func:`cache_key`, a hash of everything
that decides the trained model, so auditing another release with the same background and
configuration loads it instead of retraining.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attackers.trir.encoder import folder_digest, quiet_transformers
from audit.core.errors import AnonauditError
from audit.runtime.folders import scratch, sealed_folder

if TYPE_CHECKING:
    from audit.core.data import Corpus, Release

FORMAT_VERSION = 2
CONFIG_FILE = "trir.json"
#: Parameters that change what is trained (the cache key); the rest only change how fast.
TRAINING_PARAMS = ("window", "overlap", "epochs", "patience", "batch_size", "learning_rate", "weight_decay",
                   "augment_ner", "mask_styles", "curate", "pretrain", "pretrain_window", "pretrain_overlap",
                   "pretrain_epochs", "new_mlm_head", "seed", "window_rotation", "max_windows_per_class", "spacy_model",
                   "dedup", "bucket", "freeze_layers", "freeze_epochs", "train_precision", "fused_adamw")


@dataclass
class TrainedTRIR:
    """A trained classifier, its tokenizer, the class labels and how it was made."""

    model: Any
    tokenizer: Any
    labels: list[str]
    info: dict[str, Any]
    path: Path | None = None

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        with quiet_transformers():
            self.model.save_pretrained(folder)
            self.tokenizer.save_pretrained(folder)
        data = dict(self.info, format=FORMAT_VERSION, labels=self.labels)
        with open(folder / CONFIG_FILE, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=1)

    def store(self, folder: Path) -> None:
        """Save into ``folder`` (replacing it) through a temporary folder beside it, renamed at
        the end, so an interrupted save never leaves a half-written attacker to be loaded."""
        # sealed (verified before it is reused), owner only (it has learnt the background),
        # recorded as anonaudit's (`cache clear` may remove it); half-saved ones of killed runs swept
        with sealed_folder(folder) as tmp:
            self.save(tmp)
        self.path = folder

    def to_files(self) -> dict[str, bytes]:
        """The saved attacker's files by name (what :meth:`from_files` loads): how a trained
        attacker travels from a cluster's worker to the run."""
        with scratch("trir-") as tmp:
            self.save(Path(tmp))
            return {str(f.relative_to(tmp)): f.read_bytes() for f in sorted(Path(tmp).rglob("*")) if f.is_file()}

    @classmethod
    def from_files(cls, files: dict[str, bytes], device: str) -> TrainedTRIR:
        """The attacker whose saved files are ``files`` (:meth:`to_files`), loaded on ``device``."""
        with scratch("trir-") as tmp:
            for name, data in files.items():
                path = Path(tmp) / name
                if Path(tmp) not in path.resolve().parents:  # names come from another process: stay inside
                    raise AnonauditError(f"a trained attacker's file name leaves its folder: {name!r}")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            trained = cls.load(Path(tmp), device)
        trained.path = None
        return trained

    @classmethod
    def load(cls, folder: Path, device: str) -> TrainedTRIR:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        with open(folder / CONFIG_FILE, encoding="utf-8") as fh:
            info = json.load(fh)
        labels = info.pop("labels")
        info.pop("format", None)
        with quiet_transformers():
            model = AutoModelForSequenceClassification.from_pretrained(folder).to(device)
            tokenizer = AutoTokenizer.from_pretrained(folder)
        model.eval()
        return cls(model=model, tokenizer=tokenizer, labels=labels, info=info, path=folder)


def cache_key(params: dict[str, Any], background: Corpus, base_path: str, dev: Release | None) -> str:
    """sha256 of everything that decides the trained model: the training parameters among
    ``params`` (an attack's ``get_params()``), the background, the base and the dev release."""
    key = {k: params[k] for k in TRAINING_PARAMS}
    if not key["pretrain"]:
        for k in ("pretrain_window", "pretrain_overlap", "pretrain_epochs", "new_mlm_head"):
            key.pop(k)
    if not (key["augment_ner"] or key["curate"]):
        key.pop("spacy_model")
    from audit import __version__
    from audit.models.specs import runtime_versions

    if params.get("patience_ties"):  # a stopping rule asked for (absent: the keys made before it stay valid)
        key["patience_ties"] = True
    if params.get("trainer"):  # data-parallel (Ray Train): another draw of the seed's spread, kept apart
        key["trainer"] = params["trainer"]
    key.update(format=FORMAT_VERSION, background=background.fingerprint(), base=folder_digest(base_path),
               dev=None if dev is None else dev.corpus.fingerprint(), anonaudit=__version__,
               runtime=runtime_versions("torch", "transformers"))
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def cache_root(cache_dir: str | None) -> Path:
    """Where trained attackers are kept: ``cache_dir`` (created), else ANONAUDIT_HOME/trir."""
    if cache_dir is not None:
        path = Path(cache_dir)
        path.mkdir(parents=True, exist_ok=True)
        return path
    from audit.core.config import subdir

    return subdir("trir")
