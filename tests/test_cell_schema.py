"""nbgrader's cell-metadata check, its schema checked once (grading/notebook/cell_schema.py): the same
verdicts and errors as ``jsonschema.validate``, on metadata drawn from nbgrader's own schema and beside it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nbgrader.nbgraderformat import MetadataValidator, ValidationError, common

from transformer_course.grading.notebook import cell_schema

SCHEMA = json.loads((Path(common.__file__).parent / f"v{MetadataValidator.schema_version}.json").read_text())
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False), st.text(max_size=4),
                   st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))
METADATA = st.dictionaries(st.sampled_from([*SCHEMA["properties"], "extra"]), VALUES, max_size=8)


def _outcome(check, instance, schema):
    try:
        check(instance, schema)
    except jsonschema.exceptions.ValidationError as error:
        return type(error), error.message, list(error.absolute_path), list(error.schema_path)
    return None


@given(METADATA)
def test_the_verdicts_and_errors_are_jsonschemas(metadata):
    assert _outcome(cell_schema.validate, metadata, SCHEMA) == _outcome(jsonschema.validate, metadata, SCHEMA)


def test_nbgrader_uses_it_and_still_refuses_bad_metadata():
    import transformer_course.grading.notebook.nbgrader_setup  # noqa: F401 (installs it)

    assert common.jsonschema.validate is cell_schema.validate
    cell = {"cell_type": "code", "metadata": {"nbgrader": {"schema_version": MetadataValidator.schema_version,
                                                           "grade": True, "solution": False, "locked": True,
                                                           "grade_id": "test_x", "points": "many"}}}
    from nbformat import from_dict

    with pytest.raises(ValidationError, match="many"):
        MetadataValidator().validate_cell(from_dict(cell))


def test_a_schema_that_is_not_one_is_refused_and_an_equal_copy_is_checked_on_its_own():
    with pytest.raises(jsonschema.exceptions.SchemaError):
        cell_schema.validate({}, {"type": 12})
    other = copy.deepcopy(SCHEMA)
    other["properties"]["points"] = {"type": "string"}
    cell = {"schema_version": 3, "grade": True, "solution": False, "locked": True, "grade_id": "x", "points": 1}
    mine, theirs = _outcome(cell_schema.validate, cell, other), _outcome(cell_schema.validate, cell, SCHEMA)
    assert mine == _outcome(jsonschema.validate, cell, other) and "string" in mine[1]
    assert theirs == _outcome(jsonschema.validate, cell, SCHEMA) is None
