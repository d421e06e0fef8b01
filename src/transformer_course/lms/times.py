"""Submission times from an LMS, and where each came from.

``timestamp.txt`` (``SUBMITTED/<student>/<assignment>/timestamp.txt``) stays the one time the grader reads,
as in nbgrader's exchange. Whatever writes it from another source (the LMS's API, its download's flags or
archive times, an instructor's ``--times FILE.csv``) records the source in ``times.csv``, beside
``students.csv`` (the parent of ``SUBMITTED``), one row per hand-in::

    student_id,assignment,submitted_at,source
    10001,01_self_attention,2026-11-23T18:00:00+00:00,canvas api

``submitted_at`` is ISO 8601 with its offset; ``source`` says in words where the time came from (e.g.
``canvas api``, ``canvas LATE flag``, ``archive time``, ``--times FILE``). A hand-in whose ``timestamp.txt``
came with it (nbgrader's exchange) has no row: its source is ``timestamp.txt``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from transformer_course.grading.output.atomic import atomic_write
from transformer_course.grading.output.spreadsheet import csv_text, read_rows

TIMES_CSV = "times.csv"
TIMES_HEADER = ["student_id", "assignment", "submitted_at", "source"]
FROM_HAND_IN = "timestamp.txt"  # the source of a time that came with the hand-in


def times_csv(submitted: Path) -> Path:
    """Where ``times.csv`` lives for the folder of hand-ins ``submitted`` (beside ``students.csv``)."""
    return submitted.resolve().parent / TIMES_CSV


def record(submitted: Path, found: dict[tuple[str, str], tuple[dt.datetime, str]]) -> None:
    """Write each hand-in's time to its ``timestamp.txt`` and its source to ``times.csv``.

    Args:
        submitted: the folder of hand-ins, ``SUBMITTED/<student>/<assignment>/``.
        found: ``(student_id, assignment) -> (an aware datetime, source in words)``; a hand-in whose folder
            does not exist is skipped (the LMS knows of a submission that was not collected).

    Raises:
        ValueError: a naive datetime (its zone would be a guess).
        OSError: ``submitted`` or ``times.csv`` cannot be written (the caller says so in one line).
    """
    rows = {(r["student_id"], r["assignment"]): r for r in sources(submitted).values()}
    for (student, assignment), (when, source) in sorted(found.items()):
        if when.tzinfo is None:
            raise ValueError(f"{student}/{assignment}: a submission time without a time zone ({when})")
        folder = submitted / student / assignment
        if not folder.is_dir():
            continue
        atomic_write(folder / "timestamp.txt", when.isoformat() + "\n")
        rows[student, assignment] = {"student_id": student, "assignment": assignment,
                                     "submitted_at": when.isoformat(), "source": source}
    table = [TIMES_HEADER, *[[row[k] for k in TIMES_HEADER] for _, row in sorted(rows.items())]]
    atomic_write(times_csv(submitted), csv_text(table))


def sources(submitted: Path) -> dict[tuple[str, str], dict[str, str]]:
    """``times.csv``'s rows by ``(student_id, assignment)``; empty where there is no such file.

    Raises:
        ValueError: the file's header is not :data:`TIMES_HEADER` (not a file this module wrote).
    """
    path = times_csv(submitted)
    if not path.is_file():
        return {}
    rows = read_rows(path)
    if rows and list(rows[0]) != TIMES_HEADER:
        raise ValueError(f"{path}: header {list(rows[0])}, expected {TIMES_HEADER}")
    return {(r["student_id"], r["assignment"]): r for r in rows}


def source_of(submitted: Path, student: str, assignment: str) -> str:
    """Where the time of one hand-in came from: its ``times.csv`` source, else :data:`FROM_HAND_IN`."""
    row = sources(submitted).get((student, assignment))
    return row["source"] if row else FROM_HAND_IN
