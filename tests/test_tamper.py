"""Tampering with the grader from answer cells: each notebook gets the points it earned and no
more, and the class run goes on. Graded through the real path (`grade_class`, Dask workers).

The attacks on notebook 01 are in ``quality.attacks`` (``make bench`` counts them too).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from quality import attacks
from quality.attacks import A01, NO_SOFTMAX, WRONG_SOFTMAX
from transformer_course.cli import main
from transformer_course.grading.judging import judge_box
from transformer_course.grading.kernel import forkserver, sandbox
from transformer_course.grading.notebook.nbgrader_setup import TOKEN_MIME, guard_token
from transformer_course.grading.run.batch import grade_class, output_lock

from .conftest import ATTACK_TIMEOUT, GRADING_TIMEOUT


@pytest.fixture(scope="module")
def attack_class(repo, tmp_path_factory):
    """Every attack of ``quality.attacks`` in one class, graded once (two workers, sandbox on where
    bubblewrap is installed): the attacks on notebook 01's answers and those through the objects a test
    lends (attacks.lent_cases). The cell limit is ATTACK_TIMEOUT: several attacks never end on purpose."""
    submitted = tmp_path_factory.mktemp("attacks")
    attacks.write_class(repo, submitted)
    attacks.write_lent_class(repo, submitted)
    out = tmp_path_factory.mktemp("attacks-out")
    results = grade_class(submitted, out, repo, timeout=ATTACK_TIMEOUT, progress=False, workers=2, memory_mb=2000)
    return {(r.student_id, r.assignment): r for r in results}, out


@pytest.fixture(scope="module")
def tampered(attack_class):
    results, out = attack_class
    return {student: r for (student, assignment), r in results.items() if assignment == A01}, out


@pytest.mark.parametrize("student", [
    pytest.param(s, marks=pytest.mark.xfail(strict=True, reason="not defended yet (README, 'Not defended')"))
    if s in attacks.NOT_DEFENDED else s for s in sorted(attacks.cases())])
def test_tampering_earns_what_it_earned(tampered, student):
    results, _ = tampered
    result = results[student]
    feedback = " ".join([result.reason] + [e.feedback for e in result.exercises])
    assert attacks.verdict(student, {e.exercise: e.score for e in result.exercises}, feedback) == ""


@pytest.fixture(scope="module")
def lent_attacks(attack_class):
    """The attacks through the objects a test lends, from the attack class."""
    return attack_class


@pytest.mark.parametrize("student", sorted(attacks.lent_cases()))
def test_the_graders_lent_objects_answer_only_the_allow_list(lent_attacks, repo, student):
    """Reflection from a lent model to the builtins, a lent method's globals, a write to a grader
    object, a stride-0 tensor of 2 GB and a lent reference called at 64 million entries: none runs
    the student's code in the grader (what it would print there is not in the test's output), each
    is answered with a refusal the student sees, and the notebook gets what its honest work earns."""
    results, out = lent_attacks
    assignment = attacks.lent_cases()[student][0]
    result = results[(student, assignment)]
    notebook = repo.assignment(assignment).notebook
    output = (out / "nbgrader" / "autograded" / student / assignment / f"{notebook}.ipynb").read_text()
    feedback = " ".join(e.feedback for e in result.exercises)
    assert attacks.lent_verdict(repo, student, {e.exercise: e.score for e in result.exercises}, feedback,
                                output) == "", result


def test_memory_limit_stopped_the_allocation(tampered):
    _, out = tampered
    nb = nbformat.read(out / "nbgrader" / "autograded" / "t_memory" / A01 / f"{A01}.ipynb", as_version=4)
    text = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert "can't allocate memory" in text


def test_the_sandbox_holds_no_reference_of_the_notebook(tampered):
    """A notebook that reads every file its kernel can see (the whole machine as the sandbox shows
    it) finds no reference, solution or checks of notebook 01: its kernel sees the operating
    system and the Python environment only, and notebook 01's checks and reference stay in the
    grader's process (transformer_course.grading.judging.judge). The paths it found are in the message."""
    _, out = tampered
    nb = nbformat.read(out / "nbgrader" / "autograded" / "t_search_reference" / A01 / f"{A01}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "searched: no reference" in printed, printed[-3000:]
    assert "found " not in printed, printed[-3000:]
    read = int(re.search(r"read (\d+) files", printed).group(1))
    assert read > 1000, f"the search read only {read} files: it did not search the machine"


def test_output_flood_is_cut(tampered):
    _, out = tampered
    path = out / "nbgrader" / "autograded" / "t_flood" / A01 / f"{A01}.ipynb"
    assert path.stat().st_size < 2_000_000
    assert "output cut by the grader" in path.read_text()


def test_grader_cells_and_tokens_do_not_reach_the_student(tampered):
    _, out = tampered
    for student in ("t_reseed", "t_comparisons"):
        text = (out / "nbgrader" / "autograded" / student / A01 / f"{A01}.ipynb").read_text()
        assert TOKEN_MIME not in text and "course_reference.guard" not in text
        html = (out / "feedback" / student / A01 / f"{A01}.html").read_text()
        assert TOKEN_MIME not in html and "guard" not in html


def test_hidden_tests_do_not_reach_the_kernel_as_cell_source(tampered):
    """An input transformer sees each cell's code before it runs; a judged notebook's test cells
    never run in the kernel (transformer_course.grading.judging.judge), so it sees none of their code."""
    _, out = tampered
    nb = nbformat.read(out / "nbgrader" / "autograded" / "t_peek_at_cells" / A01 / f"{A01}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "PEEK:" in printed and "def attention_scores" in printed  # it ran on the student's later cells
    assert "check_softmax" not in printed and "BEGIN HIDDEN" not in printed and "_test_softmax" not in printed


def test_files_the_grader_reads_cannot_be_poisoned(repo, tmp_path):
    """A notebook that overwrites the checks, the gradebook and the sources of its work area
    does not change the grade of the next notebook graded by the same worker."""
    solution = repo.solutions / f"{A01}.ipynb"
    poison = (
        "from pathlib import Path\n"
        "root = Path.cwd().parents[2]\n"
        "for path in root.rglob('*'):\n"
        "    if path.is_file() and path.suffix in ('.py', '.db', '.ipynb') and 'autograded' not in path.parts:\n"
        "        path.write_text('def check_softmax(ns):\\n    pass\\n')\n"
    )
    writer = nbformat.read(solution, as_version=4)
    attacks.add_after(writer, "softmax", poison)
    victim = nbformat.read(solution, as_version=4)
    attacks.set_answer(victim, "softmax", WRONG_SOFTMAX)
    for student, nb in (("a_writer", writer), ("b_victim", victim)):
        (tmp_path / "in" / student / A01).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "in" / student / A01 / f"{A01}.ipynb")
    results = grade_class(tmp_path / "in", tmp_path / "out", repo, timeout=GRADING_TIMEOUT, progress=False,
                          workers=1)
    victim_result = next(r for r in results if r.student_id == "b_victim" and r.assignment == A01)
    assert {e.exercise: e.score for e in victim_result.exercises} == {k: float(v) for k, v in NO_SOFTMAX.items()}


def test_guard_token_matches_the_kernel_side(repo):
    import importlib.util

    spec = importlib.util.spec_from_file_location("guard", repo.reference / "course_reference" / "guard.py")
    guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard)
    assert guard.TOKEN_MIME == TOKEN_MIME
    assert guard.token(b"k" * 32, "test_x", "print(1)") == guard_token(b"k" * 32, "test_x", "print(1)")
    assert guard.token(b"k" * 32, "test_x", "print(1)") != guard_token(b"k" * 32, "test_x", "print(2)")
    assert guard.token(b"k" * 32, "test_x", "print(1)", "r") == guard_token(b"k" * 32, "test_x", "print(1)", "r")
    assert guard.token(b"k" * 32, "test_x", "print(1)", "r") != guard_token(b"k" * 32, "test_x", "print(1)", "s")


