"""Cell metadata put back from the release (transformer_course.grading.submission.intact), in-process; the same edits
are graded through the real path in tests/test_tamper.py (attacks t_grade_off ... t_extra_graded_cell)."""

from __future__ import annotations

import copy

import nbformat
import pytest

from transformer_course.grading.submission.intact import restore_metadata, tamper_note


@pytest.fixture(scope="module")
def release(repo):
    return nbformat.read(repo.root / "course" / "01_self_attention" / "01_self_attention.ipynb", as_version=4)


def _meta(nb):
    return [(c.get("id"), c.metadata.get("nbgrader")) for c in nb.cells]


def test_an_intact_notebook_is_left_as_it_is(release):
    nb = copy.deepcopy(release)
    assert restore_metadata(nb, release) == [] and tamper_note([]) == ""
    assert nb == release


@pytest.mark.parametrize("edit, words", [
    (lambda c: c.metadata.nbgrader.update(grade=False), "grade True -> False"),
    (lambda c: c.metadata.nbgrader.update(points=99), "points 2 -> 99"),
    (lambda c: c.metadata.nbgrader.update(grade_id="mine"), "grade_id 'test_softmax_hidden' -> 'mine'"),
    (lambda c: c.metadata.pop("nbgrader"), "metadata was removed"),
])
def test_an_edited_cell_gets_the_released_metadata_back(release, edit, words):
    nb = copy.deepcopy(release)
    cell = next(c for c in nb.cells if c.get("id") == "09-test_softmax_hidden")
    points = cell.metadata.nbgrader["points"]
    if "points 2" in words:
        words = words.replace("2", repr(points), 1)
    edit(cell)
    changed = restore_metadata(nb, release)
    assert len(changed) == 1 and words in changed[0], changed
    assert _meta(nb) == _meta(release)
    assert words in tamper_note(changed)


def test_a_renamed_cell_without_its_id_is_found_by_grade_id_and_extra_graded_cells_lose_their_metadata(release):
    nb = copy.deepcopy(release)
    answer = next(c for c in nb.cells if c.get("id") == "07-softmax")
    answer["id"] = "pasted-cell"  # a copy pasted back in gets a new id; its grade_id still names it
    answer.metadata["deletable"] = True
    extra = copy.deepcopy(next(c for c in nb.cells if c.get("id") == "08-test_softmax"))
    extra["id"] = "extra"
    nb.cells.insert(3, extra)  # the same grade_id twice: the first is matched, the second stripped
    changed = restore_metadata(nb, release)
    assert answer.metadata["nbgrader"]["grade_id"] == "softmax" and answer.metadata["deletable"] is False
    assert "nbgrader" not in extra.metadata
    assert any("no released cell" in c for c in changed), changed
