"""Notebook 07's switch to train the student's own model: ``my_modules.load`` reads notebooks 01-06,
checks each block against the course's, and names the first that differs."""

from __future__ import annotations

import json
import shutil

import pytest
import torch


@pytest.fixture
def my_modules(repo, monkeypatch):
    monkeypatch.syspath_prepend(str(repo.source / "07_training"))  # beside its course_blocks.py
    import my_modules

    return my_modules


def test_the_solutions_load_and_train_as_the_course_model(repo, my_modules):
    import course_blocks

    blocks = my_modules.load(repo.solutions)
    torch.manual_seed(0)
    reference = course_blocks.Transformer(11, 11, d_model=16, num_heads=4, num_layers=2, d_ff=32, dropout=0.0).eval()
    mine = blocks.Transformer(11, 11, d_model=16, num_heads=4, num_layers=2, d_ff=32, dropout=0.0).eval()
    mine.load_state_dict(reference.state_dict())
    src, tgt = torch.tensor([[4, 5, 6, 3, 0]]), torch.tensor([[2, 7, 8, 0]])
    assert torch.allclose(mine(src, tgt), reference(src, tgt), atol=1e-6)
    tied = blocks.Transformer(11, 11, d_model=16, num_heads=4, num_layers=1, d_ff=32, tie_embeddings=True)
    assert tied.generator.weight is tied.tgt_embed.embedding.weight


def _copy_with(repo, tmp_path, notebook: str, old: str, new: str):
    """The solution notebooks, with one replacement in ``notebook``'s answer cells."""
    for path in repo.solutions.glob("0[1-6]_*.ipynb"):
        shutil.copy(path, tmp_path / path.name)
    path = tmp_path / f"{notebook}.ipynb"
    nb = json.loads(path.read_text())
    cells = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")
             and old in "".join(c["source"])]
    assert cells, f"{old!r} is in no answer cell of {notebook}"
    cells[0]["source"] = "".join(cells[0]["source"]).replace(old, new)
    path.write_text(json.dumps(nb))
    return tmp_path


def test_the_first_wrong_block_is_named_with_its_notebook(repo, my_modules, tmp_path):
    folder = _copy_with(repo, tmp_path, "04_masking", ".tril()", ".triu()")
    with pytest.raises(my_modules.MyModulesError, match=r"your `make_causal_mask` \(04_masking\) does not match"):
        my_modules.load(folder)


def test_an_unwritten_block_and_a_missing_notebook_are_named(repo, my_modules, tmp_path):
    for assignment in repo.assignments()[:6]:  # the release: every exercise unwritten
        shutil.copytree(repo.course / assignment.name, tmp_path / assignment.name)
    with pytest.raises(my_modules.MyModulesError, match=r"your `softmax` \(01_self_attention\) is not written yet"):
        my_modules.load(tmp_path)
    shutil.rmtree(tmp_path / "05_positional_encoding")
    with pytest.raises(my_modules.MyModulesError, match="no 05_positional_encoding.ipynb"):
        my_modules.load(tmp_path)
