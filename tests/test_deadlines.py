"""Deadlines and late penalties (transformer-course grade --due / --deadlines): parsing, refusals
before any grading, the policies, and the submission time (nbgrader's timestamp.txt, else the file's).
The sample class's late student, through the real path, is in test_grading (sample_class.toml)."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from transformer_course.grading.notebook.grade import ExerciseResult, SubmissionResult
from transformer_course.instructors.deadlines import (
    DeadlineError,
    LatePolicy,
    apply,
    late_text,
    load,
    parse_due,
    submitted_at,
)

UTC = dt.UTC
AFTER = dt.datetime(2027, 1, 1, tzinfo=UTC)  # the run's clock in tests of apply: after every hand-in they write


def test_a_due_date_needs_its_time_zone_and_says_how_to_write_it():
    assert parse_due("2026-12-01T23:59:00+01:00", "--due") == dt.datetime(2026, 12, 1, 22, 59, tzinfo=UTC)
    assert parse_due("2026-12-01T23:59:00Z", "--due") == dt.datetime(2026, 12, 1, 23, 59, tzinfo=UTC)
    with pytest.raises(DeadlineError, match=r"no time zone; add one, e.g. 2026-12-01T23:59\+01:00"):
        parse_due("2026-12-01T23:59", "--due")
    with pytest.raises(DeadlineError, match="not an ISO 8601 date and time"):
        parse_due("next friday", "--due")
    with pytest.raises(DeadlineError, match="expected a date and time such as"):
        parse_due(20261201, "due")
    # A TOML date-time, unquoted: taken as it is, if it has its time zone.
    aware = dt.datetime(2026, 12, 1, 23, 59, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert parse_due(aware, "due") == dt.datetime(2026, 12, 1, 22, 59, tzinfo=UTC)
    with pytest.raises(DeadlineError, match="has no time zone"):
        parse_due(dt.datetime(2026, 12, 1, 23, 59), "due")


@pytest.mark.parametrize(("policy", "late_hours", "off"), [
    (LatePolicy("none"), 100, 0.0),
    (LatePolicy("fixed", points=2), 0.5, 2.0),
    (LatePolicy("fixed", points=20), 0.5, 7.0),  # never more than the score
    (LatePolicy("per-day", percent_per_day=10), 1, 1.0),  # a started day counts as a day: 10% of 10
    (LatePolicy("per-day", percent_per_day=10), 24.01, 2.0),
    (LatePolicy("per-day", percent_per_day=10, cap=25), 24 * 9, 2.5),  # capped
    (LatePolicy("per-day", percent_per_day=10, grace_minutes=10), 0.1, 0.0),  # 6 min: within the grace
    (LatePolicy("per-day", percent_per_day=10, grace_minutes=10), 0.2, 1.0),
])
def test_penalties(policy, late_hours, off):
    assert policy.penalty(7.0, 10.0, dt.timedelta(hours=late_hours)) == pytest.approx(off)
    assert policy.penalty(7.0, 10.0, dt.timedelta(0)) == 0.0


@pytest.mark.parametrize(("options", "message"), [
    ({"policy": "zero"}, "expected one of none, fixed, per-day"),
    ({"policy": "fixed"}, r"needs points off a late notebook: --late-points \(points in \[late\]\)"),
    ({"policy": "per-day"}, r"needs a percent per day: --late-percent"),
    ({"policy": "per-day", "percent_per_day": -5}, r"--late-percent \(percent_per_day\) must be a number >= 0"),
    ({"points": 5}, r"--late-points \(points\) given, but the late policy is none"),  # an amount, no policy
    ({"percent_per_day": 10, "cap": 30}, "--late-percent .* --late-cap .* given, but the late policy is none"),
    ({"policy": "per-day", "percent_per_day": 5, "cap": 150}, "0-100"),
])
def test_a_malformed_policy_is_refused(options, message):
    with pytest.raises(DeadlineError, match=message):
        load(None, "2026-12-01T23:59:00Z", **options)


def test_an_amount_without_a_policy_or_a_due_date_is_refused():
    with pytest.raises(DeadlineError, match="given, but the late policy is none"):
        load(None, None, percent_per_day=10)


def test_a_deadlines_file_per_assignment_and_the_command_line_wins(tmp_path):
    path = tmp_path / "deadlines.toml"
    path.write_text('due = 2026-12-01T23:59:00+01:00\n[assignments]\n"07_training" = "2026-12-15T12:00:00Z"\n'
                    '[late]\npolicy = "per-day"\npercent_per_day = 10\n')
    found = load(path, known=["01_self_attention", "07_training"])
    assert found.due("01_self_attention") == dt.datetime(2026, 12, 1, 22, 59, tzinfo=UTC)
    assert found.due("07_training") == dt.datetime(2026, 12, 15, 12, tzinfo=UTC)
    assert found.policy == LatePolicy("per-day", percent_per_day=10)
    found = load(path, due="2026-12-02T00:00:00Z", known=["01_self_attention", "07_training"], policy="fixed",
                 points=1.5)
    assert found.due("01_self_attention") == dt.datetime(2026, 12, 2, tzinfo=UTC)
    assert found.due("07_training") == dt.datetime(2026, 12, 15, 12, tzinfo=UTC)  # named in the file: its own
    assert found.policy.kind == "fixed" and found.policy.points == 1.5
    assert load(None) is None  # no deadline: nothing is reported


@pytest.mark.parametrize(("text", "message"), [
    ('due = "2026-12-01"\n', "no time zone"),
    ('due = "2026-12-01T23:59:00Z"\n[assignments]\n"01_self_atention" = "2026-12-01T23:59:00Z"\n',
     "no assignment named 01_self_atention"),
    ('due = "2026-12-01T23:59:00Z"\ndeadline = 3\n', "unknown key"),
    ('due = "2026-12-01T23:59:00Z"\n[late]\npolicy = "per-day"\npercent = 10\n',
     r"unknown key\(s\) in \[late\]: percent; expected policy, points, percent_per_day"),
    ('[late]\npolicy = "fixed"\npoints = 1\n', "needs a due date"),
    ('due = 2026-12-01T23:59:00Z\n[late\n', "not valid TOML"),
])
def test_a_malformed_deadlines_file_is_refused(tmp_path, text, message):
    path = tmp_path / "deadlines.toml"
    path.write_text(text)
    with pytest.raises(DeadlineError, match=message):
        load(path, known=["01_self_attention"])


def test_the_submission_time_is_nbgraders_timestamp_else_the_files_said(tmp_path):
    notebook = tmp_path / "01_self_attention.ipynb"
    notebook.write_text("{}")
    os.utime(notebook, (1_700_000_000, 1_700_000_000))
    (tmp_path / "timestamp.txt").write_text("2026-12-02 10:30:00.123456 UTC\n")  # as `nbgrader submit` writes it
    assert submitted_at(tmp_path, notebook) == (dt.datetime(2026, 12, 2, 10, 30, 0, 123456, tzinfo=UTC), "", "")
    (tmp_path / "timestamp.txt").write_text("2026-12-02 11:30:00+01:00\n")
    assert submitted_at(tmp_path, notebook)[0] == dt.datetime(2026, 12, 2, 10, 30, tzinfo=UTC)
    (tmp_path / "timestamp.txt").write_text("not a time \x00\n")
    when, note, flag = submitted_at(tmp_path, notebook)
    assert when == dt.datetime.fromtimestamp(1_700_000_000, UTC)
    assert flag == "timestamp.txt holds 'not a time \\x00', not a time (not ISO 8601, nor nbgrader's 'date time zone')"
    assert note == f"{flag}; the notebook file's modification time was used instead"
    (tmp_path / "timestamp.txt").unlink()
    assert submitted_at(tmp_path, notebook) == (dt.datetime.fromtimestamp(1_700_000_000, UTC),
                                                "no timestamp.txt: the notebook file's modification time was used",
                                                "")  # no timestamp.txt (an LMS's download): noted, not flagged


def test_apply_sets_lateness_on_graded_results_only(tmp_path):
    deadlines = load(None, "2026-12-01T00:00:00Z", policy="per-day", percent_per_day=10)
    folders = {}
    for student, stamp in (("late", "2026-12-02 12:00:00.000000 UTC"), ("early", "2026-11-30 12:00:00.000000 UTC")):
        folder = tmp_path / student / "01_self_attention"
        folder.mkdir(parents=True)
        (folder / "timestamp.txt").write_text(stamp)
        folders[(student, "01_self_attention")] = (folder, None)
    results = [SubmissionResult(s, "01_self_attention", status, exercises=[ExerciseResult("softmax", 9.0, 10.0)])
               for s, status in (("late", "graded"), ("early", "graded"), ("gone", "missing"))]
    apply(results, folders, deadlines, now=AFTER)
    late, early, gone = results
    assert (late.submitted_at, late.late_by, late.late_penalty, late.final_score) == (
        "2026-12-02T12:00:00+00:00", 36.0, 2.0, 7.0)
    assert (early.late_by, early.late_penalty, early.final_score) == (0.0, 0.0, 9.0)
    assert (gone.submitted_at, gone.late_penalty) == ("", 0.0)
    assert late_text(dt.timedelta(hours=36, seconds=1)) == "1 d 12 h 1 min"


def test_a_malformed_due_date_is_refused_before_any_grading(tmp_path, capsys):
    from transformer_course.cli import main

    out = tmp_path / "out"
    assert main(["grade", str(tmp_path), "--out", str(out), "--due", "2026-12-01 23:59"]) == 2
    assert "--due: '2026-12-01 23:59' has no time zone" in capsys.readouterr().err
    assert not out.exists()


def test_every_date_is_given_and_kept_in_the_due_dates_time_zone(tmp_path):
    """A due date written in +01:00: the run's Late lines, grades.csv, results.json and the class report
    (which reads results.json alone) give every date in +01:00, the feedback page's format; lateness is
    worked out on instants, as before. An assignment without a due date keeps no time, as before."""
    import csv
    import json

    from transformer_course.grading.notebook.grade import score_table
    from transformer_course.grading.run.publish import write_csvs
    from transformer_course.instructors.deadlines import instant, show
    from transformer_course.instructors.report import build_report

    path = tmp_path / "deadlines.toml"
    path.write_text('[assignments]\n"01_self_attention" = "2026-11-27T12:00:00+01:00"\n'
                    '[late]\npolicy = "fixed"\npoints = 1\n')
    deadlines = load(path)
    folders = {}
    for student, assignment, stamp in (("late", "01_self_attention", "2026-11-28 09:00:00.000000 UTC"),
                                       ("early", "01_self_attention", "2026-11-27T10:00:00+00:00"),
                                       ("late", "02_scaled_dot_product", "2026-11-28 09:00:00.000000 UTC"),
                                       ("early", "02_scaled_dot_product", "2026-11-28 09:00:00.000000 UTC")):
        folder = tmp_path / "submitted" / student / assignment
        folder.mkdir(parents=True)
        (folder / "timestamp.txt").write_text(stamp)
        folders[(student, assignment)] = (folder, None)
    results = [SubmissionResult(s, a, "graded", exercises=[ExerciseResult("softmax", 9.0, 10.0)])
               for s, a in folders]
    apply(results, folders, deadlines, now=AFTER)
    late, early, undated, _ = results
    # stored: the same instants, in the due date's offset
    assert (late.due, late.submitted_at, early.submitted_at) == (
        "2026-11-27T12:00+01:00", "2026-11-28T10:00:00+01:00", "2026-11-27T11:00:00+01:00")
    assert instant(late.submitted_at) == dt.datetime(2026, 11, 28, 9, tzinfo=UTC)
    assert instant(late.due) == dt.datetime(2026, 11, 27, 11, tzinfo=UTC)
    assert (late.late_by, late.late_penalty, early.late_by, early.late_penalty) == (22.0, 1.0, 0.0, 0.0)
    assert (undated.due, undated.submitted_at, undated.late_by) == ("", "", 0.0)  # no due date: as before
    assert show("2026-11-27T11:00+00:00") == "2026-11-27 11:00 +00:00"  # a UTC record stays UTC

    # the `grade` run's Late lines: both dates, as the feedback page gives them
    table = score_table(results)
    assert ("  late 01_self_attention: handed in 2026-11-28 10:00 +01:00, due 2026-11-27 12:00 +01:00: "
            "22 h late; 1 point off") in table.splitlines(), table
    assert "+00:00" not in table

    out = tmp_path / "out"
    out.mkdir()
    write_csvs(results, out)
    with open(out / "grades.csv") as f:
        rows = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}
    assert rows[("late", "01_self_attention")]["submitted_at"] == "2026-11-28T10:00:00+01:00"
    assert rows[("early", "01_self_attention")]["submitted_at"] == "2026-11-27T11:00:00+01:00"
    assert rows[("late", "02_scaled_dot_product")]["submitted_at"] == ""
    records = {(r["student_id"], r["assignment"]): r for r in json.loads((out / "results.json").read_text())}
    assert records[("late", "01_self_attention")]["due"] == "2026-11-27T12:00+01:00"
    assert records[("late", "01_self_attention")]["submitted_at"] == "2026-11-28T10:00:00+01:00"

    # the class report, from results.json alone (no deadlines file): its late table in +01:00
    page = build_report(out).read_text()
    assert ("<td>late</td><td>01_self_attention</td><td>2026-11-27 12:00 +01:00</td>"
            "<td>2026-11-28 10:00 +01:00</td><td>22</td><td>1</td>") in page, page
    assert "+00:00" not in page


# --- Hand-in times that cannot be (issue 58, item 3): flagged, the file's time used, never a crash ---------

import html  # noqa: E402
import zoneinfo  # noqa: E402

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from transformer_course.instructors.deadlines import HandIn, Window, show  # noqa: E402

A = "01_self_attention"
COURSE = ('start = "2026-09-01T09:00:00+02:00"\ndue = "2026-11-01T23:59:00-05:00"\n'
          '[released]\n"02_scaled_dot_product" = "2026-10-01T09:00:00+02:00"\n'
          '[late]\npolicy = "per-day"\npercent_per_day = 10\n')
FILE_TIME = dt.datetime(2026, 10, 15, 12, tzinfo=UTC)  # the notebook file's time in these tests: plausible
START = dt.datetime(2026, 9, 1, 7, tzinfo=UTC)


def _course(tmp_path) -> object:
    path = tmp_path / "deadlines.toml"
    path.write_text(COURSE)
    return load(path, known=[A, "02_scaled_dot_product"])


def _handed_in(tmp_path, stamp: bytes | None, assignment: str = A, student: str = "ada"):
    """A submission folder with ``stamp`` as its timestamp.txt (None: none) and a notebook of FILE_TIME."""
    folder = tmp_path / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "timestamp.txt").unlink(missing_ok=True)
    if stamp is not None:
        (folder / "timestamp.txt").write_bytes(stamp)
    notebook = folder / f"{assignment}.ipynb"
    notebook.write_text("{}")
    os.utime(notebook, (FILE_TIME.timestamp(), FILE_TIME.timestamp()))
    return folder, notebook


def _graded(student: str = "ada", assignment: str = A) -> SubmissionResult:
    return SubmissionResult(student, assignment, "graded", exercises=[ExerciseResult("softmax", 9.0, 10.0)])


def _everything_written(tmp_path, results, deadlines) -> dict:
    """The run's table, grades.csv/lms.csv/exercises.csv/results.json and each feedback page's banner,
    written as `grade` writes them (what ended the run before: OverflowError); grades.csv's rows."""
    import csv

    from transformer_course.grading.notebook.grade import score_table
    from transformer_course.grading.run.publish import late_banner, write_csvs

    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    write_csvs(results, out)
    for r in results:
        page = out / f"{r.student_id}-{r.assignment}.html"
        page.write_text("<html><body><p>the page</p></body></html>")
        late_banner(page, r, deadlines)
    assert score_table(results)
    with open(out / "grades.csv") as f:
        return {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}


