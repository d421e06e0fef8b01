"""A failure of the grader itself is never a student's zero: its own status, not recorded (the
next run grades it again), logged with its traceback, and a non-zero exit."""

from __future__ import annotations

import csv
import math
import shutil
import time

import nbformat
import pytest

from quality import attacks
from quality.attacks import A01
from transformer_course.cli import main
from transformer_course.grading.judging import judge_box
from transformer_course.grading.notebook.grade import Grader, GraderError
from transformer_course.grading.run import batch
from transformer_course.layout import ERRORS_LOG, GRADER_ERROR, SOURCE_SUFFIX, Repo

from .conftest import GRADING_TIMEOUT


@pytest.fixture
def two_students(repo, tmp_path):
    submitted = tmp_path / "submitted"
    for student in ("ada", "ben"):
        shutil.copytree(repo.sample_class / student / "01_self_attention", submitted / student / "01_self_attention")
    return submitted


def _rows(out):
    with open(out / "grades.csv") as f:
        return {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}


def test_a_grader_failure_is_reported_not_recorded_and_graded_next_time(repo, two_students, tmp_path,
                                                                         monkeypatch, capsys):
    out = tmp_path / "out"
    real = batch.grade_task

    def broken_for_ben(*args):
        if args[-1].student_id == "ben":
            raise OSError("disk on fire (a bug of ours)")
        return real(*args)

    monkeypatch.setattr(batch, "grade_task", broken_for_ben)
    code = main(["grade", str(two_students), "--out", str(out), "--workers", "1", "--timeout", str(GRADING_TIMEOUT)])
    captured = capsys.readouterr()
    assert code == 1
    assert f"1 notebook could not be graded because of a grader error: see {out}/{ERRORS_LOG}" in captured.err
    rows = _rows(out)
    assert rows[("ben", "01_self_attention")]["status"] == GRADER_ERROR
    assert rows[("ada", "01_self_attention")]["status"] == "graded"
    assert rows[("ada", "01_self_attention")]["score"] == "11"
    assert not (out / "results" / "ben" / "01_self_attention.json").exists(), "a grader error is not a result"
    assert not (out / "feedback" / "ben" / "01_self_attention").exists(), "no page to hand back"
    log = (out / ERRORS_LOG).read_text()
    assert "ben 01_self_attention" in log and "OSError: disk on fire" in log and "Traceback" in log

    graded = []
    monkeypatch.setattr(batch, "grade_task", lambda *args: (graded.append(args[-1].student_id), real(*args))[1])
    assert main(["grade", str(two_students), "--out", str(out), "--workers", "1",
                 "--timeout", str(GRADING_TIMEOUT)]) == 0
    assert graded == ["ben"], "only the notebook the grader failed on is graded again, without --regrade"
    assert _rows(out)[("ben", "01_self_attention")]["status"] == "graded"
    assert not (out / ERRORS_LOG).exists()


def test_a_worker_record_for_another_student_or_beyond_the_points_is_refused(repo, two_students, tmp_path,
                                                                             monkeypatch):
    """The parent writes every record under the task's own student and assignment, and only a record
    that fits the assignment: a worker returning ada's record for ben's task, or 50 points for a
    3-point exercise, is a grader error for that task and changes nobody's grade."""
    out = tmp_path / "out"
    real = batch.grade_task

    def forged(*args):
        payload = real(*args)
        if args[-1].student_id == "ben":
            payload["result"]["student_id"] = "ada"  # ben's notebook, written as ada's
        return payload

    monkeypatch.setattr(batch, "grade_task", forged)
    assert main(["grade", str(two_students), "--out", str(out), "--workers", "1",
                 "--timeout", str(GRADING_TIMEOUT)]) == 1
    rows = _rows(out)
    assert rows[("ben", "01_self_attention")]["status"] == GRADER_ERROR
    assert rows[("ada", "01_self_attention")]["score"] == "11"
    assert "names 'ada'" in (out / ERRORS_LOG).read_text()

    def inflated(*args):
        payload = real(*args)
        payload["result"]["exercises"][0]["score"] = 50.0
        return payload

    monkeypatch.setattr(batch, "grade_task", inflated)
    assert main(["grade", str(two_students), "--out", str(tmp_path / "out2"), "--workers", "1",
                 "--timeout", str(GRADING_TIMEOUT)]) == 1
    assert {r["status"] for k, r in _rows(tmp_path / "out2").items() if k[1] == "01_self_attention"} == {GRADER_ERROR}


