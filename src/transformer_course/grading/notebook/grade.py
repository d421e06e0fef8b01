"""``transformer-course grade``: autograde a class with nbgrader and report per exercise.

Input is nbgrader's layout, ``SUBMITTED/<student_id>/<assignment>/<notebook>.ipynb``.
Every (student, assignment) pair gets a row, whatever happened: a missing, unreadable,
crashing or never-ending submission scores 0 where it failed and says why.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import sqlite3
import sys
import threading
import warnings
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.api import Gradebook
from sqlalchemy import event
from sqlalchemy.engine import Engine

from transformer_course.course.build import convert_sources
from transformer_course.grading import stop
from transformer_course.grading.judging.judge_box import GRADERS_WORK
from transformer_course.grading.kernel import forkserver
from transformer_course.grading.notebook import workarea
from transformer_course.grading.notebook.nbgrader_setup import (
    NOTEBOOK_TIME_LIMIT,
    RETRY_FACTOR,
    SOLUTION_SECONDS,
    generated_course,
    trusted_tests,
)
from transformer_course.grading.notebook.workarea import MOUNTED, reference_on_path
from transformer_course.grading.submission import intact, intake
from transformer_course.layout import GRADER_ERROR, Assignment, Repo

# nbgrader 0.9.6 warns on every new student it creates during autograde; nothing is wrong.
warnings.filterwarnings("ignore", message="Object of type <Submitted")

# The student id nbgrader sees inside a private work area: any folder name (spaces, accents,
# a leading '-', glob characters) is graded, and nbgrader never has to parse one.
WORK_STUDENT = "student"
MAX_FEEDBACK = 400

# Work areas whose gradebook is scratch: written again from its pristine bytes before each notebook and read
# back at once (Grader._reset, grade_cells). SQLite syncs the disk at each of the hundreds of commits nbgrader
# makes per notebook, which buys such a file nothing; the class's own gradebook (OUT/nbgrader) keeps them.
_SCRATCH_GRADEBOOKS: set[str] = set()


@event.listens_for(Engine, "connect")
def _scratch_gradebook(connection: Any, _record: Any) -> None:
    if not _SCRATCH_GRADEBOOKS or not isinstance(connection, sqlite3.Connection):
        return
    files = [row[2] for row in connection.execute("PRAGMA database_list").fetchall() if row[2]]
    if any(os.path.dirname(os.path.realpath(f)) in _SCRATCH_GRADEBOOKS for f in files):
        connection.execute("PRAGMA synchronous=OFF")
        connection.execute("PRAGMA journal_mode=MEMORY")


def _remove(path: Path) -> None:
    """Delete a file, a link or a whole folder (a link to a folder: the link only)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


class GraderError(RuntimeError):
    """The grader itself failed on a notebook (nbgrader, the guard, our code): not the student's doing."""


@dataclass
class ExerciseResult:
    exercise: str
    score: float
    max_score: float
    feedback: str = ""


@dataclass
class SubmissionResult:
    student_id: str
    assignment: str
    status: str  # graded | invalid | crashed | grader-error (GRADER_ERROR) | handin.NOT_GRADED's
    reason: str = ""
    exercises: list[ExerciseResult] = field(default_factory=list)
    # The questions answered in words, graded by hand (formgrader), read from the class's gradebook
    # (see classbook.ClassBook.written); never part of score, final_score or the late penalty:
    manual_score: float | None = None  # None until every question of the notebook is graded
    manual_max_score: float = 0.0
    manual_status: str = ""  # "" (no questions, or nothing handed in) | awaiting | graded
    # Set where the run has a deadline for the assignment (see deadlines.py):
    submitted_at: str = ""  # ISO 8601, in the due date's own time zone (its offset)
    late_by: float = 0.0  # hours after the due date; 0 on time
    late_penalty: float = 0.0  # points off for lateness (the late policy's)
    late_note: str = ""  # how the time was found, where not from nbgrader's timestamp.txt
    due: str = ""  # the student's due date, ISO 8601, in the offset it was given in
    extended: bool = False  # the student's due date is an extension (the deadlines file's [extensions])
    excused: bool = False  # excused (Canvas's meaning: it does not count): never late, left out of totals
    # The instructor's changes to autograded test cells in formgrader (a score typed over the grader's, extra
    # credit), read from the gradebook (classbook.ClassBook.written): {"cell", "exercise", "points", "grader"
    # (the grader's score), "given" (the instructor's, None: the grader's kept), "extra_credit"} each. They are
    # part of score and final_score (and so of the late penalty); ``exercises`` keep the grader's scores.
    overrides: list[dict] = field(default_factory=list)

    @property
    def by_hand(self) -> float:
        """Points the instructor's overrides and extra credit add to the grader's (negative: take away)."""
        return sum((o["given"] - o["grader"] if o["given"] is not None else 0.0) + (o["extra_credit"] or 0.0)
                   for o in self.overrides)

    @property
    def score(self) -> float:
        """The autograded points, after the instructor's overrides and extra credit."""
        return sum(e.score for e in self.exercises) + self.by_hand

    @property
    def final_score(self) -> float:
        """The score less the late penalty (never below 0)."""
        return max(0.0, self.score - self.late_penalty)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)


