"""Experiment trackers: an audit's spec, parameters, figures, report and results in MLflow.

    results.log_mlflow("file:./mlruns")      # or anonaudit run audit.yaml --mlflow file:./mlruns

One MLflow run per call, through MLflow's own client (``MlflowClient``: no global active run):

- **parameters**: the seed, the title, the releases, and every component's parameters
  (``attack.phrase_search.max_n``...); the **spec** as the run recorded it (components with their
  parameters, releases by name and checksum, models, gate) as ``spec.json``;
- **metrics**, one group per release x result: ``RELEASE/RESULT/value``, ``/ci_low``,
  ``/ci_high``, ``/n`` and ``/baseline`` (names MLflow cannot hold are made safe and told apart
  by a short hash);
- **artefacts**: the report (``report.html`` with its findings CSV) and the results bundle
  (``results/``: ``results.json`` and ``summary.csv``).

Nothing private goes to a tracker unless asked: by default the shareable edition's rules apply
(:mod:`reports.shareable`: no original text, span, guess or predicted identity, no file path,
documents by pseudonym unless ``keep_ids``); ``private=True`` logs the internal report and the
full bundle (with the release copies). :func:`check_mlflow` reaches the tracking store first, so
a tracker that is not installed or cannot be reached is a clear error before any audit starts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from audit.core.errors import AnonauditError
from audit.runtime.folders import scratch

DEFAULT_EXPERIMENT = "anonaudit"
INSTALL = "pip install 'anonaudit[mlflow]'"
#: What MLflow accepts in a metric or parameter name.
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. /:]")
#: Seconds a tracking server may take to answer the check before the audit.
CHECK_TIMEOUT = 10
#: The longest experiment name a tracking store holds (MLflow's SQL stores: 500 characters).
MAX_EXPERIMENT = 500


def check_experiment(name: object, what: str = "--mlflow-experiment") -> str:
    """``name`` if an MLflow experiment can have it: a text of 1 to :data:`MAX_EXPERIMENT`
    characters, not only spaces, without control characters; else an :class:`AnonauditError`
    naming ``what``. Checked before the work: the run is logged only at its end."""
    if not isinstance(name, str):
        raise AnonauditError(f"{what}: give the experiment's name as a text, got {type(name).__name__}")
    if not name.strip():
        raise AnonauditError(f"{what}: the experiment's name is empty")
    if len(name) > MAX_EXPERIMENT:
        raise AnonauditError(f"{what}: the experiment's name has {len(name):,} characters; a tracking store "
                             f"holds at most {MAX_EXPERIMENT}")
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        raise AnonauditError(f"{what}: the experiment's name holds a control character (a line break, a tab...)")
    return name


def _mlflow() -> Any:
    try:
        import mlflow
    except ImportError:
        raise AnonauditError(f"MLflow is not installed: {INSTALL} (the MLflow client, mlflow-skinny)") from None
    return mlflow


def _file_store(target: str) -> bool:
    return target.startswith("file:") or "://" not in target and not target.startswith(("databricks", "sqlite"))


@contextmanager
def _environment(target: str, *, check: bool = False):
    """MLflow's settings while anonaudit talks to it: a ``file:`` store the user named is allowed
    (MLflow 3 keeps it in maintenance and refuses it unless ``MLFLOW_ALLOW_FILE_STORE``), and
    while checking, HTTP requests go without MLflow's retries (minutes of backoff)."""
    keys = {"MLFLOW_ALLOW_FILE_STORE": "true"} if _file_store(target) else {}
    if check:
        keys.update({"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(CHECK_TIMEOUT)})
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def check_mlflow(uri: str | None = None) -> str:
    """Reach the MLflow tracking store at ``uri`` (default: MLflow's own, ``MLFLOW_TRACKING_URI``)
    and return it; an :class:`AnonauditError` naming it and why when MLflow is not installed or the
    store cannot be used. Call it before the work."""
    mlflow = _mlflow()
    from mlflow.tracking import MlflowClient

    target = uri or mlflow.get_tracking_uri()
    try:
        with _environment(target, check=True):
            MlflowClient(tracking_uri=target).search_experiments(max_results=1)
    except Exception as exc:  # noqa: BLE001 - whatever MLflow raises, the user reads one line
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:700]
        raise AnonauditError(f"MLflow tracking at {target}: cannot be used ({why})") from None
    return target


def _safe(name: str) -> str:
    """``name`` as MLflow accepts it: other characters become ``_``, and a hash of the original
    keeps two names that differ only there apart."""
    safe = _UNSAFE.sub("_", name)
    return safe if safe == name else f"{safe}_{hashlib.sha256(name.encode()).hexdigest()[:6]}"


def metrics_of(results: Sequence[Any]) -> dict[str, float]:
    """One metric per release x result and its interval, n and baseline (see the module doc)."""
    out: dict[str, float] = {}
    for r in results:
        key = f"{_safe(r.release)}/{_safe(r.name)}"
        out[f"{key}/value"] = float(r.value)
        if r.ci is not None:
            out[f"{key}/ci_low"], out[f"{key}/ci_high"] = float(r.ci[0]), float(r.ci[1])
        out[f"{key}/n"] = float(r.n)
        if r.baseline is not None:
            out[f"{key}/baseline"] = float(r.baseline)
    return out


def spec_of(provenance: Mapping[str, Any]) -> dict[str, Any]:
    """What the run recorded of its spec, from a provenance (pass the shareable one: no paths)."""
    keep = ("title", "command", "seed", "models", "sampling", "executor", "gate")
    spec = {k: provenance[k] for k in keep if k in provenance}
    spec["components"] = {k: {"kind": v.get("kind"), "name": v.get("name"), "params": v.get("params", {})}
                          for k, v in (provenance.get("components") or {}).items() if isinstance(v, Mapping)}
    spec["releases"] = {k: {f: v.get(f) for f in ("sha256", "documents", "sanitizer", "aligned") if f in v}
                        for k, v in (provenance.get("releases") or {}).items() if isinstance(v, Mapping)}
    return spec


def params_of(spec: Mapping[str, Any]) -> dict[str, str]:
    """MLflow parameters: seed, title, releases, and each component's parameters."""
    out = {"seed": spec.get("seed"), "title": spec.get("title"), "releases": ", ".join(spec.get("releases") or {})}
    for label, comp in (spec.get("components") or {}).items():
        for k, v in (comp.get("params") or {}).items():
            out[_safe(f"{label.replace(':', '.')}.{k}")] = v
    return {k: json.dumps(v, sort_keys=True, default=str)[:6000] if not isinstance(v, str) else v[:6000]
            for k, v in out.items() if v is not None}


def _artefacts(results: Any, folder: Path, *, private: bool, keep_ids: bool, spec: Mapping[str, Any]) -> None:
    """The report, the results bundle and spec.json, written into ``folder``."""
    from reports.shareable import shareable

    (folder / "spec.json").write_text(json.dumps(spec, indent=1, sort_keys=True, default=str), encoding="utf-8")
    if private:
        results.save(folder / "results" / "results.json", force=True)
        results.report(folder / "report.html", force=True)
    else:
        (folder / "results").mkdir()
        shared = shareable(results.file, keep_ids=keep_ids)
        shared.save(folder / "results" / "results.json")
        results.report(folder / "report.html", shareable=True, keep_ids=keep_ids, force=True)


def log_mlflow(results: Any, uri: str | None = None, *, experiment: str = DEFAULT_EXPERIMENT,
               run_name: str | None = None, private: bool = False, keep_ids: bool = False,
               extra: Sequence[str | os.PathLike] = (), tags: Mapping[str, str] | None = None) -> str:
    """Log ``results`` (:class:`~anonaudit.Results`) to MLflow as one run and return its id (see the
    module doc for what is logged). ``extra``: more files to log beside them (a bench's leaderboard)."""
    check_experiment(experiment, "experiment=")
    target = check_mlflow(uri)
    from mlflow.tracking import MlflowClient

    with _environment(target):
        return _log(MlflowClient(tracking_uri=target), target, results, experiment=experiment, run_name=run_name,
                    private=private, keep_ids=keep_ids, extra=extra, tags=tags)


def _log(client: Any, target: str, results: Any, *, experiment: str, run_name: str | None, private: bool,
         keep_ids: bool, extra: Sequence[str | os.PathLike], tags: Mapping[str, str] | None) -> str:
    from mlflow.entities import Metric, Param, RunTag

    from reports.shareable import shareable

    found = client.get_experiment_by_name(experiment)
    exp_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    rf = results.file if private else shareable(results.file, keep_ids=keep_ids)  # release names too
    prov = rf.provenance
    spec = spec_of(prov)
    run = client.create_run(exp_id, run_name=run_name or str(spec.get("title") or "audit"),
                            tags={"anonaudit.version": str(prov.get("version", "")),
                                  "anonaudit.edition": "internal" if private else "shareable", **(tags or {})})
    run_id = run.info.run_id
    try:
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, 0) for k, v in metrics_of(rf.results).items()]
        params = [Param(k, v) for k, v in params_of(spec).items()]
        client.log_batch(run_id, tags=[RunTag("anonaudit.outcome", str(len(results.file.results)))])
        for i in range(0, len(params), 100):  # MLflow's limits per batch: 100 parameters, 1000 metrics
            client.log_batch(run_id, params=params[i:i + 100])
        for i in range(0, len(metrics), 1000):
            client.log_batch(run_id, metrics=metrics[i:i + 1000])
        with scratch("anonaudit-mlflow-") as tmp:  # the engine's scratch folder (owner-only, removed after)
            _artefacts(results, tmp, private=private, keep_ids=keep_ids, spec=spec)
            client.log_artifacts(run_id, str(tmp))
        for path in extra:
            client.log_artifact(run_id, os.fspath(path))
    except Exception as exc:
        client.set_terminated(run_id, "FAILED")
        if isinstance(exc, AnonauditError):
            raise
        raise AnonauditError(f"MLflow tracking at {target}: logging run {run_id} failed ({exc})") from None
    client.set_terminated(run_id, "FINISHED")
    return run_id
