"""`transformer-course release`: the students' repository holds the course and nothing of the
grader: no solution, no hidden test, no reference body of a notebook's own exercises; its
addresses point to the students' repository, and the README's classroom workflow grades in it."""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from transformer_course.cli import main
from transformer_course.instructors.deadlines import load as load_deadlines
from transformer_course.instructors.release import (
    EarlyAnswersError,
    carried_answers,
    course_notebooks,
    parse_repository,
    release,
)
from transformer_course.layout import GITHUB_REPO

TARGET = "my-school/transformers-2027"


@pytest.fixture(scope="module")
def released(repo, tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "students"
    # Every notebook at once gives away answers before the sample deadlines: allowed here, in any season.
    assert main(["release", "--repository", f"https://github.com/{TARGET}.git", "--out", str(out),
                 "--allow-early-answers"]) == 0
    return out


def _normalised(text: str) -> str:
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def _readable(path) -> str:
    """A file's text; a notebook's as its cells' sources (what a student reads)."""
    if path.suffix == ".ipynb":
        return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
    return path.read_text(errors="replace")


def _bodies(module_path) -> list[str]:
    """The bodies of the module's functions and methods (docstrings left out), of 2 lines or more."""
    source = module_path.read_text()
    bodies = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body[1:] if ast.get_docstring(node) else node.body
            if not body:
                continue
            lines = source.splitlines()[body[0].lineno - 1:body[-1].end_lineno]
            text = _normalised(textwrap.dedent("\n".join(lines)))
            if text.count("\n") >= 1 and len(text) > 60:
                bodies.append(text)
    return bodies


def test_the_release_holds_the_course_and_nothing_of_the_grader(repo, released):
    top = sorted(p.name for p in released.iterdir())
    assert top == [".github", ".gitignore", "README.md", "binder", "course", "data", "environment.yml",
                   "requirements.txt"]
    assert sorted(p.name for p in (released / "course").iterdir()) == sorted(p.name for p in repo.course.iterdir())
    workflow = released / ".github" / "workflows" / "grade.yml"
    for path in (p for p in released.rglob("*") if p.is_file()):
        text = path.read_text(errors="replace")
        for marker in ("BEGIN HIDDEN TESTS", "BEGIN SOLUTION", "course_reference", "check_"):
            assert marker not in text, f"{path.relative_to(released)} holds {marker!r}"
        # Only the workflow and the guide to `check` name this repository: each fetches the grader from it.
        assert (GITHUB_REPO in text) == (path in (workflow, released / "course" / "README.md")), path


def _given(repo, number: str) -> str:
    """What notebook ``number``'s source gives students (solution and hidden-test regions removed):
    code the exercises build on, such as a module's ``__init__`` when its ``forward`` is the exercise."""
    source = next(repo.source.glob(f"{number}_*/*.source.py")).read_text()
    source = re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", "", source, flags=re.S)
    return _normalised(re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", "", source, flags=re.S))


def test_no_notebook_ships_the_reference_of_its_own_exercises(repo, released):
    """Every reference function body of notebook NN (but code its source gives students) is searched
    for in what NN's folder ships (a later notebook's course_blocks.py holds it by design: the
    earlier notebooks' building blocks)."""
    searched = 0
    for module in sorted((repo.reference / "course_reference").glob("nb[0-9][0-9]_*.py")):
        folder = next((released / "course").glob(f"{module.stem[2:4]}_*"))
        shipped = {p: _normalised(_readable(p)) for p in folder.rglob("*") if p.is_file()}
        given = _given(repo, module.stem[2:4])
        for body in _bodies(module):
            if body in given:
                continue
            searched += 1
            for path, text in shipped.items():
                assert body not in text, f"{path.relative_to(released)} holds the reference body:\n{body}"
    assert searched > 25  # the search found the reference's functions


def _solutions(repo, number: str) -> list[str]:
    source = next(repo.source.glob(f"{number}_*/*.source.py")).read_text()
    regions = re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", source, flags=re.S)
    return [text for text in (_normalised(textwrap.dedent(r)) for r in regions) if len(text) > 40]


def test_no_notebook_ships_its_solutions(repo, released):
    """Every solution region of notebook NN's source is searched for in NN's folder of the release,
    and found in the executed solution (the search would see one that slipped through)."""
    searched = 0
    for source in sorted(repo.source.glob("[0-9][0-9]_*/*.source.py")):
        number = source.name[:2]
        folder = next((released / "course").glob(f"{number}_*"))
        shipped = [_normalised(_readable(p)) for p in folder.rglob("*") if p.is_file()]
        solution = _normalised(_readable(next(repo.solutions.glob(f"{number}_*.ipynb"))))
        for region in _solutions(repo, number):
            searched += 1
            assert region in solution, region
            assert not any(region in text for text in shipped), f"notebook {number} ships its solution:\n{region}"
    assert searched >= 30


def test_addresses_point_to_the_students_repository(repo, released):
    readme = (released / "README.md").read_text()
    for notebook in sorted(repo.course.glob("*/*.ipynb")):
        path = notebook.relative_to(repo.root).as_posix()
        assert f"https://colab.research.google.com/github/{TARGET}/blob/main/{path}" in readme
        assert (released / path).is_file()
    assert f"mybinder.org/v2/gh/{TARGET}/main" in readme
    setup = _readable(released / "course" / "01_self_attention" / "01_self_attention.ipynb")
    assert f"https://raw.githubusercontent.com/{TARGET}/main/course/" in setup


def test_bad_arguments_are_refused_before_anything_is_written(repo, tmp_path, capsys):
    assert parse_repository("github.com/ORG/NAME") == "ORG/NAME"
    assert parse_repository("ORG/NAME") == "ORG/NAME"
    for bad in ("", "github.com/ORG", "https://gitlab.com/ORG/NAME", "ORG/NAME/extra"):
        with pytest.raises(ValueError, match="expected github.com/ORG/NAME"):
            parse_repository(bad)
    assert main(["release", "--repository", "not a repository", "--out", str(tmp_path / "a")]) == 2
    assert "expected github.com/ORG/NAME" in capsys.readouterr().err and not (tmp_path / "a").exists()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        release(repo, TARGET, tmp_path / "b")
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["keep.txt"]


def test_the_classroom_workflow_grades_in_the_release(repo, released, tmp_path):
    """The workflow's grading step, run as written in a copy of the release (this checkout
    standing in for `.grader/`), on a correct and on a wrong notebook 01."""
    workflow = (released / ".github" / "workflows" / "grade.yml").read_text()
    step = re.search(r"name: grade the notebooks\n\s+run: \|\n((?:\s{10}.*\n)+)", workflow)
    assert step, "the workflow's grading step is missing"
    script = "\n".join(line.strip() for line in step.group(1).splitlines()).replace("python3 ", f"{sys.executable} ")
    results = {}
    for label, source in (("right", repo.solutions / "01_self_attention.ipynb"),
                          ("wrong", repo.sample_class / "dev" / "01_self_attention" / "01_self_attention.ipynb")):
        work = tmp_path / label
        shutil.copytree(released, work)
        (work / ".grader").symlink_to(repo.root)
        shutil.copyfile(source, work / "course" / "01_self_attention" / "01_self_attention.ipynb")
        env = {"PATH": "/usr/bin:/bin", "NOTEBOOKS": "course/01_self_attention/01_self_attention.ipynb",
               "HOME": str(tmp_path)}
        results[label] = subprocess.run(["bash", "-ec", script], cwd=work, capture_output=True, text=True,
                                        timeout=600, env=env)
    assert results["right"].returncode == 0 and "total 11/11" in results["right"].stdout, results["right"]
    assert results["wrong"].returncode == 1 and "overflows" in results["wrong"].stdout, results["wrong"].stdout


def test_the_release_carries_nothing_of_the_instructors_tools(repo, released):
    """Its environment files pin the students' packages only (each one the instructors' files pin, at
    the same version), and its data README speaks to students."""
    from transformer_course.instructors.release import STUDENT_PACKAGES

    pin = re.compile(r"^\s+- ([A-Za-z0-9_.-]+)==(\S+)\s*$", re.M)
    for name in ("environment.yml", "binder/environment.yml"):
        theirs = dict((k.lower(), v) for k, v in pin.findall((repo.root / name).read_text()))
        ours = dict((k.lower(), v) for k, v in pin.findall((released / name).read_text()))
        assert sorted(ours) == sorted(STUDENT_PACKAGES), name
        assert all(theirs[k] == v for k, v in ours.items()), name
        assert {"nbgrader", "pytest", "dask", "ruff", "playwright"} <= set(theirs) - set(ours)
    assert "download.pytorch.org/whl/cpu" in (released / "binder" / "environment.yml").read_text()
    data = (released / "data" / "README.md").read_text()
    assert "07 and 08" in data and "MULTI30K_DIR" in data
    for word in ("CI", "shared", "tests"):
        assert not re.search(rf"\b{word}\b", data), word


def test_the_release_environment_installs_and_runs_notebook_01(released, repo, tmp_path):
    """A fresh virtual environment with the release's requirements.txt (pip, as its README says) runs
    notebook 01 with the published answers through its visible tests, and stops at the stub of the
    release's own copy."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # As the release's README tells students: pip install -r requirements.txt.
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                                "--disable-pip-version-check", "-r", str(released / "requirements.txt")],
                               capture_output=True, text=True, timeout=1200)
    assert installed.returncode == 0, installed.stderr[-3000:]
    folder = released / "course" / "01_self_attention"
    answered = tmp_path / "answered.ipynb"
    shutil.copyfile(repo.solutions / "01_self_attention.ipynb", answered)
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    runs = {}
    for label, notebook in (("answered", answered), ("stub", folder / "01_self_attention.ipynb")):
        runs[label] = subprocess.run(
            [str(venv / "bin" / "jupyter"), "nbconvert", "--to", "notebook", "--execute", str(notebook),
             "--output", str(tmp_path / f"{label}-run.ipynb")],
            cwd=folder, capture_output=True, text=True, timeout=600, env=env)
    assert runs["answered"].returncode == 0, runs["answered"].stderr[-3000:]
    ran = json.loads((tmp_path / "answered-run.ipynb").read_text())
    assert sum(1 for c in ran["cells"] if c["cell_type"] == "code" and c.get("execution_count")) > 5
    assert runs["stub"].returncode != 0 and "NotImplementedError" in runs["stub"].stderr


def _pins(text: str) -> list[str]:
    """``name==version`` of each pin: a line of a requirements file, or an item of a conda pip section."""
    return re.findall(r"^(?:\s+- )?([A-Za-z0-9_.-]+==\S+)\s*$", text, re.M)


def test_requirements_pin_what_the_environment_file_pins(repo, released):
    """requirements.txt (pip) and environment.yml (conda) of the release: the same pins, in the same
    order, each the instructors' own."""
    from transformer_course.instructors.release import STUDENT_PACKAGES

    requirements = _pins((released / "requirements.txt").read_text())
    assert requirements == _pins((released / "environment.yml").read_text())
    assert sorted(p.split("==")[0].lower() for p in requirements) == sorted(STUDENT_PACKAGES)
    assert set(requirements) <= set(_pins((repo.root / "environment.yml").read_text()))
    readme = (released / "README.md").read_text()
    assert "pip install -r requirements.txt" in readme and "pip install --user -r requirements.txt" in readme
    assert "download.pytorch.org/whl/cpu" in readme


def _top_level(source: str) -> list[str]:
    """The normalised source of each top-level function and class of a module."""
    return [_normalised(ast.get_source_segment(source, node)) for node in ast.parse(source).body
            if isinstance(node, ast.FunctionDef | ast.ClassDef)]


def test_each_course_blocks_holds_only_earlier_notebooks(repo):
    """Each course_blocks.py's functions and classes, found in the reference modules: every one in a
    module of an earlier notebook, and the notebooks they come from those the release reads from
    its headings (what the deadline check looks at)."""
    modules = {m.stem[2:4]: _normalised(m.read_text())
               for m in (repo.reference / "course_reference").glob("nb[0-9][0-9]_*.py")}
    checked = 0
    for name in course_notebooks(repo):
        blocks = repo.course / name / "course_blocks.py"
        if not blocks.is_file():
            assert carried_answers(repo.course / name) == []
            continue
        origins = set()
        for code in _top_level(blocks.read_text()):
            found = sorted(number for number, text in modules.items() if code in text)
            assert found, f"{name}/course_blocks.py: code found in no reference module:\n{code[:300]}"
            assert found[0] < name[:2], f"{name}/course_blocks.py holds code of notebook {found[0]}:\n{code[:300]}"
            origins.add(found[0])
            checked += 1
        carried = carried_answers(repo.course / name)
        assert {c[:2] for c in carried} == origins, name
        assert all(c in course_notebooks(repo) and c < name for c in carried), (name, carried)
    assert checked > 30  # the course_blocks files were found and read


def test_a_release_of_one_assignment_holds_only_that_notebook(repo, tmp_path):
    out = tmp_path / "week1"
    assert main(["release", "--repository", TARGET, "--out", str(out), "--assignment", "01"]) == 0
    # the notebook's folder, and the guide to `check` that every release carries
    assert sorted(p.name for p in (out / "course").iterdir()) == ["01_self_attention", "README.md"]
    assert not (out / "data").exists()  # no notebook of this release reads Multi30k
    readme = (out / "README.md").read_text()
    assert re.findall(r"^\| (\d\d) \|", readme, re.M) == ["01"]
    assert "Multi30k" not in readme and "course/02_" not in readme
    both = release(repo, TARGET, tmp_path / "two", assignments=["07_training", "01"])
    assert sorted(p.name for p in (tmp_path / "two" / "course").iterdir() if p.is_dir()) == [
        "01_self_attention",
        "07_training",
    ]
    assert tmp_path / "two" / "data" / "multi30k.json" in both
    assert "notebook 07 trains on" in (tmp_path / "two" / "data" / "README.md").read_text()


def test_an_unknown_assignment_is_refused_before_anything_is_written(repo, tmp_path, capsys):
    for bad in ("09", "1", "self_attention", "01_self"):
        out = tmp_path / bad
        assert main(["release", "--repository", TARGET, "--out", str(out), "--assignment", "01",
                     "--assignment", bad]) == 2
        err = capsys.readouterr().err
        assert f"--assignment {bad!r}: the course has 01_self_attention, 02_scaled_dot_product" in err
        assert not out.exists()


def test_answers_are_not_released_before_their_deadline(repo, tmp_path, capsys):
    """Notebook 03 carries 01's and 02's answers: refused while 01 is not due (02 has no deadline in the
    file: never a cause), with one line; released once 01 is due, or with the override and a warning."""
    path = tmp_path / "deadlines.toml"
    path.write_text('[assignments]\n"01_self_attention" = "2027-01-10T12:00:00+01:00"\n')
    deadlines = load_deadlines(path, known=course_notebooks(repo))
    before, after = (dt.datetime(2027, 1, 10, 10, 59, tzinfo=dt.UTC), dt.datetime(2027, 1, 10, 11, 0, tzinfo=dt.UTC))
    with pytest.raises(EarlyAnswersError) as refused:
        release(repo, TARGET, tmp_path / "early", ["03"], deadlines, now=before)
    message = str(refused.value)
    assert "\n" not in message and "02_scaled" not in message
    assert message.startswith("03_multi_head: its course_blocks.py holds the answers of 01_self_attention "
                              "(due 2027-01-10 12:00 +01:00)"), message  # the due date's own zone
    assert "--allow-early-answers" in message and not (tmp_path / "early").exists()
    release(repo, TARGET, tmp_path / "two", ["02"], deadlines, now=before)  # 02 carries no earlier answers
    release(repo, TARGET, tmp_path / "due", ["03"], deadlines, now=after)
    assert (tmp_path / "due" / "course" / "03_multi_head" / "course_blocks.py").is_file()
    assert capsys.readouterr().err == ""
    release(repo, TARGET, tmp_path / "anyway", ["03"], deadlines, now=before, allow_early_answers=True)
    warning = capsys.readouterr().err
    assert warning.startswith("warning: 03_multi_head: ") and "released anyway" in warning
    assert (tmp_path / "anyway" / "course" / "03_multi_head").is_dir()
    # The command line: its own clock, the deadlines file of --deadlines.
    path.write_text('due = "2099-01-01T00:00:00-05:00"\n')
    command = ["release", "--repository", TARGET, "--assignment", "03", "--deadlines", str(path)]
    # refused for its deadlines: 1 (2 is for a mistake in the command)
    assert main([*command, "--out", str(tmp_path / "cli")]) == 1 and not (tmp_path / "cli").exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "01_self_attention (due 2099-01-01 00:00 -05:00)" in err, err
    assert main([*command, "--out", str(tmp_path / "cli"), "--allow-early-answers"]) == 0
    assert "warning: 03_multi_head" in capsys.readouterr().err


def test_the_release_tells_students_how_to_check_a_notebook_themselves(released):
    """The students' repository carries course/README.md (how to run `check`, the instructor's grader, on a
    machine and in Colab) with the course's own address (where the grader is), and its README points to it."""
    from transformer_course.layout import GITHUB_REPO

    readme = (released / "README.md").read_text()
    assert "transformer-course check" in readme and "(course/README.md)" in readme
    guide = (released / "course" / "README.md").read_text()
    assert "transformer-course check" in guide and f"https://github.com/{GITHUB_REPO}" in guide
