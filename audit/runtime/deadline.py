"""A time limit enforced, not only estimated (issue 67, item 5), and SIGTERM handled as Ctrl-C.

``--time-limit MINUTES`` is first an estimate said before the work (:mod:`audit.pipeline.estimate`);
the work, the calibration included, then runs under :func:`enforced`: when the limit is reached the
process' main thread is interrupted as Ctrl-C interrupts it (a :class:`TimeUp`, a kind of
``KeyboardInterrupt``), so every path that already keeps finished work on Ctrl-C runs: the runner
saves the pairs it finished (a re-run resumes), an external command is stopped with every process it
started. At the boundary the interruption becomes a :class:`TimeLimitReached` (an
:class:`~audit.core.errors.AnonauditError`: exit 2 on the command line) that names the limit and
the option. An interruption is used, not an exception any ``except Exception`` would swallow, so a
component that catches its own errors cannot hide the limit and run on.

The limit is enforced with a real-time timer (``SIGALRM``), which only the main thread of a POSIX
process can receive; a limit asked elsewhere (from another thread, or on Windows) is refused with
an :class:`~audit.core.errors.AnonauditError` before any work (:func:`check_enforceable`), never
silently ignored. A timer already set (pytest-timeout's) is restored after.

:func:`terminate_as_interrupt` makes ``SIGTERM`` (what ``kill``, a CI runner's cancel and a
container's stop send) raise :class:`Terminated`, another kind of ``KeyboardInterrupt``, for the
same reason: without it Python dies at once and an external command it started runs on as an orphan.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

from audit.core.errors import AnonauditError


class TimeUp(KeyboardInterrupt):
    """The time limit was reached: raised in the main thread by :func:`enforced`'s timer."""


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM (:func:`terminate_as_interrupt`)."""


class TimeLimitReached(AnonauditError):
    """The work ran to its time limit and was stopped; what it finished is kept."""


def platform_has_timer() -> bool:
    """Whether this platform has the real-time timer signal (POSIX's ``SIGALRM``; not Windows)."""
    return os.name == "posix" and hasattr(signal, "SIGALRM")


def timer_available() -> bool:
    """Whether a limit can be enforced here: in the main thread of a POSIX process."""
    return platform_has_timer() and threading.current_thread() is threading.main_thread()


def check_enforceable(minutes: float | None, option: str = "time_limit=") -> None:
    """Refuse (:class:`AnonauditError`) a limit of ``minutes`` that :func:`enforced` could not
    enforce here: asked from a thread that is not the main one, or on a platform without
    ``SIGALRM``. No limit (None, or one beyond what the timer holds) is always fine."""
    if minutes is None or not minutes * 60.0 < _TIMER_MAX or timer_available():
        return
    where = (f"on this platform ({os.name}: no SIGALRM)" if not platform_has_timer()
             else f"from the thread {threading.current_thread().name!r}, not the main thread")
    raise AnonauditError(f"{option} {minutes:g} min cannot be enforced {where}: the limit is a real-time timer "
                         "(SIGALRM), which only the main thread of a POSIX process receives. Run the call from the "
                         "main thread, or leave the limit out (the work then runs to its end)")


#: The longest limit the interval timer can hold (a C ``time_t`` on every platform): a longer one,
#: or ``inf``, is no limit at all (``--time-limit inf`` is a valid way to say so).
_TIMER_MAX = 2.0 ** 31


@contextlib.contextmanager
def enforced(minutes: float | None, option: str = "--time-limit") -> Iterator[None]:
    """Run the block under a limit of ``minutes`` (None: no limit). When it is reached, the block is
    interrupted (:class:`TimeUp`, handled as Ctrl-C is) and a :class:`TimeLimitReached` naming
    ``option`` is raised from it. Enforced in the main thread of a POSIX process only (a timer
    signal); elsewhere a limit is refused (:func:`check_enforceable`). A timer set before that ends
    sooner is left to end the block; one that ends later is restored after it, with the time it has left."""
    check_enforceable(minutes, option)
    seconds = None if minutes is None else minutes * 60.0
    if seconds is not None and not seconds < _TIMER_MAX:  # inf, or beyond what the timer holds
        seconds = None
    if seconds is None or not timer_available() or 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= seconds:
        yield  # no limit here, or a timer set before (pytest-timeout's, an outer limit) comes first
        return
    t0 = time.monotonic()

    def on_alarm(signum, frame):  # noqa: ARG001 - the signal handler's signature
        raise TimeUp(f"{option} {minutes:g} min")

    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except TimeUp:
        raise TimeLimitReached(
            f"the time limit of {minutes:g} min ({option}) was reached after {(time.monotonic() - t0) / 60:.1f} min: "
            "the work was stopped. What finished is kept (a run that writes its results saved every finished "
            f"step; run the same command again to resume), but the run is not complete: give a longer {option} "
            "or cut the work") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if old_handler is None else old_handler)
        if old_delay:  # a timer set before ours (pytest-timeout's): the time it has left
            signal.setitimer(signal.ITIMER_REAL, max(old_delay - (time.monotonic() - t0), 1e-3), old_interval)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` in the main thread (the handler
    before is restored after). Outside the main thread of a POSIX process: nothing changes."""
    if not timer_available():
        yield
        return

    def on_term(signum, frame):  # noqa: ARG001
        raise Terminated("SIGTERM")

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if old is None else old)
