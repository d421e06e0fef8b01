"""``transformer-course release``: the students' repository, and nothing else.

What students get: ``course/`` (the notebooks with their stubs, visible tests and hints, and the
files shipped beside them), the data manifest with a README for students (with a notebook that reads
Multi30k), environment files with the students' packages only (conda's ``environment.yml``, Binder's,
and pip's ``requirements.txt``, all from one parse), and a short README with
Colab and Binder links, every address of the course rewritten to the students' repository (the
notebooks' set-up cell fetches the shipped files from it in Colab). What they do not get:
``solutions/``, ``autograder/`` (the hidden reference, checks and sources), the grader, the
sample class. The GitHub Classroom workflow of the instructors' guide (docs/instructors.md) comes
along, so the output can serve as a classroom template repository.

Week by week: ``assignments`` (``--assignment NN``) releases only those notebooks. A notebook's
``course_blocks.py`` holds the reference code of the notebooks before it (03's holds 01's and 02's
answers), so a notebook is refused while an earlier notebook its ``course_blocks.py`` carries is not
yet due (the deadlines file of ``transformer-course grade``); a notebook with no due date there is
never the cause of a refusal.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import sys
from pathlib import Path

from transformer_course.instructors.deadlines import Deadlines
from transformer_course.layout import BLOCKS_MODULE, GITHUB_REPO, Repo

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
# The heading `transformer-course build` writes above each earlier notebook's code in course_blocks.py
# (course.build.blocks_module); tests/test_release.py checks it against the code under each heading.
BLOCKS_HEADING = re.compile(r"^# -+ notebook (\d\d): (\w+) -+$", re.M)
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


class EarlyAnswersError(ValueError):
    """A notebook to release carries the reference of an earlier notebook that is not due yet."""


def course_notebooks(repo: Repo) -> list[str]:
    """The course's notebook folders (``01_self_attention``, ...), in order."""
    return sorted(p.name for p in repo.course.glob("[0-9][0-9]_*") if p.is_dir())


def chosen(repo: Repo, wanted: list[str] | None) -> list[str]:
    """The notebook folders that ``wanted`` names (``01`` or ``01_self_attention``), in the course's
    order; every one where ``wanted`` is None or empty.

    Raises:
        ValueError: a name or number the course does not have (the message lists the course's).
    """
    names = course_notebooks(repo)
    if not wanted:
        return names
    picked = set()
    for name in wanted:
        found = [n for n in names if name.strip() in (n, n[:2])]
        if not found:
            raise ValueError(f"--assignment {name!r}: the course has {', '.join(names)}")
        picked.update(found)
    return [n for n in names if n in picked]


def carried_answers(folder: Path) -> list[str]:
    """The earlier notebooks (``01_self_attention``, ...) whose reference code ``folder``'s
    course_blocks.py holds; none where it has no such file."""
    blocks = folder / BLOCKS_MODULE
    if not blocks.is_file():
        return []
    return [f"{number}_{name}" for number, name in BLOCKS_HEADING.findall(blocks.read_text())]


def early_answers(repo: Repo, names: list[str], deadlines: Deadlines | None, now: dt.datetime) -> list[str]:
    """One line per notebook of ``names`` that would give away an answer before its deadline: its
    course_blocks.py carries the reference of an earlier notebook that is due after ``now`` (an
    aware datetime). Empty where ``deadlines`` is None or gives none of those notebooks a due date."""
    if deadlines is None:
        return []
    lines = []
    for name in names:
        pending = [(earlier, due) for earlier in carried_answers(repo.course / name)
                   if (due := deadlines.due(earlier)) is not None and now < due]
        if pending:
            which = ", ".join(f"{earlier} (due {deadlines.shown(earlier, due)})" for earlier, due in pending)
            lines.append(f"{name}: its {BLOCKS_MODULE} holds the answers of {which}, not yet due")
    return lines


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


