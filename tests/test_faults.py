"""Faults end in one clear line: a full disk, a read-only output folder, Ctrl-C (in this process and
through Dask). The line says what happened, what was kept and how to go on; no traceback (but with
--debug); what was graded is kept, and the next run grades only the rest."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from transformer_course import cli
from transformer_course.grading.output import atomic
from transformer_course.grading.run import batch
from transformer_course.grading.run.faults import fault_of

from .conftest import GRADING_TIMEOUT, ROOT

ASSIGNMENT = "01_self_attention"


def _grade(submitted: Path, out: Path, *more: str) -> list[str]:
    return ["grade", str(submitted), "--out", str(out), "--assignment", "01", "--timeout", str(GRADING_TIMEOUT),
            *more]


def _one_line(err: str, words: str) -> str:
    """The fault's line: the last line, the only one that says ``words``; no traceback."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert [line for line in lines if words in line] == lines[-1:], err
    return lines[-1]


@pytest.fixture
def fake_grading(monkeypatch):
    """No kernels: each notebook's payload is a valid record (graded as not handed in), so these
    tests check what is written and kept, in seconds. Returns the students graded, in order."""
    graded = []

    def grade_task(root, limits, threads, work_root, task):
        graded.append(task.student_id)
        assignment = next(a for a in batch.Repo(Path(root)).assignments() if a.name == task.assignment)
        return batch._missing(task, assignment)

    monkeypatch.setattr(batch, "grade_task", grade_task)
    return graded


def test_full_disk_keeps_what_was_graded_and_the_next_run_grades_the_rest(small_class, tmp_path, monkeypatch,
                                                                           capsys, fake_grading):
    out = tmp_path / "out"
    real_write = batch.atomic_write
    records = []

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def write(path, data):  # the second graded notebook's record finds the disk full
        if path.parent.parent.name == "results":
            records.append(path)
            if len(records) == 3:  # bob (nothing handed in), ada, then cho
                with monkeypatch.context() as m:
                    m.setattr(atomic.os, "fsync", full)  # its temporary file is written, then the disk is full
                    return real_write(path, data)
        real_write(path, data)

    monkeypatch.setattr(batch, "atomic_write", write)
    assert cli.main(_grade(small_class, out, "--workers", "1")) == 1
    line = _one_line(capsys.readouterr().err, "error:")
    # bob's record (nothing handed in) and ada's, both written by this run
    assert "the disk is full" in line and f"2 of 3 notebooks are graded and kept in {out}/results/; " in line, line
    assert "cho/01_self_attention could not be written and is graded again by the next run" in line, line
    assert line.endswith("free some space, then run the same command again"), line
    assert sorted(p.parent.name for p in out.glob(f"results/*/{ASSIGNMENT}.json")) == ["ada", "bob"]
    assert not list(out.glob("results/*/.*")), "no temporary file is left"
    assert not (out / "grades.csv").exists()

    monkeypatch.setattr(batch, "atomic_write", real_write)
    fake_grading.clear()
    assert cli.main(_grade(small_class, out, "--workers", "1")) == 0
    assert fake_grading == ["cho"], "the next run grades only what was not kept"
    assert sorted(p.parent.name for p in out.glob(f"results/*/{ASSIGNMENT}.json")) == ["ada", "bob", "cho"]


def test_ctrl_c_in_process_says_what_was_kept(small_class, tmp_path, monkeypatch, capsys):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(batch, "grade_task", interrupted)
    out = tmp_path / "out"
    assert cli.main(_grade(small_class, out, "--workers", "1")) == 130
    line = _one_line(capsys.readouterr().err, "interrupted")
    assert line == (f"interrupted: 1 of 3 notebooks are graded and kept in {out}/results/; "  # bob's, by this run
                    "run the same command again to grade the rest"), line
    assert cli.main(_grade(small_class, out, "--workers", "1", "--debug")) == 130
    err = capsys.readouterr().err
    assert "Traceback" in err, "--debug shows it"
    assert f"interrupted: 1 of 3 notebooks are graded and kept in {out}/results/ (none of them by this run); " in err


@contextlib.contextmanager
def _tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """``folder`` with a tmpfs of ``size`` mounted on it for the block (the test skips where mounting is not
    allowed)."""
    folder.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here (not root, or in a container without CAP_SYS_ADMIN): {exc}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


