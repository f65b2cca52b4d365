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
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attackers.trir.training_batches import dedup_windows, freeze_lower, length_batches
from attackers.trir.attacker_cache import TrainedTRIR, cache_root
from attackers.trir.checkpoints import Checkpoint
from attackers.trir.sampling import rotation_period
from attackers.trir.schedule import plan, selection_note, selection_record
from attackers.trir.encoder import autocast, has_mlm_head, quiet_transformers, torch_settings
from attackers.trir.texts import LABEL_STYLE, curated_from_parse, masked_from_parses, style_words
from attackers.trir.token_windows import Windows, make_windows, pad_batch, predict_logits, sum_window_logits
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
    its spaCy parses (``_parse``) and its text preparation (``_prepare``) from ``self``.
    """

    def _train(self, background: Corpus, base_path: str, dev: Release | None, device: str) -> TrainedTRIR:
        """Fine-tune the base encoder as a one-class-per-person classifier, resuming from the
        training's checkpoint when a killed run left one (:mod:`attackers.trir.checkpoints`)."""
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
        checkpoint = self._checkpoint(background, base_path, dev)
        resume = checkpoint.load() if checkpoint is not None else None

        with torch_settings(self.seed, device, self.num_threads):
            threads_used = torch.get_num_threads() if device == "cpu" else None
            if resume is None:
                model, pretrained, mlm_losses = self._classifier(base_path, tokenizer, texts, label_of, device, notes)
            else:
                model, pretrained, mlm_losses = self._resumed_classifier(base_path, label_of, device, resume, notes)
            windows, y, all_windows = self._training_windows(tokenizer, texts, subjects, label_of, notes)
            dev_set = None if dev is None else self._dev_set(dev, tokenizer, label_of)
            pad_id = tokenizer.pad_token_id or 0
            run = _Run(checkpoint=checkpoint, resume=resume, pre={"pretrained": pretrained, "mlm_losses": mlm_losses,
                                                                  "notes": list(notes)})
            history, chosen_epoch, per_epoch, selection = self._fine_tune(model, windows, y, pad_id, device, dev,
                                                                          dev_set, notes, run)
            fit_check = self._fit_check(model, windows, y, pad_id, device, len(labels))
            notes.append(f"fit check: the attacker names the right person for {fit_check['accuracy']:.1%} of "
                         f"{fit_check['windows']} of its own training windows (chance {fit_check['chance']:.2%})")
        model.eval()
        info = self._record(background, base_path, labels, windows, all_windows, per_epoch, dev, history,
                            chosen_epoch, fit_check, notes, started)
        info.update(selection=selection, max_epochs=selection["max_epochs"])
        info.update(device=device, threads=threads_used, pretrained=pretrained, pretrain_loss=mlm_losses,
                    resumed_from_epoch=None if resume is None else resume["epoch"])
        return TrainedTRIR(model=model, tokenizer=tokenizer, labels=labels, info=info)

    def _record(self, background: Corpus, base_path: str, labels: list[str], windows: Windows, all_windows: int,
                per_epoch: int, dev: Release | None, history: list[dict[str, Any]], chosen_epoch: int,
                fit_check: dict[str, Any], notes: list[str], started: float) -> dict[str, Any]:
        """The trained attacker's record: how it was made (saved with it as ``trir.json``)."""
        return {
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
            "history": history,
            "fit_check": fit_check,
            "train_seconds": round(time.time() - started, 2),
            "timings": dict(self._timings),
            "notes": notes,
        }

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
        key = getattr(self, "_training_key", None) or self.cache_key(background, base_path, dev)
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
        copies: list[list[str]] = []
        if cfg["augment_ner"]:
            styles = list(self._mask_styles) or [LABEL_STYLE]
            copies = masked_from_parses(texts, parses, styles)
            notes.append(f"background augmented with {len(copies)} NER-masked cop{'y' if len(copies) == 1 else 'ies'} "
                         f"(spaCy entities masked as: {', '.join(style_words(s) for s in styles)})")
        if cfg["curate"]:
            for k, copy in enumerate(copies):
                parses = parses + self._parse(copy, f"TRIR masked copy {k + 1}/{len(copies)}: spaCy (lemmas)")
            texts = [curated_from_parse(p)[0] for p in parses]
            notes.append("texts curated as in the TRI paper: stop words and special characters removed, "
                         "words lemmatized (background and releases)")
        else:
            texts = texts + [t for copy in copies for t in copy]
        self._timings["text_preparation_seconds"] = round(time.time() - t0, 1)
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

    def _fine_tune(self, model, windows: Windows, y: Sequence[int], pad_id: int, device: str, dev: Release | None,
                   dev_set: tuple[Windows, np.ndarray] | None, notes: list[str],
                   run: _Run | None = None) -> tuple[list[dict[str, Any]], int, int, dict[str, Any]]:
        """Train for the plan's passes (:mod:`attackers.trir.schedule`); with a dev release that
        chooses, stop ``patience`` passes after the last better dev accuracy (never before two
        passes) and go back to the best epoch (a tie: the later one). Each epoch is checkpointed
        (``run``), and a resumed run starts after the checkpoint's epoch. Returns the history (one
        entry per epoch), the epoch kept, the windows per epoch and how the epoch was chosen."""
        import torch

        run = run or _Run()
        cfg = self.settings()
        next_order, per_epoch = self._epoch_sampler(y)
        dev_documents = None if dev_set is None else len(dev_set[1])
        the_plan = plan(self._rotation_period(y), cfg, dev_documents)
        epochs = the_plan.max_epochs
        optimizer, scheduler = self._optimizer(model, math.ceil(per_epoch / self.batch_size) * epochs)
        y_t = torch.tensor(y, dtype=torch.long)
        lengths = [len(w) for w in windows.ids]
        history, best, start = self._restore(run, model, optimizer, scheduler, next_order)
        stopped = the_plan.stop_reason(history[-1]["epoch"], best[0], the_plan.improved_at(history)) if history else None
        for epoch in range(start, epochs + 1):
            if stopped:
                break
            frozen = epoch <= self.freeze_epochs and self.freeze_layers > 0
            freeze_lower(model, self.freeze_layers, frozen)
            order = next_order()
            size = self.batch_size
            batches = (length_batches(order, lengths, size, self.seed * 1000 + epoch) if cfg["bucket"]
                       else [order[b : b + size] for b in range(0, len(order), size)])
            entry = self._run_epoch(model, windows, batches, y_t, (optimizer, scheduler), pad_id, device, epoch, epochs)
            entry["passes"] = the_plan.passes(epoch)
            if frozen:
                entry["frozen_layers"] = self.freeze_layers
            if dev_set is not None:
                entry["dev_accuracy"] = round(self._accuracy(model, *dev_set, pad_id, device), 5)
                if the_plan.keeps(epoch, entry["dev_accuracy"], best[0]):
                    best = (entry["dev_accuracy"], epoch, {k: v.detach().clone() for k, v in model.state_dict().items()})
            history.append(entry)
            self._say_epoch(entry, epochs, best if the_plan.select else None)
            if run.checkpoint is not None:
                run.checkpoint.save(_state(epoch, model, optimizer, scheduler, history, best, run.pre))
            stopped = the_plan.stop_reason(epoch, best[0], the_plan.improved_at(history))
        freeze_lower(model, self.freeze_layers, False)
        chosen = best[1] if the_plan.select and best[2] is not None else len(history)
        if chosen != len(history):
            model.load_state_dict(best[2])
        selection = selection_record(the_plan, chosen, dev_documents, stopped)
        notes.append(selection_note(selection, len(history), None if dev is None else dev.name, best[0]))
        return history, chosen, per_epoch, selection

    def _rotation_period(self, y: Sequence[int]) -> int:
        """Rotated epochs in one pass over the training windows."""
        return rotation_period(y, self.settings()["window_rotation"], self.max_windows_per_class, self.batch_size)

    def _restore(self, run: _Run, model, optimizer, scheduler,
                 next_order) -> tuple[list[dict[str, Any]], tuple[float, int, Any], int]:
        """The history, best epoch and first epoch to train: from the checkpoint when resuming
        (the optimizer, schedule and random state restored, the epoch orders drawn again so the
        sampler is where it was), else empty."""
        import torch

        state = run.resume
        if state is None:
            return [], (-1.0, 0, None), 1
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        for _ in range(state["epoch"]):
            next_order()
        torch.set_rng_state(state["rng"])
        _restore_cuda_rng(state.get("cuda_rng"))
        best_model = state.get("best_model")
        if best_model is None and state["best_epoch"] == state["epoch"]:
            best_model = {k: v.detach().clone() for k, v in model.state_dict().items()}
        return list(state["history"]), (float(state["best_accuracy"]), int(state["best_epoch"]), best_model), \
            state["epoch"] + 1

    def _say_epoch(self, entry: dict[str, Any], epochs: int, best: tuple[float, int, Any] | None) -> None:
        """One line per epoch (stderr, with progress on): its loss, dev accuracy and time."""
        log.info("TRIR epoch %s: %s", entry["epoch"], entry)
        if not self.progress:
            return
        line = f"    TRIR epoch {entry['epoch']}/{epochs}: loss {entry['loss']:.4f}"
        if "passes" in entry and entry["passes"] != entry["epoch"]:
            line += f" ({entry['passes']:g} passes)"
        if "dev_accuracy" in entry:
            line += f", dev accuracy {entry['dev_accuracy']:.3f}"
            line += (" (not choosing: too few dev documents)" if best is None else
                     " (no candidate before two passes)" if best[1] == 0 else f" (best {best[0]:.3f}, epoch {best[1]})")
        print(f"{line}, {entry['seconds']:.0f} s", file=sys.stderr, flush=True)

    def _optimizer(self, model, total_steps: int, fused: bool = False):
        """AdamW with a linear warm-up over 6% of the steps, then linear decay to zero;
        ``fused``: torch's one-kernel AdamW (the same update up to rounding, ~7x faster on a CPU)."""
        import torch

        optimizer = torch.optim.AdamW(model.parameters(), lr=self.learning_rate, weight_decay=self.weight_decay,
                                      **({"fused": True} if fused else {}))
        warmup = max(1, int(0.06 * total_steps))
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total_steps - s) / max(1, total_steps - warmup))))
        return optimizer, scheduler

    def _run_epoch(self, model, windows: Windows, batches: Sequence[Sequence[int]], y_t: torch.Tensor,
                   steppers: tuple[Any, Any], pad_id: int, device: str, epoch: int, epochs: int) -> dict[str, Any]:
        """One epoch over ``batches`` (lists of window indices); its history entry."""
        from audit.runtime.progress import bar as progress_bar

        optimizer, scheduler = steppers
        precision = self.settings()["train_precision"]
        model.train()
        t0 = time.time()
        total_loss, seen, tokens = 0.0, 0, 0
        bar = progress_bar(batches, desc=f"TRIR training, epoch {epoch}/{epochs}", unit="batch",
                           enabled=self.progress)
        for idx in bar:
            idx = list(idx)
            ids, mask = pad_batch([windows.ids[i] for i in idx], pad_id)
            with autocast(precision, device):
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
                                progress=self.progress, desc="TRIR dev", precision=self._predict_precision(device))
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
                                progress=False, precision=self._predict_precision(device))
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


@dataclass
class _Run:
    """A training's checkpoint (``None``: none kept), the state it resumes from (``None``: a
    fresh start), and what happened before fine-tuning (pre-training, notes), kept with each epoch."""

    checkpoint: Checkpoint | None = None
    resume: dict[str, Any] | None = None
    pre: dict[str, Any] = field(default_factory=lambda: {"pretrained": False, "mlm_losses": [], "notes": []})


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
