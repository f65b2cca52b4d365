"""The one writer of a bench's folder (issue 59): the bench computes in memory, this writes.

Without an output (``anonaudit.bench()`` without ``out=``) a bench writes nothing: the corpus,
the releases and the results stay in memory (:mod:`audit.pipeline.bench`). With one (``out=``,
``anonaudit bench --out``), a :class:`BenchWriter` is made before any work: it holds the output
guard (none of the folder's files may be an input of the bench, nor an existing file of another
kind unless forced: :func:`audit.pipeline.outputs.check_outputs`) and writes the folder, each
part as soon as it is made, so that a re-run resumes:

- ``data/originals.jsonl`` and ``data/background.jsonl`` (rewritten only when they changed, so a
  re-run's input fingerprints and file dates stay);
- ``sanitized/NAME.jsonl`` per release, with ``NAME.json`` beside it for a release a sanitizer
  or a command made (what made it, its key, its cost: a registered sanitizer whose key is
  unchanged is reused from it); an external command's input and output files are there too;
- ``results.json`` with its summary, manifest and release copies, through the
  :class:`~audit.pipeline.bundle_writer.BundleWriter` it hands to the audit (:attr:`results`);
- ``bench.json``: what preparing each attack cost, kept from run to run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from audit.core.data import Corpus
from audit.core.files import atomic_write_json, sha256_file
from audit.core.results import ResultsFile
from audit.pipeline.bundle_writer import BundleWriter
from audit.pipeline.outputs import bench_outputs, check_outputs, replaces


class BenchWriter:
    """Writes a bench's folder ``out`` (see the module doc). ``inputs``: the bench's input files,
    ``(label, path)``, checked against its outputs (``None``: the caller has checked them);
    ``force`` (named ``force_named`` in messages) writes over a file of another kind.
    ``replace``: ``OUT/results.json`` is a file of another kind the user chose to write over
    (default: ``force`` and such a file is there)."""

    def __init__(self, out: str | Path, *, inputs: Sequence[tuple[str, object]] | None = None, force: bool = False,
                 force_named: str = "--force", replace: bool | None = None):
        self.out = Path(out)
        if inputs is not None:
            check_outputs(bench_outputs(self.out), list(inputs), force=force, force_named=force_named)
        if replace is None:
            replace = bool(force and replaces(self.out / "results.json", "results"))
        self.out.mkdir(parents=True, exist_ok=True)
        #: The writer of ``OUT/results.json``, handed to the bench's audit.
        self.results = BundleWriter(self.out / "results.json", replace=replace)

    @property
    def sanitized(self) -> Path:
        """``OUT/sanitized``: each release as it is made, and an external command's files."""
        return self.out / "sanitized"

    def corpus(self, role: str, corpus: Corpus) -> Path:
        """``OUT/data/ROLE.jsonl`` (rewritten only when the documents changed)."""
        from audit.io.loaders import save_jsonl

        path = self.out / "data" / f"{role}.jsonl"
        meta = path.with_suffix(".fingerprint")
        if not (path.exists() and meta.exists() and meta.read_text().strip() == corpus.fingerprint()):
            save_jsonl(corpus, path)
            meta.write_text(corpus.fingerprint() + "\n")
        return path

    def reusable(self, name: str, key: str) -> dict[str, Any] | None:
        """The cost recorded for release ``name`` when its file and record are there and hold
        ``key`` (the release is reused: it is :meth:`release_path`); ``None`` otherwise."""
        path = self.release_path(name)
        record = path.with_suffix(".json")
        if not (path.exists() and record.exists()):
            return None
        try:
            info = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if isinstance(info, dict) and info.get("key") == key and info.get("sha256") == sha256_file(path):
            return info["cost"]
        return None

    def release_path(self, name: str) -> Path:
        from audit.pipeline.releases import release_file_name

        return self.sanitized / release_file_name(name)

    def release(self, name: str, corpus: Corpus, record: Mapping[str, Any] | None = None) -> Path:
        """Write release ``name`` (its documents) to ``sanitized/``, with its ``record`` beside it
        when given (its ``sha256`` set to the file's, in the place the record gives it); the
        file's path."""
        from audit.io.loaders import save_jsonl

        path = self.release_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_jsonl(corpus, path)
        if record is not None:
            atomic_write_json(path.with_suffix(".json"), {**record, "sha256": sha256_file(path)})
        return path

    def reuse(self, reuse: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """This run's attack preparations, completed by those an earlier run measured (a run that
        reused every result prepared nothing); kept in ``OUT/bench.json``."""
        path = self.out / "bench.json"
        try:
            old = json.loads(path.read_text(encoding="utf-8")).get("reuse", {}) if path.exists() else {}
        except (OSError, ValueError, AttributeError):
            old = {}
        merged = {**{k: v for k, v in old.items() if isinstance(v, dict)}, **reuse}
        atomic_write_json(path, {"reuse": merged})
        return merged

    def amend_results(self, change: Callable[[ResultsFile], ResultsFile], current: ResultsFile) -> None:
        """Apply ``change`` to ``OUT/results.json`` under its lock (``current``: the results to
        start from if the file is gone)."""
        path = self.results.path
        if path.is_file():
            ResultsFile.update(path, lambda found: change(found if found is not None else current))
