"""Options and helpers shared by the CLI commands of the core and of every attack.

An attack's ``cli_command`` uses these so that every command spells its inputs the
same way (``--originals FILE``, ``--release NAME=FILE`` repeated, ``--out FILE``,
``--seed``, ``--llm SPEC``) and writes results the same way (merged into an
existing results file, atomically, with provenance).
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import click

from audit import __version__
from audit.core.data import Corpus, Release
from audit.core.results import Result, ResultsFile, grouped_warnings

originals_option = click.option(
    "--originals", type=click.Path(dir_okay=False), required=True,
    help="The original (private) documents: JSONL, CSV, JSON map, TAB JSON.")
releases_option = click.option(
    "--release", "releases", multiple=True, required=True, metavar="NAME=FILE",
    help="A sanitized release, as NAME=FILE or FILE (name = file stem). Repeatable. "
         "A span file {doc_id: [[start, end, replacement?], ...]} is applied to --originals.")
format_option = click.option(
    "--format", "fmt", default=None,
    help="Format of the release files (default: detected from extension and content; "
         "the originals are always detected).")
out_option = click.option(
    "--out", type=click.Path(dir_okay=False), required=True,
    help="Results JSON to write (merged into it if it exists).")
seed_option = click.option("--seed", type=int, default=0, show_default=True, help="Seed for every random choice.")
llm_option = click.option(
    "--llm", "llm_spec", default=None, metavar="SPEC",
    help="LLM: an embedded model name (see `anonaudit models list`), a .gguf file, a Hugging Face "
         "folder, or openai:MODEL@http://host:port/v1. Default: the best embedded model installed.")
no_cache_option = click.option("--no-cache", is_flag=True, help="Do not read or write the LLM cache.")


def load_originals(path: str, fmt: str | None = None) -> Corpus:
    """Load the originals. ``fmt`` is the releases' ``--format``: it applies to the
    originals only when it names a corpus format (a span file cannot be originals)."""
    from audit.io.loaders import load_corpus

    return load_corpus(path, format=None if fmt in (None, "spans", "tri") else fmt)


def load_release_specs(specs: Iterable[str], originals: Corpus | None, fmt: str | None = None) -> list[Release]:
    """Load every ``--release`` value; release names must be unique."""
    from audit.core.errors import AnonauditError
    from audit.io.loaders import load_releases

    releases: list[Release] = []
    for spec in specs:
        releases.extend(load_releases(spec, originals=originals, format=fmt))
    seen: set[str] = set()
    for r in releases:
        if r.name in seen:
            raise AnonauditError(f"two releases are named {r.name!r}: name them with NAME=FILE")
        seen.add(r.name)
        if originals is not None:
            r.check_against(originals)
    return releases


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def provenance(*, command: str, params: dict[str, Any], inputs: dict[str, str | Sequence[str]],
               started: float, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """What produced a set of results: tool version, input hashes, parameters, timing."""
    files: dict[str, Any] = {}
    for role, paths in inputs.items():
        if paths is None:
            continue
        for p in [paths] if isinstance(paths, str) else paths:
            path = p.split("=", 1)[1] if "=" in p and not os.path.exists(p) else p
            if os.path.isfile(path):
                files[f"{role}:{path}"] = {"sha256": file_sha256(path), "bytes": os.path.getsize(path)}
    prov = {
        "tool": "anonaudit",
        "version": __version__,
        "command": command,
        "argv": sys.argv[1:],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "params": params,
        "inputs": files,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 3),
    }
    if extra:
        prov.update(extra)
    return prov


def write_results(out: str | os.PathLike, results: Iterable[Result], prov: dict[str, Any]) -> Path:
    """Merge ``results`` into the results file at ``out`` (created if absent).

    Provenance of each command is kept under ``provenance["runs"]``.
    """
    out = Path(out)
    rf = ResultsFile.load(out) if out.exists() else ResultsFile()
    rf.extend(results)
    runs = list(rf.provenance.get("runs", []))
    runs.append(prov)
    rf.provenance = {"tool": "anonaudit", "version": __version__, "runs": runs}
    return rf.save(out)


def echo_summary(results: Iterable[Result]) -> None:
    """A short table of results on the terminal, then each component's doubts about its own
    figure (``details["warning"]``), once per distinct warning with the releases it covers."""
    results = list(results)
    rows = [(r.name, r.release, r.value, r.ci, r.n, r.baseline, r.beats_baseline) for r in results]
    if not rows:
        return
    w_name = max(len(r[0]) for r in rows)
    w_rel = max(len(r[1]) for r in rows)
    click.echo(f"{'result':<{w_name}}  {'release':<{w_rel}}  {'value':>6}  {'95% CI':>13}  {'n':>5}  baseline")
    for name, rel, value, ci, n, base, beats in rows:
        ci_s = f"[{ci[0]:.3f},{ci[1]:.3f}]" if ci else ""
        base_s = "" if base is None else f"{base:.3g}" + ("" if beats is None else (" beaten" if beats else " NOT beaten"))
        click.echo(f"{name:<{w_name}}  {rel:<{w_rel}}  {value:6.3f}  {ci_s:>13}  {n:5d}  {base_s}")
    for name, text, releases in grouped_warnings(results):
        click.echo(f"WARNING {name} on {', '.join(releases)}: {text}", err=True)