@pytest.mark.parametrize(("stamp", "due", "said"), [
    ("9999-12-31 23:59:59.999999 UTC", "2026-11-01T23:59:00+01:00", "timestamp.txt says 9999-12-31 23:59 +00:00, "
     "after this run"),  # +01:00 has no date for it: shown in its own offset
    ("0001-01-01 00:00:00.000000 UTC", "2026-11-01T23:59:00-05:00", "timestamp.txt says 0001-01-01 00:00 +00:00, "
     "before the course's start"),  # west of UTC: no date for it either
    ("0001-01-01T00:30:00+01:00", "2026-11-01T23:59:00-05:00", "timestamp.txt holds '0001-01-01T00:30:00+01:00', "
     "out of the calendar's range in UTC"),
])
def test_a_date_at_the_calendars_edge_is_flagged_and_every_table_is_written(tmp_path, stamp, due, said):
    """The issue's case: every notebook graded, then `OverflowError: date value out of range` before
    grades.csv at every run. Now the time is flagged and the file's time is used."""
    deadlines = load(None, due, policy="per-day", percent_per_day=10)
    where = {("ada", A): _handed_in(tmp_path, stamp.encode()), ("ben", A): _handed_in(
        tmp_path, b"2026-10-20 10:00:00.000000 UTC", student="ben")}
    results = [_graded("ada"), _graded("ben")]
    apply(results, where, deadlines, now=AFTER)
    rows = _everything_written(tmp_path, results, deadlines)
    ada, ben = rows[("ada", A)], rows[("ben", A)]
    assert ada["reason"].startswith(f"hand-in time: {said}"), ada["reason"]
    assert ada["reason"].endswith("; the notebook file's modification time was used instead")
    assert ada["submitted_at"] == deadlines.local(A, FILE_TIME).isoformat(timespec="seconds")
    assert (ben["reason"], ben["late_by"], ben["final_score"]) == ("", "0", "9")  # the classmate: as before
    page = (tmp_path / "out" / f"ada-{A}.html").read_text()
    assert html.escape(said) in page


