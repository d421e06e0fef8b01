"""The graded class as nbgrader sees it: ``OUT/nbgrader``, the course root of the formgrader and of
``nbgrader export`` (its gradebook, its autograded and submitted notebooks), and what the instructor gives
there: points for the answers in words, a score typed over the grader's on a test cell, extra credit,
comments. The notebook the instructor grades carries each question's rubric (docs/instructors.md)."""

from __future__ import annotations

import datetime as dt
import html
import re
import shutil
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import ClearSolutions

from transformer_course.grading.notebook.grade import SubmissionResult
from transformer_course.grading.notebook.nbgrader_setup import (
    RUBRIC_KEY,
    generated_course,
    install_formgrader,
    make_config,
)
from transformer_course.grading.output.atomic import atomic_write
from transformer_course.layout import Assignment, Repo

CLASS_CONFIG = """\
# Written by `transformer-course grade`: this folder is the graded class's nbgrader course root.
# Open the formgrader here (`jupyter lab` from this folder, Nbgrader menu > Formgrader) or run
# `nbgrader export`. Same configuration as the repository's autograder/nbgrader_config.py.
from pathlib import Path

from transformer_course.layout import Repo
from transformer_course.grading.notebook.nbgrader_setup import formgrader_config, make_config

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)
c.merge(make_config(Path(__file__).resolve().parent, Repo(Path({repo!r}))))
# The formgrader's page: its MathJax, the rubrics framed as the instructor's; and an exchange folder here.
c.merge(formgrader_config(Path(__file__).resolve().parent))
"""


