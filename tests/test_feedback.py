"""The feedback pages handed back to students agree with the gradebook: an answer in words awaiting
the instructor says so (never nbgrader's 0), the points given in formgrader appear after
`transformer-course report` and after a `grade` run that regrades nothing, and every date on a page
is in the due date's own time zone, in one format."""

from __future__ import annotations

import csv
import datetime as dt
import os
import re
import shutil
from pathlib import Path

import pytest

from transformer_course.grading.notebook.grade import ExerciseResult, SubmissionResult
from transformer_course.grading.run.publish import WRITTEN, late_banner, written_on_page
from transformer_course.instructors.deadlines import load as load_deadlines
from transformer_course.instructors.deadlines import show

A01 = "01_self_attention"
# A date as the pages write it, and any date-and-time at all (to find one in another format).
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d [+-]\d\d:\d\d"
ANY_DATE = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?: ?(?:[+-]\d\d:?\d\d|Z|UTC))?"


def _page(questions: list[tuple[str, float]], total: str = "Score: 11.0 / 15.0") -> str:
    """nbgrader's feedback page as generate_feedback writes it (the parts this module rewrites)."""
    toc = "".join(f'<li><a href="#{q}">Written response</a> (Score: 0.0 / {p:.1f})</li>\n' for q, p in questions)
    cells = "".join(f'<a name="comment-{q}"></a><a name="{q}"></a><div class="panel-heading"><span class="nbgrader-'
                    f'label">Student\'s answer</span><span class="pull-right">\n      Score: 0.0 / {p:.1f} <a href='
                    f'"#top">(Top)</a>\n</span></div>\n<p>Score: 0.0 / 2.0 &lt;b&gt;mine&lt;/b&gt;</p>\n'
                    for q, p in questions)
    return (f"<html><head></head><body>\n<h4>{A01} ({total})</h4>\n<ol>\n{toc}</ol>\n{cells}</body></html>\n")


def _read(page: Path) -> str:
    """The page without the markers of what the course rewrites (as a browser shows it)."""
    return page.read_text().replace(WRITTEN[0], "").replace(WRITTEN[1], "")


def _result(score: float = 11.0) -> SubmissionResult:
    return SubmissionResult("ada", A01, "graded", "", [ExerciseResult("softmax", score, 11.0, "")])


def test_an_answer_awaiting_grading_says_so_then_shows_its_points(repo, tmp_path):
    """On nbgrader's page: "awaiting grading", not 0, until the instructor gives points; the total
    says which part is graded; rewriting again changes nothing; the student's own text is left as it was."""
    assignment = repo.assignment(A01)
    first, second = (q.grade_id for q in assignment.questions)
    page = tmp_path / "page.html"
    page.write_text(_page([(q.grade_id, q.points) for q in assignment.questions]))
    student_text = "<p>Score: 0.0 / 2.0 &lt;b&gt;mine&lt;/b&gt;</p>"

    written_on_page(page, _result(), assignment, {first: None, second: None})
    text = _read(page)
    assert "Score: 0.0" not in text.replace(student_text, ""), text
    assert text.count("awaiting grading (2 points)") == 4  # each question in the contents and at its cell
    assert "(11 / 11 graded automatically; 4 points of answers in words await your instructor)" in text
    assert text.count(student_text) == 2  # a student's text is never rewritten, and stays escaped
    written_on_page(page, _result(), assignment, {first: None, second: None})
    assert _read(page) == text  # idempotent

    written_on_page(page, _result(), assignment, {first: 2.0, second: None})
    text = _read(page)
    assert text.count("Score: 2 / 2") == 2 and text.count("awaiting grading (2 points)") == 2
    assert "(11 / 11 graded automatically; 2 / 2 of answers in words graded, 2 points await your instructor)" in text

    written_on_page(page, _result(), assignment, {first: 2.0, second: 1.5})
    text = _read(page)
    assert "awaiting" not in text and text.count("Score: 1.5 / 2") == 2
    total = "Score: 14.5 / 15: 11 / 11 graded automatically, 3.5 / 4 in words"
    assert f"<h4>{A01} ({total})</h4>" in text
    assert text.count(student_text) == 2

    written_on_page(page, _result(), assignment, {first: 0.0, second: 0.5})  # points changed in formgrader
    assert "Score: 11.5 / 15: 11 / 11 graded automatically, 0.5 / 4" in _read(page)


