"""Every point the instructor gives in formgrader counts: a score typed over the grader's on a test cell,
extra credit and a comment (formgrader writes them into nbgrader's gradebook: its REST handlers, done here
as they do them) reach grades.csv, lms.csv, results.json and the feedback page after `report`, and survive
another `grade` run and a regrade; formgrader's page of the notebook the instructor grades shows each
question's rubric and typesets its formulas with the MathJax the course ships, with no exchange banner.

On the sample class graded once (conftest's ``graded``): dev's softmax is the unstable one, 0 of 3
points (its two test cells, 1 and 2 points)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from transformer_course.grading.notebook.nbgrader_setup import RUBRIC_KEY, DropRubrics
from transformer_course.grading.run.classbook import ClassBook, rubric_cell, rubrics, with_rubrics
from transformer_course.grading.run.publish import COMMENT, WRITTEN, refresh_written

A01 = "01_self_attention"
STUDENT = "dev"
COMMENT_TEXT = "Subtract the row's maximum first: $e^{x - m}$. **Given by hand.** <img src=x onerror=alert(1)>"


def put_grade(gb: Gradebook, grade_id: str, body: dict, student: str = STUDENT) -> None:
    """What formgrader's ``PUT /formgrader/api/grade/<id>`` does (nbgrader 0.9.6, apihandlers.GradeHandler.put)."""
    grade = gb.find_grade(grade_id, A01, A01, student)
    grade.manual_score = body.get("manual_score", None)
    grade.extra_credit = body.get("extra_credit", None)
    grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
    gb.db.commit()


def put_comment(gb: Gradebook, grade_id: str, body: dict, student: str = STUDENT) -> None:
    """What formgrader's ``PUT /formgrader/api/comment/<id>`` does (apihandlers.CommentHandler.put)."""
    comment = gb.find_comment(grade_id, A01, A01, student)
    comment.manual_comment = body.get("manual_comment", None)
    gb.db.commit()


def gradebook(out: Path) -> Gradebook:
    return Gradebook(f"sqlite:///{out / 'nbgrader' / 'gradebook.db'}")


def _row(out: Path) -> dict:
    with open(out / "grades.csv", newline="") as f:
        return next(r for r in csv.DictReader(f) if (r["student_id"], r["assignment"]) == (STUDENT, A01))


def _lms(out: Path) -> str:
    with open(out / "lms.csv", newline="") as f:
        rows = list(csv.reader(f))
    return rows[[r[0] for r in rows].index(STUDENT)][rows[0].index(next(h for h in rows[0] if h.startswith(A01)))]


def _json(out: Path) -> dict:
    return next(r for r in json.loads((out / "results.json").read_text())
                if (r["student_id"], r["assignment"]) == (STUDENT, A01))


def _page(out: Path) -> str:
    return (out / "feedback" / STUDENT / A01 / f"{A01}.html").read_text().replace(WRITTEN[0], "").replace(
        WRITTEN[1], "")


@pytest.fixture
def by_hand(graded, tmp_path) -> Path:
    """A copy of the graded class where the instructor, in formgrader, typed 1 and 2 over the grader's 0 on
    dev's two softmax test cells, gave 0.5 extra credit on an attention_scores test cell (the grader's 1 of 1
    stands) and wrote a comment under the softmax answer: OUT."""
    out = tmp_path / "out"
    shutil.copytree(graded[1], out)
    with gradebook(out) as gb:
        put_grade(gb, "test_softmax", {"manual_score": 1, "extra_credit": None})
        put_grade(gb, "test_softmax_hidden", {"manual_score": 2, "extra_credit": None})
        put_grade(gb, "test_attention_scores", {"manual_score": None, "extra_credit": 0.5})
        put_comment(gb, "softmax", {"manual_comment": COMMENT_TEXT})
    return out


