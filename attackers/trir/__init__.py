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

Modules: :mod:`~attackers.trir.attack` (the attack: parameters, fit, evaluate),
:mod:`~attackers.trir.findings` (one finding per document, the result's details and curve),
:mod:`~attackers.trir.training` (the training loop, fit check and masked-LM pre-training),
:mod:`~attackers.trir.steps` (the fine-tuning loop and its one epoch step, here or on each Ray Train worker),
:mod:`~attackers.trir.parse_settings` (spaCy's parse of each text once, cached by content),
:mod:`~attackers.trir.exchange` (the data-parallel gradient exchange: buckets sent during the backward pass),
:mod:`~attackers.trir.distributed` (the whole training on one worker of a cluster),
:mod:`~attackers.trir.texts` (NER-masked copies in a release's masking style, curation),
:mod:`~attackers.trir.sampling` (each epoch's windows: a per-person budget rotating through all of them),
:mod:`~attackers.trir.training_batches` (length-bucketed batches, de-duplication, frozen layers),
:mod:`~attackers.trir.token_windows` (token windows and prediction), :mod:`~attackers.trir.attacker_cache`
(the trained attacker on disk and its cache key), :mod:`~attackers.trir.encoder` (the base
encoder and the torch/transformers settings).
"""

from attackers.trir.attack import TRIRAttack
from attackers.trir.attacker_cache import CONFIG_FILE, FORMAT_VERSION, TRAINING_PARAMS, TrainedTRIR, cache_key
from attackers.trir.encoder import folder_digest, has_mlm_head, quiet_transformers, resolve_base, torch_settings
from attackers.trir.training_batches import dedup_windows, freeze_lower, length_batches
from attackers.trir.sampling import epoch_sampler, person_budget
from attackers.trir.texts import curated, mask_styles, masked_copies, masking_style, ner_masked
from attackers.trir.training import FIT_CHECK_MIN, FIT_CHECK_WINDOWS
from attackers.trir.token_windows import (Windows, make_windows, pad_batch, predict_logits, rank_of, softmax,
                                    special_affixes, split_windows, sum_window_logits)

__all__ = [
    "CONFIG_FILE", "FIT_CHECK_MIN", "FIT_CHECK_WINDOWS", "FORMAT_VERSION", "TRAINING_PARAMS", "TRIRAttack",
    "TrainedTRIR", "Windows", "cache_key", "curated", "dedup_windows", "epoch_sampler", "folder_digest",
    "freeze_lower", "has_mlm_head", "length_batches", "make_windows", "mask_styles", "masked_copies", "masking_style",
    "ner_masked", "pad_batch", "person_budget", "predict_logits", "quiet_transformers", "rank_of", "resolve_base",
    "softmax", "special_affixes", "split_windows", "sum_window_logits", "torch_settings",
]
