"""Grade a whole class: in parallel through Dask, resumable, with safe writes.

Each (student, assignment) pair is one task. A task runs :class:`~.grade.Grader` in a
worker process (its own nbgrader work area, reset before every notebook) and returns
everything it produced: scores, per-cell points, feedback HTML and the autograded
notebook. Only this process writes under ``OUT``, one finished task at a time and
each file atomically, so results cannot be lost or duplicated whatever order tasks
finish in:

- ``OUT/results/<student>/<assignment>.json``: the record of one pair, written last.
  A pair whose record matches the submission and the grader (``fingerprint``) is not
  graded again: an interrupted run resumes; ``regrade=True`` forces.
- ``OUT/nbgrader/``: a course root for formgrader and ``nbgrader export`` (its
  gradebook and autograded notebooks).
- ``OUT/feedback/``, ``OUT/grades.csv``, ``OUT/exercises.csv``, ``OUT/lms.csv``,
  ``OUT/results.json``.

Workers: a Dask ``LocalCluster`` with one single-threaded process per core by default,
or an existing scheduler (``scheduler="tcp://host:8786"``) whose workers see this
repository and ``OUT`` at the same paths.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from transformer_course.course import mathjax
from transformer_course.course.build import convert_sources
from transformer_course.grading import stop
from transformer_course.grading.kernel import forkserver, sandbox
from transformer_course.grading.notebook import limits as limits_of
from transformer_course.grading.notebook.grade import (
    ExerciseResult,
    Grader,
    GraderError,
    SubmissionResult,
    fallback_html,
    one_line,
    zero_scores,
)
from transformer_course.grading.output.atomic import atomic_write
from transformer_course.grading.run import boundary
from transformer_course.grading.run.classbook import ClassBook
from transformer_course.grading.run.faults import check_writable, fault_of
from transformer_course.grading.run.publish import late_banner, write_csvs, written_on_pages
from transformer_course.grading.submission.handin import (
    NOT_GRADED,
    Handed,
    Releases,
    discover,
    find_submission,
    summary,
)
from transformer_course.grading.submission.intake import DEFAULT_MAX_MB
from transformer_course.grading.version import grader_version
from transformer_course.instructors import deadlines as late
from transformer_course.instructors import roster
from transformer_course.instructors.deadlines import Deadlines
from transformer_course.layout import ERRORS_LOG, GRADER_ERROR, Assignment, Repo

KILLED = "the grading worker process died while grading it"
MATHJAX_FOLDER = ".mathjax"  # under OUT/feedback: no student id starts with "." (discover() skips those)
_GRADERS: dict[tuple, Grader] = {}  # one per worker process and setting


@dataclass(frozen=True)
class Task:
    """One notebook to grade, with the submission's bytes (workers need not see ``SUBMITTED``)."""

    student_id: str
    assignment: str
    filename: str | None  # None: not handed in
    data: bytes | None
    note: str
    fingerprint: str
    status: str = ""  # with no notebook: one of handin.NOT_GRADED


def grade_task(root: str, limits: dict, threads: int, work_root: str, task: Task) -> dict:
    """Grade one task in this (worker) process; the payload :func:`grade_class` records.
    ``limits``: :class:`~.grade.Grader`'s keyword arguments (timeout, memory_mb, ...)."""
    os.environ["OMP_NUM_THREADS"] = str(threads)  # kernels inherit it: no oversubscribed cores
    key = (root, tuple(sorted(limits.items())), work_root)
    if key not in _GRADERS:
        work = Path(work_root) / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        _GRADERS[key] = Grader(work, Repo(Path(root)), **limits)
    grader = _GRADERS[key]
    assignment = next(a for a in grader.assignments if a.name == task.assignment)
    with tempfile.TemporaryDirectory(prefix="tc-task-") as tmp:  # a task always has a notebook (see _missing)
        path = Path(tmp) / "in" / task.filename
        path.parent.mkdir()
        path.write_bytes(task.data)
        result = grader.grade(task.student_id, assignment, path, task.note, Path(tmp) / "fb")
        stop.check()  # a Ctrl-C reached this worker's kernel: what it did is not the student's
        html = Path(tmp, "fb", task.student_id, assignment.name, f"{assignment.notebook}.html").read_text()
    autograded = grader.autograded(assignment)
    cells: dict[str, float] = {}
    if autograded.is_file():
        cells = grader.grade_cells(assignment)
    return {"result": asdict(result), "cells": cells, "feedback": html, "fingerprint": task.fingerprint,
            "autograded": autograded.read_bytes() if autograded.is_file() else None}


