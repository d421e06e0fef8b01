"""An answer cell checked in-process, as its notebook would run it (no kernel, no sandbox): fast, for
tests/test_checks.py and ``python -m quality.catalogue``. The real grading path is :mod:`quality.fairness`."""

from __future__ import annotations

import importlib
import math
import sys
import types

import torch
import torch.nn.functional as F
from torch import nn

from quality.catalogue import ANSWERS, CHECKS, ROOT, Variant

_REFERENCE = str(ROOT / "autograder" / "reference")
if _REFERENCE not in sys.path:
    sys.path.insert(0, _REFERENCE)


def namespace(code: str) -> dict:
    """A notebook-like namespace: the imports of the notebook, then the answer cell."""
    ns = {"torch": torch, "math": math, "F": F, "nn": nn}
    # What the notebooks import from course_blocks, and earlier exercises of the same notebook.
    for module in ("nb02_scaled_dot_product", "nb03_multi_head", "nb04_masking", "nb05_positional_encoding",
                   "nb06_transformer", "nb07_training", "nb08_modern_decoder"):
        ref = importlib.import_module(f"course_reference.{module}")
        ns.update({k: v for k, v in vars(ref).items() if not k.startswith("_") and callable(v)})
    # An answer cell may import more of the earlier blocks itself, as students do.
    blocks = types.ModuleType("course_blocks")
    vars(blocks).update({k: v for k, v in ns.items() if callable(v)})
    saved = sys.modules.get("course_blocks")
    sys.modules["course_blocks"] = blocks
    try:
        exec(compile(code, "<answer cell>", "exec"), ns)
    finally:
        if saved is None:
            sys.modules.pop("course_blocks", None)
        else:
            sys.modules["course_blocks"] = saved
    return ns


def run_checks(exercise: str, ns: dict) -> None:
    """The exercise's hidden checks on ``ns``; raises AssertionError with the feedback where one fails."""
    module, names = CHECKS[exercise]
    checks = importlib.import_module(f"course_reference.checks.{module}")
    for name in names:
        getattr(checks, name)(ns)


def student_cells(exercise: str, student: str) -> str:
    """A student's answer to ``exercise`` after their earlier answers, as in their notebook."""
    earlier = [by[student] for by in ANSWERS.values() if student in by]
    return "\n\n".join(earlier[:list(ANSWERS).index(exercise) + 1])


def outcome(variant: Variant) -> tuple[bool, str]:
    """Whether the checks judge ``variant`` as its kind says (correct and students' answers pass, a
    mistake fails with its feedback words), and what they said."""
    code = student_cells(variant.exercise, variant.name) if variant.kind == "student" else variant.code
    if variant.exercise not in CHECKS:
        return True, "no hidden checks for this exercise"
    try:
        run_checks(variant.exercise, namespace(code))
    except AssertionError as e:
        if variant.kind == "mistake":
            return variant.words in str(e), str(e)
        return False, str(e)
    return variant.kind != "mistake", "passed"
