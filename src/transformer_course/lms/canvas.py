"""``transformer-course canvas``: Canvas through its REST API (canvasapi), both ways.

``canvas times SUBMITTED --assignment NAME``
    Each submission's ``submitted_at`` becomes the hand-in's ``timestamp.txt`` (its source, ``canvas api``,
    in ``times.csv``: :mod:`transformer_course.lms.times`); Canvas's ``late`` flag goes to ``students.csv``'s
    ``late`` column as collect's does; an ``excused`` submission is a row of ``excused.csv``
    (``student_id,assignment``), beside ``students.csv``; each student's ``name``, ``login_id`` and
    ``sis_user_id`` go to ``students.csv``. The course's student id of a Canvas hand-in is the Canvas user id
    (collect's ``canvas`` layout names the folders so).
``canvas push OUT --assignment NAME [--dry-run] [--comment-with-page]``
    Each student's grade (``posted_grade``, in points) and a comment (the score in words; with
    ``--comment-with-page`` the feedback page attached, uploaded by Canvas's comment file upload), sent only
    where Canvas holds something else (:mod:`transformer_course.lms.push`).

The course, from the environment: ``CANVAS_URL`` (``https://school.instructure.com``), ``CANVAS_TOKEN`` (an
access token, never printed) and ``CANVAS_COURSE_ID``. A Canvas assignment is found by the course's
assignment name (``01_self_attention``), or given with ``--map 01_self_attention=1234``.

Canvas throttles (its API docs, "Throttling"): a leaky bucket per token, ``X-Request-Cost`` and
``X-Rate-Limit-Remaining`` on each answer, ``403 Forbidden (Rate Limit Exceeded)`` (429 in newer pages)
when it is empty. Requests here go one at a time, which the docs say is "unlikely to be throttled", and a
throttled one waits and is sent again (:class:`Throttle`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from transformer_course.grading.output.atomic import atomic_write
from transformer_course.grading.output.spreadsheet import csv_text, read_rows
from transformer_course.lms import push, times

SOURCE = "canvas api"  # times.csv's source of a time read here
EXCUSED_CSV = "excused.csv"  # beside students.csv: the submissions Canvas marks excused
EXCUSED_HEADER = ["student_id", "assignment"]
CANVAS_COLUMNS = ["login_id", "sis_user_id"]  # added to students.csv after collect's columns
ENV = ("CANVAS_URL", "CANVAS_TOKEN", "CANVAS_COURSE_ID")
PER_PAGE = 100  # Canvas's largest page for these lists (basics/pagination)
# Students sent to at once: Canvas charges each request in flight in advance ("Throttling": a pre-flight
# penalty, credited back when it ends); a few at a time stay far below the quota.
PARALLEL = 4
TRIES = 8  # a throttled request is sent this many times in all (about 30 s of waiting) before giving up


class CanvasError(push.LmsError):
    """Canvas could not be used: the message says why in one line, without the token. ``whole_run``: no
    other student would fare better (a refused token), so a push stops."""


@dataclass(frozen=True)
class Settings:
    url: str
    token: str = field(repr=False)
    course_id: str

    def scrub(self, text: str) -> str:
        """``text`` without the token (an error message quoting a request never shows it)."""
        return text.replace(self.token, "<CANVAS_TOKEN>") if self.token else text


def settings(environ: dict[str, str] | None = None) -> Settings:
    """The course's Canvas from ``CANVAS_URL``, ``CANVAS_TOKEN`` and ``CANVAS_COURSE_ID``.

    Raises:
        CanvasError: one is not set, or the URL is not ``https://`` (the token would cross the network in
            clear; ``http://`` is accepted for this machine's own addresses, a local test server).
    """
    env = os.environ if environ is None else environ
    missing = [name for name in ENV if not env.get(name, "").strip()]
    if missing:
        raise CanvasError(f"set {', '.join(missing)} in the environment (docs/lms.md, 'Canvas: the token')")
    url = env["CANVAS_URL"].strip().rstrip("/")
    parts = urlsplit(url)
    local = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if parts.scheme != "https" and not (parts.scheme == "http" and local):
        raise CanvasError(f"CANVAS_URL must be https://... (got {url!r}): the token must not cross the network "
                          "in clear")
    if parts.path.rstrip("/").endswith("/api/v1"):
        raise CanvasError(f"CANVAS_URL is the site's address without /api/v1 (got {url!r})")
    course = env["CANVAS_COURSE_ID"].strip()
    if not course.isdigit():
        raise CanvasError(f"CANVAS_COURSE_ID must be the number in the course's address, /courses/NUMBER "
                          f"(got {course!r})")
    return Settings(url, env["CANVAS_TOKEN"].strip(), course)


def _throttle_adapter():
    """A ``requests`` transport adapter that waits and resends a throttled request (see :class:`Throttle`);
    built on first use, so that commands other than ``canvas`` never import requests."""
    from requests.adapters import HTTPAdapter

    class Throttle(HTTPAdapter):
        """Canvas's throttling (API docs, "Throttling"): a ``403`` whose body says ``Rate Limit Exceeded``, or
        a ``429``, is sent again after a wait that doubles each time (0.25 s, 0.5 s, ... at most 8 s, with
        jitter), up to ``tries`` times; ``stats`` counts the throttled answers, the requests and their cost."""

        tries = TRIES
        first_wait = 0.25
        longest_wait = 8.0

        def __init__(self):
            super().__init__(pool_maxsize=PARALLEL)
            self.stats = {"requests": 0, "throttled": 0, "cost": 0.0, "lowest remaining": None}
            self.lock = threading.Lock()

        def send(self, request, **kwargs):
            for attempt in range(self.tries):
                response = super().send(request, **kwargs)
                throttled = response.status_code == 429 or (
                    response.status_code == 403 and "Rate Limit Exceeded" in response.text)
                with self.lock:
                    self.stats["requests"] += 1
                    self.stats["throttled"] += throttled
                    self.stats["cost"] += float(response.headers.get("X-Request-Cost") or 0.0)
                    if (left := response.headers.get("X-Rate-Limit-Remaining")) is not None:
                        low = self.stats["lowest remaining"]
                        self.stats["lowest remaining"] = float(left) if low is None else min(low, float(left))
                if not throttled or attempt == self.tries - 1:
                    return response
                response.close()
                wait = min(self.longest_wait, self.first_wait * 2 ** attempt)
                time.sleep(wait * random.uniform(0.8, 1.2))  # jitter: clients throttled together part
            return response  # not reached

    return Throttle()


def connect(config: Settings):
    """The Canvas course (a ``canvasapi.course.Course``), its token checked by reading it.

    Raises:
        CanvasError: the token is refused, the course is not there or not the token's to read, or Canvas
            cannot be reached.
    """
    from canvasapi import Canvas

    with warnings.catch_warnings():  # http:// is let through for this machine's own addresses only (settings)
        warnings.filterwarnings("ignore", message="Canvas may respond unexpectedly when making requests to HTTP")
        canvas = Canvas(config.url, config.token)
    # canvasapi keeps its requests.Session on its Requester, with no public hook: the adapter rides on it.
    session = canvas._Canvas__requester._session
    adapter = _throttle_adapter()
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    course = call(config, lambda: canvas.get_course(config.course_id), f"course {config.course_id}")
    course._throttle = adapter
    return course


def call(config: Settings, fn, what: str):
    """``fn()``, with canvasapi's and requests' errors said in one line (without the token).

    Raises:
        CanvasError: what went wrong; ``whole_run`` unless it is about this one thing (404, 400, 422).
    """
    import requests
    from canvasapi import exceptions as ce

    try:
        return fn()
    except (ce.InvalidAccessToken, ce.Unauthorized) as exc:
        raise CanvasError(f"Canvas refused the token in CANVAS_TOKEN (401: {config.scrub(_words(exc))}) reading "
                          f"{what}: make a new one (docs/lms.md, 'Canvas: the token')") from None
    except ce.Forbidden as exc:
        text = config.scrub(_words(exc))
        if "Rate Limit Exceeded" in text:
            raise CanvasError(f"Canvas still throttled the requests after {TRIES} tries "
                              f"({what}): run the same command again later") from None
        raise CanvasError(f"Canvas forbids this token {what} (403: {text}): the token must be a teacher's "
                          "of the course") from None
    except ce.RateLimitExceeded:
        raise CanvasError(f"Canvas still throttled the requests ({what}): run the same command again "
                          "later") from None
    except ce.ResourceDoesNotExist:
        raise CanvasError(f"Canvas has no {what} (404) at {config.url}", whole_run=False) from None
    except (ce.BadRequest, ce.UnprocessableEntity, ce.Conflict) as exc:
        raise CanvasError(f"Canvas refused {what}: {config.scrub(_words(exc))}", whole_run=False) from None
    except ce.CanvasException as exc:
        raise CanvasError(f"Canvas failed on {what}: {config.scrub(_words(exc))}") from None
    except requests.RequestException as exc:
        raise CanvasError(f"cannot reach Canvas at {config.url} ({what}): {type(exc).__name__}") from None


def _words(exc: BaseException) -> str:
    """An exception of canvasapi's in one short line (it may hold Canvas's JSON or an HTML page)."""
    text = " ".join(str(exc.args[0] if exc.args else exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def find_assignment(config: Settings, course, name: str, mapping: dict[str, str]):
    """The Canvas assignment of the course's assignment ``name``: the one ``--map`` names, else the one
    Canvas calls by that name (case and ``_``/``-``/space aside).

    Raises:
        CanvasError: none matches, or two do (their ids are listed, for ``--map``).
    """
    if name in mapping:
        return call(config, lambda: course.get_assignment(mapping[name]), f"assignment {mapping[name]} (--map)")

    def key(text: str) -> str:
        return "_".join(text.replace("-", " ").replace("_", " ").casefold().split())

    found = call(config, lambda: list(course.get_assignments(per_page=PER_PAGE)), "the course's assignments")
    exact = [a for a in found if a.name == name] or [a for a in found if key(a.name) == key(name)]
    if len(exact) == 1:
        return exact[0]
    if exact:
        listed = ", ".join(f"{a.id} ({a.name!r})" for a in exact)
        raise CanvasError(f"{len(exact)} Canvas assignments are called {name!r}: {listed}; say which with "
                          f"--map {name}=ID", whole_run=False)
    prefix = name.split("_", 1)[0]
    near = [f"{a.id} ({a.name!r})" for a in found if prefix in a.name][:5]
    raise CanvasError(f"no Canvas assignment is called {name!r}"
                      + (f" (perhaps: {', '.join(near)})" if near else f" ({len(found)} in the course)")
                      + f"; name it so in Canvas, or give --map {name}=ID", whole_run=False)


def roster(config: Settings, course) -> dict[str, dict[str, str]]:
    """The course's students by Canvas user id: ``name``, ``login_id``, ``sis_user_id`` (empty where the
    token may not see them)."""
    users = call(config, lambda: list(_lean_list(course, f"courses/{config.course_id}/users",
                                                 enrollment_type=["student"])), "the course's students")
    return {str(u.id): {"name": getattr(u, "name", "") or "", "login_id": getattr(u, "login_id", "") or "",
                        "sis_user_id": getattr(u, "sis_user_id", "") or ""} for u in users}


def submissions(config: Settings, assignment, comments: bool = False) -> dict[str, object]:
    """The assignment's submissions by Canvas user id (Canvas lists one per student, handed in or not)."""
    include = ["user", "submission_comments"] if comments else ["user"]
    endpoint = f"courses/{config.course_id}/assignments/{assignment.id}/submissions"
    subs = call(config, lambda: list(_lean_list(assignment, endpoint, include=include)),
                f"the submissions of {assignment.name!r}")
    return {str(s.user_id): s for s in subs}