def invalid_payload(task: Task, assignment: Assignment, payload: Any) -> str:
    """'' when a worker's payload is one this task can have, else what is wrong with it. The parent
    writes every record, by the task's own student and assignment: a worker (or whatever ran in it)
    can at most spoil its own notebook, never write another's record or give points a cell has not."""
    if not isinstance(payload, dict) or not isinstance(payload.get("result"), dict):
        return "not a record"
    result = payload["result"]
    if result.get("student_id") != task.student_id or result.get("assignment") != task.assignment:
        return f"it names {result.get('student_id')!r}/{result.get('assignment')!r}"
    if result.get("status") not in ("graded", "crashed", "invalid", *NOT_GRADED, GRADER_ERROR):
        return f"status {result.get('status')!r}"
    exercises = result.get("exercises")
    if not isinstance(exercises, list) or [e.get("exercise") if isinstance(e, dict) else None
                                           for e in exercises] != list(assignment.exercises):
        return "its exercises are not the assignment's"
    for e in exercises:
        top = assignment.max_score(e["exercise"])
        if not (isinstance(e.get("score"), int | float) and 0 <= e["score"] <= top and e.get("max_score") == top
                and isinstance(e.get("feedback"), str)):
            return f"{e['exercise']}: score {e.get('score')!r} of {e.get('max_score')!r} (at most {top:g})"
    points = {t.grade_id: t.points for t in assignment.tests}
    cells = payload.get("cells")
    if not isinstance(cells, dict) or any(k not in points or not isinstance(v, int | float) or not 0 <= v <= points[k]
                                          for k, v in cells.items()):
        return "its cells are not the assignment's test cells, within their points"
    if not isinstance(payload.get("feedback"), str):
        return "no feedback page"
    return ""


def _missing(task: Task, assignment: Assignment, status: str = "missing") -> dict:
    """The payload of a pair with nothing to grade (``missing``; ``refused``: a link, a special file
    or a notebook over the size cap, never read; ``wrong-notebook``, ``not-a-notebook``: see
    :mod:`.handin`): no kernel, no worker needed."""
    result = SubmissionResult(task.student_id, task.assignment, status, task.note,
                              zero_scores(assignment, task.note))
    return {"result": asdict(result), "cells": {}, "feedback": fallback_html(result),
            "fingerprint": task.fingerprint, "autograded": None}


def _grader_error(task: Task, assignment: Assignment, error: BaseException) -> dict:
    """The payload for a task the grader itself failed on. Its status says so: it is not the
    student's zero, it is not recorded (the next run grades it again), and it is logged."""
    what = one_line(f"{type(error).__name__}: {error}", 160)
    if type(error).__name__ == "KilledWorker":  # Dask: every worker process that took it died (killed, out of memory)
        what = f"{KILLED}: killed, or out of memory, on every try"
    reason = (f"{GRADER_ERROR}: this notebook could not be graded because the grader failed "
              f"({what}); it is not the student's score")
    result = SubmissionResult(task.student_id, task.assignment, GRADER_ERROR, reason, zero_scores(assignment, reason))
    trace = "".join(traceback.format_exception(error))
    return {"result": asdict(result), "cells": {}, "feedback": fallback_html(result), "fingerprint": "",
            "autograded": None, "traceback": trace}


def _as_result(record: dict) -> SubmissionResult:
    r = record["result"]
    return SubmissionResult(r["student_id"], r["assignment"], r["status"], r["reason"],
                            [ExerciseResult(**e) for e in r["exercises"]])


