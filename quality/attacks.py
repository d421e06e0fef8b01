"""Attacks on the grader from answer cells, as students who want points (or who break things by
accident) would write them. Each starts from the solution of notebook 01 (softmax 3,
attention_scores 2, self_attention 3, SelfAttention 3 points) and says what it must score.

``tests/test_tamper.py`` grades them through the real path and checks each; ``make bench``
prints how many are defended.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

from transformer_course.layout import Repo

A01 = "01_self_attention"
FULL = {"softmax": 3, "attention_scores": 2, "self_attention": 3, "SelfAttention": 3}
WRONG_SOFTMAX = "def softmax(x, dim=-1):\n    return x.exp()\n"  # not normalised
NO_SOFTMAX = dict(FULL, softmax=0)

PATCH_COMPARISONS = """
import numpy, numpy.testing, torch, torch.testing
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
numpy.testing.assert_allclose = lambda *a, **k: None
torch.Tensor.allclose = lambda *a, **k: True
torch.Tensor.__eq__ = lambda *a, **k: torch.tensor(True)
torch.isfinite = lambda x: torch.ones_like(x, dtype=torch.bool)
"""
FAKE_CHECKS = """
import sys, types
fake = types.ModuleType("course_reference")
fake.__path__ = []
checks = types.ModuleType("course_reference.checks")
checks.__path__ = []
nb01 = types.ModuleType("course_reference.checks.nb01")
for name in ("check_softmax", "check_attention_scores", "check_self_attention", "check_SelfAttention"):
    setattr(nb01, name, lambda *a, **k: None)
checks.nb01, fake.checks = nb01, checks
sys.modules.update({"course_reference": fake, "course_reference.checks": checks,
                    "course_reference.checks.nb01": nb01})
"""
STEAL_REFERENCE = """
import sys
try:
    with open("/proc/self/environ", "rb") as f:
        env = dict(v.split(b"=", 1) for v in f.read().split(b"\\0") if b"=" in v)
    sys.path[:0] = env.get(b"PYTHONPATH", b"").decode().split(":")
    import course_reference.nb01_self_attention as ref
    softmax = ref.softmax
except ImportError as exc:
    print("could not steal it:", exc)
"""
WRAP_REFERENCE = """
def attention_scores(query, key):
    import sys
    for module in list(sys.modules.values()):  # whatever the grader has loaded
        if getattr(module, "__name__", "").endswith("nb01_self_attention"):
            return module.attention_scores(query, key)
    return query @ key.mT * 2
"""
SILENCE_ERRORS = """
import sys
ip = get_ipython()
ip.showtraceback = lambda *a, **k: None
ip._showtraceback = lambda *a, **k: None
ip.set_custom_exc((BaseException,), lambda *a, **k: None)
sys.excepthook = lambda *a: None
"""
SILENCE_DISPLAY = """
import sys
get_ipython().display_pub.publish = lambda *a, **k: None
sys.displayhook = lambda value: None
"""
REPLACE_RUNNER = """
for _k, _v in list(globals().items()):
    if _k.startswith("_") and callable(_v) and not isinstance(_v, type) and _k not in ("_", "__", "___"):
        globals()[_k] = lambda *a, **k: None
"""
NOISY_SOFTMAX = """
import sys, warnings
def softmax(x, dim=-1):
    warnings.warn("softmax: this is only a warning", UserWarning)
    print("progress...", file=sys.stderr)
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)
"""
LYING_SUBCLASS = """
class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("allclose", "equal", "isclose"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})

def softmax(x, dim=-1):
    return torch.zeros_like(x).as_subclass(Liar)
"""
LYING_MODE = """
from torch.overrides import TorchFunctionMode

