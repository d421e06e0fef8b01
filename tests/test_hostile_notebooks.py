"""The readers of a hand-in (grading/submission/handin.py's recognition, grading/notebook/grade.py's
read_submission) never raise for what a notebook holds, and say why they will not grade one: generated
notebook JSON (any depth, shape, types, encodings, duplicate keys, nbformat versions, cell ids, metadata junk) fed to
them in-process, no kernel. And the listed cases of issue 58: a hard link is refused like a symbolic
link, a notebook holding another assignment's cells beside its own is graded, a cell id past nbformat's
limit and a notebook over the cell cap are invalid before nbgrader runs, JSON a thousand levels deep is
invalid, not a crash.

The properties run hypothesis's "test" profile (tests/conftest.py); for a longer run:
``HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest -q tests/test_hostile_notebooks.py``.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import string
from pathlib import Path

import nbformat
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from transformer_course.grading.notebook.grade import read_submission
from transformer_course.grading.submission import intake
from transformer_course.grading.submission.handin import NOT_GRADED, Releases, find_submission

A, C = "01_self_attention", "03_multi_head"
NB = f"{A}.ipynb"


@pytest.fixture(scope="module")
def known(repo) -> Releases:
    return Releases(repo.assignments())


@pytest.fixture(scope="module")
def solution(repo) -> dict:
    return json.loads((repo.solutions / NB).read_text())


@pytest.fixture(scope="module")
def cap(repo) -> int:
    """The cell cap of notebook 01, derived from its release as the grader derives it."""
    return intake.cell_cap(len(nbformat.read(repo.course / A / NB, as_version=4).cells))


def _folder(root: Path, student: str) -> Path:
    folder = root / student / A
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


# --- the listed cases ---------------------------------------------------------------------------


def test_a_hard_link_to_the_solution_is_refused_like_a_symbolic_link(repo, known, tmp_path):
    solution = tmp_path / "solutions" / NB  # the course's solution (or a classmate's notebook) under a second name
    solution.parent.mkdir()
    shutil.copyfile(repo.solutions / NB, solution)
    folder = _folder(tmp_path / "submitted", "kim")
    os.link(solution, folder / NB)
    handed = find_submission(folder, repo.assignment(A), known=known)
    assert (handed.status, handed.data) == ("refused", None), handed
    assert handed.note.startswith(f"refused: kim/{A}/{NB} is a hard link (2 names for one file"), handed.note
    # beside an own notebook, the link is named and never read; the own one is graded
    shutil.copyfile(repo.course / A / NB, folder / "mine.ipynb")
    handed = find_submission(folder, repo.assignment(A), known=known)
    assert handed.path == folder / "mine.ipynb" and handed.data == (repo.course / A / NB).read_bytes()
    assert f"ignored {NB} (refused: kim/{A}/{NB} is a hard link" in handed.note, handed.note
    # the same notebook as a file of its own (one name, as every upload and checkout has) is graded
    os.unlink(solution)
    handed = find_submission(folder, repo.assignment(A), known=known)
    assert handed.status == "" and handed.path == folder / NB, handed


def test_a_notebook_with_another_assignments_cells_beside_its_own_is_graded(repo, known, tmp_path, solution):
    """A student's 01 (some cells deleted) with 03's whole notebook pasted below: 03's share of its marks is
    the larger, and it was called wrong-notebook; its own released cells are there, so it is 01's."""
    mixed = copy.deepcopy(solution)
    mixed["cells"] = mixed["cells"][:20] + json.loads((repo.solutions / f"{C}.ipynb").read_text())["cells"]
    folder = _folder(tmp_path, "max")
    (folder / NB).write_text(json.dumps(mixed))
    handed = find_submission(folder, repo.assignment(A), known=known)
    assert (handed.status, handed.path) == ("", folder / NB), handed
    assert handed.note == f"graded {NB}, which also holds cells of {C}. " and handed.unusual, handed.note
    # 03's notebook alone under 01's name is still another assignment's
    shutil.copyfile(repo.solutions / f"{C}.ipynb", folder / NB)
    handed = find_submission(folder, repo.assignment(A), known=known)
    assert handed.status == "wrong-notebook" and handed.note.startswith(f"wrong notebook: this is {C}'s"), handed


