"""A grading work area: the nbgrader course root one grading process (or one ``check``) grades in.

Kept light (no nbgrader, no nbconvert): ``transformer-course check`` lays the area out and starts
its kernel template (:mod:`.forkserver`) first, so that the template imports torch while this
process is still importing nbgrader.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from transformer_course.grading.judging import judge_box
from transformer_course.grading.kernel import forkserver, sandbox
from transformer_course.layout import GRADING_ENV, SOURCE_SUFFIX, Repo

# Folders of a work area that grading kernels see (read-only, writable). A running sandbox mounts
# them, so the grader keeps them in place between notebooks and empties them instead.
MOUNTED = {"readonly": "reference", "writable": "autograded"}  # autograded/: nbgrader's, where kernels run
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", f"*{SOURCE_SUFFIX}")


def kernel_mounts(course_root: Path, repo: Repo) -> dict[str, list[str]]:
    """What a grading kernel of ``course_root`` may not see (``hidden``), may read inside it
    (``readonly``) and may write (``writable``): :class:`~.kernels.SandboxedKernelManager`'s settings."""
    root = course_root.resolve()
    return {
        # The work area's parents: the other workers' areas and the class output (OUT/.work/<worker>).
        "hidden": [str(repo.root), str(root.parent.parent), str(root.parent), str(root)],
        "readonly": [sys.base_prefix, sys.prefix, str(root / MOUNTED["readonly"])],
        "writable": [str(root / MOUNTED["writable"])],
    }


def judged(reference: Path, notebook: str) -> bool:
    """Whether ``notebook``'s test cells are judged in the grader's process (:mod:`.judge`): its
    checks module says ``JUDGED = True`` (and ``COURSE_JUDGE=off`` does not turn it off). Read as
    text: the reference is not imported for this."""
    if os.environ.get("COURSE_JUDGE", "").lower() in ("off", "0", "no"):
        return False  # the checks run in the kernel, under the guard (make bench compares the two)
    number = notebook.split("_", 1)[0]
    checks = Path(reference) / "course_reference" / "checks" / f"nb{number}.py"
    if not number.isdigit() or not checks.is_file():
        return False
    tree = ast.parse(checks.read_text())
    return any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "JUDGED" for t in node.targets)
               and isinstance(node.value, ast.Constant) and node.value.value is True for node in tree.body)


def kernel_copy_ignore(reference: Path) -> Callable[[str, list[str]], set[str]]:
    """What the kernels' copy of the reference leaves out, besides :data:`IGNORED`: the checks of
    every judged notebook (its tests run in the grader, against its own copy) and its reference
    module, unless the checks or reference of a notebook still checked in the kernel import it."""
    package = Path(reference) / "course_reference"
    judged_numbers = {p.stem[2:] for p in (package / "checks").glob("nb[0-9][0-9].py")
                      if judged(reference, f"{p.stem[2:]}_")}
    modules = {p.stem: p for p in package.glob("nb[0-9][0-9]_*.py")}
    kept = [p for p in (package / "checks").glob("nb[0-9][0-9].py") if p.stem[2:] not in judged_numbers]
    kept += [p for p in modules.values() if p.stem[2:4] not in judged_numbers]
    needed: set[str] = set()
    while kept:  # the reference modules that kept files import, and what those import
        for name in re.findall(r"\bnb\d\d_\w+", kept.pop().read_text()):
            if name in modules and name not in needed:
                needed.add(name)
                kept.append(modules[name])
    left_out = {f"nb{n}.py" for n in judged_numbers}
    left_out |= {f"{stem}.py" for stem in modules if stem[2:4] in judged_numbers and stem not in needed}
    in_kernel = any(p.stem[2:] not in judged_numbers for p in (package / "checks").glob("nb[0-9][0-9].py"))

    def ignore(folder: str, names: list[str]) -> set[str]:
        ignored = set(IGNORED(folder, names)) | (left_out & set(names))
        if not in_kernel and Path(folder).resolve() == package.resolve():
            ignored.add("checks")  # no test is checked in the kernel: its helpers stay out too
        return ignored

    return ignore


def create(work: Path, repo: Repo) -> None:
    """Make ``work`` (emptied first) a work area holding the kernels' part of the hidden reference
    (:func:`kernel_copy_ignore`) and an empty ``autograded/``, and start the kernel template its
    kernels will be forked from."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copytree(repo.reference, work / MOUNTED["readonly"], ignore=kernel_copy_ignore(repo.reference))
    (work / MOUNTED["writable"]).mkdir()
    mounts = kernel_mounts(work, repo)
    with reference_on_path(work / MOUNTED["readonly"]):
        forkserver.prestart(**mounts, env=dict(os.environ))
        judge_box.prestart([*mounts["hidden"], sandbox.connections_dir()], str(repo.reference))


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


def reference_on_path(reference: Path) -> contextlib.AbstractContextManager[None]:
    """Let kernels started inside the block import the hidden reference (the folder holding
    ``course_reference``), and tell notebooks that they are being graded (notebook 07 then
    skips training). Kernels write no bytecode, so none of it outlives a grade."""
    current = os.environ.get("PYTHONPATH")
    return environ(PYTHONPATH=os.pathsep.join([str(reference)] + ([current] if current else [])),
                   PYTHONDONTWRITEBYTECODE="1", **{GRADING_ENV: "1"})
