"""The test marks kept by name in tests/conftest.py name tests that exist: a renamed test would drop out of
them silently (out of `heavy`, which `make test-fast` leaves out, or out of its own group)."""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import HEAVY_MODULES, HEAVY_TESTS, OWN_GROUP

TESTS = Path(__file__).resolve().parent


def _functions(module: str) -> set[str]:
    tree = ast.parse((TESTS / module).read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_module_named_heavy_exists():
    assert not [module for module in HEAVY_MODULES if not (TESTS / module).is_file()]


def test_every_test_named_in_the_marks_exists():
    missing = []
    for name in HEAVY_TESTS | OWN_GROUP:
        module, function = name.split("::")
        if not (TESTS / module).is_file() or function.split("[")[0] not in _functions(module):
            missing.append(name)
    assert not missing, f"tests/conftest.py names tests that do not exist: {sorted(missing)}"


def test_a_test_in_its_own_group_is_a_heavy_one():
    assert not [name for name in OWN_GROUP if name not in HEAVY_TESTS and name.split("::")[0] not in HEAVY_MODULES]