def test_a_hand_in_of_1970_is_flagged_and_late_by_the_files_time(tmp_path):
    """The issue's case: a late notebook whose timestamp.txt says 1970 scored as on time."""
    deadlines = load(None, "2026-10-10T23:59:00+01:00", policy="per-day", percent_per_day=10)
    where = {("ada", A): _handed_in(tmp_path, b"1970-01-01 00:00:00.000000 UTC")}
    results = [_graded()]
    apply(results, where, deadlines, now=AFTER)
    ada = _everything_written(tmp_path, results, deadlines)[("ada", A)]
    assert ada["reason"].startswith("hand-in time: timestamp.txt says 1970-01-01 01:00 +01:00, before the course's "
                                    "start, taken as a year before its first due date (2025-10-10 23:59 +01:00")
    # the file's time (2026-10-15 12:00 UTC) is 4 d 13 h late: 5 started days, 50% of 10 points
    assert (ada["late_by"], ada["late_penalty"], ada["final_score"]) == ("109.02", "5", "4")
    from transformer_course.grading.notebook.grade import score_table

    table = score_table(results).splitlines()  # the run's table: the late line, and the flag under its heading
    assert "  ada 01_self_attention: handed in 2026-10-15 13:00 +01:00, due 2026-10-10 23:59 +01:00: 109.02 h late; " \
        "5 points off" in table, table
    notes = table[table.index("Submission times not from nbgrader's timestamp.txt:") + 1:]
    assert notes == [f"  ada {A}: {results[0].late_note}"] and "says 1970-01-01 01:00 +01:00" in notes[0]


