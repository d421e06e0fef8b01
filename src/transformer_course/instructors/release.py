"""``transformer-course release``: the students' repository, and nothing else.

What students get: ``course/`` (the notebooks with their stubs, visible tests and hints, and the
files shipped beside them), the data manifests, the environment files and a short README with
Colab and Binder links, every address of the course rewritten to the students' repository (the
notebooks' set-up cell fetches the shipped files from it in Colab). What they do not get:
``solutions/``, ``autograder/`` (the hidden reference, checks and sources), the grader, the
sample class. The GitHub Classroom workflow of the instructors' guide (docs/instructors.md) comes
along, so the output can serve as a classroom template repository.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from transformer_course.layout import GITHUB_REPO, Repo

REPOSITORY = re.compile(r"^(?:https?://)?(?:github\.com/)?([A-Za-z0-9][A-Za-z0-9-]*)/([A-Za-z0-9._-]+?)(?:\.git)?/?$")
# Files copied as they are (besides course/), relative to the repository root.
ENVIRONMENT = ("environment.yml", "binder/environment.yml", "data/multi30k.json", "data/README.md")
COLAB = "https://colab.research.google.com/assets/colab-badge.svg"


def parse_repository(text: str) -> str:
    """``ORG/NAME`` from ``github.com/ORG/NAME``, ``https://github.com/ORG/NAME(.git)`` or ``ORG/NAME``.

    Raises:
        ValueError: ``text`` names no GitHub repository.
    """
    match = REPOSITORY.match(text.strip())
    if not match:
        raise ValueError(f"--repository {text!r}: expected github.com/ORG/NAME (or ORG/NAME)")
    return f"{match.group(1)}/{match.group(2)}"


def classroom_workflow(repo: Repo) -> str:
    """The instructors' guide's GitHub Classroom workflow (its ```yaml block), kept in one place."""
    text = (repo.root / "docs" / "instructors.md").read_text()
    start = text.index("**GitHub Classroom.**")
    match = re.search(r"```yaml\n(.*?)```", text[start:], re.S)
    if match is None:
        raise ValueError("docs/instructors.md: the GitHub Classroom section has no ```yaml block")
    return match.group(1)


def release(repo: Repo, repository: str, out: Path) -> list[Path]:
    """Write the students' repository for ``repository`` (see the module docstring) into ``out``,
    which must be empty or absent. Returns the files written.

    Raises:
        ValueError: a malformed ``repository``, or ``out`` holds files already.
    """
    target = parse_repository(repository)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty: give a new folder")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(repo.course, out / "course", ignore=shutil.ignore_patterns(
        "__pycache__", ".ipynb_checkpoints", "*.pyc"))
    for path in (out / "course").rglob("*"):
        if path.is_file() and path.suffix in (".ipynb", ".py", ".md"):
            path.write_text(path.read_text().replace(GITHUB_REPO, target))
    for name in ENVIRONMENT:
        if (repo.root / name).is_file():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(repo.root / name, out / name)
    workflow = out / ".github" / "workflows" / "grade.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(classroom_workflow(repo))
    (out / "README.md").write_text(student_readme(repo, target))
    (out / ".gitignore").write_text("data/cache/\n.ipynb_checkpoints/\n__pycache__/\n")
    return sorted(p for p in out.rglob("*") if p.is_file())


def student_readme(repo: Repo, target: str) -> str:
    rows = []
    for notebook in sorted(p for p in repo.course.glob("[0-9][0-9]_*/*.ipynb")):
        path = notebook.relative_to(repo.root).as_posix()
        colab = f"https://colab.research.google.com/github/{target}/blob/main/{path}"
        title = notebook.stem.split("_", 1)[1].replace("_", " ")
        rows.append(f"| {notebook.stem[:2]} | [{title}]({path}) | [![Open In Colab]({COLAB})]({colab}) |")
    table = "\n".join(rows)
    return f"""# The Transformer, built by hand

Notebooks that build the Transformer (Vaswani et al., 2017) piece by piece in PyTorch. Each one
has exercises: fill in the cells marked `# YOUR CODE HERE`, then run the test cell below each
exercise. The visible tests check shapes and properties; your instructor grades with further
tests that compare values and name the mistake they find.

| # | notebook | open |
|---|---|---|
{table}

## Setting up

- **Colab**: open a notebook with its badge; its first cell installs what it needs.
- **Binder**: [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/{target}/main)
- **Your machine**: `conda env create -f environment.yml`, then `conda activate transformer-course`
  and `jupyter lab`.

Notebook 07 downloads the Multi30k data set itself (`data/multi30k.json` lists each file's
address and sha256); set `MULTI30K_DIR` to a folder holding the files to use a local copy.

Hand in the notebooks as your instructor says; `.github/workflows/grade.yml` grades each push
when this repository is a GitHub Classroom template.
"""