class Liar(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("allclose", "equal"):
            return True
        return func(*args, **(kwargs or {}))

Liar().__enter__()
"""
PATCH_DURING_TEST = """
import sys
def softmax(x, dim=-1):  # patches the checks while they run, after the grader's restore
    for name, module in list(sys.modules.items()):
        if name.startswith("course_reference.checks"):
            for attr in ("assert_matches", "_close"):
                if hasattr(module, attr):
                    setattr(module, attr, lambda *a, **k: True)
    return (x - x.amax(dim, keepdim=True)).exp()  # finite, but not normalised
"""
PEEK_AT_CELLS = """
def _peek(lines):
    print("PEEK:", "".join(lines))
    return lines

get_ipython().input_transformers_post.append(_peek)
"""
STUBBORN = """
import time
while True:
    try:
        time.sleep(0.2)
    except KeyboardInterrupt:
        pass
"""

SEARCH_REFERENCE = """
import os
def _search():  # every file this kernel can see, for notebook 01's reference, solution or checks
    own = os.getcwd()
    found, read = None, 0
    for root, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev")]
        for name in files:
            path = os.path.join(root, name)
            if not name.endswith((".py", ".ipynb", ".txt", ".json", ".md")) or os.path.islink(path) or root == own:
                continue
            try:
                with open(path, errors="ignore") as f:
                    text = f.read(400_000)
            except OSError:
                continue
            read += 1
            if "def check_softmax(" in text:
                print("found the checks in", path)
            if "def self_attention(" in text and "def softmax(" in text:
                print("found an answer in", path)
                if name.endswith(".py") and found is None:
                    _ns = {"__name__": "found"}
                    try:
                        exec(compile(text, "<found>", "exec"), _ns)
                        found = _ns.get("softmax")
                    except Exception:
                        pass
    print(f"read {read} files;", "searched: no reference" if found is None else "searched")
    return found
_found = _search()
if callable(_found):
    softmax = _found
"""
# Code that runs in the student's kernel while the grader's checks run.
EXEC_REFERENCE = """
import os
with open("/proc/self/environ", "rb") as _f:
    _env = dict(v.split(b"=", 1) for v in _f.read().split(b"\\0") if b"=" in v)
for _p in _env.get(b"PYTHONPATH", b"").decode().split(os.pathsep):
    _file = os.path.join(_p, "course_reference", "nb01_self_attention.py")
    if os.path.isfile(_file):
        _ns = {"__name__": "my_helpers"}
        with open(_file) as _f:
            exec(compile(_f.read(), "<string>", "exec"), _ns)
        softmax = _ns["softmax"]
"""
SETTRACE = """
import sys, threading

def _tracer(frame, event, arg):  # every check compares through assert_matches(got, expected, ...)
    if event == "call" and frame.f_code.co_name == "assert_matches":
        frame.f_locals["got"] = frame.f_locals["expected"]
    return None

sys.settrace(_tracer)
threading.settrace(_tracer)
"""
THREAD_REPATCH = """
import sys, threading, torch
sys.setswitchinterval(1e-6)

def _again():
    while True:
        torch.allclose = lambda *a, **k: True
        torch.equal = lambda *a, **k: True
        torch.Tensor.allclose = lambda *a, **k: True

threading.Thread(target=_again, daemon=True).start()
"""
# Each an attack that still gains points: tests/test_tamper.py expects it to (strict xfail), so a fix
# shows up there and the grader guide's "Not defended" list (docs/grader.md) must shrink with it. Empty since
# notebook 01's tests are judged in the grader (transformer_course.grading.judging.judge) and its reference is not in
# the sandbox.
NOT_DEFENDED: set[str] = set()


def cell_of(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def add_after(nb, grade_id, code):
    """A cell of the student's own right after answer cell ``grade_id``."""
    at = nb.cells.index(cell_of(nb, grade_id)) + 1
    nb.cells.insert(at, new_code_cell(code))


def set_answer(nb, grade_id, code):
    cell_of(nb, grade_id).source = code


def set_metadata(nb, cell, **changes):
    """Edit the nbgrader metadata of the cell whose grade_id is ``cell`` (a key set to None is removed)."""
    meta = cell_of(nb, cell).metadata["nbgrader"]
    meta.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del meta[key]


def unmark(nb, grade_id):
    """Remove the nbgrader metadata of cell ``grade_id``: an ordinary cell to nbgrader."""
    del cell_of(nb, grade_id).metadata["nbgrader"]


def add_graded_cell(nb, after, grade_id, points, code):
    """A graded test cell of the student's own, after cell ``after``."""
    add_after(nb, after, code)
    cell = nb.cells[nb.cells.index(cell_of(nb, after)) + 1]
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": grade_id, "locked": False, "points": points,
                                 "schema_version": 3, "solution": False}


