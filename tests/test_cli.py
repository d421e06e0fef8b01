"""`transformer-course check` for self-learners, and the CLI's errors."""

from __future__ import annotations

import shutil

import pytest

from transformer_course.cli import main
from transformer_course.grading.judging import judge_box
from transformer_course.grading.kernel import forkserver

from .conftest import GRADING_TIMEOUT


def test_check_prints_the_exercise_table(repo, tmp_path, capsys):
    # A self-learner's attempt: the solution with one exercise broken.
    nb = tmp_path / "my_attempt" / "01_self_attention.ipynb"
    nb.parent.mkdir()
    text = (repo.solutions / "01_self_attention.ipynb").read_text()
    text = text.replace("return query @ key.transpose(-2, -1)", "return key @ query.transpose(-2, -1)")
    nb.write_text(text)
    assert main(["check", str(nb), "--timeout", str(GRADING_TIMEOUT)]) == 0
    printed = capsys.readouterr().out
    assert "01_self_attention: 9 / 11" in printed
    assert "ok softmax" in printed and "-- attention_scores" in printed
    assert "axes swapped" in printed
    assert "Not in this score: 2 questions answered in words (4 points)" in printed


@pytest.mark.skipif(not forkserver.enabled(), reason="kernels are not forked here (no sandbox)")
def test_check_forks_its_kernel_from_the_template_started_before_the_grader_sets_up(repo, tmp_path, monkeypatch,
                                                                                     capsys):
    """`check` starts the kernel template (and the judges') first (they import torch while this process
    sets up nbgrader); the kernel must then come from that template, not from a second one."""
    from transformer_course.grading.notebook import grade
    events = []
    real_server, real_setup = forkserver.ForkServer.__init__, grade.generated_course

    def server(self, *args, **kwargs):
        events.append("template")
        real_server(self, *args, **kwargs)

    def setup(*args, **kwargs):
        events.append("nbgrader set-up")
        return real_setup(*args, **kwargs)

    real_launch = forkserver.ForkProvisioner.launch_kernel

    async def launch(self, *args, **kwargs):
        info = await real_launch(self, *args, **kwargs)
        events.append("forked kernel" if self.forked else "kernel started the ordinary way")
        return info

    monkeypatch.setattr(forkserver.ForkServer, "__init__", server)
    monkeypatch.setattr(grade, "generated_course", setup)
    monkeypatch.setattr(forkserver.ForkProvisioner, "launch_kernel", launch)
    nb = tmp_path / "01_self_attention.ipynb"
    shutil.copyfile(repo.solutions / "01_self_attention.ipynb", nb)
    assert main(["check", str(nb), "--timeout", str(GRADING_TIMEOUT)]) == 0
    assert "01_self_attention: 11 / 11" in capsys.readouterr().out
    # The kernels' template and, where judges are boxed, the judges' (judge_box): both before, none after.
    templates = ["template"] * (2 if judge_box.enabled() else 1)
    assert events == [*templates, "nbgrader set-up", "forked kernel"], events