def _scores(result):
    return {e.exercise: e.score for e in result.exercises}


def test_every_student_folder_is_graded_or_reported(repo, tmp_path, capsys):
    """Odd names are graded under their own name; hidden folders, files and symbolic links
    (never followed: a link to another student's folder is not a second student) are reported."""
    submitted = tmp_path / "in"
    names = ["john smith", "josé", "-rf", "a[1]"]
    for name in names:
        (submitted / name).mkdir(parents=True)
        shutil.copytree(repo.solutions.parent / "autograder" / "submitted" / "ada" / A01, submitted / name / A01)
    (submitted / ".hidden").mkdir()
    (submitted / "notes.txt").write_text("grades to do")
    (submitted / "copycat").symlink_to(submitted / "josé")
    results = grade_class(submitted, tmp_path / "out", repo, timeout=GRADING_TIMEOUT, progress=False, workers=1)
    err = capsys.readouterr().err
    graded = {r.student_id: r for r in results if r.assignment == A01}
    assert sorted(graded) == sorted(names)
    assert all(r.status == "graded" and r.score == 11 for r in graded.values()), {
        k: (r.status, r.reason) for k, r in graded.items()}
    for name in (".hidden", "notes.txt", "copycat"):
        assert f"'{name}'" in err, err
    assert "symbolic link" in err and "not followed" in err