def _lean_list(parent, endpoint: str, **params):
    """A paginated list of ``endpoint`` (canvasapi's PaginatedList: its Link headers, its requester) whose
    items keep Canvas's JSON as plain attributes. canvasapi's own objects try every attribute as a date with
    arrow (``CanvasObject.set_attributes``), about a millisecond each: the submissions of 300 students with
    their comments took seconds per assignment that way."""
    from canvasapi.canvas_object import CanvasObject
    from canvasapi.paginated_list import PaginatedList
    from canvasapi.util import combine_kwargs

    class Lean(CanvasObject):
        def set_attributes(self, attributes):
            self.__dict__.update(attributes)

    return PaginatedList(Lean, parent._requester, "GET", endpoint,
                         _kwargs=combine_kwargs(per_page=PER_PAGE, **params))


def _when(text: str | None) -> dt.datetime | None:
    """Canvas's ISO 8601 time (``2026-11-23T18:00:00Z``), aware; None where there is none or it is not one."""
    if not text:
        return None
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


# Times, names, excused ---------------------------------------------------------------------------------


def students_csv(submitted: Path) -> Path:
    from transformer_course.instructors.collect import STUDENTS_CSV

    return submitted.resolve().parent / STUDENTS_CSV


def write_students(submitted: Path, people: dict[str, dict[str, str]], late: dict[str, bool],
                   assignment: str) -> Path:
    """Merge Canvas's names, logins, SIS ids and late flags into ``students.csv``: collect's four columns
    kept first and in order, ``login_id`` and ``sis_user_id`` added after them (and any other column kept);
    a name replaced only where it is empty or came from Canvas (``lms`` is ``canvas``: collect's name from
    a file name is Canvas's too, in lower case).

    Raises:
        ValueError: ``students.csv`` does not start with collect's columns (not a file of this course).
        OSError: it cannot be written.
    """
    from transformer_course.instructors.collect import STUDENTS_HEADER

    path = students_csv(submitted)
    header = [*STUDENTS_HEADER, *CANVAS_COLUMNS]
    rows: dict[str, dict[str, str]] = {}
    if path.is_file():
        existing = read_rows(path)
        with path.open(newline="", encoding="utf-8") as handle:
            first = handle.readline().strip().split(",")
        if first[: len(STUDENTS_HEADER)] != STUDENTS_HEADER:
            raise ValueError(f"{path}: header {first}, expected it to start with {STUDENTS_HEADER}")
        header = [*first, *[c for c in CANVAS_COLUMNS if c not in first]]
        rows = {r["student_id"]: r for r in existing}
    for student, person in people.items():
        row = rows.setdefault(student, {"student_id": student, "name": "", "lms": "canvas", "late": ""})
        if not row.get("name") or row.get("lms") == "canvas":
            row["name"] = person["name"] or row.get("name", "")
        row["lms"] = row.get("lms") or "canvas"
        row["login_id"], row["sis_user_id"] = person["login_id"], person["sis_user_id"]
        flags = set((row.get("late") or "").split()) - {assignment}
        if late.get(student):
            flags.add(assignment)
        row["late"] = " ".join(sorted(flags))
    table = [header, *([rows[s].get(k) or "" for k in header] for s in sorted(rows))]
    atomic_write(path, csv_text(table))
    return path


