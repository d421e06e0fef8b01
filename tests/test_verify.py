"""Verdicts outside the kernel (transformer_course.verify): the grader runs each hidden test on
the reference in its own process and compares the values the kernel recorded with those."""

from __future__ import annotations

import base64
import importlib
import io

import nbformat
import pytest
import torch

from transformer_course import verify
from transformer_course.nbgrader_setup import _grade_id, _is_test

# Hidden tests whose checks are statistical properties of the student's own outputs (dropout
# rates, two runs that must differ), with no reference value to compare outside.
PROPERTY_ONLY = {"test_MultiHeadAttention_dropout", "test_scaled_dot_product_attention_dropout"}


def _hidden_tests(repo):
    for notebook in sorted(repo.source.glob("*/*.ipynb")):
        for cell in nbformat.read(notebook, as_version=4).cells:
            if _is_test(cell) and "_checks.check_" in cell.source:
                yield notebook.stem, _grade_id(cell), cell.source


def _record_of(repo, notebook, source):
    """The payload the kernel would send for ``source`` run on the reference (guard._serialize)."""
    verify._reference_modules(repo.reference)
    guard = importlib.import_module("course_reference.guard")
    record = verify.expected_record(str(repo.reference.resolve()), notebook, source)
    return guard._serialize(list(record))


def test_every_hidden_test_runs_on_the_reference_and_records_values(repo):
    tests = list(_hidden_tests(repo))
    assert len(tests) >= 25
    for notebook, grade_id, source in tests:
        record = verify.expected_record(str(repo.reference.resolve()), notebook, source)
        assert not isinstance(record, str), (grade_id, record)
        if grade_id not in PROPERTY_ONLY:
            assert len(record) >= 1, grade_id
        # Tensors and numbers; a result that is neither (learn_bpe's merges) is one canonical string.
        assert all(isinstance(what, str) and isinstance(value, torch.Tensor | float | str) for what, value, _ in record)


def test_the_reference_run_does_not_depend_on_the_global_rng(repo):
    notebook, grade_id, source = next(t for t in _hidden_tests(repo) if t[1] == "test_Transformer_hidden")
    first = verify.expected_record.__wrapped__(str(repo.reference.resolve()), notebook, source)
    torch.manual_seed(12345)
    torch.rand(100)
    second = verify.expected_record.__wrapped__(str(repo.reference.resolve()), notebook, source)
    assert [w for w, _, _ in first] == [w for w, _, _ in second]
    assert all(torch.equal(a, b) for (_, a, _), (_, b, _) in zip(first, second, strict=True))


@pytest.fixture(scope="module")
def softmax_test(repo):
    notebook, _, source = next(t for t in _hidden_tests(repo) if t[1] == "test_softmax_hidden")
    return notebook, source, _record_of(repo, notebook, source)


def _payload(entries):
    buffer = io.BytesIO()
    torch.save(entries, buffer)
    return base64.b64encode(buffer.getvalue()).decode()


def _entries(payload):
    return torch.load(io.BytesIO(base64.b64decode(payload)), weights_only=True)


def test_the_reference_values_match(repo, softmax_test):
    notebook, source, payload = softmax_test
    assert verify.compare(repo.reference, notebook, source, payload) == ""


def test_a_changed_value_is_named(repo, softmax_test):
    notebook, source, payload = softmax_test
    entries = _entries(payload)
    what, value, tol = entries[2]
    entries[2] = (what, value * 1.01, tol)
    reason = verify.compare(repo.reference, notebook, source, _payload(entries))
    assert reason.startswith(what) and "max abs error" in reason


def test_a_missing_or_renamed_value_fails(repo, softmax_test):
    notebook, source, payload = softmax_test
    entries = _entries(payload)
    assert "recorded 6 checked values" in verify.compare(repo.reference, notebook, source, _payload(entries[:-1]))
    assert "recorded 0" in verify.compare(repo.reference, notebook, source, "")
    entries[0] = ("something else", *entries[0][1:])
    assert "not those of the test" in verify.compare(repo.reference, notebook, source, _payload(entries))


class _Liar(torch.Tensor):
    pass


def test_a_tensor_subclass_or_garbage_is_not_read(repo, softmax_test):
    notebook, source, payload = softmax_test
    entries = _entries(payload)
    entries[0] = (entries[0][0], entries[0][1].as_subclass(_Liar), entries[0][2])
    assert "could not be read as plain tensors" in verify.compare(repo.reference, notebook, source, _payload(entries))
    assert "could not be read" in verify.compare(repo.reference, notebook, source, "not base64!")


def test_exact_values_must_be_equal(repo):
    notebook, _, source = next(t for t in _hidden_tests(repo) if t[1] == "test_make_causal_mask_hidden")
    payload = _record_of(repo, notebook, source)
    assert verify.compare(repo.reference, notebook, source, payload) == ""
    entries = _entries(payload)
    what, mask, tol = entries[0]
    assert tol is None and mask.dtype == torch.bool
    flipped = mask.clone()
    flipped.view(-1)[0] = ~flipped.view(-1)[0]
    entries[0] = (what, flipped, tol)
    assert "values differ" in verify.compare(repo.reference, notebook, source, _payload(entries))

