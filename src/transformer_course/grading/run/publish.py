"""What grading writes for people: the feedback pages' late banner, and the tables (``grades.csv``,
``exercises.csv``, ``lms.csv``, ``results.json``) an instructor reads or imports into an LMS."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

from transformer_course.grading.notebook.grade import ExerciseResult, SubmissionResult
from transformer_course.grading.output.atomic import atomic_write
from transformer_course.grading.output.sanitise import render_markdown
from transformer_course.grading.output.spreadsheet import csv_text
from transformer_course.grading.run.classbook import ClassBook, Marks
from transformer_course.instructors.deadlines import Deadlines
from transformer_course.instructors.roster import HEADING
from transformer_course.layout import Assignment, Repo
from transformer_course.words import count

BANNER = ("<!-- course: lateness -->", "<!-- /course: lateness -->")


def late_banner(page: Path, result: SubmissionResult, deadlines: Deadlines) -> None:
    """Say on the feedback page when the notebook was handed in against the student's due date (their
    extension's, and the class's beside it), or that it is excused (replacing what an earlier run said there)."""
    if not page.is_file():
        return
    text = original = page.read_text()
    start, end = text.find(BANNER[0]), text.find(BANNER[1])
    if start >= 0 and end > start:
        text = text[:start] + text[end + len(BANNER[1]):]
    a = result.assignment
    due, theirs = deadlines.due(a), deadlines.due(a, result.student_id)
    said = ("Excused: this notebook does not count toward your grade, and is never late. "
            if deadlines.excused_by(a, result.student_id) else "")
    if result.submitted_at:  # both in the time zone the due date was given in, in one format
        due_said = f"due {deadlines.shown(a, theirs) if theirs else 'never'}"
        if theirs != due and due is not None:  # an extension moves a due date: there is one
            due_said += f" (your extension; the class's due date is {deadlines.shown(a, due)})"
        said += (f"Handed in {deadlines.shown(a, result.submitted_at)}, {due_said}: "
                 + (f"{result.late_by:g} h late; {count(result.late_penalty, 'point')} off "
                    f"({html.escape(deadlines.policy.describe())})." if result.late_by else
                    ("not counted." if said else "on time.")))
    elif not said and due is None:  # no due date and not excused: nothing to say (as without deadlines)
        if text != original:
            atomic_write(page, text)
        return
    elif not said:
        said = "When this notebook was handed in is not known."
    if result.late_note:
        said += f" ({html.escape(result.late_note)}.)"
    banner = (f'{BANNER[0]}<div style="border:1px solid #999;padding:.5em;margin:.5em 0;font-family:sans-serif">'
              f"{said.strip()}</div>{BANNER[1]}")
    at = text.find(">", text.find("<body")) + 1 if "<body" in text else 0
    if (named := text.find(HEADING[1])) >= 0:  # below the student's name (roster.heading_on_page)
        at = named + len(HEADING[1])
    atomic_write(page, text[:at] + banner + text[at:])


# What the feedback pages say of the answers in words, between these markers (rewritten in place by
# every run: a page says what the gradebook holds now, never nbgrader's 0 for an answer not yet graded).
WRITTEN = ("<!-- course: written -->", "<!-- /course: written -->")
_SAID = rf"(?:Score: -?[\d.]+ / [\d.]+|{re.escape(WRITTEN[0])}.*?{re.escape(WRITTEN[1])})"


def _points(x: float) -> str:
    return count(x, "point")


def changed_by_hand(o: dict) -> str:
    """What the instructor changed on one test cell (an entry of ``SubmissionResult.overrides``), as the
    feedback page and grades.csv say it: "3 / 3 (given by hand; the grader gave 0)", "1 / 1 + 0.5 extra credit"."""
    said = f"{o['grader']:g} / {o['points']:g}" if o["given"] is None else f"{o['given']:g} / {o['points']:g}"
    if o["extra_credit"]:
        said += f" + {o['extra_credit']:g} extra credit"
    return said + (f" (given by hand; the grader gave {o['grader']:g})" if o["given"] is not None else "")


def _cell_score(text: str, gid: str, said: str) -> str:
    """``text`` with the score of cell ``gid`` said as ``said`` (between the markers) in the contents and at
    the cell's heading (nbgrader writes both; the anchors are the template's: a student's markup has no
    ``name``)."""
    said = f"{WRITTEN[0]}{said}{WRITTEN[1]}"
    gid = re.escape(gid)
    text = re.sub(rf'(<a href="#{gid}">[^<\n]*</a> \(){_SAID}(\))', lambda m: m[1] + said + m[2], text)
    return re.sub(rf'(<a name="{gid}"></a><div class="panel-heading">[^\n]*?\s*<span class="pull-right">\s*)'
                  rf"{_SAID}", lambda m: m[1] + said, text)


# The instructor's comments (formgrader's) on the page, each between these markers, in its cell's panel.
COMMENT = ("<!-- course: comment -->", "<!-- /course: comment -->")
_COMMENTS = re.compile(rf"{re.escape(COMMENT[0])}.*?{re.escape(COMMENT[1])}", re.S)
_DIV = re.compile(r"<div\b|</div>")


def _comment_block(text: str) -> str:
    return f'<div class="panel-footer"><div><b>Your instructor\'s comment:</b> {render_markdown(text)}</div></div>'


def _with_comments(text: str, comments: dict[str, str]) -> str:
    """``text`` with each comment (by the grade_id of its answer cell) at the foot of its cell's panel, those of
    an answer not on the page under the title; the comments an earlier run put there go first. A comment is
    markdown, rendered and sanitised as the student's own text is (:func:`.sanitise.render_markdown`)."""
    text = _COMMENTS.sub("", text)
    elsewhere = []
    for gid, comment in comments.items():
        anchor = text.find(f'<a name="comment-{gid}"></a>')
        if anchor < 0:
            elsewhere.append(f"<p><b>{html.escape(gid)}</b></p>" + _comment_block(comment))
            continue
        depth = 1  # inside the cell's panel (the anchor is its first child): its end is where its divs close
        for m in _DIV.finditer(text, anchor):
            depth += 1 if m[0] == "<div" else -1
            if depth == 0:
                text = text[:m.start()] + COMMENT[0] + _comment_block(comment) + COMMENT[1] + text[m.start():]
                break
        else:
            elsewhere.append(f"<p><b>{html.escape(gid)}</b></p>" + _comment_block(comment))
    if elsewhere:
        at = re.search(r"<h4>[^\n]*</h4>\n?", text)
        block = f'{COMMENT[0]}<div class="panel">{"".join(elsewhere)}</div>{COMMENT[1]}'
        if at:
            text = text[:at.end()] + block + text[at.end():]
    return text