def test_a_time_before_the_release_or_the_start_or_after_the_run_is_flagged(tmp_path):
    deadlines = _course(tmp_path)
    cases = {  # student: (assignment, timestamp.txt, what the flag says, or "" where it is taken)
        "released": ("02_scaled_dot_product", "2026-09-20T12:00:00+00:00", "before 02_scaled_dot_product's release "
                     "(2026-10-01 02:00 -05:00)"),
        "started": (A, "2026-09-20T12:00:00+00:00", ""),  # 01 has no release date: the course's start holds
        "early": (A, "2026-08-31T12:00:00+00:00", "before the course's start (2026-09-01 02:00 -05:00)"),
        "future": (A, "2027-01-01T00:11:00+00:00", "after this run (2026-12-31 19:00 -05:00)"),
        "skewed": (A, "2027-01-01T00:09:00+00:00", ""),  # a clock ahead by less than SKEW
    }
    where = {(s, a): _handed_in(tmp_path, stamp.encode(), a, s) for s, (a, stamp, _) in cases.items()}
    results = [_graded(s, a) for s, (a, _, _) in cases.items()]
    apply(results, where, deadlines, now=AFTER)
    for r in results:
        said = cases[r.student_id][2]
        if said:
            assert said in r.reason and said in r.late_note, (r.student_id, r.reason)
            assert r.submitted_at == deadlines.local(r.assignment, FILE_TIME).isoformat(timespec="seconds")
        else:
            assert (r.reason, r.late_note) == ("", ""), r.student_id


def test_where_the_files_time_is_implausible_too_the_notebook_is_not_marked_late_and_says_so(tmp_path):
    """The fair rule: no evidence of when, no penalty; the row and the page say to check it by hand."""
    deadlines = _course(tmp_path)
    folder, notebook = _handed_in(tmp_path, b"1970-01-01 00:00:00.000000 UTC")
    os.utime(notebook, (0, 0))
    results = [_graded()]
    apply(results, {("ada", A): (folder, notebook)}, deadlines, now=AFTER)
    ada = _everything_written(tmp_path, results, deadlines)[("ada", A)]
    assert (ada["submitted_at"], ada["late_by"], ada["late_penalty"], ada["final_score"]) == ("", "", "0", "9")
    assert ada["reason"] == (
        "hand-in time: timestamp.txt says 1969-12-31 19:00 -05:00, before the course's start (2026-09-01 02:00 "
        "-05:00); the notebook file's modification time (1969-12-31 19:00 -05:00) is before the course's start "
        "(2026-09-01 02:00 -05:00) too: no plausible time, not marked late (check it by hand)")
    page = (tmp_path / "out" / f"ada-{A}.html").read_text()
    assert "When this notebook was handed in is not known." in page and "check it by hand" in page