@pytest.mark.parametrize("cell_id, rule", [("x" * 3_000_000, "maxLength 64"), ("a b", "pattern"), ("", "pattern"),
                                           (7, "type 'string'")])
def test_a_cell_id_against_nbformats_rule_is_invalid(tmp_path, solution, cell_id, rule):
    nb = copy.deepcopy(solution)
    nb["cells"][3]["id"] = cell_id
    (tmp_path / NB).write_text(json.dumps(nb))
    read, why = read_submission(tmp_path / NB, 500)
    assert read is None and why.startswith(f"invalid: {NB} is not a valid notebook (cells[3].id: {rule}"), why
    assert "a cell id is 1-64 characters" in why and len(why) < 400, "the reason names the rule, not the value"


def test_keys_an_editor_added_to_a_cell_or_an_output_are_dropped_and_the_notebook_read(tmp_path, solution):
    """A key nbformat's schema does not know, on a cell or an output (an editor's own): the notebook was graded
    before its schema was checked, and is still: the key is dropped, the note says which; a cell of an unknown
    kind is still invalid."""
    nb = copy.deepcopy(solution)
    nb["cells"][1]["editor_state"] = {"folded": True}
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "hi", "transient_id": 3}]
    (tmp_path / NB).write_text(json.dumps(nb))
    read, why = read_submission(tmp_path / NB, 500)
    assert read is not None, why
    nbformat.validate(read)
    assert "cells[1].editor_state" in why and "outputs[0].transient_id" in why, why
    assert [c.source for c in read.cells] == [c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                                               for c in nb["cells"]]
    nb["cells"][2]["cell_type"] = "sketch"
    (tmp_path / NB).write_text(json.dumps(nb))
    read, why = read_submission(tmp_path / NB, 500)
    assert read is None and why.startswith(f"invalid: {NB} is not a valid notebook"), why


def test_old_notebooks_without_ids_and_duplicate_ids_are_still_read(tmp_path, solution):
    """nbformat 4.4 (old Jupyter: no ids), 4.5 without ids, ids under a 4.4 header, duplicate ids: read as
    nbformat reads them (ids added or made unique), valid for nbgrader."""
    old = copy.deepcopy(solution)
    old["nbformat_minor"] = 4
    for cell in old["cells"]:
        del cell["id"]
    no_ids = {**copy.deepcopy(old), "nbformat_minor": 5}
    headed = {**copy.deepcopy(solution), "nbformat_minor": 4}
    twice = copy.deepcopy(solution)
    twice["cells"][2]["id"] = twice["cells"][1]["id"]
    for name, nb in (("old", old), ("no_ids", no_ids), ("headed", headed), ("twice", twice)):
        (tmp_path / f"{name}.ipynb").write_text(json.dumps(nb))
        read, why = read_submission(tmp_path / f"{name}.ipynb", 500)
        assert read is not None and why == "", (name, why)
        nbformat.validate(read)
        ids = [c.get("id") for c in read.cells]
        assert ids == [None] * len(ids) if name == "old" else len(set(ids)) == len(ids), (name, ids)
        assert [c.source for c in read.cells] == [c.source for c in nbformat.reads(json.dumps(solution), 4).cells]


def test_a_notebook_over_the_cell_cap_is_invalid_with_the_figure(repo, tmp_path, solution, cap):
    assert cap == max(500, 10 * len(json.loads((repo.course / A / NB).read_text())["cells"]))
    markdown = {"cell_type": "markdown", "metadata": {}, "source": "more"}
    nb = copy.deepcopy(solution)
    nb["cells"] += [{**markdown, "id": f"more-{i}"} for i in range(cap - len(nb["cells"]))]
    (tmp_path / NB).write_text(json.dumps(nb))
    assert read_submission(tmp_path / NB, cap)[0] is not None, "a notebook at the cap is read"
    nb["cells"] += [{**markdown, "id": f"more-{i}"} for i in range(cap, 30_000)]
    (tmp_path / NB).write_text(json.dumps(nb))
    read, why = read_submission(tmp_path / NB, cap)
    assert read is None and why.startswith(f"invalid: {NB} has 30,000 cells, over the {cap:,} a notebook"), why


