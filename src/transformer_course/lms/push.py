"""Grades and comments out of a graded ``OUT`` into an LMS, whichever: what would be sent, compared with
what the LMS holds, so that a dry run shows it and a second push sends nothing.

An LMS is a :class:`Destination` (``canvas.CanvasDestination`` today; an LTI 1.3 Assignment and Grade
Services line item can be one too): it says what it holds for a student (:meth:`Destination.current`, or
``None`` for a student it does not know) and sends a grade, a comment and an attachment
(:meth:`Destination.send`). The rest is here: :func:`outgoing` reads ``OUT/results.json`` (written by
``transformer-course grade``), :func:`plan` compares, :func:`table` prints, :func:`send` sends.

The grade sent is ``final_score`` (the autograded points after the instructor's overrides, less the late
penalty) plus ``manual_score`` (the points for the answers in words, graded in formgrader), in points.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from transformer_course.layout import GRADER_ERROR

# Rows never sent: the grader's own failure is not the student's grade, and a student who handed nothing
# in is the LMS's to mark missing (its own missing-submission policy), not ours to give a 0.
NOT_SENT = {GRADER_ERROR: "the grader failed on this notebook (not the student's grade): grade it again first",
            "missing": "nothing was handed in: the LMS's missing-submission policy applies"}
AWAITING = "awaiting"  # results.json's manual_status while formgrader still has answers in words to grade


class LmsError(Exception):
    """An LMS could not be used, in one line without any secret. ``whole_run``: no other student would fare
    better (a refused token or scope), so a push stops; otherwise it is this one student's or item's."""

    def __init__(self, message: str, whole_run: bool = True):
        super().__init__(message)
        self.whole_run = whole_run


@dataclass(frozen=True)
class Outgoing:
    """What one student's row of ``results.json`` sends: the grade in points, the comment, the page."""

    student_id: str
    assignment: str
    grade: float
    max_points: float
    comment: str
    attachment: Path | None = None
    awaiting: bool = False  # answers in words still to be graded in formgrader (sent only when asked)


@dataclass(frozen=True)
class Held:
    """A row of ``results.json`` that is not sent, and why."""

    student_id: str
    assignment: str
    reason: str


@dataclass(frozen=True)
class Comment:
    """A comment the LMS holds: its text and its attachments' ``(file name, size in bytes)``."""

    text: str
    attachments: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Current:
    """What the LMS holds for one student's submission: the grade in points (None: not graded) and comments."""

    grade: float | None
    comments: tuple[Comment, ...] = ()
    excused: bool = False  # the LMS excuses the student from this assignment: a grade would undo that


class Destination(Protocol):
    """An LMS that grades are pushed to, for one assignment."""

    name: str  # in words, for the table: "Canvas"

    def current(self, student_id: str) -> Current | None:
        """What the LMS holds for ``student_id``; None where it knows no such student (no enrolment or no
        submission there): that student is listed, never sent."""

    def send(self, student_id: str, grade: float | None, comment: str | None, attachment: Path | None) -> None:
        """Set the grade (None: leave it) and add the comment with ``attachment`` (None: no comment).

        Raises:
            Exception: the LMS refused it; :func:`send` lists it against the student and goes on.
        """


@dataclass(frozen=True)
class Change:
    """One student's line of the plan: the grade before and after, and what is to be sent."""

    outgoing: Outgoing
    before: float | None
    grade: bool  # the grade is to be set
    comment: bool  # the comment (with its attachment) is to be added

    @property
    def nothing(self) -> bool:
        return not (self.grade or self.comment)


@dataclass
class Plan:
    """What a push of one assignment does: changes (some of them nothing), students the LMS does not know,
    rows held back."""

    assignment: str
    changes: list[Change] = field(default_factory=list)
    unknown: list[Outgoing] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)

    @property
    def to_send(self) -> list[Change]:
        return [c for c in self.changes if not c.nothing]


