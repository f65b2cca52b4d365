"""Progress for long work, readable in a terminal and in a log.

On a terminal, :func:`bar` is an ordinary tqdm bar; inside a Jupyter notebook it is tqdm's auto
mode (a notebook widget; plain lines when ipywidgets is not installed). When stderr is not a terminal (CI, a log
file, ``nohup``), a redrawn bar would write raw ``\\r`` characters; there it prints a plain line
every ``ANONAUDIT_PROGRESS_SECONDS`` (default 10: any stage longer than that says how far it
has come) while work goes on and one at the end (unless
the work took under two seconds): ``stage: done/total [elapsed<remaining, rate]``.

Third-party bars (transformers de-quantizing a GGUF file, sentence-transformers encoding) are
switched off by the command line through ``TQDM_DISABLE`` before tqdm is imported; our bars pass
``disable`` explicitly and so are unaffected. :func:`stage` prints a line when a step that has no
natural counter (loading a model) starts and ends, so its time is charged to it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from tqdm.std import tqdm

LINE_FORMAT = "{desc}: {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"
#: Work shorter than this leaves no line at all when the output is not a terminal.
QUIET_SECONDS = 2.0


def _interval() -> float:
    try:
        return max(0.5, float(os.environ.get("ANONAUDIT_PROGRESS_SECONDS", "10")))
    except ValueError:
        return 30.0


class LineProgress(tqdm):
    """tqdm that prints whole lines instead of redrawing one (for non-terminal output): nothing
    for work that ends within :data:`QUIET_SECONDS`, then a line every interval and one at the end.
    A line is printed every interval even while no item finishes (a heartbeat thread: spaCy's
    first batch of long texts, one slow step), so a stage never goes silent for longer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        interval = _interval()
        kwargs.setdefault("mininterval", interval)
        kwargs.setdefault("delay", interval)  # no line for work that is over before the first tick
        kwargs.setdefault("bar_format", LINE_FORMAT)
        kwargs["miniters"] = 1  # never skip a timed update because the rate looked high
        kwargs["file"] = kwargs.get("file") or sys.stderr
        kwargs["dynamic_ncols"] = False
        super().__init__(*args, **kwargs)
        self._stopped = threading.Event()
        if not self.disable:  # the thread holds the bar weakly: a bar nobody holds is collected and stops it
            threading.Thread(target=_heartbeat, args=(weakref.ref(self), self._stopped, interval), daemon=True,
                             name="anonaudit-progress").start()

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:  # noqa: ARG002
        line = (msg if msg is not None else self.__str__()).strip()
        if line and line != getattr(self, "_last_line", None):
            self._last_line = line
            print(line, file=self.fp, flush=True)
        return True

    def close(self) -> None:
        stopped = getattr(self, "_stopped", None)
        if stopped is not None:
            stopped.set()
        if self.disable:
            return
        elapsed = self._time() - self.start_t
        final = self.__str__()
        self.sp = None  # tqdm's own close would write "\r" or "\n" to clear a redrawn bar
        super().close()
        if elapsed >= QUIET_SECONDS:
            self.display(final)


def _heartbeat(ref: weakref.ref, stopped: threading.Event, interval: float) -> None:
    """A line every ``interval`` while the bar is open, whether or not an item finished."""
    while not stopped.wait(interval):
        bar = ref()
        if bar is None:
            return
        with contextlib.suppress(Exception):  # a bar closing meanwhile: nothing to say
            bar.refresh()
        del bar


def is_terminal(stream: Any = None) -> bool:
    stream = stream or sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython's kernel application is running)."""
    ipython = sys.modules.get("IPython")
    try:
        shell = ipython.get_ipython() if ipython is not None else None
        return shell is not None and "IPKernelApp" in shell.config
    except Exception:  # noqa: BLE001 - an IPython that is not what we expect: not a notebook
        return False


def widgets() -> bool:
    """Whether tqdm can draw a notebook widget (ipywidgets installed)."""
    import importlib.util

    return importlib.util.find_spec("ipywidgets") is not None


def interactive() -> bool:
    """A person watches this output as it is drawn: a terminal, or a notebook with widgets."""
    return is_terminal() or (in_notebook() and widgets())


def bar(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str = "", unit: str = "it",
        enabled: bool = True, leave: bool = False, **kwargs: Any) -> tqdm:
    """A progress bar over ``iterable`` (or one driven by ``update``): tqdm on a terminal, tqdm's
    auto mode in a notebook (its widget), plain periodic lines otherwise, nothing when ``enabled``
    is false."""
    if in_notebook() and widgets():
        from tqdm.auto import tqdm as auto

        cls = auto
    else:
        cls = tqdm if is_terminal() else LineProgress
    return cls(iterable, total=total, desc=desc, unit=unit, disable=not enabled, leave=leave, **kwargs)


@contextlib.contextmanager
def stage(what: str, *, enabled: bool = True) -> Iterator[None]:
    """Print ``what ...`` before a step and ``what: done in N s`` after it (to stderr)."""
    if not enabled:
        yield
        return
    t0 = time.perf_counter()
    print(f"    {what} ...", file=sys.stderr, flush=True)
    yield
    print(f"    {what}: done in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)


def say(what: str, *, enabled: bool = True) -> None:
    """Print one line about a stage (to stderr), e.g. what the rest of it may cost."""
    if enabled:
        print(f"    {what}", file=sys.stderr, flush=True)
