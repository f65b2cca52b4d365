"""The one writer of a run's results bundle (issue 59): the runner computes in memory, this
writes.

The runner (:class:`audit.pipeline.runner.Audit`) holds its results and the release texts in
memory and touches no file of its output; when it has an output (``out``), it hands what it has
to a :class:`BundleWriter` at each checkpoint: once the releases are made (a sanitizer's output
is kept at once: a run killed afterwards does not sanitize again), after every (component,
release) pair, and at the end. Each :meth:`BundleWriter.save` is one step: the release copies
not yet on disk, then the results file, its summary and its manifest, merged into what the file
holds now under its lock (:meth:`audit.core.results.ResultsFile.update`), so that a re-run
resumes from it and another command writing into the same file meanwhile keeps its results.

The writer holds the output guard: it is made before any work, and refuses a results file where
the summary or the manifest beside it could not be written, or, given the run's ``inputs``, one
that is an input or an existing file of another kind (:func:`audit.pipeline.outputs.check_outputs`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from audit.core.bundle import check_manifest_target
from audit.core.files import atomic_write, sha256_file
from audit.core.results import ResultsFile
from audit.core.summary import check_summary_target
from audit.pipeline.outputs import check_outputs, results_outputs


class BundleWriter:
    """Writes a run's bundle at ``path`` (a results file). ``inputs``: the run's inputs, ``(label,
    path)``, checked against it as every command's outputs are (``None``: the caller has checked
    them); ``force`` (named ``force_named`` in messages) writes over a file of another kind.
    ``replace``: the results file holds a file of another kind the user chose to write over: it
    is replaced by the first save, not read (default: ``force`` and such a file is there)."""

    def __init__(self, path: str | os.PathLike[str], *, inputs: Sequence[tuple[str, object]] | None = None,
                 force: bool = False, force_named: str = "--force", named: str = "out", replace: bool | None = None):
        from audit.pipeline.outputs import replaces

        self.path = Path(path)
        if inputs is not None:
            check_outputs(results_outputs(self.path, named), list(inputs), force=force, force_named=force_named)
        self.replace = bool(force and replaces(self.path, "results")) if replace is None else replace
        self.path.parent.mkdir(parents=True, exist_ok=True)
        check_summary_target(self.path)  # before any work: the summary beside the results must be writable
        check_manifest_target(self.path)  # and so must the bundle's manifest
        self._written: set[str] = set()

    @property
    def copies_name(self) -> str:
        """The folder of the release copies, relative to the results file's: ``releases`` beside
        ``results.json``, ``NAME.releases`` beside any other ``NAME.json`` (two results files never
        share copies)."""
        return "releases" if self.path.name == "results.json" else f"{self.path.stem}.releases"

    @property
    def copies_folder(self) -> Path:
        return self.path.parent / self.copies_name

    def previous(self) -> ResultsFile:
        """What the results file holds now (an earlier run's results, to resume from); empty when
        there is none, or when it is a file of another kind to be replaced."""
        return ResultsFile.load(self.path) if self.path.exists() and not self.replace else ResultsFile()

    def save(self, merge: Callable[[ResultsFile | None], ResultsFile], copies: Mapping[str, bytes]) -> ResultsFile:
        """Write the release ``copies`` (path relative to the results folder -> bytes) not yet on
        disk, then the results file ``merge`` makes from what the file holds now (its summary and
        manifest with it), under the file's lock; what was written."""
        for relative, data in copies.items():
            if relative in self._written:
                continue
            target = self.path.parent / relative
            # a copy already there with these bytes stays (the release's own input file, or a
            # sanitizer's output reused from an earlier run)
            if not (target.is_file() and sha256_file(target) == hashlib.sha256(data).hexdigest()):
                atomic_write(target, data)
            self._written.add(relative)
        written = ResultsFile.update(self.path, merge, replace=self.replace)
        self.replace = False  # replaced once: from now on it is this run's results file
        return written