def _run(tasks: list[Task], run_args: tuple, workers: int, scheduler: str | None) -> Iterator[tuple[Task, Any]]:
    """(task, payload or exception) as tasks finish: in this process for one worker and no
    scheduler, else through Dask."""
    if scheduler is None and workers <= 1:
        for task in tasks:
            try:
                yield task, grade_task(*run_args, task)
            except Exception as exc:  # a grader bug must not stop the class
                yield task, exc
        return
    from distributed import Client, as_completed

    from transformer_course.grading.run.daskquiet import (
        children,
        end_workers,
        local_cluster,
        no_thread_tracebacks,
        quiet,
    )

    before = children()
    cluster = client = None
    try:
        if scheduler is None:
            cluster = local_cluster(workers)
        client = Client(scheduler or cluster)
        futures = {client.submit(grade_task, *run_args, task, pure=False, retries=1,
                                 key=f"grade-{task.student_id}-{task.assignment}-{uuid.uuid4().hex[:8]}"): task
                   for task in tasks}
        for future in as_completed(futures):
            try:
                yield futures[future], future.result()
            except Exception as exc:
                yield futures[future], exc
    finally:
        # Closing after Ctrl-C (or a full disk): Dask's threads may log, or print the tracebacks of
        # connections that just closed; the command's own last line says what happened.
        with quiet("distributed"), quiet("tornado"), quiet("asyncio"), no_thread_tracebacks():
            with contextlib.suppress(Exception):
                if client is not None:
                    client.close()
            with contextlib.suppress(Exception):
                if cluster is not None:
                    cluster.close()
            if scheduler is None:
                end_workers(before)


def grade_class(submitted: Path, out: Path, repo: Repo | None = None, timeout: int = 30, progress: bool = True,
                workers: int | None = None, scheduler: str | None = None, regrade: bool = False,
                memory_mb: int = 4096, notebook_timeout: int = 1800,
                max_output_mb: float = 10.0, deadlines: Deadlines | None = None,
                threads: int | None = None, only: list[str] | None = None,
                max_submission_mb: float | None = DEFAULT_MAX_MB,
                names: dict[str, str] | None = None) -> list[SubmissionResult]:
    """Grade every submission under ``submitted``; write records, gradebook, CSVs and feedback under ``out``.

    Args:
        submitted: nbgrader's layout, ``<student_id>/<assignment>/<notebook>.ipynb``.
        out: output folder (see the module docstring); an earlier run's records are reused.
        timeout: seconds one cell may run.
        workers: processes on this machine (default: one per core); 1 = in this process.
        scheduler: address of a running Dask scheduler to send the work to instead.
        regrade: grade everything again, even pairs whose record is up to date.
        memory_mb: memory one grading kernel may allocate (MiB; 0 = no limit).
        notebook_timeout: seconds a whole notebook may run; later cells are not run (0 = no limit).
        max_output_mb: output kept of a whole notebook, millions of characters.
        deadlines: due dates and the late policy (:mod:`.deadlines`); lateness is worked out from
            the records after grading, so a new deadline grades nothing again.
        threads: torch threads of each grading kernel (default: the cores shared among the workers;
            the scores do not depend on it, which tests/test_grading.py checks).
        only: the assignments to grade, by name or number (``02_scaled_dot_product`` or ``02``);
            the others are neither graded nor reported, nor counted missing. Default: all.
        max_submission_mb: a notebook larger than this (MiB) is ``refused`` before it is read
            (None: no cap). So is one that is, or lies below, a symbolic link or a special file.
        names: student id -> name (:func:`.roster.for_run`): on the feedback pages, kept in
            ``OUT/roster.csv`` for ``report`` and ``similarity``.

    Returns:
        One result per (student, assignment), sorted by student then assignment.

    Raises:
        FileNotFoundError: see :func:`~.handin.discover`.
        KeyError: ``only`` names an assignment the course does not have.
        OutputBusy: another grading run is writing to ``out``.
    """
    repo = repo or Repo()
    chosen = selected(repo, only)
    submitted, out = submitted.resolve(), out.resolve()  # workers and nbgrader run elsewhere
    done = Progress()
    try:
        check_writable(out)  # a read-only, full or forbidden OUT fails now, not after minutes of start
        with stop.handled(), output_lock(out):
            limits = {"timeout": timeout, "memory_mb": memory_mb, "notebook_timeout": notebook_timeout,
                      "max_output_mb": max_output_mb}
            return _grade_class(submitted, out, repo, limits, progress, workers, scheduler, regrade, deadlines,
                                threads, chosen, max_submission_mb, done, names or {})
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            stop.sweep()  # no kernel, judge, sandbox or worker of this run outlives it
        with contextlib.suppress(AttributeError):
            exc.grading_progress = done  # type: ignore[attr-defined]  # what the command's last line says
        raise