def one_line(text: str, limit: int | None = MAX_FEEDBACK) -> str:
    """``text`` on one line, without ANSI colours, cut to ``limit`` characters (None: never cut),
    at the end of a word where one ends in its second half (a word cut in two reads as another)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # ANSI colours from tracebacks
    text = " ".join(text.split())
    if limit is None or len(text) <= limit:
        return text
    cut = text[: limit - 3]
    if text[limit - 3] != " " and cut.rfind(" ") > limit // 2:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip() + "..."


def compose_feedback(note: str, message: str, conclusion: str = "") -> str:
    """One line: ``note`` (how the notebook was read), the check's ``message``, ``conclusion``.

    Only the message is cut to :data:`MAX_FEEDBACK`: it is the part that can run long (shapes,
    values, a traceback's text); the note and the conclusion tell the student what to do.
    """
    return " ".join(part for part in (one_line(note, None), one_line(message), one_line(conclusion, None)) if part)


def zero_scores(assignment: Assignment, reason: str) -> list[ExerciseResult]:
    return [ExerciseResult(e, 0.0, assignment.max_score(e), reason) for e in assignment.exercises]


def _error_message(output: dict, timeout: int) -> str:
    ename, evalue = output.get("ename", "Error"), output.get("evalue", "")
    if ename == "NotImplementedError":
        return "not attempted: the answer still raises NotImplementedError"
    if ename == "CellTimeoutError" and evalue.startswith(("did not finish", GRADERS_WORK)):  # the cell's own limits
        return evalue
    if ename in ("DeadKernelError", "NotRun", NOTEBOOK_TIME_LIMIT):  # written by KeepGradesOnCrash (may say --timeout)
        return evalue
    if ename in ("KeyboardInterrupt", "CellTimeoutError") or "timeout" in evalue.lower():
        return (f"did not finish within {timeout} s of CPU time, nor within {timeout * RETRY_FACTOR} s when run "
                "again, and was interrupted (an endless loop?)")
    if ename == "AssertionError":
        return evalue or "an assertion failed (no message)"
    return f"{ename}: {evalue}"


def _cell_errors(nb: nbformat.NotebookNode) -> dict[str, dict]:
    """The first error output of each nbgrader cell, by grade_id."""
    errors = {}
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid and cell.cell_type == "code":
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    errors[gid] = output
                    break
    return errors


def explain(assignment: Assignment, exercise: str, lost: list[str], errors: dict, timeout: int) -> str:
    """One-line feedback for an exercise that lost points in the test cells ``lost``.

    Messages of cells with hidden tests come first: their checks name known mistakes.
    """
    if exercise in errors:
        return one_line("your answer cell failed: " + _error_message(errors[exercise], timeout))
    hidden = {t.grade_id for t in assignment.tests if t.hidden}
    ordered = sorted(lost, key=lambda gid: gid not in hidden)
    failed = [gid for gid in ordered if gid in errors]
    if not failed:
        return one_line(f"{', '.join(lost)} lost points")
    message = _error_message(errors[failed[0]], timeout)
    others = ""
    if len(failed) > 1 and not message.startswith("not attempted"):
        more = failed[1:]  # said in the student's words: which kind of test, not its internal id
        kinds = {"hidden" if gid in hidden else "visible" for gid in more}
        others = (f"[also failed: its {kinds.pop()} test]" if len(more) == 1
                  else f"[also failed: {len(more)} more of its tests]")
    return compose_feedback("", message, others)


def upstream_note(assignment: Assignment, exercise: str, results: list[ExerciseResult]) -> str:
    """Points at the student's earlier exercises that this one builds on and that lost points too.

    The hidden tests ran ``exercise`` with the reference versions of those pieces, so its own
    lost points are its own mistake; the note says so, and where to look next.
    """
    lost = {r.exercise for r in results if r.score < r.max_score}
    wrong = [u for u in assignment.upstream.get(exercise, []) if u in lost]
    own = next(r for r in results if r.exercise == exercise)
    if not wrong or own.feedback.startswith("not attempted") or "not run:" in own.feedback:
        return ""  # nothing of its own was graded: there is no mistake to place
    names = ", ".join(f"`{u}`" for u in wrong)
    return (f" Note: {exercise} builds on your {names}, which lost points too (see its feedback); "
            f"it was graded with the reference {names}, so this mistake is in {exercise} itself.")


class Grader:
    """Grades submissions one at a time in a private nbgrader work area ``work``.

    Each grade starts from the same pristine copy (gradebook, release, sources and the
    hidden reference, kept in memory): whatever a notebook writes to the files the
    grader reads cannot reach the next one.
    """

    def __init__(self, work: Path, repo: Repo | None = None, timeout: int = 30, memory_mb: int = 4096,
                 notebook_timeout: int = 1800, max_output_mb: float = 10.0,
                 only: str | Collection[str] | None = None,
                 created: bool = False):
        """``only``: set up this assignment alone, or these (the ones a run has notebooks of: a second of
        set-up each, not eight).
        ``created``: ``work`` was laid out by :func:`.workarea.create` already (its kernel template
        may still be importing); otherwise it is created (emptied first) here."""
        self.repo = repo or Repo()
        self.work = work = work.resolve()  # nbgrader resolves a relative path inside its course root
        self.timeout = timeout
        forkserver.set_memory(memory_mb)  # the memory cgroup of the sandboxes started from now on
        if not created:
            workarea.create(work, self.repo)  # the template imports while nbgrader sets up
        self.assignments = convert_sources(self.repo, only)
        _SCRATCH_GRADEBOOKS.add(os.path.realpath(work))
        shutil.copytree(self.repo.source, work / "source", ignore=workarea.IGNORED)
        self.api = generated_course(work, self.repo, self.assignments, timeout=timeout, memory_mb=memory_mb,
                                    notebook_timeout=notebook_timeout, max_output_mb=max_output_mb, sandbox=True,
                                    source=work / "source")
        self.coursedir = self.api.coursedir
        self._calibrating = False
        self.for_student = False  # set by check(): the solution's own shortfall is then not printed
        self._pristine = {p.relative_to(work): p.read_bytes() for p in sorted(work.rglob("*")) if p.is_file()}

    def _reset(self) -> None:
        """Put the work area back to its state after set-up, byte for byte."""
        for child in self.work.iterdir():
            if child.name in MOUNTED.values() and child.is_dir() and not child.is_symlink():
                for inner in child.iterdir():  # emptied, not replaced: a running sandbox mounts the folder
                    _remove(inner)
            else:
                _remove(child)
        for relative, data in self._pristine.items():
            path = self.work / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def released(self, assignment: Assignment) -> Path:
        """The notebook students were given (nbgrader's release), which submissions are graded against."""
        return self.work / "release" / assignment.name / f"{assignment.notebook}.ipynb"

    def autograded(self, assignment: Assignment) -> Path:
        """Where nbgrader leaves the autograded notebook of the last :meth:`grade`."""
        return self.work / MOUNTED["writable"] / WORK_STUDENT / assignment.name / f"{assignment.notebook}.ipynb"

    def grade_cells(self, assignment: Assignment) -> dict[str, float]:
        """Points of each autograded test cell in the gradebook, for the last :meth:`grade` of
        ``assignment`` (the questions answered in words are the instructor's to grade)."""
        tests = {t.grade_id for t in assignment.tests}
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            notebook = gb.find_submission_notebook(assignment.notebook, assignment.name, WORK_STUDENT)
            return {g.name: float(g.score or 0.0) for g in notebook.grades if g.name in tests}

    def grade(self, student_id: str, assignment: Assignment, submitted: Path, note: str = "",
              feedback_dir: Path | None = None) -> SubmissionResult:
        """Autograde one notebook and write its feedback HTML."""
        self.calibrate(assignment)
        self._reset()  # nothing of the previous notebook (its autograded copy, its grades) remains
        release = nbformat.read(self.released(assignment), as_version=4)
        nb, why = read_submission(submitted, intake.cell_cap(len(release.cells)))
        if nb is None:  # decided here, before nbgrader or a kernel sees it
            return self._failed(student_id, assignment, "invalid", note + why, feedback_dir)
        note += why
        note += intact.tamper_note(intact.restore_metadata(nb, release))
        target = self.work / "submitted" / WORK_STUDENT / assignment.name
        target.mkdir(parents=True)
        nbformat.write(nb, target / f"{assignment.notebook}.ipynb")
        autograded = self.autograded(assignment)
        with reference_on_path(self.work / MOUNTED["readonly"]):
            log = self.api.autograde(assignment.name, WORK_STUDENT, force=True, create=True)
        if not autograded.is_file():  # nbgrader drops the notebook when the kernel dies
            text = log.get("log", "") + "\n" + (log.get("error") or "")
            if "Kernel died" in text or "DeadKernel" in text:
                why = ("crashed: the kernel died while running the notebook (sys.exit, os._exit, or "
                       "out of memory?); nothing could be graded")
                return self._failed(student_id, assignment, "crashed", note + why, feedback_dir)
            raise GraderError(f"nbgrader autograde failed on {student_id}/{assignment.name}:\n{text.strip()}")
        exercises, died = self._exercise_results(assignment, autograded, note)
        status, reason = "graded", note.strip()
        if died:
            status, reason = "crashed", note + "grading stopped at " + died + "; later cells did not run"
        result = SubmissionResult(student_id, assignment.name, status, reason, exercises)
        if feedback_dir is not None:
            self.api.generate_feedback(assignment.name, WORK_STUDENT, force=True)
        return self._finish(result, feedback_dir)

    def calibrate(self, assignment: Assignment) -> dict[str, float]:
        """The seconds each graded cell of ``assignment``'s solution takes on this machine (measured by
        grading the solution, once per machine; see :mod:`.limits`), set as the base of its cells' limits."""
        from transformer_course.grading.notebook import limits
        from transformer_course.grading.version import grader_version

        if assignment.notebook in SOLUTION_SECONDS or self._calibrating:
            return SOLUTION_SECONDS.get(assignment.notebook, {})
        solution = self.repo.solutions / f"{assignment.notebook}.ipynb"
        cache = limits.cache_file(self.repo, assignment, grader_version(self.repo))
        seconds = limits.load(cache)
        if seconds is None and solution.is_file():
            self._calibrating = True
            try:
                result = self.grade("solution", assignment, solution)
            finally:
                self._calibrating = False
            stop.check()  # a Ctrl-C cut the solution short: what was measured is not its time
            autograded = self.autograded(assignment)
            seconds = limits.measured(autograded) if autograded.is_file() else {}
            short = [r for r in result.exercises if r.score < r.max_score]
            # Kept whatever it scored: the seconds are CPU seconds, which a busy machine does not shrink,
            # so grading the solution again at each check would only make a student wait again.
            limits.save(cache, seconds)
            limits.save_shortfall(cache, f"the solution of {assignment.name}, graded on this machine, lost points "
                                  f"in {', '.join(r.exercise for r in short)} ({one_line(short[0].feedback, 200)})"
                                  if short else "")
        shortfall = limits.shortfall(cache)
        if shortfall and not self.for_student:
            # for whoever grades a class; a student checking a notebook would read it as about theirs
            print(f"warning: {shortfall}: grades made here may be wrong (to measure again, delete {cache} and "
                  "the .shortfall file beside it)", file=sys.stderr)
        SOLUTION_SECONDS[assignment.notebook] = seconds or {}
        return SOLUTION_SECONDS[assignment.notebook]

    def _failed(self, student_id: str, assignment: Assignment, status: str, reason: str,
                feedback_dir: Path | None) -> SubmissionResult:
        result = SubmissionResult(student_id, assignment.name, status, reason, zero_scores(assignment, reason))
        return self._finish(result, feedback_dir)

    def _exercise_results(self, assignment: Assignment, autograded: Path,
                          note: str) -> tuple[list[ExerciseResult], str]:
        """Per-exercise scores from the gradebook and feedback from the autograded notebook,
        and the cell where the kernel died ("" if it did not)."""
        nb = nbformat.read(autograded, as_version=4)
        errors = _cell_errors(nb)
        died = next((f"cell {i} ({c.metadata.get('nbgrader', {}).get('grade_id', 'not graded')}): {o.get('evalue')}"
                     for i, c in enumerate(nb.cells) if c.cell_type == "code"
                     for o in c.get("outputs", []) if o.get("ename") in ("DeadKernelError", NOTEBOOK_TIME_LIMIT)), "")
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            grades = {}
            for grade in gb.find_submission_notebook(assignment.notebook, assignment.name, WORK_STUDENT).grades:
                grades[grade.name] = (grade.score or 0.0, grade.max_score or 0.0)
        results = []
        for exercise in assignment.exercises:
            cells = [t.grade_id for t in assignment.tests if t.exercise == exercise]
            score = sum(grades.get(c, (0.0, 0.0))[0] for c in cells)
            max_score = assignment.max_score(exercise)
            lost = [c for c in cells if grades.get(c, (0.0, 1.0))[0] < grades.get(c, (0.0, 1.0))[1]]
            feedback = ""
            if score < max_score:
                feedback = explain(assignment, exercise, lost, errors, self.timeout)
            results.append(ExerciseResult(exercise, score, max_score, feedback))
        for r in results:
            if r.feedback:
                extra = upstream_note(assignment, r.exercise, results)
                if extra and not r.feedback.rstrip().endswith((".", "?", "!", ")")):
                    r.feedback = r.feedback.rstrip() + "."
                r.feedback = compose_feedback(note, r.feedback, extra)
        return results, died

    def _finish(self, result: SubmissionResult, feedback_dir: Path | None) -> SubmissionResult:
        if feedback_dir is None:
            return result
        assignment = self.repo.assignment(result.assignment)
        dest = feedback_dir / result.student_id / result.assignment / f"{assignment.notebook}.html"
        dest.parent.mkdir(parents=True, exist_ok=True)
        made = self.work / "feedback" / WORK_STUDENT / result.assignment / f"{assignment.notebook}.html"
        if result.status == "graded" and made.is_file():
            dest.write_text(label_feedback(made.read_text(), assignment))
        else:
            dest.write_text(fallback_html(result))
        return result


# Long one-line reasons wrap instead of running off the page.
_WRAP = "<style>pre { white-space: pre-wrap; overflow-wrap: anywhere; }</style>"


def label_feedback(text: str, assignment: Assignment) -> str:
    """nbgrader's feedback page with each test cell named by its exercise in the table of
    contents ("softmax: hidden tests" instead of "Test cell"), and long lines wrapped."""
    for test in assignment.tests:
        rest = test.grade_id.removeprefix("test_").removeprefix(test.exercise).strip("_").replace("_", " ")
        label = html.escape(f"{test.exercise}: {rest + ' tests' if rest else 'tests'}")
        text = text.replace(f'<a href="#{test.grade_id}">Test cell</a>', f'<a href="#{test.grade_id}">{label}</a>')
    return text.replace("</head>", _WRAP + "</head>", 1)


def fallback_html(result: SubmissionResult) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(e.exercise)}</td><td>{e.score:g} / {e.max_score:g}</td></tr>"
        for e in result.exercises
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(result.assignment)}"
        f"</title></head><body><h1>{html.escape(result.assignment)}: {result.score:g} / "
        f"{result.max_score:g}</h1><p>{html.escape(result.reason)}</p><table>{rows}</table></body></html>\n"
    )


