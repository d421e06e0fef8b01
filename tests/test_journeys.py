"""The README's commands as people type them: subprocesses, the README's relative paths, run from
the repository root and from elsewhere, checked on what a person looks at (the printed table,
the files written, the exit status). Each command run here is quoted from the README, and a test
fails if the README stops saying it."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from .conftest import GRADING_TIMEOUT, ROOT, documentation

README = documentation()  # the front page and the guides
BIN = Path(sys.executable).parent
# The README says `.venv/bin/transformer-course`; the suite may run from another environment.
CLI = ".venv/bin/transformer-course"
if not (ROOT / CLI).exists():
    CLI = str(BIN / "transformer-course")


def run(command: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRANSFORMER_COURSE_ROOT"}  # found from where it runs
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def said(text: str) -> None:
    assert text in README, f"neither the README nor a guide says {text!r} any more: update this test with it"


@pytest.fixture
def scratch():
    """A folder inside the checkout, as a user's relative paths would name it (out/ is gitignored)."""
    path = ROOT / "out" / f"journey-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _class(folder: Path) -> Path:
    """Two students: ada's correct 01, and dev's 01 with an unstable softmax; nothing else handed in."""
    submitted = folder / "submitted"
    for student in ("ada", "dev"):
        shutil.copytree(ROOT / "autograder" / "submitted" / student / "01_self_attention",
                        submitted / student / "01_self_attention")
    return submitted


def test_self_learner_checks_a_notebook_by_a_relative_path_from_the_root():
    said(".venv/bin/transformer-course check path/to/01_self_attention.ipynb")
    result = run([CLI, "check", "solutions/01_self_attention.ipynb", "--timeout", str(GRADING_TIMEOUT)], ROOT)
    assert result.returncode == 0, result.stderr
    assert "01_self_attention: 11 / 11" in result.stdout
    assert "ok softmax" in result.stdout


def test_self_learner_checks_from_their_own_folder(tmp_path):
    mine = tmp_path / "my work"
    mine.mkdir()
    text = (ROOT / "solutions" / "01_self_attention.ipynb").read_text()
    (mine / "01_self_attention.ipynb").write_text(
        text.replace("return query @ key.transpose(-2, -1)", "return key @ query.transpose(-2, -1)"))
    result = run([str(ROOT / CLI), "check", "01_self_attention.ipynb", "--timeout", str(GRADING_TIMEOUT)], mine)
    assert result.returncode == 0, result.stderr
    assert "01_self_attention: 9 / 11" in result.stdout
    assert "-- attention_scores" in result.stdout and "axes swapped" in result.stdout
    assert sorted(p.name for p in mine.iterdir()) == ["01_self_attention.ipynb"], "check writes nothing beside it"


def test_check_speaks_json_for_a_ci_job(tmp_path):
    said(".venv/bin/transformer-course check 01_self_attention.ipynb --json")
    text = (ROOT / "solutions" / "01_self_attention.ipynb").read_text()
    (tmp_path / "01_self_attention.ipynb").write_text(
        text.replace("return query @ key.transpose(-2, -1)", "return key @ query.transpose(-2, -1)"))
    result = run([str(ROOT / CLI), "check", "01_self_attention.ipynb", "--json",
                  "--timeout", str(GRADING_TIMEOUT)], tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["assignment"], report["status"], report["score"], report["max_score"]) == (
        "01_self_attention", "graded", 9, 11)
    scores = {e["exercise"]: (e["score"], e["max_score"]) for e in report["exercises"]}
    assert scores["attention_scores"] == (0, 2) and scores["softmax"] == (3, 3)
    assert "axes swapped" in next(e["feedback"] for e in report["exercises"] if e["exercise"] == "attention_scores")


def test_check_of_a_missing_notebook_says_so():
    result = run([CLI, "check", "path/to/01_self_attention.ipynb"], ROOT, timeout=120)
    assert result.returncode == 2
    assert "no notebook at" in result.stderr and "path/to/01_self_attention.ipynb" in result.stderr


