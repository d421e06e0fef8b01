"""One hand-in never stops a class: whatever goes wrong for one (student, assignment) pair, from
reading its hand-in to writing its record, lateness and pages, is that pair's row with its reason,
and every other pair's row is what it would have been (grading/run/boundary.py)."""

from __future__ import annotations

import csv
import dataclasses
import io
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transformer_course import cli
from transformer_course.grading.notebook.grade import read_submission
from transformer_course.grading.run import batch, boundary

from .conftest import GRADING_TIMEOUT

ASSIGNMENT = "01_self_attention"
HONEST = ("ada", "cho")


@pytest.fixture
def fake_grading(monkeypatch):
    """No kernels: each notebook handed in is read as the grader reads it (``read_submission``, ``invalid``
    where it cannot be), else "graded" at 0 points (a valid record), so a class runs in seconds; what these
    tests check is which rows there are and why, not scores."""
    def grade_task(root, limits, threads, work_root, task):
        assignment = next(a for a in batch.Repo(Path(root)).assignments() if a.name == task.assignment)
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / task.filename).write_bytes(task.data)
            nb, why = read_submission(Path(tmp) / task.filename, 500)
        if nb is None:
            return batch._missing(dataclasses.replace(task, note=task.note + why), assignment, "invalid")
        return batch._missing(task, assignment, "graded")

    monkeypatch.setattr(batch, "grade_task", grade_task)


def _class(repo, root: Path, *hostile: str) -> Path:
    submitted = root / "submitted"
    for student in (*HONEST, *hostile):
        shutil.copytree(repo.sample_class / "ada" / ASSIGNMENT, submitted / student / ASSIGNMENT)
    return submitted


def _rows(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv", newline="") as f:
        return {r["student_id"]: r for r in csv.DictReader(f)}


def _grade(submitted: Path, out: Path, *more: str) -> int:
    return cli.main(["grade", str(submitted), "--out", str(out), "--assignment", "01", "--timeout",
                     str(GRADING_TIMEOUT), "--workers", "1", *more])


def test_hostile_hand_ins_are_their_own_rows_and_the_class_is_written(repo, tmp_path, fake_grading, capsys):
    """JSON nested 2,000 deep, a timestamp in year 9999 and one in year 1 (west of UTC's due date), a
    notebook that is not text: each is that student's row; the honest students' rows are the ones a
    class without them gets, and every table is written."""
    baseline = tmp_path / "baseline"
    assert _grade(_class(repo, tmp_path / "a"), baseline) == 0
    submitted = _class(repo, tmp_path / "b", "deep", "y9999", "y1", "bytes")
    notebook = submitted / "deep" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    notebook.write_text('{"metadata": ' + "[" * 2000 + "]" * 2000 + ', "cells": []}')
    (submitted / "y9999" / ASSIGNMENT / "timestamp.txt").write_text("9999-12-31 23:59:59.999999+00:00")
    (submitted / "y1" / ASSIGNMENT / "timestamp.txt").write_text("0001-01-01 00:00:00+00:00")  # year 0 at -08:00
    (submitted / "bytes" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").write_bytes(b"\xff\xfe\x00{" * 5000)
    deadlines = tmp_path / "deadlines.toml"
    deadlines.write_text('due = "2026-12-01T12:00:00-08:00"\n')
    out = tmp_path / "out"
    assert _grade(submitted, out, "--deadlines", str(deadlines)) == 0, capsys.readouterr().err
    with_deadline = tmp_path / "baseline-due"
    assert _grade(_class(repo, tmp_path / "c"), with_deadline, "--deadlines", str(deadlines)) == 0
    rows, honest = _rows(out), _rows(with_deadline)
    for name in ("grades.csv", "lms.csv", "exercises.csv", "results.json"):
        assert (out / name).is_file(), name
    for student in HONEST:
        assert rows[student] == honest[student], "an honest student's row is the same with hostile classmates"
    assert rows["deep"]["status"] == "invalid" and "nested" in rows["deep"]["reason"], rows["deep"]
    assert rows["bytes"]["status"] == "invalid", rows["bytes"]
    for student in ("y9999", "y1"):  # graded, a row each (what their times mean: tests/test_deadlines.py)
        assert rows[student]["status"] == "graded", rows[student]
    assert "hand-in time" in rows["y1"]["reason"] or "timestamp" in rows["y1"]["reason"], rows["y1"]
    assert set(_rows(baseline)) == set(HONEST)


ERRORS = st.sampled_from([RecursionError("maximum recursion depth exceeded"), MemoryError(),
                          OverflowError("date value out of range"), UnicodeDecodeError("utf-8", b"\xff", 0, 1, "x"),
                          ValueError("bad"), OSError(5, "Input/output error"), RuntimeError("a grader bug"),
                          KeyError("cells"), TypeError("'list' object is not a mapping")])


@given(error=ERRORS, stage=st.sampled_from(boundary.STAGES))
def test_every_exception_of_a_pair_is_its_row_but_a_stop(error, stage):
    """In-process: what the boundary makes of each kind of exception, in each stage."""
    with boundary.pair(stage) as failed:
        raise error
    (f,) = failed
    assert f.error is error and f.reason and f.stage == stage
    if stage == "intake":
        assert f.status == ("refused" if isinstance(error, OSError) else
                            "grader-error" if type(error) is RuntimeError else "invalid"), f
    else:
        assert f.status == "grader-error" and not f.recorded
    assert "\n" not in f.reason and len(f.reason) < 400


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), SystemExit(2)])
def test_a_stop_is_the_runs(stop):
    with pytest.raises(type(stop)), boundary.pair("intake"):
        raise stop