def test_a_page_without_nbgraders_scores_is_left_alone(repo, tmp_path):
    """The page of a notebook that could not be graded (the grader's own, no nbgrader scores)."""
    page = tmp_path / "page.html"
    page.write_text(original := "<html><body><h1>01_self_attention: 0 / 11</h1><p>crashed</p></body></html>")
    written_on_page(page, _result(0.0), repo.assignment(A01), {"question_stable_softmax": None})
    assert _read(page) == original


def test_comments_stand_under_their_cells_sanitised_and_are_rewritten_in_place(repo, tmp_path):
    """formgrader's comments on nbgrader's page: each at the foot of its answer's panel (after the code and
    nbgrader's own footer, before the next cell), one whose answer is not on the page under the title; markdown
    rendered and sanitised; a second run changes nothing, changed comments replace the old, none leaves the page
    as it was."""
    from transformer_course.grading.run.publish import COMMENT

    cell = ('<div class="panel panel-primary nbgrader_cell">\n<a name="comment-softmax"></a>'
            '<div class="panel-heading"><span class="nbgrader-label">Student\'s answer</span></div>\n'
            '<div class="panel-body">\n<div class="input_area"><pre>def softmax(x): &lt;/div&gt;</pre></div>\n</div>\n'
            '<div class="panel-footer"><div>nbgrader\'s</div></div>\n</div>\n<div class="cell">next</div>\n')
    page = tmp_path / "page.html"
    page.write_text(original := f"<html><body>\n<h4>{A01} (Score: 11.0 / 15.0)</h4>\n<ol></ol>\n{cell}</body></html>\n")
    comments = {"softmax": "Use **max**: $e^{x-m}$ <script>alert(1)</script>", "question_gone": "Answer it."}
    written_on_page(page, _result(), repo.assignment(A01), {}, comments)
    text = page.read_text()
    mine = text[text.index(f"{COMMENT[0]}<div class=\"panel-footer\">"):]
    assert text.index("nbgrader's</div></div>") < text.index("<strong>max</strong>") < text.index(
        '<div class="cell">next')  # inside the softmax panel, at its foot
    assert "<script" not in text and "alert(1)</p>" in mine and "$e^{x-m}$" in mine  # the script's text, as text
    assert text.index("</h4>") < text.index("Answer it.") < text.index("<ol>")  # its cell is not on the page
    written_on_page(page, _result(), repo.assignment(A01), {}, comments)
    assert page.read_text() == text
    written_on_page(page, _result(), repo.assignment(A01), {}, {"softmax": "Better now."})
    text = page.read_text()
    assert text.count(COMMENT[0]) == 1 and "Better now." in text
    assert "Answer it." not in text and "<strong>max</strong>" not in text
    written_on_page(page, _result(), repo.assignment(A01), {}, {})
    assert _read(page).replace("awaiting grading (2 points)", "") == original.replace(
        "Score: 11.0 / 15.0", "11 / 11 graded automatically; 4 points of answers in words await your instructor")


@pytest.mark.parametrize(("due", "handed_in", "said"), [
    ("2026-10-05T23:59:00+01:00", "2026-10-05 18:00:00.000000 UTC",
     "Handed in 2026-10-05 19:00 +01:00, due 2026-10-05 23:59 +01:00: on time."),
    ("2026-10-05T23:59:00-05:30", "2026-10-06T06:00:00+00:00",
     "Handed in 2026-10-06 00:30 -05:30, due 2026-10-05 23:59 -05:30: 0.52 h late"),
    ("2026-10-05T22:59:00Z", "2026-10-05 18:00:00.000000 UTC",
     "Handed in 2026-10-05 18:00 +00:00, due 2026-10-05 22:59 +00:00: on time."),
])
def test_the_late_banner_gives_dates_in_the_due_dates_time_zone(tmp_path, due, handed_in, said):
    from transformer_course.instructors.deadlines import apply

    deadlines = load_deadlines(None, due)
    folder = tmp_path / "submitted" / "ada" / A01
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text(handed_in + "\n")
    result = _result()
    apply([result], {("ada", A01): (folder, None)}, deadlines)
    page = tmp_path / "page.html"
    page.write_text("<html><body><p>the page</p></body></html>")
    late_banner(page, result, deadlines)
    late_banner(page, result, deadlines)  # a second run replaces the banner, never adds one
    text = _read(page)
    assert text.count(said) == 1, text
    assert re.findall(ANY_DATE, text) == re.findall(DATE, text) != []  # one format, every date