def excused(submitted: Path) -> set[tuple[str, str]]:
    """The ``(student_id, assignment)`` pairs of ``excused.csv`` (beside ``students.csv``); empty without one.

    Raises:
        ValueError: its header is not :data:`EXCUSED_HEADER`.
    """
    path = submitted.resolve().parent / EXCUSED_CSV
    if not path.is_file():
        return set()
    rows = read_rows(path)
    if rows and list(rows[0]) != EXCUSED_HEADER:
        raise ValueError(f"{path}: header {list(rows[0])}, expected {EXCUSED_HEADER}")
    return {(r["student_id"], r["assignment"]) for r in rows}


def write_excused(submitted: Path, assignment: str, students: set[str]) -> Path:
    """Set the excused students of ``assignment`` in ``excused.csv`` (other assignments' rows kept)."""
    path = submitted.resolve().parent / EXCUSED_CSV
    kept = {(s, a) for s, a in excused(submitted) if a != assignment} | {(s, assignment) for s in students}
    atomic_write(path, csv_text([EXCUSED_HEADER, *sorted(kept)]))
    return path


def pull_times(config: Settings, course, submitted: Path, assignment: str, canvas_assignment) -> list[str]:
    """``canvas times`` for one assignment: times, flags and names from Canvas written beside ``submitted``.
    Returns the lines to print, one per student of ``submitted`` (where the time came from), then a summary.

    Raises:
        CanvasError: Canvas could not be read.
        ValueError, OSError: ``students.csv``, ``times.csv`` or ``excused.csv`` cannot be read or written.
    """
    people = roster(config, course)
    subs = submissions(config, canvas_assignment)
    collected = sorted(p.parent.name for p in submitted.glob(f"*/{assignment}") if p.is_dir())
    found: dict[tuple[str, str], tuple[dt.datetime, str]] = {}
    notes: dict[str, str] = {}
    for student in collected:
        sub = subs.get(student)
        if sub is None:
            notes[student] = "not in the Canvas course"
        elif (when := _when(getattr(sub, "submitted_at", None))) is not None:
            found[student, assignment] = (when, SOURCE)
        else:
            notes[student] = f"no submission time in Canvas ({getattr(sub, 'workflow_state', 'unsubmitted')})"
    times.record(submitted, found)
    known = {s: people.get(s) or _person(subs[s]) for s in collected if s in subs}
    late = {s: bool(getattr(subs[s], "late", False)) for s in known}
    names = write_students(submitted, known, late, assignment)
    excused_now = {s for s, sub in subs.items() if getattr(sub, "excused", False)}
    write_excused(submitted, assignment, excused_now)
    lines = []
    for student in collected:
        name = known.get(student, {}).get("name", "")
        if (student, assignment) in found:
            where = f"{found[student, assignment][0].isoformat()} from {SOURCE}"
        else:
            where = f"{notes[student]}: time from {times.source_of(submitted, student, assignment)}"
        flags = [f for f, on in (("late", late.get(student)), ("excused", student in excused_now)) if on]
        lines.append(f"  {student:<12} {name[:28]:<28} {where}{' [' + ', '.join(flags) + ']' if flags else ''}")
    absent = sorted(set(subs) - set(collected), key=lambda s: (len(s), s))
    handed = [s for s in absent if _when(getattr(subs[s], "submitted_at", None))]
    summary = (f"{assignment} (Canvas {canvas_assignment.id}): {len(found)} of {len(collected)} collected hand-ins "
               f"timed by Canvas; {len(excused_now)} excused; names in {names}")
    if handed:
        summary += f"; handed in on Canvas but not collected: {', '.join(handed[:10])}" + (
            f" and {len(handed) - 10} more" if len(handed) > 10 else "")
    return [summary, *lines]


