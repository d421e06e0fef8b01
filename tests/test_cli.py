"""`transformer-course check` for self-learners, and the CLI's errors."""

from __future__ import annotations

import shutil

from transformer_course.cli import main

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