@pytest.mark.parametrize(("stamp", "taken", "flag"), [
    ("2026-10-20 10:00:00.000000 UTC".encode("utf-16"), dt.datetime(2026, 10, 20, 10, tzinfo=UTC), ""),
    ("2026-10-20 10:00:00.000000 UTC".encode("utf-16-le"), dt.datetime(2026, 10, 20, 10, tzinfo=UTC), ""),
    (b"\xef\xbb\xbf2026-10-20T10:00:00Z\r\n", dt.datetime(2026, 10, 20, 10, tzinfo=UTC), ""),
    (b"2026-10-20 10:00:00.000000 America/New_York", dt.datetime(2026, 10, 20, 14, tzinfo=UTC), ""),
    (b"2026-10-20 10:00:00.000000 +0530", dt.datetime(2026, 10, 20, 4, 30, tzinfo=UTC), ""),
    (b"2026-10-20 10:00:00.000000 PST", None, "no time zone named 'PST' in the tz database"),
    (b"2026-10-20 10:00:00.000000 /etc/localtime", None, "the zone is not a time zone name"),  # never a path
    (b"2026-10-20 10:00:00.000000 ../../etc/passwd", None, "the zone is not a time zone name"),
    (b"20", None, "not ISO 8601"),  # dateutil would make it a day of this month
    (b"\x1b[2J2026-10-20", None, "'\\x1b[2J2026-10-20'"),  # a terminal's control character: escaped
    (b"2026-10-20T10:00:00Z" + b" " * 5000, None, "timestamp.txt is over 4 KiB (a timestamp is one line): not read"),
    (b"", None, "timestamp.txt is empty"),
])
def test_what_timestamp_txt_may_hold(tmp_path, stamp, taken, flag):
    folder, notebook = _handed_in(tmp_path, stamp)
    when, note, said = submitted_at(folder, notebook)
    assert when == (taken or FILE_TIME)
    assert flag in said and bool(said) == bool(flag), said
    assert note == ("" if taken else f"{said}; the notebook file's modification time was used instead")


@pytest.mark.parametrize(("text", "message"), [
    ('start = "2026-09-01"\ndue = "2026-11-01T23:59:00Z"\n', "start: '2026-09-01' has no time zone"),
    ('start = "2026-12-01T00:00:00Z"\ndue = "2026-11-01T23:59:00Z"\n',
     r"start \(2026-12-01 00:00 \+00:00\) is after the due date of the default due date \(due\) "
     r"\(2026-11-01 23:59 \+00:00\); expected a release before its due date"),
    ('due = "2026-11-01T23:59:00Z"\n[released]\n"01_self_attention" = "2026-11-02T01:00:00+01:00"\n',
     r"released.01_self_attention \(2026-11-02 00:00 \+00:00\) is after the due date of 01_self_attention"),
    ('due = "2026-11-01T23:59:00Z"\n[released]\n"01_self_atention" = "2026-10-02T00:00:00Z"\n',
     r"\[released\] names no assignment of the course: 01_self_atention"),
    ('due = "2026-11-01T23:59:00Z"\nstart = 2026-10-01T00:00:00Z\n[released]\n'
     '"01_self_attention" = "2026-09-02T00:00:00Z"\n', "is before the course's start"),
    ('due = "2026-11-01T23:59:00Z"\nreleased = 3\n', r"\[released\] must be a table"),
    ('due = "0001-01-01T00:00:00+01:00"\n', "out of the calendar's range in UTC"),
])
def test_a_malformed_start_or_release_is_refused(tmp_path, text, message):
    path = tmp_path / "deadlines.toml"
    path.write_text(text)
    with pytest.raises(DeadlineError, match=message):
        load(path, known=["01_self_attention"])


def test_showing_a_date_never_raises():
    plus, minus = dt.timezone(dt.timedelta(hours=1)), dt.timezone(dt.timedelta(hours=-5))
    assert show(dt.datetime.max.replace(tzinfo=UTC), plus) == "9999-12-31 23:59 +00:00"
    assert show(dt.datetime.min.replace(tzinfo=UTC), minus) == "0001-01-01 00:00 +00:00"
    assert show("not a date\x1b") == "'not a date\\x1b'"
    deadlines = load(None, "2026-11-01T23:59:00-05:00")
    edge = dt.datetime.min.replace(tzinfo=UTC)
    assert deadlines.local(A, edge) == edge  # the same instant, in UTC


# Generated: any bytes, any date, any zone. The run's clock AFTER; the course's window (START, AFTER + SKEW).
def _expected(stamp_instant: dt.datetime | None) -> dt.datetime | None:
    """The time taken for a timestamp.txt of this instant (None: out of range): it, or the file's."""
    from transformer_course.instructors.deadlines import SKEW

    plausible = stamp_instant is not None and START <= stamp_instant <= AFTER + SKEW
    return stamp_instant if plausible else FILE_TIME


def _check(tmp_path, stamp: bytes, taken: dt.datetime | None = None):
    """submitted_at and apply on ``stamp``: never raise; a flag wherever the file's time was used; every
    table written; the lateness is the old formula's on the time taken."""
    deadlines = _course(tmp_path)
    folder, notebook = _handed_in(tmp_path, stamp)
    window = Window(*deadlines.release(A), AFTER + dt.timedelta(minutes=10), deadlines.zone(A))
    found = submitted_at(folder, notebook, window)
    assert isinstance(found, HandIn) and found.when is not None
    assert window.first <= found.when <= window.last
    assert (found.flag == "") == (found.note == ""), found  # a time not from timestamp.txt is always said
    if taken is not None:
        assert found.when == taken, found
        if taken != FILE_TIME:  # timestamp.txt's own time: taken without a word
            assert found.flag == "", found
    result = _graded()
    apply([result], {("ada", A): (folder, notebook)}, deadlines, now=AFTER)
    assert ("hand-in time: " in result.reason) == bool(found.flag)
    late_by = max(found.when - deadlines.due(A), dt.timedelta(0))  # the formula of before
    assert result.late_by == round(late_by / dt.timedelta(hours=1), 2)
    assert result.late_penalty == deadlines.policy.penalty(9.0, 10.0, late_by)
    _everything_written(tmp_path, [result], deadlines)
    return found