def _person(sub) -> dict[str, str]:
    """A student's name, login and SIS id from a submission's ``user`` (include[]=user)."""
    user = getattr(sub, "user", None) or {}
    return {k: str(user.get(k) or "") for k in ("name", "login_id", "sis_user_id")}


# Push ---------------------------------------------------------------------------------------------------


class CanvasDestination:
    """One Canvas assignment as a :class:`transformer_course.lms.push.Destination`: its submissions (with
    their comments) read once; a student is known where Canvas lists a submission for them."""

    name = "Canvas"

    def __init__(self, config: Settings, assignment):
        self.config = config
        self.assignment = assignment
        self.subs = submissions(config, assignment, comments=True)

    def current(self, student_id: str) -> push.Current | None:
        sub = self.subs.get(student_id)
        if sub is None:
            return None
        comments = tuple(
            push.Comment(c.get("comment") or "",
                         tuple((a.get("display_name") or a.get("filename") or "", int(a.get("size") or 0))
                               for a in c.get("attachments") or []))
            for c in getattr(sub, "submission_comments", None) or [])
        # The grade as posted (entered_score), before any late policy of Canvas's own takes points off
        # (score): the course's late penalty is in the grade already, and comparing with score would
        # resend it on every push.
        score = getattr(sub, "entered_score", None)
        score = getattr(sub, "score", None) if score is None else score
        return push.Current(None if score is None else float(score), comments, bool(getattr(sub, "excused", False)))

    def send(self, student_id: str, grade: float | None, comment: str | None, attachment: Path | None) -> None:
        """Submissions API, "Grade or comment on a submission": ``posted_grade`` in points and one comment,
        its page uploaded first (Submission Comments API, "Upload a file") and attached by its file id.

        Raises:
            CanvasError: Canvas refused it (``whole_run`` where no student would fare better).
        """
        from canvasapi.util import combine_kwargs

        sub = self.subs[student_id]
        kwargs: dict = {}
        if grade is not None:
            kwargs["submission"] = {"posted_grade": f"{grade:g}"}
        if comment is not None:
            kwargs["comment"] = {"text_comment": comment}
            if attachment is not None:
                kwargs["comment"]["file_ids"] = [self._upload(sub, student_id, attachment)]
        if kwargs:  # Submission.edit's request, without turning the answer into an object (see _lean_list)
            call(self.config, lambda: sub._requester.request("PUT", self._endpoint(student_id),
                                                             _kwargs=combine_kwargs(**kwargs)),
                 f"the submission of student {student_id}")

    def _endpoint(self, student_id: str) -> str:
        return f"courses/{self.config.course_id}/assignments/{self.assignment.id}/submissions/{student_id}"

    def _upload(self, sub, student_id: str, page: Path) -> int:
        from canvasapi.upload import Uploader

        where = f"{self._endpoint(student_id)}/comments/files"
        ok, answer = call(self.config, lambda: Uploader(sub._requester, where, str(page)).start(),
                          f"the upload of {page.name} for student {student_id}")
        if not ok or "id" not in answer:
            raise CanvasError(f"Canvas did not confirm the upload of {page.name} for student {student_id}",
                              whole_run=False)
        return int(answer["id"])


