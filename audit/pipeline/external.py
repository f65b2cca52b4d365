"""The sanitizer under test as an external command, in any language, and the checks every
release under test passes before it is attacked.

``anonaudit bench --command "python my_sanitizer.py {input} {output}"``: the originals are
written to ``{input}`` as JSONL (``id``, ``text``, ``subject``, ``spans``: the guide's JSONL format),
the command runs (no shell: the line is split as a shell would, then run directly), and
``{output}`` is read in any of the guide's input formats (docs/how-to/input-formats.md) (JSONL with the sanitized
texts, a span file applied to the originals, CSV, Parquet...).

What comes back is validated against the originals (:func:`validate_release`): missing, extra
or duplicated ids, empty texts, a document longer than its original by more than its recorded
replacements explain, and recorded spans that do not match the texts. Each problem names the
document; all are listed at once (a :class:`~audit.core.errors.DataError`: exit 2).
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from audit.core.data import Corpus, Release
from audit.core.errors import AnonauditError, DataError, Problem, Problems
from audit.runtime.deadline import terminate_as_interrupt

#: The placeholders a command line must hold.
PLACEHOLDERS = ("{input}", "{output}")

#: Seconds an external command may run when no timeout is given (``--timeout``,
#: ``command_timeout=``): a hung command is stopped, and the message names this default.
DEFAULT_COMMAND_TIMEOUT = 3600.0


@dataclass(frozen=True)
class CommandRun:
    """What one run of an external sanitizer did: its release, and how long it took."""

    release: Release
    seconds: float
    output: Path


def check_command(command: str) -> list[str]:
    """The command line as arguments; an error when it cannot be split or lacks a placeholder."""
    missing = [p for p in PLACEHOLDERS if p not in command]
    if missing:
        raise AnonauditError(f"--command {command!r}: it must contain {' and '.join(missing)} (where the "
                             "documents are written and where the command writes its release)")
    try:
        args = shlex.split(command)
    except ValueError as exc:
        raise AnonauditError(f"--command {command!r}: cannot be split into arguments ({exc})") from None
    if not args:
        raise AnonauditError("--command is empty")
    return args


def check_timeout(value: object, what: str = "--timeout") -> float | None:
    """A time limit in seconds: None (no limit) or a finite number above 0. NaN (which compares
    false with every number, so no limit would ever be reached), infinity, 0, a negative number
    and anything not a number are refused, naming ``what``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AnonauditError(f"{what}: give a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise AnonauditError(f"{what}: give a number of seconds above 0 (no limit: leave it out), got {value!r}")
    return float(value)


def run_command(command: str, originals: Corpus, name: str, folder: Path, *, timeout: float | None = None,
                output_format: str | None = None) -> CommandRun:
    """Run the external sanitizer on ``originals`` in ``folder`` and return its validated release.

    The input file is ``folder/STEM.command-input.jsonl``, the output ``folder/STEM.command-output``
    (``STEM``: the name made a plain file name, :func:`~audit.pipeline.releases.release_file_name`;
    the output's format is told by its content, or ``output_format``). The command's own messages go to
    the terminal; a non-zero exit, a missing output or a release that fails
    :func:`validate_release` is an :class:`AnonauditError` naming the command or the document."""
    from audit.io.loaders import load_release_file, save_jsonl
    from audit.pipeline.releases import release_file_name

    args = check_command(command)
    timeout = check_timeout(timeout)
    default = timeout is None
    timeout = DEFAULT_COMMAND_TIMEOUT if default else timeout
    folder.mkdir(parents=True, exist_ok=True)
    inp = folder / release_file_name(name, ".command-input.jsonl")
    out = folder / release_file_name(name, ".command-output")
    save_jsonl(originals, inp)
    if out.exists():
        out.unlink()  # never read a previous run's output as this run's
    argv = [a.replace("{input}", str(inp)).replace("{output}", str(out)) for a in args]
    t0 = time.perf_counter()
    with terminate_as_interrupt():  # SIGTERM stops the command's whole group too, as Ctrl-C does
        returncode = _run_group(command, argv, timeout, {**os.environ, "ANONAUDIT_BENCH_INPUT": str(inp),
                                                         "ANONAUDIT_BENCH_OUTPUT": str(out)}, default=default)
    seconds = time.perf_counter() - t0
    if returncode != 0:
        raise AnonauditError(f"--command {command!r} exited with status {returncode} (its messages are "
                             "above); the comparison points already made are kept")
    if not out.is_file() or out.stat().st_size == 0:
        raise AnonauditError(f"--command {command!r} exited 0 but wrote nothing to {{output}} ({out})")
    try:
        (release,) = load_release_file(out, name=name, originals=originals,
                                       format=output_format or _read_back_format(out, originals))
    except ValueError:
        raise AnonauditError(f"{out}: the command wrote more than one release (a TRI table?); write one") from None
    validate_release(release, originals, source=str(out))
    return CommandRun(release=release, seconds=seconds, output=out)


def _run_group(command: str, argv: list[str], timeout: float | None, env: dict[str, str], *,
               default: bool = False) -> int:
    """Run ``argv`` in a process group of its own and return its exit status. When it runs past
    ``timeout``, or this process is interrupted, the whole group is killed: the command and every
    process it started (a shell script's children, a pool of workers), not the command alone;
    then an :class:`AnonauditError` says it was stopped."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=env,  # noqa: S603
                                start_new_session=os.name == "posix")
    except FileNotFoundError:
        raise AnonauditError(f"--command {command!r}: no program {argv[0]!r} found") from None
    except PermissionError:
        raise AnonauditError(f"--command {command!r}: {argv[0]!r} cannot be run (permission denied)") from None
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        which = ("the default limit of an external command; give another with --timeout SECONDS, "
                 "command_timeout= in Python" if default else "its --timeout")
        raise AnonauditError(f"--command {command!r}: still running after {timeout:g} s ({which}); stopped "
                             "(with every process it started)") from None
    except BaseException:  # Ctrl-C, SIGTERM or the time limit: the command's own session is stopped here
        _kill_group(proc)
        raise


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the process group ``proc`` leads (SIGKILL: a sanitizer past its time gets no grace;
    the group outlives ``proc`` while any process of it runs), then reap ``proc``."""
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:  # pragma: no cover - Windows: the command itself
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def _read_back_format(path: Path, originals: Corpus) -> str | None:
    """The format to read the command's output as (None: told by its content). The output has no
    extension, so a release of ONE document written as JSONL (``{"id": ..., "text": ...}`` on one
    line, the format the command is given) parses as a JSON object too, and would be read as two
    documents named ``id`` and ``text``: an object that is one document record (an ``id`` and a
    ``text``, keys that are not all ids of the originals) is read as JSONL."""
    from audit.io.detect import sniff

    try:
        _, data = sniff(str(path))
    except AnonauditError:
        return None  # the reader says what is wrong
    if (isinstance(data, dict) and isinstance(data.get("id"), (str, int)) and isinstance(data.get("text"), str)
            and not set(data) <= set(originals.ids)):
        return "jsonl"
    return None


def validate_release(release: Release, originals: Corpus, *, source: str | None = None) -> None:
    """Check a release under test against its originals; every problem at once, each naming its
    document. Extra and duplicated ids are refused when the release is read (the readers name
    them); checked here: missing ids, empty texts, a document longer than its original by more
    than its recorded replacements explain, recorded spans that do not match either text."""
    problems = Problems(source or release.source or release.name)
    if not release.aligned:
        raise DataError(Problem(problems.source, "the release is not aligned to the originals by id: "
                                                 "bench compares each document with its original"))
    for doc_id in originals.ids:
        if doc_id not in release.corpus:
            problems.add("missing: the original has this document, the release does not", doc_id=doc_id)
    for doc in release.corpus:
        orig = originals.get(doc.id)
        if orig is None:
            problems.add("extra: no original document has this id", doc_id=doc.id)
            continue
        if not doc.text.strip() and orig.text.strip():
            problems.add("empty text (the original is not empty)", doc_id=doc.id)
            continue
        for message in _span_problems(doc, orig):
            problems.add(message, doc_id=doc.id)
        growth = sum(max(0, (s.end - s.start) - ((s.orig_end or 0) - (s.orig_start or 0))) for s in doc.spans)
        if len(doc.text) > len(orig.text) + growth:
            problems.add(f"longer than its original ({len(doc.text):,} characters against {len(orig.text):,}) "
                         + (f"by more than its recorded replacements explain (+{growth:,})" if growth else
                            "and it records no replacement that explains it")
                         + ": a sanitizer removes or generalises text; did the command write something else? "
                         "(a replacement longer than what it replaces is fine when recorded as a span)",
                         doc_id=doc.id)
    problems.raise_if_any()


def _span_problems(doc, orig) -> list[str]:
    """What is wrong with the spans a released document records (offsets in both texts, the
    original text each claims to replace, the replacement each claims to have put)."""
    out: list[str] = []
    for s in doc.spans:
        where = f"recorded span [{s.start}, {s.end})"
        if s.end > len(doc.text):
            out.append(f"{where} lies beyond the end of the released text ({len(doc.text)} characters)")
            continue
        if s.replacement is not None and doc.text[s.start:s.end] != s.replacement:
            out.append(f"{where}: the text there is {doc.text[s.start:s.end][:40]!r}, the span says it put "
                       f"{s.replacement[:40]!r}")
        if s.orig_start is None or s.orig_end is None:
            continue
        if not 0 <= s.orig_start <= s.orig_end <= len(orig.text):
            out.append(f"{where}: its original offsets [{s.orig_start}, {s.orig_end}) lie outside the original "
                       f"({len(orig.text)} characters)")
        elif s.original is not None and orig.text[s.orig_start:s.orig_end] != s.original:
            out.append(f"{where}: says it replaced {s.original[:40]!r}, the original has "
                       f"{orig.text[s.orig_start:s.orig_end][:40]!r} at [{s.orig_start}, {s.orig_end})")
    return out
