"""The real grading path (`transformer-course grade`) on the sample class, solutions and stubs."""

from __future__ import annotations

import csv
import os
import re
import shutil

import pytest


def test_sample_class_matches_its_expectations(graded, expected):
    """Every score, status and feedback keyword of autograder/sample_class.toml, read from the
    CSV files an instructor gets (the same comparison CI runs on `make grade`'s output)."""
    from quality.expected import compare

    _, out = graded
    problems = compare(out, expected, only_expected=False)
    assert not problems, "\n".join(problems)


def test_the_comparison_catches_a_changed_score(graded, expected, tmp_path):
    from quality.expected import compare

    _, out = graded
    for name in ("grades.csv", "exercises.csv"):
        shutil.copyfile(out / name, tmp_path / name)
    text = (tmp_path / "exercises.csv").read_text()
    row = next(line for line in text.splitlines() if line.startswith("ada,01_self_attention,softmax,"))
    (tmp_path / "exercises.csv").write_text(text.replace(row, row.replace(",3,3,", ",2,3,wrong")))
    problems = compare(tmp_path, expected, only_expected=False)
    assert any("ada 01_self_attention softmax: scored 2, expected 3" in p for p in problems), problems
    assert any("ada 01_self_attention: grades.csv says 11" in p for p in problems), problems


def test_full_marks_have_empty_feedback_and_lost_points_explain(graded):
    results, _ = graded
    for result in results.values():
        for e in result.exercises:
            assert (e.feedback == "") == (e.score >= e.max_score), (result.student_id, e)


def test_solutions_score_full_marks(graded, repo):
    results, _ = graded
    for assignment in repo.assignments():
        result = results[("solutions", assignment.name)]
        assert result.status == "graded"
        assert result.score == result.max_score > 0, [e for e in result.exercises if e.feedback]


def test_untouched_stubs_score_zero_without_crashing(graded, repo):
    results, _ = graded
    for assignment in repo.assignments():
        result = results[("stubs", assignment.name)]
        assert result.status == "graded", result.reason
        assert result.score == 0
        assert all("not attempted" in e.feedback for e in result.exercises)


def test_csv_files_have_one_row_per_student_assignment_and_exercise(graded, repo):
    results, out = graded
    students = {s for s, _ in results}
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["student_id", "assignment", "score", "max_score", "status", "submitted_at", "late_by",
                             "late_penalty", "final_score", "manual_score", "manual_max_score", "manual_status",
                             "reason", "by_hand"]
    hal = next(r for r in rows if (r["student_id"], r["assignment"]) == ("hal", "02_scaled_dot_product"))
    assert hal["reason"].startswith("graded 02_scaled_dot_product (1).ipynb"), hal  # renamed: said where it is listed
    assert {(r["student_id"], r["assignment"]) for r in rows} == set(results)
    assert len(rows) == len(students) * len(repo.assignments())
    with open(out / "exercises.csv") as f:
        exercises = list(csv.DictReader(f))
    assert list(exercises[0]) == ["student_id", "assignment", "exercise", "score", "max_score", "feedback"]
    per_student = sum(len(a.exercises) for a in repo.assignments())
    assert len(exercises) == len(students) * per_student
    assert all("\n" not in r["feedback"] for r in exercises)
    for row in rows:  # the totals agree with the exercise rows
        parts = [e for e in exercises if (e["student_id"], e["assignment"]) ==
                 (row["student_id"], row["assignment"])]
        assert sum(float(e["score"]) for e in parts) == float(row["score"])


def test_feedback_html_for_everyone_without_hidden_tests(graded, repo):
    results, out = graded
    leaks = re.compile(r"BEGIN HIDDEN TESTS|course_reference|_checks\.|check_[a-z]+\(|reference_for")
    for (student, assignment_name), _ in results.items():
        assignment = repo.assignment(assignment_name)
        page = out / "feedback" / student / assignment_name / f"{assignment.notebook}.html"
        assert page.is_file(), page
        text = page.read_text()
        found = leaks.search(text)
        assert not found, f"{page} shows hidden test code: {found.group(0)!r}"
    with open(out / "exercises.csv") as f:
        text = f.read()
    assert not leaks.search(text)


