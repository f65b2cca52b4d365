"""The releases of an audit: loaded from files or made by sanitizers, then written beside the results.

A file release travels as a :class:`~audit.pipeline.spec.ReleaseSpec` (name, path and format
apart) to :func:`audit.io.loaders.load_release_file`. A sanitizer release is made by the
registered sanitizer, which gets the spec's seed and models like any component, the run's
:class:`~audit.models.resources.Resources` and is closed once it has run; its output is kept
in ``OUT/releases/NAME-HASH.jsonl`` and reused while its key (sanitizer, parameters, originals)
and the file's checksum are unchanged.

Every release is written beside the results as ``NAME-HASH.jsonl`` (:func:`release_file_name`:
the name made safe for a file system, plus the first 8 hex digits of the sha256 of the exact
name), so two names that differ only in characters a file name cannot hold (``"rel a"`` and
``"rel_a"``), or only in case, never share a file. The provenance records each file's path and
sha256, which the report checks before it shows a text.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from audit.core.data import Corpus, Document, Release, Span
from audit.core.errors import AnonauditError, DataError, Problem
from audit.core.files import sha256_file
from audit.core.safejson import check_tree
from audit.core.registry import Registry, normalise
from audit.pipeline.provenance import canonical, component_info, digest, release_conflicts
from audit.pipeline.calls import as_given, component_params, seed_keyword
from audit.pipeline.spec import IN_MEMORY, NOT_IN_KEY, AuditSpec


def build_releases(spec: AuditSpec, originals: Corpus | None, previous: Mapping[str, Any], *,
                   registry: Registry, resources: Any, progress: bool,
                   echo: Callable[[str], None], copies_name: str = "releases", reuse_from: Path | None = None,
                   results: Path | None = None) -> tuple[list[Release], dict[str, Any], dict[str, bytes]]:
    """Every release of ``spec``, its provenance entry and its copy (JSONL bytes, by the path
    relative to the results file that the provenance records: ``COPIES_NAME/NAME-HASH.jsonl``,
    where the run's writer puts them, :mod:`audit.pipeline.bundle_writer`). Nothing is written
    here. ``previous`` is the ``releases`` provenance of an earlier run into the same results file,
    whose copies are in ``reuse_from`` (a sanitizer's output is reused from there when its key is
    unchanged); ``results``: the results file they belong to (named in errors). A name
    ``previous`` gives to another file is an error."""
    from audit.io.loaders import load_release_file

    prov: dict[str, Any] = {}
    releases: list[Release] = []
    for rs in spec.releases:
        if rs.release is not None:  # given in memory: audited as it is
            rel, prov[rel_name(rs)] = _given(rs, originals)
            releases.append(rel)
            continue
        if rs.path is not None:
            for rel in load_release_file(rs.path, name=rs.name, originals=originals, format=rs.format,
                                         columns=dict(rs.columns) or None):
                releases.append(rel)
                prov[rel.name] = {"source": str(rs.path), "sha256": sha256_file(rs.path),
                                  **({"notes": list(rel.notes)} if rel.notes else {}),
                                  # a name nobody chose (often a person's): the shareable edition hides it
                                  **({"name_from": "file"} if rs.name is None and rel.name == rs.path.stem else {})}
                for note in rel.notes:
                    echo(f"  release {rel.name}: {note}")
            continue
        assert originals is not None and rs.sanitizer is not None and rs.name is not None
        cls = registry.get("sanitizer", rs.sanitizer)
        params = component_params(spec, cls.param_names(), rs.params, progress=progress, sampling=False)
        seed = seed_keyword(spec.seed, cls.param_names())
        keyed = {k: v for k, v in as_given(rs.params, seed, params).items() if k not in NOT_IN_KEY}
        key = digest({"sanitizer": normalise(rs.sanitizer), "params": keyed, "originals": originals.fingerprint()})
        cached = None if reuse_from is None else reuse_from / release_file_name(rs.name)
        old = previous.get(rs.name, {})
        if cached and old.get("key") == key and cached.exists() and old.get("sha256") == sha256_file(cached):
            rel = read_release_jsonl(cached, rs.name, sanitizer=normalise(rs.sanitizer))
            echo(f"  release {rs.name}: reused {cached.name} ({len(rel)} documents)")
            info = {k: old[k] for k in ("stats", "provenance", "self_check") if k in old}  # what the run that made it said
        else:
            rel, info = _sanitized(spec, rs, originals, params, seed, registry=registry, resources=resources,
                                   echo=echo)
        releases.append(rel)
        prov[rs.name] = {"sanitizer": normalise(rs.sanitizer), "params": canonical(keyed), "key": key, **info}
    names = [r.name for r in releases]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise AnonauditError(f"{spec.source}: two releases are named {sorted(dup)[0]!r}; give each a name")
    # One name, one file in a results file, checked before any copy is written over another's.
    conflicts = release_conflicts(previous, {r.name: {**prov[r.name], "fingerprint": r.corpus.fingerprint()}
                                             for r in releases})
    if conflicts:
        where = results or spec.source
        raise AnonauditError("\n".join(f"{where}: {c}" for c in conflicts))
    # Every release is kept beside the results, so the report can show sanitized texts.
    copies = {}
    for rel in releases:
        path, data = _copy_beside(rel, prov[rel.name], originals, copies_name, reuse_from, echo)
        copies[path] = data
    return releases, prov, copies


def rel_name(rs: Any) -> str:
    """The name of a release given in memory: its entry's, else its own."""
    return str(rs.name or rs.release.name)


def _given(rs: Any, originals: Corpus | None) -> tuple[Release, dict[str, Any]]:
    """A release given in memory, named as its entry says, with its ids checked against the
    originals, and its provenance entry (what it was; the sha256 of its documents as JSONL)."""
    from audit.io.loaders import check_release_ids, jsonl_bytes

    label, name = str(rs.label or rs.name), rel_name(rs)
    corpus = Corpus(list(rs.release.corpus), name=name, source=label)
    rel = dataclasses.replace(rs.release, name=name, corpus=corpus, source=label)
    if originals is not None and rel.aligned:
        check_release_ids(corpus, originals, label)
    return rel, {"source": f"{IN_MEMORY}: {label}", "sha256": hashlib.sha256(jsonl_bytes(corpus)).hexdigest()}


def _sanitized(spec: AuditSpec, rs: Any, originals: Corpus, params: dict[str, Any], seed: Mapping[str, int], *,
               registry: Registry, resources: Any, echo: Callable[[str], None]) -> tuple[Release, dict[str, Any]]:
    """Release ``rs`` made now by its sanitizer (given ``params`` and the audit's ``seed``:
    :func:`~audit.pipeline.spec.seed_keyword`), and what the sanitizer said of it (counts,
    timings, its self-check)."""
    t0 = time.time()
    # Said before the work: loading the sanitizer's models (spaCy's, Presidio's) can take 20 s
    # before its own progress bar starts.
    echo(f"  release {rs.name}: sanitizing {len(originals)} documents with {rs.sanitizer} (its models load first)")
    try:
        san = registry.create("sanitizer", rs.sanitizer, **seed, **params).use(resources)
    except (TypeError, ValueError) as exc:  # a template, labels or a size the sanitizer refuses
        raise AnonauditError(f"{spec.source}: release {rs.name!r}: sanitizer {rs.sanitizer!r}: {exc}") from None
    try:
        rel = san.sanitize(originals, name=rs.name)
        info = component_info(san)  # its counts and timings (LLM requests, fallbacks...)
        own = getattr(san, "warnings", lambda _name: [])(rs.name)  # its self-check: degenerate?
        if own:
            info["self_check"] = own
    finally:
        with contextlib.suppress(Exception):  # releasing is best effort
            san.close()
    if rel.name != rs.name:
        rel = dataclasses.replace(rel, name=rs.name)
    echo(f"  release {rs.name}: sanitized {len(rel)} documents with {rs.sanitizer} "
         f"in {time.time() - t0:.1f}s")
    return rel, info


def _copy_beside(rel: Release, prov: dict[str, Any], originals: Corpus | None, copies_name: str,
                 folder: Path | None, echo: Callable[[str], None]) -> tuple[str, bytes]:
    """The copy of ``rel`` to keep beside the results (its JSONL bytes, or the bytes of its own
    input file when that file is where the copy goes, in ``folder``: it is never written over);
    say its doubts and record in ``prov`` where the copy is (relative to the results file), its
    size and hashes."""
    from audit.io.loaders import jsonl_bytes

    doubts = [f"release {rel.name!r}: {w}" for w in prov.get("self_check", [])]
    for doubt in doubts:  # the sanitizer's self-check names counts only (defenders.selfcheck)
        echo(f"  warning: {doubt}")
    if originals is not None:
        rel.check_against(originals)
        against = rel.doubts_against(originals)
        if against:  # they quote the originals and list document ids: a log gets their count only
            echo(f"  warning: {withheld_warnings(rel.name, len(against))}")
        doubts += against
    data = jsonl_bytes(rel.corpus)
    relative = f"{copies_name}/{release_file_name(rel.name)}"
    path = None if folder is None else folder / release_file_name(rel.name)
    if path is not None and rel.source and path.exists() and os.path.exists(rel.source) \
            and os.path.samefile(rel.source, path):
        data = path.read_bytes()  # the input itself (e.g. --out beside it): kept as it is
    prov.update({"path": relative, "documents": len(rel), "aligned": rel.aligned,
                 "fingerprint": rel.corpus.fingerprint(), "sha256": hashlib.sha256(data).hexdigest()})
    if doubts:
        prov["warnings"] = doubts
    return relative, data


def withheld_warnings(name: str, count: int) -> str:
    """What a log says of ``count`` warnings on release ``name`` that quote the originals (a
    recorded replacement that contradicts them, the ids of the documents it leaves out): how many,
    and where their text is, never the text (a CI log is published)."""
    return (f"release {name!r}: {count} warning(s) against the originals, not printed because they quote "
            f"them or name documents: see the provenance (releases -> {name!r} -> warnings) of the results "
            "file and its report, or run anonaudit -v to print them")


def sample_release(release: Release, k: int | None, seed: int) -> Release:
    """A seeded sample of ``k`` documents (the same ids for every release of an audit)."""
    if k is None or len(release) <= k:
        return release
    ids = sorted(release.corpus.ids)
    keep = set(random.Random(f"{seed}:sample").sample(ids, k))
    docs = [d for d in release.corpus if d.id in keep]
    return dataclasses.replace(release, corpus=Corpus(docs, name=release.corpus.name, source=release.source))


def write_release_jsonl(release: Release | Corpus, path: Path) -> Path:
    """Write documents (with their recorded spans) as JSONL, atomically."""
    from audit.io.loaders import save_jsonl

    return save_jsonl(release.corpus if isinstance(release, Release) else release, path)


def read_release_jsonl(path: Path, name: str, sanitizer: str | None = None) -> Release:
    """Read back a release written by :func:`write_release_jsonl`; a damaged file (truncated,
    edited) is a :class:`DataError` naming its line."""
    docs = []
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        d = check_tree(json.loads(line), str(path), line=n)
                        docs.append(Document(str(d["id"]), d["text"], d.get("subject"),
                                             tuple(Span.from_dict(s) for s in d.get("spans", ())),
                                             d.get("meta") or {}))
                    except DataError:
                        raise
                    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
                        raise DataError(Problem(str(path), f"damaged release file ({type(exc).__name__}: {exc}); "
                                                           "delete it and run again", line=n)) from None
    except UnicodeDecodeError:
        raise DataError(Problem(str(path), "damaged release file (not UTF-8); delete it and run again")) from None
    return Release(name=name, corpus=Corpus(docs, name=name, source=str(path)), sanitizer=sanitizer,
                   source=str(path))


def safe_name(name: str) -> str:
    """A release name as a file name (not unique: see :func:`release_file_name`)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in name)[:80] or "release"


def release_file_name(name: str, suffix: str = ".jsonl") -> str:
    """The file a release (or a file made for it, ``suffix``) is written to: ``SAFE-HASH.jsonl``,
    unique per exact name (``HASH``: the first 8 hex digits of the sha256 of the name). The one
    way a name becomes a file name: whatever the name holds (a separator, ``..``, an absolute
    path), the result is one plain file name in the folder it is joined to (names are checked
    before any work by :func:`audit.core.data.release_name_problem`)."""
    return f"{safe_name(name).lstrip('.') or 'release'}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}{suffix}"
