"""What the TRIR attack says about a release: one finding per document and the head result's
details (the counts, how the attacker was built, its training curve, notes and warnings).

:class:`TRIRFindings` is mixed into :class:`~attackers.trir.attack.TRIRAttack`; it reads the
trained attacker (``trained_``) and the attack's parameters from ``self``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attackers.trir.training import FIT_CHECK_MIN
from attackers.trir.token_windows import Windows, rank_of, softmax
from audit.core.data import Corpus, Document, Release
from audit.core.results import Finding, Highlight


class TRIRFindings:
    """Findings and details of :class:`~attackers.trir.attack.TRIRAttack`, which mixes them in."""

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
            "window_rotation": (t.info.get("settings") or {}).get("window_rotation"),
            "windows_per_epoch": t.info.get("windows_per_epoch"),
            "training_windows": t.info.get("training_windows"),
            "dev_release": t.info.get("dev"),
            "chosen_epoch": t.info.get("chosen_epoch"),
            "epochs": t.info.get("epochs_trained"),
            "curve": training_curve(t.info.get("history") or []),
            "max_epochs": t.info.get("max_epochs"),
            # how the epoch was chosen: passes, patience, dev size, the kept epoch's passes (issue 55)
            "selection": t.info.get("selection"),
            "window": self.window,
            "overlap": self.overlap,
            "prediction_windows": prediction_windows,
            # the arithmetic of the training steps (as trained; fp32 before it was an option) and of this prediction
            "precision": {"training": (t.info.get("settings") or {}).get("train_precision", "fp32"),
                          "prediction": self.prediction_precision(self.torch_device())},
            # where it trained (as trained; a cached attacker may predict elsewhere) and predicts
            "device": {"training": t.info.get("device"), "prediction": self.torch_device()},
            "notes": list(t.info.get("notes", [])),
        }
        details["attacker"] = _attacker_sentence(details)
        details["notes"] += [f"WARNING: {c}" for c in (t.info.get("selection") or {}).get("cautions") or []]
        if isinstance(t.info.get("fit_check"), dict):
            details["fit_check_accuracy"] = t.info["fit_check"]["accuracy"]
        if warnings := _doubts(t.info):
            details["warning"] = "; ".join(warnings)
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


def _doubts(info: dict[str, Any]) -> list[str]:
    """Why the attacker doubts its own figure: a failed fit check, a kept epoch that saw fewer
    than two passes over the training windows."""
    out = list((info.get("selection") or {}).get("warnings") or [])
    check = info.get("fit_check")
    if isinstance(check, dict) and check["accuracy"] < FIT_CHECK_MIN:
        out.insert(0, f"the attacker is under-trained: it names the right person for only {check['accuracy']:.0%} of "
                      "its own training windows, so this TRIR understates what a better-trained adversary would "
                      "achieve. Train longer (--epochs), choose the epoch on a --dev release, or use a GPU.")
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
    precision = d.get("precision") or {}
    if precision:
        parts.append(f"trained in {precision['training']}, predicting in {precision['prediction']}")
    device = d.get("device") or {}
    if device.get("training"):
        same = device["training"] == device.get("prediction")
        parts.append(f"on {device['training']}" if same else
                     f"trained on {device['training']}, predicting on {device.get('prediction')}")
    if (d.get("window_rotation") or 1) > 1 and d.get("windows_per_epoch") and d.get("training_windows"):
        if d["windows_per_epoch"] < d["training_windows"]:
            parts.append(f"{d['windows_per_epoch']} of {d['training_windows']} windows an epoch, rotating over "
                         f"{d['window_rotation']} epochs")
        else:  # the one-batch floor: no person has enough windows to share out over epochs
            parts.append(f"all {d['training_windows']} windows every epoch (too few a person to rotate)")
    epochs = f"{d.get('chosen_epoch')} of {d.get('epochs')} epochs"
    selection = d.get("selection") or {}
    if selection.get("chosen_passes") is not None:
        epochs += f" ({selection['chosen_passes']:g} passes over the windows)"
    parts.append(epochs + (f" (chosen on dev release {d['dev_release']})" if d.get("dev_release") else ""))
    curve = d.get("curve") or []
    if curve:
        parts.append("loss per epoch " + " ".join(f"{c['loss']:.2f}" for c in curve))
        if all("dev_accuracy" in c for c in curve):
            parts.append("dev accuracy per epoch " + " ".join(f"{c['dev_accuracy']:.2f}" for c in curve))
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


def subject_of(doc: Document, originals: Corpus | None) -> str | None:
    """Who a released document is about: its own subject, else its original's (``None`` when
    neither says)."""
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


def training_curve(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The training curve as the result records it: per epoch the passes over the training
    windows it completes, its mean loss, its dev accuracy (when there was a dev release) and its
    seconds."""
    keep = ("epoch", "passes", "loss", "dev_accuracy", "seconds")
    return [{k: h[k] for k in keep if k in h} for h in history]