def delete_cells(nb, *grade_ids):
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in grade_ids]


Case = tuple[Callable[[nbformat.NotebookNode], object], dict[str, int], str]


def cases() -> dict[str, Case]:
    """student -> (edit function, expected points per exercise, words in the feedback)."""
    return {
        "t_comparisons": (lambda nb: (set_answer(nb, "softmax", WRONG_SOFTMAX + PATCH_COMPARISONS)), NO_SOFTMAX, ""),
        "t_subclass": (lambda nb: set_answer(nb, "softmax", LYING_SUBCLASS), NO_SOFTMAX, ""),
        "t_function_mode": (lambda nb: set_answer(nb, "softmax", WRONG_SOFTMAX + LYING_MODE), NO_SOFTMAX, ""),
        "t_patch_during_test": (lambda nb: set_answer(nb, "softmax", PATCH_DURING_TEST), NO_SOFTMAX, ""),
        "t_peek_at_cells": (lambda nb: add_after(nb, "softmax", PEEK_AT_CELLS), FULL, ""),
        "t_fake_checks": (lambda nb: set_answer(nb, "softmax", WRONG_SOFTMAX + FAKE_CHECKS), NO_SOFTMAX, ""),
        # The reference is not in the kernel: the import fails and the student's own softmax is graded.
        "t_steal_reference": (lambda nb: (add_after(nb, "softmax", STEAL_REFERENCE),
                                          set_answer(nb, "attention_scores", WRAP_REFERENCE)),
                              dict(FULL, attention_scores=0), ""),
        "t_search_reference": (lambda nb: set_answer(nb, "softmax", WRONG_SOFTMAX + SEARCH_REFERENCE), NO_SOFTMAX,
                               ""),
        "t_silence_errors": (lambda nb: set_answer(nb, "softmax", WRONG_SOFTMAX + SILENCE_ERRORS), NO_SOFTMAX, ""),
        "t_silence_display": (lambda nb: add_after(nb, "softmax", SILENCE_DISPLAY), FULL, ""),
        # The tests do not run in the kernel: replacing its functions changes nothing but the student's own.
        "t_replace_runner": (lambda nb: set_answer(nb, "softmax", WRONG_SOFTMAX + REPLACE_RUNNER), NO_SOFTMAX, ""),
        "t_reseed": (lambda nb: add_after(nb, "softmax", "import random\nrandom.seed(0)\ntorch.manual_seed(1234)"),
                     FULL, ""),
        "t_sys_exit": (lambda nb: add_after(nb, "softmax", "import sys\nsys.exit(0)"), FULL, ""),
        "t_os_exit": (lambda nb: add_after(nb, "attention_scores", "import os\nos._exit(1)"),
                      dict(softmax=3, attention_scores=0, self_attention=0, SelfAttention=0), "kernel died"),
        "t_endless": (lambda nb: set_answer(nb, "self_attention", "while True:\n    pass\n"),
                      dict(FULL, self_attention=0), "did not finish"),
        "t_stubborn": (lambda nb: add_after(nb, "self_attention", STUBBORN),
                       dict(FULL, self_attention=0, SelfAttention=0), "interrupted"),
        "t_memory": (lambda nb: add_after(nb, "attention_scores", "hog = torch.ones(2**30)  # 4 GiB"), FULL, ""),
        "t_flood": (lambda nb: add_after(nb, "softmax", "print('spam ' * 2_000_000)\nfor i in range(20000):\n"
                                                    "    print(i)"), FULL, ""),
        "t_warnings": (lambda nb: set_answer(nb, "softmax", NOISY_SOFTMAX), FULL, ""),
        "t_deleted_tests": (lambda nb: (set_answer(nb, "softmax", WRONG_SOFTMAX), delete_cells(
                                nb, "test_softmax", "test_softmax_hidden", "test_attention_scores")),
                            NO_SOFTMAX, ""),
        # Cell metadata edited (by hand, or by an editor): graded against the release, each exercise on its own.
        "t_grade_off": (lambda nb: set_metadata(nb, "test_softmax_hidden", grade=False, points=None), FULL,
                        "metadata restored"),
        "t_grade_off_wrong": (lambda nb: (set_answer(nb, "softmax", WRONG_SOFTMAX),
                                          set_metadata(nb, "test_softmax", grade=False, points=None),
                                          set_metadata(nb, "test_softmax_hidden", grade=False, points=None)),
                              NO_SOFTMAX, "grade True -> False"),
        "t_points_raised": (lambda nb: set_metadata(nb, "test_attention_scores", points=100), FULL, "points"),
        "t_renamed_test": (lambda nb: (set_answer(nb, "softmax", WRONG_SOFTMAX),
                                       set_metadata(nb, "test_softmax_hidden", grade_id="my_softmax_test")),
                           NO_SOFTMAX, "grade_id"),
        "t_unmarked_answer": (lambda nb: unmark(nb, "softmax"), FULL, "metadata was removed"),
        "t_extra_graded_cell": (lambda nb: add_graded_cell(nb, "SelfAttention", "test_bonus", 50, "pass"), FULL,
                                "no released cell"),
        "t_exec_reference": (lambda nb: set_answer(nb, "softmax", WRONG_SOFTMAX + EXEC_REFERENCE), NO_SOFTMAX, ""),
        "t_settrace": (lambda nb: set_answer(nb, "softmax", WRONG_SOFTMAX + SETTRACE), NO_SOFTMAX, ""),
        "t_thread_repatch": (lambda nb: set_answer(nb, "softmax", WRONG_SOFTMAX + THREAD_REPATCH), NO_SOFTMAX, ""),
        "t_kernelspec": (lambda nb: nb.metadata.update(
            kernelspec={"name": "python2", "display_name": "Python 2", "language": "python"}), FULL, ""),
    }