def written_on_page(page: Path, result: SubmissionResult, assignment: Assignment,
                    points: dict[str, float | None], comments: dict[str, str] | None = None,
                    tests: dict[str, float] | None = None) -> None:
    """Make a feedback page agree with the gradebook: each question in words shows the instructor's points,
    or "awaiting grading" where nbgrader's page says 0 (it knows no other value for an answer not graded
    yet); each test cell whose score the instructor changed says so ("Score: 3 / 3 (given by hand; the grader
    gave 0)"), one changed back shows the grader's score again (``tests``: the grader's score by grade_id);
    the total says which part is graded: ``11 / 11 graded automatically; 4 points of answers in words await
    your instructor``; the instructor's comments stand at the foot of their cells. Only numbers, fixed words
    and the sanitised comments are written (a student's text is never put in the page). Idempotent."""
    if not page.is_file():
        return
    text = original = page.read_text()
    overrides = {o["cell"]: o for o in result.overrides}
    for q in assignment.questions:
        given = points.get(q.grade_id)
        text = _cell_score(text, q.grade_id,
                           f"awaiting grading ({_points(q.points)})" if given is None
                           else f"Score: {given:g} / {q.points:g}")
    for t in assignment.tests:  # a cell changed by hand, or changed back (its marker is there)
        if t.grade_id in overrides:
            text = _cell_score(text, t.grade_id, f"Score: {changed_by_hand(overrides[t.grade_id])}")
        elif tests and t.grade_id in tests and re.search(rf'<a href="#{re.escape(t.grade_id)}">[^<\n]*</a> \('
                                                         rf"{re.escape(WRITTEN[0])}", text):
            text = _cell_score(text, t.grade_id, f"Score: {tests[t.grade_id]:g} / {t.points:g}")
    auto = f"{result.score:g} / {result.max_score:g} graded automatically"
    if overrides:
        auto += f" (changed by hand; the grader gave {result.score - result.by_hand:g})"
    top = assignment.manual_max_score
    graded = [(v, q.points) for q in assignment.questions if (v := points.get(q.grade_id)) is not None]
    waiting = top - sum(p for _, p in graded)
    if not assignment.questions:
        total = f"Score: {auto}" if overrides or WRITTEN[0] in (re.search(r"<h4>[^\n]*</h4>", text) or [""])[0] \
            else ""
    elif not graded:
        total = f"{auto}; {_points(top)} of answers in words await your instructor"
    elif waiting:
        total = (f"{auto}; {sum(v for v, _ in graded):g} / {sum(p for _, p in graded):g} of answers in words "
                 f"graded, {_points(waiting)} await your instructor")
    else:
        given = sum(v for v, _ in graded)
        total = f"Score: {result.score + given:g} / {result.max_score + top:g}: {auto}, {given:g} / {top:g} in words"
    if total:
        total = f"{WRITTEN[0]}{total}{WRITTEN[1]}"
        text = re.sub(rf"(<h4>[^<\n]*\(){_SAID}(\)</h4>)", lambda m: m[1] + total + m[2], text, count=1)
    if comments is not None and "<h4>" in text:  # a page of nbgrader's (not the grader's own short page)
        text = _with_comments(text, comments)
    if text != original:
        atomic_write(page, text)