class ClassBook:
    """The class's nbgrader course root ``OUT/nbgrader``: gradebook rows and autograded notebooks,
    written by one process only."""

    def __init__(self, root: Path, repo: Repo, generate: bool = True):
        """``generate``: nbgrader's ``generate_assignment`` of every assignment first (release/ and the
        gradebook's assignments: what :meth:`record` needs; seconds); without it, the gradebook is only read
        (:meth:`written`)."""
        self.root = root
        self.coursedir = (generated_course(root, repo, repo.assignments()).coursedir if generate
                          else CourseDirectory(config=make_config(root, repo)))
        # nbgrader (formgrader, `nbgrader export`) run in this folder reads this configuration:
        # the same course id and sources as the gradebook, or it finds no assignments.
        atomic_write(root / "nbgrader_config.py", CLASS_CONFIG.format(repo=str(repo.root)))
        install_formgrader(root)
        self.rubrics = rubrics(repo)
        self.names: dict[str, str] = {}  # student id -> name (the run's roster), shown by formgrader

    def student_names(self, student: str) -> dict[str, str | None]:
        """The gradebook's name fields for ``student`` (formgrader lists "last name, first name"): the
        roster's name split at its last space, already cleaned (instructors/roster.py); none where unknown."""
        first, _, last = self.names.get(student, "").rpartition(" ")
        return {"first_name": first or None, "last_name": last or None}

    def record(self, assignment: Assignment, payload: dict) -> None:
        """Put one graded pair in the gradebook, its autograded notebook (with the rubrics) and its hand-in
        where formgrader finds them, keeping what the instructor gave that this hand-in leaves standing
        (:meth:`_kept`)."""
        result = payload["result"]
        student = result["student_id"]
        name = f"{assignment.notebook}.ipynb"
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            gb.update_or_create_student(student, **self.student_names(student))
            kept = self._kept(gb, assignment, student, payload.get("autograded"), payload.get("submitted"))
            given = answers(payload["autograded"]) if assignment.questions and payload.get("autograded") else {}
            try:
                gb.remove_submission(assignment.name, student)
            except MissingEntry:
                pass
            if result["status"] not in ("missing", "refused", "wrong-notebook", "not-a-notebook"):  # nothing read
                gb.add_submission(assignment.name, student)
                notebook = gb.find_submission_notebook(assignment.notebook, assignment.name, student)
                questions = {q.grade_id for q in assignment.questions}
                for grade in notebook.grades:
                    manual, extra = kept.grades.get(grade.name, (None, None))
                    grade.manual_score, grade.extra_credit = manual, extra  # an override stays
                    if grade.name in questions and not answered(given.get(grade.name)):
                        grade.auto_score, grade.needs_manual_grade = 0.0, False
                    elif grade.name in questions:  # the instructor's: awaiting, or the points given before
                        grade.auto_score = None
                        grade.needs_manual_grade = grade.manual_score is None
                    else:  # an autograded test cell; flagged for review where its override was for older code
                        grade.auto_score = payload["cells"].get(grade.name, 0.0)
                        grade.needs_manual_grade = grade.name in kept.review
                for comment in notebook.comments:
                    comment.manual_comment = kept.comments.get(comment.name)
                gb.db.commit()
        if payload["autograded"] is not None:
            atomic_write(self.root / "autograded" / student / assignment.name / name,
                         with_rubrics(payload["autograded"], assignment, self.rubrics))
        # The formgrader lists a student under an assignment when nbgrader's submitted/ has it.
        if payload.get("submitted") is not None:
            atomic_write(self.root / "submitted" / student / assignment.name / name, payload["submitted"])
            # The new submission's time is not known yet (None, as in the gradebook row just made: the pair reads
            # as autograded); lateness() writes both when it is.
            (self.root / "submitted" / student / assignment.name / HANDED_IN).unlink(missing_ok=True)
        else:
            shutil.rmtree(self.root / "submitted" / student / assignment.name, ignore_errors=True)

    def _kept(self, gb: Gradebook, assignment: Assignment, student: str, autograded: bytes | None,
              submitted: bytes | None) -> Kept:
        """What the instructor gave the student's previous submission that this one leaves standing: regrading
        (``--regrade``, a new grader) must not lose it. Points and comments on an answer (in words, or an
        exercise's code) stay while that answer is unchanged: a changed answer in words awaits again. A test
        cell's score typed over the grader's, and extra credit on it, stay while the hand-in's code is the same
        (every code cell's source): on changed code they go, and the cell is flagged for review in formgrader
        (as nbgrader's own autograde flags a cell whose manual score it keeps)."""
        try:
            notebook = gb.find_submission_notebook(assignment.notebook, assignment.name, student)
        except MissingEntry:
            return Kept()
        folder = f"{student}/{assignment.name}/{assignment.notebook}.ipynb"
        before = self.root / "autograded" / folder
        old = solutions(before.read_bytes()) if before.is_file() else None
        new = solutions(autograded) if autograded else {}
        handed = self.root / "submitted" / folder
        same_code = handed.is_file() and submitted is not None and code(submitted) is not None \
            and code(handed.read_bytes()) == code(submitted)
        kept = Kept()
        questions = {q.grade_id for q in assignment.questions}
        for g in notebook.grades:
            if g.manual_score is None and not g.extra_credit:
                continue
            if g.name in questions:
                if old is not None and old.get(g.name) == new.get(g.name):
                    kept.grades[g.name] = (g.manual_score, g.extra_credit)
            elif same_code:
                kept.grades[g.name] = (g.manual_score, g.extra_credit)
            else:
                kept.review.add(g.name)
        for c in notebook.comments:
            if c.manual_comment and old is not None and c.name in old and old.get(c.name) == new.get(c.name):
                kept.comments[c.name] = c.manual_comment
        return kept

    def written(self, results: list[SubmissionResult], assignments: dict[str, Assignment]
                ) -> dict[tuple[str, str], Marks]:
        """Set each result's overrides, manual score and status from the gradebook, where formgrader writes
        what the instructor gives. A test cell's score typed over the grader's (nbgrader: a manual score
        overrides the automatic one) or extra credit on it goes to ``overrides`` (part of the result's score).
        The answers in words: ``graded`` when every question of the notebook has points (the score is their
        sum, extra credit included), else ``awaiting`` (no score). Nothing for a notebook not handed in
        (missing, unreadable, or not graded for the grader's fault).
        Returns, by (student, assignment), each such notebook's :class:`Marks`, for its feedback page."""
        marks: dict[tuple[str, str], Marks] = {}
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            for r in results:
                assignment = assignments.get(r.assignment)
                if assignment is None:
                    continue
                r.overrides = []
                r.manual_max_score = assignment.manual_max_score
                if r.status not in ("graded", "crashed"):
                    continue
                try:
                    notebook = gb.find_submission_notebook(assignment.notebook, assignment.name, r.student_id)
                except MissingEntry:
                    continue
                grades = {g.name: g for g in notebook.grades}
                for t in assignment.tests:
                    g = grades.get(t.grade_id)
                    if g is None or g.auto_score is None:
                        continue
                    given = g.manual_score if g.manual_score is not None and g.manual_score != g.auto_score else None
                    if given is not None or g.extra_credit:
                        r.overrides.append({"cell": t.grade_id, "exercise": t.exercise, "points": t.points,
                                            "grader": float(g.auto_score),
                                            "given": None if given is None else float(given),
                                            "extra_credit": float(g.extra_credit) if g.extra_credit else None})
                # nbgrader's rule: the instructor's points, else the automatic 0 of an unanswered question; extra
                # credit adds to either (nbgrader's Grade.score)
                scores = []
                for q in assignment.questions:
                    g = grades.get(q.grade_id)
                    s = None if g is None else g.auto_score if g.manual_score is None else g.manual_score
                    scores.append(None if s is None else float(s) + float(g.extra_credit or 0.0))
                if assignment.questions:
                    done = all(s is not None for s in scores)
                    r.manual_status = "graded" if done else "awaiting"
                    r.manual_score = float(sum(scores)) if done else None
                comments = {c.name: c.manual_comment for c in notebook.comments
                            if c.manual_comment and c.manual_comment.strip()}
                marks[(r.student_id, r.assignment)] = Marks(
                    {q.grade_id: s for q, s in zip(assignment.questions, scores, strict=True)}, comments,
                    {t.grade_id: float(grades[t.grade_id].auto_score) for t in assignment.tests
                     if t.grade_id in grades and grades[t.grade_id].auto_score is not None})
        return marks

    def lateness(self, assignment: Assignment, result: SubmissionResult, due: Any) -> None:
        """The due date (and the student's extension), the submission's time and its late penalty in the
        gradebook, where nbgrader keeps them (naive UTC): the formgrader and ``nbgrader export`` show them.
        The submission's time goes to ``submitted/<student>/<assignment>/timestamp.txt`` too, where nbgrader
        reads a hand-in's time: the formgrader shows a submission as autograded only where the two are equal
        (else "needs autograding", and no time)."""
        def utc(when: dt.datetime) -> dt.datetime:
            return when.astimezone(dt.UTC).replace(tzinfo=None)

        when = utc(dt.datetime.fromisoformat(result.submitted_at)) if result.submitted_at else None
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            gb.find_assignment(assignment.name).duedate = None if due is None else utc(due)
            submission = gb.find_submission(assignment.name, result.student_id)
            submission.timestamp = when
            # the student's own due date (deadlines.py's [extensions]) as nbgrader keeps it: an extension
            extended = result.extended and result.due and due is not None
            submission.extension = utc(dt.datetime.fromisoformat(result.due)) - utc(due) if extended else None
            notebook = gb.find_submission_notebook(assignment.notebook, assignment.name, result.student_id)
            notebook.late_submission_penalty = result.late_penalty or None
            gb.db.commit()
        handed_in = self.root / "submitted" / result.student_id / assignment.name / HANDED_IN
        if when is None:
            handed_in.unlink(missing_ok=True)
        elif handed_in.parent.is_dir():  # nbgrader's own format, which its parse_utc reads back to ``when``
            atomic_write(handed_in, when.strftime("%Y-%m-%d %H:%M:%S.%f UTC").encode())