def test_dates_follow_each_assignments_own_zone(tmp_path):
    """A deadlines file: the default's zone, and an assignment's own where it names one."""
    path = tmp_path / "deadlines.toml"
    path.write_text('due = "2026-12-01T23:59:00+01:00"\n[assignments]\n"07_training" = 2026-12-15T23:59:00-08:00\n')
    deadlines = load_deadlines(path)
    assert deadlines.shown(A01, deadlines.due(A01)) == "2026-12-01 23:59 +01:00"
    assert deadlines.shown("07_training", deadlines.due("07_training")) == "2026-12-15 23:59 -08:00"
    assert deadlines.shown("07_training", "2026-12-16T08:00:00+00:00") == "2026-12-16 00:00 -08:00"
    assert show(dt.datetime(2026, 1, 2, 3, 4, tzinfo=dt.UTC)) == "2026-01-02 03:04 +00:00"


def _tables(out: Path) -> dict:
    with open(out / "grades.csv") as f:
        return {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}


def _give(out: Path, repo, points: dict[str, float]) -> None:
    """Points for ada's answers in words of 01, as formgrader writes them (nbgrader's Gradebook API)."""
    from nbgrader.api import Gradebook

    from transformer_course.grading.run.classbook import ClassBook

    book = ClassBook(out / "nbgrader", repo)
    with Gradebook(book.coursedir.db_url, book.coursedir.course_id) as gb:
        for grade_id, given in points.items():
            gb.find_grade(grade_id, A01, A01, "ada").manual_score = given
        gb.db.commit()


def test_the_graded_class_pages_await_then_show_the_points_after_report(graded, repo, tmp_path):
    """The sample class (deadlines in +01:00): ada answered 01's questions in words, cho left them as
    the stub. The pages say awaiting / 0, give their dates in +01:00, and show the instructor's points
    after `transformer-course report`, which grades nothing again; grades.csv agrees with the page."""
    from transformer_course.cli import main

    out = tmp_path / "out"
    shutil.copytree(graded[1], out)
    page = out / "feedback" / "ada" / A01 / f"{A01}.html"
    assignment = repo.assignment(A01)
    first, second = (q.grade_id for q in assignment.questions)
    text = _read(page)
    assert "Score: 0.0 / 2.0" not in text and text.count("awaiting grading (2 points)") == 4
    assert "(11 / 11 graded automatically; 4 points of answers in words await your instructor)" in text
    # the due date of autograder/deadlines.toml (+01:00), and ada's timestamp.txt (18:00 UTC) in it
    assert "Handed in 2026-11-23 19:00 +01:00, due 2026-11-24 23:59 +01:00: on time." in text
    assert re.findall(ANY_DATE, text) == re.findall(DATE, text)
    cho = _read(out / "feedback" / "cho" / A01 / f"{A01}.html")  # unanswered: 0 at once
    assert "awaiting" not in cho and cho.count("Score: 0 / 2") == 4, cho[:3000]
    late = (out / "feedback" / "cho" / "03_multi_head" / "03_multi_head.html").read_text()
    assert "Handed in 2026-11-26 10:30 +01:00, due 2026-11-24 23:59 +01:00: 34.52 h late; 1.6 points off" in late

    _give(out, repo, {first: 2, second: 1.5})
    assert main(["report", str(out)]) == 0
    text = _read(page)
    assert "awaiting" not in text and "Score: 0.0 / 2.0" not in text
    assert text.count("Score: 2 / 2") == 2 and text.count("Score: 1.5 / 2") == 2
    row = _tables(out)[("ada", A01)]
    total = float(row["score"]) + float(row["manual_score"])
    assert (row["manual_status"], total) == ("graded", 14.5)
    assert (f"Score: {total:g} / {float(row['max_score']) + float(row['manual_max_score']):g}: "
            f"{row['score']} / {row['max_score']} graded automatically, {row['manual_score']} / "
            f"{row['manual_max_score']} in words") in text
    assert main(["report", str(out)]) == 0
    assert _read(page) == text  # the same page: nothing added twice