# Attacks through the grader's objects that a test hands to the student's code (grader v4: the allow-list
# of transformer_course.grading.judging.lending). Each goes around the kernel's stand-in class (which the student
# controls) and asks the grader directly; it prints what the grader answered, then does the honest work.
# What an attack's code prints if it runs in the grader (where a test's output is captured); the
# notebook's source holds it only in pieces, so finding it whole in the output means it ran there.
RAN_IN_GRADER = "GRADER-RAN-IT"


def _around_train_epoch(attempt: str) -> str:
    """An answer cell after ``train_epoch``'s that wraps it: ``attempt`` (code on the ``model`` it is
    given; a refusal is printed), then the honest work."""
    body = textwrap.indent(textwrap.dedent(attempt).strip(), " " * 8)
    return ("\n_honest = train_epoch\n\ndef train_epoch(model, loader, optimizer, scheduler, loss_fn, device):\n"
            f"    try:\n{body}\n    except Exception as exc:\n        print(\"ATTACK ANSWERED:\", exc)\n"
            "    return _honest(model, loader, optimizer, scheduler, loss_fn, device)\n")


# model.__class__.__init__.__globals__['__builtins__']['exec'](code): code run in the grader.
REFLECT_TO_BUILTINS = _around_train_epoch("""
    ask = type(model)._course_ask  # the raw request, past the stand-in's filter of dunders (a lent model)
    init = ask(ask(model, getattr="__class__"), getattr="__init__")
    run = ask(init, getattr="__globals__")["__builtins__"]["exec"]
    run("print('GRADER' + '-RAN-' + 'IT')")
""")
# A lent method's function, then its globals: the builtins through another door.
CALL_LENT_METHOD_GLOBALS = _around_train_epoch("""
    ask = type(model)._course_ask
    forward = ask(model, getattr="forward")
    run = ask(ask(forward, getattr="__func__"), getattr="__globals__")["__builtins__"]["exec"]
    run("print('GRADER' + '-RAN-' + 'IT')")
""")
# The grader's model (not one of this kernel's own) made to answer from the student's code.
WRITE_GRADER_ATTRIBUTE = _around_train_epoch("""
    if type(model).__name__ == "Borrowed":
        model.forward = lambda *a, **k: None
""")
STRIDE_ZERO = """
_honest = train_epoch

def train_epoch(model, loader, optimizer, scheduler, loss_fn, device):
    _honest(model, loader, optimizer, scheduler, loss_fn, device)
    clone = torch.Tensor.clone  # the kernel's own copy skipped, so that the view goes as it is
    torch.Tensor.clone = lambda self, *a, **k: self if self.numel() > 10**8 else clone(self, *a, **k)
    return torch.zeros(1).expand(500_000_000)  # 4 bytes sent, 2 GB once copied
"""
OVERSIZED_REFERENCE = """
_honest_init = PositionalEncoding.__init__

def _init(self, d_model, dropout=0.1, max_len=5000):
    try:  # the grader's lent reference, at a size no test uses: 64 million entries in the grader's memory
        sinusoidal_positional_encoding(8000, 8000)
    except Exception as exc:
        print("ATTACK ANSWERED:", exc)
    _honest_init(self, d_model, dropout, max_len)

PositionalEncoding.__init__ = _init
"""
# The same lent reference at 36 million entries, its sizes sent as 0-dim tensors (counted as ints are).
INDEX_TENSOR_SIZE = """
_honest_init_0d = PositionalEncoding.__init__

def _init_0d(self, d_model, dropout=0.1, max_len=5000):
    try:
        sinusoidal_positional_encoding(torch.tensor(6000), torch.tensor(6000))
    except Exception as exc:
        print("ATTACK ANSWERED:", exc)
    _honest_init_0d(self, d_model, dropout, max_len)

PositionalEncoding.__init__ = _init_0d
"""
# An answer that is plain data the grader would build in its own memory: 3 million floats in a list.
PLAIN_DATA_FLOOD = """
TokenEmbedding.forward = lambda self, tokens: [0.5] * 3_000_000
"""
A07, A05 = "07_training", "05_positional_encoding"


