"""``transformer-course canvas``, end to end through the real CLI against a Canvas on 127.0.0.1 (tests/fake_canvas.py):
times and names in, grades and comments out (dry run, push, push again), a student Canvas does not know, a
throttled Canvas, a wrong token. No kernel: results.json and the feedback pages are written here in the shape
`grade` writes them (grading/run/publish.py, write_csvs)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from tests.fake_canvas import Bucket, FakeCanvas
from transformer_course.cli import main
from transformer_course.grading.output.spreadsheet import read_rows
from transformer_course.instructors.deadlines import parse_timestamp
from transformer_course.lms import push, times

A = "01_self_attention"
TOKEN = "s3cret-canvas-token-7~abcdef"


@pytest.fixture
def canvas(monkeypatch):
    """A running fake Canvas with three students and the assignment, and the environment pointing at it."""
    fake = FakeCanvas(token=TOKEN)
    fake.add_student(10001, "Ada Lovelace", "ada", "S-1")
    fake.add_student(10002, "Alan Turing", "alan", "S-2")
    fake.add_student(10003, "Grace Hopper", "grace", None)
    fake.assignment_id = fake.add_assignment(A, 15)
    url = fake.start()
    monkeypatch.setenv("CANVAS_URL", url)
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    monkeypatch.setenv("CANVAS_COURSE_ID", str(fake.course["id"]))
    yield fake
    fake.stop()


def _row(student, final, manual=None, manual_max=4.0, status="graded", penalty=0.0, manual_status="graded"):
    """One row of results.json as write_csvs writes it: exercises, late penalty, the points in words."""
    return {"student_id": student, "assignment": A, "status": status, "reason": "",
            "exercises": [{"exercise": "softmax", "score": final + penalty, "max_score": 11.0, "feedback": ""}],
            "submitted_at": "", "late_by": 0.0, "late_penalty": penalty, "late_note": "", "due": "",
            "manual_score": manual, "manual_max_score": manual_max, "manual_status": manual_status}


def _graded(out, rows):
    (out / "results.json").parent.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    for row in rows:
        page = out / "feedback" / row["student_id"] / A / f"{A}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"<html><body><h1>{row['student_id']}</h1><p>softmax: ok</p></body></html>\n")


def test_times_names_late_and_excused_come_from_canvas(canvas, tmp_path, capsys):
    aid = canvas.assignment_id
    canvas.hand_in(aid, 10001, "2026-11-23T18:00:00Z")
    canvas.hand_in(aid, 10002, "2026-11-25T09:30:00Z", late=True)
    canvas.submissions[aid, 10003]["excused"] = True  # excused, nothing handed in
    submitted = tmp_path / "submitted"
    for student in ("10001", "10002", "10009"):  # 10009: collected, unknown to Canvas
        (submitted / student / A).mkdir(parents=True)
    (submitted / "10009" / A / "timestamp.txt").write_text("2026-11-24 10:00:00.000000 UTC\n")
    # collect's students.csv: Canvas's file-name name for 10001, an instructor's name from elsewhere for 10002.
    (tmp_path / "students.csv").write_text("student_id,name,lms,late\n10001,lovelaceada,canvas,\n"
                                           "10002,A. M. Turing,moodle,\n10009,someone,canvas,\n")

    assert main(["canvas", "times", str(submitted), "--assignment", "01"]) == 0
    printed = capsys.readouterr().out

    stamp = (submitted / "10001" / A / "timestamp.txt").read_text()
    assert parse_timestamp(stamp) == dt.datetime(2026, 11, 23, 18, tzinfo=dt.UTC)
    assert times.source_of(submitted, "10001", A) == "canvas api"
    assert times.source_of(submitted, "10009", A) == times.FROM_HAND_IN
    rows = {r["student_id"]: r for r in read_rows(tmp_path / "students.csv")}
    assert list(rows["10001"]) == ["student_id", "name", "lms", "late", "login_id", "sis_user_id"]
    assert (rows["10001"]["name"], rows["10001"]["login_id"], rows["10001"]["sis_user_id"]) == ("Ada Lovelace",
                                                                                                "ada", "S-1")
    assert rows["10002"]["name"] == "A. M. Turing"  # not Canvas's: kept
    assert (rows["10002"]["late"], rows["10001"]["late"]) == (A, "")
    assert rows["10009"]["login_id"] == ""  # unknown to Canvas: untouched
    assert read_rows(tmp_path / "excused.csv") == [{"student_id": "10003", "assignment": A}]
    line = {ln.split()[0]: ln for ln in printed.splitlines()[1:]}
    assert "from canvas api" in line["10001"] and "[late]" in line["10002"]
    assert "not in the Canvas course" in line["10009"] and "timestamp.txt" in line["10009"]


def test_push_dry_run_then_push_then_nothing_left_to_send(canvas, tmp_path, capsys):
    aid = canvas.assignment_id
    for student in (10001, 10002, 10003):
        canvas.hand_in(aid, student, "2026-11-23T18:00:00Z")
    canvas.submissions[aid, 10001].update(score=5.0, entered_score=5.0, grade="5", workflow_state="graded")
    canvas.add_student(10006, "Excused Student")
    canvas.submissions[aid, 10006]["excused"] = True
    out = tmp_path / "out"
    _graded(out, [_row("10001", 7.0, manual=3.0, penalty=1.0), _row("10002", 11.0, manual=4.0),
                  _row("10003", 9.0, manual=None, manual_status="awaiting"),
                  _row("10004", 11.0, manual=2.0),  # not enrolled in the Canvas course
                  _row("10005", 0.0, status="grader-error"), _row("10006", 3.0, manual=1.0)])
    argv = ["canvas", "push", str(out), "--assignment", A, "--comment-with-page"]

    assert main([*argv, "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert not [r for r in canvas.requests if r[0] in ("PUT", "POST")]
    line = {ln.split()[0]: ln for ln in dry.splitlines()[2:]}
    assert "5 -> 10" in line["10001"] and "grade + comment + page" in line["10001"]
    assert "- -> 15" in line["10002"]
    assert "NOT SENT" in line["10004"] and "held back: answers in words" in line["10003"]
    assert "held back: the grader failed" in line["10005"] and "held back: excused" in line["10006"]

    assert main(argv) == 0
    assert "sent to Canvas: 2" in capsys.readouterr().out
    assert canvas.submissions[aid, 10001]["score"] == 10.0 and canvas.submissions[aid, 10002]["score"] == 15.0
    assert canvas.submissions[aid, 10003]["score"] is None and canvas.submissions[aid, 10006]["score"] is None
    [comment] = canvas.comments(aid, 10001)
    assert comment["comment"].startswith(f"{A}: 10/15 points (autograded tests 8/11, late penalty -1, answers in "
                                         "words 3/4)")
    [attached] = comment["attachments"]
    page = out / "feedback" / "10001" / A / f"{A}.html"
    assert canvas.files[attached["id"]]["contents"] == page.read_text()
    assert (attached["display_name"], attached["size"]) == (page.name, page.stat().st_size)
    puts = [r for r in canvas.requests if r[0] == "PUT"]
    assert len(puts) == 2 and not any("/10004" in path for _, path in puts)

    # Canvas's own late policy takes 2 points off 10001's posted grade (score); the grade as posted (entered_score)
    # is what was sent, so nothing is sent again (the course's penalty is in it already).
    canvas.submissions[aid, 10001]["score"] = 8.0
    before = len(canvas.requests)
    assert main(argv) == 0
    again = capsys.readouterr().out
    assert "0 to send to Canvas, 2 already there" in again
    assert not [r for r in canvas.requests[before:] if r[0] in ("PUT", "POST")]

    # An override in formgrader raises 10002's score: the grade and a new comment go, the page is attached again.
    _graded(out, [_row("10001", 7.0, manual=3.0, penalty=1.0), _row("10002", 11.0, manual=3.5)])
    assert main(argv) == 0
    assert canvas.submissions[aid, 10002]["score"] == 14.5 and len(canvas.comments(aid, 10002)) == 2
    assert len(canvas.comments(aid, 10001)) == 1


def test_a_throttled_canvas_is_waited_for(canvas, tmp_path, capsys):
    canvas.bucket = Bucket(capacity=2.0, leak=4.0, cost=1.0, up_front=0.0)  # three requests empty it
    out = tmp_path / "out"
    _graded(out, [_row(str(s), 5.0 + s % 10, manual=1.0) for s in (10001, 10002, 10003)])
    assert main(["canvas", "push", str(out), "--assignment", A]) == 0
    assert canvas.throttled > 0
    assert [canvas.submissions[canvas.assignment_id, s]["score"] for s in (10001, 10002, 10003)] == [7.0, 8.0, 9.0]
    assert f"Canvas throttled {canvas.throttled} of" in capsys.readouterr().out


def test_a_wrong_token_is_one_line_without_the_token(canvas, tmp_path, capsys, monkeypatch):
    wrong = "wrong-token-0123456789"
    monkeypatch.setenv("CANVAS_TOKEN", wrong)
    _graded(tmp_path / "out", [_row("10001", 5.0)])
    assert main(["canvas", "push", str(tmp_path / "out"), "--assignment", A]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert "refused the token in CANVAS_TOKEN (401" in line
    assert wrong not in line and TOKEN not in line
    assert canvas.submissions[canvas.assignment_id, 10001]["score"] is None


def test_the_canvas_assignment_is_found_by_name_or_map_and_an_ambiguous_one_is_named(canvas, tmp_path, capsys):
    out = tmp_path / "out"
    _graded(out, [_row("10001", 5.0, manual=None, manual_max=0.0, manual_status="")])
    canvas.assignments[canvas.assignment_id]["name"] = "01 Self-Attention"  # case, spaces and hyphens aside
    assert main(["canvas", "push", str(out), "--assignment", A, "--dry-run"]) == 0
    assert "- -> 5" in capsys.readouterr().out
    twin = canvas.add_assignment("01_self_attention", 15)  # its very name: chosen over the near one
    assert main(["canvas", "push", str(out), "--assignment", A]) == 0
    assert (canvas.submissions[twin, 10001]["score"], canvas.submissions[canvas.assignment_id, 10001]["score"]) \
        == (5.0, None)
    canvas.assignments[twin]["name"] = "01 self attention"
    assert main(["canvas", "push", str(out), "--assignment", A, "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert "2 Canvas assignments are called" in err and f"--map {A}=ID" in err
    assert f"{canvas.assignment_id} ('01 Self-Attention')" in err
    assert main(["canvas", "push", str(out), "--assignment", A, "--map", f"01={canvas.assignment_id}"]) == 0
    assert canvas.submissions[canvas.assignment_id, 10001]["score"] == 5.0
    canvas.assignments.clear()
    assert main(["canvas", "push", str(out), "--assignment", A]) == 1
    assert "no Canvas assignment is called '01_self_attention'" in capsys.readouterr().err


def test_the_settings_refuse_a_token_sent_in_clear_and_name_what_is_missing(monkeypatch):
    from transformer_course.lms.canvas import CanvasError, settings

    with pytest.raises(CanvasError, match="set CANVAS_TOKEN, CANVAS_COURSE_ID"):
        settings({"CANVAS_URL": "https://x.instructure.com"})
    with pytest.raises(CanvasError, match="https"):
        settings({"CANVAS_URL": "http://x.instructure.com", "CANVAS_TOKEN": "t", "CANVAS_COURSE_ID": "1"})
    assert "t0k" not in repr(settings({"CANVAS_URL": "http://127.0.0.1:9", "CANVAS_TOKEN": "t0k",
                                       "CANVAS_COURSE_ID": "1"}))


def test_a_comment_already_there_is_recognised_by_its_text_and_page(tmp_path):
    page = tmp_path / "p.html"
    page.write_text("<p>x</p>")
    held = push.Current(3.0, (push.Comment("hello", (("p.html", page.stat().st_size),)),))
    assert push.has_comment(held, "hello", page) and push.has_comment(held, "hello", None)
    assert not push.has_comment(held, "hello!", page)
    page.write_text("<p>changed</p>")
    assert not push.has_comment(held, "hello", page)
