"""The graded class as nbgrader sees it: ``OUT/nbgrader``, the course root of the formgrader and of
``nbgrader export`` (its gradebook, its autograded and submitted notebooks), and the answers in words that
the instructor grades there."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import ClearSolutions

from transformer_course.grading.atomic import atomic_write
from transformer_course.grading.grade import SubmissionResult
from transformer_course.grading.nbgrader_setup import generated_course
from transformer_course.layout import Assignment, Repo

CLASS_CONFIG = """\
# Written by `transformer-course grade`: this folder is the graded class's nbgrader course root.
# Open the formgrader here (`jupyter lab` from this folder, Nbgrader menu > Formgrader) or run
# `nbgrader export`. Same configuration as the repository's autograder/nbgrader_config.py.
from pathlib import Path

from transformer_course.layout import Repo
from transformer_course.grading.nbgrader_setup import make_config

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)
c.merge(make_config(Path(__file__).resolve().parent, Repo(Path({repo!r}))))
"""


class ClassBook:
    """The class's nbgrader course root ``OUT/nbgrader``: gradebook rows and autograded notebooks,
    written by one process only."""

    def __init__(self, root: Path, repo: Repo):
        self.root = root
        self.coursedir = generated_course(root, repo, repo.assignments()).coursedir
        # nbgrader (formgrader, `nbgrader export`) run in this folder reads this configuration:
        # the same course id and sources as the gradebook, or it finds no assignments.
        atomic_write(root / "nbgrader_config.py", CLASS_CONFIG.format(repo=str(repo.root)))

    def record(self, assignment: Assignment, payload: dict) -> None:
        result = payload["result"]
        student = result["student_id"]
        name = f"{assignment.notebook}.ipynb"
        questions = {q.grade_id for q in assignment.questions}
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            gb.update_or_create_student(student)
            kept = self._kept(gb, assignment, student, payload.get("autograded")) if questions else {}
            given = answers(payload["autograded"]) if questions and payload.get("autograded") else {}
            try:
                gb.remove_submission(assignment.name, student)
            except MissingEntry:
                pass
            if result["status"] not in ("missing", "refused", "wrong-notebook", "not-a-notebook"):  # nothing read
                gb.add_submission(assignment.name, student)
                notebook = gb.find_submission_notebook(assignment.notebook, assignment.name, student)
                for grade in notebook.grades:
                    if grade.name in questions and not answered(given.get(grade.name)):
                        grade.auto_score, grade.needs_manual_grade = 0.0, False
                        grade.manual_score = kept.get(grade.name, (None, None))[0]  # an override stays
                    elif grade.name in questions:  # the instructor's: awaiting, or the points given before
                        grade.auto_score = None
                        grade.manual_score = kept.get(grade.name, (None, None))[0]
                        grade.needs_manual_grade = grade.manual_score is None
                    else:
                        grade.auto_score = payload["cells"].get(grade.name, 0.0)
                        grade.needs_manual_grade = False  # an autograded test cell
                for comment in notebook.comments:
                    if comment.name in kept:
                        comment.manual_comment = kept[comment.name][1]
                gb.db.commit()
        if payload["autograded"] is not None:
            atomic_write(self.root / "autograded" / student / assignment.name / name, payload["autograded"])
        # The formgrader lists a student under an assignment when nbgrader's submitted/ has it.
        if payload.get("submitted") is not None:
            atomic_write(self.root / "submitted" / student / assignment.name / name, payload["submitted"])
            # The new submission's time is not known yet (None, as in the gradebook row just made: the pair reads
            # as autograded); lateness() writes both when it is.
            (self.root / "submitted" / student / assignment.name / HANDED_IN).unlink(missing_ok=True)
        else:
            shutil.rmtree(self.root / "submitted" / student / assignment.name, ignore_errors=True)

    def _kept(self, gb: Gradebook, assignment: Assignment, student: str, autograded: bytes | None
              ) -> dict[str, tuple[float, str | None]]:
        """The manual points (and comments) given to answers in words that this new submission
        leaves unchanged, by grade_id: regrading must not lose them; a changed answer awaits again."""
        try:
            notebook = gb.find_submission_notebook(assignment.notebook, assignment.name, student)
        except MissingEntry:
            return {}
        given = {g.name: g.manual_score for g in notebook.grades if g.manual_score is not None}
        comments = {c.name: c.manual_comment for c in notebook.comments}
        before = self.root / "autograded" / student / assignment.name / f"{assignment.notebook}.ipynb"
        old = answers(before.read_bytes()) if before.is_file() else {}
        new = answers(autograded) if autograded else {}
        return {q.grade_id: (given[q.grade_id], comments.get(q.grade_id)) for q in assignment.questions
                if q.grade_id in given and before.is_file() and old.get(q.grade_id) == new.get(q.grade_id)}

    def written(self, results: list[SubmissionResult], assignments: dict[str, Assignment]
                ) -> dict[tuple[str, str], dict[str, float | None]]:
        """Set each result's manual score and status from the gradebook, where formgrader writes
        the instructor's points: ``graded`` when every question of the notebook has points (the
        score is their sum), else ``awaiting`` (no score). Nothing for a notebook without
        questions or one not handed in (missing, unreadable, or not graded for the grader's fault).
        Returns each such notebook's points per question (by grade_id; None: awaiting), by
        (student, assignment), for its feedback page."""
        points: dict[tuple[str, str], dict[str, float | None]] = {}
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            for r in results:
                assignment = assignments.get(r.assignment)
                if assignment is None or not assignment.questions:
                    continue
                r.manual_max_score = assignment.manual_max_score
                if r.status not in ("graded", "crashed"):
                    continue
                try:
                    notebook = gb.find_submission_notebook(assignment.notebook, assignment.name, r.student_id)
                except MissingEntry:
                    continue
                # nbgrader's rule: the instructor's points, else the automatic 0 of an unanswered question
                given = {g.name: g.auto_score if g.manual_score is None else g.manual_score for g in notebook.grades}
                scores = [given.get(q.grade_id) for q in assignment.questions]
                done = all(s is not None for s in scores)
                r.manual_status = "graded" if done else "awaiting"
                r.manual_score = float(sum(scores)) if done else None
                points[(r.student_id, r.assignment)] = {q.grade_id: None if s is None else float(s)
                                                        for q, s in zip(assignment.questions, scores, strict=True)}
        return points

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
