"""``transformer-course build``: sources -> ``course/`` (nbgrader release) and ``solutions/``.

Deterministic: the same sources give byte-identical ``course/`` notebooks, and solution
notebooks whose cell sources are identical (their outputs are re-computed on execution).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import ClearHiddenTests
from tqdm.auto import tqdm

from .layout import Assignment, Repo
from .nbgrader_setup import KERNEL_ARGS, make_config, tools_on_path

SOLUTION_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


class BuildError(RuntimeError):
    """A source notebook could not be built (the message says which and why)."""


def _normalise(nb: nbformat.NotebookNode, assignment: Assignment) -> nbformat.NotebookNode:
    """Fixed metadata and stable cell ids, so builds are byte-identical."""
    nb.metadata = nbformat.from_dict({
        "kernelspec": KERNELSPEC,
        "language_info": {"name": "python"},
    })
    for index, cell in enumerate(nb.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        cell.id = f"{index:02d}-{grade_id}"[:64] if grade_id else f"{index:02d}-{cell.cell_type}"
        cell.metadata.pop("lines_to_next_cell", None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.nbformat, nb.nbformat_minor = 4, 5
    return nb


def convert_sources(repo: Repo) -> list[Assignment]:
    """Write each ``NN.source.py`` as ``NN.ipynb`` beside it (nbgrader's source notebook)."""
    assignments = repo.assignments()
    for assignment in assignments:
        _ = assignment.tests  # validates that every test cell names an exercise
        nb = _normalise(jupytext.read(assignment.source_file), assignment)
        text = nbformat.writes(nb) + "\n"
        path = assignment.source_notebook
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return assignments


def release(repo: Repo, course_dir: Path, work: Path) -> None:
    """Run nbgrader generate_assignment for every assignment and copy the release."""
    tools_on_path()
    config = make_config(work, repo)
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    for assignment in repo.assignments():
        result = api.generate_assignment(assignment.name, force=True, create=True)
        if not result["success"]:
            raise BuildError(f"nbgrader generate_assignment {assignment.name} failed:\n{result['log']}")
        target = course_dir / assignment.name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(work / "release" / assignment.name, target)
        # Re-serialise: same bytes whatever nbgrader's writer did.
        released = target / f"{assignment.notebook}.ipynb"
        nb = nbformat.read(released, as_version=4)
        released.write_text(nbformat.writes(nb) + "\n")


def solution_notebook(assignment: Assignment) -> nbformat.NotebookNode:
    """The source with solutions kept (markers removed) and hidden tests removed."""
    nb = nbformat.read(assignment.source_notebook, as_version=4)
    clearer = ClearHiddenTests()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        clearer._remove_hidden_test_region(cell)
        cell.source = "\n".join(
            line for line in cell.source.splitlines() if not SOLUTION_MARKER.match(line)
        ).strip("\n")
    banner = nbformat.v4.new_markdown_cell(
        f"> **Solution notebook** of `{assignment.name}`, executed. The student version is "
        f"[`course/{assignment.name}/{assignment.notebook}.ipynb`](../course/{assignment.name}/"
        f"{assignment.notebook}.ipynb). Check your own attempt with "
        f"`transformer-course check path/to/{assignment.notebook}.ipynb`."
    )
    banner.id = "00-solution-banner"
    nb.cells.insert(0, banner)
    return nb


def execute(nb: nbformat.NotebookNode, cwd: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """Run a notebook top to bottom in a fresh kernel; raises on the first error."""
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", record_timing=False, extra_arguments=KERNEL_ARGS,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    return nb


def build(
    repo: Repo | None = None,
    course_dir: Path | None = None,
    solutions_dir: Path | None = None,
    run_solutions: bool = True,
) -> list[Assignment]:
    """Build ``course/`` and ``solutions/`` from ``autograder/source``.

    Args:
        repo: the repository (found from the working directory by default).
        course_dir, solutions_dir: where to write (default the repo's ``course/``, ``solutions/``).
        run_solutions: execute solution notebooks (False writes them without outputs).

    Raises:
        BuildError: nbgrader could not generate a release.
        nbclient.exceptions.CellExecutionError: a solution notebook failed to run.
    """
    repo = repo or Repo()
    course_dir = course_dir or repo.course
    solutions_dir = solutions_dir or repo.solutions
    assignments = convert_sources(repo)
    course_dir.mkdir(parents=True, exist_ok=True)
    solutions_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tc-build-") as work:
        release(repo, course_dir, Path(work))
    for assignment in tqdm(assignments, desc="solutions", unit="notebook", disable=not run_solutions):
        nb = solution_notebook(assignment)
        if run_solutions:
            with tempfile.TemporaryDirectory(prefix="tc-solution-") as cwd:
                execute(nb, Path(cwd))
        (solutions_dir / f"{assignment.notebook}.ipynb").write_text(nbformat.writes(nb) + "\n")
    return assignments
