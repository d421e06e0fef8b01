"""Stopping a grading run at the first Ctrl-C or SIGTERM, with nothing wrong recorded.

A terminal sends Ctrl-C's SIGINT to its whole foreground process group: the grading process and
every kernel, judge, sandbox (bwrap) and Dask worker it started. Whichever sees it first makes
the notebook in progress fail (an interrupted kernel, a ``KeyboardInterrupt`` that nbgrader's log
capture swallows), and unless the press itself is remembered that failure is recorded as the
student's grader-error, or a 0. So, while a run grades (:func:`handled`), the grading process:

- notes the signal (:func:`requested`): the run checks it before it records a notebook, and the
  measuring of a solution before it keeps the limits it measured;
- ends every process it started except the Dask workers the cluster closes (kernels, judges,
  bwrap, fork servers), so that whatever waits on them returns at once;
- raises :class:`Stopped` (a ``KeyboardInterrupt``), once: the command says one line and exits
  with 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM); a second press while the
  run closes changes nothing. Where Python cannot raise it (the signal came while a weakref
  callback or a ``__del__`` ran: Python prints "Exception ignored in" and a traceback), it is
  dropped quietly: the signal is noted, and the run stops at its next :func:`check`;
- and at the end, :func:`sweep` ends whatever it started that is still alive.

A grading worker of the cluster only notes the signal (:func:`note`): the grading process closes it.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

import psutil

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_REQUESTED: list[int] = []  # the signal that asked this process to stop, once one did


class Stopped(KeyboardInterrupt):
    """The run was asked to stop by a signal (``signum``): nothing in progress is recorded."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """What a shell reports for a process ended by this signal: 130 (SIGINT), 143 (SIGTERM)."""
        return 128 + self.signum


def note(signum: int) -> None:
    """Remember that this process was asked to stop by ``signum`` (the first signal is kept)."""
    if not _REQUESTED:
        _REQUESTED.append(int(signum))


def requested() -> int:
    """The signal this process was asked to stop by, or 0."""
    return _REQUESTED[0] if _REQUESTED else 0


def check() -> None:
    """Raise :class:`Stopped` if a signal asked this process to stop.

    Raises:
        Stopped: with the signal that asked.
    """
    if signum := requested():
        raise Stopped(signum)


def forget() -> None:
    """Forget an earlier request (a new run in the same process: tests, the formgrader's server)."""
    _REQUESTED.clear()


def _spawned(process: psutil.Process) -> bool:
    """A Dask worker (multiprocessing's spawn): closed by the cluster, not killed by the handler."""
    with contextlib.suppress(psutil.Error):
        return "spawn_main" in " ".join(process.cmdline())
    return False


def _resource_tracker() -> int | None:
    """The pid of multiprocessing's resource tracker for this process, if it started one (the Dask
    cluster's spawns do). It ends when this process does; killed early, the next unregistering of a
    lock relaunches it, and the new one prints a traceback for each lock it never saw."""
    from multiprocessing import resource_tracker

    return getattr(resource_tracker._resource_tracker, "_pid", None)


def end_children(keep_workers: bool = True, wait: float = 5.0) -> None:
    """End every process this one started, whatever started it under them: SIGKILL, as a kernel or a
    sandbox may ignore gentler signals; ``keep_workers``: not the cluster's workers (nor their own).
    Never multiprocessing's resource tracker (known by its pid, which no student process can take)."""
    me = psutil.Process()
    tracker = _resource_tracker()
    ended = []
    with contextlib.suppress(psutil.Error):
        for child in me.children():
            tree = [child]
            if (keep_workers and _spawned(child)) or child.pid == tracker:
                continue
            with contextlib.suppress(psutil.Error):
                tree += child.children(recursive=True)
            for process in tree:
                with contextlib.suppress(psutil.Error):
                    process.kill()
                    ended.append(process)
    psutil.wait_procs(ended, timeout=wait)


def sweep() -> None:
    """After a stopped run: no process it started outlives it (workers the cluster left included)."""
    end_children(keep_workers=False)


def _handler(signum: int, frame: object) -> None:
    if requested():  # a second press while the run closes: closing goes on (the first one stopped it)
        return
    note(signum)
    end_children()  # what is being graded fails now; the run does not record it (requested())
    raise Stopped(signum)


def _quiet_when_stopped(before):
    """An unraisable-exception hook that drops a :class:`Stopped` (already noted) and passes on the rest."""

    def hook(unraisable) -> None:
        if not isinstance(unraisable.exc_value, Stopped):
            before(unraisable)

    return hook


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """For the block: SIGINT and SIGTERM stop this process's run as the module says (main thread
    only; elsewhere, nothing changes). The handlers before are put back after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    forget()
    before = {s: signal.signal(s, _handler) for s in SIGNALS}
    hook, sys.unraisablehook = sys.unraisablehook, _quiet_when_stopped(sys.unraisablehook)
    try:
        yield
        check()  # a Stopped that Python could not raise (above) ends the run here at the latest
    finally:
        for s, h in before.items():
            signal.signal(s, h)
        sys.unraisablehook = hook