def test_a_notebook_saved_as_latin1_is_read(repo, tmp_path):
    text = (repo.solutions / f"{A01}.ipynb").read_text().replace("Solution notebook", "Solution notebook (café)")
    (tmp_path / "in" / "zoe" / A01).mkdir(parents=True)
    (tmp_path / "in" / "zoe" / A01 / f"{A01}.ipynb").write_bytes(text.encode("latin-1", errors="replace"))
    result = next(r for r in grade_class(tmp_path / "in", tmp_path / "out", repo, timeout=GRADING_TIMEOUT,
                                         progress=False, workers=1) if r.assignment == A01)
    assert result.status == "graded" and result.score == 11, result.reason
    assert "not UTF-8" in result.reason


def test_a_second_run_into_the_same_out_is_refused(repo, tmp_path, capsys):
    (tmp_path / "in").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    with output_lock(out):
        assert main(["grade", str(tmp_path / "in"), "--out", str(out)]) == 2
    assert "another grading run is writing to" in capsys.readouterr().err
    assert main(["grade", str(tmp_path / "in"), "--out", str(out), "--workers", "1"]) == 0, "free again"


def test_notebook_time_limit_and_total_output_cap(repo, tmp_path):
    """Many cells that each stay under the cell timeout cannot run for hours, and many cells that
    each print under the per-cell cap cannot build a feedback page of tens of MB."""
    solution = repo.solutions / f"{A01}.ipynb"
    slow = nbformat.read(solution, as_version=4)
    for _ in range(4):
        attacks.add_after(slow, "attention_scores", "import time\ntime.sleep(2)")
    loud = nbformat.read(solution, as_version=4)
    for _ in range(30):
        attacks.add_after(loud, "SelfAttention", "print('x' * 90_000)")
    for student, nb in (("slow", slow), ("loud", loud)):
        (tmp_path / "in" / student / A01).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "in" / student / A01 / f"{A01}.ipynb")
    results = {r.student_id: r for r in grade_class(tmp_path / "in", tmp_path / "out", repo,
                                                    timeout=GRADING_TIMEOUT, progress=False, workers=1,
                                                    notebook_timeout=5, max_output_mb=1) if r.assignment == A01}
    slow_result = results["slow"]
    assert _scores(slow_result) == {"softmax": 3, "attention_scores": 0, "self_attention": 0, "SelfAttention": 0}
    assert slow_result.status == "crashed" and "time limit" in slow_result.reason
    assert any("time limit" in e.feedback for e in slow_result.exercises)
    assert results["loud"].score == 11
    page = tmp_path / "out" / "nbgrader" / "autograded" / "loud" / A01 / f"{A01}.ipynb"
    assert page.stat().st_size < 1_500_000
    assert "characters in the notebook" in page.read_text()


