"""Training the TRIR attacker: masked-LM pre-training, fine-tuning, epoch selection, fit check.

:class:`TRIRTraining` is the training half of :class:`~attackers.trir.attack.TRIRAttack`:
the attack fine-tunes the base encoder as a classifier with one class per person of the
background, on overlapping token windows, optionally after further masked-LM pre-training
on the background, and keeps the epoch that does best on a dev release when it has one.
The routine is :mod:`attackers.trir.fine_tuning`'s, shared with the Ray Train workers
(:mod:`attackers.trir.raytrain`); here are what it reads (:meth:`TRIRTraining.training_data`),
the epochs on this process's device (:class:`LocalSteps`) and the record
(:meth:`TRIRTraining.training_record`).
"""

from __future__ import annotations

import logging
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attackers.trir.training_batches import dedup_windows, freeze_lower, length_batches
from attackers.trir.attacker_cache import TrainedTRIR, cache_root
from attackers.trir.checkpoints import Checkpoint
from attackers.trir.fine_tuning import FineTuned, FineTuning, TrainingData
from attackers.trir.encoder import autocast, has_mlm_head, quiet_transformers, torch_settings
from attackers.trir.texts import LABEL_STYLE, curated_from_parse, masked_from_parses, style_words
from attackers.trir.token_windows import Windows, make_windows, pad_batch, predict_logits, sum_window_logits
from audit.core.errors import AnonauditError

if TYPE_CHECKING:
    from audit.core.data import Corpus, Release

log = logging.getLogger(__name__)

#: Training windows the fit check re-reads after training, and the accuracy below which the
#: attacker counts as under-trained (it cannot name the person in half of its own training text).
FIT_CHECK_WINDOWS = 256
FIT_CHECK_MIN = 0.5
#: Whether a training here steps torch's fused AdamW (as each Ray Train worker does) instead of
#: its loop over parameters: a candidate speed-up of issue 70, measured by benchmarks/trir_fidelity.py.
FUSED_ADAMW = False


# --------------------------------------------------------------------------- training