def test_json_a_thousand_levels_deep_is_invalid_not_a_crash(repo, known, tmp_path, solution):
    nb = copy.deepcopy(solution)
    nb["metadata"]["x"] = "PLACEHOLDER"
    text = json.dumps(nb).replace('"PLACEHOLDER"', "[" * 1000 + "]" * 1000)  # 2 KB of brackets
    folder = _folder(tmp_path, "deep")
    (folder / NB).write_text(text)
    handed = find_submission(folder, repo.assignment(A), known=known)  # raised RecursionError
    assert handed.status == "" and handed.path == folder / NB  # it is what was handed in; the grader says why
    read, why = read_submission(folder / NB, 500)
    assert read is None and why == f"invalid: {NB} is not a readable notebook (nested more than 64 levels deep; " \
        "a notebook has about 10)", why


def test_a_lone_surrogate_is_invalid(tmp_path, solution):
    nb = copy.deepcopy(solution)
    nb["cells"][0]["source"] = "\ud800"
    (tmp_path / NB).write_text(json.dumps(nb))  # ASCII JSON with the escape \ud800: nbformat.write fails on it
    read, why = read_submission(tmp_path / NB, 500)
    assert read is None and "lone UTF-16 surrogate" in why, why


# --- generated input ----------------------------------------------------------------------------

# any JSON value (text where text is expected, or not)
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                 max_size=3),
                     max_leaves=12)
_IDS = st.one_of(st.from_regex(r"[a-zA-Z0-9_-]{1,64}", fullmatch=True), st.text(max_size=80),
                 st.text(string.ascii_letters, min_size=65, max_size=70), _JSON)
_SOURCE = st.one_of(st.text(max_size=60), st.lists(st.text(max_size=20), max_size=4), _JSON)


@st.composite
def _cells(draw) -> dict:
    cell = {"cell_type": draw(st.sampled_from(["code", "markdown", "raw", "heading", ""]) | _JSON),
            "metadata": draw(st.dictionaries(st.text(max_size=5), _JSON, max_size=2)
                             | st.fixed_dictionaries({"nbgrader": _JSON}) | _JSON),
            "source": draw(_SOURCE)}
    if draw(st.booleans()):
        cell["id"] = draw(_IDS)
    if cell["cell_type"] == "code" or draw(st.booleans()):
        cell["outputs"], cell["execution_count"] = draw(st.lists(_JSON, max_size=2) | _JSON), draw(_JSON)
    return cell


@st.composite
def _notebooks(draw) -> dict:
    """A notebook's JSON of any version and shape, its cells drawn from the above."""
    version = draw(st.sampled_from([4, 4, 4, 3, 5, 2, "4"]) | _JSON)
    cells = draw(st.lists(_cells(), max_size=4))
    nb = {"nbformat": version, "nbformat_minor": draw(st.integers(0, 6) | _JSON),
          "metadata": draw(st.dictionaries(st.text(max_size=5), _JSON, max_size=3) | _JSON)}
    if version == 3:
        nb["worksheets"] = draw(st.just([{"cells": cells, "metadata": {}}]) | _JSON)
    else:
        nb["cells"] = cells if draw(st.integers(0, 4)) else draw(_JSON)
    for key in draw(st.lists(st.sampled_from(["metadata", "nbformat", "nbformat_minor", "cells"]), max_size=2)):
        nb.pop(key, None)
    return nb