def test_tampered_test_cell_is_restored(graded):
    """gus replaced the visible softmax test with a print; nbgrader restores it and it fails."""
    results, out = graded
    html = (out / "feedback" / "gus" / "01_self_attention" / "01_self_attention.html").read_text()
    assert "each row should sum to 1" in html
    assert results[("gus", "01_self_attention")].exercises[0].score == 0


@pytest.mark.parametrize("student", ["hal"])
def test_renamed_notebook_is_graded_with_a_note(graded, student):
    results, _ = graded
    result = results[(student, "02_scaled_dot_product")]
    assert result.status == "graded" and "expected 02_scaled_dot_product.ipynb" in result.reason


def test_feedback_points_at_a_wrong_upstream_exercise(repo):
    from transformer_course.grading.notebook.grade import ExerciseResult, upstream_note

    assignment = repo.assignment("03_multi_head")
    assert assignment.upstream["MultiHeadAttention"] == ["split_heads", "combine_heads"]
    results = [ExerciseResult("split_heads", 0, 2, "split_heads(...): no transpose"),
               ExerciseResult("combine_heads", 2, 2),
               ExerciseResult("MultiHeadAttention", 1, 4, "MultiHeadAttention(...): output differs")]
    note = upstream_note(assignment, "MultiHeadAttention", results)
    assert "`split_heads`" in note and "`combine_heads`" not in note and "reference" in note
    assert upstream_note(assignment, "split_heads", results) == ""
    results[0] = ExerciseResult("split_heads", 2, 2)
    assert upstream_note(assignment, "MultiHeadAttention", results) == ""


def test_no_upstream_note_for_an_exercise_that_never_ran(repo):
    """A cell that never ran has no mistake of its own to place (hal: os._exit in self_attention)."""
    from transformer_course.grading.notebook.grade import ExerciseResult, upstream_note

    assignment = repo.assignment("01_self_attention")
    results = [ExerciseResult("softmax", 3, 3), ExerciseResult("attention_scores", 2, 2),
               ExerciseResult("self_attention", 0, 3, "your answer cell failed: the kernel died while running it"),
               ExerciseResult("SelfAttention", 0, 3, "your answer cell failed: not run: the kernel died in an "
                                                     "earlier cell")]
    assert upstream_note(assignment, "SelfAttention", results) == ""


def test_feedback_pages_name_exercises_and_wrap(graded):
    """The table of contents names each test cell's exercise; long reasons wrap."""
    _, out = graded
    page = (out / "feedback" / "dev" / "01_self_attention" / "01_self_attention.html").read_text()
    assert "Test cell" not in page
    assert '<a href="#test_softmax_hidden">softmax: hidden tests</a>' in page
    assert '<a href="#test_softmax">softmax: tests</a>' in page
    assert "white-space: pre-wrap" in page


def test_scores_do_not_depend_on_the_machine_load(repo, tmp_path):
    """Both cores busy with other work: a correct and a wrong notebook get the same scores."""
    import subprocess
    import sys

    import nbformat

    from quality import attacks
    from transformer_course.grading.run.batch import grade_class

    from .conftest import GRADING_TIMEOUT

    right = nbformat.read(repo.solutions / f"{attacks.A01}.ipynb", as_version=4)
    wrong = nbformat.read(repo.solutions / f"{attacks.A01}.ipynb", as_version=4)
    attacks.set_answer(wrong, "softmax", attacks.WRONG_SOFTMAX)
    for student, nb in (("right", right), ("wrong", wrong)):
        (tmp_path / "in" / student / attacks.A01).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "in" / student / attacks.A01 / f"{attacks.A01}.ipynb")
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        results = grade_class(tmp_path / "in", tmp_path / "out", repo, timeout=GRADING_TIMEOUT, progress=False,
                              workers=2)
    finally:
        for burner in burners:
            burner.kill()
    scores = {r.student_id: {e.exercise: e.score for e in r.exercises} for r in results
              if r.assignment == attacks.A01}
    assert scores["right"] == {k: float(v) for k, v in attacks.FULL.items()}
    assert scores["wrong"] == {k: float(v) for k, v in attacks.NO_SOFTMAX.items()}