def _grades(out: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(out / "grades.csv") as f:
        return {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}


def test_instructor_grades_with_relative_paths_resumes_regrades_and_exports(scratch):
    said(".venv/bin/transformer-course grade SUBMITTED --out OUT            # all cores of this machine")
    said(".venv/bin/transformer-course grade SUBMITTED --out OUT --regrade")
    said("cd OUT/nbgrader && nbgrader export")
    _class(scratch)
    rel = scratch.relative_to(ROOT)
    command = [CLI, "grade", f"{rel}/submitted", "--out", f"{rel}/out", "--timeout", str(GRADING_TIMEOUT)]
    result = run(command, ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    table = result.stdout.splitlines()
    assert table[0].split()[:3] == ["student", "01_self_attention", "02_scaled_dot_product"]
    assert next(line for line in table if line.startswith("ada")).split()[1] == "11/11"
    assert next(line for line in table if line.startswith("dev")).split()[1] == "8/11"
    assert "dev 01_self_attention softmax 0/3: softmax overflows" in result.stdout
    assert "dev 02_scaled_dot_product 0/8: missing" in result.stdout
    assert f"wrote {rel}/out/grades.csv" in result.stdout
    assert "Traceback" not in result.stderr and "ERROR" not in result.stderr, result.stderr
    assert "grading: 100%" in result.stderr and "2/2" in result.stderr, "the bar counts handed-in notebooks"
    out = scratch / "out"
    for name in ("grades.csv", "exercises.csv", "lms.csv", "results.json",
                 "feedback/ada/01_self_attention/01_self_attention.html", "nbgrader/gradebook.db"):
        assert (out / name).is_file(), name
    assert not (out / ".work").exists(), "work areas are removed"
    grades = _grades(out)
    assert grades[("ada", "01_self_attention")]["score"] == "11"
    assert grades[("dev", "04_masking")]["status"] == "missing"

    again = run(command, ROOT)  # an interrupted or repeated run grades only what changed
    assert again.returncode == 0 and "grading:" not in again.stderr, again.stderr
    assert _grades(out) == grades

    regraded = run([*command, "--regrade"], ROOT)
    assert regraded.returncode == 0 and "2/2" in regraded.stderr
    assert _grades(out) == grades

    # What the formgrader shows, opened in OUT/nbgrader: nbgrader's own API as its pages call it,
    # with the configuration nbgrader finds in that folder.
    view = run([sys.executable, "-c", FORMGRADER_VIEW], out / "nbgrader", timeout=300)
    assert view.returncode == 0, view.stderr
    shown = eval(view.stdout)  # noqa: S307 (our own script's repr)
    # nbgrader's maximum counts the questions answered in words (4 points in 01 and in 02); both
    # students answered some in 01, which wait for the instructor (dev left one: 0, not waiting).
    assert shown["assignments"]["01_self_attention"] == (2, 15.0)
    assert shown["assignments"]["02_scaled_dot_product"] == (0, 12.0)
    assert shown["submissions"] == {"ada": (11.0, True), "dev": (8.0, True)}, "answers in words await grading"
    assert shown["students"] == {"ada": 11.0, "dev": 8.0}
    assert shown["cells"]["dev"]["test_softmax_hidden"] == 0 and shown["cells"]["ada"]["test_softmax_hidden"] > 0
    assert shown["cells"]["dev"]["question_toy_attention"] == 0  # left as the stub
    assert shown["cells"]["ada"]["question_toy_attention"] == 0  # nbgrader's score until graded: none given

    export = run([str(BIN / "nbgrader"), "export"], out / "nbgrader", timeout=300)
    assert export.returncode == 0, export.stderr
    with open(out / "nbgrader" / "grades.csv") as f:
        exported = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}
    assert float(exported[("ada", "01_self_attention")]["score"]) == 11.0
    assert float(exported[("dev", "01_self_attention")]["score"]) == 8.0


FORMGRADER_VIEW = """
from nbgrader.apps import NbGraderAPI
from nbgrader.apps.baseapp import NbGrader

app = NbGrader()
app.initialize([])  # reads ./nbgrader_config.py, as the formgrader does
api = NbGraderAPI(app.coursedir, parent=app)
view = {
    "assignments": {a["name"]: (a["num_submissions"], a["max_score"]) for a in api.get_assignments()},
    "submissions": {s["student"]: (s["score"], s["needs_manual_grade"])
                    for s in api.get_submissions("01_self_attention")},
    "students": {s["id"]: s["score"] for s in api.get_students()},
    "cells": {},
}
with api.gradebook as gb:
    for student in view["submissions"]:
        nb = gb.find_submission_notebook("01_self_attention", "01_self_attention", student)
        view["cells"][student] = {g.name: g.score for g in nb.grades}
print(repr(view))
"""


def test_instructor_grades_from_another_folder(tmp_path):
    """Relative SUBMITTED and --out from outside the checkout (the bug that graded everyone 0)."""
    _class(tmp_path)
    result = run([str(ROOT / CLI), "grade", "submitted", "--out", "graded", "--workers", "1",
                  "--timeout", str(GRADING_TIMEOUT)], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    grades = _grades(tmp_path / "graded")
    assert grades[("ada", "01_self_attention")]["status"] == "graded"
    assert grades[("ada", "01_self_attention")]["score"] == "11"
    assert "crashed" not in result.stdout


def test_build_from_a_subfolder_rewrites_nothing_on_a_clean_checkout():
    """`transformer-course build` finds the repository from any folder in it; what is committed is
    up to date, so it changes no byte of course/ or solutions/."""
    said("run `transformer-course build` and commit `course/` and `solutions/`")
    files = sorted(p for folder in ("course", "solutions") for p in (ROOT / folder).rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in files}
    result = run([str(ROOT / CLI), "build"], ROOT / "course" / "01_self_attention", timeout=1800)
    assert result.returncode == 0, result.stderr
    assert f"built {len(list((ROOT / 'autograder' / 'source').glob('*/*.source.py')))} notebooks" in result.stdout
    after = sorted(p for folder in ("course", "solutions") for p in (ROOT / folder).rglob("*") if p.is_file())
    assert after == files
    changed = [str(p.relative_to(ROOT)) for p in files if p.read_bytes() != before[p]]
    assert not changed, f"build rewrote committed files: {changed}"


def test_make_install_is_a_no_op_once_installed():
    said("make install")
    if not (ROOT / ".venv" / ".installed-stamp").exists():
        pytest.skip("the suite runs outside the Makefile's .venv")
    result = run(["make", "-q", "install"], ROOT, timeout=60)
    assert result.returncode == 0, "make install would reinstall: the stamp is older than pyproject.toml"


def _server_files(folder: Path) -> list[str]:
    return sorted(p.suffix for p in folder.glob("*")) if folder.is_dir() else []


def test_a_second_check_is_answered_by_the_warm_server_the_first_left(tmp_path, monkeypatch):
    """The first check runs from nothing and leaves a server behind; the next checks get the same
    answers from it, a wrong path included; a socket left by a killed server does not stop a new one;
    the server removes its files when it ends."""
    from transformer_course.grading import check_server
    from transformer_course.layout import Repo

    monkeypatch.setenv("COURSE_CHECK_SERVER", "on")
    # A folder of servers of this test's own; short, as the kernels' IPC sockets' paths beneath it must be.
    monkeypatch.setenv("TMPDIR", tempfile.mkdtemp(prefix="tc-j-", dir="/tmp"))
    monkeypatch.setenv("COURSE_CHECK_IDLE", "60")  # one left by a failed run ends soon
    monkeypatch.setattr("tempfile.tempdir", None)
    folder = check_server.folder()
    name = check_server.key(Repo(ROOT), GRADING_TIMEOUT)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(folder / f"{name}.sock"))  # as a server killed with SIGKILL leaves it: nobody listens
    stale.close()
    wrong = tmp_path / "01_self_attention.ipynb"
    wrong.write_text((ROOT / "solutions" / "01_self_attention.ipynb").read_text().replace(
        "return query @ key.transpose(-2, -1)", "return key @ query.transpose(-2, -1)"))
    check = [CLI, "check", "--timeout", str(GRADING_TIMEOUT)]
    try:
        cold = run([*check, str(wrong)], ROOT)
        assert cold.returncode == 0 and "01_self_attention: 9 / 11" in cold.stdout, cold.stderr
        # It starts as the first check ends and sets up (seconds): a person takes longer to type the next.
        assert check_server.ready(Repo(ROOT), GRADING_TIMEOUT)
        warm = [run([*check, str(wrong)], ROOT), run([*check, "solutions/01_self_attention.ipynb"], ROOT),
                run([*check, "path/to/01_self_attention.ipynb"], ROOT)]
        log = (folder / f"{name}.log").read_text()
        assert log.count("answered in") == 3, log
        assert (warm[0].returncode, warm[0].stdout) == (0, cold.stdout)
        assert warm[1].returncode == 0 and "01_self_attention: 11 / 11" in warm[1].stdout
        assert warm[2].returncode == 2 and "no notebook at" in warm[2].stderr
        assert _server_files(folder) == [".json", ".log", ".sock"]
    finally:
        for record in folder.glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(json.loads(record.read_text())["pid"], signal.SIGTERM)
    for _ in range(100):
        if not _server_files(folder):
            break
        time.sleep(0.1)
    assert _server_files(folder) == [], "a stopped server removes its socket, record and log"
    shutil.rmtree(folder.parent, ignore_errors=True)
