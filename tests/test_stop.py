"""Ctrl-C in a real terminal, and SIGTERM, stop a grading run at the first signal: one line, exit
130 / 143, no row for the notebook in progress (never a grader-error, never a 0), no process of the
run left, and a solution measured meanwhile keeps no limits (grading/stop.py).

A terminal's Ctrl-C is SIGINT to its whole foreground process group: the grading process, its kernels,
judges, sandboxes and Dask workers. These tests run the command in a pseudo-terminal and type Ctrl-C
into it, as a user does."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from transformer_course.grading.notebook import limits
from transformer_course.grading.version import grader_version

from .conftest import GRADING_TIMEOUT, ROOT

ASSIGNMENT = "01_self_attention"
COMMAND = str(Path(sys.executable).parent / "transformer-course")


def _cache(repo, threads: int) -> Path:
    """Where the run keeps the solution's measured times of 01 for kernels of ``threads`` threads."""
    before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(threads)  # part of the key, as the grading worker sets it
    try:
        return limits.cache_file(repo, repo.assignment(ASSIGNMENT), grader_version(repo))
    finally:
        if before is None:
            del os.environ["OMP_NUM_THREADS"]
        else:
            os.environ["OMP_NUM_THREADS"] = before


def _kernels(pid: int) -> list[psutil.Process]:
    """The run's processes under ``pid`` now (kernels, sandboxes, judges, workers)."""
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).children(recursive=True)
    return []


def _in_the_work_area(out: Path) -> bool:
    """A notebook is being graded: nbgrader's copy of it is in a grading worker's work area."""
    return any(out.glob(f".work/*/submitted/*/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"))


def _in_terminal(argv: list[str], ready: Callable[[str, int], bool], how: str) -> tuple[int, str, list]:
    """Run ``argv`` in a pseudo-terminal (its own session, the terminal's foreground group); once
    ``ready(text so far, pid)``, send one signal as ``how`` says ("ctrl-c": typed into the terminal;
    "sigterm": to the grading process alone). Returns the exit status, everything it printed and
    the processes it had started when the signal went."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, in the terminal
        os.chdir(ROOT)
        os.execv(argv[0], argv)
    text, started, sent, code = b"", [], False, None
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the terminal closed: the command ended
                    chunk = b""
                text += chunk
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                break
            if not sent and ready(text.decode(errors="replace"), pid):
                time.sleep(1)  # well inside the notebook's grading
                started = _kernels(pid)
                if how == "ctrl-c":
                    os.write(fd, b"\x03")  # the terminal sends SIGINT to its foreground process group
                else:
                    os.kill(pid, signal.SIGTERM)
                sent, deadline = True, time.monotonic() + 90  # "at once": well under a notebook's grading
        with contextlib.suppress(OSError):
            while select.select([fd], [], [], 0.5)[0] and (chunk := os.read(fd, 65536)):
                text += chunk
    finally:
        if code is None:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert sent, f"the run never got to the point of the test:\n{text.decode(errors='replace')[-3000:]}"
    assert code is not None, f"still running 90 s after the signal:\n{text.decode(errors='replace')[-3000:]}"
    return code, text.decode(errors="replace"), started


def _no_process_left(started: list[psutil.Process]) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        left = []
        for p in started:
            with contextlib.suppress(psutil.Error):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    left.append(" ".join(p.cmdline())[:100])
        if not left:
            return
        time.sleep(0.5)
    raise AssertionError(f"left running after the run: {left}")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    assert "Traceback" not in text, text[-3000:]
    return lines[-1]


@pytest.mark.parametrize(("workers", "how", "code", "word"), [
    (1, "ctrl-c", 130, "interrupted"),
    pytest.param(2, "ctrl-c", 130, "interrupted", marks=pytest.mark.slow),  # make bench: a Dask cluster's start
    pytest.param(1, "sigterm", 143, "terminated", marks=pytest.mark.slow),
])
def test_a_signal_stops_the_run_at_once_and_records_nothing_wrong(small_class, tmp_path, repo, workers, how, code,
                                                                   word):
    out = tmp_path / "out"
    argv = [COMMAND, "grade", str(small_class), "--out", str(out), "--assignment", "01", "--timeout",
            str(GRADING_TIMEOUT), "--workers", str(workers)]
    measured = _cache(repo, max(1, (os.cpu_count() or 1) // workers))

    def grading(text: str, pid: int) -> bool:  # a student's notebook is being graded (the solution measured)
        return measured.is_file() and _in_the_work_area(out)

    status, text, started = _in_terminal(argv, grading, how)
    assert status == code, text[-3000:]
    line = _last_line(text)
    assert line.startswith(f"{word}: ") and line.endswith("run the same command again to grade the rest"), line
    _no_process_left(started)
    assert not (out / "grades.csv").exists() and not (out / "lms.csv").exists(), "no table from a stopped run"
    records = {p.parent.name: json.loads(p.read_text())["result"] for p in out.glob(f"results/*/{ASSIGNMENT}.json")}
    # what was kept is what was finished: bob's "missing", a notebook graded before the signal; never a failure
    assert {r["status"] for r in records.values()} <= {"missing", "graded"}, records
    assert not (out / "grader-errors.log").exists() or not (out / "grader-errors.log").read_text().strip()


@pytest.mark.slow  # make bench: it measures 01's solution again (about a minute), then stops it
def test_ctrl_c_while_the_solution_is_measured_keeps_no_limits(small_class, tmp_path, repo):
    """The first notebook of an assignment waits for its solution's measuring; a Ctrl-C then must not
    leave the cut-short times as this machine's limits (every later notebook would be judged by them)."""
    cache = _cache(repo, os.cpu_count() or 1)  # one worker: the kernels get every core
    kept = {p: p.read_bytes() for p in cache.parent.glob(cache.stem + "*")}
    for p in kept:
        p.unlink()
    out = tmp_path / "out"
    argv = [COMMAND, "grade", str(small_class), "--out", str(out), "--assignment", "01", "--timeout",
            str(GRADING_TIMEOUT), "--workers", "1"]
    try:
        status, text, started = _in_terminal(
            argv, lambda text, pid: "measuring the solution" in text and _in_the_work_area(out), "ctrl-c")
        assert status == 130, text[-3000:]
        assert _last_line(text).startswith("interrupted: "), text[-2000:]
        _no_process_left(started)
        assert not cache.exists(), "the measuring was cut short: its times are not this machine's limits"
        assert not list(out.glob("results/*/*.json")) or all(
            json.loads(p.read_text())["result"]["status"] == "missing" for p in out.glob("results/*/*.json"))
    finally:
        for p, data in kept.items():
            p.write_bytes(data)


def test_a_signal_during_a_weakref_callback_stops_the_run_without_a_traceback(tmp_path):
    """Python cannot raise out of a weakref callback or a ``__del__``: a Ctrl-C that lands in one printed
    "Exception ignored in" and a traceback (CI's Ctrl-C test failed on it once), and the run went on to its next
    check. Now it is quiet there, and the run stops at the end of its block at the latest. In a process of its
    own: the stop ends every child of the process that calls it."""
    script = """
import os, signal, weakref
from transformer_course.grading import stop
class Thing: pass
def ring(_):
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):  # the handler runs here, inside the callback
        pass
try:
    with stop.handled():
        thing = Thing()
        ref = weakref.ref(thing, ring)
        del thing
        print("went on", stop.requested())
except stop.Stopped as exc:
    print("stopped", exc.signum)
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["went", "on", str(int(signal.SIGINT)), "stopped", str(int(signal.SIGINT))]
    assert run.stderr == "", run.stderr