def test_feedback_cuts_a_long_message_but_never_the_note_or_the_conclusion(repo):
    """A check's message may run long (values, shapes) and is cut; the sentence that tells the
    student where the mistake is ("so this mistake is in X itself") is never cut."""
    from transformer_course.grading.notebook.grade import MAX_FEEDBACK, ExerciseResult, compose_feedback, upstream_note

    assignment = repo.assignment("03_multi_head")
    long_message = "MultiHeadAttention(...): output differs " + "at index (0, 1, 2) " * 40
    results = [ExerciseResult("split_heads", 0, 2, "split_heads(...): no transpose"),
               ExerciseResult("combine_heads", 2, 2),
               ExerciseResult("MultiHeadAttention", 1, 4, long_message)]
    conclusion = upstream_note(assignment, "MultiHeadAttention", results)
    feedback = compose_feedback("graded x.ipynb (expected 03_multi_head.ipynb). ", long_message, conclusion)
    assert feedback.startswith("graded x.ipynb (expected 03_multi_head.ipynb). MultiHeadAttention(...)")
    assert feedback.endswith("so this mistake is in MultiHeadAttention itself."), feedback
    assert "..." in feedback and len(feedback) < MAX_FEEDBACK + len(conclusion) + 60
    short = compose_feedback("", "softmax(x): wrong axis.", "")
    assert short == "softmax(x): wrong axis."
    # Cut at the end of a word: "...the padded positions, wh..." left the student to guess the rest.
    from transformer_course.grading.notebook.grade import one_line
    cut = one_line("the logits differ at positions whose queries attend", 40)
    assert cut == "the logits differ at positions whose...", cut
    assert one_line("x" * 50, 20) == "x" * 17 + "..."