def _points(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def same_grade(a: float | None, b: float | None) -> bool:
    """Grades agree to the hundredth of a point (what an LMS keeps of a posted grade)."""
    return a is not None and b is not None and round(a, 2) == round(b, 2)


def comment_text(row: dict, grade: float, max_points: float, page: Path | None) -> str:
    """The comment sent with a grade: its parts in words, the same text for the same grade (so that a
    comment already there is recognised)."""
    auto, auto_max = row["_auto"], row["_auto_max"]
    parts = [f"autograded tests {auto:g}/{auto_max:g}"]
    if row.get("late_penalty"):
        parts.append(f"late penalty -{row['late_penalty']:g}")
    if row.get("manual_max_score"):
        manual = row.get("manual_score")
        if manual is None and row.get("manual_status") == AWAITING:
            parts.append(f"answers in words not graded yet (of {row['manual_max_score']:g})")
        else:  # graded, or none to grade: a notebook that could not be read has no answers to give points to
            parts.append(f"answers in words {manual or 0.0:g}/{row['manual_max_score']:g}")
    text = f"{row['assignment']}: {grade:g}/{max_points:g} points ({', '.join(parts)})."
    if row.get("status") not in (None, "graded") and row.get("reason"):
        # e.g. a notebook that is not valid JSON, or a kernel that died: why the points are what they are
        text += f" The grader: {' '.join(str(row['reason']).split())[:300]}."
    if page is not None:
        text += f" Your feedback page, test by test, is attached ({page.name})."
    return text


def outgoing(out: Path, assignment: str, page_of: Callable[[str], Path] | None = None,
             include_awaiting: bool = False) -> tuple[list[Outgoing], list[Held]]:
    """The grades ``OUT/results.json`` has for ``assignment``, and the rows it holds back.

    Args:
        page_of: student id -> the feedback page to attach (None: no pages); a page not there is said in
            the comment's place (the row is still sent, without it).
        include_awaiting: send a notebook whose answers in words formgrader has not graded yet (its
            autograded points alone); by default it is held until they are.

    Raises:
        FileNotFoundError: ``OUT/results.json`` is not there (``OUT`` not graded).
        ValueError: it is not the list of rows ``grade`` writes.
    """
    path = out / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not there; grade first (`transformer-course grade ... --out {out}`)")
    rows = json.loads(path.read_text())
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{path}: not the list of rows `transformer-course grade` writes")
    sent: list[Outgoing] = []
    held: list[Held] = []
    for row in rows:
        if row.get("assignment") != assignment:
            continue
        student = str(row.get("student_id", ""))
        try:
            exercises = row.get("exercises") or []
            auto = float(row["score"]) if "score" in row else sum(float(e["score"]) for e in exercises)
            auto_max = sum(float(e["max_score"]) for e in exercises)
            penalty = float(row.get("late_penalty") or 0.0)
            final = float(row["final_score"]) if row.get("final_score") is not None else max(0.0, auto - penalty)
            manual = row.get("manual_score")
            manual_max = float(row.get("manual_max_score") or 0.0)
        except (KeyError, TypeError, ValueError) as exc:
            held.append(Held(student, assignment, f"its row in results.json is not one `grade` writes ({exc!r})"))
            continue
        if row.get("status") in NOT_SENT:
            held.append(Held(student, assignment, NOT_SENT[row["status"]]))
            continue
        if row.get("excused"):  # lms.csv writes EX: the notebook counts in no total, and no grade says otherwise
            held.append(Held(student, assignment, "excused in the course's deadlines file: no grade is sent"))
            continue
        awaiting = row.get("manual_status") == AWAITING
        if awaiting and not include_awaiting:
            held.append(Held(student, assignment, "answers in words not graded yet in formgrader "
                                                  "(--include-awaiting sends the autograded points alone)"))
            continue
        grade = round(final + float(manual or 0.0), 2)
        page = page_of(student) if page_of is not None else None
        if page is not None and not page.is_file():
            page = None
        info = {**row, "_auto": auto, "_auto_max": auto_max, "late_penalty": penalty, "manual_max_score": manual_max}
        sent.append(Outgoing(student, assignment, grade, auto_max + manual_max,
                             comment_text(info, grade, auto_max + manual_max, page), page, awaiting))
    return sent, held


def has_comment(current: Current, text: str, attachment: Path | None) -> bool:
    """Whether the LMS already holds this comment: the same text, and the same page (name and size)."""
    wanted = None if attachment is None else (attachment.name, attachment.stat().st_size)
    return any(c.text == text and (wanted is None or wanted in c.attachments) for c in current.comments)


def plan(assignment: str, items: list[Outgoing], held: list[Held], destination: Destination) -> Plan:
    """Compare each grade with what ``destination`` holds: what changes, who is unknown there."""
    result = Plan(assignment, held=list(held))
    for item in sorted(items, key=lambda i: i.student_id):
        current = destination.current(item.student_id)
        if current is None:
            result.unknown.append(item)
            continue
        if current.excused:
            result.held.append(Held(item.student_id, assignment, "excused in the LMS (a grade would undo it): "
                                                                 "take the excuse off there to send one"))
            continue
        result.changes.append(Change(item, current.grade, grade=not same_grade(current.grade, item.grade),
                                     comment=not has_comment(current, item.comment, item.attachment)))
    return result


def table(plan: Plan, destination: str) -> str:
    """The plan in words: one line per student (grade now -> grade sent, and what is sent), then the
    students the LMS does not know and the rows held back."""
    lines = [f"{plan.assignment}: {len(plan.to_send)} to send to {destination}, "
             f"{len(plan.changes) - len(plan.to_send)} already there, {len(plan.unknown)} unknown to "
             f"{destination}, {len(plan.held)} held back",
             f"  {'student':<14} {destination + ' now':>12} -> {'new':<8} sent"]
    for change in plan.changes:
        what = [w for w, on in (("grade", change.grade), ("comment", change.comment)) if on]
        if change.comment and change.outgoing.attachment is not None:
            what.append(f"page {change.outgoing.attachment.name}")
        lines.append(f"  {change.outgoing.student_id:<14} {_points(change.before):>12} -> "
                     f"{_points(change.outgoing.grade):<8} {' + '.join(what) or 'nothing (already there)'}")
    for item in plan.unknown:
        lines.append(f"  {item.student_id:<14} {'?':>12} -> {_points(item.grade):<8} NOT SENT: no such student "
                     f"(enrolment or submission) in {destination}")
    for item in plan.held:
        lines.append(f"  {item.student_id:<14} {'':>12}    {'':<8} held back: {item.reason}")
    return "\n".join(lines)


def send(plan: Plan, destination: Destination, progress: Callable[[Change, str | None], None] | None = None,
         workers: int = 1) -> list[tuple[Change, str]]:
    """Send what :func:`plan` found to change, ``workers`` students at a time; one student's refusal is
    listed and the rest are sent. Returns the refusals, ``(change, the LMS's words)``, in the plan's order.

    Raises:
        whatever ``destination.send`` raises that is no one student's (an exception with ``whole_run``
        set, e.g. a refused token): the rest would fail alike, and are not sent.
    """
    from concurrent.futures import ThreadPoolExecutor

    def one(change: Change) -> str | None:
        item = change.outgoing
        try:
            destination.send(item.student_id, item.grade if change.grade else None,
                             item.comment if change.comment else None,
                             item.attachment if change.comment else None)
        except Exception as exc:
            if getattr(exc, "whole_run", False):
                raise
            words = str(exc)
        else:
            words = None
        if progress:
            progress(change, words)
        return words

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(one, change) for change in plan.to_send]
        try:
            answers = [(change, future.result()) for change, future in zip(plan.to_send, futures, strict=True)]
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    return [(change, words) for change, words in answers if words is not None]