def test_a_grade_run_puts_the_points_on_the_page_without_regrading(graded, repo, tmp_path):
    """`grade` again on an unchanged hand-in: no notebook is graded (its record is not rewritten), and
    the page shows the points given since, as grades.csv does: those of the answers in words, a score
    typed over the grader's on a test cell, extra credit, a comment (as formgrader writes them)."""
    from transformer_course.grading.run.batch import grade_class
    from transformer_course.grading.run.publish import COMMENT

    from .conftest import GRADING_TIMEOUT
    from .test_manual import gradebook, put_comment, put_grade

    out = tmp_path / "out"
    shutil.copytree(graded[1], out)
    submitted = tmp_path / "submitted"
    shutil.copytree(repo.sample_class / "ada" / A01, submitted / "ada" / A01)
    record = out / "results" / "ada" / f"{A01}.json"
    before = record.stat().st_mtime_ns
    first, second = (q.grade_id for q in repo.assignment(A01).questions)
    _give(out, repo, {first: 1, second: 2})
    with gradebook(out) as gb:
        put_grade(gb, "test_softmax_hidden", {"manual_score": 1}, "ada")  # the grader's 2 of 2
        put_grade(gb, "test_self_attention", {"manual_score": None, "extra_credit": 0.5}, "ada")
        put_comment(gb, second, {"manual_comment": "Right, and *well* put."}, "ada")
    deadlines = load_deadlines(repo.autograder / "deadlines.toml")
    grade_class(submitted, out, repo, timeout=GRADING_TIMEOUT, progress=False, workers=1, deadlines=deadlines,
                only=[A01])
    assert record.stat().st_mtime_ns == before, "the notebook was graded again"
    text = _read(out / "feedback" / "ada" / A01 / f"{A01}.html")
    assert "awaiting" not in text and "Score: 1 / 2" in text and "Score: 2 / 2" in text
    row = _tables(out)[("ada", A01)]
    assert (row["manual_status"], row["manual_score"], row["score"], row["final_score"]) == ("graded", "3", "10.5",
                                                                                            "10.5")
    assert row["by_hand"] == ("test_softmax_hidden: 1 / 2 (given by hand; the grader gave 2); "
                              "test_self_attention: 1 / 1 + 0.5 extra credit")
    assert "Score: 13.5 / 15: 10.5 / 11 graded automatically (changed by hand; the grader gave 11), 3 / 4 in words" \
        in text
    assert text.count("Score: 1 / 2 (given by hand; the grader gave 2)") == 2
    assert text.count(COMMENT[0]) == 1 and "Right, and <em>well</em> put." in text
    assert "Handed in 2026-11-23 19:00 +01:00, due 2026-11-24 23:59 +01:00: on time." in text


def test_counts_agree_with_their_nouns_in_the_report(tmp_path):
    """`transformer-course report` on a class of one: "1 student, 1 assignment, 1 notebook", never "1 assignments"."""
    import json

    from transformer_course.grading.run.publish import write_csvs
    from transformer_course.instructors.report import build_report
    from transformer_course.words import count

    assert (count(1, "assignment"), count(0, "pair"), count(2, "notebook has", "notebooks have")) == (
        "1 assignment", "0 pairs", "2 notebooks have")
    write_csvs([_result()], tmp_path)
    text = build_report(tmp_path).read_text()
    assert "1 student, 1 assignment, 1 notebook;" in text, text[:2000]
    assert "(0 notebooks awaiting)" in text
    assert json.loads((tmp_path / "results.json").read_text())[0]["student_id"] == "ada"


def test_the_first_run_on_a_machine_says_which_solutions_it_measures(repo, monkeypatch, tmp_path):
    """What `grade` prints before its progress bar: the assignments whose solution has no measured
    seconds on this machine yet (for the worker's thread count), and none once they are kept."""
    from transformer_course.grading.notebook import limits

    threads = lambda: os.environ.get("OMP_NUM_THREADS", "-")  # noqa: E731 (the machine's key: its thread count)
    monkeypatch.setattr(limits, "cache_file", lambda _repo, a, version: tmp_path / threads() / f"{a.name}-{version}")
    chosen = [repo.assignment(A01), repo.assignment("02_scaled_dot_product")]
    assert limits.unmeasured(repo, chosen, 1) == [A01, "02_scaled_dot_product"]
    limits.save(_cache_for(repo, chosen[0], 1), {"test_softmax": 0.5})
    assert limits.unmeasured(repo, chosen, 1) == ["02_scaled_dot_product"]
    assert limits.unmeasured(repo, chosen, 3) == [A01, "02_scaled_dot_product"]  # another thread count: its own


def _cache_for(repo, assignment, threads: int) -> Path:
    """Where a grading worker of ``threads`` threads keeps the solution's seconds (as Grader.calibrate does)."""
    from transformer_course.grading.notebook import limits
    from transformer_course.grading.version import grader_version

    with pytest.MonkeyPatch.context() as m:
        m.setenv("OMP_NUM_THREADS", str(threads))
        return limits.cache_file(repo, assignment, grader_version(repo))