@given(stamp=st.one_of(st.binary(max_size=5000),
                       st.text(max_size=60).map(lambda t: t.encode("utf-8", errors="surrogatepass")),
                       st.builds(lambda t, c: t.encode(c, errors="replace"),
                                 st.sampled_from(["2026-10-20 10:00:00.000000 UTC", "2026-10-20T10:00:00+02:00",
                                                  "1970-01-01 00:00:00 UTC", "9999-12-31T23:59:59"]),
                                 st.sampled_from(["utf-8", "utf-16", "utf-16-be", "utf-32", "latin-1", "cp1252"]))))
def test_any_bytes_in_timestamp_txt_never_stop_the_run(tmp_path, stamp):
    _check(tmp_path, stamp)


ZONES = st.one_of(st.timezones(), st.integers(-1439, 1439).map(lambda m: dt.timezone(dt.timedelta(minutes=m))))


@given(when=st.datetimes(timezones=ZONES), nbgrader=st.booleans())
def test_any_date_in_any_zone_is_taken_only_where_plausible(tmp_path, when, nbgrader):
    """ISO 8601 with the date's offset, or nbgrader's "date time zone" with a tz database name."""
    key = getattr(when.tzinfo, "key", None)
    text = when.isoformat()
    if nbgrader and key:
        text = f"{when.replace(tzinfo=None).isoformat(sep=' ', timespec='microseconds')} {key}"
    try:
        instant = when.replace(fold=0).astimezone(UTC)
    except OverflowError:
        instant = None
    if key and not nbgrader:  # ISO keeps the offset of that instant: the same instant (fold included)
        try:
            instant = when.astimezone(UTC)
        except OverflowError:
            instant = None
    found = _check(tmp_path, text.encode(), _expected(instant))
    if instant is None:
        assert "out of the calendar's range" in found.flag, found
    elif _expected(instant) == FILE_TIME:
        assert found.flag and ("before the course's start" in found.flag or "after this run" in found.flag), found


@given(when=st.datetimes(min_value=START.replace(tzinfo=None), max_value=AFTER.replace(tzinfo=None),
                         timezones=st.just(UTC)),
       zone=st.sampled_from(["UTC", "Europe/Berlin", "America/Los_Angeles", "Asia/Kolkata", "Pacific/Kiritimati"]))
def test_an_honest_time_gives_the_lateness_it_gave_before(tmp_path, when, zone):
    """A plausible time, as nbgrader writes it in any zone: taken, no flag, lateness by the old formula."""
    local = when.astimezone(zoneinfo.ZoneInfo(zone))
    text = f"{local.replace(tzinfo=None).isoformat(sep=' ', timespec='microseconds')} {zone}"
    expected = local.replace(fold=0).astimezone(UTC)  # nbgrader's reading of an hour that occurs twice
    found = _check(tmp_path, text.encode(), expected)
    assert found == (expected, "", "")


def test_the_sample_classs_hand_ins_are_plausible_and_give_its_late_penalties(repo, expected):
    """autograder/submitted's timestamp.txt files under autograder/deadlines.toml, against the real clock:
    none flagged (a sample dated after today would be: its times are in the past), and the penalties
    sample_class.toml lists (full marks assumed: a penalty never exceeds the score). In-process."""
    tops = {a.name: a.max_score() for a in repo.assignments()}
    deadlines = load(repo.autograder / "deadlines.toml", known=list(tops))
    where, results = {}, []
    for folder in sorted(repo.sample_class.glob("*/*/")):
        student, name = folder.parent.name, folder.name
        if not (folder / "timestamp.txt").is_file():
            continue
        top = tops[name]
        results.append(SubmissionResult(student, name, "graded", exercises=[ExerciseResult("all", top, top)]))
        where[(student, name)] = (folder, None)
    apply(results, where, deadlines)
    assert len(results) > 50 and [(r.student_id, r.assignment, r.reason) for r in results if r.reason] == []
    late = {(r.student_id, r.assignment): r.late_penalty for r in results if r.late_penalty}
    listed = {(s, a): off for s, rows in expected.items() if isinstance(rows, dict)
              for a, off in rows.get("late", {}).items()}
    assert late == pytest.approx(listed) and listed  # cho's 03_multi_head: 1.6


# --- Per student (issue 60, item 5): extensions and excused students ---------------------------------------

B = "02_scaled_dot_product"
PER_STUDENT = ('due = "2026-11-24T23:59:00+01:00"\n[late]\npolicy = "fixed"\npoints = 2\n'
               '[extensions]\n"10003" = { "01_self_attention" = "2026-12-05T18:00:00+01:00", '
               '"02_scaled_dot_product" = 48 }\n"10007" = { "*" = 72 }\n'
               '[excused]\n"10004" = ["02_scaled_dot_product"]\n')


def _per_student(tmp_path, text: str = PER_STUDENT, excused_csv: str | None = None):
    path = tmp_path / "deadlines.toml"
    path.write_text(text)
    csv_path = None
    if excused_csv is not None:
        csv_path = tmp_path / "excused.csv"
        csv_path.write_text(excused_csv)
    return load(path, known=[A, B], excused_csv=csv_path)