def push_assignment(config: Settings, course, out: Path, assignment: str, canvas_assignment, dry_run: bool,
                    with_page: bool, include_awaiting: bool, say=print, parallel: int = PARALLEL
                    ) -> tuple[push.Plan, list]:
    """``canvas push`` for one assignment: the plan printed, then (unless ``dry_run``) sent.

    Raises:
        CanvasError, FileNotFoundError, ValueError: as :func:`call` and :func:`push.outgoing`.
    """
    from transformer_course.layout import Repo

    notebook = Repo().assignment(assignment).notebook
    page_of = (lambda s: out / "feedback" / s / assignment / f"{notebook}.html") if with_page else None
    items, held = push.outgoing(out, assignment, page_of, include_awaiting)
    destination = CanvasDestination(config, canvas_assignment)
    plan = push.plan(assignment, items, held, destination)
    possible = getattr(canvas_assignment, "points_possible", None)
    if items and possible is not None and abs(float(possible) - items[0].max_points) > 1e-9:
        say(f"note: Canvas's {canvas_assignment.name!r} is worth {float(possible):g} points, the notebook "
            f"{items[0].max_points:g}: grades are sent in the notebook's points")
    say(push.table(plan, destination.name))
    if dry_run:
        say(f"dry run: nothing sent ({len(plan.to_send)} would be)")
        return plan, []
    failed = push.send(plan, destination, workers=parallel)
    sent = len(plan.to_send) - len(failed)
    say(f"sent to Canvas: {sent} (grades {sum(c.grade for c in plan.to_send)}, comments "
        f"{sum(c.comment for c in plan.to_send)}); not sent: {len(failed)} refused, {len(plan.unknown)} unknown "
        f"to Canvas, {len(plan.held)} held back")
    for change, words in failed:
        say(f"  REFUSED {change.outgoing.student_id}: {words}")
    return plan, failed


