"""The test marks kept by name in tests/conftest.py name tests that exist: a renamed test would drop out of
them silently (out of `heavy`, which `make test-fast` leaves out, or out of the group of tests that load the
machine); and the groups the two pytest processes share out come longest first."""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import FIRST, HEAVY_MODULES, HEAVY_TESTS, _order

TESTS = Path(__file__).resolve().parent


def _functions(module: str) -> set[str]:
    tree = ast.parse((TESTS / module).read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_module_named_heavy_exists():
    assert not [module for module in HEAVY_MODULES if not (TESTS / module).is_file()]


def test_every_test_named_in_the_marks_exists():
    missing = []
    for name in HEAVY_TESTS:  # LOAD_TESTS among them
        module, function = name.split("::")
        if not (TESTS / module).is_file() or function.split("[")[0] not in _functions(module):
            missing.append(name)
    assert not missing, f"tests/conftest.py names tests that do not exist: {sorted(missing)}"


class _Item:
    def __init__(self, nodeid: str, heavy: bool):
        self.nodeid, self.heavy = nodeid, heavy

    def get_closest_marker(self, name: str):
        return name == "heavy" and self.heavy or None


def test_groups_come_first_named_then_by_their_heavy_tests_then_in_the_files_order():
    items = [_Item("tests/test_a.py::light", False),
             _Item("tests/test_b.py::one", True), _Item("tests/test_b.py::light", False),
             _Item("tests/test_c.py::one", True), _Item("tests/test_c.py::two", True),
             _Item("tests/test_d.py::one", True),
             _Item("tests/test_e.py::light", False),
             *(_Item(f"tests/test_f.py::{group}", False) for group in reversed(FIRST))]
    groups = {item.nodeid: item.nodeid.split("::")[0] for item in items}
    groups.update({f"tests/test_f.py::{group}": group for group in FIRST})
    place = _order(items, groups)
    assert sorted(place, key=place.get) == [*FIRST, "tests/test_c.py", "tests/test_b.py", "tests/test_d.py",
                                             "tests/test_a.py", "tests/test_e.py"]
