"""Deadlines and late penalties of a class run: ``transformer-course grade --due ... --deadlines FILE``.

When each notebook was handed in (:func:`submitted_at`), in this order:

0. where ``times.csv`` beside SUBMITTED (lms/times.py) has the hand-in without a time, the verdict
   of the LMS's download it records (``collect``: Canvas's LATE flag): on time, or late with its
   time unknown (flagged, no penalty); with a time, the note names its source.
1. nbgrader's ``timestamp.txt`` in its submission folder (written by ``nbgrader submit``, kept by
   ``nbgrader collect``, or by ``collect`` from an LMS's time): ISO 8601, or nbgrader's
   ``%Y-%m-%d %H:%M:%S.%f %Z`` with a zone the tz database knows or a numeric offset; at most 4 KiB
   read, any encoding (a BOM is honoured).
2. else the notebook file's modification time, which the feedback then says.
3. else no time: the notebook is not marked late, and the row says why.

A time is taken only if it is *plausible*: not before the assignment's release (``[released]``), else
the course's start (``start``; without one, a year before the first due date: no course runs longer),
and not after the run (its clock, :data:`SKEW` allowed for a clock ahead). A ``timestamp.txt`` that is
a link, too big, unreadable, out of the calendar's range or implausible is *flagged*: the reason
column of ``grades.csv``, the run's table and the feedback page say what it said and why it was not
taken, and the file's time is used instead. Where that time is implausible too, no time is known: a
penalty needs evidence, so the notebook is not marked late, and the flag says to check it by hand.
Lateness is worked out after grading, from the records: changing a deadline or the policy grades
nothing again.

A deadlines file (TOML), kept beside the class::

    due = "2026-12-01T23:59:00+01:00"      # every assignment not named below
    start = "2026-09-01T09:00:00+02:00"    # optional: the course's start (no hand-in is earlier)
    [assignments]
    "07_training" = "2026-12-15T23:59:00+01:00"
    [late]
    policy = "per-day"                     # none (the default: only reported) | fixed | per-day
    points = 2                             # fixed: points off a late notebook
    percent_per_day = 10                   # per-day: percent of the notebook's points per started day
    cap = 50                               # per-day: at most this percent in all
    grace_minutes = 5                      # late by at most this much counts as on time
    [released]                             # optional: when an assignment was released (else start)
    "07_training" = "2026-11-20T09:00:00+01:00"
    [extensions]                           # optional: per student, a later due date or hours added
    "10003" = { "01_self_attention" = "2026-12-05T18:00:00+01:00", "02_scaled_dot_product" = 48 }
    "10007" = { "*" = 72 }                 # "*": every assignment with a due date not named for them
    [excused]                              # optional: per student, assignments that do not count
    "10004" = ["02_scaled_dot_product"]

An extension moves one student's due date (:meth:`Deadlines.due` with the student): a date (with its
zone, after the assignment's own due date) or a number of hours (> 0) added to it. An excused
assignment is Canvas's "excused": it does not count, so it is never late and is left out of the totals
(``excused`` in results.json, the run's table and the report). A second source of excused students is
``excused.csv`` beside ``students.csv`` (``student_id,assignment``, written from Canvas's API).

The command line's ``--due`` and ``--late-*`` options override the file's values. Penalties are
those of nbgrader's ``LateSubmissionPlugin`` family: never below zero points, never more than the
score.
"""

from __future__ import annotations

import codecs
import datetime as dt
import math
import re
import tomllib
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

POLICIES = ("none", "fixed", "per-day")
# Each amount of a policy: the deadlines file's key, and the command line's option.
OPTION = {"points": "--late-points (points)", "percent_per_day": "--late-percent (percent_per_day)",
          "cap": "--late-cap (cap)", "grace_minutes": "grace_minutes"}
TIMESTAMP = "timestamp.txt"  # nbgrader's name, in submitted/<student>/<assignment>/
EXAMPLE_DUE = "2026-12-01T23:59:00+01:00"
MAX_TIMESTAMP_BYTES = 4096  # nbgrader writes one line of about 30 bytes
SKEW = dt.timedelta(minutes=10)  # a hand-in clock ahead of the grader's by at most this is not "after the run"
COURSE_LENGTH = dt.timedelta(days=365)  # without a start: no hand-in is this long before the first due date
FILE_TIME = "the notebook file's modification time"
FROM_FILE = "the deadlines file"  # where an excuse came from, the other source being excused.csv


class DeadlineError(ValueError):
    """A malformed deadline, deadlines file or late policy (refused before any grading starts)."""