@pytest.fixture
def read_only(tmp_path) -> Iterator[Path]:
    """A folder on a file system mounted read-only (root ignores a folder's mode bits)."""
    with _tmpfs(tmp_path / "ro", "1m") as folder:
        (folder / "out").mkdir()
        (folder / "out" / "results.json").write_text("[]")
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True, capture_output=True)
        yield folder / "out"


def test_read_only_out_fails_fast_with_one_line(small_class, read_only, capsys):
    start = time.monotonic()
    assert cli.main(_grade(small_class, read_only, "--workers", "1")) == 1
    line = _one_line(capsys.readouterr().err, "error:")
    assert time.monotonic() - start < 20, "before the long start (nbgrader's course root, workers)"
    assert line == (f"transformer-course grade: error: the output folder is on a read-only file system (writing "
                    f"{read_only}): nothing was graded; make {read_only} writable (or give another folder), then "
                    "run the same command again"), line

    assert cli.main(["report", str(read_only)]) == 1
    line = _one_line(capsys.readouterr().err, "error:")
    assert "read-only file system" in line and "the report was not written" in line, line


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def test_ctrl_c_with_dask_ends_quietly_and_leaves_no_worker(small_class, tmp_path):
    """As a terminal's Ctrl-C: SIGINT to the whole process group, once the workers grade."""
    out, err = tmp_path / "out", tmp_path / "stderr"
    command = [str(Path(sys.executable).parent / "transformer-course"), *_grade(small_class, out, "--workers", "2")]
    with open(err, "w") as stderr:
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None:  # the workers have taken their notebooks
            if (out / ".work").is_dir() and len(list((out / ".work").iterdir())) >= 2 and "grading:" in err.read_text():
                break
            time.sleep(0.2)
        assert process.poll() is None, err.read_text()
        time.sleep(1)
        processes = _descendants(process.pid)
        assert sum("spawn_main" in " ".join(p.cmdline()) for p in processes) >= 2, "the cluster's workers run"
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=120) == 130
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    text = err.read_text()
    line = _one_line(text, "interrupted")
    assert line.startswith(("interrupted: none of the 3 notebooks is graded yet; run the same command again",
                            "interrupted: 1 of 3 notebooks are graded",
                            "interrupted: 2 of 3 notebooks are graded")), line
    deadline = time.monotonic() + 15
    while (left := [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]) \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"left running: {[' '.join(p.cmdline())[:100] for p in left]}"