def test_same_answers_same_scores_under_any_threads_and_load(repo, tmp_path):
    """Notebook 08 of ada and ben (sample class: full marks expected; ben's GroupedQueryAttention scored
    1/4 on busy machines when float32 gradients were compared element-wise) graded with 1, 2 and 4
    torch threads per kernel, the last while two processes keep every core busy: identical scores,
    all of them those of autograder/sample_class.toml."""
    import shutil
    import subprocess
    import sys
    import tomllib

    from transformer_course.grading.run.batch import grade_class

    from .conftest import GRADING_TIMEOUT

    a08 = "08_modern_decoder"
    expected = tomllib.loads((repo.autograder / "sample_class.toml").read_text())
    for student in ("ada", "ben"):
        shutil.copytree(repo.autograder / "submitted" / student / a08, tmp_path / "in" / student / a08)
    runs = {}
    for threads in (1, 2, 4):
        burners = ([subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
                   if threads == 4 else [])
        try:
            results = grade_class(tmp_path / "in", tmp_path / f"out{threads}", repo, timeout=GRADING_TIMEOUT,
                                  progress=False, workers=1, threads=threads)
        finally:
            for burner in burners:
                burner.kill()
        runs[threads] = {r.student_id: {e.exercise: e.score for e in r.exercises} for r in results}
    assert runs[1] == runs[2] == runs[4], runs
    for student in ("ada", "ben"):
        assert runs[1][student] == {k: float(v) for k, v in expected[student][a08].items()}, runs[1][student]


def _own_machine(monkeypatch) -> None:
    """The limits these tests write and delete are kept under a machine name of their own: a grading run beside
    them (the other pytest process) keeps reading this machine's."""
    from transformer_course.grading.notebook import limits

    monkeypatch.setattr(limits.platform, "node", lambda: f"tests-{os.getpid()}")


def test_limits_are_measured_on_the_solution_once_per_machine(repo, tmp_path, monkeypatch):
    """The grader times the solution's cells on this machine (graded through the same path, full marks)
    and keeps them: the next grader reads them instead of grading the solution again."""
    from transformer_course.grading.notebook import limits, nbgrader_setup
    from transformer_course.grading.notebook.grade import Grader
    from transformer_course.grading.run.batch import grader_version

    assignment = repo.assignment("01_self_attention")
    _own_machine(monkeypatch)
    cache = limits.cache_file(repo, assignment, grader_version(repo))
    cache.unlink(missing_ok=True)
    monkeypatch.setattr(nbgrader_setup, "SOLUTION_SECONDS", {})  # this process: nothing measured yet
    import transformer_course.grading.notebook.grade as grade_module
    monkeypatch.setattr(grade_module, "SOLUTION_SECONDS", nbgrader_setup.SOLUTION_SECONDS)
    seconds = Grader(tmp_path / "a", repo, 60, only=assignment.name).calibrate(assignment)
    tests = {t.grade_id for t in assignment.tests}
    # CPU seconds, counted in clock ticks (10 ms): a cell that only defines a function may spend none
    assert tests <= set(seconds) and all(0 <= s < 60 for s in seconds.values()), seconds
    assert sum(seconds[t] for t in tests) > 0.1, seconds  # the tests compute something
    assert limits.load(cache) == seconds
    nbgrader_setup.SOLUTION_SECONDS.clear()
    kept = {**seconds, "test_softmax": 123.0}  # read from the cache, not measured again
    limits.save(cache, kept)
    assert Grader(tmp_path / "b", repo, 60, only=assignment.name).calibrate(assignment) == kept
    cache.unlink()


def test_a_solution_that_lost_points_is_timed_once_and_reported_to_instructors_only(repo, tmp_path, monkeypatch,
                                                                                      capsys):
    """A busy machine can cost the solution points (a cell killed at its limit): its seconds are kept
    all the same (a student's next check does not grade it again), and the shortfall is printed to
    whoever grades a class at each run, never to a student checking their own notebook."""
    from transformer_course.grading.notebook import grade as grade_module
    from transformer_course.grading.notebook import limits, nbgrader_setup
    from transformer_course.grading.notebook.grade import ExerciseResult, Grader, SubmissionResult
    from transformer_course.grading.run.batch import grader_version

    assignment = repo.assignment("01_self_attention")
    _own_machine(monkeypatch)
    cache = limits.cache_file(repo, assignment, grader_version(repo))
    kept_before = limits.load(cache)
    cache.unlink(missing_ok=True)
    monkeypatch.setattr(nbgrader_setup, "SOLUTION_SECONDS", {})
    monkeypatch.setattr(grade_module, "SOLUTION_SECONDS", nbgrader_setup.SOLUTION_SECONDS)
    graded = []

    def short_grade(self, student_id, assignment, notebook, *args, **kwargs):
        graded.append(student_id)
        return SubmissionResult(student_id, assignment.name, "graded", "", [
            ExerciseResult("softmax", 0.0, 2.0, "did not finish within 30 s"),
            ExerciseResult("self_attention", 3.0, 3.0)])

    monkeypatch.setattr(Grader, "grade", short_grade)
    monkeypatch.setattr(Grader, "autograded", lambda self, a: tmp_path / "missing.ipynb")
    try:
        student = Grader(tmp_path / "a", repo, 60, only=assignment.name)
        student.for_student = True
        assert student.calibrate(assignment) == {} and graded == ["solution"]
        assert limits.load(cache) == {}  # kept, though the solution lost points
        assert "lost points in softmax (did not finish within 30 s)" in limits.shortfall(cache)
        assert "warning" not in capsys.readouterr().err  # the student is not told about the solution
        nbgrader_setup.SOLUTION_SECONDS.clear()
        assert Grader(tmp_path / "b", repo, 60, only=assignment.name).calibrate(assignment) == {}
        assert graded == ["solution"]  # read from the cache, not graded again
        err = capsys.readouterr().err
        assert "warning: the solution of 01_self_attention, graded on this machine, lost points in softmax" in err
        assert "grades made here may be wrong" in err
    finally:
        limits.save_shortfall(cache, "")
        cache.unlink(missing_ok=True)
        if kept_before is not None:
            limits.save(cache, kept_before)


def test_written_answers_await_the_instructor_then_show_the_points_given(graded, repo, tmp_path):
    """Answers in words on the sample class: awaiting (not zero, not full) in grades.csv, lms.csv,
    results.json and the report; the points an instructor gives in formgrader (written here through
    nbgrader's Gradebook API, as formgrader writes them) show after `transformer-course report`,
    which grades nothing again. A question left unanswered has 0 without waiting."""
    import json

    from nbgrader.api import Gradebook

    from transformer_course.cli import main
    from transformer_course.grading.run.classbook import ClassBook

    a01 = "01_self_attention"
    out = tmp_path / "out"
    shutil.copytree(graded[1], out)

    def tables() -> tuple[dict, dict, dict]:
        with open(out / "grades.csv") as f:
            grades = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}
        with open(out / "lms.csv") as f:
            lms = {r["student_id"]: r for r in csv.DictReader(f)}
        results = {(r["student_id"], r["assignment"]): r for r in json.loads((out / "results.json").read_text())}
        return grades, lms, results

    column = f"{a01} written ({repo.assignment(a01).manual_max_score:g})"
    grades, lms, results = tables()
    assert (grades[("ada", a01)]["manual_status"], grades[("ada", a01)]["manual_score"]) == ("awaiting", "")
    assert lms["ada"][column] == "" and results[("ada", a01)]["manual_score"] is None
    assert (grades[("cho", a01)]["manual_status"], grades[("cho", a01)]["manual_score"]) == ("graded", "0")
    assert grades[("ivy", a01)]["manual_status"] == ""  # unreadable: nothing to grade by hand
    assert main(["report", str(out)]) == 0
    assert "written awaiting" in (out / "report" / "index.html").read_text()

    book = ClassBook(out / "nbgrader", repo)
    first, second = (q.grade_id for q in repo.assignment(a01).questions)
    with Gradebook(book.coursedir.db_url, book.coursedir.course_id) as gb:
        gb.find_grade(first, a01, a01, "ada").manual_score = 2
        gb.find_grade(second, a01, a01, "ada").manual_score = 1.5
        gb.db.commit()
    assert main(["report", str(out)]) == 0
    grades, lms, results = tables()
    assert (grades[("ada", a01)]["manual_status"], grades[("ada", a01)]["manual_score"]) == ("graded", "3.5")
    assert lms["ada"][column] == "3.5" and results[("ada", a01)]["manual_score"] == 3.5
    assert grades[("ada", a01)]["score"] == "11"  # the autograded score is apart
    assert "written 3.5 / 4" in (out / "report" / "index.html").read_text()


