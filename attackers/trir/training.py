"""Training the TRIR attacker: masked-LM pre-training, fine-tuning, epoch selection, fit check.

:class:`TRIRTraining` is the training half of :class:`~attackers.trir.attack.TRIRAttack`:
the attack fine-tunes the base encoder as a classifier with one class per person of the
background, on overlapping token windows, optionally after further masked-LM pre-training
on the background, and keeps the epoch that does best on a dev release when it has one.
The engine runs the training where the run's executor says (:mod:`audit.runtime.trainer`):
here, or data-parallel on Ray Train; the loop and its one epoch step are
:mod:`attackers.trir.steps`'s, the same on both. Here are what it reads
(:meth:`TRIRTraining.training_data`), the masked-LM pre-training, the job handed to the engine
(:meth:`TRIRTraining.train_attacker`) and the record (:meth:`TRIRTraining.training_record`).
"""

from __future__ import annotations

import logging
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attackers.trir.attacker_cache import TrainedTRIR, cache_root
from attackers.trir.encoder import autocast, has_mlm_head, quiet_transformers, torch_settings
from attackers.trir.fine_tuning import FineTuned, TrainingData
from attackers.trir.steps import FineTuneJob, fine_tune
from attackers.trir.texts import LABEL_STYLE, curated_from_parse, masked_from_parses, style_words
from attackers.trir.token_windows import Windows, make_windows, predict_logits
from attackers.trir.training_batches import dedup_windows
from audit.core.errors import AnonauditError
from audit.runtime.executor import LocalExecutor
from audit.runtime.trainer import TrainingJob, trainer_name
from audit.runtime.trainer import Workspace

if TYPE_CHECKING:
    from audit.core.data import Corpus, Release
    from audit.runtime.executor import Executor

log = logging.getLogger(__name__)

#: Training windows the fit check re-reads after training, and the accuracy below which the
#: attacker counts as under-trained (it cannot name the person in half of its own training text).
FIT_CHECK_WINDOWS = 256
FIT_CHECK_MIN = 0.5
#: The Ray Train workers' gradient exchange overlapped with the backward pass
#: (:mod:`attackers.trir.exchange`; more than one worker). Their optimizer is the local one
#: (``fused_adamw`` as the attack sets it), so that one worker trains the local attacker.
OVERLAP = True


# --------------------------------------------------------------------------- training