def read_submission(path: Path, max_cells: int | None = None) -> tuple[nbformat.NotebookNode | None, str]:
    """The notebook at ``path`` and a note; ``None`` and the reason ("invalid: ...") when it cannot be
    graded. Never raises for what the file holds, nor where it cannot be read.

    Notebooks are UTF-8 JSON; one saved in another encoding (latin-1, Windows-1252) by an editor is
    read all the same, with a note saying so. Invalid, each before nbgrader or a kernel sees it:
    JSON nested deeper than :data:`.intake.MAX_DEPTH` (checked before it is parsed), not JSON, more
    than ``max_cells`` cells (None: no cap; see :func:`.intake.cell_cap`), anything that breaks
    nbformat's schema (a cell id is 1-64 characters of letters, digits, ``-`` and ``_``; nbgrader
    validates cells against it and fails on them later), and text no file can hold (a lone UTF-16
    surrogate). As nbformat reads them, a notebook of nbformat 4.0-4.4 (no cell ids) is read as it is,
    one of 4.5 without ids gets new ones, and duplicate ids are made unique; nbformat 3 is converted.
    One that says 4.0-4.4 but has cell ids is read as 4.5.
    """
    name = path.name
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, f"invalid: {name} could not be read ({exc.strerror or type(exc).__name__})"
    text, encoding = intake.decoded(data)
    del data
    note = f"{name} is not UTF-8 (read as Windows-1252/latin-1; save notebooks as UTF-8). " if encoding else ""
    raw, why = intake.notebook_json(text)
    if raw is None:
        return None, f"invalid: {name} is not a readable notebook ({why})"
    cells = _cell_count(raw)
    if max_cells is not None and cells > max_cells:
        return None, (f"invalid: {name} has {cells:,} cells, over the {max_cells:,} a notebook of this assignment "
                      f"may have ({intake.CELLS_PER_RELEASED_CELL} times its release's cells, at least "
                      f"{intake.MIN_CELL_CAP}); nothing was run")
    if raw.get("nbformat") == 4 and isinstance(raw.get("nbformat_minor"), int) and raw["nbformat_minor"] < 5 \
            and isinstance(raw.get("cells"), list) and any(isinstance(c, dict) and "id" in c for c in raw["cells"]):
        # cell ids in a notebook that says 4.4 or older (some editors write them): read as the 4.5 it is,
        # whose schema holds the ids to its rules (4.4's has no ids and would call every cell invalid)
        text = json.dumps({**raw, "nbformat_minor": 5})
    del raw  # parsed again by nbformat, which makes its own nodes
    invalid: dict = {}
    try:
        with warnings.catch_warnings():  # ids repaired (missing, duplicate): said by nbformat, not a fault
            warnings.simplefilter("ignore")
            nb = nbformat.reads(text, as_version=4, capture_validation_error=invalid)
        if "ValidationError" not in invalid and _SURROGATE.search(text):  # as nbformat.write will, which fails
            json.dumps(nb, ensure_ascii=False).encode()  # on a lone surrogate (a pair is one character)
    except UnicodeError:
        return None, f"invalid: {name} holds text that is not Unicode (a lone UTF-16 surrogate, \\ud800-\\udfff)"
    except Exception as exc:  # noqa: BLE001 (not a notebook at all: no version, an unknown one, a shape nbformat
        # cannot convert; RecursionError and MemoryError too)
        return None, f"invalid: {name} is not a readable notebook ({one_line(str(exc), 160) or type(exc).__name__})"
    if "ValidationError" in invalid and (dropped := _drop_unknown_keys(nb)):
        # keys an editor added to a cell or an output, which no reader uses: dropped, and said
        note += f"{name} had keys nbformat does not know, dropped ({', '.join(dropped[:5])}). "
        invalid = {}
        try:
            nbformat.validate(nb)
        except Exception as exc:  # noqa: BLE001 (jsonschema's ValidationError, or worse)
            invalid["ValidationError"] = exc
    if "ValidationError" in invalid:
        return None, f"invalid: {name} is not a valid notebook ({schema_rule(invalid['ValidationError'])})"
    return nb, note


