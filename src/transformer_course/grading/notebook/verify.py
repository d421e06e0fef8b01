"""Verdicts outside the student's process.

A hidden test runs inside the student's kernel, where answer cells could have changed how
tensors compare (a ``torch.Tensor`` subclass whose ``__torch_function__`` says "equal", a
global ``TorchFunctionMode``, a patched ``allclose``). So every comparison that passes there
also records the student's value (``course_reference.checks.record``); the kernel hands the
record back serialized with ``torch.save``. Here, in the grader's own process, the same test
code runs on the reference implementation, and each recorded value is compared with the
reference's: read back with ``torch.load(weights_only=True)`` (plain tensors, numbers and
strings only: no code of the student's runs here), same shape, dtype and values within the
tolerance the check itself used.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import importlib
import io
import sys
import threading
from pathlib import Path
from typing import Any

import torch

PACKAGE = "course_reference"


def _reference_modules(reference: Path) -> None:
    """Make the ``course_reference`` package at ``reference`` (its parent folder) importable."""
    root = str(Path(reference).resolve())
    if root not in sys.path:
        sys.path.insert(0, root)


_RUNNING = threading.Lock()  # one reference run at a time: they share checks.RECORD and torch's RNG


@functools.lru_cache(maxsize=256)
def expected_record(reference: str, notebook: str, source: str) -> tuple[tuple[str, Any, Any], ...] | str:
    """What the test cell ``source`` of ``notebook`` records when it runs on the reference.

    Returns the record, or a string saying why the test could not run on the reference
    (a grader bug; the caller keeps the kernel's verdict then).
    """
    with _RUNNING:
        return _run_on_reference(reference, notebook, source)


def warm(reference: Path, notebook: str, sources: list[str]) -> None:
    """Run the test cells ``sources`` of ``notebook`` on the reference now (in a thread, while the
    kernel runs the notebook), so that :func:`compare` finds their records computed."""
    for source in sources:
        expected_record(str(Path(reference).resolve()), notebook, source)


def _run_on_reference(reference: str, notebook: str, source: str) -> tuple[tuple[str, Any, Any], ...] | str:
    _reference_modules(Path(reference))
    checks = importlib.import_module(f"{PACKAGE}.checks")
    number = notebook.split("_", 1)[0]
    modules = [p.stem for p in (Path(reference) / PACKAGE).glob(f"nb{number}_*.py")]
    if len(modules) != 1:
        return f"no reference module for notebook {notebook}"
    ns: dict[str, Any] = {"__name__": "__main__"}
    # The notebook's own reference, over what its course_blocks.py gives it (earlier notebooks' reference).
    earlier = sorted(p.stem for p in (Path(reference) / PACKAGE).glob("nb[0-9][0-9]_*.py") if p.stem[2:4] < number)
    for module in [*earlier, modules[0]]:
        ns.update({k: v for k, v in vars(importlib.import_module(f"{PACKAGE}.{module}")).items()
                   if not k.startswith("__")})
    recorded: list = []
    checks.RECORD = recorded
    state = torch.random.get_rng_state()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, f"<reference run of {notebook}>", "exec"), ns)
    except Exception as exc:  # noqa: BLE001 (any failure of the reference run is reported, not raised)
        return f"{type(exc).__name__}: {exc}"
    finally:
        checks.RECORD = None
        torch.random.set_rng_state(state)
    return tuple(recorded)


def _load(payload: str) -> list | str:
    if not payload:
        return []
    try:
        data = torch.load(io.BytesIO(base64.b64decode(payload, validate=True)), weights_only=True)
    except Exception as exc:  # noqa: BLE001 (whatever the kernel sent, it is a mismatch)
        return f"its record could not be read as plain tensors ({type(exc).__name__})"
    return data if isinstance(data, list) else "its record is not a list"


def _same(got: Any, want: Any, tol: dict[str, float] | None) -> str:
    """'' if ``got`` matches ``want``, else how it differs (no values, only sizes)."""
    if isinstance(want, torch.Tensor):
        if type(got) is not torch.Tensor:
            return f"a {type(got).__name__} where a tensor was expected"
        if got.shape != want.shape or got.dtype != want.dtype:
            return f"shape/dtype {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}"
        if tol is None:
            return "" if torch.equal(got, want) else "values differ"
        # The checks' own comparison rule (course_reference is importable once expected_record has run).
        if bool(importlib.import_module(f"{PACKAGE}.checks").within(got, want, tol).all()):
            return ""
        return f"max abs error {(got.double() - want.double()).abs().max().item():.3g}"
    if type(got) is not type(want):
        return f"a {type(got).__name__} where a {type(want).__name__} was expected"
    if isinstance(want, float) and tol is not None:
        close = abs(got - want) <= tol.get("atol", 0.0) + tol.get("rtol", 0.0) * abs(want)
        return "" if close else f"abs error {abs(got - want):.3g}"
    return "" if got == want else "values differ"


def compare(reference: Path, notebook: str, source: str, payload: str) -> str:
    """'' when the kernel's record of test cell ``source`` matches the reference's, else a
    one-line reason for the student's feedback."""
    want = expected_record(str(Path(reference).resolve()), notebook, source)
    if isinstance(want, str):
        return ""  # a grader bug, not the student's: tests/test_verify.py runs every hidden test
    got = _load(payload)
    if isinstance(got, str):
        return got
    if len(got) != len(want):
        return f"it recorded {len(got)} checked values, the reference run {len(want)}"
    for entry, (what, value, tol) in zip(got, want, strict=True):
        if not isinstance(entry, tuple | list) or len(entry) != 3 or entry[0] != what:
            return f"its checked values are not those of the test (expected {what!r} here)"
        differs = _same(entry[1], value, tol)
        if differs:
            return f"{what}: {differs}"
    return ""
