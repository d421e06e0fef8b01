"""nbgrader's cell-metadata check with its schema checked once per process, not once per cell.

nbgrader validates every graded cell's ``nbgrader`` metadata in each of its steps (generate, autograde,
feedback) through ``jsonschema.validate``, which first checks the schema itself against jsonschema's
meta-schema. The schema is a constant file of nbgrader's, so that check, repeated some 110 times per notebook,
was most of each call's time (docs/benchmarks.md has the figures).
:func:`validate` does what ``jsonschema.validate`` does (the same validator class, the same
``best_match`` error) with the schema checked the first time it is seen; :func:`install` puts it in
nbgrader's place. tests/test_cell_schema.py compares the two on generated metadata.
"""

from __future__ import annotations

import types
from typing import Any

from jsonschema import exceptions, validators
from nbgrader.nbgraderformat import common

_checked: dict[int, tuple[dict, Any]] = {}  # id(schema) -> (the schema, kept alive; its validator)


def validate(instance: Any, schema: dict) -> None:
    """``jsonschema.validate(instance, schema)``, the schema checked once.

    Raises:
        jsonschema.exceptions.SchemaError: the schema is not a valid schema (the first time it is seen).
        jsonschema.exceptions.ValidationError: ``instance`` does not follow it (its best-matching error).
    """
    entry = _checked.get(id(schema))
    if entry is None or entry[0] is not schema:
        cls = validators.validator_for(schema)
        cls.check_schema(schema)
        entry = _checked[id(schema)] = (schema, cls(schema))
    error = exceptions.best_match(entry[1].iter_errors(instance))
    if error is not None:
        raise error


def install() -> None:
    """nbgrader's metadata validators call :func:`validate` (they reach it as ``jsonschema.validate``)."""
    common.jsonschema = types.SimpleNamespace(validate=validate)
