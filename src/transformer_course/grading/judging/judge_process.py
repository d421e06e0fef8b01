"""The judge of one notebook, in the process that runs it, and what a new judge runs first.

:class:`LocalJudge` runs test cells (:func:`.judge.run_test`) over a link to the notebook's kernel. It
runs in the grading worker where judges are not boxed; where they are, in a judge's own process
(:func:`main`: forked from the judges' template, inside their sandbox, :mod:`.judge_box`), which
speaks to the worker over :mod:`.channel`. This module is that process's entry point: it imports
no more than the judge needs (the box's template, the forkserver and the sandbox stay the worker's).

A judge that replaces a stopped one first runs what the earlier test cells defined (:func:`definitions`).
"""

from __future__ import annotations

import ast
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformer_course.grading.judging.channel import Lines, Verdict
from transformer_course.grading.kernel import cputime

Clock = Callable[[], float]  # CPU seconds the notebook's processes have spent (cputime.Clock)


class LocalJudge:
    """The judge in this process: :func:`.judge.run_test` over ``link`` (a :class:`~.link.Link` to the
    notebook's kernel). A :class:`~.judge_box.BoxedJudge`'s process runs one of these. ``clock``: the CPU
    seconds of the notebook's processes (None: the limit is counted on the clock)."""

    def __init__(self, link: Any, reference: str, clock: Clock | None = None):
        self.link, self.reference, self.installed, self.clock = link, reference, False, clock

    def test(self, source: str, grade_id: str, limit: float) -> Verdict:
        """The verdict of test cell ``source``, the whole cell within ``limit`` seconds of CPU time (and
        :data:`~.cputime.WALL_FACTOR` times that on the clock)."""
        import torch

        from transformer_course.grading.judging.judge import run_test
        from transformer_course.grading.judging.remote import LinkBroken

        wall = limit * cputime.WALL_FACTOR if self.clock is not None else limit
        self.link.timeout, self.link.deadline = wall, time.monotonic() + wall
        if self.clock is not None:
            clock, start = self.clock, self.clock()
            self.link.spent, self.link.budget, self.link.over = (lambda: clock() - start > limit), limit, False
        # One thread here: the kernel and this judge take turns, and a second thread's OpenMP workers
        # would spin on a core the kernel needs (07's training test: 4.7 s with two, 2.8 s with one).
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            if not self.installed:
                self.link.install()
                self.installed = True
            return run_test(self.link, source, grade_id, Path(self.reference))
        except LinkBroken as exc:
            return "LinkBroken", str(exc), ""
        finally:
            torch.set_num_threads(threads)

    def close(self) -> None:
        self.link.close()


def main(args: dict) -> None:
    """The judge: in a child of the judges' template, inside their sandbox. Serves test cells until
    the worker ends it (or goes away)."""
    import resource

    from jupyter_client import BlockingKernelClient

    from transformer_course.grading.judging.link import Link

    if args.get("memory_mb"):
        limit = int(args["memory_mb"]) << 20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    if args.get("cpu_s"):
        resource.setrlimit(resource.RLIMIT_CPU, (int(args["cpu_s"]), int(args["cpu_s"]) + 10))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(args["socket"])
    lines = Lines(sock)

    def ask(what: str) -> dict:
        lines.send({"ask": what})
        return lines.recv()

    def cpu() -> float:  # the notebook's processes are outside this sandbox: the worker counts them
        found = ask("cpu").get("cpu")
        return float(found) if isinstance(found, int | float) else 0.0

    client = BlockingKernelClient()
    client.load_connection_info(args["connection"])
    judge = LocalJudge(Link(client, watched=tuple(args["watched"]), interrupt=lambda: ask("interrupt"),
                            alive=lambda: ask("alive").get("alive") is True), args["reference"],
                       clock=cpu if args.get("clock") else None)
    while True:
        try:
            message = lines.recv()
        except (EOFError, OSError, ValueError):
            break
        if message.get("op") != "test":
            break
        verdict = judge.test(str(message["source"]), str(message["grade_id"]), float(message["limit"]))
        lines.send({"verdict": list(verdict)})
    judge.close()


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)


def definitions(source: str) -> str:
    """The statements of test cell ``source`` that define names without running anything of the
    notebook: functions, classes, imports, and names bound to literals (07's ``copy_task_batches``,
    ``corpus``). A judge that replaces a stopped one runs these of every earlier test cell of its
    notebook first, so what those cells defined is there for the next ones, and no test runs twice;
    what they computed by calling the notebook's code is not computed again (no later test cell of
    the course reads such a value)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    kept = []
    for statement in tree.body:
        if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None:
            try:
                ast.literal_eval(statement.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            kept.append(statement)
        elif isinstance(statement, _DEFINITIONS):
            kept.append(statement)
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))
