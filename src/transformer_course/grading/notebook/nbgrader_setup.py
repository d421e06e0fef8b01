"""nbgrader configuration shared by the build, the grader and ``autograder/nbgrader_config.py``."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import math
import os
import secrets
import sys
import time
from pathlib import Path

import nbformat
from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbconvert.exporters import NotebookExporter
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor, Preprocessor
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell
from nbgrader.api import get_alembic_version as NBGRADER_ALEMBIC_VERSION  # noqa: N812 (kept as nbgrader's own)
from nbgrader.apps import NbGraderAPI
from nbgrader.converters import Autograde
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import ClearHiddenTests, Execute, GetGrades, OverwriteCells
from traitlets import Bool, Integer, Unicode
from traitlets.config import Config

from transformer_course.grading.judging import judge_box
from transformer_course.grading.judging.judge_box import BoxedJudge
from transformer_course.grading.judging.judge_process import LocalJudge, definitions
from transformer_course.grading.kernel import cputime, forkserver
from transformer_course.grading.notebook import cell_schema
from transformer_course.grading.notebook.workarea import judged, kernel_mounts, reference_on_path
from transformer_course.grading.submission.handin import HIDDEN_PLACEHOLDER, STUB_MESSAGE
from transformer_course.layout import COURSE_ID, GRADING_ENV, SOURCE_SUFFIX, Repo, exercise_of

cell_schema.install()

# Kernels run on this machine only; ipykernel's warning about unencrypted local TCP would
# otherwise print once per notebook between the progress bar's lines.
KERNEL_ARGS = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]
# Must equal course_reference.guard.TOKEN_MIME and token() (tests/test_tamper.py checks).
TOKEN_MIME = "application/x.course-grader+json"
RUBRIC_KEY = "course_rubric"  # cell metadata: a rubric cell of the notebook the instructor grades (its question's id)
MAX_RECORD_CHARS = 16_000_000  # a test cell's record of checked values (base64), at most
# Limits are CPU seconds of the notebook's own processes (its kernel's and its judge's: cputime), which a busy
# machine does not change, with cputime.WALL_FACTOR times as many on the clock as an outer bound.
# A graded or answer cell that runs past its limit runs once more with this many times the limit before
# it loses points (a slow or busy machine costs time, not points); a provided cell (no points, no answer:
# a demonstration) may run PROVIDED_FACTOR times the limit, and its timing out is reported as no fault
# of the student's.
RETRY_FACTOR = 3
PROVIDED_FACTOR = 10
# Limits scale with the machine: a graded or answer cell may run LIMIT_MULTIPLE times what the same cell of
# the solution took on this machine, where that is longer than --timeout (transformer_course.grading.notebook.limits
# measures it; SOLUTION_SECONDS holds it, by notebook then grade_id, for this process).
LIMIT_MULTIPLE = 10
SOLUTION_SECONDS: dict[str, dict[str, float]] = {}
# A notebook's clock: it may run NOTEBOOK_WAIT_FACTOR times --timeout on the clock in all, plus WALL_FACTOR s for
# each CPU second its processes spent (:mod:`.cputime`: work that a busy machine slows down). Computing within its
# cells' limits never runs out of it; waiting does (a cell that sleeps or blocks spends no CPU time), so cells that
# each wait just under their own bound cost the notebook at most this many times --timeout together.
# --notebook-timeout stays a cap on the clock.
NOTEBOOK_WAIT_FACTOR = 10
# A cell stopped by the clock that used less than this share of one core meanwhile was waiting, not computing: it
# is not run again, as a computing one is (it would only wait RETRY_FACTOR times as long again). A computing cell
# starved to a fifth of a core (ten busy processes on two cores) reaches its CPU limit as the clock stops it; one
# that waits still costs its judge's and kernel's polling and its interrupt (measured: 0.36 s in 5.5 s, 6.5%).
WAITING_SHARE = 0.1
SECONDS_KEY = "course_seconds"  # cell metadata: the CPU seconds the grader's run of the cell took
NOTEBOOK_TIME_LIMIT = "NotebookTimeLimit"  # the error of the first cell not run after the notebook's limit


FORMGRADER_REFUSAL = ("the formgrader's Autograde button is off for this course: it would run the student's code in "
                      "this Jupyter server, outside the grader's sandbox; grade with `transformer-course grade "
                      "SUBMITTED --out OUT`, which writes this gradebook")


class FormgraderAutogradeRefused(RuntimeError):
    """The formgrader's Autograde button was pressed (:class:`AutogradeExporter`)."""


def _in_jupyter_server(configurable: object) -> bool:
    """Whether ``configurable`` was made, through its parents, by a Jupyter server's extension (the formgrader's
    request handlers make nbgrader's API with the formgrader extension as its parent)."""
    seen = 0
    while configurable is not None and seen < 50:
        if type(configurable).__module__.startswith(("nbgrader.server_extensions", "jupyter_server")):
            return True
        configurable, seen = getattr(configurable, "parent", None), seen + 1
    return False


class AutogradeExporter(NotebookExporter):
    """nbgrader's exporter of ``autograde``, which refuses to be made for the formgrader's Autograde button.

    The button runs nbgrader's autograde in the instructor's Jupyter server: the student's code would run there,
    as the instructor, outside the sandbox and without the judge's box. nbgrader makes its exporter after it
    lists the notebooks and before it copies, writes or records anything, so the refusal leaves the gradebook,
    ``autograded/`` and ``submitted/`` as they were. ``nbgrader autograde`` typed in a terminal and the course's
    own grader are not refused.

    Raises:
        FormgraderAutogradeRefused: made under a Jupyter server (the formgrader); its message, also logged as the
            one line the formgrader's error window shows, names ``transformer-course grade``.
    """

    def __init__(self, **kw):
        super().__init__(**kw)
        if _in_jupyter_server(self.parent):
            log = getattr(self.parent, "log", None)
            if log is not None:
                log.error(FORMGRADER_REFUSAL)
            raise FormgraderAutogradeRefused(FORMGRADER_REFUSAL)


def guard_token(secret: bytes, grade_id: str, source: str, record: str = "") -> str:
    digest = hashlib.sha256(record.encode()).hexdigest()
    return hmac.new(secret, f"{grade_id}\0{source}\0{digest}".encode(), hashlib.sha256).hexdigest()


