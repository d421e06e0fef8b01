"""``make compat`` (scripts/compat.py): its pins and its verdicts, without installing anything.

The real run (two torch environments, about 5 minutes) is CI's last step; these tests keep
the script's reading of pyproject.toml and its exit statuses honest.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

from transformer_course.layout import Repo

ROOT = Path(__file__).resolve().parents[1]
IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", re.MULTILINE)


@pytest.fixture(scope="module")
def compat():
    spec = importlib.util.spec_from_file_location("compat", ROOT / "scripts" / "compat.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_environments_get_every_package_the_notebooks_import_at_the_projects_pins(compat, repo):
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = compat.pins(repo)
    assert [p.split("==")[0] for p in pins] == compat.KERNEL_PACKAGES
    assert set(pins) <= set(deps)
    assert not any(p.startswith("torch") for p in pins)  # the version under test is installed alone
    # Every third-party module a notebook source imports is among them (or is torch).
    imported = set()
    for notebook in (ROOT / "course").glob("*/*.ipynb"):
        for cell in json.loads(notebook.read_text())["cells"]:
            if cell["cell_type"] == "code":
                imported |= set(IMPORT.findall("".join(cell["source"])))
    helpers = {"course_blocks.py"} | {name for a in repo.assignments() for name in a.provided}
    for helper in helpers:
        imported |= set(IMPORT.findall((ROOT / "solutions" / helper).read_text()))
    local = {helper.removesuffix(".py") for helper in helpers}
    third_party = imported - {"torch", "google"} - local - set(sys.stdlib_module_names)
    assert third_party, "no imports found: the scan is broken"
    assert third_party <= set(compat.KERNEL_PACKAGES), third_party - set(compat.KERNEL_PACKAGES)


def _fake(compat, monkeypatch, tmp_path, install_fails=(), notebook_fails=()):
    def environment(repo, version, python):
        if version in install_fails:
            raise compat.InstallError("no such version")
        folder = tmp_path / version
        (folder / "bin").mkdir(parents=True, exist_ok=True)
        return f"torch-{version}", folder

    def run_solution(assignment, train_config, kernel_name):
        assert train_config == "tiny"
        if (kernel_name, assignment.name) in notebook_fails:
            raise RuntimeError("\x1b[31mDataError\x1b[39m: boom")  # a kernel's coloured traceback

    class Done:
        stdout = "9.9.9 3.11.7"

    monkeypatch.setattr(compat, "environment", environment)
    monkeypatch.setattr(compat, "run_solution", run_solution)
    monkeypatch.setattr(compat.subprocess, "run", lambda *a, **k: Done())


def test_every_notebook_passing_under_every_version_exits_0(compat, monkeypatch, tmp_path, capsys):
    _fake(compat, monkeypatch, tmp_path)
    assert compat.main(["1.0", "2.0"]) == 0
    assert capsys.readouterr().out.count(" ok") == 2 * len(Repo().assignments())


def test_a_failing_notebook_exits_1_and_is_named(compat, monkeypatch, tmp_path, capsys):
    _fake(compat, monkeypatch, tmp_path, notebook_fails={("torch-2.0", "04_masking")})
    assert compat.main(["1.0", "2.0", "--not-installed-ok"]) == 1
    out = capsys.readouterr().out
    assert "04_masking" in out and "FAILED: DataError: boom" in out and "failed: torch 2.0 04_masking" in out


def test_an_environment_that_cannot_be_installed_exits_2_unless_allowed(compat, monkeypatch, tmp_path, capsys):
    _fake(compat, monkeypatch, tmp_path, install_fails={"2.0"})
    assert compat.main(["1.0", "2.0"]) == 2
    out = capsys.readouterr().out
    assert "torch 2.0: could not be installed: no such version" in out and out.count(" ok") == len(Repo().assignments())
    assert compat.main(["1.0", "2.0", "--not-installed-ok"]) == 0
    assert "not installed (nothing ran under it): torch 2.0" in capsys.readouterr().out


def test_a_python_that_does_not_run_is_an_install_error_not_a_crash(compat, repo, tmp_path):
    with pytest.raises(compat.InstallError, match="no working Python"):
        compat.environment(repo, "2.6.0", str(tmp_path / "python3.99"))
    assert not (repo.root / ".venv-compat" / "torch-2.6.0-py3.99").exists()
