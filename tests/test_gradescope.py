"""`transformer-course gradescope`: the autograder zip, unpacked in a folder laid out like
Gradescope's /autograder and run as Gradescope runs it (run_autograder, with AUTOGRADER_ROOT
pointing at that folder): a correct, a wrong and a broken submission, and none at all."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from transformer_course.cli import main
from transformer_course.grading.submission.handin import STUB_LINES

A01 = "01_self_attention"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("gradescope") / "autograder.zip"
    assert main(["gradescope", A01, "--out", str(out), "--visibility", "after_published"]) == 0
    return out


def _run(bundle, tmp_path, files: dict[str, bytes]) -> dict:
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
        for info in z.infolist():  # zipfile does not restore modes; Gradescope's unzip does
            mode = info.external_attr >> 16
            if mode:
                os.chmod(root / "source" / info.filename, stat.S_IMODE(mode))
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")  # mode too, as Gradescope does
    (root / "submission").mkdir(exist_ok=True)
    for name, data in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_bytes(data)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    env.pop("TRANSFORMER_COURSE_ROOT", None)
    done = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text())


def test_bundle_has_gradescope_layout_and_only_this_assignment(repo, bundle):
    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder"} <= names
        assert z.getinfo("run_autograder").external_attr >> 16 & 0o111
        assert f"course/autograder/source/{A01}/{A01}.source.py" in names
        assert "course/autograder/reference/course_reference/checks/nb01.py" in names
        assert not any(n.startswith("course/autograder/submitted/") for n in names)
        others = [f"course/{top}/{a.name}/" for a in repo.assignments() if a.name != A01
                  for top in ("autograder/source", "course")]
        assert not any(n.startswith(tuple(others)) for n in names)  # only this assignment's notebook files
        # every notebook's released cells, to name another assignment's notebook, and no line of an answer
        releases = json.loads(z.read("course/releases.json"))
        assert set(releases["marks"]) == {a.name for a in repo.assignments()}
        for a in repo.assignments():  # each line is one the students' release of that notebook shows
            released = json.loads((repo.course / a.name / f"{a.notebook}.ipynb").read_text())
            shown = {" ".join(line.split()) for c in released["cells"] for line in "".join(c["source"]).splitlines()}
            assert set(releases["released"][a.name]) - shown <= set(STUB_LINES), a.name


def test_correct_wrong_broken_and_missing_submissions(repo, bundle, tmp_path):
    maxima = {e: repo.assignment(A01).max_score(e) for e in repo.assignment(A01).exercises}
    # uploaded from a repository (GitHub): the notebook where the course keeps it, beside another notebook
    correct = _run(bundle, tmp_path / "correct", {f"course/{A01}/{A01}.ipynb": (repo.solutions / f"{A01}.ipynb")
                                                  .read_bytes(), "README.md": b"my repository"})
    assert correct["score"] == sum(maxima.values())
    assert {t["name"]: (t["score"], t["max_score"]) for t in correct["tests"]} == {e: (m, m) for e, m in maxima.items()}
    assert all(t["visibility"] == "after_published" for t in correct["tests"])
    # The answers in words are Gradescope's manual grading: not tests, and the output says so.
    written = repo.assignment(A01).manual_max_score
    assert written > 0 and f"answers in words ({written:g} points) are graded by hand" in correct["output"]

    wrong = _run(bundle, tmp_path / "wrong", {"my upload.ipynb":
                                             (repo.sample_class / "dev" / A01 / f"{A01}.ipynb").read_bytes()})
    softmax = next(t for t in wrong["tests"] if t["name"] == "softmax")
    assert softmax["score"] < softmax["max_score"] and "overflows" in softmax["output"]
    assert f"graded my upload.ipynb (expected {A01}.ipynb)" in wrong["output"]

    # another assignment's notebook is named as such, not graded as this one
    other = _run(bundle, tmp_path / "other", {f"{A01}.ipynb": (repo.solutions / "02_scaled_dot_product.ipynb")
                                              .read_bytes()})
    assert other["score"] == 0 and "wrong notebook: this is 02_scaled_dot_product's" in other["output"], other

    broken = _run(bundle, tmp_path / "broken", {f"{A01}.ipynb": b'{"cells": [ {"cell_type": "co'})
    assert broken["score"] == 0 and len(broken["tests"]) == len(maxima)
    assert "not valid" in broken["output"].lower() or "invalid" in broken["output"].lower()

    none = _run(bundle, tmp_path / "none", {})
    assert none["score"] == 0 and f"{A01}.ipynb was not handed in" in none["output"], none["output"]
    # Each results.json is in Gradescope's documented format, and its score is the sum of its tests'.
    import jsonschema

    schema = json.loads((Path(__file__).parent / "gradescope_results.schema.json").read_text())
    for results in (correct, wrong, other, broken, none):
        jsonschema.validate(results, schema)
        assert results["score"] == sum(t["score"] for t in results["tests"])
        assert all(t["score"] <= t["max_score"] for t in results["tests"])
    with pytest.raises(jsonschema.ValidationError):  # the schema can fail: a misspelt key
        jsonschema.validate({**correct, "stdout_visiblity": "hidden"}, schema)


def test_a_linked_notebook_is_refused_not_read(bundle, tmp_path):
    """A zip of links (an upload that points at the autograder's own files): nothing is followed or graded."""
    target = tmp_path / "elsewhere.ipynb"
    target.write_text("{}")
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    os.symlink(target, root / "submission" / f"{A01}.ipynb")
    result = _run(bundle, tmp_path, {})
    assert result["score"] == 0
    assert f"{A01}.ipynb is a symbolic link" in result["output"], result["output"]


def test_a_notebook_nested_too_deep_gets_a_results_json_that_says_why(bundle, tmp_path):
    """JSON nested thousands deep (it broke the reader of the hand-in): results.json is written, 0 points, why."""
    deep = b'{"metadata": ' + b"[" * 5000 + b"]" * 5000 + b', "cells": []}'
    result = _run(bundle, tmp_path, {f"{A01}.ipynb": deep})
    assert result["score"] == 0 and [t["score"] for t in result["tests"]] == [0] * len(result["tests"])
    assert "invalid" in result["output"], result["output"]
