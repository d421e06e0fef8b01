"""Verdicts outside the kernel (transformer_course.grading.notebook.verify): the grader runs each hidden test on
the reference in its own process and compares the values the kernel recorded with those."""

from __future__ import annotations

import base64
import importlib
import io

import nbformat
import pytest
import torch

from transformer_course.grading.notebook import verify
from transformer_course.grading.notebook.nbgrader_setup import _grade_id, _is_test

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



def test_warming_in_a_thread_gives_the_records_a_cold_run_gives(repo):
    """`check` runs the test cells on the reference in a thread while the kernel runs: the records
    it leaves must be those a cold, serial run computes, also with a second thread asking at once."""
    import threading

    tests = [(nb, src) for nb, _, src in _hidden_tests(repo) if nb.startswith("07")]
    reference = str(repo.reference.resolve())
    verify.expected_record.cache_clear()
    cold = [verify.expected_record(reference, nb, src) for nb, src in tests]
    verify.expected_record.cache_clear()
    sources = [src for _, src in tests]
    warmer = threading.Thread(target=verify.warm, args=(repo.reference, tests[0][0], sources))
    warmer.start()
    asked = [verify.expected_record(reference, nb, src) for nb, src in reversed(tests)][::-1]
    warmer.join()
    hits = verify.expected_record.cache_info().hits
    for got, want in zip(asked, cold, strict=True):
        assert not isinstance(want, str), want
        assert len(got) == len(want)
        for (what, value, _), (what_cold, value_cold, _) in zip(got, want, strict=True):
            assert what == what_cold
            assert (torch.equal(value, value_cold) if isinstance(value, torch.Tensor) else value == value_cold), what
    assert hits >= 1


def test_the_copy_model_is_trained_once_and_each_caller_gets_the_same_fresh_copy(repo):
    """nb07's hidden tests share one reference-trained copy model per kernel: a second call returns
    equal weights in a new module, and leaves torch's random state as training it again would."""
    verify._reference_modules(repo.reference)
    checks = importlib.import_module("course_reference.checks.nb07")
    notebook = next(repo.source.glob("07_*/*.ipynb"))
    cell = next(c.source for c in nbformat.read(notebook, as_version=4).cells if "def copy_task_batches" in c.source)
    helper = cell[cell.index("def copy_task_batches"):]
    namespace = {"torch": torch, "BOS_ID": 2, "EOS_ID": 3}
    exec(helper[:helper.index("\n\n\n")], namespace)  # the notebook's batch helper only
    checks._COPY_MODELS.clear()
    first = checks.copy_model(namespace)
    after_training = torch.random.get_rng_state()
    torch.manual_seed(123)
    second = checks.copy_model(namespace)
    assert torch.equal(torch.random.get_rng_state(), after_training)
    assert first is not second
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    with torch.no_grad():
        next(first.parameters()).add_(1.0)  # one caller's change does not reach the next
    third = checks.copy_model(namespace)
    assert torch.equal(next(third.parameters()), next(second.parameters()))