def release(repo: Repo, repository: str, out: Path, assignments: list[str] | None = None,
            deadlines: Deadlines | None = None, now: dt.datetime | None = None,
            allow_early_answers: bool = False) -> list[Path]:
    """Write the students' repository for ``repository`` (see the module docstring) into ``out``,
    which must be empty or absent. Returns the files written.

    Args:
        assignments: the notebooks to release (``01`` or ``01_self_attention``); None: every one.
        deadlines: the due dates (``instructors.deadlines.load``); None: no notebook is refused.
        now: the time the deadlines are compared with (aware); None: the clock's.
        allow_early_answers: release a refused notebook anyway, with a warning line on stderr each.

    Raises:
        ValueError: a malformed ``repository``, an unknown assignment, or ``out`` holds files already.
        EarlyAnswersError: a notebook would give away an earlier notebook's answers before its due
            date (one line each, see :func:`early_answers`), without ``allow_early_answers``.
        Each is raised before anything is written.
    """
    target = parse_repository(repository)
    names = chosen(repo, assignments)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty: give a new folder")
    now = now if now is not None else dt.datetime.now(dt.UTC)
    if early := early_answers(repo, names, deadlines, now):
        if not allow_early_answers:
            raise EarlyAnswersError("\n".join(
                f"{line}: not released (release it once they are due, or pass --allow-early-answers)"
                for line in early))
        for line in early:
            print(f"warning: {line}: released anyway (--allow-early-answers)", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.pyc")
    for name in names:
        shutil.copytree(repo.course / name, out / "course" / name, ignore=ignore)
    for path in (out / "course").rglob("*"):
        if path.is_file() and path.suffix in (".ipynb", ".py", ".md"):
            path.write_text(path.read_text().replace(GITHUB_REPO, target))
    # How to grade a notebook yourself (`check`): it names the course's own repository, where the grader
    # is, so its addresses are kept as they are.
    shutil.copyfile(repo.course / "README.md", out / "course" / "README.md")
    environment = (repo.root / ENVIRONMENT[0]).read_text()
    for name in ENVIRONMENT:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(student_environment((repo.root / name).read_text()))
    (out / "requirements.txt").write_text(student_requirements(environment))
    # The data manifest and its README go out only with a notebook that reads Multi30k: a week-1
    # repository with them would name notebooks it does not hold (the data README names them), and
    # the week that adds 07 to the template adds data/ with it.
    data_notebooks = _numbers(_notebooks_reading(repo, names, "multi30k"))
    if data_notebooks:
        for name in DATA:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(repo.root / name, out / name)
        (out / "data" / "README.md").write_text(student_data_readme(data_notebooks))
    workflow = out / ".github" / "workflows" / "grade.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(classroom_workflow(repo))
    (out / "README.md").write_text(student_readme(repo, target, data_notebooks, names))
    (out / ".gitignore").write_text("data/cache/\n.ipynb_checkpoints/\n__pycache__/\n.venv/\n")
    return sorted(p for p in out.rglob("*") if p.is_file())


def _student_lines(text: str) -> tuple[list[str], list[str]]:
    """An instructors' conda environment file's lines without its comments and without the pins of
    packages students do not need, and the students' pins (``torch==2.13.0``, ...) among them: the
    one parse both the release's environment.yml and its requirements.txt come from.

    Raises:
        ValueError: a student package has no pin in ``text`` (the lists drifted apart).
    """
    kept, pins, found = [], [], set()
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        pin = PIN.match(line)
        if pin is not None:
            name = pin.group(2).lower()
            if name not in STUDENT_PACKAGES:
                continue
            found.add(name)
            pins.append(line[len(pin.group(1)):].strip())
        kept.append(line)
    if missing := sorted(set(STUDENT_PACKAGES) - found):
        raise ValueError(f"no pin for {', '.join(missing)} in the environment file")
    return kept, pins


def student_environment(text: str) -> str:
    """An instructors' conda environment file with the students' pins only (``STUDENT_PACKAGES``), and
    a header that says so in place of its own comments.

    Raises:
        ValueError: a student package has no pin in ``text`` (the lists drifted apart).
    """
    header = ("# The packages the notebooks need, and nothing else (`conda env create -f environment.yml`; "
              "Binder reads it too).\n")
    return header + "\n".join(_student_lines(text)[0]) + "\n"


def student_requirements(text: str) -> str:
    """pip's requirements file of the same pins as :func:`student_environment` of ``text``: one
    ``name==version`` a line, under a header that says how to install them.

    Raises:
        ValueError: a student package has no pin in ``text``.
    """
    header = ("# The packages the notebooks need: the pins of environment.yml, for pip.\n"
              "#   python -m venv .venv && .venv/bin/pip install -r requirements.txt\n"
              f"# A machine without a GPU: add --extra-index-url {CPU_INDEX} (PyTorch's CPU wheels).\n")
    return header + "\n".join(_student_lines(text)[1]) + "\n"


def _notebooks_reading(repo: Repo, names: list[str], word: str) -> list[str]:
    return [name[:2] for name in names if any(word in p.read_text() for p in (repo.course / name).glob("*.ipynb"))]


def _numbers(numbers: list[str]) -> str:
    """``07``, ``07 and 08``, ``01, 02 and 03``; empty for none."""
    return " and ".join(filter(None, [", ".join(numbers[:-1]), *numbers[-1:]]))


def student_data_readme(numbers: str) -> str:
    """The release's ``data/README.md`` (``numbers``: the notebooks that read Multi30k, e.g. "07 and 08"):
    what the manifest is and where the files go, for students."""
    several = " and " in numbers
    which = f"notebooks {numbers}" if several else f"notebook {numbers}"
    return f"""# data/

`multi30k.json` lists the files of Multi30k (Elliott et al., 2016), the German-English captions that
{which} train{"" if several else "s"} on: each file's download address and its sha256 checksum. The notebooks
download the files themselves the first time they need them, into `data/cache/`, and check each one
against its checksum: a file that does not match is deleted, never used, and the next run fetches it anew.

No internet, or a copy of the files already? Set the environment variable `MULTI30K_DIR` to a folder
holding the six `.gz` files before starting Jupyter (in Colab, in a cell: `%env MULTI30K_DIR=/content/multi30k`).
"""


def student_readme(repo: Repo, target: str, data_notebooks: str, names: list[str]) -> str:
    """The release's README: a table of the notebooks ``names`` (course folders) with their Colab
    badges, how to set up (Colab, Binder, conda, a venv with pip, JupyterHub), and ``data_notebooks``
    (e.g. "07 and 08"; empty: no notebook here reads Multi30k, and the README does not speak of it)."""
    rows = []
    for notebook in sorted(p for name in names for p in (repo.course / name).glob("[0-9][0-9]_*.ipynb")):
        path = notebook.relative_to(repo.root).as_posix()
        colab = f"https://colab.research.google.com/github/{target}/blob/main/{path}"
        title = notebook.stem.split("_", 1)[1].replace("_", " ")
        rows.append(f"| {notebook.stem[:2]} | [{title}]({path}) | [![Open In Colab]({COLAB})]({colab}) |")
    table = "\n".join(rows)
    several = " and " in data_notebooks
    data = (f"\n{'Notebooks' if several else 'Notebook'} {data_notebooks} download{'' if several else 's'} "
            f"the Multi30k data set {'themselves' if several else 'itself'}\n"
            "(`data/README.md` says how, and how to use a copy you already have).\n"
            if data_notebooks else "")
    return f"""# The Transformer, built by hand

Notebooks that build the Transformer (Vaswani et al., 2017) piece by piece in PyTorch. Each one
has exercises: fill in the cells marked `# YOUR CODE HERE`, then run the test cell below each
exercise. The visible tests check shapes and properties; your instructor grades with further
tests that compare values and name the mistake they find.

| # | notebook | open |
|---|---|---|
{table}

## Setting up

- **Colab**: open a notebook with its badge; its first cell installs what Colab lacks (Colab has
  PyTorch) and fetches the files shipped beside the notebook.
- **Binder**: [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/{target}/main)
- **Your machine, with conda**: `conda env create -f environment.yml`, then
  `conda activate transformer-course` and `jupyter lab`.
- **Your machine, with pip** (Python 3.11): `python -m venv .venv && .venv/bin/pip install -r requirements.txt`,
  then `.venv/bin/jupyter lab` (on Windows: `.venv\\Scripts\\pip` and `.venv\\Scripts\\jupyter`). No NVIDIA
  GPU? Add `--extra-index-url {CPU_INDEX}` to the install: PyTorch's CPU wheels, a
  fraction of the CUDA build's download. `requirements.txt` pins the same versions as `environment.yml`.
- **A JupyterHub**: where your instructor's image already has the packages, nothing to install; else,
  in a terminal there, `pip install --user -r requirements.txt` and restart your server.
{data}
Before you hand a notebook in, grade it yourself with `transformer-course check`, the grader your
instructor runs, hidden tests included: [`course/README.md`](course/README.md) says how, on your machine
and in Colab, and what it prints.

Hand in the notebooks as your instructor says; `.github/workflows/grade.yml` grades each push
when this repository is a GitHub Classroom template.
"""
