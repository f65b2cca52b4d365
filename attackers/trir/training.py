"""Training the TRIR attacker: masked-LM pre-training, fine-tuning, epoch selection, fit check.

:class:`TRIRTraining` is the training half of :class:`~attackers.trir.attack.TRIRAttack`:
the attack fine-tunes the base encoder as a classifier with one class per person of the
background, on overlapping token windows, optionally after further masked-LM pre-training
on the background, and keeps the epoch that does best on a dev release when it has one.
"""

from __future__ import annotations

import logging
import math
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attackers.trir.batches import dedup_windows, epoch_sampler, freeze_lower, length_batches
from attackers.trir.cache import TrainedTRIR, cache_root
from attackers.trir.encoder import has_mlm_head, quiet_transformers, torch_settings
from attackers.trir.texts import LABEL_STYLE, masked_copies, style_words
from attackers.trir.windows import Windows, make_windows, pad_batch, predict_logits, sum_window_logits
from audit.core.errors import AnonauditError

if TYPE_CHECKING:
    import torch

    from audit.core.data import Corpus, Release

log = logging.getLogger(__name__)

#: Training windows the fit check re-reads after training, and the accuracy below which the
#: attacker counts as under-trained (it cannot name the person in half of its own training text).
FIT_CHECK_WINDOWS = 256
FIT_CHECK_MIN = 0.5


# --------------------------------------------------------------------------- training