def test_an_extension_moves_one_students_due_date_by_a_date_or_hours(tmp_path):
    deadlines = _per_student(tmp_path)
    due = dt.datetime(2026, 11, 24, 22, 59, tzinfo=UTC)
    assert deadlines.due(A) == deadlines.due(A, "10001") == due  # everyone else: the class's
    assert deadlines.due(A, "10003") == dt.datetime(2026, 12, 5, 17, tzinfo=UTC)  # a date
    assert deadlines.due(B, "10003") == due + dt.timedelta(hours=48)  # hours added
    assert deadlines.due(A, "10007") == deadlines.due(B, "10007") == due + dt.timedelta(hours=72)  # "*"
    assert deadlines.extended(A, "10003") and not deadlines.extended(A, "10004")
    assert deadlines.excused_by(B, "10004") == "the deadlines file" and not deadlines.excused_by(A, "10004")


@pytest.mark.parametrize(("text", "message"), [
    ('[extensions]\n"10003" = { "01_self_atention" = 24 }', r"extensions\.10003\.01_self_atention \(student 10003, "
     r"assignment 01_self_atention\): no assignment of that name"),
    ('[extensions]\n"10003" = { "01_self_attention" = "2026-11-20T18:00:00+01:00" }',
     r"\(student 10003, assignment 01_self_attention\): 2026-11-20 18:00 \+01:00 is not after the assignment's due "
     r"date \(2026-11-24 23:59 \+01:00\)"),
    ('[extensions]\n"10003" = { "01_self_attention" = 0 }', r"\(student 10003, assignment 01_self_attention\): 0 "
     r"hours; expected a number of hours > 0"),
    ('[extensions]\n"10003" = { "01_self_attention" = nan }', r"student 10003, assignment 01_self_attention\): nan"),
    ('[extensions]\n"10003" = { "01_self_attention" = "2026-12-05T18:00:00" }',
     r"\(student 10003, assignment 01_self_attention\): '2026-12-05T18:00:00' has no time zone"),
    ('[extensions]\n"10003" = { "*" = "2026-12-05T18:00:00+01:00" }',
     r'\(student 10003, every assignment\): "\*" takes a number of hours'),
    ('[extensions]\n"10003" = 24', r"extensions\.10003 must be a table of assignment = due date or hours"),
    ('[extensions]\n" 10003" = { "*" = 24 }', r"student id ' 10003'; expected an id as the folders"),
    ('[excused]\n"10004" = "02_scaled_dot_product"', r"excused\.10004 \(student 10004\) must be a list"),
    ('[excused]\n"10004" = ["02_scaled"]', r"excused\.10004 \(student 10004\) names '02_scaled', no assignment"),
    ('[extension]\n"10003" = { "*" = 24 }', r"unknown key\(s\) extension"),
])
def test_a_malformed_extension_or_excuse_is_refused_naming_the_student_and_the_assignment(tmp_path, text, message):
    with pytest.raises(DeadlineError, match=message):
        _per_student(tmp_path, 'due = "2026-11-24T23:59:00+01:00"\n' + text + "\n")


def test_an_extension_needs_a_due_date_to_move_and_an_excuse_needs_none(tmp_path):
    with pytest.raises(DeadlineError, match=r"\(student 10003, assignment 02_scaled_dot_product\): the assignment "
                                            r"has no due date to move"):
        _per_student(tmp_path, '[assignments]\n"01_self_attention" = "2026-11-24T23:59:00+01:00"\n'
                               '[extensions]\n"10003" = { "02_scaled_dot_product" = 24 }\n')
    with pytest.raises(DeadlineError, match=r"\[extensions\] move due dates, and no assignment has one"):
        _per_student(tmp_path, '[extensions]\n"10003" = { "*" = 24 }\n')
    excused = _per_student(tmp_path, '[excused]\n"10004" = ["01_self_attention"]\n')  # no due date at all
    assert excused is not None and excused.due(A) is None and excused.excused_by(A, "10004")


def test_excused_csv_from_the_lms_is_a_second_source_checked_as_strictly(tmp_path):
    deadlines = _per_student(tmp_path, excused_csv="student_id,assignment,source\n10005,01_self_attention,canvas\n")
    assert deadlines.excused_by(A, "10005") == "excused.csv" and deadlines.excused_by(B, "10004")
    assert load(None, "2026-11-24T23:59:00+01:00", known=[A], excused_csv=tmp_path / "none.csv").excused == {}
    with pytest.raises(DeadlineError, match=r"excused\.csv, line 3: student 10006 is excused from '01_self', no "
                                            "assignment of the course"):
        _per_student(tmp_path, excused_csv="student_id,assignment\n10005,01_self_attention\n10006,01_self\n")
    with pytest.raises(DeadlineError, match="no assignment column; expected the header student_id,assignment"):
        _per_student(tmp_path, excused_csv="student_id,task\n10005,01_self_attention\n")