def test_nbgrader_failing_is_a_grader_error_but_a_dead_kernel_is_the_students(repo, tmp_path, monkeypatch):
    grader = Grader(tmp_path / "work", repo, GRADING_TIMEOUT)
    assignment = repo.assignment("01_self_attention")
    notebook = repo.sample_class / "ada" / "01_self_attention" / "01_self_attention.ipynb"
    monkeypatch.setattr(grader.api, "autograde", lambda *a, **k: {"success": False, "log": "[ERROR] boom",
                                                                   "error": "Traceback ... ValueError: boom"})
    with pytest.raises(GraderError, match="boom"):
        grader.grade("ada", assignment, notebook)
    monkeypatch.setattr(grader.api, "autograde", lambda *a, **k: {"success": False, "log": "Kernel died"})
    result = grader.grade("ada", assignment, notebook)
    assert result.status == "crashed" and "kernel died" in result.reason


@pytest.mark.skipif(not judge_box.enabled(), reason="judges are not boxed here (no sandbox)")
def test_a_judge_that_cannot_start_in_its_box_is_a_grader_error(repo, tmp_path, monkeypatch):
    """Where judges are boxed, a judge that cannot start in its box is the grader's failure: the notebook
    is not judged in the worker's process instead (a quiet step down from the box), nor given a zero."""
    def refuse(*_args, **_kwargs):
        raise OSError("no room for a judge")

    grader = Grader(tmp_path / "work", repo, GRADING_TIMEOUT)
    assignment = repo.assignment("01_self_attention")
    grader.calibrate(assignment)
    monkeypatch.setattr(judge_box.BoxedJudge, "__init__", refuse)
    with pytest.raises(GraderError, match="could not start in its sandbox"):
        grader.grade("ada", assignment, repo.sample_class / "ada" / "01_self_attention" / "01_self_attention.ipynb")


def test_the_guard_cell_has_its_own_timeout(repo):
    """Installing the guard imports torch: a short --timeout for students' cells must not fail it."""
    from nbformat.v4 import new_code_cell

    from transformer_course.grading.notebook.nbgrader_setup import KeepGradesOnCrash

    client = KeepGradesOnCrash(timeout=2)
    guard = new_code_cell("import course_reference.guard")
    guard.metadata["course_guard"] = True
    assert client._get_timeout(guard) >= 300
    answer = new_code_cell("x = 1", metadata={"nbgrader": {"solution": True, "grade": False, "grade_id": "x"}})
    assert client._get_timeout(answer) == 2


def test_time_is_not_a_grade(tmp_path):
    """A provided cell gets PROVIDED_FACTOR times the limit; an answer cell that computes past its limit
    (a slow machine, where the same work takes more CPU seconds) runs once more with RETRY_FACTOR times it,
    and keeps its points. (A cell that waits past it instead is not run again:
    test_a_sleeping_notebook_costs_a_few_timeouts_and_a_fork_bomb_stays_in_its_sandbox.)"""
    from nbformat.v4 import new_code_cell, new_notebook

    from transformer_course.grading.notebook.nbgrader_setup import PROVIDED_FACTOR, RETRY_FACTOR, KeepGradesOnCrash

    flag = tmp_path / "ran-once"
    slow_first = new_code_cell(  # the first run computes past the 2 s limit; the second is quick
        f"import pathlib, time\nif not pathlib.Path({str(flag)!r}).exists():\n"
        f"    pathlib.Path({str(flag)!r}).touch()\n    end = time.process_time() + 60\n"
        "    while time.process_time() < end:\n        pass\nanswer = 42",
        metadata={"nbgrader": {"solution": True, "grade": False, "grade_id": "slow", "schema_version": 3}})
    provided = new_code_cell("import time\ntime.sleep(3)\nshown = True")
    test = new_code_cell("assert answer == 42 and shown", metadata={"nbgrader": {
        "solution": False, "grade": True, "grade_id": "t", "points": 1, "schema_version": 3}})
    client = KeepGradesOnCrash(timeout=2, kernel_name="python3")
    assert client._get_timeout(provided) == 2 * PROVIDED_FACTOR and RETRY_FACTOR > 1
    nb, _ = client.preprocess(new_notebook(cells=[slow_first, provided, test]), {"metadata": {"path": str(tmp_path)}})
    errors = [o for cell in nb.cells for o in cell.outputs if o.get("output_type") == "error"]
    assert flag.exists() and not errors, errors


