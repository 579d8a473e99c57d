"""Folding repeated named types so several interval/numeric columns fit one record schema."""

from __future__ import annotations

import fastavro
import pytest

from bridge.errors import SchemaError
from bridge.schema import INTERVAL_SCHEMA, VARIABLE_DECIMAL_SCHEMA, fold_named_types


def _row(*types: object) -> dict[str, object]:
    fields = [{"name": f"c{i}", "type": ["null", t]} for i, t in enumerate(types)]
    return {"type": "record", "name": "Row", "namespace": "app", "fields": fields}


def test_repeats_become_references_and_parse() -> None:
    interval_array = {"type": "array", "items": ["null", INTERVAL_SCHEMA]}
    folded = fold_named_types(
        _row(
            INTERVAL_SCHEMA,
            interval_array,
            VARIABLE_DECIMAL_SCHEMA,
            {"type": "map", "values": INTERVAL_SCHEMA},
        )
    )
    assert folded["fields"][0]["type"][1] == INTERVAL_SCHEMA
    assert folded["fields"][1]["type"][1]["items"] == ["null", "bridge.pg.Interval"]
    assert folded["fields"][3]["type"][1]["values"] == "bridge.pg.Interval"
    fastavro.parse_schema(folded)
    with pytest.raises(fastavro.schema.SchemaParseException):
        fastavro.parse_schema(_row(INTERVAL_SCHEMA, INTERVAL_SCHEMA))


def test_conflicting_definitions_are_a_schema_error() -> None:
    other = {**INTERVAL_SCHEMA, "fields": [{"name": "x", "type": "int"}]}
    with pytest.raises(SchemaError, match=r"bridge\.pg\.Interval"):
        fold_named_types(_row(INTERVAL_SCHEMA, other))


def test_names_resolve_against_enclosing_namespace() -> None:
    inner = {"type": "fixed", "name": "F", "size": 2}
    folded = fold_named_types(_row(inner, inner, {"type": "enum", "name": "x.E", "symbols": ["A"]}))
    assert folded["fields"][1]["type"][1] == "app.F"
    fastavro.parse_schema(folded)
