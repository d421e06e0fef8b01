"""Deadlines and late penalties of a class run: ``transformer-course grade --due ... --deadlines FILE``.

When each notebook was handed in comes from nbgrader's ``timestamp.txt`` in its submission folder
(written by ``nbgrader submit`` and ``nbgrader collect``; read with nbgrader's own parser), else from
the notebook file's modification time, which the feedback then says. Lateness is worked out after
grading, from the records: changing a deadline or the policy grades nothing again.

A deadlines file (TOML), kept beside the class::

    due = "2026-12-01T23:59:00+01:00"      # every assignment not named below
    [assignments]
    "07_training" = "2026-12-15T23:59:00+01:00"
    [late]
    policy = "per-day"                     # none (the default: only reported) | fixed | per-day
    points = 2                             # fixed: points off a late notebook
    percent_per_day = 10                   # per-day: percent of the notebook's points per started day
    cap = 50                               # per-day: at most this percent in all
    grace_minutes = 5                      # late by at most this much counts as on time

The command line's ``--due`` and ``--late-*`` options override the file's values. Penalties are
those of nbgrader's ``LateSubmissionPlugin`` family: never below zero points, never more than the
score.
"""

from __future__ import annotations

import datetime as dt
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POLICIES = ("none", "fixed", "per-day")
# Each amount of a policy: the deadlines file's key, and the command line's option.
OPTION = {"points": "--late-points (points)", "percent_per_day": "--late-percent (percent_per_day)",
          "cap": "--late-cap (cap)", "grace_minutes": "grace_minutes"}
TIMESTAMP = "timestamp.txt"  # nbgrader's name, in submitted/<student>/<assignment>/
EXAMPLE_DUE = "2026-12-01T23:59:00+01:00"


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
        return text.astimezone(dt.UTC)
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
    return when.astimezone(dt.UTC)


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

    def due(self, assignment: str) -> dt.datetime | None:
        return self.assignments.get(assignment, self.default)

    def zone(self, assignment: str) -> dt.tzinfo:
        """The time zone ``assignment``'s due date was given in (UTC where none was given)."""
        return self.zones.get(assignment if assignment in self.assignments else "", dt.UTC)

    def shown(self, assignment: str, when: dt.datetime | str) -> str:
        """``when`` as people read it, in the time zone of ``assignment``'s due date: ``2026-12-01 23:59 +01:00``."""
        return show(when, self.zone(assignment))

    def local(self, assignment: str, when: dt.datetime) -> dt.datetime:
        """The same instant as ``when``, in the time zone of ``assignment``'s due date (what is stored:
        results.json's and grades.csv's ISO strings keep that offset, so every reader shows it)."""
        return when.astimezone(self.zone(assignment))


def show(when: dt.datetime | str, zone: dt.tzinfo | None = None) -> str:
    """One format for every date people read: ``2026-12-01 23:59 +01:00`` (in ``zone``; None: in the
    offset ``when`` carries, as results.json keeps it: the due date's own; an ISO 8601 string or an aware
    date and time; a time without a zone is UTC)."""
    when = instant(when)
    text = (when.astimezone(zone) if zone is not None else when).strftime("%Y-%m-%d %H:%M %z")
    return f"{text[:-2]}:{text[-2:]}"  # +0100 -> +01:00


def instant(when: dt.datetime | str) -> dt.datetime:
    """An aware date and time from an ISO 8601 string (results.json's) or a date and time; a time
    without a zone is UTC. Its offset is kept: compare instants, never the strings."""
    if isinstance(when, str):
        when = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def given_zone(text: Any) -> dt.tzinfo:
    """The time zone a due date (already checked by :func:`parse_due`) was written in."""
    if isinstance(text, dt.datetime):
        return text.tzinfo or dt.UTC
    when = dt.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    return when.tzinfo or dt.UTC