def _assignment_notebook(folder: str, resources: dict) -> Path:
    info = resources.get("nbgrader", {})
    return Path(folder) / info.get("assignment", "") / f"{info.get('notebook', '')}.ipynb"


def _grade_id(cell: NotebookNode) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _is_test(cell: NotebookNode) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def trusted_tests(source_notebook: Path) -> dict[str, str]:
    """Test cells of an assignment's source notebook, hidden tests included, by grade_id: the only
    notebook code that runs in the grader's own process (:mod:`.verify`, on the reference)."""
    return {_grade_id(c): c.source for c in nbformat.read(source_notebook, as_version=4).cells if _is_test(c)}


class RestoreTestCells(Preprocessor):
    """Put back test cells that a student deleted, after the cell that preceded them.

    nbgrader restores the source of edited test cells but scores a deleted one as zero
    without running it; here it runs like any other and earns what it earns.
    """

    enabled = Bool(True)
    release_dir = Unicode("", help="nbgrader's release folder (release/<assignment>/<nb>.ipynb)").tag(config=True)

    def preprocess(self, nb, resources):
        path = _assignment_notebook(self.release_dir, resources)
        if not self.release_dir or not path.is_file():
            return nb, resources
        release = nbformat.read(path, as_version=4)
        present = {_grade_id(c) for c in nb.cells} - {None}
        for i, cell in enumerate(release.cells):
            if not _is_test(cell) or _grade_id(cell) in present:
                continue
            before = next((_grade_id(c) for c in reversed(release.cells[:i]) if _grade_id(c) in present), None)
            at = next((j + 1 for j, c in enumerate(nb.cells) if before and _grade_id(c) == before), len(nb.cells))
            nb.cells.insert(at, cell)
            present.add(_grade_id(cell))
        return nb, resources