SANDBOX_ATTACKS = {
    # A background process in a new session: it must die with its kernel.
    "s_a_procs": "import subprocess\nsubprocess.Popen(['sleep', '617'], start_new_session=True)\n",
    # An IPython startup file in the home folder, patching the comparisons of every later kernel.
    "s_b_startup": ("import os, pathlib\n"
                    "p = pathlib.Path(os.path.expanduser('~/.ipython/profile_default/startup'))\n"
                    "p.mkdir(parents=True, exist_ok=True)\n"
                    "(p / '00-x.py').write_text('import torch\\ntorch.allclose = lambda *a, **k: True\\n')\n"),
    # Reading the class's output (other students' records and answers) and the repository.
    # First lifting the folders the sandbox hides (a kernel run by root keeps root's capabilities
    # unless bwrap drops them).
    "s_c_peek": ("import ctypes, os, pathlib\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 "for line in open('/proc/self/mounts').read().splitlines()[::-1]:\n"
                 "    point = line.split()[1]\n"
                 "    if line.startswith('tmpfs') and point not in ('/tmp', '/dev'):\n"
                 "        print('UNMOUNTED' if libc.umount2(point.encode(), 2) == 0 else 'unmount refused', point)\n"
                 "here = pathlib.Path.cwd()\n"
                 "seen = [str(p) for up in here.parents for p in up.glob('*') if p.name in "
                 "('results', 'nbgrader', 'submitted', 'grades.csv', 'feedback', 'gradebook.db')]\n"
                 "print('SEEN', seen)\n"),
    # The network: a public address, and this machine through its own address.
    "s_e_network": ("import socket\n"
                    "for host in [('1.1.1.1', 53), (socket.gethostname(), 22), ('127.0.0.1', 8888)]:\n"
                    "    try:\n"
                    "        socket.create_connection(host, timeout=3).close()\n"
                    "        print('NETWORK REACHED', host)\n"
                    "    except OSError as exc:\n"
                    "        print('NETWORK REFUSED', type(exc).__name__)\n"),
}