class TRIRTraining:
    """Training steps of :class:`~attackers.trir.attack.TRIRAttack`, which mixes them in.

    They read the attack's parameters (window, epochs, learning rate, seed and the rest),
    its spaCy parses (``_parse``) and its text preparation (``_prepare``) from ``self``.
    """

    def train_attacker(self, background: Corpus, base_path: str, dev: Release | None, device: str,
                       executor: Executor | None = None) -> TrainedTRIR:
        """Fine-tune the base encoder as a one-class-per-person classifier through the engine
        (:meth:`audit.runtime.executor.Executor.train`): here on the local executor (``executor``
        ``None`` too), data-parallel on Ray Train on the Ray executor; resuming from the training's
        checkpoint when a killed run left one. One loop and one step on both
        (:func:`attackers.trir.steps.fine_tune`)."""
        import torch

        placement = self.train_workers(executor, base_path)
        trainer = trainer_name(placement)
        workers, threads, gpu = placement or (1, self.num_threads, False)
        workspace = self.workspace(background, base_path, dev)
        (executor or LocalExecutor()).check_training(workspace)  # before any work
        data = self.training_data(background, base_path, dev)
        resume = workspace.resume(trainer) if trainer == "local" else None
        notes = list(data.text_notes)
        with torch_settings(self.seed, device, self.num_threads), workspace.scratch(".pretrained.") as scratch:
            threads_used = torch.get_num_threads() if device == "cpu" and trainer == "local" else None
            if trainer != "local":
                model_path, pre = None, {"pretrained": False, "mlm_losses": [], "notes": list(notes)}
            elif resume is None:
                model_path, pre = self._pretrained(base_path, data, device, notes, scratch)
            else:
                model_path, pre = base_path, resume["pre"]
                notes[:] = list(pre["notes"])
                if self.progress:
                    print(f"    TRIR: resuming the training after epoch {resume['epoch']} (checkpoint)",
                          file=sys.stderr, flush=True)
            notes += data.window_notes
            job = TrainingJob(loop=fine_tune, payload=self._fine_tune_job(data, model_path, pre, trainer),
                              workspace=workspace, device=device, workers=workers, threads=threads, gpu=gpu,
                              trainer=trainer, label="TRIR training", progress=self.progress)
            state = (executor or LocalExecutor()).train(job)
            trained = self._trained(state, data, base_path, device)
            tuned = FineTuned(state["history"], state["chosen_epoch"], state["per_epoch"], state["selection"],
                              (state["best_accuracy"], state["best_epoch"], None), state["stopped"])
            notes.append(tuned.note(dev))
            if trainer != "local":
                notes.append(f"trained data-parallel on Ray Train: {workers} worker(s)")
            info = self.training_record(background, base_path, dev, data, trained.model, device, tuned, notes)
        info.update(device=device, threads=threads_used, pretrained=bool(state["pre"]["pretrained"]),
                    pretrain_loss=list(state["pre"]["mlm_losses"]), resumed_from_epoch=state["resumed_from_epoch"])
        if trainer != "local":
            info["ray_train"] = {"workers": workers, "threads_per_worker": threads, "gpus": gpu}
            info["settings"]["train_precision"] = state["train_precision"]  # the workers' arithmetic
        trained.info = info
        return trained

    def train_workers(self, executor: Executor | None, base_path: str) -> tuple[int, int | None, bool] | None:
        """``(workers, threads each, GPUs?)`` of a data-parallel training on a distributed
        executor (:meth:`~audit.runtime.executor.Executor.train_workers`), ``None`` for a training
        in one process. A training with masked-LM pre-training is not data-parallel: it runs
        whole on one worker (:class:`attackers.trir.distributed.TrainOnWorker`)."""
        if executor is None or not getattr(executor, "distributed", False) or (
                self.settings()["pretrain"] and (self.new_mlm_head or has_mlm_head(base_path))):
            return None
        return executor.train_workers(self.num_threads)

    def _fine_tune_job(self, data: TrainingData, model_path: str | None, pre: dict[str, Any],
                       trainer: str) -> FineTuneJob:
        """What :func:`~attackers.trir.steps.fine_tune` reads: this attack itself here; on Ray Train
        its class and parameters (each worker trains on the device it is given, on its own base)."""
        dev = data.dev_set
        common = dict(labels=data.labels, ids=data.windows.ids, y=list(data.y), pad_id=data.pad_id,
                      dev=None if dev is None else (dev[0].ids, dev[0].doc, dev[1].tolist()), pre=pre)
        if trainer == "local":
            return FineTuneJob(**common, attack=self, model_path=model_path, fused=self.settings()["fused_adamw"])
        params = {**self.get_params(), "progress": False, "device": "auto",
                  "window_rotation": self.settings()["window_rotation"]}
        return FineTuneJob(**common, attack_class=type(self), params=params, fused=self.settings()["fused_adamw"],
                           overlap=OVERLAP)

    def _trained(self, state: dict[str, Any], data: TrainingData, base_path: str, device: str) -> TrainedTRIR:
        """The trained attacker: the base with the kept weights, on ``device``."""
        from transformers import AutoModelForSequenceClassification

        labels = data.labels
        with quiet_transformers():
            model = AutoModelForSequenceClassification.from_pretrained(
                base_path, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id=data.label_of)
        model.load_state_dict(state["final_model"])
        model.to(device).eval()
        return TrainedTRIR(model=model, tokenizer=data.tokenizer, labels=labels, info={})

    def training_data(self, background: Corpus, base_path: str, dev: Release | None) -> TrainingData:
        """What the training reads (:class:`~attackers.trir.fine_tuning.TrainingData`): the base's
        tokenizer, the training texts through spaCy's parse cache, their windows, the dev windows."""
        from transformers import AutoTokenizer

        started = time.time()
        self._timings: dict[str, float] = {}  # for the provenance (stats), never the results
        labels = sorted({d.subject for d in background if d.subject})
        label_of = {s: i for i, s in enumerate(labels)}
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(base_path)
        text_notes: list[str] = []
        window_notes: list[str] = []
        texts, subjects = self._training_texts(background, text_notes)
        t0 = time.time()
        windows, y, all_windows = self._training_windows(tokenizer, texts, subjects, label_of, window_notes)
        self._timings["tokenising_seconds"] = round(time.time() - t0, 1)
        t0 = time.time()
        dev_set = None if dev is None else self._dev_set(dev, tokenizer, label_of)
        self._timings["dev_preparation_seconds"] = round(time.time() - t0, 1)
        return TrainingData(tokenizer=tokenizer, labels=labels, texts=texts, windows=windows, y=y,
                            all_windows=all_windows, dev_set=dev_set, text_notes=text_notes,
                            window_notes=window_notes, started=started)

    def training_record(self, background: Corpus, base_path: str, dev: Release | None, data: TrainingData, model,
                        device: str, tuned: FineTuned, notes: list[str]) -> dict[str, Any]:
        """The trained attacker's record (saved with it as ``trir.json``): how it was made, with
        the fit check of ``model`` on ``device`` (its sentence appended to ``notes``)."""
        fit_check = self._fit_check(model, data, device)
        notes.append(f"fit check: the attacker names the right person for {fit_check['accuracy']:.1%} of "
                     f"{fit_check['windows']} of its own training windows (chance {fit_check['chance']:.2%})")
        info = {
            "attack": self.name,
            "params": self.get_params(),
            "base": base_path,
            "population": len(data.labels),
            "background_documents": len(background),
            "background_fingerprint": background.fingerprint(),
            "training_windows": len(data.windows),
            "windows_before_dedup": data.all_windows,
            "windows_per_epoch": tuned.per_epoch,
            "budget": self.budget,
            "settings": self.settings(),
            "mask_styles": list(self._mask_styles),
            "epochs_trained": len(tuned.history),
            "max_epochs": self.settings()["epochs"],
            "chosen_epoch": tuned.chosen,
            "dev": None if dev is None else dev.name,
            "history": tuned.history,
            "fit_check": fit_check,
            "train_seconds": round(time.time() - data.started, 2),
            "timings": dict(self._timings),
            "notes": notes,
        }
        info.update(selection=tuned.selection, max_epochs=tuned.selection["max_epochs"])
        return info

    def training_key(self, background: Corpus, base_path: str, dev: Release | None) -> str:
        """The trained attacker's cache key, which names its checkpoints too: the one this run's
        ``fit`` computed, else computed now."""
        return getattr(self, "_training_key", None) or self.cache_key(background, base_path, dev)

    def workspace(self, background: Corpus, base_path: str, dev: Release | None) -> Workspace:
        """This training's folders (:class:`audit.runtime.trainer.Workspace`): its checkpoint in
        the user's ``checkpoint_dir``, else in the attacker cache's ``checkpoints`` folder (none
        when caches are off), its scratch folders in the attacker cache."""
        from audit.core import config

        work_dir = cache_root(self.cache_dir) if self.use_cache and config.cache_enabled() else None
        return Workspace(self.training_key(background, base_path, dev), work_dir, self.checkpoint_dir)

    def _training_windows(self, tokenizer, texts: Sequence[str], subjects: Sequence[str | None],
                          label_of: dict[str, int], notes: list[str]) -> tuple[Windows, list[int], int]:
        """The training windows (de-duplicated with ``dedup``), their classes, and how many
        windows there were before."""
        windows = make_windows(tokenizer, texts, self.window, self.overlap)
        y = [label_of[subjects[d]] for d in windows.doc]
        all_windows = len(windows)
        if self.settings()["dedup"]:
            windows, y = dedup_windows(windows, y)
            if len(windows) < all_windows:
                notes.append(f"{all_windows - len(windows)} of {all_windows} training windows were repeats "
                             "(same text, same person) and are trained on once")
        return windows, y, all_windows

    def _training_texts(self, background: Corpus, notes: list[str]) -> tuple[list[str], list[str | None]]:
        """The training texts and their subjects: the background, plus an NER-masked copy per
        masking style with ``augment_ner``, curated with ``curate``. spaCy parses each text once
        (a masked copy is a text of its own), through the parse cache (:mod:`attackers.trir.parse_settings`):
        the background's parse gives every masked copy and its curated form."""
        texts = [d.text for d in background]
        subjects = [d.subject for d in background]
        cfg = self.settings()
        if not (cfg["augment_ner"] or cfg["curate"]):
            return texts, subjects
        t0 = time.time()
        parses = self._parse(texts, "TRIR background: spaCy (entities, lemmas)")
        spacy_s = time.time() - t0
        copies: list[list[str]] = []
        if cfg["augment_ner"]:
            styles = list(self._mask_styles) or [LABEL_STYLE]
            copies = masked_from_parses(texts, parses, styles)
            notes.append(f"background augmented with {len(copies)} NER-masked cop{'y' if len(copies) == 1 else 'ies'} "
                         f"(spaCy entities masked as: {', '.join(style_words(s) for s in styles)})")
        if cfg["curate"]:
            for k, copy in enumerate(copies):
                t1 = time.time()
                parses = parses + self._parse(copy, f"TRIR masked copy {k + 1}/{len(copies)}: spaCy (lemmas)")
                spacy_s += time.time() - t1
            texts = [curated_from_parse(p)[0] for p in parses]
            notes.append("texts curated as in the TRI paper: stop words and special characters removed, "
                         "words lemmatized (background and releases)")
        else:
            texts = texts + [t for copy in copies for t in copy]
        self._timings["text_preparation_seconds"] = round(time.time() - t0, 1)  # spaCy's share below
        self._timings["spacy_seconds"] = round(spacy_s, 1)
        return texts, subjects * (1 + len(copies))

    def _pretrained(self, base_path: str, data: TrainingData, device: str, notes: list[str],
                    scratch: Path) -> tuple[str, dict[str, Any]]:
        """The model to fine-tune from: the base, or its copy further pre-trained as a masked LM on
        the training texts (in ``scratch``) when asked and possible; and what happened before
        fine-tuning (``pretrained``, the mean MLM loss of each epoch, the notes so far)."""
        model_path, pretrained, mlm_losses = base_path, False, []
        if self.settings()["pretrain"]:
            head = has_mlm_head(base_path)
            if head or self.new_mlm_head:
                t0 = time.time()
                mlm_losses = self._pretrain_mlm(base_path, data.tokenizer, data.texts, device, scratch,
                                                new_head=not head)
                model_path, pretrained = str(scratch), True
                notes.append((
                    "" if head else "base has no MLM head: a new one trained on the background first (1 epoch, "
                                    "encoder frozen); then ")
                    + f"masked-LM further pre-training on the background: {self.settings()['pretrain_epochs']} "
                    f"epoch(s), windows {self.pretrain_window}/{self.pretrain_overlap}, "
                    f"mean MLM loss per epoch {', '.join(f'{v:.3f}' for v in mlm_losses)}")
                self._timings["mlm_pretraining_seconds"] = round(time.time() - t0, 1)
            else:
                notes.append("pretraining skipped: base has no MLM head (new_mlm_head trains one)")
        return model_path, {"pretrained": pretrained, "mlm_losses": mlm_losses, "notes": list(notes)}

    def _dev_set(self, dev: Release, tokenizer, label_of: dict[str, int]) -> tuple[Windows, np.ndarray]:
        """Windows of the dev release's documents about people in the background, and their classes."""
        dev_docs = [d for d in dev.corpus if d.subject in label_of]
        if not dev_docs:
            raise AnonauditError(f"dev release {dev.name!r} has no document about a person in the "
                                 "background, so it cannot select the epoch")
        dev_windows = make_windows(tokenizer, self._prepare([d.text for d in dev_docs], "dev release"), self.window, self.overlap)
        return dev_windows, np.array([label_of[d.subject] for d in dev_docs])

    def _fit_check(self, model, data: TrainingData, device: str) -> dict[str, Any]:
        """Accuracy on a seeded sample of the training windows, read back after training. An
        attacker that cannot name the subject of its own training text has not learned enough
        for its TRIR to mean much: a low TRIR from it says nothing about the release."""
        windows, y = data.windows, data.y
        picked = sorted(random.Random(self.seed).sample(range(len(windows)), min(FIT_CHECK_WINDOWS, len(windows))))
        sub = Windows(ids=[windows.ids[i] for i in picked], doc=list(range(len(picked))),
                      chars=[windows.chars[i] for i in picked])
        logits = predict_logits(model, sub, pad_id=data.pad_id, device=device, batch_size=self.predict_batch_size,
                                progress=False, precision=self.prediction_precision(device))
        acc = float(np.mean(logits.argmax(axis=1) == np.array([y[i] for i in picked])))
        return {"windows": len(picked), "accuracy": round(acc, 4), "chance": 1.0 / len(data.labels)}

    def _pretrain_mlm(self, base_path: str, tokenizer, texts: Sequence[str], device: str, out: Path,
                      new_head: bool = False) -> list[float]:
        """Further masked-LM pre-training of the base on the background, saved in ``out`` (a
        scratch folder); returns the mean MLM loss of each epoch. With ``new_head`` (a base that
        ships without its MLM head), a new head is first trained alone for one epoch, the encoder
        frozen, so that its random start does not disturb the encoder; then everything trains."""
        import torch
        from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling

        from audit.runtime.progress import bar as progress_bar

        with quiet_transformers():
            mlm = AutoModelForMaskedLM.from_pretrained(base_path).to(device)
        windows = make_windows(tokenizer, texts, self.pretrain_window, self.pretrain_overlap)
        collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
        gen = torch.Generator().manual_seed(self.seed)
        precision = self.settings()["train_precision"]
        mlm.train()
        losses: list[float] = []

        def run(epochs: int, lr: float, label: str) -> None:
            params = [p for p in mlm.parameters() if p.requires_grad]
            optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=self.weight_decay)
            for epoch in range(1, epochs + 1):
                order = torch.randperm(len(windows), generator=gen).tolist()
                total = 0.0
                for b in progress_bar(range(0, len(order), self.batch_size), desc=f"TRIR {label}, epoch {epoch}",
                                      unit="batch", enabled=self.progress):
                    batch = collator([{"input_ids": windows.ids[i]} for i in order[b : b + self.batch_size]])
                    with autocast(precision, device):
                        loss = mlm(**{k: v.to(device) for k, v in batch.items()}).loss
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
                    total += float(loss.detach()) * len(batch["input_ids"])
                losses.append(total / max(1, len(order)))

        if new_head:
            encoder = mlm.base_model
            for p in encoder.parameters():
                p.requires_grad_(False)
            run(1, 1e-3, "new MLM head")
            for p in encoder.parameters():
                p.requires_grad_(True)
        run(self.settings()["pretrain_epochs"], 5e-5, "MLM pretraining")
        with quiet_transformers():
            mlm.save_pretrained(out)
        return losses