class GuardNotebook(Preprocessor):
    """Run test cells under ``course_reference.guard`` (see its docstring for what and why).

    Before execution: a first cell installs the guard, and every test cell's source is
    handed to the guard's runner. :class:`UnguardNotebook` undoes both after execution and
    turns a test cell without the runner's token into a failure.
    """

    enabled = Bool(True)
    memory_limit_mb = Integer(4096, help="data-segment limit per kernel, MiB (0 = none)").tag(config=True)
    cpu_limit_s = Integer(1800, help="CPU seconds per kernel before it is killed (0 = none)").tag(config=True)

    def preprocess(self, nb, resources):
        folder = Path(resources.get("metadata", {}).get("path") or ".").resolve()
        secret, name = secrets.token_bytes(32), "_" + secrets.token_hex(8)
        secret_file = folder / f".grader-{secrets.token_hex(8)}"
        resources["course_guard"] = secret
        exercises = [_grade_id(c) for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
        tests = {}
        for cell in nb.cells:
            # Only the grader marks cells as its own: a student's copy of these keys means nothing.
            cell.metadata.pop("course_guard", None)
            cell.metadata.pop("course_guard_source", None)
            cell.metadata.pop("course_judged", None)
            if _is_test(cell):
                gid = _grade_id(cell)
                cell.metadata["course_guard_source"] = cell.source
                try:
                    exercise = exercise_of(gid, exercises)
                except ValueError:
                    exercise = ""
                tests[gid] = cell.source
                cell.source = f"{name}({gid!r}, {exercise!r})"
        secret_file.write_text(json.dumps({"secret": secret.hex(), "tests": tests}))
        secret_file.chmod(0o600)
        preamble = new_code_cell(
            "import course_reference.guard\n"
            f"course_reference.guard.install(globals(), {name!r}, {str(secret_file)!r}, "
            f"{self.memory_limit_mb}, {self.cpu_limit_s})\n"
            "del course_reference"
        )
        preamble.metadata["course_guard"] = True
        nb.cells.insert(0, preamble)
        return nb, resources


class UnguardNotebook(Preprocessor):
    """After execution: drop the guard's cell, give test cells back their source, and fail
    a test cell that neither failed nor carries its valid token (something stopped or
    replaced the runner), or whose checked values do not match the reference's when
    compared again in this process (:mod:`transformer_course.grading.notebook.verify`)."""

    enabled = Bool(True)
    source_dir = Unicode("", help="the assignments' source folder: the test cells whose code may run here").tag(
        config=True)
    reference = Unicode("", help="folder holding course_reference, for comparisons outside the kernel").tag(
        config=True)

    def _trusted_tests(self, resources) -> dict[str, str]:
        path = _assignment_notebook(self.source_dir, resources)
        if not (self.source_dir and self.reference and path.is_file()):
            return {}
        return trusted_tests(path)

    def preprocess(self, nb, resources):
        secret = resources.pop("course_guard", None)
        if secret is None:
            return nb, resources
        trusted = self._trusted_tests(resources)
        notebook = resources.get("nbgrader", {}).get("notebook", "")
        for cell in (c for c in nb.cells if c.metadata.get("course_guard")):
            failed = [o for o in cell.outputs if o.get("output_type") == "error"]
            if failed:
                raise RuntimeError("the grader's guard could not be installed: " + failed[0].get("evalue", ""))
        nb.cells = [c for c in nb.cells if not c.metadata.get("course_guard")]
        for cell in nb.cells:
            original = cell.metadata.pop("course_guard_source", None)
            if original is None:
                continue
            cell.source = original
            if cell.metadata.pop("course_judged", False):
                continue  # judged in the grader's process (KeepGradesOnCrash._judge): no token to check
            tokens = [o for o in cell.outputs if TOKEN_MIME in o.get("data", {})]
            cell.outputs = [o for o in cell.outputs if TOKEN_MIME not in o.get("data", {})]
            if any(o.get("output_type") == "error" for o in cell.outputs):
                continue
            sent = [o["data"][TOKEN_MIME] for o in tokens if isinstance(o["data"][TOKEN_MIME], dict)]
            valid = [t for t in sent
                     if t.get("token") == guard_token(secret, _grade_id(cell), original, str(t.get("record", "")))]
            if not valid:
                cell.outputs.append(_error("GraderError", "this test did not run to its end under the grader: "
                                           "something in the notebook stopped or replaced it"))
            elif trusted.get(_grade_id(cell)) == original:
                from transformer_course.grading.notebook import verify  # torch: imported only when grading

                reason = verify.compare(Path(self.reference), notebook, original, str(valid[0].get("record", "")))
                if reason:
                    cell.outputs.append(_error("OutsideCheckError", "the values this test checked differ from "
                                               f"the reference's when compared outside the notebook: {reason}"))
        return nb, resources


class RedactHiddenTests(Preprocessor):
    """Keep hidden tests and reference code out of feedback.

    nbgrader's feedback shows test cells as autograded, hidden blocks included (nbgrader
    issues #917, #1363). This removes the hidden blocks from test cells and cuts test-cell
    tracebacks (which quote the hidden checks' code) down to ``Error: message``.
    """

    enabled = Bool(True)  # nbconvert registers preprocessors disabled unless they say otherwise

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade"):
            return cell, resources
        clearer = ClearHiddenTests()
        if clearer._remove_hidden_test_region(cell):
            cell.source = "\n".join(
                line for line in cell.source.splitlines() if line.strip()
            ).rstrip() + "\n" + HIDDEN_PLACEHOLDER
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources


class DropRubrics(Preprocessor):
    """Keep the rubric cells :func:`.classbook.with_rubrics` puts in the notebook the instructor grades out of
    any feedback made from it (``nbgrader generate_feedback`` run in ``OUT/nbgrader``): they are the
    instructor's. The mark is the course's alone (a student's cell that carries it loses it there)."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        nb.cells = [c for c in nb.cells if RUBRIC_KEY not in c.metadata]
        return nb, resources


def merged_streams(outputs: list) -> list:
    """``outputs`` with each run of consecutive outputs of one stream (stdout, stderr) joined into one. A kernel
    flushes prints on a timer, so a busy machine splits a cell's text where a quiet one does not: merged, the
    graded notebook reads the same however loaded the machine was. (nbclient's ``coalesce_streams`` also
    rewrites carriage returns with a regular expression that takes seconds on one long line.)"""
    merged: list = []
    for output in outputs:
        last = merged[-1] if merged else None
        if (output.get("output_type") == "stream" and last is not None and last.get("output_type") == "stream"
                and last.get("name") == output.get("name")):
            last["text"] = str(last.get("text", "")) + str(output.get("text", ""))
        else:
            merged.append(output)
    return merged


class KeepGradesOnCrash(Execute):
    """nbgrader's Execute, except that a dying kernel does not lose the whole notebook.

    By default nbgrader drops a notebook whose kernel dies (``os._exit``, a segfault, out
    of memory) and the student gets nothing, with no feedback. Here the cell that killed
    the kernel gets an error output saying so, every later code cell gets one saying it
    did not run, and the cells before keep the points they earned.
    """

    max_output_chars = Integer(100_000, help="characters of output kept per cell").tag(config=True)
    max_total_output_chars = Integer(10_000_000, help="characters of output kept for the notebook").tag(config=True)
    max_notebook_s = Integer(1800, help="seconds the whole notebook may run on the clock, at most (0 = no cap: "
                             "NOTEBOOK_WAIT_FACTOR still holds)").tag(config=True)
    guard_timeout = Integer(300, help="seconds the guard's cell may take (it imports torch)").tag(config=True)
    sandboxed = Bool(False, help="start the kernel in the sandbox (transformer_course.grading.kernel.sandbox)"
                     ).tag(config=True)
    reference = Unicode("", help="folder holding course_reference: the test cells of a notebook whose checks "
                        "are judged here (transformer_course.grading.judging.judge) run in this process against it"
                        ).tag(config=True)
    judge_memory_mb = Integer(4096, help="data-segment limit of a notebook's judge process, MiB (0 = none)"
                              ).tag(config=True)

    _notebook = ""  # the notebook being graded (its name), set by preprocess
    _running: int | None = None  # the index of the code cell being run

    def __init__(self, **kw):
        super().__init__(**kw)
        if self.sandboxed:  # nbgrader's Execute fixes the manager class at init, whatever the config says
            from transformer_course.grading.kernel.kernels import SandboxedKernelManager

            self.kernel_manager_class = SandboxedKernelManager

    def _get_timeout(self, cell):
        """The student's ``--timeout`` is for their cells; the guard's own cell (importing torch
        on a loaded machine) gets at least ``guard_timeout``, a provided cell ``PROVIDED_FACTOR``
        times the limit, and a cell run again after a timeout ``RETRY_FACTOR`` times it."""
        timeout = super()._get_timeout(cell)
        if cell is None or timeout is None:
            return timeout
        if cell.metadata.get("course_guard"):
            return max(timeout, self.guard_timeout)
        return self._limit(cell, timeout) * (PROVIDED_FACTOR if _provided(cell) else 1) * getattr(self, "_factor", 1)

    def _limit(self, cell, timeout: float) -> float:
        """``timeout``, or LIMIT_MULTIPLE times the solution's time for this cell on this machine if longer."""
        seconds = SOLUTION_SECONDS.get(self._notebook, {}).get(_grade_id(cell) or "")
        return max(timeout, float(math.ceil(LIMIT_MULTIPLE * seconds))) if seconds else timeout

    def preprocess(self, nb, resources=None, km=None):
        self._dead_at = None
        self._stopped = "the kernel died in an earlier cell"
        self._timeouts = 0
        self._chars: dict[int, int] = {}
        self._tokens: set[int] = set()
        self._total = 0
        self._started: float | None = None  # the clock of the notebook's cells: from its first cell on
        self._cpu_at_start = 0.0
        self._stops: dict[int, tuple[str, float, float]] = {}  # cell index -> (why, s on the clock, CPU s)
        self._out_of_time = False  # the notebook's clock ran out while a cell ran
        self._judging = None
        self._tested: dict[str, str] = {}  # the test cells sent to a judge so far, in order: grade_id -> source
        self._notebook = (resources or {}).get("nbgrader", {}).get("notebook", "")
        self._judged = bool(self.reference) and judged(Path(self.reference), self._notebook)
        # A judge in this process (not boxed) spends its CPU here: counted as the notebook's.
        self._cpu = cputime.Clock(self._processes, itself=self._judged and not self._boxed())
        # nbgrader's own autograde (the formgrader's button) starts kernels without the course's grader
        # around it: they still get the reference on their path (the guard is there) and the notebook is
        # told that it is being graded (07 then skips its training).
        told = (contextlib.nullcontext() if os.environ.get(GRADING_ENV) or not self.reference
                else reference_on_path(Path(self.reference)))
        try:
            with told:
                return super().preprocess(nb, resources, km)
        finally:
            if self._judging is not None:
                self._judging.close()

    def output(self, outs, msg, display_id, cell_index):
        """Keep at most ``max_output_chars`` of a cell's output and ``max_total_output_chars`` of
        the notebook's: a flood would fill memory and the feedback page."""
        content = msg.get("content", {})
        data = content.get("data", {})
        if (TOKEN_MIME in data and cell_index not in self._tokens and len(str(data)) < MAX_RECORD_CHARS
                and self.nb.cells[cell_index].metadata.get("course_guard_source") is not None):
            self._tokens.add(cell_index)  # a test cell's token and record, once per cell: never cut
            return super().output(outs, msg, display_id, cell_index)
        size = len(str(content.get("text", ""))) + sum(len(str(v)) for v in data.values())
        used, total = self._chars.get(cell_index, 0), self._total
        self._chars[cell_index] = used + size
        self._total = total + size
        if used + size <= self.max_output_chars and total + size <= self.max_total_output_chars:
            return super().output(outs, msg, display_id, cell_index)
        if used <= self.max_output_chars and total <= self.max_total_output_chars:  # say it once
            limit = (f"{self.max_output_chars} characters in this cell" if used + size > self.max_output_chars
                     else f"{self.max_total_output_chars} characters in the notebook")
            outs.append(NotebookNode(output_type="stream", name="stdout",
                                     text=f"\n[output cut by the grader after {limit}]\n"))
        return None

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        start, self._running = self._cpu(), index
        try:
            cell, resources = self._run_cell(cell, resources, index)
            if self._dead_at is None and self._flooded():
                cell, resources = self._refuse_flood(cell, resources, index)
        finally:
            cell.metadata[SECONDS_KEY] = round(self._cpu() - start, 3)  # CPU seconds: limits.measured reads them
            cell.outputs = merged_streams(cell.get("outputs", []))
        if _timed_out(cell) and not _provided(cell):  # say what the limits were: they differ by cell
            limit = self._limit(cell, self.timeout or 60)
            why, wall, spent = self._stops.get(index, ("cpu", 0.0, 0.0))
            for output in cell.outputs:
                if output.get("ename") == "CellTimeoutError":
                    grader = str(output.get("evalue", "")).startswith(judge_box.GRADERS_WORK)
                    prefix = judge_box.GRADERS_WORK + " " if grader else ""
                    if why == "notebook":
                        output["evalue"] = (f"{prefix}did not finish: the notebook reached its time limit on the clock "
                                            f"({self._notebook_limit_words()}) while this cell ran, and it was "
                                            "interrupted")
                    elif why == "clock":
                        output["evalue"] = (f"{prefix}did not finish within {cputime.WALL_FACTOR * limit:g} s on the "
                                            f"clock ({cputime.WALL_FACTOR} times its {limit:g} s of CPU time): it "
                                            f"waited (time.sleep, a blocked read), computing {spent:.1f} s in "
                                            f"{wall:.1f} s, and was interrupted; a cell that waits is not run again")
                    else:
                        output["evalue"] = (f"{prefix}did not finish within {limit:g} s of CPU time, nor within "
                                            f"{limit * RETRY_FACTOR:g} s when run again (or, waiting, "
                                            f"{cputime.WALL_FACTOR} times as long on the clock), and was "
                                            + ("stopped" if grader else "interrupted (an endless loop?)"))
        return cell, resources

    def _notebook_clock(self) -> tuple[float, float]:
        """(seconds on the clock since the notebook's first cell, the most it may have now: see
        :data:`NOTEBOOK_WAIT_FACTOR`)."""
        if self._started is None:
            return 0.0, math.inf
        budget = NOTEBOOK_WAIT_FACTOR * (self.timeout or 60) + cputime.WALL_FACTOR * (self._cpu() - self._cpu_at_start)
        if self.max_notebook_s:
            budget = min(budget, self.max_notebook_s)
        return time.monotonic() - self._started, budget

    def _notebook_over(self) -> bool:
        elapsed, budget = self._notebook_clock()
        return elapsed > budget

    def _notebook_limit_words(self) -> str:
        """The notebook's limit on the clock, in words, with what it had spent."""
        elapsed, budget = self._notebook_clock()
        if self.max_notebook_s and budget >= self.max_notebook_s:
            return f"{elapsed:.0f} s of its {self.max_notebook_s} s for all cells together, --notebook-timeout"
        return (f"{elapsed:.0f} s, where it may take {NOTEBOOK_WAIT_FACTOR} times --timeout "
                f"({NOTEBOOK_WAIT_FACTOR * (self.timeout or 60):g} s) plus {cputime.WALL_FACTOR} s for each CPU "
                "second its cells computed")

    def _refused_unread(self) -> bool:
        oversized = getattr(self.kc, "oversized", None)
        return oversized is not None and oversized()

    def _flooded(self) -> bool:
        """Whether the kernel, still alive, sent a message over :data:`~.kernels.MAX_KERNEL_MESSAGE` since the
        last look (ZeroMQ dropped it unread; a kernel that died drops its connections too, said elsewhere)."""
        return self._refused_unread() and run_sync(self.km.is_alive)()

    def _refuse_flood(self, cell, resources, index):
        """Stop a kernel that sent an oversized message: the cell says so; later cells do not run, as after a crash."""
        from transformer_course.grading.kernel.kernels import MAX_KERNEL_MESSAGE

        with contextlib.suppress(Exception):
            run_sync(self.km.shutdown_kernel)(now=True)
        self._dead_at = index
        self._stopped = "an earlier cell sent more output in one message than the grader accepts"
        cell.outputs = [o for o in cell.get("outputs", []) if o.get("output_type") != "error"]
        cell.outputs.append(_error("DeadKernelError", f"this cell printed or displayed more than "
                                   f"{MAX_KERNEL_MESSAGE // 2**20} MiB in one message; the grader did not read it "
                                   "and stopped the kernel"))
        return cell, resources

    def _died(self, cell, resources, index):
        self._dead_at = index
        cell.outputs.append(_error("DeadKernelError", "the kernel died while running this cell "
                                   "(sys.exit/os._exit, a crash, or out of memory?)"))
        return cell, resources

    def _run_cell(self, cell, resources, index):
        if self._dead_at is not None:
            cell.outputs = [_error("NotRun", f"not run: {self._stopped}")]
            return cell, resources
        if self._started is None:
            self._started, self._cpu_at_start = time.monotonic(), self._cpu()
        if self._out_of_time or self._notebook_over():
            self._dead_at, self._stopped = index, "the notebook reached its time limit on the clock in an earlier cell"
            cell.outputs = [_error(NOTEBOOK_TIME_LIMIT, "not run: the notebook reached its time limit on the clock "
                                   f"({self._notebook_limit_words()}) before this cell")]
            return cell, resources
        if self._judged and cell.metadata.get("course_guard_source") is not None:
            limit = self._limit(cell, self.timeout or 60)
            start, used = time.monotonic(), self._cpu()
            cell, resources = self._judge(cell, resources, index, limit)
            if _timed_out(cell):
                wall, spent = time.monotonic() - start, self._cpu() - used
                if spent < WAITING_SHARE * wall:  # it waited: running it again would only wait longer
                    self._stops[index] = ("clock", wall, spent)
                else:  # once more with a longer limit: a slow machine is not a wrong answer
                    cell, resources = self._judge(cell, resources, index, limit * RETRY_FACTOR)
            return cell, resources
        for attempt in (1, RETRY_FACTOR):
            self._factor = attempt
            self._stops.pop(index, None)
            cell.outputs = []
            try:
                cell, resources = super().preprocess_cell(cell, resources, index)
            except DeadKernelError:
                return self._died(cell, resources, index)
            except CellTimeoutError:  # no reply even after the interrupt (or its output was refused unread)
                if self._stops.get(index, ("",))[0] == "notebook":  # (an interrupt that came before the cell ran)
                    return self._out_of_clock(cell, resources, index)
                if self._flooded():
                    return self._refuse_flood(cell, resources, index)
                if not run_sync(self.km.is_alive)():  # it died: its dropped connection was seen before its end
                    return self._died(cell, resources, index)
                return self._stop(cell, resources, index)
            finally:
                self._factor = 1
            # The kernel answered the interrupt: a cell that counts runs again, once, with a longer limit, unless
            # it was stopped for waiting or by the notebook's clock.
            if not _timed_out(cell) or _provided(cell) or index in self._stops:
                break
        # The notebook's clock ran out in this cell: no later cell runs (what it spent answering the interrupt
        # must not buy the next one a start).
        self._out_of_time = self._stops.get(index, ("",))[0] == "notebook"
        if _timed_out(cell) and _provided(cell):
            for output in cell.outputs:
                if output.get("ename") == "CellTimeoutError":
                    output["evalue"] = (
                        "a provided cell (no points) was interrupted when the notebook reached its time limit on the "
                        f"clock ({self._notebook_limit_words()}); it costs no points"
                        if self._stops.get(index, ("",))[0] == "notebook" else
                        f"a provided cell (no points) ran past {self._get_timeout(cell)} s, the grader's limit for "
                        "it, and was interrupted; it costs no points")
        # A kernel that ignores the interrupt (a loop catching KeyboardInterrupt) leaves every
        # later cell queued behind it: the second timeout in a row stops it.
        self._timeouts = self._timeouts + 1 if _timed_out(cell) else 0
        if self._timeouts >= 2:
            return self._stop(cell, resources, index)
        return cell, resources

    def _out_of_clock(self, cell, resources, index):
        """Stop the kernel of a cell that the notebook's clock ended and that did not answer the interrupt (it may
        have come before the cell began): the cell says so, later cells do not run."""
        with contextlib.suppress(Exception):
            run_sync(self.km.shutdown_kernel)(now=True)
        self._dead_at, self._stopped = index, "the notebook reached its time limit on the clock in an earlier cell"
        cell.outputs.append(_error(NOTEBOOK_TIME_LIMIT, "stopped: the notebook reached its time limit on the clock "
                                   f"({self._notebook_limit_words()}) while this cell ran"))
        return cell, resources

    def _judge(self, cell, resources, index, limit: float):
        """Run the test cell in the notebook's judge (:mod:`.judge_box`), its calls into the student's code
        going to the kernel (:mod:`.judge`): the whole cell, the grader's work included, within ``limit`` s."""
        cell.metadata["course_judged"] = True
        source, grade_id = cell.metadata["course_guard_source"], _grade_id(cell) or ""
        if self._judging is None:
            self._judging = self._open_judge()
            # A judge that replaces a stopped one (past its time, or broken) first defines again what the
            # earlier test cells defined (07's copy_task_batches): one stopped cell costs its own points only.
            for earlier, earlier_source in self._tested.items():
                if code := definitions(earlier_source):
                    self._judging.test(code, earlier, self.timeout or 60)
        self._tested[grade_id] = source  # before it runs: a judge stopped inside it leaves its definitions too
        ename, evalue, printed = self._judging.test(source, grade_id, limit)
        if isinstance(self._judging, BoxedJudge) and self._judging.lines is None:
            self._judging = None  # stopped (past its time, or broken): the next test cell gets a new judge
        cell.outputs = []
        if printed:
            cell.outputs.append(NotebookNode(output_type="stream", name="stdout", text=printed[:self.max_output_chars]))
        if ename == "LinkBroken":
            if "died" in evalue or "went on after an interrupt" in evalue:
                with contextlib.suppress(Exception):
                    run_sync(self.km.shutdown_kernel)(now=True)
                self._dead_at = index
                evalue = ("the kernel died while running this cell (sys.exit/os._exit, a crash, or out of memory?)"
                          if "died" in evalue else "the kernel kept running after it was interrupted "
                          "(a loop that catches KeyboardInterrupt?) and was stopped")
                ename = "DeadKernelError"
            elif "interrupted" in evalue:
                ename = "CellTimeoutError"
            else:
                ename = "GraderError"
        if ename:
            cell.outputs.append(_error(ename, evalue))
        return cell, resources

    def _boxed(self) -> bool:
        """Whether this notebook's judge gets a box: its kernel is started in the sandbox (the course's
        own grading), not by plain ``nbgrader autograde`` or the formgrader with the course's config."""
        return self.sandboxed and judge_box.enabled()

    def _open_judge(self) -> BoxedJudge | LocalJudge:
        """This notebook's judge: in a box of its own (:mod:`.judge_box`) where kernels are forked in the
        sandbox, else in this process. Where the box is on and a judge cannot start in it, the notebook is
        the grader's failure (``grader-error``, graded again next run), never judged here instead."""
        # The reference the kernel can still see (earlier notebooks' checks need it) must not run
        # for the student: its folders, from the kernel's PYTHONPATH (workarea.reference_on_path).
        # Only folders that hold reference code: with every notebook judged there is none, and the
        # kernel then runs the student's code without a profile hook (which slows every call).
        folders = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                   if p and any((Path(p) / "course_reference").glob("nb[0-9][0-9]_*.py"))]
        watched = tuple({f.rstrip(os.sep) + os.sep for p in folders for f in (p, str(Path(p).resolve()))})
        interrupt, alive = run_sync(self.km.interrupt_kernel), run_sync(self.km.is_alive)
        if self._boxed():  # no judge in this process then: a judge that cannot start is the grader's failure
            try:
                return BoxedJudge(self.km.get_connection_info(), self.km.kernel_hidden(), self.reference, watched,
                                  interrupt, alive, memory_mb=self.judge_memory_mb,
                                  cpu_s=max(60, self.max_notebook_s) * max(1, torch_threads()), clock=self._cpu)
            except (forkserver.TemplateError, OSError, KeyError, TypeError, ValueError) as exc:
                raise RuntimeError(f"the judge of {self._notebook} could not start in its sandbox ({exc})") from exc
        from transformer_course.grading.judging.link import Link  # torch: only where the judge runs in this process

        return LocalJudge(Link(self.km.blocking_client(), watched=watched, interrupt=interrupt, alive=alive),
                          self.reference, clock=self._cpu)

    def _processes(self) -> list[int]:
        """The roots of the notebook's process trees, as this process sees them: its kernel's sandbox
        (the worker's kernel template, which holds one kernel at a time) or process, and its judge's
        sandbox (:mod:`.cputime` counts what they spend)."""
        roots = []
        provisioner = getattr(self.km, "provisioner", None)
        if getattr(provisioner, "forked", False):
            roots.append(provisioner.fork_server.process.pid)
        elif getattr(provisioner, "process", None) is not None:
            roots.append(provisioner.process.pid)
        server = getattr(self._judging, "server", None)
        if server is not None:
            roots.append(server.process.pid)
        return roots

    async def _async_poll_for_reply(self, msg_id, cell, timeout, task_poll_output_msg, task_poll_kernel_alive):
        """nbclient's wait for a cell's reply, with ``timeout`` counted in CPU seconds of the notebook's
        processes (:mod:`.cputime`), and :data:`~.cputime.WALL_FACTOR` times it on the clock as the outer
        bound: a busy machine slows a cell down, but does not make it spend more CPU time."""
        if timeout is None:
            return await super()._async_poll_for_reply(msg_id, cell, timeout, task_poll_output_msg,
                                                       task_poll_kernel_alive)
        start, used = time.monotonic(), self._cpu()
        # A cell that waits (sleeps, or blocks) spends no CPU time: the clock stops it, after WALL_FACTOR times its
        # budget, but never later than a provided cell's budget (a budget already scaled up is not scaled again);
        # and the notebook's clock (NOTEBOOK_WAIT_FACTOR) stops it whatever its own bound.
        wall = min(timeout * cputime.WALL_FACTOR, max(timeout, (self.timeout or 60) * PROVIDED_FACTOR))
        index = self._running
        while not task_poll_output_msg.done():  # done: the kernel is idle again, its reply sent
            # (an output refused unread may have taken the kernel's "idle" with it: no use waiting for it)
            spent, elapsed = self._cpu() - used, time.monotonic() - start
            if spent <= timeout and index is not None and not cell.metadata.get("course_guard"):
                if self._notebook_over():
                    self._stops[index] = ("notebook", elapsed, spent)
                elif elapsed > wall and spent < WAITING_SHARE * elapsed:
                    self._stops[index] = ("clock", elapsed, spent)
            if spent > timeout or elapsed > wall or index in self._stops or self._refused_unread():
                # nbclient's own path at its timeout (interrupt, then the timeout's error), taken at once
                return await super()._async_poll_for_reply(msg_id, cell, 0, task_poll_output_msg,
                                                           task_poll_kernel_alive)
            await asyncio.wait({task_poll_output_msg}, timeout=cputime.POLL)
        return await super()._async_poll_for_reply(msg_id, cell, max(10.0, wall - (time.monotonic() - start)),
                                                   task_poll_output_msg, task_poll_kernel_alive)

    def _stop(self, cell, resources, index):
        with contextlib.suppress(Exception):
            run_sync(self.km.shutdown_kernel)(now=True)
        self._dead_at = index
        if _provided(cell):  # a demonstration, not the student's answer: say so, blame no one's code
            self._stopped = "a provided cell (no points) ran past the grader's limit and the kernel was stopped"
            cell.outputs.append(_error("DeadKernelError", f"a provided cell (no points) ran past "
                                       f"{self._get_timeout(cell)} s, the grader's limit for it, and did not stop "
                                       "when interrupted; the kernel was stopped (a grading problem, not an answer)"))
            return cell, resources
        cell.outputs.append(_error("DeadKernelError", "the kernel kept running after it was interrupted "
                                   "(a loop that catches KeyboardInterrupt?) and was stopped"))
        return cell, resources

    async def _async_cleanup_kernel(self) -> None:
        try:
            await super()._async_cleanup_kernel()
        except Exception:  # the kernel is already gone
            pass