@pytest.mark.skipif(sandbox.bwrap() is None, reason="bubblewrap is not installed (`make sandbox`)")
def test_sandbox_contains_processes_home_files_and_sight(repo, tmp_path):
    solution = repo.solutions / f"{A01}.ipynb"
    checks = repo.reference / "course_reference" / "checks" / "nb01.py"
    before = checks.read_bytes()
    write_repo = (f"try:\n    open({str(checks)!r}, 'a').write('\\ncheck_softmax = lambda ns: None\\n')\n"
                  "    print('WROTE THE CHECKS')\nexcept OSError as exc:\n    print('refused:', exc)\n")
    for student, attack in SANDBOX_ATTACKS.items():
        nb = nbformat.read(solution, as_version=4)
        attacks.add_after(nb, "softmax", attack + (write_repo if student == "s_c_peek" else ""))
        (tmp_path / "in" / student / A01).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "in" / student / A01 / f"{A01}.ipynb")
    victim = nbformat.read(solution, as_version=4)
    attacks.set_answer(victim, "softmax", WRONG_SOFTMAX)
    (tmp_path / "in" / "s_d_victim" / A01).mkdir(parents=True)
    nbformat.write(victim, tmp_path / "in" / "s_d_victim" / A01 / f"{A01}.ipynb")
    out = tmp_path / "out"
    results = {r.student_id: r for r in grade_class(tmp_path / "in", out, repo, timeout=GRADING_TIMEOUT,
                                                    progress=False, workers=1) if r.assignment == A01}
    assert all(results[s].score == 11 for s in SANDBOX_ATTACKS), {s: results[s].reason for s in SANDBOX_ATTACKS}
    alive = subprocess.run(["pgrep", "-f", "sleep 617"], capture_output=True, text=True).stdout.split()
    assert not alive, "a process started by a notebook outlived its kernel"
    assert _scores(results["s_d_victim"]) == NO_SOFTMAX, "a startup file of an earlier notebook reached this one"
    assert not (Path.home() / ".ipython/profile_default/startup/00-x.py").exists()
    peek = nbformat.read(out / "nbgrader" / "autograded" / "s_c_peek" / A01 / f"{A01}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in peek.cells for o in c.get("outputs", []))
    assert "SEEN []" in printed and "UNMOUNTED" not in printed, printed[:500]
    assert "refused:" in printed and checks.read_bytes() == before, "the repository is not the kernel's to write"
    if sandbox.isolates_network():
        net = nbformat.read(out / "nbgrader" / "autograded" / "s_e_network" / A01 / f"{A01}.ipynb", as_version=4)
        printed = "".join(o.get("text", "") for c in net.cells for o in c.get("outputs", []))
        assert printed.count("NETWORK REFUSED") == 3 and "REACHED" not in printed, printed[-500:]


# Attacks on the worker's kernel template (transformer_course/forkserver.py), which outlives
# each notebook: every other process a kernel can see is killed, or stopped.
SIGNAL_ALL = ("import os, signal\nfor p in os.listdir('/proc'):\n"
              "    if p.isdigit() and int(p) not in (1, os.getpid()):\n        os.kill(int(p), signal.{})\n")
TEMPLATE_ATTACKS = {
    "f_a_kill": SIGNAL_ALL.format("SIGKILL"),
    "f_c_stop": SIGNAL_ALL.format("SIGSTOP"),
    "f_e_leftover": ("import subprocess, sys\n"  # waits for the next notebook's folder, then writes into it
                     "subprocess.Popen([sys.executable, '-c', 'import time, pathlib\\n"
                     "for _ in range(600):\\n"
                     "    time.sleep(0.1)\\n"
                     "    for p in pathlib.Path.cwd().parent.parent.glob(\"*/*/*.ipynb\"):\\n"
                     "        p.write_text(\"{}\")\\n'], start_new_session=True)\n"),
}


@pytest.mark.skipif(not forkserver.enabled(), reason="kernels are not forked here (no sandbox)")
def test_kernel_template_attacks_reach_no_other_notebook(repo, tmp_path):
    """A notebook that kills or stops the template, or leaves a process behind, costs no other
    student anything: the next notebook is graded by a fresh kernel (of a new template)."""
    solution = repo.solutions / f"{A01}.ipynb"
    for student, attack in TEMPLATE_ATTACKS.items():
        nb = nbformat.read(solution, as_version=4)
        attacks.add_after(nb, "softmax", attack)
        (tmp_path / "in" / student / A01).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "in" / student / A01 / f"{A01}.ipynb")
    for victim in ("f_b_victim", "f_d_victim", "f_f_victim"):
        nb = nbformat.read(solution, as_version=4)
        attacks.set_answer(nb, "softmax", WRONG_SOFTMAX)
        (tmp_path / "in" / victim / A01).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "in" / victim / A01 / f"{A01}.ipynb")
    results = {r.student_id: r for r in grade_class(tmp_path / "in", tmp_path / "out", repo, timeout=GRADING_TIMEOUT,
                                                    progress=False, workers=1) if r.assignment == A01}
    for victim in ("f_b_victim", "f_d_victim", "f_f_victim"):
        assert _scores(results[victim]) == NO_SOFTMAX, (victim, results[victim].reason)
    killer = results["f_a_kill"]
    assert killer.status == "crashed" and killer.score < 11, killer.reason  # its own kernel ends with the template
    assert results["f_c_stop"].score <= 11
    assert results["f_e_leftover"].score == 11
    alive = subprocess.run(["pgrep", "-f", "pathlib.Path.cwd"], capture_output=True, text=True).stdout.split()
    assert not alive, "a process started by a notebook outlived its kernel"