@dataclass
class Progress:
    """How far a run got, for the line that says what was kept when it stops early: an exception
    out of :func:`grade_class` carries it as ``grading_progress``."""

    pairs: int = 0  # (student, assignment) pairs of this run; 0: it stopped before it knew them
    kept: int = 0  # pairs whose record is on disk (earlier runs' and this run's)
    graded: int = 0  # records written by this run (a notebook graded, or found missing, wrong, not a notebook)
    to_grade: int = 0  # notebooks this run had to grade
    failed: str = ""  # "student/assignment" whose writing failed: no record, so the next run grades it again


def selected(repo: Repo, only: list[str] | None) -> list[str] | None:
    """The names of the assignments ``only`` gives by name or by number, in the course's order.

    Raises:
        KeyError: a name or number the course does not have (the message lists the course's).
    """
    if not only:
        return None
    names = [a.name for a in repo.assignments()]
    chosen = set()
    for wanted in only:
        found = [n for n in names if wanted in (n, n.split("_", 1)[0])]
        if not found:
            raise KeyError(f"--assignment {wanted!r}: the course has {', '.join(names)}")
        chosen.update(found)
    return [n for n in names if n in chosen]


def setup_line(limits: dict) -> str:
    """One line that says how this run grades: the configuration, the sandbox, the limits."""
    from transformer_course.grading.judging import judge_box
    from transformer_course.grading.kernel import forkserver
    from transformer_course.grading.notebook.nbgrader_setup import notebook_clock_words

    if sandbox.warning():
        where = "kernels WITHOUT a sandbox (see the warning above), the checks judged in the grading process"
    else:
        where = ("kernels in the bubblewrap sandbox ("
                 + ("no network" if sandbox.isolates_network() else "WITH the network: bwrap cannot unshare it here")
                 + (", forked from a warm template" if forkserver.enabled() else "") + "), "
                 + ("each notebook's judge in a box of its own" if judge_box.enabled()
                    else "the checks judged in the grading process"))
    return ("grading with: nbgrader's configuration from transformer_course.grading.notebook.nbgrader_setup "
            f"(the same as "
            f"autograder/nbgrader_config.py); {where}; limits: {limits['timeout']} s of CPU time a cell (more where"
            f" the solution needs it), {notebook_clock_words(limits['timeout'], limits['notebook_timeout'])}, "
            f"{limits['memory_mb']} MiB, "
            f"{limits['max_output_mb']:g} M characters of output{memory_line(limits)}")


def memory_line(limits: dict) -> str:
    """What bounds a notebook's memory beyond its kernel's own limit, as the setup line says it."""
    from transformer_course.grading.kernel import forkserver, memcg
    from transformer_course.grading.kernel.kernels import MAX_KERNEL_MESSAGE

    where = ""
    if not sandbox.warning():
        where = (f"; {memcg.status()}" + (f" ({limits['memory_mb'] + forkserver.TEMPLATE_MB} MiB with the "
                 "template)" if limits["memory_mb"] and forkserver.enabled() and memcg.status().startswith("a ")
                 else "") + f", {sandbox.TMPFS_BYTES >> 20} MiB of /tmp and of /dev/shm; {memcg.process_status()}")
    return f"{where}; a kernel's message at most {MAX_KERNEL_MESSAGE >> 20} MiB (larger: refused unread)"


class OutputBusy(RuntimeError):
    """Another grading run holds the output folder."""


@contextlib.contextmanager
def output_lock(out: Path) -> Iterator[None]:
    """Hold ``OUT/.grading.lock`` for the block: two runs writing one OUT would mix their records.

    Raises:
        OutputBusy: another process holds it.
    """
    import fcntl

    with open(out / ".grading.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputBusy(f"another grading run is writing to {out} (it holds {out / '.grading.lock'}); "
                             "wait for it to end, or grade into another --out") from None
        yield  # the lock goes with the file's closing, also when this process is killed