# The command --------------------------------------------------------------------------------------------


def _mapping(pairs: list[str], known: list[str]) -> dict[str, str]:
    """``--map NAME=CANVAS_ID`` pairs, the name resolved as ``--assignment`` is.

    Raises:
        ValueError: a pair is not ``NAME=NUMBER``.
    """
    from transformer_course.instructors.collect import resolve_assignment

    mapping = {}
    for pair in pairs or []:
        name, _, number = pair.partition("=")
        if not number.strip().isdigit():
            raise ValueError(f"--map {pair!r}: expected NAME=CANVAS_ID, e.g. 01_self_attention=1234")
        mapping[resolve_assignment(name.strip(), known)] = number.strip()
    return mapping


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="canvas_command", required=True)
    for name, helps, target in (
            ("times", "submission times, late and excused flags, names, logins and SIS ids from Canvas into "
                      "SUBMITTED's timestamp.txt, times.csv, students.csv and excused.csv", "submitted"),
            ("push", "grades and comments (with --comment-with-page, the feedback page) from a graded OUT to "
                     "Canvas, only what differs from what Canvas holds", "out")):
        p = sub.add_parser(name, help=helps, description=helps + ". Canvas from CANVAS_URL, CANVAS_TOKEN, "
                                                                "CANVAS_COURSE_ID (docs/lms.md).")
        p.add_argument(target, metavar=target.upper(),
                       help="the folder `grade` reads (SUBMITTED/<student_id>/<assignment>/)" if name == "times"
                       else "the --out folder of `transformer-course grade`")
        p.add_argument("--assignment", action="append", required=True, metavar="NAME",
                       help="the course's assignment (01_self_attention, or 01); repeat it for several")
        p.add_argument("--map", action="append", default=[], metavar="NAME=CANVAS_ID",
                       help="the Canvas assignment of NAME by its id (the number in its address), where its name "
                            "in Canvas is not the course's")
        if name == "push":
            p.add_argument("--dry-run", action="store_true", help="print what would change; send nothing")
            p.add_argument("--comment-with-page", action="store_true",
                           help="attach the student's feedback page (OUT/feedback/...) to the comment")
            p.add_argument("--parallel", type=int, default=PARALLEL, metavar="N",
                           help=f"students sent to at once (default {PARALLEL}; 1: one request at a time)")
            p.add_argument("--include-awaiting", action="store_true",
                           help="also send notebooks whose answers in words are not graded yet (their autograded "
                                "points alone)")