@pytest.mark.skipif(not forkserver.enabled(), reason="kernels are not forked here (no sandbox)")
def test_files_a_notebook_leaves_in_shared_memory_or_tmp_reach_no_other(repo, tmp_path):
    """A notebook that leaves files in /dev/shm, /tmp or the folder of its worker's kernel sockets (the one
    writable folder every kernel of a worker is given) for the next student, or a trap: the next notebook
    graded by the same worker finds none of them."""
    solution = repo.solutions / f"{A01}.ipynb"
    # The folder above the kernel's own sockets' folder: shared by the worker's kernels, one after another.
    sockets = ("import os\nfrom ipykernel.kernelapp import IPKernelApp\n"
               "folders = ['/dev/shm', '/tmp', os.path.dirname(os.path.dirname(IPKernelApp.instance().ip))]\n")
    writer = nbformat.read(solution, as_version=4)
    attacks.add_after(writer, "softmax", sockets + "for d in folders:\n"
                                         "    open(d + '/left-by-writer', 'w').write('answers')\n"
                                         "print('WROTE', folders)")
    reader = nbformat.read(solution, as_version=4)
    attacks.add_after(reader, "softmax", sockets + "print('FOUND', [d for d in folders "
                                         "if os.path.exists(d + '/left-by-writer')])")
    for student, nb in (("h_a_writer", writer), ("h_b_reader", reader)):
        (tmp_path / "in" / student / A01).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "in" / student / A01 / f"{A01}.ipynb")
    grade_class(tmp_path / "in", tmp_path / "out", repo, timeout=GRADING_TIMEOUT, progress=False, workers=1)
    wrote = (tmp_path / "out" / "nbgrader" / "autograded" / "h_a_writer" / A01 / f"{A01}.ipynb").read_text()
    assert "WROTE" in wrote and "tc-kernels-" in wrote, re.findall(r"WROTE[^\\]*", wrote)  # it could write there
    text = (tmp_path / "out" / "nbgrader" / "autograded" / "h_b_reader" / A01 / f"{A01}.ipynb").read_text()
    assert "FOUND []" in text, re.findall(r"FOUND[^\\]*", text)


@pytest.mark.skipif(not forkserver.enabled(), reason="kernels are not forked here (no sandbox)")
def test_forked_kernel_outputs_what_a_fresh_one_does(repo, tmp_path, monkeypatch):
    """Every cell gives the same kinds of output (figures included: the inline backend must hook
    into the forked kernel's shell) and the same points, forked or started fresh."""
    import tempfile as _tempfile

    from transformer_course.grading.notebook.grade import Grader

    def shapes(nb):
        return [[(o.get("output_type"), o.get("name"), sorted(o.get("data", {}))) for o in c.get("outputs", [])]
                for c in nb.cells if c.cell_type == "code"]

    found = {}
    for mode in ("on", "off"):
        monkeypatch.setenv("COURSE_FORKSERVER", mode)
        grader = Grader(tmp_path / mode, repo, GRADING_TIMEOUT)
        for name in ("01_self_attention", "05_positional_encoding"):
            assignment = repo.assignment(name)
            result = grader.grade("ada", assignment, repo.sample_class / "ada" / name / f"{name}.ipynb", "",
                                  Path(_tempfile.mkdtemp(dir=tmp_path)))
            nb = nbformat.read(grader.autograded(assignment), as_version=4)
            found[(mode, name)] = (result.score, shapes(nb))
        forkserver.stop_all()
    for name in ("01_self_attention", "05_positional_encoding"):
        assert found[("on", name)] == found[("off", name)], name
    figures = [keys for cell in found[("on", "01_self_attention")][1] for _, _, keys in cell if "image/png" in keys]
    assert figures, "notebook 01 draws figures; the forked kernel showed none"


