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

A bench holds its folder while it runs (:func:`holding`: a lock on ``OUT/.anonaudit-bench.lock``,
through ``filelock``): a second bench into the same folder at the same time is refused before any
work, naming the folder, so two benches never mix their releases in one leaderboard.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from audit.core.data import Corpus
from audit.core.errors import AnonauditError
from audit.core.files import atomic_write_json, sha256_file
from audit.core.results import ResultsFile
from audit.pipeline.bundle_writer import BundleWriter
from audit.pipeline.outputs import bench_outputs, check_outputs, replaces


#: The lock a bench holds on its folder while it runs.
LOCK_NAME = ".anonaudit-bench.lock"
_HELD: dict[str, list[Any]] = {}  # folder -> [its lock, how many holders in this process, made by the hold]


@contextlib.contextmanager
def holding(out: str | Path, *, create: bool = True) -> Iterator[None]:
    """Hold the bench folder ``out`` for the ``with`` block; refused (:class:`AnonauditError`
    naming the folder) when another process holds it. Within one process the hold nests: the
    command line holds the folder from the bench to its leaderboard, and the bench's writer inside
    it. ``create=False``: a folder not there yet is not made here, and is locked by the first
    hold inside this one that makes it (the writer, once the bench's input is checked)."""
    key = str(Path(out).resolve())
    entry = _HELD.setdefault(key, [None, 0, False])
    entry[1] += 1
    try:
        if entry[0] is None and (create or Path(key).is_dir()):
            entry[2] = not Path(key).exists()  # the hold makes the folder: it takes it away if nothing else came
            entry[0] = _lock(Path(key), out)
        yield
    finally:
        entry[1] -= 1
        if not entry[1]:
            _HELD.pop(key)
            if entry[0] is not None:
                entry[0].release()
                _tidy(Path(key), made=entry[2])


def _tidy(folder: Path, *, made: bool) -> None:
    """After the last hold: a bench that wrote nothing (refused, or stopped before its work)
    leaves nothing, neither its lock file nor the folder it made for it."""
    with contextlib.suppress(OSError):
        if [p.name for p in folder.iterdir()] == [LOCK_NAME]:
            (folder / LOCK_NAME).unlink()
            if made:
                folder.rmdir()


def _lock(folder: Path, out: str | Path) -> Any:
    import filelock

    lock = filelock.FileLock(str(folder / LOCK_NAME), timeout=0)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except filelock.Timeout:
        raise AnonauditError(f"{out}: another bench is writing into this folder now (it holds {LOCK_NAME} "
                             "there); wait for it to finish, or give another --out") from None
    except OSError as exc:
        raise AnonauditError(f"{out}: cannot lock the bench folder ({exc.strerror or exc})") from None
    return lock


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
        self._hold: contextlib.ExitStack | None = contextlib.ExitStack()
        self._hold.enter_context(holding(self.out))  # before any work: one bench per folder at a time
        #: The writer of ``OUT/results.json``, handed to the bench's audit.
        self.results = BundleWriter(self.out / "results.json", replace=replace)

    def close(self) -> None:
        """Let go of the folder (:func:`holding`): another bench may write into it now."""
        if self._hold is not None:
            self._hold.close()
            self._hold = None

    def check_same_bench(self, corpora: Mapping[str, Corpus | None]) -> None:
        """Before any work: a folder an earlier bench wrote is resumed only for the same corpus
        (``corpora``: the originals and background, by role, against the fingerprints kept in
        ``OUT/data/``), and a results file there must be a bench's. Otherwise an
        :class:`AnonauditError` names the difference: the folder would hold figures on two
        corpora, or mix a bench with another command's results."""
        results = self.out / "results.json"
        command = _command_of(results)
        if command is not None and command != "bench":
            raise AnonauditError(f"{self.out}: its results.json was written by {command!r}, not a bench; a bench "
                                 "resumes only a folder a bench made: give another --out (out=)")
        for role, corpus in corpora.items():
            meta = self.out / "data" / f"{role}.fingerprint"
            kept = meta.read_text(encoding="utf-8").strip() if meta.is_file() else None
            now = None if corpus is None else corpus.fingerprint()
            if kept is None or kept == now:
                continue
            data = self.out / "data" / f"{role}.jsonl"
            had = sum(1 for line in data.open(encoding="utf-8") if line.strip()) if data.is_file() else 0
            has = "none" if corpus is None else f"{len(corpus)} documents, fingerprint {now[:12]}"
            raise AnonauditError(f"{self.out}: this folder holds a bench made for another corpus: its {role} are "
                                 f"{had} documents (fingerprint {kept[:12]}), this bench's {role}: {has}. A bench "
                                 "resumes only the same corpus: give another --out (out=), or remove the folder")

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


def _command_of(results: Path) -> str | None:
    """The command that wrote the results file ``results`` (its provenance's ``command``), or
    None when there is none or it is not an anonaudit results file (the output guard decides)."""
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    prov = data.get("provenance") if isinstance(data, dict) else None
    command = prov.get("command") if isinstance(prov, dict) else None
    return command if isinstance(command, str) and str(data.get("schema", "")).startswith("anonaudit.results/") \
        else None