def lent_cases() -> dict[str, tuple[str, Callable[[nbformat.NotebookNode], object], dict[str, int], str]]:
    """student -> (assignment, edit, points lost per exercise, words the attack must print (what the
    grader answered))."""

    def after(grade_id: str, code: str) -> Callable[[nbformat.NotebookNode], object]:
        return lambda nb: add_after(nb, grade_id, code)

    return {
        "t_reflect_to_builtins": (A07, after("train_epoch", REFLECT_TO_BUILTINS), {}, "lends no private"),
        "t_lent_method_globals": (A07, after("train_epoch", CALL_LENT_METHOD_GLOBALS), {}, "lends no private"),
        "t_write_grader_attribute": (A07, after("train_epoch", WRITE_GRADER_ATTRIBUTE), {}, "read-only"),
        "t_stride_zero": (A07, after("train_epoch", STRIDE_ZERO), {"train_epoch": 4}, ""),
        "t_oversized_reference": (A05, after("PositionalEncoding", OVERSIZED_REFERENCE), {}, "at most"),
        "t_index_tensor_size": (A05, after("PositionalEncoding", INDEX_TENSOR_SIZE), {}, "at most"),
        "t_plain_data_flood": (A05, after("TokenEmbedding", PLAIN_DATA_FLOOD), {"TokenEmbedding": 2}, ""),
    }