def written_on_pages(out: Path, results: list[SubmissionResult], assignments: dict[str, Assignment],
                     marks: dict[tuple[str, str], Marks]) -> None:
    """:func:`written_on_page` for every notebook of ``marks`` (what :meth:`.ClassBook.written` returns)."""
    for r in results:
        assignment = assignments.get(r.assignment)
        if assignment is not None and (r.student_id, r.assignment) in marks:
            got = marks[(r.student_id, r.assignment)]
            written_on_page(out / "feedback" / r.student_id / r.assignment / f"{assignment.notebook}.html", r,
                            assignment, got.questions, got.comments, got.tests)


def refresh_written(out: Path, repo: Repo) -> list[SubmissionResult]:
    """Read what the instructor gave in formgrader again from ``OUT/nbgrader/gradebook.db`` (points of the
    answers in words, scores typed over the grader's, extra credit, comments) and rewrite the tables and the
    feedback pages with it; no notebook is graded again. Returns the results, as ``OUT/results.json`` now
    holds them."""
    known = {f.name for f in fields(SubmissionResult)}
    results = []
    for r in json.loads((out / "results.json").read_text()):
        r = {k: v for k, v in r.items() if k in known}
        results.append(SubmissionResult(**{**r, "exercises": [ExerciseResult(**e) for e in r["exercises"]]}))
    assignments = {a.name: a for a in repo.assignments()}
    marks = ClassBook(out / "nbgrader", repo, generate=False).written(results, assignments)  # read only
    write_csvs(results, out)
    written_on_pages(out, results, assignments, marks)
    return results


def _csv(rows: Iterable[list[Any]]) -> str:
    return csv_text(rows)  # spreadsheet-safe: no cell a spreadsheet would run as a formula