def parse_due(text: Any, where: str) -> dt.datetime:
    """An ISO 8601 date and time with its time zone (``2026-12-01T23:59:00+01:00``, or ``Z``).

    Raises:
        DeadlineError: not a string of that form, or without a time zone (a deadline must name one:
            the grader's clock and the students' may be in different zones).
    """
    if isinstance(text, dt.datetime):  # a TOML date-time, unquoted
        if text.tzinfo is None:
            raise DeadlineError(f"{where}: {text.isoformat()} has no time zone; add one, e.g. "
                                f"{text.isoformat()}+01:00 or {text.isoformat()}Z for UTC")
        return _utc(text, where)
    if not isinstance(text, str):
        raise DeadlineError(f"{where}: expected a date and time such as {EXAMPLE_DUE!r}, got {text!r}")
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise DeadlineError(f"{where}: {text!r} is not an ISO 8601 date and time; expected e.g. "
                            f"{EXAMPLE_DUE!r}") from None
    if when.tzinfo is None or when.utcoffset() is None:
        raise DeadlineError(f"{where}: {text!r} has no time zone; add one, e.g. {text.strip()}+01:00 or "
                            f"{text.strip()}Z for UTC")
    return _utc(when, where)


def _utc(when: dt.datetime, where: str) -> dt.datetime:
    try:
        return when.astimezone(dt.UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is before the calendar's first instant
        raise DeadlineError(f"{where}: {when.isoformat()} is out of the calendar's range in UTC; expected "
                            f"e.g. {EXAMPLE_DUE!r}") from None


@dataclass(frozen=True)
class LatePolicy:
    """What a late notebook loses. ``kind``: none | fixed | per-day (see the module docstring)."""

    kind: str = "none"
    points: float = 0.0
    percent_per_day: float = 0.0
    cap: float = 100.0
    grace_minutes: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in POLICIES:
            raise DeadlineError(f"late policy {self.kind!r}: expected one of {', '.join(POLICIES)}")
        for name in ("points", "percent_per_day", "cap", "grace_minutes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise DeadlineError(f"late policy: {OPTION[name]} must be a number >= 0, got {value!r}")
        amounts = [OPTION[n] for n in ("points", "percent_per_day") if getattr(self, n)] + (
            [OPTION["cap"]] if self.cap != 100 else [])
        if self.kind == "none" and amounts:
            raise DeadlineError(f"{', '.join(amounts)} given, but the late policy is none (nothing is taken off); "
                                "choose one: --late-policy fixed or per-day (policy in [late])")
        if self.cap > 100:
            raise DeadlineError(f"late policy: cap is a percent of the notebook's points (0-100), got {self.cap!r}")
        if self.kind == "fixed" and self.points == 0:
            raise DeadlineError("late policy 'fixed' needs points off a late notebook: --late-points (points in "
                                "[late]), a number > 0")
        if self.kind == "per-day" and self.percent_per_day == 0:
            raise DeadlineError("late policy 'per-day' needs a percent per day: --late-percent (percent_per_day in "
                                "[late]), a number > 0")

    def penalty(self, score: float, max_score: float, late_by: dt.timedelta) -> float:
        """Points off a notebook that scored ``score`` of ``max_score`` and came ``late_by`` late."""
        if late_by <= dt.timedelta(minutes=self.grace_minutes) or self.kind == "none":
            return 0.0
        if self.kind == "fixed":
            off = self.points
        else:
            days = math.ceil(late_by / dt.timedelta(days=1))  # a started day counts, as a day
            off = max_score * min(self.percent_per_day * days, self.cap) / 100
        return round(min(off, score), 4)

    def describe(self) -> str:
        grace = f", {self.grace_minutes:g} min grace" if self.grace_minutes else ""
        if self.kind == "fixed":
            return f"fixed: {self.points:g} points off a late notebook{grace}"
        if self.kind == "per-day":
            return f"per-day: {self.percent_per_day:g}% per started day late, at most {self.cap:g}%{grace}"
        return "none: lateness is reported, no points are taken off"


@dataclass(frozen=True)
class Deadlines:
    """The due date of each assignment (``default`` for the others; None: none) and the policy."""

    default: dt.datetime | None = None
    assignments: dict[str, dt.datetime] = field(default_factory=dict)
    policy: LatePolicy = LatePolicy()
    # The time zone each due date was given in (by assignment; "" for the default): dates are shown in it.
    zones: dict[str, dt.tzinfo] = field(default_factory=dict)
    start: dt.datetime | None = None  # the course's start, where the deadlines file gives it
    released: dict[str, dt.datetime] = field(default_factory=dict)  # by assignment, where given
    # By student: by assignment ("*": every other), a later due date or hours added to the assignment's.
    extensions: dict[str, dict[str, dt.datetime | dt.timedelta]] = field(default_factory=dict)
    # (student, assignment) -> where it was said: "the deadlines file" or the excused.csv it came from.
    excused: dict[tuple[str, str], str] = field(default_factory=dict)

    def due(self, assignment: str, student: str | None = None) -> dt.datetime | None:
        """``assignment``'s due date; with ``student``, theirs (an extension moves it; None: none)."""
        due = self.assignments.get(assignment, self.default)
        mine = self.extensions.get(student, {}) if student is not None else {}
        extension = mine.get(assignment, mine.get("*"))
        if due is None or extension is None:
            return due
        return extension if isinstance(extension, dt.datetime) else due + extension

    def extended(self, assignment: str, student: str) -> bool:
        """Whether ``student`` has an extension of ``assignment`` (their due date is not the class's)."""
        return self.due(assignment, student) != self.due(assignment)

    def strangers(self, submitted: Path, names: dict[str, str]) -> list[str]:
        """The students ``[extensions]`` and ``[excused]`` name (not excused.csv's: the LMS knows its students)
        who have neither a folder in ``submitted`` nor a name in ``names``: a typo in an id leaves the student
        without their extension."""
        try:
            folders = {p.name for p in Path(submitted).iterdir()}
        except OSError:
            folders = set()
        named = set(self.extensions) | {s for (s, _), said in self.excused.items() if said == FROM_FILE}
        return sorted(named - folders - set(names))

    def excused_by(self, assignment: str, student: str) -> str:
        """Where ``student`` was excused from ``assignment`` (the deadlines file or excused.csv), or ""."""
        return self.excused.get((student, assignment), "")

    def release(self, assignment: str) -> tuple[dt.datetime, str]:
        """The first instant a hand-in of ``assignment`` can have, and what it is, with its date in the
        due date's zone (said in a flag): its release, else the course's start, else a year before the
        first due date (no course runs longer)."""
        if assignment in self.released:
            first = self.released[assignment]
            return first, f"{assignment}'s release ({self.shown(assignment, first)})"
        if self.start is not None:
            return self.start, f"the course's start ({self.shown(assignment, self.start)})"
        due = min([d for d in (self.default, *self.assignments.values()) if d is not None],
                  default=dt.datetime.now(dt.UTC))
        try:
            first = due - COURSE_LENGTH
        except OverflowError:  # a due date in the calendar's first year
            first = dt.datetime.min.replace(tzinfo=dt.UTC)
        return first, (f"the course's start, taken as a year before its first due date "
                       f"({self.shown(assignment, first)}; start in the deadlines file sets it)")

    def zone(self, assignment: str) -> dt.tzinfo:
        """The time zone ``assignment``'s due date was given in (UTC where none was given)."""
        return self.zones.get(assignment if assignment in self.assignments else "", dt.UTC)

    def shown(self, assignment: str, when: dt.datetime | str) -> str:
        """``when`` as people read it, in the time zone of ``assignment``'s due date: ``2026-12-01 23:59 +01:00``."""
        return show(when, self.zone(assignment))

    def local(self, assignment: str, when: dt.datetime) -> dt.datetime:
        """The same instant as ``when``, in the time zone of ``assignment``'s due date (what is stored:
        results.json's and grades.csv's ISO strings keep that offset, so every reader shows it); in UTC
        where that zone's date would be out of the calendar's range (never raises)."""
        try:
            return when.astimezone(self.zone(assignment))
        except OverflowError:
            return when.astimezone(dt.UTC) if when.utcoffset() is not None else when.replace(tzinfo=dt.UTC)


def show(when: dt.datetime | str, zone: dt.tzinfo | None = None) -> str:
    """One format for every date people read: ``2026-12-01 23:59 +01:00`` (in ``zone``; None: in the
    offset ``when`` carries, as results.json keeps it: the due date's own; an ISO 8601 string or an aware
    date and time; a time without a zone is UTC). Never raises: a date out of the calendar's range in
    ``zone`` is shown in its own offset, a string that is not ISO 8601 as it is (quoted)."""
    try:
        when = instant(when)
    except (ValueError, TypeError):
        return _quoted(str(when))
    try:
        when = when.astimezone(zone) if zone is not None else when
    except OverflowError:  # 9999-12-31 23:30 +00:00 has no date in +01:00: shown in its own offset
        pass
    text = when.isoformat(sep=" ", timespec="minutes")  # "0001-01-01 00:00+00:00": %Y would drop the zeros
    return f"{text[:16]} {text[16:]}"


def instant(when: dt.datetime | str) -> dt.datetime:
    """An aware date and time from an ISO 8601 string (results.json's) or a date and time; a time
    without a zone is UTC. Its offset is kept: compare instants, never the strings.

    Raises:
        ValueError: a string that is not ISO 8601.
    """
    if isinstance(when, str):
        when = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def _quoted(text: str, limit: int = 40) -> str:
    """A student's text in a note: quoted, cut, with every control character escaped (a terminal, a
    CSV cell and a page all show it as text)."""
    return ascii(text[:limit]) + ("..." if len(text) > limit else "")


def given_zone(text: Any) -> dt.tzinfo:
    """The time zone a due date (already checked by :func:`parse_due`) was written in."""
    if isinstance(text, dt.datetime):
        return text.tzinfo or dt.UTC
    when = dt.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    return when.tzinfo or dt.UTC


def load(path: Path | None, due: str | None = None, known: list[str] | None = None,
         excused_csv: Path | None = None, **late: Any) -> Deadlines | None:
    """The deadlines of a run from a deadlines file and the command line (which wins); None where
    neither gives a due date nor excuses a student.

    Args:
        path: a deadlines file (TOML, see the module docstring), or None.
        due: the ``--due`` option: every assignment's due date, the file's ``[assignments]`` aside.
        known: the course's assignment names; a file naming another is refused (a typo would
            otherwise leave that assignment without its deadline).
        excused_csv: ``excused.csv`` (``student_id,assignment``, beside ``students.csv``): students
            excused as well as the file's ``[excused]``; read where it exists.
        late: ``policy``, ``points``, ``percent_per_day``, ``cap``, ``grace_minutes`` from the
            command line; None values are left to the file.

    Raises:
        DeadlineError: anything malformed, with what was expected: a date without its zone or out of
            the calendar's range, a ``start`` or ``[released]`` date after a due date it opens, a
            release before ``start``, a name of ``[assignments]`` or ``[released]`` not in ``known``;
            an extension or excuse that is not of the form documented, names an assignment not in
            ``known`` or without a due date, or is not later than the due date it moves (the message
            names the student and the assignment); an ``excused.csv`` without its two columns.
    """
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise DeadlineError(f"deadlines file {path} not found") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise DeadlineError(f"deadlines file {path} is not valid TOML: {exc}") from None
        unknown = set(data) - {"due", "assignments", "late", "start", "released", "extensions", "excused"}
        if unknown:
            raise DeadlineError(f"deadlines file {path}: unknown key(s) {', '.join(sorted(unknown))}; expected "
                                "due, start, [assignments], [released], [late], [extensions] and [excused]")
    where = str(path) if path is not None else "deadlines"
    default = parse_due(due, "--due") if due is not None else (
        parse_due(data["due"], f"{where}: due") if "due" in data else None)
    per = data.get("assignments", {})
    if not isinstance(per, dict):
        raise DeadlineError(f"{where}: [assignments] must be a table of assignment = due date")
    assignments = {name: parse_due(value, f"{where}: assignments.{name}") for name, value in per.items()}
    if known is not None and (unknown := sorted(set(assignments) - set(known))):
        raise DeadlineError(f"{where}: no assignment named {', '.join(unknown)}; the course's are "
                            f"{', '.join(known)}")
    options = data.get("late", {})
    if not isinstance(options, dict):
        raise DeadlineError(f"{where}: [late] must be a table (policy, points, percent_per_day, cap, grace_minutes)")
    if unknown := sorted(set(options) - {"policy", *OPTION}):
        raise DeadlineError(f"{where}: unknown key(s) in [late]: {', '.join(unknown)}; expected policy, "
                            f"{', '.join(OPTION)}")
    options = {**options, **{k: v for k, v in late.items() if v is not None}}
    kind = options.pop("policy", "none")
    policy = LatePolicy(kind, **options)
    excused = _excused(data.get("excused", {}), where, known)
    if excused_csv is not None and Path(excused_csv).is_file():
        excused = {**_excused_csv(Path(excused_csv), known), **excused}
    if default is None and not assignments:
        if kind != "none":
            raise DeadlineError(f"a late policy ({kind}) needs a due date: --due, or due in a deadlines file")
        if data.get("extensions"):
            raise DeadlineError(f"{where}: [extensions] move due dates, and no assignment has one: give due or "
                                "[assignments]")
        return Deadlines(excused=excused) if excused else None
    zones = {name: given_zone(value) for name, value in per.items()}
    if default is not None:
        zones[""] = given_zone(due if due is not None else data["due"])
    found = Deadlines(default, assignments, policy, zones)
    extensions = _extensions(data.get("extensions", {}), where, known, found)
    start = parse_due(data["start"], f"{where}: start") if "start" in data else None
    released = data.get("released", {})
    if not isinstance(released, dict):
        raise DeadlineError(f"{where}: [released] must be a table of assignment = release date")
    released = {name: parse_due(value, f"{where}: released.{name}") for name, value in released.items()}
    if known is not None and (unknown := sorted(set(released) - set(known))):
        raise DeadlineError(f"{where}: [released] names no assignment of the course: {', '.join(unknown)}; the "
                            f"course's are {', '.join(known)}")
    # A release after its due date, or a start after a due date, is a typo (a year, a month): it would
    # flag every honest hand-in as before its release.
    for name in sorted({*assignments, *released} | ({""} if default is not None else set())):
        due_at, label = found.due(name), name or "the default due date (due)"
        opened = released.get(name, start)
        if due_at is not None and opened is not None and opened > due_at:
            said = f"released.{name}" if name in released else "start"
            raise DeadlineError(f"{where}: {said} ({found.shown(name, opened)}) is after the due date of {label} "
                                f"({found.shown(name, due_at)}); expected a release before its due date")
    if start is not None and (early := sorted(n for n, when in released.items() if when < start)):
        raise DeadlineError(f"{where}: released.{early[0]} ({show(released[early[0]], found.zone(early[0]))}) "
                            f"is before the course's start ({show(start, found.zone(''))}); expected a release "
                            "after start")
    return Deadlines(default, assignments, policy, zones, start, released, extensions, excused)


EVERY = "*"  # in [extensions]: every assignment with a due date that the student's table does not name
EXAMPLE_EXTENSION = '"10003" = { "01_self_attention" = "2026-12-05T18:00:00+01:00", "02_scaled_dot_product" = 48 }'


def _student(key: Any, where: str, table: str) -> str:
    """A student id as a key of ``[extensions]`` or ``[excused]``: the id as ``students.csv`` and the folders
    of SUBMITTED give it (no surrounding space, no control character)."""
    if not key or key != key.strip() or not key.isprintable():
        raise DeadlineError(f"{where}: [{table}] has the student id {_quoted(key)}; expected an id as the folders "
                            "of SUBMITTED name it (e.g. \"10003\"), without spaces around it")
    return key


def _extensions(table: Any, where: str, known: list[str] | None,
                found: Deadlines) -> dict[str, dict[str, dt.datetime | dt.timedelta]]:
    """``[extensions]``: student -> {assignment or "*": a later due date, or hours added to the assignment's}.

    Raises:
        DeadlineError: see :func:`load`; the message names the student and the assignment.
    """
    if not isinstance(table, dict):
        raise DeadlineError(f"{where}: [extensions] must be a table of student = {{ assignment = due date or "
                            f"hours }}, e.g. {EXAMPLE_EXTENSION}")
    extensions: dict[str, dict[str, dt.datetime | dt.timedelta]] = {}
    for student, per in table.items():
        student = _student(student, where, "extensions")
        if not isinstance(per, dict) or not per:
            raise DeadlineError(f"{where}: extensions.{student} must be a table of assignment = due date or hours, "
                                f"got {per!r}; e.g. {EXAMPLE_EXTENSION}")
        mine: dict[str, dt.datetime | dt.timedelta] = {}
        for assignment, value in per.items():
            said = f"{where}: extensions.{student}.{assignment} (student {student}, "
            said += "every assignment)" if assignment == EVERY else f"assignment {assignment})"
            if assignment != EVERY and known is not None and assignment not in known:
                raise DeadlineError(f"{said}: no assignment of that name; the course's are {', '.join(known)} "
                                    f'(or "{EVERY}" for every one)')
            base = found.due(assignment) if assignment != EVERY else None
            if assignment != EVERY and base is None:
                raise DeadlineError(f"{said}: the assignment has no due date to move; give it one (due or "
                                    "[assignments])")
            if isinstance(value, int | float) and not isinstance(value, bool):
                if not math.isfinite(value) or value <= 0 or value > 24 * 366:
                    raise DeadlineError(f"{said}: {value!r} hours; expected a number of hours > 0 (and under a "
                                        "year) added to the due date, or a due date such as "
                                        f"{EXAMPLE_DUE!r}")
                mine[assignment] = dt.timedelta(hours=value)
                continue
            if assignment == EVERY:
                raise DeadlineError(f'{said}: "{EVERY}" takes a number of hours added to each due date, got '
                                    f"{value!r}; give a date per assignment instead")
            when = parse_due(value, said.rstrip(" ,"))
            if base is not None and when <= base:
                raise DeadlineError(f"{said}: {found.shown(assignment, when)} is not after the assignment's due "
                                    f"date ({found.shown(assignment, base)}); an extension moves it later")
            mine[assignment] = when
        extensions[student] = mine
    return extensions


def _excused(table: Any, where: str, known: list[str] | None) -> dict[tuple[str, str], str]:
    """``[excused]``: student -> [assignment, ...]; (student, assignment) -> "the deadlines file".

    Raises:
        DeadlineError: see :func:`load`.
    """
    if not isinstance(table, dict):
        raise DeadlineError(f'{where}: [excused] must be a table of student = [assignments], e.g. '
                            f'"10004" = ["02_scaled_dot_product"]')
    found = {}
    for student, names in table.items():
        student = _student(student, where, "excused")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise DeadlineError(f'{where}: excused.{student} (student {student}) must be a list of assignment '
                                f'names, e.g. ["02_scaled_dot_product"], got {names!r}')
        for name in names:
            if known is not None and name not in known:
                raise DeadlineError(f"{where}: excused.{student} (student {student}) names {name!r}, no assignment "
                                    f"of the course; the course's are {', '.join(known)}")
            found[(student, name)] = FROM_FILE
    return found


EXCUSED_CSV = "excused.csv"  # beside students.csv: student_id,assignment, from the LMS (Canvas's "excused")


def _excused_csv(path: Path, known: list[str] | None) -> dict[tuple[str, str], str]:
    """The rows of ``excused.csv`` (read by column name; other columns are left alone).

    Raises:
        DeadlineError: the file cannot be read, lacks ``student_id`` or ``assignment``, or a row names an
            assignment not in ``known`` (its line, student and assignment said).
    """
    import csv

    from transformer_course.grading.output.spreadsheet import read_rows

    try:
        rows = read_rows(path)
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DeadlineError(f"{path} cannot be read: {type(exc).__name__}") from None
    if missing := [c for c in ("student_id", "assignment") if c not in header]:
        raise DeadlineError(f"{path}: no {' or '.join(missing)} column; expected the header student_id,assignment")
    found = {}
    for line, row in enumerate(rows, start=2):
        student, name = (row.get("student_id") or "").strip(), (row.get("assignment") or "").strip()
        if not student or not name:
            raise DeadlineError(f"{path}, line {line}: student {_quoted(student)}, assignment {_quoted(name)}: "
                                "expected both")
        if known is not None and name not in known:
            raise DeadlineError(f"{path}, line {line}: student {student} is excused from {_quoted(name)}, no "
                                f"assignment of the course; the course's are {', '.join(known)}")
        found[(student, name)] = path.name
    return found


class HandIn(NamedTuple):
    """When a notebook was handed in, as :func:`submitted_at` found it."""

    when: dt.datetime | None  # UTC; None: no plausible time is known
    note: str  # how the time was found, where not from timestamp.txt ("" where it was); the flag first
    flag: str = ""  # why something found was not taken (unreadable, out of range, implausible); "" where nothing


def _text(data: bytes) -> str:
    """``timestamp.txt``'s text in whatever encoding it carries: a BOM's, UTF-16 without one (NUL
    bytes between ASCII ones, as Windows writes it), else UTF-8 (a byte that is not is replaced)."""
    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                       (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                       (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(codec, errors="replace")
    if b"\x00" in data and len(data) % 2 == 0:
        for codec in ("utf-16-le", "utf-16-be"):
            text = data.decode(codec, errors="replace")
            if text.isascii():
                return text
    return data.decode("utf-8", errors="replace")


_OFFSET = re.compile(r"([+-])(\d\d):?(\d\d)?")
_ZONE_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_+-]{0,40}(?:/[A-Za-z0-9_+-]{1,40}){0,3}")


def parse_timestamp(text: str) -> dt.datetime:
    """An aware date and time from ``timestamp.txt``'s text: ISO 8601 (``2026-12-02T10:30:00+01:00``),
    or nbgrader's ``%Y-%m-%d %H:%M:%S.%f %Z`` (``2026-12-02 10:30:00.000000 UTC``) whose zone is UTC,
    GMT, a numeric offset or a name of the tz database; a time without a zone is UTC (nbgrader's rule).
    Stricter than nbgrader's ``parse_utc``: nothing is guessed (dateutil fills a missing date from
    today) and a zone is never a path of the grader's machine.

    Raises:
        ValueError: anything else (an unknown zone name included; zoneinfo's errors are ValueErrors or
            KeyErrors, turned into ValueError).
    """
    text = text.strip()
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        parts = text.split()
        if len(parts) != 3:
            raise ValueError("not ISO 8601, nor nbgrader's 'date time zone'") from None
        when = dt.datetime.fromisoformat(f"{parts[0]} {parts[1]}")
        if when.tzinfo is not None:
            raise ValueError("two time zones") from None
        zone = parts[2]
        if zone in ("UTC", "GMT", "Z"):
            return when.replace(tzinfo=dt.UTC)
        if match := _OFFSET.fullmatch(zone):
            sign, hours, minutes = match[1], int(match[2]), int(match[3] or 0)
            if hours > 23 or minutes > 59:
                raise ValueError(f"offset {zone} out of range") from None
            offset = dt.timedelta(hours=hours, minutes=minutes)
            return when.replace(tzinfo=dt.timezone(-offset if sign == "-" else offset))
        if not _ZONE_KEY.fullmatch(zone) or ".." in zone:
            raise ValueError("the zone is not a time zone name") from None
        try:
            return when.replace(tzinfo=zoneinfo.ZoneInfo(zone))
        except (KeyError, OSError, ValueError):  # ZoneInfoNotFoundError is a KeyError
            raise ValueError(f"no time zone named {zone!r} in the tz database") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


class Window(NamedTuple):
    """The instants a hand-in time can have: from ``first`` (what it is, as a flag says it: ``first_is``)
    to ``last`` (the run's clock and :data:`SKEW`)."""

    first: dt.datetime
    first_is: str
    last: dt.datetime
    zone: dt.tzinfo = dt.UTC  # the zone flags give dates in (the due date's)

    def implausible(self, when: dt.datetime) -> str:
        """Why ``when`` (UTC) cannot be a hand-in time, or ""."""
        if when < self.first:
            return f"before {self.first_is}"
        if when > self.last:
            return f"after this run ({show(self.last - SKEW, self.zone)})"
        return ""


def _stamp(folder: Path) -> tuple[dt.datetime | None, str]:
    """``timestamp.txt``'s time (UTC), or None and what kept it from being read (a flag), or None and
    "" where there is none. Read as the notebook is: nothing below SUBMITTED/<student> followed, at
    most :data:`MAX_TIMESTAMP_BYTES` (a bigger file is not read at all)."""
    from transformer_course.grading.submission import intake

    stamp = folder / TIMESTAMP
    kind = intake.describe(stamp)
    if kind == "missing":
        return None, ""
    if kind != "a regular file":  # a link is not followed
        return None, f"{TIMESTAMP} is {kind}: not read"
    try:
        data = intake.read(folder.parent.parent, Path(folder.parent.name, folder.name, TIMESTAMP),
                           MAX_TIMESTAMP_BYTES)
    except intake.Refused as exc:
        if "over the" in str(exc):
            return None, f"{TIMESTAMP} is over {MAX_TIMESTAMP_BYTES // 1024} KiB (a timestamp is one line): not read"
        return None, f"{TIMESTAMP} could not be read ({str(exc)[:80]})"
    except OSError as exc:
        return None, f"{TIMESTAMP} could not be read ({type(exc).__name__})"
    text = _text(data).strip()
    if not text:
        return None, f"{TIMESTAMP} is empty"
    try:
        when = parse_timestamp(text)
    except ValueError as exc:
        return None, f"{TIMESTAMP} holds {_quoted(text)}, not a time ({exc})"
    try:
        return when.astimezone(dt.UTC), ""
    except (OverflowError, ValueError):  # year 1 west of UTC has no instant in UTC
        return None, f"{TIMESTAMP} holds {_quoted(text)}, out of the calendar's range in UTC"


def _file_time(notebook: Path) -> tuple[dt.datetime | None, str]:
    """The notebook file's modification time (UTC, the link itself never followed), or None and why."""
    try:
        return dt.datetime.fromtimestamp(notebook.lstat().st_mtime, dt.UTC), ""
    except (OverflowError, ValueError, OSError) as exc:  # a time past year 9999, or a file gone since
        return None, f"{FILE_TIME} cannot be read as a date ({type(exc).__name__})"


_TIMES_CACHE: dict[Path, tuple[tuple[int, int, int], dict[tuple[str, str], dict[str, str]]]] = {}


def _lms_time(folder: Path) -> dict[str, str] | None:
    """The hand-in's row of ``times.csv`` (lms/times.py: where its time came from), or None: read once
    per version of the file (a class's run asks for every hand-in).

    Raises:
        ValueError: ``times.csv`` is not the file lms.times writes. OSError: it cannot be read.
    """
    from transformer_course.lms import times

    path = times.times_csv(folder.parent.parent)
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    version = (info.st_ino, info.st_mtime_ns, info.st_size)  # atomic_write replaces the file: a new inode
    if path not in _TIMES_CACHE or _TIMES_CACHE[path][0] != version:
        _TIMES_CACHE[path] = (version, times.sources(folder.parent.parent))
    return _TIMES_CACHE[path][1].get((folder.parent.name, folder.name))


def _lms_verdict(source: str) -> HandIn:
    """A hand-in whose LMS download decided its lateness without a time (collect.py's module docstring)."""
    from transformer_course.instructors import collect

    check = "check it by hand, or give its time with `collect --times`"
    if source == collect.CANVAS_ON_TIME:
        return HandIn(None, "on time: Canvas did not mark it LATE, and its download holds no submission time")
    if source == collect.CANVAS_LATE:
        said = f"late, time unknown: Canvas marked it LATE, and its download holds no time; no penalty taken: {check}"
        return HandIn(None, said, said)
    said = (f"time unknown: Moodle's download holds no submission time; not marked late: {check}"
            if source == collect.MOODLE_NO_TIME
            else f"times.csv gives no time, only {source!r}; not marked late: {check}")
    return HandIn(None, said, said)


def _same(row: dict[str, str], when: dt.datetime) -> bool:
    """Whether ``times.csv``'s row holds the instant ``timestamp.txt`` does (then its source is the time's)."""
    try:
        return instant(row["submitted_at"]) == when
    except ValueError:
        return False


def submitted_at(folder: Path | None, notebook: Path | None, window: Window | None = None) -> HandIn:
    """When a submission was handed in (UTC), how that was found where not from nbgrader's
    ``timestamp.txt``, and the flag where something found was not taken (see the module docstring:
    the order of the sources; ``window``: the plausible instants, None: any). Where ``times.csv``
    (lms/times.py, beside SUBMITTED) has the hand-in, the note names the time's source, and a row
    without a time (an LMS download's flag, instructors/collect.py) decides: on time, or late with
    its time unknown (flagged, no penalty). Never raises, whatever ``timestamp.txt`` or ``times.csv``
    holds: what cannot be read is flagged and the file's time is used."""
    from transformer_course.grading.submission import intake

    try:
        row = _lms_time(folder) if folder is not None else None
        if row is not None and not row["submitted_at"]:
            return _lms_verdict(row["source"])
        when, flag = _stamp(folder) if folder is not None else (None, "")
        if when is not None and window is not None and (why := window.implausible(when)):
            flag = f"{TIMESTAMP} says {show(when, window.zone)}, {why}"
            when = None
        if when is not None:
            # times.csv may be edited by hand: its source is shown printable and cut
            source = "".join(c for c in row["source"] if c.isprintable())[:80] if row is not None else ""
            return HandIn(when, f"time from {source}" if row is not None and _same(row, when) else "")
    except Exception as exc:  # noqa: BLE001 (whatever is in the file, the run goes on)
        flag = f"{TIMESTAMP} or times.csv could not be read ({type(exc).__name__})"
    note = flag or f"no {TIMESTAMP}"
    if notebook is None or intake.describe(notebook) != "a regular file":
        return HandIn(None, f"{note}, and no notebook: no time known", flag)
    when, problem = _file_time(notebook)
    if when is not None and window is not None and (why := window.implausible(when)):
        problem = f"{FILE_TIME} ({show(when, window.zone)}) is {why} too"
    if problem:  # no evidence of when: a penalty needs some, so none is taken; the instructor decides
        return HandIn(None, f"{note}; {problem}: no plausible time, not marked late (check it by hand)",
                      flag or problem)
    return HandIn(when, f"{flag}; {FILE_TIME} was used instead" if flag else f"{note}: {FILE_TIME} was used", flag)


def late_text(late_by: dt.timedelta) -> str:
    """``2 d 3 h 5 min`` (whole minutes, rounded up)."""
    minutes = math.ceil(late_by.total_seconds() / 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes)
    return " ".join(parts) or "0 min"


def excuse(result: Any, deadlines: Deadlines) -> bool:
    """Mark ``result`` excused where ``deadlines`` excuse its student from its assignment, whatever was handed
    in (a missing notebook of an excused student is excused, not missing); returns whether it is."""
    result.excused = bool(deadlines.excused_by(result.assignment, result.student_id))
    return result.excused


def apply(results: list[Any], where: dict[tuple[str, str], tuple[Path, Path | None]], deadlines: Deadlines,
          now: dt.datetime | None = None) -> None:
    """Set ``submitted_at``, ``late_by`` (hours), ``late_penalty``, ``late_note``, ``due`` and ``extended``
    on each graded result (:class:`~.grade.SubmissionResult`) whose assignment has a due date (the
    student's own, where an extension moves it), and ``excused`` on every result its student is excused
    from (never late: no penalty). ``where``: each (student, assignment)'s submission folder and notebook;
    ``now``: the run's clock (a hand-in time after it is implausible; None: the current time). A flagged
    time (see :func:`submitted_at`) goes into the result's ``reason`` too, the column grades.csv gives.
    Never raises for a hand-in time."""
    now = now or dt.datetime.now(dt.UTC)
    for result in results:
        excused = excuse(result, deadlines)
        due = deadlines.due(result.assignment, result.student_id)
        if due is None or result.status in ("missing", "refused", "wrong-notebook", "not-a-notebook", "grader-error"):
            continue
        result.extended = deadlines.extended(result.assignment, result.student_id)
        folder, notebook = where.get((result.student_id, result.assignment), (None, None))
        window = Window(*deadlines.release(result.assignment), now + SKEW, deadlines.zone(result.assignment))
        when, result.late_note, flag = submitted_at(folder, notebook, window)
        if flag and (said := f"hand-in time: {result.late_note}") not in result.reason:
            result.reason = f"{result.reason.strip()}; {said}" if result.reason.strip() else said
        if when is None:
            continue
        # stored in the due date's own time zone (the same instants): every screen shows that zone
        result.submitted_at = deadlines.local(result.assignment, when).isoformat(timespec="seconds")
        result.due = deadlines.local(result.assignment, due).isoformat(timespec="minutes")
        late_by = max(when - due, dt.timedelta(0)) if not excused else dt.timedelta(0)  # excused: never late
        result.late_by = round(late_by / dt.timedelta(hours=1), 2)
        result.late_penalty = deadlines.policy.penalty(result.score, result.max_score, late_by)
