"""The ``anonaudit`` command line.

The commands live in the modules of this package (listed in :mod:`anonaudit.cli.commands`);
``attack NAME``, ``sanitize NAME`` and ``utility`` are built for every registered component
by the generic driver (:mod:`anonaudit.cli.driver`). This module only assembles them and turns
every :class:`~audit.core.errors.AnonauditError` into a readable message and exit code 2.

Exit codes: 0 done (and every gate check passed); 1 a gate check failed; 2 the input is
invalid or the audit could not run as asked (an :class:`AnonauditError`, or a usage error
click reports); 130 interrupted, 143 terminated by SIGTERM (finished work is saved; an external
command is stopped with every process it started); 141 stdout's reader closed the pipe (quiet).

The registry the commands use is the process' one, or the one given as the context object:
``main(obj={"registry": reg})`` (``CliRunner().invoke(main, args, obj=...)`` in tests).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys

# Before anything imports tqdm: bars of other libraries (transformers de-quantizing a GGUF file,
# sentence-transformers encoding) are off; ours pass ``disable`` explicitly (audit.runtime.progress).
os.environ.setdefault("TQDM_DISABLE", "1")

from audit.runtime.cpu import tune_numpy  # noqa: E402  (imports no numpy)

# Before anything imports numpy: its fast sort on this CPU (see audit.runtime.cpu).
tune_numpy(os.environ)

import click  # noqa: E402

from audit import __version__  # noqa: E402
from audit.core.errors import AnonauditError  # noqa: E402


#: Exit code of a failed gate check.
EXIT_GATE_FAILED = 1
#: Exit code when stdout's reader closed the pipe (``| head -1``): 128 + SIGPIPE, as a program
#: that SIGPIPE ends; nothing is printed.
EXIT_CLOSED_PIPE = 141
#: Exit code of invalid input: a file, spec, option or threshold that cannot be used (click's
#: usage errors exit 2 as well).
EXIT_INVALID = 2


class FriendlyGroup(click.Group):
    """A group whose commands report user errors as one message, never a traceback."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Bytes that are not UTF-8 reach Python as lone surrogates, which no file, report or
        # results file can hold: refused here for every command, as the readers refuse them in files.
        for arg in args:
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError:
                raise click.UsageError(f"the argument {arg!r} is not valid UTF-8 text", ctx=ctx) from None
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        from audit.runtime.deadline import Terminated, terminate_as_interrupt

        try:
            with terminate_as_interrupt():  # SIGTERM saves finished work and stops commands, as Ctrl-C
                try:
                    return super().invoke(ctx)
                finally:
                    with contextlib.suppress(ValueError, AttributeError):  # stdout closed or replaced
                        sys.stdout.flush()  # a closed pipe is met here, not in Python's flush at exit
        except BrokenPipeError:  # `anonaudit gate ... | head -1`: the reader left; quiet, as other CLIs
            quiet_closed_pipe()
            ctx.exit(EXIT_CLOSED_PIPE)
        except AnonauditError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            ctx.exit(EXIT_INVALID)
        except OSError as exc:  # a file or folder the system refused: a full disk, a read-only folder
            click.secho(f"error: {os_error_message(exc)}", fg="red", err=True)
            ctx.exit(EXIT_INVALID)
        except RecursionError:  # defence in depth: the readers bound nesting themselves
            click.secho("error: an input is nested too deeply to be read", fg="red", err=True)
            ctx.exit(EXIT_INVALID)
        except KeyboardInterrupt as exc:
            what = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
            click.secho(f"{what}: finished work is saved; run the same command again to resume.",
                        fg="yellow", err=True)
            ctx.exit(143 if isinstance(exc, Terminated) else 130)


def quiet_closed_pipe() -> None:
    """stdout's reader has gone (a closed pipe): what is still buffered goes nowhere, so that
    Python's flush at exit does not fail a second time with a message."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def os_error_message(exc: OSError) -> str:
    """An :class:`OSError` as one line naming the file and the reason. Every file is written to a
    temporary file and renamed, so a write that failed replaced nothing."""
    import errno

    where = exc.filename if exc.filename is not None else "a file"
    why = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno == errno.ENOSPC:
        why = "no space left on the device"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = f"not allowed ({why}): the file or its folder is read-only"
    elif exc.errno == errno.ENOTDIR:
        why = "a part of the path is a file, not a folder"
    return f"{where}: {why} (nothing was replaced; free the space or fix the path and run again)"


@click.group(cls=FriendlyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="anonaudit")
@click.option("-v", "--verbose", is_flag=True, help="Log what happens (model loading, cache use), and print release warnings in full (they quote the "
              "originals and list document ids; without -v a log says how many there are and where they are).")
def main(verbose: bool) -> None:
    """Attack sanitized text the way an adversary would, before it is published."""
    if not verbose:  # model-loading bars of transformers drown our own progress bars
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def _add_commands() -> None:
    from anonaudit.cli import commands
    from anonaudit.cli.guide import add_epilogs

    for cmd in commands.all_commands():
        main.add_command(cmd)
    add_epilogs(main, [])  # each command's --help ends with the guide page to read


_add_commands()
