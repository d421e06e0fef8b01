"""nbgrader configuration shared by the build, the grader and ``autograder/nbgrader_config.py``."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from nbclient.exceptions import DeadKernelError
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor, Preprocessor
from nbformat import NotebookNode
from nbgrader.converters import Autograde
from nbgrader.preprocessors import ClearHiddenTests, Execute, GetGrades
from traitlets import Bool
from traitlets.config import Config

from .layout import COURSE_ID, GRADING_ENV, SOURCE_SUFFIX, Repo

# Kernels run on this machine only; ipykernel's warning about unencrypted local TCP would
# otherwise print once per notebook between the progress bar's lines.
KERNEL_ARGS = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]
HIDDEN_PLACEHOLDER = "# (hidden tests run here when grading)"


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


class KeepGradesOnCrash(Execute):
    """nbgrader's Execute, except that a dying kernel does not lose the whole notebook.

    By default nbgrader drops a notebook whose kernel dies (``os._exit``, a segfault, out
    of memory) and the student gets nothing, with no feedback. Here the cell that killed
    the kernel gets an error output saying so, every later code cell gets one saying it
    did not run, and the cells before keep the points they earned.
    """

    def preprocess(self, nb, resources=None, km=None):
        self._dead_at = None
        return super().preprocess(nb, resources, km)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        if self._dead_at is not None:
            cell.outputs = [_error("NotRun", f"not run: the kernel died in an earlier cell "
                                              f"(cell {self._dead_at})")]
            return cell, resources
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._dead_at = index
            cell.outputs.append(_error("DeadKernelError", "the kernel died while running this cell "
                                       "(sys.exit/os._exit, a crash, or out of memory?)"))
            return cell, resources

    async def _async_cleanup_kernel(self) -> None:
        try:
            await super()._async_cleanup_kernel()
        except Exception:  # the kernel is already gone
            pass


def _error(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def make_config(course_root: Path, repo: Repo | None = None, timeout: int = 30) -> Config:
    """The nbgrader config of a course root whose sources are the repo's ``autograder/source``.

    Args:
        course_root: nbgrader's course directory (gradebook, release/, submitted/, ...).
        repo: the repository (found from the working directory by default).
        timeout: seconds a cell may run when grading before it is interrupted.
    """
    repo = repo or Repo()
    c = Config()
    c.CourseDirectory.root = str(course_root)
    c.CourseDirectory.course_id = COURSE_ID
    # An absolute source_directory wins over root, so every work area shares the one source.
    c.CourseDirectory.source_directory = str(repo.source)
    c.CourseDirectory.ignore = [
        ".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", f"*{SOURCE_SUFFIX}",
    ]
    c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    c.Execute.timeout = timeout
    c.Execute.interrupt_on_timeout = True
    c.Execute.extra_arguments = KERNEL_ARGS
    c.Autograde.autograde_preprocessors = [
        KeepGradesOnCrash if pp is Execute else pp
        for pp in Autograde.class_traits()["autograde_preprocessors"].default()
    ]
    c.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor, RedactHiddenTests]
    return c


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


@contextlib.contextmanager
def environ(**values: str) -> Iterator[None]:
    """Set environment variables for the block (kernels started inside inherit them), then restore."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def reference_on_path(repo: Repo) -> contextlib.AbstractContextManager[None]:
    """Let kernels started inside the block import the hidden reference, and tell notebooks
    that they are being graded (notebook 07 then skips training)."""
    current = os.environ.get("PYTHONPATH")
    return environ(PYTHONPATH=os.pathsep.join([str(repo.reference)] + ([current] if current else [])),
                   **{GRADING_ENV: "1"})
