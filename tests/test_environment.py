"""environment.yml (conda/Binder) and pyproject.toml pin the same packages; data manifests are sound."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pins(lines) -> dict[str, str]:
    pins = {}
    for line in lines:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)==([^\s;]+)\s*", line)
        assert match, f"not an exact pin: {line!r}"
        pins[match.group(1).lower()] = match.group(2)
    return pins


@pytest.mark.parametrize("path", ["environment.yml", "binder/environment.yml"])
def test_environment_yml_matches_pyproject(path):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _pins(project["dependencies"] + project["optional-dependencies"]["dev"])
    text = (ROOT / path).read_text()
    pip_lines = re.findall(r"^\s+- ([A-Za-z0-9_.-]+==\S+)\s*$", text, flags=re.M)
    assert _pins(pip_lines) == wanted


def test_binder_badge_opens_jupyterlab_on_course():
    from transformer_course.layout import GITHUB_REPO

    readme = (ROOT / "README.md").read_text()
    badge = re.search(r"\(https://mybinder\.org/v2/gh/([^/]+/[^/]+)/main\?urlpath=lab/tree/([^)]+)\)", readme)
    assert badge, "no Binder badge in README.md"
    assert badge.group(1) == GITHUB_REPO and (ROOT / badge.group(2)).is_dir()
    assert "download.pytorch.org/whl/cpu" in (ROOT / "binder" / "environment.yml").read_text()


def test_makefile_installs_the_pinned_torch():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    torch_pin = next(d for d in project["dependencies"] if d.startswith("torch=="))
    assert torch_pin in (ROOT / "Makefile").read_text()


def test_multi30k_manifest_matches_the_shared_checksums(local_multi30k):
    manifest = json.loads((ROOT / "data" / "multi30k.json").read_text())
    shared = local_multi30k
    sums = dict(reversed(line.split()) for line in (shared / "SHA256SUMS").read_text().splitlines() if line)
    assert manifest["files"] == sums
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((shared / name).read_bytes()).hexdigest() == digest