def _drop_unknown_keys(nb: dict, rounds: int = 20) -> list[str]:
    """Remove, in place, the keys nbformat's schema does not allow where it allows no others (a cell's or an
    output's own keys; metadata is free); the keys removed ("cells[2].extra"), none when the notebook breaks
    another rule."""
    from nbformat.validator import get_validator

    validator = get_validator(nb.get("nbformat", 4), nb.get("nbformat_minor", 5), name="jsonschema")
    dropped: list[str] = []
    for _ in range(rounds):
        errors = list(validator.iter_errors(nb)) if validator is not None else []
        if not errors:
            return dropped
        unknown = [_unknown_keys(e) for e in errors]
        if any(u is None for u in unknown):
            return []  # another rule is broken: the notebook is invalid whatever is dropped
        for error in (leaf for found in unknown for leaf in found or []):
            allowed = set(error.schema.get("properties", {}))
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
            for key in [k for k in error.instance if k not in allowed]:
                del error.instance[key]
                dropped.append(one_line(f"{where}.{key}", 60))
    return []


def _unknown_keys(error: Any) -> list | None:
    """The ``additionalProperties`` errors that are all of ``error`` (a jsonschema ``ValidationError``), or
    None where another rule is broken. A cell or an output is one of several kinds (``oneOf``): the kind it
    says it is, the one alternative broken by unknown keys alone, is the one that counts."""
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        return [error]
    if error.validator not in ("oneOf", "anyOf") or not error.context:
        return None
    by_kind: dict[Any, list] = {}
    for inner in error.context:
        by_kind.setdefault(inner.relative_schema_path[0], []).append(inner)
    found = [[_unknown_keys(e) for e in group] for group in by_kind.values()]
    fits = [kind for kind in found if all(f is not None for f in kind)]
    return [leaf for leaves in fits[0] for leaf in leaves] if len(fits) == 1 else None


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # the escape of a UTF-16 surrogate, in JSON