def test_limits_scale_with_the_solution_on_this_machine(tmp_path):
    """A graded cell may run LIMIT_MULTIPLE times its solution's time on this machine where that is
    longer than --timeout; past both tries, the message gives the cell's own limits."""
    from nbformat.v4 import new_code_cell, new_notebook

    from transformer_course.grading.notebook import nbgrader_setup
    from transformer_course.grading.notebook.nbgrader_setup import LIMIT_MULTIPLE, RETRY_FACTOR, KeepGradesOnCrash

    def graded(source: str, grade_id: str) -> object:
        return new_code_cell(source, metadata={"nbgrader": {"solution": False, "grade": True, "grade_id": grade_id,
                                                            "points": 1, "schema_version": 3}})

    # CPU seconds: a cell that computes 1.5 s takes that much CPU time however busy the machine is
    slow = graded("import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end:\n    pass\n"
                  "ok = True", "test_slow")  # solution: 0.2 s -> limit 2 s
    endless = graded("while True:\n    pass", "test_endless")  # solution: 0.1 s -> limit 1 s, then 3 s
    quick = graded("import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end:\n    pass",
                   "test_quick")  # not measured: --timeout (1 s), then 3 s
    nbgrader_setup.SOLUTION_SECONDS["limits_demo"] = {"test_slow": 0.2, "test_endless": 0.1}
    try:
        client = KeepGradesOnCrash(timeout=1, kernel_name="python3")
        client._notebook = "limits_demo"
        assert client._get_timeout(slow) == math.ceil(0.2 * LIMIT_MULTIPLE) and client._get_timeout(quick) == 1
        resources = {"metadata": {"path": str(tmp_path)}, "nbgrader": {"notebook": "limits_demo"}}
        nb, _ = client.preprocess(new_notebook(cells=[slow, endless, quick]), resources)
    finally:
        del nbgrader_setup.SOLUTION_SECONDS["limits_demo"]
    errors = {c.metadata["nbgrader"]["grade_id"]: o
              for c in nb.cells for o in c.outputs if o.get("output_type") == "error"}
    assert set(errors) == {"test_endless"}, errors  # test_quick ran again with RETRY_FACTOR times its limit
    assert errors["test_endless"]["evalue"].startswith(
        f"did not finish within 1 s of CPU time, nor within {RETRY_FACTOR} s when run again")
    assert all(nbgrader_setup.SECONDS_KEY in c.metadata for c in nb.cells)


def test_kept_alembic_head_is_nbgrader_own():
    """The gradebook revision kept in data/cache is the one nbgrader's alembic command gives."""
    from transformer_course.grading.notebook import nbgrader_setup
    nbgrader_setup.tools_on_path()
    assert nbgrader_setup.alembic_head() == nbgrader_setup.NBGRADER_ALEMBIC_VERSION()


@pytest.mark.skipif(not judge_box.enabled(), reason="judges are not boxed here (no sandbox)")
def test_the_graders_own_work_counts_against_the_cells_limit(repo, tmp_path):
    """A test cell whose grader's side runs past the cell's limit (in a copy of the repository, a visible
    test made to compute endlessly in the judge when the notebook defines a name: CPU time of the judge's
    own, which the cell's limit counts) times out, is run again once by a
    new judge, and costs that cell's point only: the notebook's other test cells are judged as usual."""
    copy = Repo(tmp_path / "repo")
    shutil.copytree(repo.autograder, copy.autograder,
                    ignore=shutil.ignore_patterns("submitted", "__pycache__", "*.ipynb"))
    shutil.copytree(repo.solutions, copy.solutions)
    source = copy.source / A01 / f"{A01}{SOURCE_SUFFIX}"
    anchor = 'print("softmax: visible tests passed")\n'
    assert anchor in source.read_text()
    source.write_text(source.read_text().replace(
        anchor, anchor + 'if "make_the_grader_wait" in globals():\n    while True:\n        pass\n', 1))
    nb = nbformat.read(repo.solutions / f"{A01}.ipynb", as_version=4)
    attacks.add_after(nb, "softmax", "make_the_grader_wait = True")
    (tmp_path / "in" / "slow" / A01).mkdir(parents=True)
    nbformat.write(nb, tmp_path / "in" / "slow" / A01 / f"{A01}.ipynb")
    start = time.monotonic()
    [result] = [r for r in batch.grade_class(tmp_path / "in", tmp_path / "out", copy, timeout=5, progress=False,
                                             workers=1) if r.assignment == A01]
    assert time.monotonic() - start < 400
    graded = copy.assignment(A01)
    scores = {e.exercise: e.score for e in result.exercises}
    assert scores == {e: graded.max_score(e) - (e == "softmax") for e in graded.exercises}, result.reason
    softmax = next(e for e in result.exercises if e.exercise == "softmax")
    assert "the grader's own work for this test" in softmax.feedback, softmax.feedback