@dataclass
class Kept:
    """What :meth:`ClassBook._kept` keeps: (manual score, extra credit) by grade_id, comments by grade_id,
    and the test cells whose override went (flagged for review)."""

    grades: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    comments: dict[str, str] = field(default_factory=dict)
    review: set[str] = field(default_factory=set)


@dataclass
class Marks:
    """What the gradebook holds of one notebook for its feedback page, besides the overrides (on its result):
    the points of each question in words (by grade_id; None: awaiting; extra credit included) and the
    instructor's comment on each answer cell (by grade_id; only those with text), and the grader's score of
    each test cell."""

    questions: dict[str, float | None]
    comments: dict[str, str] = field(default_factory=dict)
    tests: dict[str, float] = field(default_factory=dict)  # the grader's score of each test cell, by grade_id


HANDED_IN = "timestamp.txt"  # where nbgrader's submitted/ keeps a hand-in's time
STUB = ClearSolutions.text_stub.default_value  # what nbgrader's release puts in an answer cell in words


def answered(answer: str | None) -> bool:
    """Whether an answer in words is there to grade: the cell is present and not the release's stub.
    An unanswered question gets 0 automatically (the instructor can still give points)."""
    return answer is not None and answer.strip() not in ("", STUB)


def answers(notebook: bytes) -> dict[str, str]:
    """The answers in words of a notebook (its manually graded cells' text), by grade_id."""
    try:
        nb = nbformat.reads(notebook.decode("utf-8", errors="replace"), as_version=4)
    except Exception:  # noqa: BLE001 (an unreadable notebook has no answers)
        return {}
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution") and c.metadata.get("nbgrader", {}).get("grade")
            and c.metadata["nbgrader"].get("grade_id")}