def _cell_count(raw: dict) -> int:
    """The cells of a notebook's JSON, of nbformat 4 or of 3 (in worksheets), counted without nbformat."""
    cells = raw.get("cells")
    if isinstance(cells, list):
        return len(cells)
    sheets = raw.get("worksheets")
    return sum(len(w["cells"]) for w in sheets if isinstance(w, dict) and isinstance(w.get("cells"), list)) \
        if isinstance(sheets, list) else 0


def schema_rule(error: Exception) -> str:
    """Which rule of nbformat's schema ``error`` (a ``jsonschema.ValidationError``) says was broken, and
    where, without the offending value (it may be megabytes): "cells[3].id: maxLength 64"."""
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in getattr(error, "absolute_path", ()))
    where = where.lstrip(".") or "the notebook"
    rule, value = getattr(error, "validator", ""), getattr(error, "validator_value", "")
    if rule in ("required", "additionalProperties"):  # the message names a key: short
        said = one_line(getattr(error, "message", str(error)), 120)
    else:
        said = one_line(f"{rule} {value!r}", 120)
    if where.endswith(".id") and where.startswith("cells"):
        said += "; a cell id is 1-64 characters of letters, digits, - and _"
    return f"{one_line(where, 80)}: {said}"


def score_table(results: list[SubmissionResult], names: dict[str, str] | None = None) -> str:
    """Students x assignments, then every exercise that lost points with its feedback. ``names``: student id
    -> name (:mod:`.roster`): shown beside the id, the rows sorted by name (else by id). An excused notebook
    says so and is left out of the total; an extended due date is marked ``ext``."""
    from transformer_course.instructors.roster import label, sort_key

    names = names or {}
    assignments = sorted({r.assignment for r in results})
    students = sorted({r.student_id for r in results}, key=lambda s: sort_key(s, names))
    by_key = {(r.student_id, r.assignment): r for r in results}
    width = max([len("student")] + [len(label(s, names)) for s in students])
    cols = [max(len(a), 9) for a in assignments]
    lines = ["  ".join(["student".ljust(width)] + [a.ljust(c) for a, c in zip(assignments, cols, strict=True)]
                       + ["total"])]
    for s in students:
        cells, total, total_max = [], 0.0, 0.0
        for a, c in zip(assignments, cols, strict=True):
            r = by_key[(s, a)]
            if r.excused:  # Canvas's meaning: it does not count
                cells.append("excused".ljust(c))
                continue
            total, total_max = total + r.final_score, total_max + r.max_score
            mark = "" if r.status == "graded" else f" {r.status}"
            mark += f" late -{r.late_penalty:g}" if r.late_penalty else (" late" if r.late_by else "")
            mark += " ext" if r.extended else ""
            cells.append(f"{r.final_score:g}/{r.max_score:g}{mark}".ljust(c))
        lines.append("  ".join([label(s, names).ljust(width)] + cells + [f"{total:g}/{total_max:g}"]))
    details = []
    for r in results:
        if r.excused:  # it does not count
            continue
        if r.status != "graded" and r.score == 0 and r.reason:  # one reason for the whole notebook
            details.append(f"  {r.student_id} {r.assignment} 0/{r.max_score:g}: {r.reason}")
            continue
        details += [f"  {r.student_id} {r.assignment} {e.exercise} {e.score:g}/{e.max_score:g}: {e.feedback}"
                    for e in r.exercises if e.feedback]
    if details:
        lines += ["", "Points lost:"] + details
    from transformer_course.instructors.deadlines import show
    from transformer_course.words import count

    # as the feedback page says it: both dates in the due date's own time zone (the offset they are kept in)
    late = [f"  {r.student_id} {r.assignment}: handed in {show(r.submitted_at)}, due "
            f"{show(r.due) if r.due else 'never'}{' (extended)' if r.extended else ''}: {r.late_by:g} h late; "
            f"{count(r.late_penalty, 'point')} off"
            for r in results if r.late_by]
    notes = [f"  {r.student_id} {r.assignment}: {r.late_note}" for r in results if r.late_note]
    if late:
        lines += ["", "Late:"] + late
    if notes:
        lines += ["", "Submission times not from nbgrader's timestamp.txt:"] + notes
    return "\n".join(lines)


