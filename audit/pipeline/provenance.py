"""Provenance: what produced a results file. The one builder of it.

:func:`build_provenance` makes the ``provenance`` of every results file, whoever runs the
components (the spec runner, a command-line driver): one layout, in this order, with the
keys a caller has nothing for left out::

    tool, version, command, title, notes, spec {path, sha256}, argv, python, platform,
    seed, models {llm, embedder}, sampling {documents, ...}, executor {kind, nodes, ...}, params,
    inputs {ROLE: {path, sha256, documents, fingerprint}},
    releases {NAME: {...}}, components {LABEL: {...}}, pairs {KEY: {...}},
    skipped [...], errors [...], gate {max, min, on_point}, started, seconds, <extra>

With an :class:`~audit.pipeline.spec.AuditSpec` the spec-derived keys (title, spec, seed,
models, sampling, gate) come from it. :func:`input_record` describes one input file the
same way for everyone; :func:`canonical` and :func:`digest` make the JSON-friendly values
and the resume keys.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit import __version__
from audit.core.data import Corpus, Release
from audit.core.errors import AnonauditError
from audit.core.files import sha256_file

if TYPE_CHECKING:
    from audit.pipeline.spec import AuditSpec


def canonical(obj: Any) -> Any:
    """A JSON-friendly form of a parameter value (corpora and releases become their fingerprint)."""
    if isinstance(obj, Corpus):
        return {"corpus": obj.name, "fingerprint": obj.fingerprint()}
    if isinstance(obj, Release):
        return {"release": obj.name, "fingerprint": obj.corpus.fingerprint()}
    if isinstance(obj, Mapping):
        return {str(k): canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [canonical(v) for v in obj]
        return sorted(items, key=repr) if isinstance(obj, (set, frozenset)) else items
    if isinstance(obj, Path):
        return str(obj)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return repr(obj)


def digest(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj`` (resume keys)."""
    return hashlib.sha256(json.dumps(canonical(obj), sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def timestamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def input_record(path: str | os.PathLike[str], corpus: Corpus | None = None) -> dict[str, Any]:
    """One input file: its path and sha256, and with the loaded ``corpus`` its number of
    documents and content fingerprint."""
    record: dict[str, Any] = {"path": str(path), "sha256": sha256_file(path)}
    if corpus is not None:
        record.update(documents=len(corpus), fingerprint=corpus.fingerprint())
    return record


def memory_record(source: str, corpus: Corpus) -> dict[str, Any]:
    """One input given in memory (``source``: ``<in memory>: WHAT``): the sha256 of its documents
    as JSONL (what the same documents saved as a JSONL file would have), their number and
    content fingerprint."""
    from audit.io.loaders import jsonl_bytes

    return {"path": source, "sha256": hashlib.sha256(jsonl_bytes(corpus)).hexdigest(), "documents": len(corpus),
            "fingerprint": corpus.fingerprint()}


def component_info(obj: Any) -> dict[str, Any]:
    """What a component says about itself: ``provenance()`` (models, checksums) and ``stats``
    (e.g. how its attacker was trained), when it exposes them."""
    info: dict[str, Any] = {}
    for attr in ("provenance", "stats"):
        value = getattr(obj, attr, None)
        try:
            if callable(value):
                value = value()
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                value = dataclasses.asdict(value)
        except Exception as exc:  # a component's self-description must never break an audit
            value = {"error": f"{type(exc).__name__}: {exc}"}
        if isinstance(value, Mapping) and value:
            info[attr] = canonical(value)
    return info


#: What a run adds to, rather than replaces, in the provenance of the file it writes into:
#: the inputs, releases, components and resume pairs of every run that wrote results there.
MERGED_KEYS = ("inputs", "releases", "components", "pairs")


def _origin(entry: Mapping[str, Any]) -> str:
    """Where a release of a results file came from, in words (its file, or its sanitizer)."""
    if entry.get("source"):
        return str(entry["source"])
    if entry.get("sanitizer"):
        return f"sanitizer {entry['sanitizer']}"
    return "an unknown source"


def release_conflicts(current: Any, mine: Mapping[str, Any]) -> list[str]:
    """Why ``mine`` (release name -> provenance entry, with ``fingerprint``) cannot be written
    into a results file whose releases are ``current``: a name that already stands there for
    another file with other texts. One release name must mean one file in a results file, or
    the report draws the highlights of one file's findings on the other's texts. The same
    texts from another path, or the same file or sanitizer again (edited or re-run), are not
    a conflict."""
    if not isinstance(current, Mapping):
        return []
    out = []
    for name, new in mine.items():
        old = current.get(name)
        if not (isinstance(old, Mapping) and isinstance(new, Mapping)):
            continue
        if not old.get("fingerprint") or old.get("fingerprint") == new.get("fingerprint"):
            continue
        a, b = _origin(old), _origin(new)
        if a != b and not _same_file(a, b):
            out.append(f"release {name!r} is already in this results file from {a}, and this run gives the name "
                       f"to {b}, with other texts: one release name must mean one file (the report would draw "
                       "the findings of one on the texts of the other). Give it another name (--release "
                       "NAME=FILE), or write to another results file")
    return out


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def merge_provenance(current: Mapping[str, Any], mine: Mapping[str, Any]) -> dict[str, Any]:
    """The provenance a run writes over a results file whose provenance is ``current`` (what is
    in the file now, maybe written by a parallel command): its own, with the :data:`MERGED_KEYS`
    of ``current`` kept beside its own (its own win on a clash), and ``runs`` kept. A
    ``current`` that no run built (no ``command``) is replaced. A release name that ``current``
    gives to another file is an :class:`AnonauditError` (:func:`release_conflicts`)."""
    out = dict(mine)
    if not isinstance(current, Mapping) or not current.get("command"):
        return out
    conflicts = release_conflicts(current.get("releases"), out.get("releases") or {})
    if conflicts:
        raise AnonauditError("\n".join(conflicts))
    for key in MERGED_KEYS:
        old, new = current.get(key), out.get(key)
        if isinstance(old, Mapping):
            out[key] = {**old, **(new if isinstance(new, Mapping) else {})}
    if "runs" in current and "runs" not in out:
        out["runs"] = current["runs"]
    return out


def build_provenance(*, command: str, started: float, spec: AuditSpec | None = None,
                     params: Mapping[str, Any] | None = None, inputs: Mapping[str, Any] | None = None,
                     releases: Mapping[str, Any] | None = None, components: Mapping[str, Any] | None = None,
                     pairs: Mapping[str, Any] | None = None, skipped: Sequence[Mapping[str, str]] | None = None,
                     errors: Sequence[Mapping[str, str]] | None = None,
                     executor: Mapping[str, Any] | None = None,
                     extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The provenance of a results file (layout in the module doc).

    ``command``: what ran (``"run"``, ``"demo"``, ``"attack trir"``); ``started``: its start
    (``time.time()``); ``spec``: the audit spec, if there is one; ``params``: the parameters of
    a command without a spec; ``inputs``: role -> :func:`input_record`; ``releases``,
    ``components``, ``pairs``, ``skipped``, ``errors``: what the run did; ``executor``: where its
    per-document work ran (kind, cluster size, items and seconds per stage); ``extra``: anything
    else, added last.
    """
    prov: dict[str, Any] = {"tool": "anonaudit", "version": __version__, "command": command}
    if spec is not None:
        spec_file = Path(spec.source)
        prov["title"] = spec.title
        if spec.report.get("notes"):  # shown beside the verdict: a report rendered later shows them too
            prov["notes"] = [str(n) for n in spec.report["notes"]]
        prov["spec"] = {"path": str(spec_file), "sha256": sha256_file(spec_file) if spec_file.is_file() else None}
    prov.update(argv=sys.argv[1:], python=platform.python_version(), platform=platform.platform())
    if spec is not None:
        prov["seed"] = spec.seed
        prov["models"] = {"llm": spec.llm, "embedder": spec.embedder}
        prov["sampling"] = {"documents": spec.sample_documents, **canonical(spec.sampling_params)}
    if executor is not None:
        prov["executor"] = canonical(executor)
    if params is not None:
        prov["params"] = canonical(params)
    prov["inputs"] = dict(inputs or {})
    for key, value in (("releases", releases), ("components", components), ("pairs", pairs)):
        if value is not None:
            prov[key] = value
    for key, value in (("skipped", skipped), ("errors", errors)):
        if value is not None:
            prov[key] = value
    if spec is not None:
        prov["gate"] = {"max": dict(spec.gate.max), "min": dict(spec.gate.min), "on_point": spec.gate.on_point}
    prov["started"] = timestamp(started)
    prov["seconds"] = round(time.time() - started, 3)
    if extra:
        prov.update(extra)
    return prov
