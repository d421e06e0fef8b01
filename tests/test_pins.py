"""The pins stay installable: a fresh virtual environment gets exactly the pinned packages
from the package index and imports every one of them (a dead pin fails here, not in class).

`make test` checks the environment it runs in: on a fresh clone (CI's) that is the `.venv` the Makefile has
just built from nothing with these pins. The install into a second, empty environment (about two minutes:
it downloads and installs everything) is marked slow, for `make bench`; SKIP_PIN_INSTALL=1 skips it there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# distribution -> the module it provides, where the names differ
MODULES = {"jupyter-book": "jupyter_book", "ipykernel": "ipykernel", "pytest": "pytest", "pylti1p3next": "pylti1p3",
           "PyJWT": "jwt", "pytest-xdist": "xdist"}


def _pins() -> tuple[list[str], dict[str, str]]:
    """The project's pins (``name==version``, run and dev), and name -> version."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = project["dependencies"] + project["optional-dependencies"]["dev"]
    return pins, dict(re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", p).groups() for p in pins)


def test_this_environment_has_exactly_the_pinned_packages():
    """The environment the tests run in (the Makefile's, from the same pins) has each pinned package at its
    pinned version, and imports it."""
    import importlib
    import importlib.metadata as md

    _, wanted = _pins()
    wrong = {}
    for name, version in wanted.items():
        installed = md.version(name).split("+")[0]
        if installed != version:
            wrong[name] = f"pinned {version}, installed {installed}"
        importlib.import_module(MODULES.get(name, name.replace("-", "_")))
    assert not wrong, wrong


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("SKIP_PIN_INSTALL") == "1", reason="SKIP_PIN_INSTALL=1")
def test_pinned_environment_installs_from_scratch(tmp_path):
    pins, wanted = _pins()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, f"torch=={wanted['torch']}"], check=True, timeout=1800)  # first, as the Makefile does
    subprocess.run([*pip, *pins], check=True, timeout=1800)
    modules = [MODULES.get(name, name.replace("-", "_")) for name in wanted]
    script = (
        "import importlib, importlib.metadata as md, json, sys\n"
        f"for m in {modules!r}:\n    importlib.import_module(m)\n"
        f"print(json.dumps({{n: md.version(n) for n in {list(wanted)!r}}}))\n"
    )
    result = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    installed = json.loads(result.stdout.strip().splitlines()[-1])
    for name, version in wanted.items():
        assert installed[name].split("+")[0] == version, f"{name}: pinned {version}, installed {installed[name]}"
