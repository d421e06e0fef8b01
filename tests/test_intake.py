"""What a class hands in is read without following anything: symbolic links (to the course's solutions,
to a classmate's folder), special files and oversized notebooks are refused before a byte of them is read,
with a message that names the path, and every honest student beside them is graded as usual."""

from __future__ import annotations

import csv
import json
import os
import shutil

import pytest

from transformer_course.grading.run.batch import grade_class
from transformer_course.grading.submission import intake
from transformer_course.instructors.deadlines import load as load_deadlines

from .conftest import GRADING_TIMEOUT

A = "01_self_attention"
NB = f"{A}.ipynb"


@pytest.fixture(scope="module")
def hostile_intake(repo, tmp_path_factory):
    """One class of notebook 01 (the honest ada and eun from the sample class) with a student per trick."""
    submitted = tmp_path_factory.mktemp("submitted")
    for honest in ("ada", "eun"):
        shutil.copytree(repo.sample_class / honest / A, submitted / honest / A)
    (submitted / "eun" / A / "timestamp.txt").unlink(missing_ok=True)
    # eun's timestamp is a link to a file outside the class: not read (the notebook's own time is used)
    os.symlink("/etc/hostname", submitted / "eun" / A / "timestamp.txt")
    (submitted / "linked_notebook" / A).mkdir(parents=True)  # the repository's solution, by link
    os.symlink(repo.solutions / NB, submitted / "linked_notebook" / A / NB)
    (submitted / "linked_renamed" / A).mkdir(parents=True)  # the only notebook, under another name
    os.symlink(repo.solutions / NB, submitted / "linked_renamed" / A / "mine.ipynb")
    (submitted / "linked_folder").mkdir()  # a relative link to a classmate's folder
    os.symlink(f"../ada/{A}", submitted / "linked_folder" / A)
    (submitted / "fifo" / A).mkdir(parents=True)  # reading it would wait forever
    os.mkfifo(submitted / "fifo" / A / NB)
    (submitted / "oversized" / A).mkdir(parents=True)  # a valid notebook over the cap
    nb = json.loads((repo.solutions / NB).read_text())
    nb["metadata"]["padding"] = "x" * (3 * 2**20)
    (submitted / "oversized" / A / NB).write_text(json.dumps(nb))
    out = tmp_path_factory.mktemp("out")
    deadlines = load_deadlines(None, "2026-12-01T23:59:00+01:00", known=[a.name for a in repo.assignments()])
    results = grade_class(submitted, out, repo, timeout=GRADING_TIMEOUT, progress=False, workers=1, only=[A],
                          max_submission_mb=2, deadlines=deadlines)
    return {r.student_id: r for r in results}, out


def test_links_special_files_and_oversized_notebooks_are_refused_not_read(hostile_intake, expected):
    results, out = hostile_intake
    honest = sum(expected["ada"][A].values())  # the sample class's ada, as make grade checks her
    assert results["ada"].status == "graded" and results["ada"].score == honest == 11
    for student, said in (("linked_notebook", f"linked_notebook/{A}/{NB} is a symbolic link"),
                          ("linked_renamed", f"linked_renamed/{A}/mine.ipynb is a symbolic link"),
                          ("linked_folder", f"linked_folder/{A} is a symbolic link (to ../ada/{A})"),
                          ("fifo", f"fifo/{A}/{NB} is a named pipe"),
                          ("oversized", f"oversized/{A}/{NB} is 3.1 MiB, over the 2 MiB")):
        r = results[student]
        assert r.status == "refused", (student, r.status, r.reason)
        assert r.score == 0 and said in r.reason, (student, r.reason)
        page = (out / "feedback" / student / A / NB.replace(".ipynb", ".html")).read_text()
        assert said.split(" is ")[0] in page, "the student's page says which path was refused"
    with open(out / "grades.csv") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert {rows[s]["status"] for s in ("linked_notebook", "linked_folder", "fifo", "oversized")} == {"refused"}
    assert rows["ada"]["score"] == f"{honest:g}"


def test_a_linked_timestamp_is_not_read(hostile_intake):
    results, _ = hostile_intake
    eun = results["eun"]
    assert eun.status == "graded"
    assert "timestamp.txt is a symbolic link (to /etc/hostname): not read" in eun.late_note
    assert open("/etc/hostname").read().strip() not in eun.late_note


def test_a_link_swapped_in_below_a_checked_folder_is_not_followed(tmp_path):
    """The walk opens each folder relative to the one before: no path is resolved twice."""
    (tmp_path / "s" / "ada" / A).mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("the solution")
    os.symlink(tmp_path / "secret.txt", tmp_path / "s" / "ada" / A / NB)
    with pytest.raises(intake.Refused, match="is a symbolic link"):
        intake.read(tmp_path / "s", intake.Path("ada", A, NB))
    (tmp_path / "s" / "ben").mkdir()
    os.symlink(tmp_path, tmp_path / "s" / "ben" / A)
    with pytest.raises(intake.Refused, match=f"ben/{A} is a symbolic link"):
        intake.read(tmp_path / "s", intake.Path("ben", A, "secret.txt"))
    (tmp_path / "s" / "ada" / "big.ipynb").write_bytes(b"{" * 2000)
    with pytest.raises(intake.Refused, match="over the"):
        intake.read(tmp_path / "s", intake.Path("ada", "big.ipynb"), max_bytes=1000)
    assert intake.read(tmp_path / "s", intake.Path("ada", "big.ipynb"), max_bytes=2000) == b"{" * 2000