def test_apply_grades_by_the_students_own_due_date_and_never_an_excused_one_late(tmp_path):
    """Three hand-ins of 01 at the same instant, a day after the class's due date: late for 10001, on time
    for 10003 (extended), and for 10004 (excused from 01 by excused.csv) excused: no penalty. A missing
    notebook of an excused student is excused, not missing, in the run's table, and no total counts it."""
    from transformer_course.grading.notebook.grade import score_table
    from transformer_course.instructors.deadlines import excuse

    deadlines = _per_student(tmp_path, excused_csv="student_id,assignment\n10004,01_self_attention\n")
    stamp = b"2026-11-26 12:00:00.000000 UTC"
    where = {(s, A): _handed_in(tmp_path, stamp, student=s) for s in ("10001", "10003", "10004")}
    results = [_graded(s) for s in ("10001", "10003", "10004")]
    apply(results, where, deadlines, now=AFTER)
    late, extended, excused = results
    assert (late.late_by, late.late_penalty, late.extended, late.excused) == (37.02, 2.0, False, False)
    assert (extended.late_by, extended.late_penalty, extended.extended) == (0.0, 0.0, True)
    assert extended.due == "2026-12-05T18:00+01:00"  # the student's own, in the due date's zone
    assert (excused.late_by, excused.late_penalty, excused.excused) == (0.0, 0.0, True)
    gone = SubmissionResult("10004", B, "missing", "no notebook handed in",
                            exercises=[ExerciseResult("scaled_dot_product_attention", 0.0, 8.0)])
    assert excuse(gone, deadlines) and gone.excused
    others = [SubmissionResult(s, B, "missing", exercises=[ExerciseResult("x", 0.0, 8.0)]) for s in ("10001", "10003")]
    table = score_table([*results, gone, *others])
    rows = {line.split()[0]: line for line in table.splitlines()[1:4]}
    assert rows["10003"].split()[1:] == ["9/10", "ext", "0/8", "missing", "9/18"]
    assert rows["10004"].split()[1:] == ["excused", "excused", "0/0"]  # in no total
    assert "no notebook handed in" not in table  # an excused notebook loses no points
    assert "due 2026-12-05 18:00 +01:00 (extended)" not in table  # on time: no Late line


def test_the_feedback_page_says_the_extended_due_date_or_that_it_is_excused(tmp_path):
    from transformer_course.grading.run.publish import late_banner

    deadlines = _per_student(tmp_path)
    stamp = b"2026-11-26 12:00:00.000000 UTC"
    where = {(s, a): _handed_in(tmp_path, stamp, a, student=s) for s in ("10003", "10004") for a in (A, B)}
    results = [_graded(s, a) for s in ("10003", "10004") for a in (A, B)]
    apply(results, where, deadlines, now=AFTER)
    said = {}
    for r in results:
        page = tmp_path / f"{r.student_id}-{r.assignment}.html"
        page.write_text("<html><body><p>the page</p></body></html>")
        late_banner(page, r, deadlines)
        late_banner(page, r, deadlines)  # a second run replaces the first's banner
        assert page.read_text().count("course: lateness -->") == 2
        said[(r.student_id, r.assignment)] = page.read_text()
    assert ("Handed in 2026-11-26 13:00 +01:00, due 2026-12-05 18:00 +01:00 (your extension; the class's due date "
            "is 2026-11-24 23:59 +01:00): on time.") in said[("10003", A)]
    assert "due 2026-11-26 23:59 +01:00 (your extension; the class's" in said[("10003", B)]  # 48 hours more
    assert "Excused: this notebook does not count toward your grade" in said[("10004", B)]
    assert "h late" not in said[("10004", B)] and "not counted." in said[("10004", B)]
    assert "Handed in 2026-11-26 13:00 +01:00, due 2026-11-24 23:59 +01:00: 37.02 h late; 2 points off" in said[
        ("10004", A)]
    # excused by the LMS, no due date at all: the excused page says so, the others say nothing of lateness
    only = _per_student(tmp_path, "", excused_csv="student_id,assignment\n10004,01_self_attention\n")
    for student, banner in (("10004", True), ("10001", False)):
        page = tmp_path / f"{student}.html"
        page.write_text("<html><body><p>the page</p></body></html>")
        result = _graded(student)
        apply([result], {}, only, now=AFTER)
        late_banner(page, result, only)
        assert ("Excused: this notebook does not count" in page.read_text()) is banner
        assert "course: lateness" not in page.read_text() or banner


def test_results_json_keeps_extended_and_excused_and_a_stranger_is_named(tmp_path):
    import json

    from transformer_course.grading.run.publish import write_csvs

    deadlines = _per_student(tmp_path)
    results = [_graded("10003"), _graded("10004", B)]
    where = {(r.student_id, r.assignment): _handed_in(tmp_path, b"2026-11-26 12:00:00 UTC", r.assignment,
                                                       r.student_id) for r in results}
    apply(results, where, deadlines, now=AFTER)
    out = tmp_path / "out"
    out.mkdir()
    write_csvs(results, out)
    kept = {(r["student_id"], r["assignment"]): r for r in json.loads((out / "results.json").read_text())}
    assert (kept[("10003", A)]["extended"], kept[("10003", A)]["excused"]) == (True, False)
    assert (kept[("10004", B)]["extended"], kept[("10004", B)]["excused"]) == (False, True)
    # 10007's extension names a student with no folder and no name: a typo in an id, said
    assert deadlines.strangers(tmp_path / "submitted", {}) == ["10007"]
    assert deadlines.strangers(tmp_path / "submitted", {"10007": "Gus"}) == []


def test_an_excused_notebook_is_ex_in_lms_csv_and_counts_in_no_total(tmp_path):
    """lms.csv, the file an LMS imports: Canvas's gradebook import reads "EX" as excused; the total leaves the
    notebook out, where a 0 would count against the student."""
    import csv

    from transformer_course.grading.run.publish import write_csvs

    excused, other = _graded("ada", A), _graded("ada", B)
    excused.excused = True
    write_csvs([excused, other, _graded("ben", A), _graded("ben", B)], tmp_path)
    with open(tmp_path / "lms.csv") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert (rows["ada"][f"{A} (10)"], rows["ada"][f"{B} (10)"], rows["ada"]["total (20)"]) == ("EX", "9", "9")
    assert (rows["ben"][f"{A} (10)"], rows["ben"]["total (20)"]) == ("9", "18")