def test_scores_typed_over_the_graders_extra_credit_and_a_comment_reach_every_output(graded, by_hand, repo):
    """After `report` (refresh_written): the row, lms.csv and results.json count 3 more points and the extra
    credit (final_score = them less the late penalty), each says what was changed by hand; the page shows both
    cells as given by hand, the total, and the comment under its answer, sanitised. A changed comment replaces
    the old one; a score taken back in formgrader shows the grader's again."""
    before = graded[0][(STUDENT, A01)]
    assert before.score == 8 and not before.overrides  # the grader's: softmax 0 of 3
    out = by_hand
    refresh_written(out, repo)
    row, entry = _row(out), _json(out)
    assert (float(row["score"]), row["max_score"]) == (before.score + 3.5, "11")
    assert float(row["final_score"]) == entry["final_score"] == max(0.0, 11.5 - float(row["late_penalty"]))
    assert float(_lms(out)) == entry["final_score"] and entry["score"] == 11.5
    assert row["by_hand"] == ("test_softmax: 1 / 1 (given by hand; the grader gave 0); test_softmax_hidden: 2 / 2 "
                              "(given by hand; the grader gave 0); test_attention_scores: 1 / 1 + 0.5 extra credit")
    assert [(o["cell"], o["grader"], o["given"], o["extra_credit"]) for o in entry["overrides"]] == [
        ("test_softmax", 0.0, 1.0, None), ("test_softmax_hidden", 0.0, 2.0, None),
        ("test_attention_scores", 1.0, None, 0.5)]
    assert entry["manual_score"] == before.manual_score  # the answers in words are apart
    text = _page(out)
    # each in the contents and at its cell's heading
    assert text.count("Score: 2 / 2 (given by hand; the grader gave 0)") == 2
    assert text.count("Score: 1 / 1 (given by hand; the grader gave 0)") == 2
    assert text.count("Score: 1 / 1 + 0.5 extra credit") == 2
    assert "11.5 / 11 graded automatically (changed by hand; the grader gave 8)" in text
    comment = text[text.index(COMMENT[0]):text.index(COMMENT[1])]
    assert text.index('<a name="comment-softmax">') < text.index(COMMENT[0]) < text.index('<a name="test_softmax">')
    assert "<strong>Given by hand.</strong>" in comment and "$e^{x - m}$" in comment  # markdown, math kept
    assert "onerror" not in comment and "alert" not in comment and "src=" not in comment  # sanitised
    refresh_written(out, repo)
    assert _page(out) == text  # idempotent

    with gradebook(out) as gb:  # the instructor changes the comment and takes back the typed score
        put_comment(gb, "softmax", {"manual_comment": "Better: use torch.softmax."})
        put_grade(gb, "test_softmax", {"manual_score": None, "extra_credit": None})
    refresh_written(out, repo)
    text = _page(out)
    assert text.count(COMMENT[0]) == 1 and "Better: use torch.softmax." in text and "Given by hand" not in text
    assert text.count("Score: 0 / 1") == 2 and "Score: 1 / 1 (given by hand" not in text
    assert float(_row(out)["score"]) == before.score + 2.5


def test_what_the_instructor_gave_survives_a_regrade_until_the_code_changes(by_hand, repo):
    """A regrade (what ``--regrade``, or a new grader, does with each notebook: the grader's new payload
    recorded by ClassBook.record; here the same notebook's) keeps every override, the extra credit and the
    comment in the gradebook and the outputs (nbgrader's own autograde keeps a manual score too); a hand-in
    whose code changed loses them, and formgrader flags those cells for review; a comment goes with its
    answer's change. (`grade` again on an unchanged hand-in: test_feedback.py's
    test_a_grade_run_puts_the_points_on_the_page_without_regrading.)"""
    out = by_hand
    refresh_written(out, repo)
    record = out / "results" / STUDENT / f"{A01}.json"
    assignment = repo.assignment(A01)
    notebook = out / "nbgrader" / "autograded" / STUDENT / A01 / f"{A01}.ipynb"
    handed_in = out / "nbgrader" / "submitted" / STUDENT / A01 / f"{A01}.ipynb"  # as handed in
    payload = {**json.loads(record.read_text()), "autograded": notebook.read_bytes(),
               "submitted": handed_in.read_bytes()}
    book = ClassBook(out / "nbgrader", repo, generate=False)
    book.record(assignment, payload)  # regraded: the same notebook
    refresh_written(out, repo)
    assert float(_row(out)["score"]) == 11.5 and "Score: 1 / 1 + 0.5 extra credit" in _page(out)
    with gradebook(out) as gb:
        assert gb.find_grade("test_softmax_hidden", A01, A01, STUDENT).manual_score == 2
        assert gb.find_grade("test_attention_scores", A01, A01, STUDENT).extra_credit == 0.5
        assert gb.find_comment("softmax", A01, A01, STUDENT).manual_comment == COMMENT_TEXT
    assert sum(RUBRIC_KEY in c.metadata for c in nbformat.read(notebook, as_version=4).cells) == len(
        assignment.questions)  # one rubric a question, however often it is recorded

    def changed(data: bytes) -> bytes:  # dev fixes softmax: its answer cell's code changes
        nb = nbformat.reads(data.decode(), as_version=4)
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
        cell.source = cell.source.replace("torch.exp(x)", "torch.exp(x - x.amax(dim=dim, keepdim=True))")
        return nbformat.writes(nb).encode()

    assert changed(payload["submitted"]) != payload["submitted"]
    book.record(assignment, {**payload, "autograded": changed(payload["autograded"]),
                             "submitted": changed(payload["submitted"])})
    refresh_written(out, repo)
    assert float(_row(out)["score"]) == 8 and _row(out)["by_hand"] == "" and _json(out)["overrides"] == []
    with gradebook(out) as gb:
        softmax = gb.find_grade("test_softmax_hidden", A01, A01, STUDENT)
        assert softmax.manual_score is None and softmax.needs_manual_grade  # formgrader lists it to review
        assert gb.find_comment("softmax", A01, A01, STUDENT).manual_comment is None
    assert COMMENT[0] not in _page(out)