def _grade_class(submitted: Path, out: Path, repo: Repo, limits: dict, progress: bool, workers: int | None,
                 scheduler: str | None, regrade: bool, deadlines: Deadlines | None = None,
                 threads: int | None = None, only: list[str] | None = None,
                 max_submission_mb: float | None = DEFAULT_MAX_MB, done: Progress | None = None,
                 names: dict[str, str] | None = None) -> list[SubmissionResult]:
    done = done if done is not None else Progress()
    assignments = {a.name: a for a in convert_sources(repo) if only is None or a.name in only}
    if unsandboxed := sandbox.warning():
        print(unsandboxed, file=sys.stderr)
    if progress:
        print(setup_line(limits), file=sys.stderr)
    pairs, skipped = discover(submitted, list(assignments.values()))
    for warning in skipped:
        print(f"warning: {submitted.name}/{warning}", file=sys.stderr)
    version = grader_version(repo, *(limits[k] for k in sorted(limits)))
    records: dict[tuple[str, str], dict] = {}
    tasks: list[Task] = []
    missing: list[Task] = []
    notices: list[str] = []
    errors: list[tuple[Task, dict]] = []  # grader failures found before grading, logged with the others
    known = Releases(repo.assignments())  # every assignment's, also with ``only``: a wrong notebook is named
    where: dict[tuple[str, str], tuple[Path, Path | None]] = {}  # the submission's folder and notebook
    for student_id, assignment, folder in pairs:
        key = (student_id, assignment.name)
        with boundary.pair("intake") as failed:  # one hand-in's bytes decide its own row, never the run
            task, record, handed = _intake(student_id, assignment, folder, out, version, regrade, known,
                                           max_submission_mb)
            where[key] = (folder, handed.path)
            if handed.unusual:  # renamed, several notebooks, another's, no notebook, refused: the summary lists it
                notices.append(f"{student_id} {assignment.name}: {handed.note.strip()}")
        if failed:
            task = Task(student_id, assignment.name, None, None, failed[0].reason, "", failed[0].status)
            notices.append(f"{student_id} {assignment.name}: {failed[0].reason}")
            where[key] = (folder, None)
            if failed[0].recorded:
                missing.append(task)  # recorded without a kernel, as the hand-in decides it
            else:
                records[key] = _grader_error(task, assignments[task.assignment], failed[0].error)
                errors.append((task, records[key]))
            continue
        if record is not None:
            records[key] = record
        else:
            (tasks if task.filename else missing).append(task)
    done.pairs, done.kept, done.to_grade = len(pairs), len(records), len(tasks)
    book = ClassBook(out / "nbgrader", repo)
    book.names = names or {}
    mathjax.install(out / "feedback" / MATHJAX_FOLDER)  # formulas render offline (else: the CDN)
    errors_log = out / ERRORS_LOG
    errors_log.unlink(missing_ok=True)  # this run's failures only
    for task, payload in errors:
        _log_error(errors_log, task, payload)
    for task in missing:
        payload = _missing(task, assignments[task.assignment], task.status or "missing")
        records[(task.student_id, task.assignment)] = _record(out, book, assignments[task.assignment], task,
                                                              payload, errors_log, done)
    workers = workers or os.cpu_count() or 1
    if threads is None:
        threads = max(1, (os.cpu_count() or 1) // workers) if scheduler is None else 1
    work_root = out / ".work"  # the workers' private nbgrader areas; removed at the end
    if scheduler is None:
        shutil.rmtree(work_root, ignore_errors=True)
    # Each worker sets up the assignments this run has notebooks of, not all eight (a few seconds each).
    needed = tuple(sorted({t.assignment for t in tasks}))
    run_args = (str(repo.root), {**limits, "only": needed}, threads, str(work_root))
    first = limits_of.unmeasured(repo, [assignments[n] for n in sorted({t.assignment for t in tasks})], threads)
    if progress and first:  # else a silent minute behind "0/N" (the solution is graded before the first notebook)
        many = len(first) > 1
        print(f"measuring the solution{'s' * many} of {', '.join(first)} on this machine first (once per machine, "
              f"about a minute{' each' * many}: the time limits of slow cells scale with it)...", file=sys.stderr)
    bar = tqdm(total=len(tasks), desc="grading", unit="notebook", disable=not progress or not tasks)
    finished = _run(tasks, run_args, workers, scheduler)
    try:
        for task, payload in finished:
            stop.check()  # after Ctrl-C, what was in progress failed because of it: not the student's row
            if isinstance(payload, BaseException) and fault_of(payload, strict=True):
                done.failed = f"{task.student_id}/{task.assignment}"
                raise payload  # the worker could not write (a full disk): every other notebook would fail alike
            problem = "" if isinstance(payload, BaseException) else invalid_payload(
                task, assignments[task.assignment], payload)
            if problem:
                payload = GraderError(f"the grading worker returned a record that is not one: {problem}")
            if isinstance(payload, BaseException):
                payload = _grader_error(task, assignments[task.assignment], payload)
            records[(task.student_id, task.assignment)] = _record(out, book, assignments[task.assignment], task,
                                                                  payload, errors_log, done)
            bar.update()
    finally:
        finished.close()  # the cluster closes now, not when the exception's traceback is freed
        bar.close()
        if scheduler is None:
            shutil.rmtree(work_root, ignore_errors=True)
            for key in [k for k in _GRADERS if k[2] == str(work_root)]:
                del _GRADERS[key]  # its work area is gone
            forkserver.stop_all()  # the kernel templates of this process (workers=1) mount it
    results = [_as_result(records[key]) for key in sorted(records)]
    points = book.written(results, assignments)  # first: a late penalty is worked out on the instructor's score
    for r in results:
        if deadlines is not None:
            _lateness(r, assignments[r.assignment], where, deadlines, book, out)
        else:
            _handed_in(r, assignments[r.assignment], where, book)
    write_csvs(results, out)
    roster.keep(out, names or {})
    for r in results:  # the instructor's points on the pages, none as 0; the student's name on top
        with boundary.pair("pages") as failed:
            written_on_pages(out, [r], assignments, points)
            roster.heading_on_page(_page(out, r, assignments[r.assignment]), r.student_id, names or {})
        if failed:
            print(f"warning: {r.student_id} {r.assignment}: its feedback page does not show the points in words "
                  f"({failed[0].reason})", file=sys.stderr)
    if notices:  # after grading, in one block: what was handed in other than the expected notebook
        print(summary(notices), file=sys.stderr)
    return results


def _intake(student_id: str, assignment: Assignment, folder: Path, out: Path, version: str, regrade: bool,
            known: Releases, max_submission_mb: float | None) -> tuple[Task, dict | None, Handed]:
    """Find and read one pair's hand-in: its :class:`Task`, its earlier record where that is up to date
    (nothing to grade again), and what was found. Runs inside the pair's boundary: whatever it raises
    is that pair's row."""
    handed = find_submission(folder, assignment, max_submission_mb, known)
    path, note, data = handed.path, handed.note, handed.data
    fingerprint = hashlib.sha256(
        f"{version}|{student_id}|{assignment.name}|{path.name if path else ''}|{note}".encode()
        + (data or b"")).hexdigest()
    task = Task(student_id, assignment.name, path.name if path else None, data, note, fingerprint, handed.status)
    record_path = out / "results" / student_id / f"{assignment.name}.json"
    if not regrade and record_path.is_file():
        with contextlib.suppress(ValueError, OSError, RecursionError):  # a damaged record is graded again
            record = json.loads(record_path.read_text())
            if isinstance(record, dict) and record.get("fingerprint") == fingerprint:
                return task, record, handed
    return task, None, handed


def _record(out: Path, book: ClassBook, assignment: Assignment, task: Task, payload: dict, errors_log: Path,
            done: Progress) -> dict:
    """Write one pair's record and pages (:func:`_save`) inside its boundary; the payload its row
    comes from: this one, or a grader-error (not recorded, logged) where writing it failed for
    another reason than the storage (a full disk is the run's)."""
    if payload["result"]["status"] != GRADER_ERROR:
        with boundary.pair("record") as failed:
            _save(out, book, assignment, {**payload, "submitted": task.data}, done)
            return payload
        done.failed = ""  # it is logged as a grader error, and graded again by the next run
        payload = _grader_error(task, assignment, failed[0].error)
    _log_error(errors_log, task, payload)
    return payload


def _lateness(result: SubmissionResult, assignment: Assignment, where: dict, deadlines: Deadlines,
              book: ClassBook, out: Path) -> None:
    """One pair's hand-in time, late penalty, gradebook entry and banner, inside its boundary: a
    time that cannot be worked with (a date out of range) is said on its row and page, never the run's end."""
    late.excuse(result, deadlines)  # a missing notebook can be excused too
    if result.status in (*NOT_GRADED, GRADER_ERROR):
        return
    page = _page(out, result, assignment)
    with boundary.pair("lateness") as failed:
        late.apply([result], where, deadlines)
    if failed:
        result.submitted_at, result.due, result.late_by, result.late_penalty = "", "", 0.0, 0.0
        result.late_note = (f"the hand-in time could not be used ({boundary.said(failed[0].error)}): no late "
                            "penalty was worked out; check it by hand")
        result.reason = f"{result.reason.strip()} [{result.late_note}]".strip()
    with boundary.pair("lateness") as failed:
        book.lateness(assignment, result, deadlines.due(result.assignment))
    if failed:  # the tables have it; formgrader's page lacks it
        print(f"warning: {result.student_id} {result.assignment}: the gradebook does not hold its hand-in time "
              f"({boundary.said(failed[0].error)})", file=sys.stderr)
    with boundary.pair("pages") as failed:
        late_banner(page, result, deadlines)
    if failed:
        print(f"warning: {result.student_id} {result.assignment}: its feedback page does not say its lateness "
              f"({boundary.said(failed[0].error)})", file=sys.stderr)


def _page(out: Path, result: SubmissionResult, assignment: Assignment) -> Path:
    return out / "feedback" / result.student_id / result.assignment / f"{assignment.notebook}.html"


def _handed_in(result: SubmissionResult, assignment: Assignment, where: dict, book: ClassBook) -> None:
    """Without deadlines: the hand-in's time in the gradebook alone (the formgrader's submissions page shows
    it, and the submission as autograded), inside the pair's boundary; the tables stay without lateness."""
    if result.status in (*NOT_GRADED, GRADER_ERROR):
        return
    with boundary.pair("lateness") as failed:
        when = late.submitted_at(*where.get((result.student_id, result.assignment), (None, None))).when
        if when is not None:
            book.lateness(assignment, dataclasses.replace(result, submitted_at=when.isoformat()), None)
    if failed:
        print(f"warning: {result.student_id} {result.assignment}: the gradebook does not hold its hand-in time "
              f"({boundary.said(failed[0].error)})", file=sys.stderr)


def _log_error(log: Path, task: Task, payload: dict) -> None:
    """Append one grader failure, with its traceback, to ``OUT/grader-errors.log``."""
    result = payload["result"]
    entry = (f"== {result['student_id']} {result['assignment']} ({task.filename}) ==\n{result['reason']}\n"
             f"{payload.get('traceback', '').rstrip()}\n\n")
    with open(log, "a") as f:
        f.write(entry)


def _save(out: Path, book: ClassBook, assignment: Assignment, payload: dict, done: Progress | None = None) -> None:
    """Feedback, gradebook and autograded notebook first, the record last: a record on disk
    means everything of that pair was written. An earlier record goes first, so a write that
    fails (a full disk, Ctrl-C) leaves none: the next run grades that pair again."""
    result = payload["result"]
    record_path = out / "results" / result["student_id"] / f"{assignment.name}.json"
    if done is not None:
        done.failed = f"{result['student_id']}/{assignment.name}"
    record_path.unlink(missing_ok=True)
    page = payload["feedback"]
    if (out / "feedback" / MATHJAX_FOLDER / mathjax.SCRIPT).is_file():  # feedback/<student>/<assignment>/page
        page = mathjax.use_local(page, f"../../{MATHJAX_FOLDER}/{mathjax.SCRIPT}")
    atomic_write(out / "feedback" / result["student_id"] / assignment.name / f"{assignment.notebook}.html", page)
    book.record(assignment, payload)
    record = {k: v for k, v in payload.items() if k not in ("feedback", "autograded", "submitted")}
    atomic_write(record_path, json.dumps(record, indent=1))
    if done is not None:
        done.failed = ""
        done.kept += 1
        done.graded += 1  # a record this run wrote (a notebook graded, or one found missing or not a notebook)