def write_csvs(results: list[SubmissionResult], out: Path) -> None:
    """``grades.csv`` (one row per student and assignment), ``exercises.csv`` (per exercise, with
    feedback: the grader's scores), ``lms.csv`` (one row per student, one column per assignment: the shape
    Canvas, Moodle and Blackboard import) and ``results.json``; each written atomically. Scores are the
    autograded points after the instructor's overrides and extra credit (``SubmissionResult.score``)."""
    def manual(r: SubmissionResult) -> list[str]:
        return ["" if r.manual_score is None else f"{r.manual_score:g}",
                f"{r.manual_max_score:g}" if r.manual_max_score else "", r.manual_status]

    # score and final_score are the autograded points after the instructor's overrides and extra credit; the
    # last column says which test cells the instructor changed (empty: the grader's scores stand).
    atomic_write(out / "grades.csv", _csv(
        [["student_id", "assignment", "score", "max_score", "status", "submitted_at", "late_by", "late_penalty",
          "final_score", "manual_score", "manual_max_score", "manual_status", "reason", "by_hand"]]
        + [[r.student_id, r.assignment, f"{r.score:g}", f"{r.max_score:g}", r.status, r.submitted_at,
            f"{r.late_by:g}" if r.submitted_at else "", f"{r.late_penalty:g}", f"{r.final_score:g}", *manual(r),
            r.reason.strip(), "; ".join(f"{o['cell']}: {changed_by_hand(o)}" for o in r.overrides)]
           for r in results]))
    atomic_write(out / "exercises.csv", _csv(
        [["student_id", "assignment", "exercise", "score", "max_score", "feedback"]]
        + [[r.student_id, r.assignment, e.exercise, f"{e.score:g}", f"{e.max_score:g}", e.feedback]
           for r in results for e in r.exercises]))
    names = sorted({r.assignment for r in results})
    by_student: dict[str, dict[str, SubmissionResult]] = {}
    for r in results:
        by_student.setdefault(r.student_id, {})[r.assignment] = r
    maxima = {a: next(r.max_score for r in results if r.assignment == a) for a in names}
    # Answers in words: a column of their own per assignment, empty until graded by hand (an LMS
    # reads an empty cell as "not graded", where a 0 would be a grade).
    written = {a: top for a in names if (top := max(r.manual_max_score for r in results if r.assignment == a))}
    rows = [["student_id", *[f"{a} ({maxima[a]:g})" for a in names], f"total ({sum(maxima.values()):g})",
             *[f"{a} written ({top:g})" for a, top in written.items()]]]
    for student, mine in sorted(by_student.items()):
        # An excused notebook counts in no total: "EX", which Canvas's gradebook import reads as excused.
        excused = {a for a in names if a in mine and mine[a].excused}
        scores = {a: mine[a].final_score if a in mine else 0.0 for a in names if a not in excused}
        hand = [mine[a].manual_score if a in mine and a not in excused else None for a in written]
        rows.append([student, *["EX" if a in excused else f"{scores[a]:g}" for a in names],
                     f"{sum(scores.values()):g}", *["EX" if a in excused else "" if h is None else f"{h:g}"
                                                    for a, h in zip(written, hand, strict=True)]])
    atomic_write(out / "lms.csv", _csv(rows))
    atomic_write(out / "results.json", json.dumps(
        [{"student_id": r.student_id, "assignment": r.assignment, "status": r.status, "reason": r.reason,
          "exercises": [vars(e) for e in r.exercises], "submitted_at": r.submitted_at, "late_by": r.late_by,
          "late_penalty": r.late_penalty, "late_note": r.late_note, "due": r.due, "extended": r.extended,
          "excused": r.excused, "manual_score": r.manual_score,
          "manual_max_score": r.manual_max_score, "manual_status": r.manual_status, "overrides": r.overrides,
          # read, not read back (computed): the autograded points after overrides and extra credit, and those
          # less the late penalty; ``manual_score`` is the points of the answers in words
          "score": r.score, "max_score": r.max_score, "final_score": r.final_score} for r in results],
        indent=1) + "\n")
