"""``transformer-course release``: the students' repository, and nothing else.

What students get: ``course/`` (the notebooks with their stubs, visible tests and hints, and the
files shipped beside them), the data manifest with a README for students, environment files with
the students' packages only, and a short README with
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

# What a student's notebooks import or run in: the only pins of the instructors' environment files that
# the release keeps (the grader, the tests, the linters and the book stay with the instructors).
STUDENT_PACKAGES = ("torch", "numpy", "matplotlib", "seaborn", "tqdm", "sacrebleu", "sentencepiece", "jupyterlab",
                    "ipykernel")
PIN = re.compile(r"^(\s+- )([A-Za-z0-9_.-]+)==\S+\s*$")
REPOSITORY = re.compile(r"^(?:https?://)?(?:github\.com/)?([A-Za-z0-9][A-Za-z0-9-]*)/([A-Za-z0-9._-]+?)(?:\.git)?/?$")
# Files copied as they are (besides course/), relative to the repository root.
ENVIRONMENT = ("environment.yml", "binder/environment.yml")
DATA = ("data/multi30k.json",)
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
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(student_environment((repo.root / name).read_text()))
    for name in DATA:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo.root / name, out / name)
    data_notebooks = " and ".join(_notebooks_reading(repo, "multi30k"))
    (out / "data" / "README.md").write_text(student_data_readme(data_notebooks))
    workflow = out / ".github" / "workflows" / "grade.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(classroom_workflow(repo))
    (out / "README.md").write_text(student_readme(repo, target, data_notebooks))
    (out / ".gitignore").write_text("data/cache/\n.ipynb_checkpoints/\n__pycache__/\n")
    return sorted(p for p in out.rglob("*") if p.is_file())


def student_environment(text: str) -> str:
    """An instructors' conda environment file with the students' pins only (``STUDENT_PACKAGES``), and
    a header that says so in place of its own comments.

    Raises:
        ValueError: a student package has no pin in ``text`` (the lists drifted apart).
    """
    kept, found = [], set()
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        pin = PIN.match(line)
        if pin is not None:
            name = pin.group(2).lower()
            if name not in STUDENT_PACKAGES:
                continue
            found.add(name)
        kept.append(line)
    if missing := sorted(set(STUDENT_PACKAGES) - found):
        raise ValueError(f"no pin for {', '.join(missing)} in the environment file")
    header = ("# The packages the notebooks need, and nothing else (`conda env create -f environment.yml`; "
              "Binder reads it too).\n")
    return header + "\n".join(kept) + "\n"


def _notebooks_reading(repo: Repo, word: str) -> list[str]:
    return sorted(p.stem[:2] for p in repo.course.glob("[0-9][0-9]_*/*.ipynb") if word in p.read_text())


def student_data_readme(numbers: str) -> str:
    """The release's ``data/README.md`` (``numbers``: the notebooks that read Multi30k, e.g. "07 and 08"):
    what the manifest is and where the files go, for students."""
    return f"""# data/

`multi30k.json` lists the files of Multi30k (Elliott et al., 2016), the German-English captions that
notebooks {numbers} train on: each file's download address and its sha256 checksum. The notebooks
download the files themselves the first time they need them, into `data/cache/`, and check each one
against its checksum: a file that does not match is deleted, never used, and the next run fetches it anew.

No internet, or a copy of the files already? Set the environment variable `MULTI30K_DIR` to a folder
holding the six `.gz` files before starting Jupyter (in Colab, in a cell: `%env MULTI30K_DIR=/content/multi30k`).
"""


def student_readme(repo: Repo, target: str, data_notebooks: str) -> str:
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

Notebooks {data_notebooks} download the Multi30k data set themselves
(`data/README.md` says how, and how to use a copy you already have).

Hand in the notebooks as your instructor says; `.github/workflows/grade.yml` grades each push
when this repository is a GitHub Classroom template.
"""
