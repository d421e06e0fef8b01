"""Each course notebook's set-up cell (after its title), run as in Colab (a stand-in ``google.colab`` module, the
repository served from this checkout), provides everything the notebook imports."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import nbformat
import pytest

from transformer_course.layout import GITHUB_REPO, Repo

ASSIGNMENTS = [a.name for a in Repo().assignments()]


def _imports(source: str) -> set[str]:
    """Top-level module names a piece of Python imports."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_colab_setup_cell_provides_every_import(repo, tmp_path, name):
    assignment = repo.assignment(name)
    nb = nbformat.read(repo.course / name / f"{assignment.notebook}.ipynb", as_version=4)
    setup = nb.cells[1].source  # the cell after the title
    assert f"raw.githubusercontent.com/{GITHUB_REPO}/main/course/" in setup
    fake = tmp_path / "fake"
    (fake / "google" / "colab").mkdir(parents=True)
    (fake / "google" / "__init__.py").write_text("")
    (fake / "google" / "colab" / "__init__.py").write_text("")
    prelude = (
        "import json, sys, urllib.request, subprocess\n"
        "import google.colab\n"
        f"_root = {str(repo.root)!r}\n"
        "fetched, installs = [], []\n"
        "def _fetch(url, filename):\n"
        "    path = url.split('/main/', 1)[1]\n"
        "    open(filename, 'wb').write(open(_root + '/' + path, 'rb').read())\n"
        "    fetched.append(filename)\n"
        "urllib.request.urlretrieve = _fetch\n"
        "subprocess.run = lambda cmd, **k: installs.append(cmd)\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run([sys.executable, "-c", prelude + setup + "\nprint(json.dumps(fetched))"],
                            cwd=work, capture_output=True, text=True, timeout=60,
                            env={"PYTHONPATH": str(fake), "PATH": ""})
    assert result.returncode == 0, result.stderr
    fetched = json.loads(result.stdout.strip().splitlines()[-1])
    for filename in fetched:  # the same bytes as the course folder's copy
        assert (work / filename).read_bytes() == (repo.course / name / filename).read_bytes()
    checked = set(re.findall(r'"([a-z_]+)"', setup.split("missing = ", 1)[1].split("]", 1)[0]))
    provided = {f[:-3] for f in fetched}
    needed = set()
    for cell in nb.cells[2:]:
        if cell.cell_type == "code":
            needed |= _imports(cell.source)
    for filename in fetched:
        needed |= _imports((work / filename).read_text())
    third_party = needed - set(sys.stdlib_module_names) - provided - {"google", "IPython"}
    assert third_party <= checked, (
        f"{name} imports {sorted(third_party - checked)}, which its Colab setup cell neither installs nor fetches")
    assert "torch" in checked