def run(args: argparse.Namespace) -> int:
    """``transformer-course canvas times|push``: 0 when done, 1 with one line when Canvas could not be used
    or refused a student's grade."""
    from transformer_course.instructors.collect import resolve_assignment
    from transformer_course.layout import Repo

    known = [a.name for a in Repo().assignments()]
    assignments = [resolve_assignment(a, known) for a in args.assignment]
    mapping = _mapping(args.map, known)
    config = None
    try:
        config = settings()
        course = connect(config)
        code = 0
        for assignment in assignments:
            target = find_assignment(config, course, assignment, mapping)
            if args.canvas_command == "times":
                submitted = Path(args.submitted).expanduser().resolve()
                if not submitted.is_dir():
                    raise FileNotFoundError(f"{submitted}: no such folder of hand-ins")
                print("\n".join(pull_times(config, course, submitted, assignment, target)))
            else:
                out = Path(args.out).expanduser().resolve()
                _, failed = push_assignment(config, course, out, assignment, target, args.dry_run,
                                            args.comment_with_page, args.include_awaiting,
                                            parallel=args.parallel)
                code = code or (1 if failed else 0)
        stats = course._throttle.stats
        if stats["throttled"]:
            print(f"Canvas throttled {stats['throttled']} of {stats['requests']} requests; each was sent again "
                  "after a wait")
        return code
    except CanvasError as exc:
        text = config.scrub(str(exc)) if config else str(exc)
        print(f"transformer-course canvas {args.canvas_command}: error: {text}", file=sys.stderr)
        return 1
