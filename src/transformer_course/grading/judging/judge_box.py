"""Each notebook's judge in a sandboxed process of its own, forked from a warm template.

The judge (:mod:`.judge`: it answers the kernel, runs the reference and the checks, decides each test
cell's verdict) lends the grader's objects to the student's code through an allow-list
(:mod:`.lending`). A flaw in that list, or in torch's own loading of what the kernel sends
(:mod:`.decoding`), would run the student's code with the judge's rights. So the judge does not run
in the grading worker: each notebook gets a fresh judge process, forked from a template in a sandbox
of its own (:mod:`.forkserver`, the same mechanism as the kernels'), that

- sees the Python environment, the course's package and the hidden reference, read-only, and nothing
  else of the machine's files (the repository, the class's ``OUT``, the work areas, the other
  submissions and every record stay hidden); it writes only to a private ``/tmp``;
- has no network; it reaches its own notebook's kernel over that kernel's IPC sockets, and the worker
  over one Unix socket in a folder no kernel sees;
- has the kernel's memory limit (data segment) and a CPU-time limit;
- is killed, with every other process of its sandbox, before the next notebook's judge is forked
  (module state, RNG, lent names, ``/tmp`` and ``/dev/shm`` die with it);
- hands back one verdict per test cell, which the worker checks (an exception name, a message, the
  printed text) and turns into that cell's outputs: it decides that cell's points, nothing else.

The worker's side (:class:`BoxedJudge`) answers the judge's questions (interrupt the kernel; is it
alive; how many CPU seconds the notebook's processes have spent in this cell, :mod:`.cputime`) and
gives each test cell its limit plus :data:`GRACE`: the grader's own work for the cell (the reference
and checks it runs for the kernel's requests) counts against it, and a judge past it is killed, the
kernel interrupted, and the cell timed out. The judge's process starts at :func:`.judge_process.main`;
the two speak over :mod:`.channel`.

Where kernels are not forked (no bubblewrap, ``COURSE_FORKSERVER=off``), not started in the sandbox
(nbgrader's own ``autograde`` with the course's configuration) or ``COURSE_JUDGE_BOX=off``, the judge
runs in the worker's process (:class:`~.judge_process.LocalJudge`), as the grader's single line of warning
about the sandbox already says. Where judges are boxed, one that cannot start makes its notebook a
``grader-error``: it is never judged in the worker instead.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformer_course.grading.judging import judge_process
from transformer_course.grading.judging.channel import Lines, Verdict, checked
from transformer_course.grading.kernel import cputime, forkserver, sandbox

# s past a test cell's limit (CPU seconds, or on the clock past its outer bound): the judge interrupts the
# kernel at the limit, and waits 10 s for it
GRACE = 20
START_TIMEOUT = 300  # s for a judge to connect (the template may still be importing torch)
# Imported once by the judges' template: what every judge needs before the notebook's first test (and
# every notebook's reference and checks: see :func:`warm`).
WARM = ["torch", "zmq", "jupyter_client", "transformer_course.grading.judging.judge", "course_reference.checks"]

GRADERS_WORK = "the grader's own work for this test (answering your code's requests)"  # a timeout's cause


def enabled() -> bool:
    """Whether judges get a box: kernels are forked in a sandbox, and ``COURSE_JUDGE_BOX`` is not off."""
    if os.environ.get("COURSE_JUDGE_BOX", "").lower() in ("off", "0", "no"):
        return False
    return forkserver.enabled()


_FOLDER: list[str] = []


def judges_folder() -> str:
    """This process's folder for its judges' sockets: bound into the judges' sandbox only (a kernel that
    could connect there first would speak for the judge)."""
    if not _FOLDER or not os.path.isdir(_FOLDER[0]):
        _FOLDER[:] = [sandbox.process_folder("judges")]
    return _FOLDER[0]


def template(hidden: list[str], reference: str) -> forkserver.ForkServer:
    """This process's judges' template (started if there is none) for kernels whose sandbox hides
    ``hidden`` (:meth:`~.kernels.SandboxedKernelManager.kernel_hidden`), judging against ``reference``
    (the folder holding ``course_reference``)."""
    import transformer_course

    package = str(Path(transformer_course.__file__).resolve().parent.parent)
    readonly = [sys.base_prefix, sys.prefix, package, str(Path(reference).resolve())]
    env = {**os.environ, "PYTHONPATH": str(Path(reference).resolve()), "PYTHONDONTWRITEBYTECODE": "1"}
    return forkserver.server(sys.executable, hidden, readonly, [judges_folder()], env, warm=warm(reference))


def warm(reference: str) -> list[str]:
    """What the judges' template imports: :data:`WARM`, then each notebook's reference and checks under
    ``reference`` (a judge would otherwise import its notebook's anew, about 0.3 s a notebook). Each judge
    is a fork of the template, which runs no test: every judge starts from the same untouched modules."""
    package = Path(reference) / "course_reference"
    return WARM + [f"course_reference.{p.stem}" for p in sorted(package.glob("nb[0-9][0-9]_*.py"))] + [
        f"course_reference.checks.{p.stem}" for p in sorted((package / "checks").glob("nb[0-9][0-9].py"))]


def prestart(hidden: list[str], reference: str) -> None:
    """Start the judges' template ahead of the first notebook (it imports while the grader sets up)."""
    if enabled():
        template(hidden, reference)


class BoxedJudge:
    """A notebook's judge in its own sandboxed process (see the module's docstring), from the worker's side.

    Args:
        connection: the kernel's connection information (``km.get_connection_info()``).
        hidden: the folders the kernel's sandbox hides (the judge's hides them too).
        interrupt, alive: the kernel's manager's, for the judge's questions.
        memory_mb: the judge's data-segment limit (MiB; 0: none); cpu_s: its CPU-time limit (s).
        clock: the CPU seconds of the notebook's processes (kernel and judge), which a test cell's limit
            counts (None: the limit is counted on the clock).

    Raises:
        forkserver.TemplateError, OSError: no judge could be started (the notebook is then the grader's
            failure: ``KeepGradesOnCrash._open_judge``).
    """

    def __init__(self, connection: dict, hidden: list[str], reference: str, watched: tuple[str, ...],
                 interrupt: Callable[[], Any], alive: Callable[[], bool], memory_mb: int = 0, cpu_s: int = 0,
                 clock: judge_process.Clock | None = None):
        self.interrupt, self.alive, self.clock = interrupt, alive, clock
        self.server = template(hidden, reference)
        path = os.path.join(judges_folder(), f"judge-{secrets.token_hex(8)}.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(path)
            listener.listen(1)
            info = {k: v.decode() if isinstance(v, bytes) else v for k, v in connection.items()}
            args = {"socket": path, "connection": info, "reference": str(Path(reference).resolve()),
                    "watched": list(watched), "memory_mb": memory_mb, "cpu_s": cpu_s, "clock": clock is not None}
            # The judges' folder, emptied of all but this judge's socket once the last judge has ended: a file
            # a judge left there (code of a student's that ran in it) reaches no other.
            self.pid = int(self.server.request({"op": "call", "module": judge_process.__name__,
                                                "function": judge_process.main.__name__, "args": args,
                                                "empty": [judges_folder()], "keep": [path]},
                                               START_TIMEOUT)["pid"])
            conn = self._accept(listener)
        finally:
            listener.close()
            with contextlib.suppress(Exception):
                os.unlink(path)
        conn.setblocking(True)
        self.lines: Lines | None = Lines(conn)

    def _accept(self, listener: socket.socket) -> socket.socket:
        """The judge's connection, once it has started (OSError if it exits first, or takes too long)."""
        listener.settimeout(0.2)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            try:
                return listener.accept()[0]
            except TimeoutError:
                if self.server.request({"op": "poll", "pid": self.pid}).get("exit") is not None:
                    raise OSError("the judge exited as it started") from None
        raise OSError(f"the judge did not connect within {START_TIMEOUT} s")

    def test(self, source: str, grade_id: str, limit: float) -> Verdict:
        """The verdict of test cell ``source``: the judge's, or a timeout or grader error of the worker's.
        A judge still busy :data:`GRACE` s past the cell's limit (CPU seconds of the notebook's processes, or
        the clock's outer bound) is killed."""
        if self.lines is None:
            return "GraderError", "the grader's judge of this notebook stopped in an earlier cell", ""
        clock = self.clock
        wall = limit * cputime.WALL_FACTOR if clock is not None else limit
        deadline, start = time.monotonic() + wall + GRACE, clock() if clock is not None else 0.0
        try:
            self.lines.send({"op": "test", "source": source, "grade_id": grade_id, "limit": limit})
            while True:
                try:
                    message = self.lines.recv(min(deadline, time.monotonic() + cputime.POLL))
                except TimeoutError:
                    if time.monotonic() < deadline and (clock is None or clock() - start <= limit + GRACE):
                        continue
                    raise
                if message.get("ask") == "interrupt":
                    self.interrupt()
                    self.lines.send({"ok": True})
                elif message.get("ask") == "alive":
                    self.lines.send({"alive": bool(self.alive())})
                elif message.get("ask") == "cpu":  # the cell's CPU seconds so far, which the judge counts
                    self.lines.send({"cpu": clock() - start if clock is not None else 0.0})
                else:
                    return checked(message)
        except TimeoutError:
            self._stop()
            return "CellTimeoutError", f"{GRADERS_WORK} did not finish within {limit:g} s, and was stopped", ""
        except (OSError, EOFError, ValueError) as exc:
            self._stop()
            return "GraderError", (f"the grader's judge of this notebook stopped ({type(exc).__name__}); "
                                   "the cells after this one are judged by a new one"), ""

    def _stop(self) -> None:
        """Kill the judge and free the kernel (it may wait for the judge's next request)."""
        with contextlib.suppress(Exception):
            self.server.request({"op": "signal", "pid": self.pid, "signal": 9})
        self.close()
        with contextlib.suppress(Exception):
            self.interrupt()

    def close(self) -> None:
        if self.lines is not None:
            with contextlib.suppress(Exception):
                self.lines.send({"op": "end"})
            with contextlib.suppress(Exception):
                self.lines.sock.close()
            self.lines = None