class TRIRTraining:
    """Training steps of :class:`~attackers.trir.attack.TRIRAttack`, which mixes them in.

    They read the attack's parameters (window, epochs, learning rate, seed and the rest),
    its spaCy parses (``_parse``) and its text preparation (``_prepare``) from ``self``.
    """

    def train_attacker(self, background: Corpus, base_path: str, dev: Release | None, device: str) -> TrainedTRIR:
        """Fine-tune the base encoder here as a one-class-per-person classifier, resuming from the
        training's checkpoint when a killed run left one (:mod:`attackers.trir.checkpoints`)."""
        import torch

        data = self.training_data(background, base_path, dev)
        checkpoint = self._checkpoint(background, base_path, dev)
        resume = checkpoint.load() if checkpoint is not None else None
        notes = list(data.text_notes)
        with torch_settings(self.seed, device, self.num_threads):
            threads_used = torch.get_num_threads() if device == "cpu" else None
            if resume is None:
                model, pretrained, mlm_losses = self._classifier(base_path, data.tokenizer, data.texts, data.label_of,
                                                                 device, notes)
            else:
                model, pretrained, mlm_losses = self._resumed_classifier(base_path, data.label_of, device, resume, notes)
            pre = {"pretrained": pretrained, "mlm_losses": mlm_losses, "notes": list(notes)}
            notes += data.window_notes
            tuning = FineTuning(self, data.y, data.dev_documents)
            steppers = tuning.optimizer(model, fused=FUSED_ADAMW)
            steps = LocalSteps(self, model, data, device, steppers, tuning.epochs, checkpoint, pre)
            start = tuning.start(resume, *steppers, steps.snapshot)
            if resume is not None:
                torch.set_rng_state(resume["rng"])
                _restore_cuda_rng(resume.get("cuda_rng"))
            tuned = tuning.run(steps, start)
            if tuned.chosen != len(tuned.history):
                model.load_state_dict(tuned.best[2])
            notes.append(tuned.note(dev))
            info = self.training_record(background, base_path, dev, data, model, device, tuned, notes)
        model.eval()
        info.update(device=device, threads=threads_used, pretrained=pretrained, pretrain_loss=mlm_losses,
                    resumed_from_epoch=None if resume is None else resume["epoch"])
        return TrainedTRIR(model=model, tokenizer=data.tokenizer, labels=data.labels, info=info)

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

    def _checkpoint(self, background: Corpus, base_path: str, dev: Release | None) -> Checkpoint | None:
        """Where this training keeps its checkpoint: the user's ``checkpoint_dir``, else the
        attacker cache's ``checkpoints`` folder (none when caches are off)."""
        from audit.core import config

        if self.checkpoint_dir:
            root = Path(self.checkpoint_dir)
        elif self.use_cache and config.cache_enabled():
            root = cache_root(self.cache_dir) / "checkpoints"
        else:
            return None
        key = self.training_key(background, base_path, dev)
        return Checkpoint(root, key)

    def _resumed_classifier(self, base_path: str, label_of: dict[str, int], device: str, resume: dict[str, Any],
                            notes: list[str]) -> tuple[Any, bool, list[float]]:
        """The classifier as the checkpoint left it (its pre-training is not run again)."""
        from transformers import AutoModelForSequenceClassification

        labels = list(label_of)
        with quiet_transformers():
            model = AutoModelForSequenceClassification.from_pretrained(
                base_path, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id=label_of)
        model.load_state_dict(resume["model"])
        pre = resume["pre"]
        notes[:] = list(pre["notes"])
        if self.progress:
            print(f"    TRIR: resuming the training after epoch {resume['epoch']} (checkpoint)", file=sys.stderr,
                  flush=True)
        return model.to(device), bool(pre["pretrained"]), list(pre["mlm_losses"])

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

    def _classifier(self, base_path: str, tokenizer, texts: Sequence[str], label_of: dict[str, int], device: str,
                    notes: list[str]) -> tuple[Any, bool, list[float]]:
        """The model to fine-tune: the base (further pre-trained as a masked LM on ``texts`` when
        asked and possible) with a new head of one class per person; whether it was pre-trained,
        and the mean MLM loss of each pre-training epoch."""
        import torch
        from transformers import AutoModelForSequenceClassification

        model_path = base_path
        pretrained = False
        mlm_losses: list[float] = []
        if self.settings()["pretrain"]:
            head = has_mlm_head(base_path)
            if head or self.new_mlm_head:
                t0 = time.time()
                mlm_path, mlm_losses = self._pretrain_mlm(base_path, tokenizer, texts, device, new_head=not head)
                model_path = str(mlm_path)
                pretrained = True
                notes.append((
                    "" if head else "base has no MLM head: a new one trained on the background first (1 epoch, "
                                    "encoder frozen); then ")
                    + f"masked-LM further pre-training on the background: {self.settings()['pretrain_epochs']} "
                    f"epoch(s), windows {self.pretrain_window}/{self.pretrain_overlap}, "
                    f"mean MLM loss per epoch {', '.join(f'{v:.3f}' for v in mlm_losses)}")
                self._timings["mlm_pretraining_seconds"] = round(time.time() - t0, 1)
            else:
                notes.append("pretraining skipped: base has no MLM head (new_mlm_head trains one)")
        torch.manual_seed(self.seed)
        labels = list(label_of)
        with quiet_transformers():
            model = AutoModelForSequenceClassification.from_pretrained(
                model_path, num_labels=len(labels), id2label=dict(enumerate(labels)),
                label2id=label_of).to(device)
        if pretrained:
            shutil.rmtree(model_path, ignore_errors=True)  # its weights now live in the classifier
        return model, pretrained, mlm_losses

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

    def _pretrain_mlm(self, base_path: str, tokenizer, texts: Sequence[str], device: str,
                      new_head: bool = False) -> tuple[Path, list[float]]:
        """Further masked-LM pre-training of the base on the background; returns the new
        (temporary) folder and the mean MLM loss of each epoch. With ``new_head`` (a base that
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
        out = Path(tempfile.mkdtemp(prefix=".pretrained.", dir=cache_root(self.cache_dir)))
        with quiet_transformers():
            mlm.save_pretrained(out)
        return out, losses


class LocalSteps:
    """The epochs of a training on this process's device (an
    :class:`~attackers.trir.fine_tuning.EpochSteps`): every batch of each epoch, the dev
    accuracy, a checkpoint after each epoch (``checkpoint``: none kept when ``None``) with what
    happened before fine-tuning (``pre``: pre-training, notes)."""

    def __init__(self, attack, model, data: TrainingData, device: str, steppers: tuple[Any, Any], epochs: int,
                 checkpoint: Checkpoint | None = None, pre: dict[str, Any] | None = None):
        import torch

        self.attack, self.model, self.data, self.device, self.epochs = attack, model, data, device, epochs
        self.optimizer, self.scheduler = steppers
        self.checkpoint_to, self.pre = checkpoint, pre or {"pretrained": False, "mlm_losses": [], "notes": []}
        self.y = torch.tensor(data.y, dtype=torch.long)
        self.lengths = [len(w) for w in data.windows.ids]

    def epoch(self, epoch: int, order: list[int]) -> dict[str, Any]:
        """One epoch over ``order`` in batches (of similar lengths with ``bucket``), the lower
        layers frozen in the first ``freeze_epochs``; its history entry."""
        from audit.runtime.progress import bar as progress_bar

        a, model, device = self.attack, self.model, self.device
        size = a.batch_size
        freeze_lower(model, a.freeze_layers, epoch <= a.freeze_epochs and a.freeze_layers > 0)
        batches = (length_batches(order, self.lengths, size, a.seed * 1000 + epoch) if a.settings()["bucket"]
                   else [order[b : b + size] for b in range(0, len(order), size)])
        precision = a.settings()["train_precision"]
        model.train()
        t0 = time.time()
        total_loss, seen, tokens = 0.0, 0, 0
        bar = progress_bar(batches, desc=f"TRIR training, epoch {epoch}/{self.epochs}", unit="batch",
                           enabled=a.progress)
        for idx in bar:
            idx = list(idx)
            ids, mask = pad_batch([self.data.windows.ids[i] for i in idx], self.data.pad_id)
            with autocast(precision, device):
                out = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=self.y[idx].to(device))
            out.loss.backward()
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            total_loss += out.loss.item() * len(idx)
            seen += len(idx)
            tokens += ids.numel()
        bar.close()
        freeze_lower(model, a.freeze_layers, False)
        return {"epoch": epoch, "loss": round(total_loss / max(1, seen), 5),
                "seconds": round(time.time() - t0, 2), "windows": seen, "padded_tokens": tokens}

    def dev_accuracy(self) -> float:
        """Share of the dev documents whose subject the model names (summed window logits)."""
        a = self.attack
        windows, truth = self.data.dev_set
        logits = predict_logits(self.model, windows, pad_id=self.data.pad_id, device=self.device,
                                batch_size=a.predict_batch_size, progress=a.progress, desc="TRIR dev",
                                precision=a.prediction_precision(self.device))
        scores = sum_window_logits(logits, windows.doc, len(truth))
        return float(np.mean(scores.argmax(axis=1) == truth))

    def snapshot(self) -> dict[str, Any]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def checkpoint(self, epoch: int, history: list[dict[str, Any]], best: tuple[float, int, Any]) -> None:
        if self.checkpoint_to is not None:
            self.checkpoint_to.save(_state(epoch, self.model, self.optimizer, self.scheduler, history, best, self.pre))


def _state(epoch: int, model, optimizer, scheduler, history: list[dict[str, Any]], best: tuple[float, int, Any],
           pre: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint keeps after ``epoch``."""
    import torch

    return {"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state(), "cuda_rng": _cuda_rng(),
            "history": history,
            "best_accuracy": best[0], "best_epoch": best[1],
            "best_model": best[2] if best[2] is not None and best[1] != epoch else None, "pre": pre}


def _cuda_rng() -> list | None:
    """The GPUs' random states when training used one (dropout on a GPU draws from them, not from
    the CPU's), so that a training resumed on a GPU draws what the uninterrupted one would."""
    import torch

    return torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None


def _restore_cuda_rng(states: list | None) -> None:
    """Restore :func:`_cuda_rng`'s states where the same number of GPUs is there; a checkpoint
    written on a CPU (``None``) or resumed on other hardware keeps the seeded draws (warned)."""
    import torch

    if states is None:
        return
    if not torch.cuda.is_available() or torch.cuda.device_count() != len(states):
        log.warning("TRIR resume: the checkpoint holds the random state of %d GPU(s) and this machine has %d; "
                    "dropout draws differ from the uninterrupted training", len(states),
                    torch.cuda.device_count() if torch.cuda.is_available() else 0)
        return
    torch.cuda.set_rng_state_all(states)
