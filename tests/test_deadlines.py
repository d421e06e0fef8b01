"""Deadlines and late penalties (transformer-course grade --due / --deadlines): parsing, refusals
before any grading, the policies, and the submission time (nbgrader's timestamp.txt, else the file's).
The sample class's late student, through the real path, is in test_grading (sample_class.toml)."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from transformer_course.grading.grade import ExerciseResult, SubmissionResult
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

    from transformer_course.grading.grade import score_table
    from transformer_course.grading.publish import write_csvs
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