def exercise_table(result: SubmissionResult) -> str:
    width = max(len(e.exercise) for e in result.exercises)
    lines = [f"{result.assignment}: {result.score:g} / {result.max_score:g}"]
    for e in result.exercises:
        mark = "ok " if e.score >= e.max_score else "-- "
        lines.append(f"  {mark}{e.exercise.ljust(width)}  {e.score:g}/{e.max_score:g}  {e.feedback}".rstrip())
    return "\n".join(lines)


def _known_exercises(nb_path: Path) -> set[str]:
    try:
        nb = nbformat.read(nb_path, as_version=4)
    except Exception:
        return set()
    return {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells} - {None}


def check(notebook: Path, repo: Repo | None = None, timeout: int = 30, work: Path | None = None,
          created: bool = False) -> SubmissionResult:
    """Grade one notebook for a self-learner, without their own gradebook.

    The assignment is found from the file name, its folder, or its answer cells. ``work``: the
    work area (default: a temporary one); ``created``: laid out already (:func:`.workarea.create`).

    Raises:
        FileNotFoundError: the notebook does not exist.
        ValueError: the notebook belongs to no assignment of the course.
    """
    import tempfile

    repo = repo or Repo()
    assignment = assignment_of(notebook, repo)
    with contextlib.nullcontext(None) if work else tempfile.TemporaryDirectory(prefix="tc-check-") as tmp:
        grader = Grader(work or Path(tmp) / "nbgrader", repo, timeout, only=assignment.name,
                        created=created and work is not None)
        try:
            return check_with(grader, assignment, notebook)
        finally:
            forkserver.stop_all()  # its kernel template mounts the folder about to be removed