def test_the_cli_leaves_out_a_slow_optional_import_and_still_validates_notebooks(repo):
    """The CLI keeps jsonschema from importing rfc3987_syntax (0.8 s a command); nbformat still
    validates notebooks, and rejects an invalid one."""
    import subprocess
    import sys

    code = ("import sys, transformer_course.cli, nbformat\n"  # the console script imports the CLI first
            "assert sys.modules.get('rfc3987_syntax') is None\n"
            f"nbformat.validate(nbformat.read({str(repo.solutions / '01_self_attention.ipynb')!r}, as_version=4))\n"
            "bad = nbformat.v4.new_notebook(); bad.cells.append({'cell_type': 'code'})\n"
            "try:\n    nbformat.validate(bad)\nexcept nbformat.ValidationError:\n    print('rejected')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "rejected"


def test_check_finds_the_assignment_of_a_renamed_notebook(repo, tmp_path, capsys):
    nb = tmp_path / "copy of my notebook.ipynb"
    shutil.copyfile(repo.solutions / "02_scaled_dot_product.ipynb", nb)
    assert main(["check", str(nb), "--timeout", str(GRADING_TIMEOUT)]) == 0
    assert "02_scaled_dot_product: 8 / 8" in capsys.readouterr().out


def test_clear_errors(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.ipynb")]) == 2
    assert "no notebook at" in capsys.readouterr().err
    assert main(["grade", str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 2
    assert "expected SUBMITTED/<student_id>/<assignment>/" in capsys.readouterr().err
    other = tmp_path / "other.ipynb"
    other.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    assert main(["check", str(other)]) == 2
    assert "is not a notebook of this course" in capsys.readouterr().err


def test_grade_says_how_it_grades(monkeypatch):
    """`grade` names its configuration, its sandbox and its limits in one line; without the sandbox, it says so."""
    from transformer_course.grading.kernel import sandbox
    from transformer_course.grading.run.batch import setup_line

    limits = {"timeout": 60, "notebook_timeout": 1800, "memory_mb": 4096, "max_output_mb": 10.0}
    line = setup_line(limits)
    assert "nbgrader_config.py" in line and "60 s of CPU time a cell" in line and "4096 MiB" in line
    assert "a kernel's message at most 32 MiB" in line
    assert ("WITHOUT a sandbox" in line) == bool(sandbox.warning())
    monkeypatch.setenv("COURSE_SANDBOX", "off")
    assert "kernels WITHOUT a sandbox" in setup_line(limits)


def test_grade_one_assignment_grades_reports_and_counts_that_one_only(repo, tmp_path, capsys):
    """`--assignment 02` (by number): a class that handed in notebook 02 only gets rows for 02 only,
    in every table and the report; a student without it is missing 02, and nothing else."""
    import csv

    submitted = tmp_path / "submitted"
    for student in ("ana", "bo"):
        (submitted / student).mkdir(parents=True)
    (submitted / "ana" / "02_scaled_dot_product").mkdir()
    shutil.copyfile(repo.solutions / "02_scaled_dot_product.ipynb",
                    submitted / "ana" / "02_scaled_dot_product" / "02_scaled_dot_product.ipynb")
    out = tmp_path / "out"
    assert main(["grade", str(submitted), "--out", str(out), "--assignment", "02", "--workers", "1",
                 "--timeout", str(GRADING_TIMEOUT)]) == 0
    grades = list(csv.DictReader((out / "grades.csv").open()))
    assert [(g["student_id"], g["assignment"], g["score"], g["max_score"], g["status"]) for g in grades] == [
        ("ana", "02_scaled_dot_product", "8", "8", "graded"), ("bo", "02_scaled_dot_product", "0", "8", "missing")]
    assert (out / "lms.csv").read_text().splitlines() == [
        "student_id,02_scaled_dot_product (8),total (8),02_scaled_dot_product written (4)", "ana,8,8,", "bo,0,0,"]
    assert main(["report", str(out)]) == 0
    page = (out / "report" / "index.html").read_text()
    assert "02_scaled_dot_product" in page and "01_self_attention" not in page
    capsys.readouterr()
    assert main(["grade", str(submitted), "--out", str(out), "--assignment", "2_scaled"]) == 2
    assert "the course has 01_self_attention, 02_scaled_dot_product" in capsys.readouterr().err


def test_written_answers_keep_their_points_until_the_answer_changes(repo, tmp_path):
    """Points given in formgrader (here through nbgrader's Gradebook API, as formgrader writes them)
    survive a regrade of the same answers; an answer the student changed awaits grading again."""
    import csv
    import json

    from nbgrader.api import Gradebook

    from transformer_course.grading.run.classbook import ClassBook

    a02 = "02_scaled_dot_product"
    notebook = tmp_path / "submitted" / "ana" / a02 / f"{a02}.ipynb"
    notebook.parent.mkdir(parents=True)
    shutil.copyfile(repo.solutions / f"{a02}.ipynb", notebook)  # the model answers, in words too
    out = tmp_path / "out"
    grade = ["grade", str(tmp_path / "submitted"), "--out", str(out), "--assignment", "02", "--workers", "1",
             "--timeout", str(GRADING_TIMEOUT)]
    assert main(grade) == 0
    first, second = (q.grade_id for q in repo.assignment(a02).questions)
    book = ClassBook(out / "nbgrader", repo)
    with Gradebook(book.coursedir.db_url, book.coursedir.course_id) as gb:
        gb.find_grade(first, a02, a02, "ana").manual_score = 2
        gb.find_grade(second, a02, a02, "ana").manual_score = 1
        gb.db.commit()
    assert main(grade + ["--regrade"]) == 0  # the same answers, graded again: the points stay
    row = next(csv.DictReader((out / "grades.csv").open()))
    assert (row["manual_score"], row["manual_max_score"], row["manual_status"]) == ("3", "4", "graded")
    nb = json.loads(notebook.read_text())
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == second)
    cell["source"] = "A different answer."
    notebook.write_text(json.dumps(nb))
    assert main(grade) == 0  # a changed notebook: graded again; its changed answer awaits
    row = next(csv.DictReader((out / "grades.csv").open()))
    assert (row["manual_score"], row["manual_status"]) == ("", "awaiting")
    with Gradebook(book.coursedir.db_url, book.coursedir.course_id) as gb:
        assert gb.find_grade(first, a02, a02, "ana").manual_score == 2
        assert gb.find_grade(second, a02, a02, "ana").needs_manual_grade
