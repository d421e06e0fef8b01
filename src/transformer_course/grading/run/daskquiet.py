"""The grading cluster's manners (imported only where Dask runs): Ctrl-C left to the grading process,
no traceback or log while it closes, no worker process left behind."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from typing import Any

import psutil
from distributed.diagnostics.plugin import WorkerPlugin


class NoCtrlC(WorkerPlugin):
    """Ctrl-C in the terminal reaches the workers too (one process group); they leave it to the
    grading process, which closes the cluster, instead of each printing a traceback; each notes it
    (:func:`.stop.note`), so that what its kernel did after it is never kept. A Python-level handler:
    the kernels a worker starts (exec) get the default one again."""

    name = "transformer-course-no-ctrl-c"

    def setup(self, worker: Any) -> None:
        from transformer_course.grading import stop

        with contextlib.suppress(ValueError):  # not the worker's main thread: leave it
            # noted: a solution measured meanwhile keeps no limits, a notebook graded meanwhile no record
            signal.signal(signal.SIGINT, lambda signum, _: stop.note(signum))


@contextlib.contextmanager
def ctrl_c_ignored() -> Iterator[None]:
    """Ctrl-C ignored while the cluster starts: its worker processes inherit that (a Ctrl-C amid
    their imports would print a traceback each, and one half-started cluster another at exit), until
    :class:`NoCtrlC` gives them a handler of their own (their kernels get the default
    again). A Ctrl-C in these seconds is lost: the next one stops the run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)


def children() -> set[int]:
    """This process's child processes now (the cluster's worker processes start after)."""
    return {p.pid for p in psutil.Process().children()}


def end_workers(before: set[int]) -> None:
    """End the worker processes the cluster started that outlived its closing (a Ctrl-C during its
    start or close): no grading process is left behind."""
    left = []
    for p in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if p.pid not in before and "spawn_main" in " ".join(p.cmdline()):
                p.terminate()
                left.append(p)
    _, alive = psutil.wait_procs(left, timeout=5)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=5)


@contextlib.contextmanager
def no_thread_tracebacks() -> Iterator[None]:
    """No traceback from a thread that fails in the block (Dask's, while it closes)."""
    hook = threading.excepthook
    threading.excepthook = lambda args: None
    try:
        yield
    finally:
        threading.excepthook = hook


@contextlib.contextmanager
def quiet(logger: str) -> Iterator[None]:
    """Silence a library's logger in this process for the block (Dask's shutdown chatter)."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)
