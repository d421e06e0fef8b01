"""nbgrader configuration shared by the build, the grader and ``autograder/nbgrader_config.py``."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor, Preprocessor
from nbgrader.preprocessors import ClearHiddenTests, GetGrades
from traitlets import Bool
from traitlets.config import Config

from .layout import COURSE_ID, SOURCE_SUFFIX, Repo

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
def reference_on_path(repo: Repo) -> Iterator[None]:
    """Let kernels started inside the block import the hidden reference (they inherit env)."""
    saved = os.environ.get("PYTHONPATH")
    parts = [str(repo.reference)] + ([saved] if saved else [])
    os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
