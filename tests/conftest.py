"""Shared fixtures: one grading run of the sample class (plus solutions and bare stubs)."""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from transformer_course.grading.run.batch import grade_class
from transformer_course.instructors import similarity
from transformer_course.instructors.deadlines import load as load_deadlines
from transformer_course.layout import Repo

ROOT = Path(__file__).resolve().parents[1]
# Seconds a cell may run in the tests' grading runs: what a test checks is a score, not a speed,
# so a correct cell must finish in time even on a heavily loaded 2-core machine. Tests of
# endless loops pay it once per such cell.
GRADING_TIMEOUT = 60
# The cell limit of classes that loop forever on purpose (the attacks): an endless cell costs its limit, then
# RETRY_FACTOR (3) times it again, in CPU seconds: 40 s at 10, 240 s at GRADING_TIMEOUT. Honest cells keep
# their margin: the limit counts the CPU seconds of the notebook's own processes, which a loaded machine does
# not raise, and is never below ten times what the solution's cell takes on this machine (grading/notebook/limits.py).
ATTACK_TIMEOUT = 10


# Generated hostile input (hypothesis): a bounded, repeatable profile in `make test` (no example
# database written into the checkout, the same examples every run); `make bench` runs the "long"
# profile (HYPOTHESIS_PROFILE=long), more examples and a fresh draw each time.
settings.register_profile("test", max_examples=40, deadline=None, database=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("long", max_examples=1000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "test"))

# `make test-fast`, the contributor's loop (CONTRIBUTING, "Tests"), leaves out the tests marked `grading`: those
# that start a kernel (grade or check a notebook, run one) or use a fixture that does. There, a test that starts
# one unmarked fails and says so, so the loop stays fast as tests are added.
FAST = os.environ.get("COURSE_TEST_FAST") == "1"
# Fixtures that grade a class: a test that uses one is marked `grading` here.
GRADING_FIXTURES = {"graded", "catalogue_graded", "attack_class", "tampered", "lent_attacks"}
_KERNELS_ALLOWED = [True]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if GRADING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.grading)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _KERNELS_ALLOWED[0] = not FAST or item.get_closest_marker("grading") is not None


def _refuse_kernels() -> None:
    """In the fast loop, starting a kernel or a grader in an unmarked test (its fixtures included) fails."""
    from jupyter_client.manager import AsyncKernelManager, KernelManager

    from transformer_course.grading.notebook.grade import Grader

    def guarded(original):
        def start(*args, **kwargs):
            if not _KERNELS_ALLOWED[0]:
                raise RuntimeError("this test starts a kernel or a grader: mark it @pytest.mark.grading "
                                   "(`make test-fast` leaves those out)")
            return original(*args, **kwargs)
        return start

    for cls, name in ((KernelManager, "start_kernel"), (AsyncKernelManager, "start_kernel"), (Grader, "__init__")):
        setattr(cls, name, guarded(getattr(cls, name)))


if FAST:
    _refuse_kernels()

# A check leaves no server behind in the tests (one test turns it on: test_journeys.py).
os.environ.setdefault("COURSE_CHECK_SERVER", "off")

# Tests and CI read Multi30k from the shared read-only copy beside the checkout (never downloaded).
SHARED_MULTI30K = Repo(ROOT).shared_multi30k
Repo(ROOT).prefer_shared_multi30k()


@pytest.fixture(scope="session")
def multi30k_dir() -> Path | None:
    """The local Multi30k copy, or None when there is none (tests that need it skip)."""
    value = os.environ.get("MULTI30K_DIR")
    return Path(value) if value and Path(value).is_dir() else None


@pytest.fixture(scope="session")
def repo() -> Repo:
    return Repo(ROOT)


def documentation(root: Path = ROOT) -> str:
    """The README (the front page), the guides in docs/ and CONTRIBUTING.md, as one text: what the
    project says of itself, wherever a page says it."""
    pages = [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "docs").glob("*.md"))]
    return "\n\n".join(page.read_text() for page in pages)


@pytest.fixture(scope="session")
def expected() -> dict:
    with open(ROOT / "autograder" / "sample_class.toml", "rb") as f:
        return tomllib.load(f)


# The README's main job writes here (Makefile: OUT ?= out/sample_class).
MAKE_GRADE_OUT = ROOT / "out" / "sample_class"


@pytest.fixture(scope="session")
def graded(repo: Repo, tmp_path_factory: pytest.TempPathFactory):
    """Grade the sample class, the solution notebooks (student "solutions") and the released
    stubs (student "stubs") in one run, as `transformer-course grade` would: resuming `make grade`'s
    run of the sample class where there is one (COURSE_TEST_FRESH=1: everything graded here)."""
    submitted = tmp_path_factory.mktemp("submitted")
    shutil.copytree(repo.sample_class, submitted, dirs_exist_ok=True)
    for assignment in repo.assignments():
        name = f"{assignment.notebook}.ipynb"
        for student, source in (("solutions", repo.solutions / name),
                                ("stubs", repo.course / assignment.name / name)):
            target = submitted / student / assignment.name
            target.mkdir(parents=True)
            shutil.copyfile(source, target / name)
            (target / "timestamp.txt").write_text("2026-11-23 18:00:00.000000 UTC\n")  # on time
    out = tmp_path_factory.mktemp("graded")
    if (MAKE_GRADE_OUT / "results").is_dir() and os.environ.get("COURSE_TEST_FRESH") != "1":
        # `make grade` graded the same sample class with the same limits (CI runs it just before the tests):
        # its records are resumed wherever their fingerprint (the hand-in's bytes and the grader's version,
        # its code, checks and sources) still matches, and any other pair is graded here.
        shutil.copytree(MAKE_GRADE_OUT, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("report"))
    deadlines = load_deadlines(repo.autograder / "deadlines.toml", known=[a.name for a in repo.assignments()])
    results = grade_class(submitted, out, repo, timeout=GRADING_TIMEOUT, progress=False, deadlines=deadlines)
    similarity.write(similarity.from_class(out, repo), out / "similarity")  # as `transformer-course report` does
    return {(r.student_id, r.assignment): r for r in results}, out


@pytest.fixture
def small_class(repo, tmp_path) -> Path:
    """Two students who handed in 01_self_attention and one who handed in nothing."""
    submitted = tmp_path / "submitted"
    for student in ("ada", "cho"):
        shutil.copytree(repo.sample_class / student / "01_self_attention", submitted / student / "01_self_attention")
    (submitted / "bob").mkdir()
    return submitted
