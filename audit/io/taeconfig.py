"""TAE's ``config.json`` (the Text Anonymization Evaluator's evaluation file) read as an audit spec.

TAE's keys: ``corpus`` (older configs: ``corpus_file_path``), the corpus file; ``anonymizations``,
``{name: span file}``; ``metrics``, ``{metric name: {parameter: value}}``; ``results_file_path``, its
CSV. A metric name is its class name up to the first underscore, case aside ("TPS_TA=4" is TPS);
a name that starts with an underscore is switched off, as TAE skips it. Relative paths are read
from the config's folder (where TAE users run ``python -m tae config.json``).

Each TAE metric becomes the component that computes it here (TAE's definitions for Precision,
Recall and NMI; our models for TPI, TPS, NMI's embedder and TRIR, whose model names TAE gives from the Hugging Face
hub), and every metric that cannot be computed offline, is switched off or duplicates another is
reported as not run with its reason (the spec's ``report.notes``), never as a zero.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from audit.core import safejson
from audit.core.errors import AnonauditError

IC_NOTE = ("TAE scores information content with google-bert/bert-base-uncased, a masked language model not "
           "packaged offline; computed with our causal IC model (levels differ, ranks compare)")
MINILM = ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2")
#: TAE's TRIR parameters -> our trir attack's (the rest are TAE's own caching and logging).
TRIR_PARAMS = {"use_document_curation": "curate", "anonymize_background_knowledge": "augment_ner",
               "use_additional_pretraining": "pretrain", "pretraining_epochs": "pretrain_epochs",
               "finetuning_epochs": "epochs", "finetuning_batch_size": "batch_size",
               "finetuning_learning_rate": "learning_rate"}


def is_tae_config(data: Any) -> bool:
    return isinstance(data, dict) and "anonymizations" in data and "metrics" in data


def read_tae_config(path: str | os.PathLike) -> tuple[dict[str, Any], list[str]]:
    """``(audit spec mapping, notes)`` of the TAE config at ``path``; the notes say what is not run
    and why, and what is computed differently. Paths in the spec are absolute."""
    source = str(path)
    try:
        data = safejson.loads(Path(path).read_text(encoding="utf-8"), source)  # a key given twice is refused
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AnonauditError(f"{source}: not a readable TAE config (JSON): {exc}") from None
    if not is_tae_config(data):
        raise AnonauditError(f"{source}: not a TAE config: expected a JSON object with 'corpus', "
                             "'anonymizations' and 'metrics'")
    base = Path(path).resolve().parent
    corpus = data.get("corpus", data.get("corpus_file_path"))
    if not isinstance(corpus, str) or not corpus.strip():
        raise AnonauditError(f"{source}: 'corpus': expected the path of the corpus file, got {corpus!r}")
    anonymizations = data["anonymizations"]
    if not isinstance(anonymizations, dict) or not anonymizations or \
            not all(isinstance(v, str) for v in anonymizations.values()):
        raise AnonauditError(f"{source}: 'anonymizations': expected {{name: span file path}}, got {anonymizations!r}")
    metrics = data["metrics"]
    if not isinstance(metrics, dict) or not all(isinstance(v, dict) for v in metrics.values()):
        raise AnonauditError(f"{source}: 'metrics': expected {{metric name: {{parameter: value}}}}, got {metrics!r}")
    notes: list[str] = []
    releases = []
    for name, file in anonymizations.items():
        ours = "".join("-" if c in "=/\\" or not c.isprintable() else c for c in name)
        if ours != name:
            notes.append(f"anonymization {name!r} is named {ours!r} here (a release name holds no '=', '/' or '\\')")
        releases.append({"name": ours, "path": _path(base, file)})
    results = data.get("results_file_path")
    out = Path(_path(base, results)).parent if isinstance(results, str) and results.strip() else base / "tae-audit"
    spec: dict[str, Any] = {"title": f"TAE evaluation {Path(path).name}", "seed": 0, "out": str(out),
                            "originals": _path(base, corpus), "releases": releases}
    components = _components(metrics, base, notes, source)
    spec.update({k: v for k, v in components.items() if v})
    if notes:
        spec["report"] = {"notes": [f"From the TAE config {Path(path).name}: {n}" for n in notes]}
    return spec, notes


def _path(base: Path, value: str) -> str:
    return str((base / value).resolve()) if not os.path.isabs(value) else value


def _components(metrics: dict[str, dict], base: Path, notes: list[str], source: str) -> dict[str, Any]:
    out: dict[str, Any] = {"metrics": [], "attacks": []}
    taken: dict[str, tuple[str, dict[str, Any]]] = {}
    for tae_name, params in metrics.items():
        key = tae_name.split("_", 1)[0].lower()
        if not key:
            notes.append(f"{tae_name}: not run, switched off in the config (its name starts with an underscore, "
                         "which TAE skips)")
            continue
        mapped = _metric(key, tae_name, _typed(params, f"{source}: metrics.{tae_name}", notes), base, notes, out)
        if mapped is None:
            continue
        kind, entry = mapped
        first = taken.get(entry["name"])
        if first is not None:
            same = entry["name"] == "tae_recall" and first[1] == entry
            notes.append(f"{tae_name}: computed by {first[0]} (tae_recall's details hold RecallPerEntityType)" if same
                         else f"{tae_name}: not run, {first[0]} already runs {entry['name']} (one configuration "
                              "per metric in an audit)")
            continue
        taken[entry["name"]] = (tae_name, entry)
        out[kind].append(entry)
    return out


#: TAE's parameters that are true or false, and those that are whole numbers.
FLAGS = ("token_level", "include_direct", "include_quasi", "remove_mask_marks", "use_document_curation",
         "anonymize_background_knowledge", "use_additional_pretraining")
WHOLE = ("term_alterning", "min_k", "max_k", "n_clusterings", "n_tries_per_clustering", "pretraining_epochs",
         "finetuning_epochs", "finetuning_batch_size")
WINDOWS = ("finetuning_sliding_window", "pretraining_sliding_window")


def _typed(params: dict, where: str, notes: list[str]) -> dict:
    """``params`` with TAE's flags and counts read as what they mean: ``"false"`` (a string) is
    false, never true as Python's ``bool("false")`` is, and ``"4"`` is 4, each with a note; a value
    of the wrong type (``"maybe"``, a list, 2.5 for a count, a window not written ``N-M``) is an
    :class:`AnonauditError` naming the metric and the key, never dropped without a word."""
    out = dict(params)
    for key, value in params.items():
        if key in FLAGS and not isinstance(value, bool):
            word = value.strip().lower() if isinstance(value, str) else None
            if word not in ("true", "false"):
                raise AnonauditError(f"{where}.{key}: expected true or false, got {value!r}")
            out[key] = word == "true"
            notes.append(f"{where.split(': ', 1)[-1]}.{key}: the text {value!r} read as {word}")
        elif key in WHOLE and (isinstance(value, bool) or not isinstance(value, int)):
            if not (isinstance(value, str) and value.strip().isdigit()):
                raise AnonauditError(f"{where}.{key}: expected a whole number, got {value!r}")
            out[key] = int(value)
            notes.append(f"{where.split(': ', 1)[-1]}.{key}: the text {value!r} read as {int(value)}")
        elif key in WINDOWS:
            window = str(value).split("-") if isinstance(value, (str, int)) and not isinstance(value, bool) else []
            if not (len(window) == 2 and all(w.isdigit() for w in window)):
                raise AnonauditError(f"{where}.{key}: expected a window as \"SIZE-OVERLAP\" (e.g. \"512-128\"), "
                                     f"got {value!r}")
    return out


def _metric(key: str, tae_name: str, params: dict, base: Path, notes: list[str],
            out: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    level = {"token_level": params.get("token_level", True)}
    if key == "precision" and not params.get("weighting_model_name"):
        return "metrics", {"name": "tae_precision", "params": level}
    if key in ("precision", "precisionweighted"):
        notes.append(f"{tae_name}: not run (Precision_IC): {IC_NOTE.split(';')[0]}; our precision metric with "
                     "ic_weighted: true weighs words by the causal model instead")
        return None
    if key in ("recall", "recallperentitytype", "recallperentity"):
        return "metrics", {"name": "tae_recall", "params": {**level, **{
            k: params[k] for k in ("include_direct", "include_quasi") if k in params}}}
    if key in ("tpi", "tps"):
        notes.append(f"{tae_name}: {IC_NOTE}" + ("; replacements compared with all-MiniLM-L6-v2, not TAE's "
                                                 "paraphrase-albert-base-v2" if key == "tps" else ""))
        alt = params.get("term_alterning")
        return "metrics", {"name": {"tps": "tae_tps"}.get(key, key),
                           "params": {"mask_every": alt} if isinstance(alt, int) else {}}
    if key == "nmi":
        model = str(params.get("embedding_model_name", "all-MiniLM-L6-v2")).lower()
        if model not in MINILM:
            notes.append(f"{tae_name}: documents embedded with all-MiniLM-L6-v2 (TAE's default), not {model}, "
                         "which is not packaged offline")
        same = ("min_k", "max_k", "k_multiplier", "n_clusterings", "n_tries_per_clustering", "remove_mask_marks",
                "mask_marks")
        return "metrics", {"name": "tae_nmi", "params": {k: params[k] for k in same if k in params}}
    if key == "trir":
        return _trir(tae_name, params, base, notes, out)
    notes.append(f"{tae_name}: not run, not a TAE metric anonaudit knows (Precision, PrecisionWeighted, Recall, "
                 "RecallPerEntityType, TPI, TPS, NMI, TRIR)")
    return None


def _trir(tae_name: str, params: dict, base: Path, notes: list[str], out: dict[str, Any]):
    bk = params.get("background_knowledge_file_path")
    if not isinstance(bk, str) or not bk.strip():
        notes.append(f"{tae_name}: not run, it names no background_knowledge_file_path")
        return None
    if "background" in out and out["background"] != _path(base, bk):
        notes.append(f"{tae_name}: not run, an audit has one background and another TRIR uses {out['background']}")
        return None
    out["background"] = _path(base, bk)
    ours = {TRIR_PARAMS[k]: v for k, v in params.items() if k in TRIR_PARAMS}
    if params.get("dev_set_column_name"):
        notes.append(f"{tae_name}: dev_set_column_name is not carried over (our attacker chooses its epoch on the "
                     "training windows unless a dev release is given in the spec)")
    for k in ("finetuning_sliding_window", "pretraining_sliding_window"):
        window = str(params.get(k, "")).split("-")
        if len(window) == 2 and all(w.isdigit() for w in window):
            prefix = "pretrain_" if k.startswith("pretraining") else ""
            ours[f"{prefix}window"], ours[f"{prefix}overlap"] = int(window[0]), int(window[1])
    model = params.get("base_model_name", "distilbert-base-uncased")
    notes.append(f"{tae_name}: our TRIR attacker (the TRI paper's budget) on the embedded encoder, not {model}, "
                 "which is not packaged offline")
    return "attacks", {"name": "trir", "params": ours}