@st.composite
def _encoded(draw, notebooks=_notebooks()) -> bytes:  # noqa: B008 (a strategy, not a mutable default)
    """A generated notebook as bytes: nested in brackets (0 to 1,200 levels), with a key given twice,
    encoded in UTF-8 (with or without a BOM), UTF-16, Windows-1252 or latin-1; or bytes at random."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=200))
    nb = draw(notebooks)
    depth = draw(st.sampled_from([0, 0, 5, 63, 64, 65, 300, 1200]))
    text = json.dumps(nb, ensure_ascii=draw(st.booleans()))
    if depth and isinstance(nb.get("metadata"), dict):
        nb["metadata"]["deep"] = "DEEP"
        text = json.dumps(nb).replace('"DEEP"', draw(st.sampled_from(["[", '{"k":['])) * depth + "1"
                                      + draw(st.sampled_from(["]", "]}"])) * depth)
    if draw(st.booleans()):  # a key given twice: JSON parsers keep the last
        text = text.replace("{", '{"cells": ' + json.dumps(draw(_JSON)) + ", ", 1)
    encoding = draw(st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "cp1252", "latin-1"]))
    return text.encode(encoding, errors="replace")


def _check_read(path: Path, cap: int) -> None:
    """read_submission's promise: a notebook nbgrader can take, or None and a short reason."""
    read, why = read_submission(path, cap)
    if read is None:
        assert why.startswith(f"invalid: {path.name} "), why
        assert len(why) < 600, "a reason, not the notebook"
        return
    nbformat.validate(read)  # what nbgrader checks cells against
    nbformat.writes(read).encode()  # what the grader writes for nbgrader
    assert read.nbformat == 4 and len(read.cells) <= cap


@given(data=_encoded())
def test_read_submission_never_raises_and_says_why(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("read", numbered=True) / NB
    path.write_bytes(data)
    _check_read(path, 500)


@given(data=_encoded())
def test_find_submission_never_raises_and_says_why(repo, known, tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("find", numbered=True) / "sam" / A
    folder.mkdir(parents=True)
    (folder / "hand-in.ipynb").write_bytes(data)
    handed = find_submission(folder, repo.assignment(A), known=known)
    assert handed.status in ("", *NOT_GRADED), handed
    if handed.status:
        assert handed.path is None and handed.note.startswith(handed.status.replace("-", " ")), handed
    else:  # the only notebook: graded (the grader says invalid where it cannot be read)
        assert handed.path == folder / "hand-in.ipynb" and handed.data == data


@given(junk=st.dictionaries(st.text(max_size=8), _JSON, max_size=4), extra=st.lists(_cells(), max_size=3),
       cell_ids=st.booleans())
def test_a_released_notebook_with_junk_added_is_still_recognised_and_read(repo, known, cap, tmp_path_factory,
                                                                          solution, junk, extra, cell_ids):
    """The real released notebook, with generated metadata and cells added (and its ids kept or dropped):
    still 01's, whatever was added; and read as a notebook wherever what was added keeps nbformat's rules."""
    release = json.loads((repo.course / A / NB).read_text())
    release["metadata"].update(junk)
    release["cells"] += extra
    if not cell_ids:
        release["nbformat_minor"] = 4
        for cell in release["cells"]:
            cell.pop("id", None)
    folder = tmp_path_factory.mktemp("release", numbered=True) / "sam" / A
    folder.mkdir(parents=True)
    (folder / NB).write_text(json.dumps(release))
    handed = find_submission(folder, repo.assignment(A), known=known)
    assert (handed.status, handed.path) == ("", folder / NB), handed
    assert known.recognise(release, A).assignment == A
    _check_read(folder / NB, cap)
    if not extra:  # only metadata was added: nothing nbformat forbids
        assert read_submission(folder / NB, cap)[0] is not None


def _depth(value) -> int:
    """Nesting of a parsed JSON value, counted without recursion (the reference for deeper_than)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            todo += [(v, level + 1) for v in (item.values() if isinstance(item, dict) else item)]
    return deepest


@given(value=st.recursive(st.text(alphabet='[]{}"\\ab', max_size=6) | st.integers(),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text('[]{}"', max_size=3),
                                                                                      inner, max_size=2),
                          max_leaves=40),
       levels=st.integers(0, 12), indent=st.sampled_from([None, 1]))
def test_deeper_than_is_exact_for_json_whatever_its_strings_hold(value, levels, indent):
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    assume(len(text) < 10_000)
    assert intake.deeper_than(text, levels) == (_depth(value) > levels), (text, _depth(value))