def assignment_of(notebook: Path, repo: Repo) -> Assignment:
    """The assignment ``notebook`` belongs to: by its file name, its folder, or its answer cells.

    Raises:
        FileNotFoundError: the notebook does not exist.
        ValueError: the notebook belongs to no assignment of the course.
    """
    if not notebook.is_file():
        raise FileNotFoundError(f"no notebook at {notebook}")
    assignments = repo.assignments()
    names = {notebook.stem, notebook.parent.name}
    match = [a for a in assignments if a.notebook in names or a.name in names]
    if not match:
        ids = _known_exercises(notebook)
        match = [a for a in assignments if ids & set(a.exercises)]
    if not match:
        raise ValueError(f"{notebook} is not a notebook of this course (assignments: "
                         f"{', '.join(a.name for a in assignments)})")
    return match[0]


def check_with(grader: Grader, assignment: Assignment, notebook: Path) -> SubmissionResult:
    """:func:`check` with a grader set up already (one process's, or the warm check server's)."""
    grader.for_student = True
    # The grader runs the test cells again on the reference in this process (torch) to compare
    # the values they checked: done while the kernel runs the notebook, not after it.
    tests = list(trusted_tests(grader.work / "source" / assignment.name / f"{assignment.notebook}.ipynb").values())
    if not workarea.judged(grader.repo.reference, assignment.notebook):  # judged: no second run to compare with
        threading.Thread(target=_warm_verify, args=(grader.repo.reference, assignment.notebook, tests),
                         daemon=True).start()
    try:
        return grader.grade("self", assignment, notebook.resolve(), "")
    except GraderError as exc:
        return grader_failure("self", assignment, exc)