def test_a_stop_ends_the_runs_processes_but_not_multiprocessings_resource_tracker(tmp_path):
    """Killed by a Ctrl-C, the tracker was relaunched at the next lock's release, and the new one printed a
    traceback for every lock it had not seen (the Dask Ctrl-C test failed on it once, on a fresh clone). In a process
    of its own: the stop ends every child of the process that calls it."""
    script = """
import multiprocessing, subprocess, sys, psutil
from multiprocessing import resource_tracker
from transformer_course.grading import stop
lock = multiprocessing.get_context("spawn").Lock()  # registered with the tracker, which starts
sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
tracker = resource_tracker._resource_tracker._pid
stop.end_children()
alive = lambda pid: psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
print(alive(tracker), alive(sleeper.pid))
del lock
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "False"], run.stdout  # the tracker lives, the other child was ended
    assert "Traceback" not in run.stderr and "resource_tracker" not in run.stderr, run.stderr


def test_a_killed_worker_is_a_grader_error_said_in_the_last_line(small_class, tmp_path, monkeypatch, capsys,
                                                                   fake_grading):
    """Dask's KilledWorker (every worker that took the notebook died): that notebook is not recorded,
    the run goes on, and the last line says why and that the same command grades it again."""
    from distributed import KilledWorker

    def killed(root, limits, threads, work_root, task):
        if task.student_id == "cho":
            raise KilledWorker(task.student_id, SimpleNamespace(address="tcp://127.0.0.1:1"), 3)
        return fake(root, limits, threads, work_root, task)

    fake = batch.grade_task
    monkeypatch.setattr(batch, "grade_task", killed)
    out = tmp_path / "out"
    assert cli.main(_grade(small_class, out, "--workers", "1")) == 1
    err = capsys.readouterr().err
    line = _one_line(err, "grader error")
    assert "1 notebook could not be graded because of a grader error (1 because a grading worker process died)" \
        in line and line.endswith("run the same command again to grade them."), line
    assert sorted(p.parent.name for p in out.glob(f"results/*/{ASSIGNMENT}.json")) == ["ada", "bob"]


@pytest.mark.parametrize(("error", "kind"), [
    (OSError(errno.ENOSPC, "No space left on device", "/out/grades.csv"), "full"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), "full"),
    (OSError(errno.EROFS, "Read-only file system"), "read-only"),
    (PermissionError(errno.EACCES, "Permission denied"), "denied"),
    (OSError(errno.EPERM, "Operation not permitted"), "denied"),
    (RuntimeError("nbgrader generate_assignment 01_self_attention failed:\n... [Errno 28] No space left on device"),
     "full"),
    (sqlite3.OperationalError("database or disk is full"), "full"),
    (sqlite3.OperationalError("attempt to write a readonly database"), "read-only"),
    (OSError(errno.ENOENT, "No such file or directory"), None),
    (RuntimeError("a grader bug"), None),
])
def test_faults_are_told_from_grader_bugs(error, kind):
    wrapped = RuntimeError("while saving")  # as a library wraps it
    wrapped.__cause__ = error
    assert getattr(fault_of(wrapped), "kind", None) == kind
    if isinstance(error, RuntimeError):  # a worker's message may quote a student's notebook
        assert fault_of(error, strict=True) is None


def test_permission_denied_on_out_says_so(small_class, tmp_path, monkeypatch, capsys):
    def denied(out):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(out))

    monkeypatch.setattr(batch, "check_writable", denied)
    out = tmp_path / "out"
    assert cli.main(_grade(small_class, out, "--workers", "1")) == 1
    line = _one_line(capsys.readouterr().err, "error:")
    assert line == (f"transformer-course grade: error: permission denied (writing {out}): nothing was graded; make "
                    f"{out} writable for you (or give another folder), then run the same command again"), line


def test_a_really_full_disk_says_so(small_class, tmp_path, capsys):
    """A real ENOSPC on a small tmpfs (through nbgrader and SQLite as they meet it): one line."""
    with _tmpfs(tmp_path / "small", "300k") as folder:
        assert cli.main(_grade(small_class, folder / "out", "--workers", "1")) == 1
        line = _one_line(capsys.readouterr().err, "error:")
        assert line.startswith("transformer-course grade: error: the disk is full") and line.endswith(
            "free some space, then run the same command again"), line


def test_written_files_are_readable_as_a_new_file_would_be(tmp_path):
    """A feedback page or a CSV is as readable as ``open`` would make it under the user's umask (a TA, a web
    server), not the temporary file's owner-only 0600."""
    old = os.umask(0o022)
    try:
        atomic.atomic_write(tmp_path / "page.html", "<p>hi</p>")
    finally:
        os.umask(old)
    assert (tmp_path / "page.html").stat().st_mode & 0o777 == 0o644


def test_ctrl_c_inside_nbgraders_release_step_stays_a_ctrl_c(tmp_path, monkeypatch, repo):
    """nbgrader's capture_log catches every exception, Ctrl-C included, and reports a failure: the course
    root's set-up turns that back into a Ctrl-C (the run's "interrupted" line, not an error)."""
    from nbgrader.apps import NbGraderAPI

    from transformer_course.grading.notebook import nbgrader_setup

    trace = "Traceback (most recent call last):\n  File \"x\", line 1, in start\nKeyboardInterrupt\n"
    monkeypatch.setattr(NbGraderAPI, "generate_assignment",
                        lambda self, *a, **k: {"success": False, "log": "", "error": trace})
    with pytest.raises(KeyboardInterrupt):
        nbgrader_setup.generated_course(tmp_path / "course", repo, repo.assignments()[:1])
    monkeypatch.setattr(NbGraderAPI, "generate_assignment",
                        lambda self, *a, **k: {"success": False, "log": "bad source", "error": "ValueError\n"})
    with pytest.raises(RuntimeError, match="bad source"):
        nbgrader_setup.generated_course(tmp_path / "course", repo, repo.assignments()[:1])