def test_nbgraders_own_autograde_with_the_course_config_grades_as_the_course_does(repo, tmp_path):
    """An instructor who runs nbgrader's own `autograde` (its CLI, or the formgrader's button) with the
    course's configuration, where its kernels are not started in the sandbox and nothing of the course's
    grader is around it: a right and a wrong notebook get the scores the course's grader gives them (each
    notebook judged in nbgrader's process, and told that it is graded)."""
    import subprocess
    import sys
    from pathlib import Path

    import nbformat

    from quality import attacks
    from quality.bench import _bare_scores, bare_course

    from .conftest import GRADING_TIMEOUT

    right = nbformat.read(repo.solutions / f"{attacks.A01}.ipynb", as_version=4)
    wrong = nbformat.read(repo.solutions / f"{attacks.A01}.ipynb", as_version=4)
    attacks.set_answer(wrong, "softmax", attacks.WRONG_SOFTMAX)
    # Right only where the notebook is told that it is graded (07 skips its training then).
    attacks.set_answer(right, "softmax", "import os\n\ndef softmax(x, dim=-1):\n"
                       "    assert os.environ.get('COURSE_GRADING') == '1', 'not told that it is graded'\n"
                       "    e = (x - x.amax(dim, keepdim=True)).exp()\n    return e / e.sum(dim, keepdim=True)\n")
    for student, nb in (("right", right), ("wrong", wrong)):
        (tmp_path / "submitted" / student / attacks.A01).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "submitted" / student / attacks.A01 / f"{attacks.A01}.ipynb")
    env = bare_course(repo, tmp_path, GRADING_TIMEOUT)
    nbgrader = str(Path(sys.executable).with_name("nbgrader"))
    for command in (["generate_assignment", attacks.A01, "--force"], ["autograde", attacks.A01, "--create", "--force"]):
        done = subprocess.run([nbgrader, *command], capture_output=True, text=True, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
    scores = _bare_scores(tmp_path, repo)
    cells = {student: {cell.removeprefix("test_").removesuffix("_hidden") for cell in scores[(student, attacks.A01)]}
             for student in ("right", "wrong")}
    assert cells["right"] == cells["wrong"] and cells["right"] >= set(attacks.FULL)
    for student, expected in (("right", attacks.FULL), ("wrong", attacks.NO_SOFTMAX)):
        got = {exercise: sum(v for cell, v in scores[(student, attacks.A01)].items()
                             if cell.removeprefix("test_").removesuffix("_hidden") == exercise)
               for exercise in expected}
        assert got == {k: float(v) for k, v in expected.items()}, (student, got)


FORMGRADER_SUBMISSIONS = """
import json
import sys

from nbgrader.apps import NbGraderAPI
from nbgrader.apps.baseapp import NbGrader
from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension

app = NbGrader()
app.initialize([])  # reads ./nbgrader_config.py, as the formgrader does
# As the formgrader's request handlers make nbgrader's API: the formgrader extension is its parent.
api = NbGraderAPI(app.coursedir, parent=FormgradeExtension(parent=app))
assignment, student = sys.argv[1:3]


def page():
    return {s["student"]: [s["autograded"], s["timestamp"]] for s in api.get_submissions(assignment)}


before = page()
pressed = api.autograde(assignment, student)  # the page's Autograde button
print(json.dumps({"before": before, "after": page(), "success": pressed["success"], "log": pressed.get("log", "")}))
"""


def test_the_formgraders_submissions_page_shows_hand_ins_as_graded_and_its_autograde_button_refuses(graded):
    """The formgrader's submissions page on OUT/nbgrader, read through nbgrader's API as its handlers make it
    (the formgrader extension as its parent, the configuration `grade` wrote there): every handed-in 01 shows
    as autograded, with its hand-in time (nbgrader's needs-autograding compares submitted/'s timestamp.txt with
    the gradebook's); and its Autograde button refuses with one line naming `transformer-course grade`,
    leaving the page as it was (nothing copied, recorded or removed)."""
    import datetime as dt
    import json
    import subprocess
    import sys

    from quality.attacks import A01
    from transformer_course.grading.notebook.nbgrader_setup import FORMGRADER_REFUSAL

    results, out = graded
    handed_in = {s: r for (s, a), r in results.items() if a == A01 and r.status in ("graded", "crashed")}
    assert len(handed_in) > 3 and all(r.submitted_at for r in handed_in.values())
    done = subprocess.run([sys.executable, "-c", FORMGRADER_SUBMISSIONS, A01, next(iter(handed_in))],
                          cwd=out / "nbgrader", capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    shown = json.loads(done.stdout.splitlines()[-1])
    expected = {s: [True, dt.datetime.fromisoformat(r.submitted_at).astimezone(dt.UTC).replace(tzinfo=None).isoformat()]
                for s, r in handed_in.items()}
    assert {s: shown["before"][s] for s in handed_in} == expected
    assert not shown["success"] and shown["log"].strip() == f"[ERROR] {FORMGRADER_REFUSAL}"
    assert "transformer-course grade" in FORMGRADER_REFUSAL
    assert shown["after"] == shown["before"]