def solutions(notebook: bytes) -> dict[str, str] | None:
    """The answers of a notebook (every answer cell's text: code or words), by grade_id; None when it is not
    a notebook."""
    try:
        nb = nbformat.reads(notebook.decode("utf-8", errors="replace"), as_version=4)
    except Exception:  # noqa: BLE001 (an unreadable notebook has no answers)
        return None
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if isinstance(c.metadata.get("nbgrader"), dict) and c.metadata["nbgrader"].get("solution")
            and c.metadata["nbgrader"].get("grade_id")}


def code(notebook: bytes) -> list[str] | None:
    """Every code cell's source, in order (what the grader runs, whatever the cells' marks); None when it is not
    a notebook. Outputs, metadata and text cells do not count: running the same code again is the same code."""
    try:
        nb = nbformat.reads(notebook.decode("utf-8", errors="replace"), as_version=4)
    except Exception:  # noqa: BLE001
        return None
    return [c.source for c in nb.cells if c.get("cell_type") == "code"]


RUBRIC_TABLE = re.compile(r"^\| `(question_\w+)` \| \d\d \| ([\d.]+) \| (.+?) \|\s*$", re.M)


@cache
def _rubrics(guide: Path, mtime: int) -> dict[str, tuple[float, str]]:
    return {m[1]: (float(m[2]), m[3].strip()) for m in RUBRIC_TABLE.finditer(guide.read_text())}


def rubrics(repo: Repo) -> dict[str, tuple[float, str]]:
    """The rubric of each question answered in words, (points, what a full answer says) by grade_id: the
    "Rubrics" table of docs/instructors.md (tests/test_layout.py holds it to the sources). Empty without
    the guide (an installed package without the repository's docs)."""
    guide = repo.root / "docs" / "instructors.md"
    try:
        return _rubrics(guide, guide.stat().st_mtime_ns)
    except OSError:
        return {}


def rubric_cell(grade_id: str, points: float, text: str) -> nbformat.NotebookNode:
    """A markdown cell showing a question's rubric to the instructor, marked as the course's (:data:`RUBRIC_KEY`).
    The text is escaped: shown as written (its ``W_Q`` and ``*`` are not markdown)."""
    shown = re.sub(r"([\\`*_\[\]<>#|~$])", r"\\\1", html.unescape(text)).replace("&", "&amp;")
    cell = nbformat.v4.new_markdown_cell(
        f"**Rubric** (docs/instructors.md; {points:g} point{'s' * (points != 1)}; the students' notebook does not "
        f"have it): {shown}")
    cell.metadata[RUBRIC_KEY] = grade_id
    return cell


def with_rubrics(notebook: bytes, assignment: Assignment, found: dict[str, tuple[float, str]]) -> bytes:
    """The autograded notebook the instructor grades in formgrader, each question in words preceded by its
    rubric cell (:func:`rubric_cell`). A cell that carries the rubric mark already loses it, or goes where it is
    the course's own rubric (an earlier run's): a student cannot make one. Returned unchanged where the
    assignment has no question with a rubric, and without rubrics (its marks renamed) where it cannot be read
    as a notebook."""
    wanted = {q.grade_id for q in assignment.questions if q.grade_id in found}
    if not wanted:
        return notebook
    ours = {gid: rubric_cell(gid, *found[gid]).source for gid in wanted}
    try:
        nb = nbformat.reads(notebook.decode("utf-8"), as_version=4)
        cells = []
        for c in nb.cells:
            mark = c.metadata.pop(RUBRIC_KEY, None)
            if mark is not None and c.get("cell_type") == "markdown" and ours.get(mark) == c.source:
                continue  # an earlier run's rubric: made again below
            meta = c.metadata.get("nbgrader")
            gid = meta.get("grade_id") if isinstance(meta, dict) and meta.get("solution") and meta.get("grade") \
                else None
            if gid in wanted:
                cells.append(rubric_cell(gid, *found[gid]))
            cells.append(c)
        nb.cells = cells
        return nbformat.writes(nb).encode()
    except Exception:  # noqa: BLE001 (what a student hands in is odd: the pair's row stands, without rubrics)
        return notebook.replace(RUBRIC_KEY.encode(), b"not_" + RUBRIC_KEY.encode())  # and no cell has the mark
