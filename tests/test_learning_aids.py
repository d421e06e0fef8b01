"""Every exercise comes with tiered hints, the paper section and a self-check; solutions link back."""

from __future__ import annotations

import re

import nbformat
import pytest

from transformer_course.layout import Repo

ASSIGNMENTS = [a.name for a in Repo().assignments()]


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_exercise_has_tiered_hints_a_paper_link_and_a_self_check(repo, name):
    assignment = repo.assignment(name)
    nb = nbformat.read(repo.course / name / f"{assignment.notebook}.ipynb", as_version=4)
    for exercise in assignment.exercises:
        at = next(i for i, c in enumerate(nb.cells)
                  if c.metadata.get("nbgrader", {}).get("grade_id") == exercise)
        hints = nb.cells[at - 1]
        assert hints.cell_type == "markdown" and f"`{exercise}`" in hints.source, (
            f"{exercise}: the cell before its answer cell should hold its hints")
        summaries = re.findall(r"<details><summary>(.*?)</summary>", hints.source)
        assert summaries[:3] == ["Hint 1: a nudge", "Hint 2: the idea", "Hint 3: the key line"], summaries
        assert "https://arxiv.org/abs/1706.03762" in hints.source and "§" in hints.source
        assert "**Check yourself:**" in hints.source and "<summary>Answer</summary>" in hints.source
        # Each <details> block is closed, so JupyterLab and Colab render the rest of the cell.
        assert hints.source.count("<details>") == hints.source.count("</details>") == 4


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_solutions_link_back_to_the_student_notebook(repo, name):
    assignment = repo.assignment(name)
    nb = nbformat.read(repo.solutions / f"{assignment.notebook}.ipynb", as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    assert f"course/{name}/{assignment.notebook}.ipynb" in first.source