def test_a_cells_prints_are_one_output_however_they_were_flushed(repo, tmp_path):
    """Two prints flushed half a second apart (as a busy machine splits a cell's text) are one output of the
    graded notebook, as on a quiet machine."""
    nb = nbformat.read(repo.solutions / f"{A01}.ipynb", as_version=4)
    attacks.add_after(nb, "softmax", "import time\nprint('FIRST', flush=True)\ntime.sleep(0.5)\nprint('SECOND')")
    (tmp_path / "in" / "p_printer" / A01).mkdir(parents=True)
    nbformat.write(nb, tmp_path / "in" / "p_printer" / A01 / f"{A01}.ipynb")
    grade_class(tmp_path / "in", tmp_path / "out", repo, timeout=GRADING_TIMEOUT, progress=False, workers=1)
    graded = nbformat.read(tmp_path / "out" / "nbgrader" / "autograded" / "p_printer" / A01 / f"{A01}.ipynb",
                           as_version=4)
    cell = next(c for c in graded.cells if c.cell_type == "code" and "print('FIRST'" in c.source)
    assert [(o.output_type, o.get("name")) for o in cell.outputs] == [("stream", "stdout")], cell.outputs
    assert cell.outputs[0].text.split() == ["FIRST", "SECOND"]


@pytest.mark.skipif(not forkserver.enabled(), reason="kernels are not forked here (no sandbox)")
def test_a_spell_without_the_sandbox_does_not_turn_forked_kernels_off_for_good(monkeypatch):
    """`make bench` times grading with COURSE_SANDBOX=off first, in the same process: asked then,
    whether bwrap isolates the network was once cached as False, and later kernels started fresh."""
    sandbox._isolates_network.cache_clear()
    monkeypatch.setenv("COURSE_SANDBOX", "off")
    assert not sandbox.isolates_network() and not forkserver.enabled()
    monkeypatch.delenv("COURSE_SANDBOX")
    assert sandbox.isolates_network() and forkserver.enabled()


def test_folders_of_killed_graders_are_swept_by_the_next(tmp_path, monkeypatch):
    """Connection files and kernel sockets live in per-process folders, removed at exit; a grader
    killed with SIGKILL cannot, so the next one removes those whose process is gone."""
    monkeypatch.setattr(sandbox.tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    left = tmp_path / f"tc-connections-{gone.pid}-abc"
    (left / "kernel-1.json").parent.mkdir()
    (left / "kernel-1.json").write_text("{}")
    living = tmp_path / f"tc-connections-{os.getppid()}-def"  # a live process: kept
    other_kind = tmp_path / f"tc-kernels-{gone.pid}-ghi"  # another kind: swept by its own kind's next folder
    living.mkdir()
    other_kind.mkdir()
    new = Path(sandbox.process_folder("connections"))
    assert new.is_dir() and new.name.startswith(f"tc-connections-{os.getpid()}-")
    assert not left.exists() and living.exists() and other_kind.exists()
    Path(sandbox.process_folder("kernels"))
    assert not other_kind.exists()


def test_the_readme_counts_the_attacks_the_suite_runs(repo):
    """The benchmarks guide's 'N of M defended' is this suite's: every case of attacks.py, none left undefended."""
    total = len(attacks.cases())
    lent = len(attacks.lent_cases())
    assert not attacks.NOT_DEFENDED
    text = (repo.root / "docs" / "benchmarks.md").read_text()
    assert f"| {total} of {total} defended |" in text and f"| {lent} of {lent} defended |" in text
    assert "(`attacks.compromised_judge`" in text and "| 1 of 1 defended |" in text


@pytest.mark.skipif(not judge_box.enabled(), reason="judges are not boxed here (no sandbox)")
def test_a_compromised_judge_spoils_at_most_its_own_notebook(repo, tmp_path):
    """A judge running the attacker's code (the checks of a copy of the repository carry it, as a flaw in
    the allow-list would): it cannot write another student's record, the class's output, the checks or
    another submission, read another submission, reach the network, allocate past its memory limit, or
    leave files or state for the next notebook's judge; both notebooks keep their own points."""
    assert attacks.compromised_judge(repo, tmp_path) == ""