def load(path: Path | None, due: str | None = None, known: list[str] | None = None,
         **late: Any) -> Deadlines | None:
    """The deadlines of a run from a deadlines file and the command line (which wins); None where
    neither gives a due date.

    Args:
        path: a deadlines file (TOML, see the module docstring), or None.
        due: the ``--due`` option: every assignment's due date, the file's ``[assignments]`` aside.
        known: the course's assignment names; a file naming another is refused (a typo would
            otherwise leave that assignment without its deadline).
        late: ``policy``, ``points``, ``percent_per_day``, ``cap``, ``grace_minutes`` from the
            command line; None values are left to the file.

    Raises:
        DeadlineError: anything malformed, with what was expected.
    """
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise DeadlineError(f"deadlines file {path} not found") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise DeadlineError(f"deadlines file {path} is not valid TOML: {exc}") from None
        unknown = set(data) - {"due", "assignments", "late"}
        if unknown:
            raise DeadlineError(f"deadlines file {path}: unknown key(s) {', '.join(sorted(unknown))}; expected "
                                "due, [assignments] and [late]")
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
    if default is None and not assignments:
        if kind != "none":
            raise DeadlineError(f"a late policy ({kind}) needs a due date: --due, or due in a deadlines file")
        return None
    zones = {name: given_zone(value) for name, value in per.items()}
    if default is not None:
        zones[""] = given_zone(due if due is not None else data["due"])
    return Deadlines(default, assignments, policy, zones)


def submitted_at(folder: Path | None, notebook: Path | None) -> tuple[dt.datetime | None, str]:
    """When a submission was handed in (UTC), and a note for the feedback when that is not nbgrader's
    ``timestamp.txt``. Never raises: an unreadable timestamp falls back to the file's time, said."""
    from nbgrader.utils import parse_utc

    from transformer_course.grading import intake

    note = ""
    stamp = folder / TIMESTAMP if folder is not None else None
    kind = intake.describe(stamp) if stamp is not None else "missing"
    if stamp is not None and kind != "missing" and kind != "a regular file":  # a link is not followed
        note = f"{TIMESTAMP} is {kind}: not read"
    elif stamp is not None and kind == "a regular file":
        try:
            # read like the notebook: nothing below SUBMITTED/<student> followed, at most 4 KiB
            data = intake.read(folder.parent.parent, Path(folder.parent.name, folder.name, TIMESTAMP), 4096)
            text = data.decode(errors="replace").strip()
            if not text:
                raise ValueError("empty")
            try:  # ISO 8601 ("2026-12-02 10:30:00+01:00"); else nbgrader's own "%Y-%m-%d %H:%M:%S.%f %Z"
                when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                when = parse_utc(text)
            if when.tzinfo is None:  # nbgrader's convention: a time without a zone is UTC
                when = when.replace(tzinfo=dt.UTC)
            return when.astimezone(dt.UTC), ""
        except Exception as exc:  # noqa: BLE001 (whatever is in the file, the run goes on)
            note = f"{TIMESTAMP} could not be read ({type(exc).__name__}: {str(exc)[:80]})"
    else:
        note = f"no {TIMESTAMP}"
    if notebook is None or intake.describe(notebook) != "a regular file":
        return None, f"{note}, and no notebook: no time known"
    when = dt.datetime.fromtimestamp(notebook.lstat().st_mtime, dt.UTC)
    return when, f"{note}: the notebook file's modification time was used"


def late_text(late_by: dt.timedelta) -> str:
    """``2 d 3 h 5 min`` (whole minutes, rounded up)."""
    minutes = math.ceil(late_by.total_seconds() / 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes)
    return " ".join(parts) or "0 min"


def apply(results: list[Any], where: dict[tuple[str, str], tuple[Path, Path | None]], deadlines: Deadlines) -> None:
    """Set ``submitted_at``, ``late_by`` (hours), ``late_penalty`` and ``late_note`` on each graded
    result (:class:`~.grade.SubmissionResult`) whose assignment has a due date. ``where``: each
    (student, assignment)'s submission folder and notebook."""
    for result in results:
        due = deadlines.due(result.assignment)
        if due is None or result.status in ("missing", "refused", "wrong-notebook", "not-a-notebook", "grader-error"):
            continue
        folder, notebook = where.get((result.student_id, result.assignment), (None, None))
        when, result.late_note = submitted_at(folder, notebook)
        if when is None:
            continue
        # stored in the due date's own time zone (the same instants): every screen shows that zone
        result.submitted_at = deadlines.local(result.assignment, when).isoformat(timespec="seconds")
        result.due = deadlines.local(result.assignment, due).isoformat(timespec="minutes")
        late_by = max(when - due, dt.timedelta(0))
        result.late_by = round(late_by / dt.timedelta(hours=1), 2)
        result.late_penalty = deadlines.policy.penalty(result.score, result.max_score, late_by)
