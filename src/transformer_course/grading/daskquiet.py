"""A Dask worker plugin for the grading cluster (imported only where Dask runs)."""

from __future__ import annotations

import contextlib
import signal
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin


class NoCtrlC(WorkerPlugin):
    """Ctrl-C in the terminal reaches the workers too (one process group); they leave it to the
    grading process, which closes the cluster, instead of each printing a traceback. A
    Python-level handler: the kernels a worker starts (exec) get the default one again."""

    name = "transformer-course-no-ctrl-c"

    def setup(self, worker: Any) -> None:
        with contextlib.suppress(ValueError):  # not the worker's main thread: leave it
            signal.signal(signal.SIGINT, lambda *_: None)
