"""Memory a notebook can pin outside its kernel's own limit: messages it sends the grading process, files in
its tmpfs, shared memory. Each is bounded, and the notebook gets a grade and feedback that says what happened."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import nbformat
import pytest

from quality import attacks
from quality.attacks import A01
from transformer_course.grading.kernel import forkserver, memcg, sandbox

from .conftest import GRADING_TIMEOUT, ROOT

# Grades an honest notebook of 01, then the one under test, in one fresh process (workers=1: the grading process is
# the worker), and prints the second's result and the process's peak resident memory while grading it: the peak is
# reset between the two (Linux's clear_refs), so the imports and the solution's calibration (limits.py), which the
# first grading does where this machine has not measured the solution yet, are not counted. ``unbounded`` turns the
# message cap off (to show the test fails).
GRADE = """
import json, resource, sys
from pathlib import Path
from transformer_course.grading.kernel import kernels
from transformer_course.grading.run.batch import grade_class
from transformer_course.layout import Repo
if sys.argv[2] == "unbounded":
    kernels.MAX_KERNEL_MESSAGE = -1
def grade(folder):
    return grade_class(Path(folder) / "in", Path(folder) / "out", Repo(), timeout=int(sys.argv[4]), progress=False,
                       workers=1, memory_mb=int(sys.argv[3]))[0]
honest = grade(sys.argv[5])
assert honest.status == "graded" and honest.score == honest.max_score, honest
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the peak (VmHWM)
    reset = True
except OSError:
    reset = False
r = grade(sys.argv[1])
if reset:
    peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) / 1024
else:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"status": r.status, "score": r.score, "reason": r.reason, "peak_mib": peak}))
"""


def _write(folder, name: str, code: str) -> None:
    """The solution of 01 with ``code`` after softmax, handed in by ``name`` in ``folder``/in."""
    nb = nbformat.read(ROOT / "solutions" / f"{A01}.ipynb", as_version=4)
    attacks.add_after(nb, "softmax", code)
    (folder / "in" / name / A01).mkdir(parents=True)
    nbformat.write(nb, folder / "in" / name / A01 / f"{A01}.ipynb")


def _grade(tmp_path, name: str, code: str, bound: str = "bounded", memory_mb: int = 4096) -> tuple[dict, str]:
    """The grading process's result for the solution with ``code`` after softmax, and what its cells printed."""
    _write(tmp_path / "honest", "honest", "pass")
    _write(tmp_path, name, code)
    done = subprocess.run([sys.executable, "-c", GRADE, str(tmp_path), bound, str(memory_mb),
                           str(GRADING_TIMEOUT), str(tmp_path / "honest")], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    graded = nbformat.read(tmp_path / "out" / "nbgrader" / "autograded" / name / A01 / f"{A01}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in graded.cells if c.cell_type == "code" for o in c.get("outputs", []))
    return json.loads(done.stdout.strip().splitlines()[-1]), printed


PEAK_MIB = 600  # the grading process's peak: an honest notebook stays far below, one 250 MiB message read goes above
FLOOD = "import sys\nfor _ in range(3):\n    sys.stdout.write('x' * (250 * 2**20))\n    sys.stdout.flush()"


@pytest.mark.skipif(sandbox.warning() != "", reason="the grader's kernels run without the sandbox here")
def test_a_kernels_oversized_message_is_refused_unread(tmp_path):
    """Three 250 MiB messages from one cell: ZeroMQ refuses each before the grading process reads it (its
    peak memory stays under PEAK_MIB: 140 MiB measured, where it reached 1,130 MiB without the cap), the kernel
    is stopped, the cell says why, and the grade is given."""
    result, graded = _grade(tmp_path, "flooder", FLOOD)
    assert result["peak_mib"] < PEAK_MIB, result
    assert result["status"] == "crashed", result
    assert "more than 32 MiB in one message" in result["reason"], result


@pytest.mark.skipif(sandbox.warning() != "", reason="the grader's kernels run without the sandbox here")
def test_without_the_cap_the_flood_reaches_the_grading_process(tmp_path):
    """The same notebook with the cap off: the grading process holds the messages (what the test above rules out)."""
    result, _ = _grade(tmp_path, "flooder", FLOOD, "unbounded")
    assert result["peak_mib"] > PEAK_MIB, result


HOARD = textwrap.dedent("""
    import mmap, os
    held = {}
    for folder in ('/tmp', '/dev/shm'):
        held[folder] = 0
        try:
            with open(folder + '/hoard', 'wb') as f:
                for _ in range(32):  # 2 GiB, 64 MiB at a time
                    f.write(b'x' * (64 << 20))
                    f.flush()
                    held[folder] += 64
        except OSError:
            pass
    print('HELD', held, flush=True)
    shared = mmap.mmap(-1, 6 << 30)  # shared anonymous memory: not in the kernel's data segment
    for at in range(0, len(shared), 4096):  # every page
        shared[at] = 1
    print('SHARED 6 GiB HELD', flush=True)
""")


@pytest.mark.skipif(sandbox.warning() != "", reason="the grader's kernels run without the sandbox here")
def test_files_and_shared_memory_count_against_the_notebooks_memory(tmp_path):
    """An answer that fills /tmp and /dev/shm (tmpfs) and touches 6 GiB of shared memory, which the kernel's
    data-segment limit does not count: each tmpfs stops at its size, and where there is a memory cgroup the
    kernel is ended past the sandbox's limit, its notebook graded as crashed, never 6 GiB held."""
    result, graded = _grade(tmp_path, "hoarder", HOARD, memory_mb=1024)
    held = json.loads(graded.split("HELD ", 1)[1].split("\n", 1)[0].replace("'", '"'))
    assert set(held) == {"/tmp", "/dev/shm"} and all(mib <= sandbox.TMPFS_BYTES >> 20 for mib in held.values()), held
    if memcg.status().startswith("a ") and forkserver.enabled():
        assert "SHARED 6 GiB HELD" not in graded
        assert result["status"] == "crashed" and "the kernel died" in result["reason"], result