def notebook_clock_words(timeout: float, notebook_timeout: int) -> str:
    """A notebook's time limit on the clock (:data:`NOTEBOOK_WAIT_FACTOR`), in a few words for the grader's
    first line."""
    cap = f", {notebook_timeout} s at most" if notebook_timeout else ""
    return (f"a notebook {NOTEBOOK_WAIT_FACTOR * timeout:g} s on the clock plus {cputime.WALL_FACTOR} s a CPU second "
            f"its cells compute{cap}")


def torch_threads() -> int:
    """The kernels' thread count (``OMP_NUM_THREADS``, which the grading worker sets), else 1."""
    threads = os.environ.get("OMP_NUM_THREADS", "")
    return int(threads) if threads.isdigit() else 1


def _provided(cell: NotebookNode) -> bool:
    """A cell that is neither an answer nor a test: given code, a demonstration or a figure."""
    marks = cell.metadata.get("nbgrader", {})
    return not (marks.get("solution") or marks.get("grade") or cell.metadata.get("course_guard_source") is not None)


def _timed_out(cell: NotebookNode) -> bool:
    return any(o.get("ename") == "CellTimeoutError" for o in cell.get("outputs", []))


def _error(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def make_config(course_root: Path, repo: Repo | None = None, timeout: int = 30, memory_mb: int = 4096,
                source: Path | None = None, notebook_timeout: int = 1800, max_output_mb: float = 10.0,
                sandbox: bool = False) -> Config:
    """The nbgrader config of a course root whose sources are the repo's ``autograder/source``.

    Args:
        course_root: nbgrader's course directory (gradebook, release/, submitted/, ...).
        repo: the repository (found from the working directory by default).
        timeout: seconds a cell may run when grading before it is interrupted.
        memory_mb: memory (data segment) a grading kernel may use, MiB; 0 = no limit.
        source: the assignments' source folder (default: the repo's ``autograder/source``).
        notebook_timeout: seconds a whole notebook may run when grading (0 = no limit).
        max_output_mb: output kept of a whole notebook, millions of characters.
        sandbox: run grading kernels in the sandbox (where bwrap is installed): they see the
            notebook's own folder and the reference copy of ``course_root``, nothing else of it,
            of its parent folders or of the repository.
    """
    repo = repo or Repo()
    c = Config()
    c.CourseDirectory.root = str(course_root)
    c.CourseDirectory.course_id = COURSE_ID
    # An absolute source_directory wins over root, so every work area shares the one source.
    c.CourseDirectory.source_directory = str(source or repo.source)
    c.CourseDirectory.ignore = [
        ".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", f"*{SOURCE_SUFFIX}",
    ]
    # The stub's message is what a student sees first when the visible tests run on it.
    c.ClearSolutions.code_stub = {"python": f"# YOUR CODE HERE\nraise NotImplementedError({STUB_MESSAGE!r})"}
    c.Execute.timeout = timeout
    c.Execute.interrupt_on_timeout = True
    c.Execute.extra_arguments = KERNEL_ARGS
    sanitize = Autograde.class_traits()["sanitize_preprocessors"].default()
    at = sanitize.index(OverwriteCells)  # which then gives restored cells their hidden tests
    c.Autograde.sanitize_preprocessors = [*sanitize[:at], RestoreTestCells, *sanitize[at:]]
    c.Autograde.exporter_class = AutogradeExporter  # refuses the formgrader's button: transformer-course grade
    c.RestoreTestCells.release_dir = str(Path(course_root) / "release")
    c.UnguardNotebook.source_dir = c.CourseDirectory.source_directory
    c.UnguardNotebook.reference = str(repo.reference)
    c.KeepGradesOnCrash.reference = str(repo.reference)
    autograde = []
    for pp in Autograde.class_traits()["autograde_preprocessors"].default():
        autograde += [GuardNotebook, KeepGradesOnCrash, UnguardNotebook] if pp is Execute else [pp]
    c.Autograde.autograde_preprocessors = autograde
    c.GuardNotebook.memory_limit_mb = memory_mb
    c.KeepGradesOnCrash.judge_memory_mb = memory_mb
    c.KeepGradesOnCrash.max_notebook_s = notebook_timeout
    c.KeepGradesOnCrash.max_total_output_chars = int(max_output_mb * 1_000_000)
    # A kernel gets CPU time for every cell's timeout, twice over (torch uses several threads).
    c.GuardNotebook.cpu_limit_s = max(600, 2 * timeout * 40)
    c.GenerateFeedback.preprocessors = [DropRubrics, GetGrades, CSSHTMLHeaderPreprocessor, RedactHiddenTests]
    # Pages made from a student's notebook (the feedback, the formgrader's view) show what they wrote sanitised.
    from transformer_course.grading.output import sanitise

    sanitise.configure(c)
    if sandbox:
        c.KeepGradesOnCrash.sandboxed = True
        for name, folders in kernel_mounts(Path(course_root), repo).items():
            setattr(c.SandboxedKernelManager, name, folders)
    return c


# The formgrader's page of a submission: nbgrader's formgrade template (nbgrader 0.9.6) with two blocks of its
# own. The header: nbgrader's calls nbconvert's ``mathjax()`` macro without a URL, so the page always loads
# MathJax 2 from cdnjs (``HTMLExporter.mathjax_url`` and the server's ``mathjax_url`` are never read there),
# and with no network, or cdnjs blocked, every formula stays raw ("$W_Q = W_K = I$"). This one loads the
# MathJax the course ships (``HTMLExporter.mathjax_url``, relative to the course root, served by Jupyter's
# /files/) where :func:`formgrader_config` found it, else the same CDN. The markdown cells: a rubric cell
# (:data:`RUBRIC_KEY`) is framed as the instructor's, so a student's own cell cannot pass for one.
FORMGRADE_TEMPLATE = """\
{#- Written by transformer_course.grading.notebook.nbgrader_setup.install_formgrader: nbgrader's formgrade page. -#}
{%- extends 'formgrade/index.html.j2' -%}
{% from 'formgrade_macros.html.j2' import header %}
{% from 'mathjax.html.j2' import mathjax %}

{%- block header -%}
<!DOCTYPE html>
<html>
<head>
{{ header(resources) }}
{% for css in resources.inlining.css -%}
<style type="text/css">
{{ css }}
</style>
{% endfor %}
{%- set tail = '/autograded/' ~ resources.student ~ '/' ~ resources.assignment_id ~ '/' ~ resources.notebook_id
               ~ '.ipynb' -%}
{%- set path = resources.notebook_path | string -%}
{%- if '://' not in resources.mathjax_url and path.endswith(tail) -%}
<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']],
  displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']], processEscapes: true}};</script>
<script src="{{ resources.base_url }}/files/{{ path[:(path | length) - (tail | length)] | urlencode }}/{{
  resources.mathjax_url | urlencode }}" async></script>
{%- else -%}
{{ mathjax() }}
{%- endif %}
<link rel="stylesheet" href="{{ resources.base_url }}/formgrader/static/css/formgrade.css" />
</head>
{%- endblock header -%}

{% block markdowncell scoped %}
{%- if cell.metadata.{RUBRIC_KEY} -%}
<div class="cell border-box-sizing text_cell rendered">
  {{ self.empty_in_prompt() }}
  <div class="inner_cell">
    <div class="alert alert-info text_cell_render border-box-sizing rendered_html">
      {{ cell.source | markdown2html }}
    </div>
  </div>
</div>
{%- else -%}
{{ super() }}
{%- endif -%}
{% endblock markdowncell %}
"""
FORMGRADER_TEMPLATES = "templates"  # under the course root: the formgrade template above
FORMGRADER_MATHJAX = "mathjax"  # under the course root (not hidden: Jupyter's /files/ serves no hidden path)
EXCHANGE = "exchange"  # under the course root: nbgrader's exchange, which `transformer-course collect` replaces


def install_formgrader(course_root: Path) -> None:
    """Put beside a graded class's course root what :func:`formgrader_config` names: the formgrade template,
    MathJax (copied once; left out where it cannot be had: the page then loads it from the CDN), and an
    empty exchange folder."""
    from transformer_course.course import mathjax
    from transformer_course.grading.output.atomic import atomic_write

    template = course_root / FORMGRADER_TEMPLATES / "formgrade" / "index.html.j2"
    text = FORMGRADE_TEMPLATE.replace("{RUBRIC_KEY}", RUBRIC_KEY).encode()
    if not template.is_file() or template.read_bytes() != text:
        template.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(template, text)
    if not (course_root / FORMGRADER_MATHJAX / mathjax.SCRIPT).is_file():
        mathjax.install(course_root / FORMGRADER_MATHJAX)
    (course_root / EXCHANGE).mkdir(parents=True, exist_ok=True)


def formgrader_config(course_root: Path) -> Config:
    """What the formgrader opened in a graded class's course root reads besides :func:`make_config`: the
    formgrade template of :func:`install_formgrader` ahead of nbgrader's (the formgrader's HTMLExporter reads
    ``HTMLExporter`` settings from the course's ``nbgrader_config.py``, which nbgrader loads after its own),
    the local MathJax where it is there, and nbgrader's exchange in the course root: the formgrader's
    banner "The exchange directory ... does not exist" is gone (nbgrader's default, /usr/local/share/nbgrader/
    exchange, is seldom there); the course collects through the LMS (`transformer-course collect`), and
    the formgrader's release and collect buttons then work on this folder alone."""
    from nbgrader.server_extensions.formgrader import handlers

    from transformer_course.course import mathjax

    c = Config()
    c.HTMLExporter.extra_template_basedirs = [str(course_root / FORMGRADER_TEMPLATES), handlers.template_path]
    c.HTMLExporter.extra_template_paths = [handlers.template_path]  # for 'formgrade/index.html.j2', nbgrader's
    if (course_root / FORMGRADER_MATHJAX / mathjax.SCRIPT).is_file():
        c.HTMLExporter.mathjax_url = f"{FORMGRADER_MATHJAX}/{mathjax.SCRIPT}"
    c.Exchange.root = str(course_root / EXCHANGE)
    return c


def generated_course(course_root: Path, repo: Repo, assignments: list, error: type[Exception] = RuntimeError,
                     **options) -> NbGraderAPI:
    """nbgrader's API on ``course_root`` (created if missing) after ``generate_assignment`` of
    every assignment (release/ and gradebook); ``options`` go to :func:`make_config`.

    Raises:
        error: when nbgrader fails on an assignment (with nbgrader's log).
    """
    course_root.mkdir(parents=True, exist_ok=True)
    tools_on_path()
    alembic_head()
    config = make_config(course_root, repo, **options)
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    for assignment in assignments:
        result = api.generate_assignment(assignment.name, force=True, create=True)
        if not result["success"]:
            # nbgrader's capture_log catches everything, Ctrl-C included: a Ctrl-C stays one
            if (result.get("error") or "").rstrip().endswith("KeyboardInterrupt"):
                raise KeyboardInterrupt
            log = result.get("log") or result.get("error")
            raise error(f"nbgrader generate_assignment {assignment.name} failed:\n{log}")
    return api


_ALEMBIC_HEAD: list[str] = []


def alembic_head() -> str:
    """nbgrader's ``get_alembic_version``, kept: the gradebook schema's revision, which nbgrader
    asks of the ``alembic`` command (about 2 s) for every new gradebook. It depends only on the
    installed nbgrader, so it is kept in memory and in ``data/cache/`` (tests/test_grader_errors.py
    compares it with nbgrader's own answer)."""
    if not _ALEMBIC_HEAD:
        import nbgrader
        from nbgrader import api

        path = Path(__file__).resolve().parents[4] / "data" / "cache" / f"nbgrader-{nbgrader.__version__}-alembic-head"
        try:
            head = path.read_text().strip()
        except OSError:
            head = ""
        if not head.isalnum():  # no cache, or a damaged one
            head = NBGRADER_ALEMBIC_VERSION()
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(head + "\n")
        _ALEMBIC_HEAD.append(head)
        api.get_alembic_version = alembic_head  # for every gradebook nbgrader creates in this process
    return _ALEMBIC_HEAD[0]


def tools_on_path() -> None:
    """Put this environment's scripts on PATH.

    nbgrader creates a new gradebook by running the ``alembic`` command; when the venv is
    not activated (``.venv/bin/transformer-course ...``) that command is not found and the
    first ``generate_assignment`` of a fresh course root fails.
    """
    scripts = str(Path(sys.executable).parent)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if scripts not in parts:
        os.environ["PATH"] = os.pathsep.join([scripts, *parts])