class TRIRTraining:
    """Training steps of :class:`~attackers.trir.attack.TRIRAttack`, which mixes them in.

    They read the attack's parameters (window, epochs, learning rate, seed and the rest),
    its spaCy pipeline (``_spacy_nlp``) and its text preparation (``_prepare``) from ``self``.
    """

    def _train(self, background: Corpus, base_path: str, dev: Release | None, device: str) -> TrainedTRIR:
        """Fine-tune the base encoder as a one-class-per-person classifier."""
        import torch
        from transformers import AutoTokenizer

        started = time.time()
        self._timings: dict[str, float] = {}  # for the provenance (stats), never the results
        labels = sorted({d.subject for d in background if d.subject})
        label_of = {s: i for i, s in enumerate(labels)}
        notes: list[str] = []
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(base_path)
        texts, subjects = self._training_texts(background, notes)

        with torch_settings(self.seed, device, self.num_threads):
            threads_used = torch.get_num_threads() if device == "cpu" else None
            model, pretrained, mlm_losses = self._classifier(base_path, tokenizer, texts, label_of, device, notes)
            windows = make_windows(tokenizer, texts, self.window, self.overlap)
            y = [label_of[subjects[d]] for d in windows.doc]
            all_windows = len(windows)
            if self.settings()["dedup"]:
                windows, y = dedup_windows(windows, y)
                if len(windows) < all_windows:
                    notes.append(f"{all_windows - len(windows)} of {all_windows} training windows were repeats "
                                 "(same text, same person) and are trained on once")
            dev_set = None if dev is None else self._dev_set(dev, tokenizer, label_of)
            pad_id = tokenizer.pad_token_id or 0
            history, chosen_epoch, per_epoch = self._fine_tune(model, windows, y, pad_id, device, dev, dev_set,
                                                               notes)
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
            "windows_before_dedup": all_windows,
            "windows_per_epoch": per_epoch,
            "budget": self.budget,
            "settings": self.settings(),
            "mask_styles": list(self._mask_styles),
            "epochs_trained": len(history),
            "max_epochs": self.settings()["epochs"],
            "chosen_epoch": chosen_epoch,
            "dev": None if dev is None else dev.name,
            "pretrained": pretrained,
            "pretrain_loss": mlm_losses,
            "history": history,
            "fit_check": fit_check,
            "device": device,
            "threads": threads_used,
            "train_seconds": round(time.time() - started, 2),
            "timings": dict(self._timings),
            "notes": notes,
        }
        return TrainedTRIR(model=model, tokenizer=tokenizer, labels=labels, info=info)

    def _training_texts(self, background: Corpus, notes: list[str]) -> tuple[list[str], list[str | None]]:
        """The training texts and their subjects: the background, plus an NER-masked copy with
        ``augment_ner``, curated with ``curate``."""
        texts = [d.text for d in background]
        subjects = [d.subject for d in background]
        if self.settings()["augment_ner"]:
            styles = list(self._mask_styles) or [LABEL_STYLE]
            t0 = time.time()
            copies = masked_copies(self._spacy_nlp(), texts, styles,
                                   progress=f"TRIR background: masking entities (spaCy, {len(styles)} "
                                            f"style{'s' if len(styles) > 1 else ''})" if self.progress else None)
            self._timings["ner_masking_seconds"] = round(time.time() - t0, 1)
            for copy in copies:
                texts = texts + copy
            subjects = subjects * (1 + len(copies))
            notes.append(f"background augmented with {len(copies)} NER-masked cop{'y' if len(copies) == 1 else 'ies'} "
                         f"(spaCy entities masked as: {', '.join(style_words(s) for s in styles)})")
        texts = self._prepare(texts)
        if self.settings()["curate"]:
            notes.append("texts curated as in the TRI paper: stop words and special characters removed, "
                         "words lemmatized (background and releases)")
        return texts, subjects

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

    def _fine_tune(self, model, windows: Windows, y: Sequence[int], pad_id: int, device: str, dev: Release | None,
                   dev_set: tuple[Windows, np.ndarray] | None,
                   notes: list[str]) -> tuple[list[dict[str, Any]], int, int]:
        """Train up to ``epochs`` epochs; with a dev set, stop after ``patience`` epochs without a
        better dev accuracy (or at a perfect one) and go back to the best epoch.
        Returns the history (one entry per epoch), the epoch kept and the windows per epoch."""
        import torch

        cfg = self.settings()
        epochs, patience = cfg["epochs"], cfg["patience"]
        next_order, per_epoch = epoch_sampler(y, self.max_windows_per_class, self.seed)
        total_steps = math.ceil(per_epoch / self.batch_size) * epochs
        optimizer, scheduler = self._optimizer(model, total_steps)
        y_t = torch.tensor(y, dtype=torch.long)
        lengths = [len(w) for w in windows.ids]
        history: list[dict[str, Any]] = []
        best = (-1.0, 0, None)
        stopped = None
        for epoch in range(1, epochs + 1):
            frozen = epoch <= self.freeze_epochs and self.freeze_layers > 0
            freeze_lower(model, self.freeze_layers, frozen)
            order = next_order()
            size = self.batch_size
            batches = (length_batches(order, lengths, size, self.seed * 1000 + epoch) if cfg["bucket"]
                       else [order[b : b + size] for b in range(0, len(order), size)])
            entry = self._run_epoch(model, windows, batches, y_t, (optimizer, scheduler), pad_id, device, epoch, epochs)
            if frozen:
                entry["frozen_layers"] = self.freeze_layers
            if dev_set is not None:
                acc = self._accuracy(model, *dev_set, pad_id, device)
                entry["dev_accuracy"] = round(acc, 5)
                if acc > best[0]:
                    best = (acc, epoch, {k: v.detach().clone() for k, v in model.state_dict().items()})
            history.append(entry)
            log.info("TRIR epoch %s: %s", epoch, entry)
            if dev_set is not None and epoch < epochs:
                if best[0] >= 1.0:
                    stopped = f"stopped after epoch {epoch}: every dev document named"
                    break
                if patience is not None and epoch - best[1] >= patience:
                    stopped = f"stopped after epoch {epoch}: no better dev accuracy for {patience} epochs"
                    break
        freeze_lower(model, self.freeze_layers, False)
        if dev_set is not None and best[2] is not None:
            model.load_state_dict(best[2])
            notes.append(f"epoch {best[1]} of at most {epochs} chosen by accuracy on the dev release "
                         f"{dev.name!r} ({best[0]:.3f}); the release under test was not used"
                         + (f" ({stopped})" if stopped else ""))
            return history, best[1], per_epoch
        notes.append(f"no dev release: trained a fixed {epochs} epoch(s), no model selection")
        return history, epochs, per_epoch

    def _optimizer(self, model, total_steps: int):
        """AdamW with a linear warm-up over 6% of the steps, then linear decay to zero."""
        import torch

        optimizer = torch.optim.AdamW(model.parameters(), lr=self.learning_rate, weight_decay=self.weight_decay)
        warmup = max(1, int(0.06 * total_steps))
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total_steps - s) / max(1, total_steps - warmup))))
        return optimizer, scheduler

    def _run_epoch(self, model, windows: Windows, batches: Sequence[Sequence[int]], y_t: torch.Tensor,
                   steppers: tuple[Any, Any], pad_id: int, device: str, epoch: int, epochs: int) -> dict[str, Any]:
        """One epoch over ``batches`` (lists of window indices); its history entry."""
        from audit.runtime.progress import bar as progress_bar

        optimizer, scheduler = steppers
        model.train()
        t0 = time.time()
        total_loss, seen, tokens = 0.0, 0, 0
        bar = progress_bar(batches, desc=f"TRIR training, epoch {epoch}/{epochs}", unit="batch",
                           enabled=self.progress)
        for idx in bar:
            idx = list(idx)
            ids, mask = pad_batch([windows.ids[i] for i in idx], pad_id)
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=y_t[idx].to(device))
            out.loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            total_loss += out.loss.item() * len(idx)
            seen += len(idx)
            tokens += ids.numel()
        bar.close()
        return {"epoch": epoch, "loss": round(total_loss / max(1, seen), 5),
                "seconds": round(time.time() - t0, 2), "windows": seen, "padded_tokens": tokens}

    def _accuracy(self, model, windows: Windows, truth: np.ndarray, pad_id: int, device: str) -> float:
        """Share of the dev documents whose subject the model names (summed window logits)."""
        logits = predict_logits(model, windows, pad_id=pad_id, device=device, batch_size=self.predict_batch_size,
                                progress=self.progress, desc="TRIR dev")
        scores = sum_window_logits(logits, windows.doc, len(truth))
        return float(np.mean(scores.argmax(axis=1) == truth))

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