def check_report(result: SubmissionResult, repo: Repo, as_json: bool) -> tuple[str, int]:
    """What ``transformer-course check`` prints for ``result``, and its exit code."""
    import json

    from transformer_course.words import count

    if as_json:  # for a CI job or an LMS: one JSON object on stdout, nothing else
        text = json.dumps({"assignment": result.assignment, "status": result.status, "reason": result.reason,
                           "score": result.score, "max_score": result.max_score,
                           "exercises": [vars(e) for e in result.exercises]}, indent=1)
    else:
        lines = [exercise_table(result)]
        if result.reason:
            lines.append(result.reason)
        assignment = repo.assignment(result.assignment)
        if assignment.questions:
            lines.append(f"Not in this score: {count(len(assignment.questions), 'question')} answered in words "
                         f"({assignment.manual_max_score:g} points), which your instructor grades by hand.")
        text = "\n".join(lines)
    return text + "\n", 1 if result.status == GRADER_ERROR else 0


def _warm_verify(reference: Path, notebook: str, tests: list[str]) -> None:
    from transformer_course.grading.notebook import verify  # imports torch

    verify.torch.set_num_threads(1)  # the kernel runs on the cores meanwhile: one is enough here
    verify.warm(reference, notebook, tests)


def grader_failure(student_id: str, assignment: Assignment, exc: BaseException) -> SubmissionResult:
    """The result of a notebook the grader itself failed on: 0 points, and a reason that says so."""
    reason = f"{GRADER_ERROR}: the grader failed on this notebook, not your code: {one_line(str(exc), 300)}"
    return SubmissionResult(student_id, assignment.name, GRADER_ERROR, reason, zero_scores(assignment, reason))