@pytest.mark.skipif(not judge_box.enabled(), reason="judges are not boxed here (no sandbox)")
def test_a_new_judge_has_what_the_earlier_test_cells_defined(repo, tmp_path, monkeypatch):
    """07's solution with its judge killed inside test_train_epoch, the visible test that defines
    copy_task_batches (which greedy_decode's and beam_search's hidden checks read): the new judge of the
    next test cells defines it again, so the killed cell costs its own point and no other."""
    from transformer_course.grading.notebook import nbgrader_setup

    real = judge_box.BoxedJudge.test
    killed = []

    def killed_in_train_epoch(self, source, grade_id, limit):
        if grade_id == "test_train_epoch" and "= _test_train_epoch()" in source:  # the cell, not a redefinition
            killed.append(grade_id)  # the judge kills itself at the cell's end, before its verdict
            source += "\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
        return real(self, source, grade_id, limit)

    monkeypatch.setattr(judge_box.BoxedJudge, "test", killed_in_train_epoch)
    assignment = repo.assignment("07_training")
    monkeypatch.setitem(nbgrader_setup.SOLUTION_SECONDS, assignment.notebook, {})  # --timeout: no calibration
    grader = Grader(tmp_path / "work", repo, GRADING_TIMEOUT, only=assignment.name)
    result = grader.grade("solution", assignment, repo.solutions / f"{assignment.notebook}.ipynb")
    assert killed == ["test_train_epoch"]
    scores = {e.exercise: e.score for e in result.exercises}
    assert scores == {e: assignment.max_score(e) - (e == "train_epoch") for e in assignment.exercises}, result
    train_epoch = next(e for e in result.exercises if e.exercise == "train_epoch")
    assert "judge of this notebook stopped" in train_epoch.feedback, train_epoch.feedback


def test_a_cells_limit_is_cpu_time_with_the_clock_as_outer_bound(tmp_path):
    """A cell's limit counts the CPU seconds of the notebook's processes, which a busy machine does not
    change: a cell that waits 4 s on the clock with a 1 s limit (as a slowed-down cell waits for a core)
    keeps its points, where a wall-clock limit stopped it at 1 s and again at RETRY_FACTOR s. A cell that
    only waits is still stopped, at WALL_FACTOR times its limit on the clock; and the seconds kept for the
    limits (SECONDS_KEY) are CPU seconds, not the seconds it waited."""
    from nbformat.v4 import new_code_cell, new_notebook

    from transformer_course.grading.kernel.cputime import WALL_FACTOR
    from transformer_course.grading.notebook import nbgrader_setup
    from transformer_course.grading.notebook.nbgrader_setup import RETRY_FACTOR, KeepGradesOnCrash

    def graded(source: str, grade_id: str) -> object:
        return new_code_cell(source, metadata={"nbgrader": {"solution": False, "grade": True, "grade_id": grade_id,
                                                            "points": 1, "schema_version": 3}})

    waits = graded("import time\ntime.sleep(4)\nok = True", "test_waits")  # past 1 s and RETRY_FACTOR s on the clock
    asleep = graded("import time\ntime.sleep(600)", "test_asleep")
    assert 4 > RETRY_FACTOR and 4 < WALL_FACTOR
    client = KeepGradesOnCrash(timeout=1, kernel_name="python3")
    start = time.monotonic()
    nb, _ = client.preprocess(new_notebook(cells=[waits, asleep]), {"metadata": {"path": str(tmp_path)}})
    errors = {c.metadata["nbgrader"]["grade_id"]: o
              for c in nb.cells for o in c.outputs if o.get("output_type") == "error"}
    assert set(errors) == {"test_asleep"}, errors
    assert "on the clock" in errors["test_asleep"]["evalue"], errors
    assert time.monotonic() - start < 4 + WALL_FACTOR * (1 + RETRY_FACTOR) + 60
    assert nb.cells[0].metadata[nbgrader_setup.SECONDS_KEY] < 1


def test_the_cpu_clock_counts_a_process_tree_and_not_its_waiting(tmp_path):
    """cputime.Clock over a process that waits 2 s while its child computes 1 s of CPU time (then is
    reaped): about 1 s, whatever the clock says, with the child's time counted after it ended too."""
    import subprocess
    import sys

    from transformer_course.grading.kernel import cputime

    if not cputime.READABLE:
        pytest.skip("no /proc here: the clock's seconds stand in for CPU time")
    done = tmp_path / "reaped"
    script = ("import subprocess, sys, time, pathlib\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time\\nend = time.process_time() + 1\\n"
              "while time.process_time() < end:\\n    pass'])\n"
              f"time.sleep(2)\nchild.wait()\npathlib.Path({str(done)!r}).touch()\ntime.sleep(30)\n")
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        clock = cputime.Clock(lambda: [parent.pid])
        start = time.monotonic()
        while not done.exists():
            assert time.monotonic() - start < 120 and parent.poll() is None
            time.sleep(0.1)
            clock()
        spent = clock()
        assert 0.8 < spent < 1.8, spent
        assert time.monotonic() - start > 2
    finally:
        parent.kill()
        parent.wait()