def test_a_full_disk_while_writing_is_the_runs_but_not_while_reading():
    import errno

    with pytest.raises(OSError), boundary.pair("record"):
        raise OSError(errno.ENOSPC, "No space left on device")
    with boundary.pair("intake") as failed:
        raise OSError(errno.EACCES, "Permission denied")
    assert failed[0].status == "refused"


# each place, and which of its arguments names the pair
@pytest.mark.parametrize(("where", "arg"), [("find_submission", 0), ("late.apply", 0), ("written_on_pages", 1),
                                            ("_save", 3)])
def test_one_pairs_failure_anywhere_leaves_the_others_rows(repo, tmp_path, fake_grading, monkeypatch, where, arg,
                                                           capsys):
    """A failure injected for one student at each stage of the pair's path: the run ends with every
    table, the others' rows unchanged, the pair's row says why (or, where only its page failed, a warning)."""
    deadlines = tmp_path / "deadlines.toml"
    deadlines.write_text('due = "2026-12-01T12:00:00+00:00"\n')
    baseline = tmp_path / "baseline"
    assert _grade(_class(repo, tmp_path / "a"), baseline, "--deadlines", str(deadlines)) == 0
    owner, name = (batch, where) if "." not in where else (batch.late, where.split(".")[1])
    real = getattr(owner, name)

    def failing(*args, **kwargs):
        said = io.StringIO()
        print(args[arg], file=said)
        if "zzqx" in said.getvalue():
            raise OverflowError("injected")
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)
    out = tmp_path / "out"
    code = _grade(_class(repo, tmp_path / "b", "zzqx"), out, "--deadlines", str(deadlines))
    err = capsys.readouterr().err
    rows = _rows(out)
    assert {s: rows[s] for s in HONEST} == _rows(baseline), where
    assert "zzqx" in rows
    if where == "find_submission":
        assert code == 0 and rows["zzqx"]["status"] == "invalid" and "injected" in rows["zzqx"]["reason"]
    elif where == "late.apply":
        assert code == 0 and rows["zzqx"]["status"] == "graded" and "check it by hand" in rows["zzqx"]["reason"]
    elif where == "written_on_pages":
        assert code == 0 and "zzqx" in err and "feedback page" in err
    else:  # its record could not be written: the grader's failure, said, and graded again next run
        assert code == 1 and rows["zzqx"]["status"] == "grader-error"
        assert not (out / "results" / "zzqx" / f"{ASSIGNMENT}.json").exists()


@given(name=st.text(st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=60)
       | st.binary(min_size=1, max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape")))
def test_any_student_folder_name_is_graded_by_that_name_or_warned_about(repo, tmp_path_factory, name):
    """A folder's name is the student's id in every table: one that no table can hold (bytes that are not
    UTF-8, control characters) is named in a warning, never the run's end; every other one is written
    and read back as it is."""
    from transformer_course.grading.notebook.grade import SubmissionResult, zero_scores
    from transformer_course.grading.run.publish import write_csvs
    from transformer_course.grading.submission.handin import discover

    if "/" in name:  # not one folder's name: mkdir makes "a/" the folder "a", and "a/b" two folders
        return
    root = tmp_path_factory.mktemp("names")
    try:
        (root / "submitted" / name).mkdir(parents=True)
    except (OSError, ValueError):  # a name no file system takes (too long, "." or "..", a "/")
        return
    assignment = repo.assignment(ASSIGNMENT)
    pairs, warnings = discover(root / "submitted", [assignment])
    assert len(pairs) + len(warnings) == 1, (pairs, warnings)
    if pairs:
        student = pairs[0][0]
        assert student == name
        result = SubmissionResult(student, ASSIGNMENT, "missing", "", zero_scores(assignment, ""))
        (root / "out").mkdir()
        write_csvs([result], root / "out")
        with open(root / "out" / "grades.csv", newline="", encoding="utf-8") as f:
            (row,) = csv.DictReader(f)
        assert row["student_id"] in (name, f"'{name}"), "as it is, or with the quote that keeps a formula text"
    else:
        assert ascii(name) in warnings[0] or repr(name) in warnings[0] or name.startswith("."), warnings


def test_without_deadlines_the_gradebook_still_holds_each_hand_ins_time(repo, tmp_path, fake_grading):
    """The formgrader's submissions page shows a hand-in's time (and its autograded state) from the gradebook;
    a run without deadlines puts it there too, and its tables stay without lateness."""
    from nbgrader.api import Gradebook

    out = tmp_path / "out"
    submitted = _class(repo, tmp_path / "a")
    assert _grade(submitted, out) == 0
    stamp = (submitted / "ada" / ASSIGNMENT / "timestamp.txt").read_text().strip()
    with Gradebook(f"sqlite:///{out / 'nbgrader' / 'gradebook.db'}", "transformer-course") as gb:
        when = gb.find_submission(ASSIGNMENT, "ada").timestamp
    import datetime as dt

    handed = dt.datetime.fromisoformat(stamp.replace(" UTC", "+00:00").replace("Z", "+00:00"))
    assert when is not None and abs(when - handed.astimezone(dt.UTC).replace(tzinfo=None)) < dt.timedelta(seconds=1)
    assert (out / "nbgrader" / "submitted" / "ada" / ASSIGNMENT / "timestamp.txt").is_file()
    assert _rows(out)["ada"]["submitted_at"] == "", "no deadlines: no lateness in the tables"
