"""The grading cluster's manners (imported only where Dask runs): Ctrl-C left to the grading process,
no traceback or log while it closes, no worker process left behind, and no CPU time spent on watching
itself that the notebooks need (:data:`LOCAL_CLUSTER`)."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from typing import Any

import psutil
from distributed.diagnostics.plugin import WorkerPlugin

# Dask's defaults for the local cluster of `grade`, where each worker runs one notebook at a time and
# waits on its kernel most of the time: a statistical profiler that walks every thread's stack each 10 ms
# (for a dashboard nobody opens), an event-loop health check each 20 ms, a system monitor each 500 ms,
# in every process. On 2 cores an idle cluster of 2 workers spent 2.1 CPU s every 20 s on them (10% of
# a core), and with these 0.3 (docs/benchmarks.md, "The last seconds of the class figure"). The memory
# monitor (the nanny's restart of a worker over its memory) still runs, every 500 ms.
LOCAL_CLUSTER = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "500ms",
}


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


def local_cluster(workers: int) -> Any:
    """A Dask ``LocalCluster`` of ``workers`` single-threaded processes on this machine, with the manners
    above: Ctrl-C ignored while it starts, then :class:`NoCtrlC`; :data:`LOCAL_CLUSTER`; logs only at
    CRITICAL (a task's failure comes back through its future; what workers would log besides is shutdown
    noise, heartbeats to a scheduler that has just closed); the dashboard on a free port (8787 may be
    another cluster's, and Dask would warn about it)."""
    import dask
    from distributed import LocalCluster

    with ctrl_c_ignored(), dask.config.set(LOCAL_CLUSTER):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                            silence_logs=logging.CRITICAL, plugins=(NoCtrlC(),))


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