def write_lent_class(repo: Repo, folder: Path) -> None:
    """One student folder per attack of :func:`lent_cases`, each with its edited notebook."""
    for student, (assignment, edit, _, _) in lent_cases().items():
        notebook = repo.assignment(assignment).notebook
        nb = nbformat.read(repo.solutions / f"{notebook}.ipynb", as_version=4)
        edit(nb)
        (folder / student / assignment).mkdir(parents=True)
        nbformat.write(nb, folder / student / assignment / f"{notebook}.ipynb")


def lent_verdict(repo: Repo, student: str, scores: dict[str, float], feedback: str, output: str) -> str:
    """'' when the attack ``student`` of :func:`lent_cases` got what it should: its honest points, a
    refusal it saw (``output``: its autograded notebook's text) or the feedback that names it, and no
    code of its run in the grader; else what went wrong."""
    assignment, _, lost, words = lent_cases()[student]
    graded = repo.assignment(assignment)
    expected = {e: float(graded.max_score(e) - lost.get(e, 0)) for e in graded.exercises}
    if RAN_IN_GRADER in output:
        return "its code ran in the grader"
    if scores != expected:
        return f"scored {scores}, expected {expected}"
    if words and not ("ATTACK ANSWERED" in output and words in output):
        return f"the grader's refusal ({words!r}) is not in its output"
    if not words and "larger than any test's" not in feedback:
        return "its feedback does not say what it sent was refused"
    return ""


def write_class(repo: Repo, folder: Path) -> None:
    """One student folder per attack under ``folder``, each with its edited notebook 01."""
    solution = repo.solutions / f"{A01}.ipynb"
    for student, (edit, _, _) in cases().items():
        nb = nbformat.read(solution, as_version=4)
        edit(nb)
        name = "mine.ipynb" if student == "t_kernelspec" else f"{A01}.ipynb"  # renamed too
        (folder / student / A01).mkdir(parents=True)
        nbformat.write(nb, folder / student / A01 / name)


def verdict(student: str, scores: dict[str, float], feedback: str) -> str:
    """'' when the attack ``student`` got what it should (scores, and words in its feedback),
    else what went wrong."""
    _, expected, words = cases()[student]
    if scores != {k: float(v) for k, v in expected.items()}:
        return f"scored {scores}, expected {expected}"
    if words and words not in feedback:
        return f"feedback without {words!r}"
    return ""


# A judge whose own code is the attacker's (what a flaw in the allow-list, or in torch's loading of
# what the kernel sends, would give): the checks of notebook 05 in a copy of the repository run this
# in each judge's first check (not at import: the judges' template imports the checks once, before any
# judge exists). Every line it prints is either what it could not do (lower case) or what it did (upper
# case: a breach).
COMPROMISED_JUDGE = '''
def _course_attack():
    import builtins, os, socket
    said = []
    for path in {writes!r}:
        try:
            with open(path, "a") as f:
                f.write("PWNED")
            said.append("WROTE " + path)
        except OSError:
            said.append("cannot write")
    for path in {reads!r}:
        try:
            open(path).read()
            said.append("READ " + path)
        except OSError:
            said.append("cannot read")
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
        said.append("NETWORK")
    except OSError:
        said.append("no network")
    import glob  # the sockets' folders the judges' sandbox mounts writable (the judges', the kernels')
    shared = glob.glob("/tmp/tc-judges-*") + glob.glob("/tmp/tc-kernels-*")
    for path in ["/tmp/left-by-a-judge", "/dev/shm/left-by-a-judge"] + [d + "/left-by-a-judge" for d in shared]:
        if os.path.exists(path):
            said.append("LEFTOVER " + path)
        with open(path, "w") as f:
            f.write("for the next judge")
    if hasattr(builtins, "_course_left_by_a_judge"):
        said.append("STATE LEFT")
    builtins._course_left_by_a_judge = True
    try:
        hog = bytearray({memory_mb} << 20)
        said.append("MEMORY UNBOUNDED")
        del hog
    except MemoryError:
        said.append("memory bounded")
    print("JUDGE ATTACK:", "; ".join(said))


def _course_each_judge(check):
    def wrapped(*args, **kwargs):  # the attack runs where the judging does: in the first check a judge calls
        if not globals().get("_course_attacked"):
            globals()["_course_attacked"] = True
            _course_attack()
        return check(*args, **kwargs)
    return wrapped


for _name in [n for n in globals() if n.startswith("check_")]:
    globals()[_name] = _course_each_judge(globals()[_name])
'''


