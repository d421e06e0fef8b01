"""Shared fixtures: one grading run of the sample class (plus solutions and bare stubs)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
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

# `make test-fast`, the contributor's loop (CONTRIBUTING, "Tests"), leaves out the tests marked `heavy`: those
# that start a kernel (grade, check or run a notebook), use a fixture that grades a class, or load the machine on
# purpose. There, a test that starts a kernel or a grader unmarked fails and says so: the loop stays fast as
# tests are added. The marks are kept here, in one place: by fixture, by module (every test of it), by test.
FAST = os.environ.get("COURSE_TEST_FAST") == "1"
GRADING_FIXTURES = {"graded", "catalogue_graded", "attack_class", "tampered", "lent_attacks"}
HEAVY_MODULES = {
    "test_browser.py",
    "test_cli.py",
    "test_distributed.py",
    "test_gpu_runs.py",
    "test_grader_errors.py",
    "test_journeys.py",
    "test_judge.py",
    "test_lms_roundtrip.py",
    "test_memory.py",
    "test_resume.py",
}
# The tests that load the machine on purpose (more threads than cores, busy processes beside the grader): one
# group, never beside one another, handed out first, beside the catalogue (whose claims hold no clock).
LOAD_TESTS = {
    "test_checks.py::test_verdicts_hold_under_any_threads_and_load",
    "test_grading.py::test_same_answers_same_scores_under_any_threads_and_load",
    "test_grading.py::test_scores_do_not_depend_on_the_machine_load",
}
HEAVY_TESTS = LOAD_TESTS | {  # a name without parameters marks each of its parameters
    "test_book.py::test_every_chapter_is_there_in_order",
    "test_boundary.py::test_hostile_hand_ins_are_their_own_rows_and_the_class_is_written",
    "test_boundary.py::test_one_pairs_failure_anywhere_leaves_the_others_rows",
    "test_boundary.py::test_without_deadlines_the_gradebook_still_holds_each_hand_ins_time",
    "test_build.py::test_solution_notebooks_run_top_to_bottom",
    "test_checks.py::test_a_catalogue_file_is_checked_on_its_own",
    "test_checks.py::test_correct_variant_passes[beam_search-topk_per_hypothesis]",
    "test_collect.py::test_collected_canvas_zip_is_graded",
    "test_faults.py::test_ctrl_c_with_dask_ends_quietly_and_leaves_no_worker",
    "test_gradescope.py::test_correct_wrong_broken_and_missing_submissions",
    "test_grading.py::test_a_solution_that_lost_points_is_timed_once_and_reported_to_instructors_only",
    "test_grading.py::test_limits_are_measured_on_the_solution_once_per_machine",
    "test_grading.py::test_nbgraders_own_autograde_with_the_course_config_grades_as_the_course_does",
    "test_hostile_output.py::test_honest_students_keep_their_score_and_the_attacker_gains_nothing",
    "test_hostile_output.py::test_no_csv_cell_is_a_formula_and_every_cell_reads_back",
    "test_hostile_output.py::test_the_class_report_and_similarity_pages_run_nothing_a_student_wrote",
    "test_hostile_output.py::test_the_feedback_page_runs_nothing_a_student_wrote",
    "test_hostile_output.py::test_the_formgrader_serves_nothing_a_student_wrote_live",
    "test_hostile_output.py::test_the_formgrader_view_runs_nothing_a_student_wrote",
    "test_hostile_output.py::test_the_payloads_reached_the_grader",
    "test_intake.py::test_a_linked_timestamp_is_not_read",
    "test_intake.py::test_links_special_files_and_oversized_notebooks_are_refused_not_read",
    "test_learning_aids.py::test_an_unwritten_exercise_shows_the_test_and_the_stub_without_torch_frames",
    "test_lti.py::test_done_when_a_graded_class_reaches_the_lms_with_its_extension_its_words_and_its_unmatched",
    "test_release.py::test_the_classroom_workflow_grades_in_the_release",
    "test_release.py::test_the_release_environment_installs_and_runs_notebook_01",
    "test_similarity.py::test_every_copier_is_flagged_and_only_the_known_honest_pairs",
    "test_similarity.py::test_short_exercises_copied_together_add_up",
    "test_similarity.py::test_the_report_pages",
    "test_tamper.py::test_a_cells_prints_are_one_output_however_they_were_flushed",
    "test_tamper.py::test_a_compromised_judge_spoils_at_most_its_own_notebook",
    "test_tamper.py::test_a_notebook_saved_as_latin1_is_read",
    "test_tamper.py::test_every_student_folder_is_graded_or_reported",
    "test_tamper.py::test_files_a_notebook_leaves_in_shared_memory_or_tmp_reach_no_other",
    "test_tamper.py::test_files_the_grader_reads_cannot_be_poisoned",
    "test_tamper.py::test_forked_kernel_outputs_what_a_fresh_one_does",
    "test_tamper.py::test_kernel_template_attacks_reach_no_other_notebook",
    "test_tamper.py::test_notebook_time_limit_and_total_output_cap",
    "test_tamper.py::test_sandbox_contains_processes_home_files_and_sight",
}
_KERNELS_ALLOWED = [True]


# `make test` runs two pytest processes side by side (pytest-xdist, `-n 2`): in a grading test one process often
# waits for another (a kernel, a judge, pip, a browser) and a core is left idle. Tests are handed out by group, each
# group whole to one process: the catalogue; the tests that load the machine (LOAD_TESTS); the tests of the session's
# graded class (its fixture made once); then each module (its module fixtures made once), the modules with heavy
# tests first, the most heavy tests first (the longest work first: neither process is left with the last long
# module while the other idles, as when one process ran every heavy test), then the rest in the files' order.
# Each process's collection writes each test's group to GROUPS, which the scheduler reads (xdist's own
# `xdist_group` marks set the groups by renaming a test, which pytest 9 no longer lets a plugin do).
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
GROUPS = Path(tempfile.gettempdir()) / f"transformer-course-test-groups-{os.getppid() if XDIST_WORKER else os.getpid()}"
FIRST = ["catalogue", "load", "graded"]

if XDIST_WORKER:
    import torch

    # The other process has the other core: torch's threads in this one (one per core) would spin against it.
    torch.set_num_threads(1)


def _named(item: pytest.Item, names: set[str]) -> bool:
    """Whether ``names`` (``module::test``, without ``tests/``) names the test, or the test its parameters are of."""
    name = item.nodeid.removeprefix("tests/")
    return name in names or name.split("[")[0] in names


def _group(item: pytest.Item) -> str:
    fixtures = getattr(item, "fixturenames", ())
    if "catalogue_graded" in fixtures:
        return "catalogue"
    if _named(item, LOAD_TESTS):
        return "load"
    if "graded" in fixtures:
        return "graded"
    return item.nodeid.split("::")[0]


def _order(items: list[pytest.Item], groups: dict[str, str]) -> dict[str, int]:
    """Each group's place: FIRST's, then the groups by their number of heavy tests (most first), the files' order
    breaking ties (a stable sort)."""
    heavy: dict[str, int] = {}
    for item in items:
        heavy[groups[item.nodeid]] = heavy.get(groups[item.nodeid], 0) + bool(item.get_closest_marker("heavy"))
    ranked = sorted(heavy, key=lambda group: (FIRST.index(group) if group in FIRST else len(FIRST), -heavy[group]))
    return {group: place for place, group in enumerate(ranked)}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if (GRADING_FIXTURES & set(getattr(item, "fixturenames", ()))
                or item.nodeid.removeprefix("tests/").split("::")[0] in HEAVY_MODULES or _named(item, HEAVY_TESTS)):
            item.add_marker(pytest.mark.heavy)
    if XDIST_WORKER:  # a plain run keeps the files' order
        groups = {item.nodeid: _group(item) for item in items}
        place = _order(items, groups)
        items.sort(key=lambda item: place[groups[item.nodeid]])
        part = GROUPS.with_suffix(f".{XDIST_WORKER}")
        part.write_text(json.dumps(groups))
        part.replace(GROUPS)  # whole: the processes collect the same tests


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        """xdist's scheduler by scope (a scope's tests in one process, the scopes in collection order with
        --no-loadscope-reorder), a test's scope being its group."""

        def _split_scope(self, nodeid: str) -> str:
            if not hasattr(self, "_groups"):
                self._groups = json.loads(GROUPS.read_text())
            return self._groups[nodeid]

    return ByGroup(config, log)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not XDIST_WORKER:
        GROUPS.unlink(missing_ok=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _KERNELS_ALLOWED[0] = not FAST or item.get_closest_marker("heavy") is not None


def _refuse_kernels() -> None:
    """In the fast loop, starting a kernel or a grader in an unmarked test (its fixtures included) fails."""
    from jupyter_client.manager import AsyncKernelManager, KernelManager

    from transformer_course.grading.notebook.grade import Grader

    def guarded(original):
        def start(*args, **kwargs):
            if not _KERNELS_ALLOWED[0]:
                raise RuntimeError("this test starts a kernel or a grader: mark it heavy (tests/conftest.py, "
                                   "HEAVY_TESTS), which `make test-fast` leaves out")
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


@pytest.fixture
def local_multi30k(multi30k_dir: Path | None) -> Path:
    """The local Multi30k copy; a test that needs it skips, saying where it was looked for, when there is none."""
    if multi30k_dir is None:
        pytest.skip(f"no local Multi30k copy (set MULTI30K_DIR or provide {SHARED_MULTI30K})")
    return multi30k_dir


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
