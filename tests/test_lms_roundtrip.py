"""The LMS round trip as an instructor makes it, through the real CLI (issue 60's "done when"): a Canvas download
collected, its times taken from Canvas's API, graded, graded by hand in formgrader (a point typed over a test
cell's, a comment, the answers in words), reported, pushed to a Canvas on 127.0.0.1 (tests/fake_canvas.py) and
pushed again; and the gradebook CSV exported from Canvas filled with the same grades, its header kept."""

from __future__ import annotations

import zipfile

from tests.conftest import GRADING_TIMEOUT
from tests.fake_canvas import FakeCanvas
from tests.test_manual import gradebook, put_comment, put_grade
from transformer_course.cli import main

A = "01_self_attention"
TOKEN = "roundtrip-token-0123456789"
DUE = "2026-11-23T18:00:00+01:00"
SAID = "Subtract the row's maximum first, then it is right."


def test_a_canvas_class_goes_round_the_lms_with_every_point_given_by_hand(repo, tmp_path, capsys, monkeypatch):
    canvas = FakeCanvas(token=TOKEN)
    canvas.add_student(10001, "Ada Lovelace", "ada", "S-1")
    canvas.add_student(10002, "Dev Patel", "dev", "S-2")
    aid = canvas.add_assignment(A, 15)
    canvas.hand_in(aid, 10001, "2026-11-23T16:30:00Z")  # 30 min before the due date (17:00 UTC)
    canvas.hand_in(aid, 10002, "2026-11-24T10:00:00Z", late=True)  # 17 h late
    monkeypatch.setenv("CANVAS_URL", canvas.start())
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    monkeypatch.setenv("CANVAS_COURSE_ID", str(canvas.course["id"]))
    try:
        # Canvas's download, made a day after the due date (its entries carry the time the zip was made).
        download = tmp_path / "submissions.zip"
        with zipfile.ZipFile(download, "w") as archive:
            for name, source in ((f"lovelaceada_10001_501_{A}.ipynb", repo.solutions / f"{A}.ipynb"),
                                 (f"pateldev_LATE_10002_502_{A}.ipynb", repo.sample_class / "dev" / A / f"{A}.ipynb")):
                archive.writestr(zipfile.ZipInfo(name, (2026, 11, 24, 18, 0, 0)), source.read_bytes())
        submitted, out = tmp_path / "class" / "submitted", tmp_path / "out"
        assert main(["collect", str(download), "--assignment", "01", "--into", str(submitted)]) == 0
        assert main(["canvas", "times", str(submitted), "--assignment", "01"]) == 0
        assert main(["grade", str(submitted), "--out", str(out), "--assignment", "01", "--workers", "1",
                     "--timeout", str(GRADING_TIMEOUT), "--due", DUE, "--late-policy", "fixed", "--late-points",
                     "1"]) == 0
        capsys.readouterr()

        # formgrader: dev's two softmax test cells given 1 and 2 over the grader's 0, a comment under the answer;
        # the answers in words: ada 2 + 2, dev 1 + 0.
        questions = [q.grade_id for q in repo.assignment(A).questions]
        with gradebook(out) as gb:
            student = gb.find_student("10001")  # Canvas's name, for formgrader's list of students
            assert (student.first_name, student.last_name) == ("Ada", "Lovelace")
            put_grade(gb, "test_softmax", {"manual_score": 1}, student="10002")
            put_grade(gb, "test_softmax_hidden", {"manual_score": 2}, student="10002")
            put_comment(gb, "softmax", {"manual_comment": SAID}, student="10002")
            for question, ada, dev in zip(questions, (2, 2), (1, 0), strict=True):
                put_grade(gb, question, {"manual_score": ada}, student="10001")
                put_grade(gb, question, {"manual_score": dev}, student="10002")
        assert main(["report", str(out)]) == 0

        argv = ["canvas", "push", str(out), "--assignment", "01", "--comment-with-page"]
        assert main(argv) == 0
        # ada: 11 autograded + 4 in words; dev: 8 + 3 given by hand - 1 late + 1 in words.
        assert canvas.submissions[aid, 10001]["score"] == 15.0 and canvas.submissions[aid, 10002]["score"] == 11.0
        [comment] = canvas.comments(aid, 10002)
        assert comment["comment"].startswith(f"{A}: 11/15 points (autograded tests 11/11, late penalty -1, answers "
                                             "in words 1/4)"), comment["comment"]
        [page] = comment["attachments"]
        assert SAID in canvas.files[page["id"]]["contents"]  # the formgrader comment, on the page sent back
        capsys.readouterr()
        sent = len(canvas.requests)
        assert main(argv) == 0
        assert "0 to send to Canvas, 2 already there" in capsys.readouterr().out
        assert not [r for r in canvas.requests[sent:] if r[0] in ("PUT", "POST")]
    finally:
        canvas.stop()

    # Without the API: the gradebook Canvas exported, filled; its header and the other columns unchanged.
    export, filled = tmp_path / "export.csv", tmp_path / "filled.csv"
    lines = ["Student,ID,SIS User ID,SIS Login ID,Section,01 Self-attention (1234),Quiz 1 (99)",
             "    Points Possible,,,,,15.00,5.00",
             '"Lovelace, Ada",10001,S-1,ada,Section A,,4.00', '"Patel, Dev",10002,S-2,dev,Section A,,5.00']
    export.write_text("\n".join(lines) + "\n")
    assert main(["lms", "fill-canvas", str(out), "--gradebook", str(export), "--assignment", "01",
                 "-o", str(filled)]) == 0
    assert filled.read_text().splitlines() == [*lines[:2], '"Lovelace, Ada",10001,S-1,ada,Section A,15,4.00',
                                               '"Patel, Dev",10002,S-2,dev,Section A,11,5.00']