def compromised_judge_code(writes: list[str], reads: list[str], port: int, memory_mb: int) -> str:
    """The attack appended to a copy of the checks (see :data:`COMPROMISED_JUDGE`): it tries to write
    ``writes`` (another student's record, the class's output, the checks, another submission), read
    ``reads``, reach ``127.0.0.1:port``, leave files and state for the next judge, and allocate
    ``memory_mb`` MiB (more than the judge's limit)."""
    return COMPROMISED_JUDGE.format(writes=writes, reads=reads, port=port, memory_mb=memory_mb)


def compromised_judge_verdict(printed: str) -> str:
    """'' when a compromised judge's report (the text of its notebook) shows no breach, else the breaches."""
    lines = re.split(r"\\n|\n", printed)  # the notebook's text, or its JSON (newlines escaped)
    reports = [line.split("JUDGE ATTACK:", 1)[1] for line in lines if "JUDGE ATTACK:" in line]
    if not reports:
        return "the attack did not run"
    breaches = sorted({part.strip() for report in reports for part in report.split(";")
                       if part.strip() and part.strip()[0].isupper()})
    return "; ".join(breaches)


def compromised_judge(repo: Repo, folder: Path, memory_mb: int = 2000) -> str:
    """Grade two honest notebooks 05 (two students, one worker) with a copy of the repository under
    ``folder`` whose checks carry :data:`COMPROMISED_JUDGE`: '' when neither judge could do anything
    but judge its own notebook, else what went wrong. Its attempts: another student's record, a file of
    ``OUT``, the checks and another submission (writes), that submission (read), a port on this machine,
    files and state left for the next judge, ``memory_mb`` + 1000 MiB."""
    import shutil
    import socket

    from transformer_course.grading.run.batch import grade_class

    copy = Repo(folder / "repo")
    shutil.copytree(repo.autograder, copy.autograder, ignore=shutil.ignore_patterns("submitted", "__pycache__"))
    shutil.copytree(repo.solutions, copy.solutions)
    notebook = f"{copy.assignment(A05).notebook}.ipynb"
    submitted, out = folder / "in", folder / "out"
    for student in ("j_a_first", "j_b_second"):
        (submitted / student / A05).mkdir(parents=True)
        shutil.copy(copy.solutions / notebook, submitted / student / A05)
    record, other = out / "results" / "j_a_first" / f"{A05}.json", submitted / "j_a_first" / A05 / notebook
    checks = copy.reference / "course_reference" / "checks" / "nb05.py"
    with socket.create_server(("127.0.0.1", 0)) as listener:
        attack = compromised_judge_code([str(record), str(out / "planted"), str(checks), str(other)], [str(other)],
                                        listener.getsockname()[1], memory_mb + 1000)
        checks.write_text(checks.read_text() + attack)
        kept = {path: path.read_bytes() for path in (checks, other)}
        results = [r for r in grade_class(submitted, out, copy, progress=False, workers=1, memory_mb=memory_mb)
                   if r.assignment == A05]
    wrong = [f"{r.student_id}: {r.score:g} of {r.max_score:g} ({r.reason})" for r in results if r.score != r.max_score]
    for r in results:
        text = (out / "nbgrader" / "autograded" / r.student_id / A05 / notebook).read_text()
        if breach := compromised_judge_verdict(text):
            wrong.append(f"{r.student_id}'s judge: {breach}")
    if len(results) != 2:
        wrong.append(f"{len(results)} notebooks graded")
    if {path: path.read_bytes() for path in kept} != kept:
        wrong.append("a file changed")
    if (out / "planted").exists() or "PWNED" in record.read_text():
        wrong.append("OUT written")
    return "; ".join(wrong)