# A fork bomb, in a small Python of its own (forking the kernel, torch loaded, costs ~10 ms of CPU a fork): it
# counts the forks its sandbox allowed, then ends its children (so that the notebook's later cells, whose torch
# may start threads, still run); a child never returns to the bomb's loop.
BOMB = """
import os, signal, time
children, refused = [], None
try:
    for _ in range(5000):
        pid = os.fork()
        if pid == 0:
            try:
                time.sleep(600)
            finally:
                os._exit(0)
        children.append(pid)
except OSError as error:
    refused = type(error).__name__
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
print(f"forked {len(children)}, then {refused}")
"""
FORK_BOMB = ("import subprocess, sys\n"
             f"print(subprocess.run([sys.executable, '-c', {BOMB!r}], capture_output=True, text=True).stdout)")


@pytest.mark.skipif(not judge_box.enabled(), reason="judges are not boxed here (no sandbox)")
@pytest.mark.slow  # make bench: its limits are seconds on the clock, which a loaded machine's CI run can break
def test_a_sleeping_notebook_costs_a_few_timeouts_and_a_fork_bomb_stays_in_its_sandbox(repo, tmp_path,
                                                                                       monkeypatch):
    """01's solution graded with --timeout 1, with a fork bomb in a cell of its own, SelfAttention's forward
    asleep (its judged tests call it) and, at the end, cells that sleep between quick ones: the bomb is refused
    a fork before the sandbox's process limit and every other exercise keeps its points; each of
    SelfAttention's test cells is stopped once, at WALL_FACTOR times its limit on the clock (never run again:
    it waited), and loses its points with a message that says so; the sleeping cells then meet the notebook's
    time limit on the clock (NOTEBOOK_WAIT_FACTOR times --timeout, plus WALL_FACTOR s a CPU second), and the
    cell after them is not run, said in the reason."""
    from nbformat.v4 import new_code_cell

    from transformer_course.grading.kernel import memcg
    from transformer_course.grading.kernel.cputime import WALL_FACTOR
    from transformer_course.grading.notebook import nbgrader_setup

    timeout = 1
    assignment = repo.assignment(A01)
    monkeypatch.setitem(nbgrader_setup.SOLUTION_SECONDS, assignment.notebook, {})  # --timeout: no calibration
    nb = nbformat.read(repo.solutions / f"{A01}.ipynb", as_version=4)
    bomb = not memcg.process_status().startswith("no process limit")  # root without a pids cgroup: no bomb
    if bomb:
        attacks.add_after(nb, "softmax", FORK_BOMB)
    attacks.add_after(nb, "SelfAttention", "import time\nSelfAttention.forward = lambda *a, **k: time.sleep(600)")
    for _ in range(2):
        nb.cells += [new_code_cell("import time\ntime.sleep(600)"), new_code_cell("awake = True")]
    (tmp_path / "in").mkdir()
    nbformat.write(nb, tmp_path / "in" / f"{A01}.ipynb")
    grader = Grader(tmp_path / "work", repo, timeout, only=assignment.name)
    result = grader.grade("sleeper", assignment, tmp_path / "in" / f"{A01}.ipynb")
    graded = nbformat.read(grader.autograded(assignment), as_version=4)

    scores = {e.exercise: e.score for e in result.exercises}
    assert scores == {e: assignment.max_score(e) * (e != "SelfAttention") for e in assignment.exercises}, result
    feedback = next(e.feedback for e in result.exercises if e.exercise == "SelfAttention")
    assert f"did not finish within {WALL_FACTOR * timeout} s on the clock" in feedback, feedback
    assert "not run again" in feedback
    if bomb:
        [printed] = [o["text"] for c in graded.cells if c.source == FORK_BOMB for o in c.outputs if "forked" in o.get(
            "text", "")]
        forked = int(printed.split()[1].rstrip(","))
        assert 0 < forked < memcg.PROCESSES and printed.rstrip().endswith("BlockingIOError"), printed
    errors = [o for c in graded.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert any(o["ename"] == nbgrader_setup.NOTEBOOK_TIME_LIMIT for o in errors), [o["evalue"] for o in errors]
    assert result.status == "crashed" and "time limit on the clock" in result.reason, result.reason