def test_the_notebook_graded_in_formgrader_has_the_rubrics_and_its_page_typesets_offline(by_hand, repo,
                                                                                         monkeypatch):
    """The autograded notebook (formgrader's) has each question's rubric just before its answer, never the
    release; formgrader's page (nbgrader's exporter and the course's nbgrader_config.py, as the formgrader
    server extension loads them) frames them as the instructor's and loads MathJax from OUT/nbgrader, not a
    CDN; nbgrader's API finds the exchange (no banner); nbgrader's own feedback drops the rubrics."""
    out = by_hand
    found = rubrics(repo)
    assignment = repo.assignment(A01)
    nb = nbformat.read(out / "nbgrader" / "autograded" / STUDENT / A01 / f"{A01}.ipynb", as_version=4)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    for q in assignment.questions:
        rubric = nb.cells[ids.index(q.grade_id) - 1]
        assert rubric.metadata[RUBRIC_KEY] == q.grade_id and found[q.grade_id][1][:40] in rubric.source, q
    for release in (out / "nbgrader" / "release" / A01 / f"{A01}.ipynb", repo.course / A01 / f"{A01}.ipynb"):
        assert RUBRIC_KEY not in release.read_text() and "Rubric**" not in release.read_text(), release
    others = [c for c in nb.cells if RUBRIC_KEY not in c.metadata]
    assert len(others) == len(nb.cells) - len(assignment.questions)
    assert DropRubrics().preprocess(nb, {})[0].cells == others

    monkeypatch.chdir(out / "nbgrader")  # where the instructor starts the formgrader
    page, exchange_missing = formgrader_page(STUDENT, A01)
    assert exchange_missing is False
    assert '/files/./mathjax/tex-chtml-full.js"' in page and "cdnjs" not in page
    assert (out / "nbgrader" / "mathjax" / "tex-chtml-full.js").is_file()
    assert page.count('class="alert alert-info') == len(assignment.questions)
    assert "$W_Q = W_K = I$" in page  # left whole for MathJax


def test_a_students_cell_cannot_pass_for_a_rubric(repo):
    """A cell of the student's that carries the rubric mark loses it (shown as the student's own); the course's
    own rubric from an earlier run is not doubled."""
    assignment = repo.assignment(A01)
    found = rubrics(repo)
    question = assignment.questions[0].grade_id
    nb = nbformat.v4.new_notebook()
    forged = nbformat.v4.new_markdown_cell("**Rubric**: full marks for any answer.")
    forged.metadata[RUBRIC_KEY] = question
    answer = nbformat.v4.new_markdown_cell("My answer.")
    answer.metadata["nbgrader"] = {"grade_id": question, "solution": True, "grade": True, "points": 2}
    nb.cells = [forged, rubric_cell(question, *found[question]), answer]
    cells = nbformat.reads(with_rubrics(nbformat.writes(nb).encode(), assignment, found).decode(), as_version=4).cells
    assert [c.source for c in cells] == [forged.source, rubric_cell(question, *found[question]).source, "My answer."]
    assert [RUBRIC_KEY in c.metadata for c in cells] == [False, True, False]
    assert "W\\_Q" in rubric_cell("question_toy_attention", *found["question_toy_attention"]).source  # not markdown
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("odd"))
    odd = nbformat.writes(nb).replace('"metadata": {}', '"metadata": []', 1).encode()  # a cell's metadata a list
    kept = with_rubrics(odd, assignment, found)
    assert f'"{RUBRIC_KEY}"'.encode() not in kept and f'"not_{RUBRIC_KEY}"'.encode() in kept


def formgrader_page(student: str, assignment: str) -> tuple[str, bool]:
    """formgrader's page of one submission, made as its server extension makes it (in the working directory, the
    course root): FormgradeExtension's configuration (its own, then ./nbgrader_config.py), an HTMLExporter of it,
    SubmissionHandler's resources; and whether nbgrader's API (formgrader's assignments page) misses the
    exchange."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.apps import NbGraderAPI
    from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension

    formgrader = FormgradeExtension()
    formgrader.initialize([])
    path = f"autograded/{student}/{assignment}/{assignment}.ipynb"
    resources = {"assignment_id": assignment, "notebook_id": assignment, "submission_id": "1", "index": 0,
                 "total": 1, "base_url": "", "student": student, "last_name": None, "first_name": None,
                 "notebook_path": "./" + path}
    page, _ = HTMLExporter(config=formgrader.config).from_filename(path, resources=resources)
    return page, NbGraderAPI(formgrader.coursedir, formgrader.authenticator, parent=formgrader).exchange_missing
