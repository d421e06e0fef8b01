"""Every file of an assignment folder is accounted for (grading/submission/handin.py): a notebook is recognised by
its released cells, not by its name; a renamed one is graded with a note, extra ones are named, another
assignment's notebook is ``wrong-notebook`` and other files alone are ``not-a-notebook`` (neither sent
to a kernel), an empty folder stays ``missing``, and the run ends with one block listing them."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil

import pytest
from nbgrader.api import Gradebook, MissingEntry

from transformer_course.grading.run.batch import grade_class
from transformer_course.grading.run.classbook import ClassBook
from transformer_course.grading.submission.handin import Releases, find_submission

from .conftest import GRADING_TIMEOUT

A, B = "01_self_attention", "02_scaled_dot_product"
NB = f"{A}.ipynb"


@pytest.fixture(scope="module")
def graded(repo, tmp_path_factory):
    """One run of notebook 01 over a student per case (two notebooks to grade, the rest without a kernel)."""
    submitted = tmp_path_factory.mktemp("submitted")
    solution, stub, other = repo.solutions / NB, repo.course / A / NB, repo.solutions / f"{B}.ipynb"
    folders = {s: submitted / s / A for s in ("renamed", "two", "wrong", "wrong_named", "files", "empty")}
    for folder in folders.values():
        folder.mkdir(parents=True)
    shutil.copyfile(solution, folders["renamed"] / "Untitled.ipynb")
    shutil.copyfile(solution, folders["two"] / "Untitled.ipynb")
    shutil.copyfile(stub, folders["two"] / f"{A} (1).ipynb")
    # The untouched release is the newer file and first by name: only its lack of work puts it second.
    os.utime(folders["two"] / "Untitled.ipynb", (1_700_000_000, 1_700_000_000))
    shutil.copyfile(other, folders["wrong"] / f"{B}.ipynb")
    shutil.copyfile(other, folders["wrong_named"] / NB)  # 02's work saved under 01's name
    (folders["files"] / "answers.py").write_text("def attention(q, k, v):\n    return v\n")
    (folders["files"] / "hw.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    (folders["files"] / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC\n")  # nbgrader's: not counted
    out = tmp_path_factory.mktemp("out")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        results = grade_class(submitted, out, repo, timeout=GRADING_TIMEOUT, progress=False, workers=2, only=[A])
    return {r.student_id: r for r in results}, out, err.getvalue()


def test_a_renamed_notebook_alone_is_graded_with_a_note(graded):
    results, _, _ = graded
    r = results["renamed"]
    assert (r.status, r.score, r.max_score) == ("graded", 11, 11), (r.status, r.reason)
    assert r.reason.startswith(f"graded Untitled.ipynb (expected {NB})"), r.reason
    assert "ignored" not in r.reason


def test_of_two_notebooks_the_one_with_work_is_graded_and_both_are_named(graded):
    results, _, _ = graded
    r = results["two"]
    assert (r.status, r.score) == ("graded", 11), (r.status, r.score, r.reason)
    assert r.reason.startswith(f"graded Untitled.ipynb (expected {NB}); ignored {A} (1).ipynb "
                               "(the released notebook, no work in it)"), r.reason


@pytest.mark.parametrize("student, found", [("wrong", f"{B}.ipynb"), ("wrong_named", NB)])
def test_another_assignments_notebook_is_a_wrong_notebook_not_graded(graded, repo, student, found):
    results, out, _ = graded
    r = results[student]
    assert r.status == "wrong-notebook" and r.score == 0, (r.status, r.score, r.reason)
    assert r.reason.startswith(f"wrong notebook: this is {B}'s notebook ({found}), handed in as {A}"), r.reason
    assert all(e.feedback == r.reason for e in r.exercises), "each exercise says why, once, not a grader's message"
    book = ClassBook(out / "nbgrader", repo)
    with Gradebook(book.coursedir.db_url, book.coursedir.course_id) as gb, pytest.raises(MissingEntry):
        gb.find_submission(A, student)  # nothing was sent to a kernel, nothing is in the gradebook


def test_other_files_alone_are_not_a_notebook_naming_them(graded):
    results, _, _ = graded
    r = results["files"]
    assert r.status == "not-a-notebook" and r.score == 0, (r.status, r.reason)
    assert r.reason.startswith("not a notebook: found answers.py, hw.zip"), r.reason
    assert "timestamp.txt" not in r.reason
    assert "hw.zip: an archive is never unpacked by grading (`transformer-course collect`" in r.reason, r.reason


def test_an_empty_folder_is_missing(graded):
    results, out, _ = graded
    r = results["empty"]
    assert (r.status, r.reason) == ("missing", f"missing: {NB} was not handed in")
    with open(out / "grades.csv") as f:
        rows = {row["student_id"]: row["status"] for row in csv.DictReader(f)}
    assert rows == {"renamed": "graded", "two": "graded", "wrong": "wrong-notebook", "wrong_named": "wrong-notebook",
                    "files": "not-a-notebook", "empty": "missing"}


def test_the_run_ends_with_one_block_naming_every_unusual_hand_in(graded):
    _, _, err = graded
    block = err[err.index("hand-ins not as expected (5"):]
    lines = block.splitlines()[1:]
    assert [line.split(":")[0].strip() for line in lines] == [f"{s} {A}" for s in
                                                              ("files", "renamed", "two", "wrong", "wrong_named")]
    assert f"renamed {A}: graded Untitled.ipynb (expected {NB})" in block
    assert f"files {A}: not a notebook: found answers.py, hw.zip" in block
    assert "empty" not in block, "a notebook not handed in is in the table, not in this block"


def _stripped(path):
    """The notebook as an editor that drops metadata saves it: no cell metadata, no cell ids."""
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        cell["metadata"] = {}
        cell.pop("id", None)
    return nb


def test_notebooks_are_recognised_by_their_cells_without_metadata(repo):
    known = Releases(repo.assignments())
    for name in (A, B):
        seen = known.recognise(_stripped(repo.solutions / f"{name}.ipynb"), A)
        assert seen.assignment == name and seen.share > 0.9 and seen.worked > 0, (name, seen)
    stub = known.recognise(_stripped(repo.course / A / NB), A)
    assert (stub.assignment, stub.worked) == (A, 0), stub  # the release itself: recognised, no work in it
    scratch = {"cells": [{"cell_type": "code", "metadata": {}, "source": "import torch\nprint('my attention')\n"}]}
    assert known.recognise(scratch, A).assignment is None


def test_a_stripped_notebook_beside_another_assignments_is_picked(repo, tmp_path):
    """No grading: find_submission alone, on a folder with 02's notebook and 01's stripped of metadata."""
    folder = tmp_path / "sam" / A
    folder.mkdir(parents=True)
    (folder / "mine.ipynb").write_text(json.dumps(_stripped(repo.solutions / NB)))
    shutil.copyfile(repo.solutions / f"{B}.ipynb", folder / "a.ipynb")
    handed = find_submission(folder, repo.assignment(A), known=Releases(repo.assignments()))
    assert handed.status == "" and handed.path == folder / "mine.ipynb"
    assert handed.note == f"graded mine.ipynb (expected {NB}); ignored a.ipynb ({B}'s notebook). "
    assert handed.unusual and handed.ignored == ["a.ipynb"]


def test_a_linked_notebook_beside_a_real_one_is_named_never_read(repo, tmp_path):
    """A link to the solution beside the student's own notebook: the own one is graded, the link named as
    refused (not followed, so not recognised as the better notebook)."""
    folder = tmp_path / "lee" / A
    folder.mkdir(parents=True)
    shutil.copyfile(repo.course / A / NB, folder / NB)
    os.symlink(repo.solutions / NB, folder / "Untitled.ipynb")
    (folder / "notes").mkdir()
    handed = find_submission(folder, repo.assignment(A), known=Releases(repo.assignments()))
    assert handed.path == folder / NB and handed.data == (repo.course / A / NB).read_bytes()
    assert handed.note.startswith(f"graded {NB}; ignored Untitled.ipynb (refused: lee/{A}/Untitled.ipynb is a "
                                  "symbolic link"), handed.note
    (folder / NB).unlink()
    handed = find_submission(folder, repo.assignment(A), known=Releases(repo.assignments()))
    assert handed.status == "refused" and handed.data is None, handed
