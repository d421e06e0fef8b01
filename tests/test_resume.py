"""An interrupted class run resumes where it stopped; `regrade` grades everything again; every
pair has exactly one row whatever happened (no lost or duplicated rows)."""

from __future__ import annotations

import csv
import shutil

import pytest

from transformer_course.grading.run import batch
from transformer_course.grading.run.batch import grade_class

from .conftest import GRADING_TIMEOUT


@pytest.fixture
def small_class(repo, tmp_path):
    submitted = tmp_path / "submitted"
    shutil.copytree(repo.sample_class / "ada" / "01_self_attention", submitted / "ada" / "01_self_attention")
    (submitted / "bob").mkdir()  # handed in nothing: every pair "missing", graded without a kernel
    return submitted


def _rows(out):
    with open(out / "grades.csv") as f:
        return [(r["student_id"], r["assignment"], r["score"], r["status"]) for r in csv.DictReader(f)]


def test_interrupted_run_resumes_and_regrade_forces(repo, tmp_path, small_class, monkeypatch):
    out = tmp_path / "out"
    pairs = 2 * len(repo.assignments())  # two students, every assignment (handed in or missing)
    saved = []
    real_save = batch._save

    def save_then_stop(*args):
        real_save(*args)
        saved.append(args[2].name)
        if len(saved) == 5:
            raise KeyboardInterrupt

    monkeypatch.setattr(batch, "_save", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        grade_class(small_class, out, repo, timeout=GRADING_TIMEOUT, progress=False, workers=1)
    assert not (out / "grades.csv").exists()
    records = sorted(out.glob("results/*/*.json"))
    assert len(records) == 5
    before = {p: p.stat().st_mtime_ns for p in records}

    saved.clear()
    monkeypatch.setattr(batch, "_save", lambda *args: (real_save(*args), saved.append(args[2].name)))
    results = grade_class(small_class, out, repo, timeout=GRADING_TIMEOUT, progress=False, workers=1)
    assert len(saved) == pairs - 5, "only what was missing is graded"
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())
    rows = _rows(out)
    assert len(rows) == len(set(rows)) == pairs == len(results)
    assert ("ada", "01_self_attention", "11", "graded") in rows

    saved.clear()
    grade_class(small_class, out, repo, timeout=GRADING_TIMEOUT, progress=False, workers=1)
    assert saved == [], "nothing changed: nothing graded"
    grade_class(small_class, out, repo, timeout=GRADING_TIMEOUT, progress=False, workers=1, regrade=True)
    assert len(saved) == pairs
    assert _rows(out) == rows


def test_a_changed_submission_is_graded_again(repo, tmp_path, small_class):
    out = tmp_path / "out"
    grade_class(small_class, out, repo, timeout=GRADING_TIMEOUT, progress=False, workers=1)
    nb = small_class / "ada" / "01_self_attention" / "01_self_attention.ipynb"
    nb.write_text("{ not a notebook")
    results = grade_class(small_class, out, repo, timeout=GRADING_TIMEOUT, progress=False, workers=1)
    ada = next(r for r in results if (r.student_id, r.assignment) == ("ada", "01_self_attention"))
    assert ada.status == "invalid"
    with open(out / "lms.csv") as f:
        lms = list(csv.reader(f))
    assert lms[0][0] == "student_id" and any(h.startswith("total") for h in lms[0])
    assert [row[0] for row in lms[1:]] == ["ada", "bob"]


def test_a_change_in_the_grader_code_regrades(repo, tmp_path, monkeypatch):
    """Records of an earlier run are kept only while nothing that decides a grade changed, the
    grader's own code included (a fixed grader must not keep the grades of the broken one)."""
    package = tmp_path / "transformer_course"
    shutil.copytree(batch.__file__.rsplit("/", 2)[0], package, ignore=shutil.ignore_patterns("__pycache__"))
    from transformer_course.grading import version

    monkeypatch.setattr(version, "__file__", str(package / "version.py"))
    before = batch.grader_version(repo, 60)
    assert batch.grader_version(repo, 60) == before
    judge = package / "judging" / "judge.py"
    judge.write_text(judge.read_text() + "\n# changed\n")
    assert batch.grader_version(repo, 60) != before
