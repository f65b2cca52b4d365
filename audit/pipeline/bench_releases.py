"""How a bench makes one contender's release (:mod:`audit.pipeline.bench`), shared with the
calibration that estimates it first (:mod:`audit.pipeline.bench_estimate`): a release given (a
file, or data in memory), an external command's, a registered sanitizer's, and the key a made
release is reused by.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from audit.core.data import Corpus, Release
from audit.core.errors import AnonauditError
from audit.core.registry import normalise
from audit.pipeline.provenance import canonical, digest
from audit.pipeline.calls import seed_keyword
from audit.runtime.folders import scratch


def release_key(c: Any, docs: Corpus, spec: Any) -> str:
    """What a made release depends on: a registered sanitizer's release with the same key is reused."""
    return digest({"kind": c.kind, "sanitizer": c.sanitizer and normalise(c.sanitizer), "params": canonical(dict(c.params)),
                   "command": c.command, "originals": docs.fingerprint(), "llm": spec.llm, "seed": spec.seed})


def contender_documents(c: Any, spec: Any) -> Corpus:
    """The originals contender ``c`` sanitizes: all of them, or its seeded sample (``c.budget``)."""
    from audit.pipeline.releases import sample_release

    if not c.budget:
        return spec.originals
    return sample_release(Release("originals", spec.originals), c.budget, spec.seed).corpus


def given_release(c: Any, spec: Any) -> Release:
    """A release already made (a file, or data in memory), cut to the sample when the corpus is one."""
    from audit.io.loaders import load_release_file

    originals = spec.originals
    if c.kind == "file":
        (rel,) = load_release_file(c.path, name=c.name, originals=spec.population or originals)
    else:
        rel = c.release
    if spec.population is not None and originals is not None:  # made for the whole corpus: cut to the sample
        rel = Release(rel.name, Corpus([d for d in rel.corpus if d.id in originals], name=rel.name,
                                       source=rel.source), aligned=rel.aligned, source=rel.source)
    return rel


def command_release(c: Any, docs: Corpus, spec: Any, writer: Any) -> Release:
    """The release an external command makes. The command is a program that reads a file and
    writes one: with a writer both are in ``OUT/sanitized``; without, in a temporary folder of
    their own, deleted when the command has run (the one thing a bench in memory writes)."""
    from audit.pipeline.external import run_command

    if writer is not None:
        return run_command(c.command, docs, c.name, writer.sanitized, timeout=spec.command_timeout).release
    with scratch("anonaudit-command-") as tmp:  # the engine's scratch folder (owner-only, removed after)
        return run_command(c.command, docs, c.name, tmp, timeout=spec.command_timeout).release


def sanitize_with(c: Any, docs: Corpus, reg: Any, resources: Any, spec: Any) -> Release:
    """A registered sanitizer on the originals, with the run's seed (its keyword, as every run
    hands it: :func:`~audit.pipeline.spec.seed_keyword`) and LLM where it takes them."""
    cls = reg.get("sanitizer", c.sanitizer)
    params = dict(c.params)
    accepted = cls.param_names()
    if "seed" in params:
        raise AnonauditError(f"sanitizer {c.sanitizer!r}: seed={params['seed']!r} among its parameters: the seed "
                             "is the bench's, one for every sanitizer and attack; give it as the bench's seed")
    # the run's LLM; the collection an adversary searches (the delinker's) is the corpus
    for key, value in (("llm", spec.llm), ("progress", resources.progress),
                       ("collection", spec.population or spec.originals)):
        if key in accepted and key not in params and value is not None:
            params[key] = value
    try:
        san = reg.create("sanitizer", c.sanitizer, **seed_keyword(spec.seed, accepted), **params).use(resources)
    except (TypeError, ValueError) as exc:
        raise AnonauditError(f"sanitizer {c.sanitizer!r}: {exc}") from None
    try:
        rel = san.sanitize(docs, name=c.name)
        own = getattr(san, "warnings", lambda _n: [])(c.name)
    finally:
        san.close()
    if own:
        rel = dataclasses.replace(rel, warnings=tuple(own))
    return rel
