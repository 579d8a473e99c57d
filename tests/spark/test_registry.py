"""bridge.spark.registry: schema look-ups and the envelope's row columns."""

from __future__ import annotations

import json
import socket

import pytest

from bridge.decode.messages import Column, Relation
from bridge.errors import SchemaError
from bridge.schema import DEFAULT_OPTIONS, StaticCatalog
from bridge.schema.table import ColumnDetails, TableCodec, TableDetails
from bridge.spark.registry import SchemaSource, row_fields


def _codec() -> TableCodec:
    relation = Relation(
        None, 1, "public", "t", "d", (Column(1, "id", 23, -1), Column(0, "x y", 25, -1))
    )
    details = TableDetails(("id",), {"id": ColumnDetails(1), "x y": ColumnDetails(1)})
    return TableCodec(relation, StaticCatalog(), details, DEFAULT_OPTIONS, "srv")


def test_row_fields_of_envelope_and_key() -> None:
    codec = _codec()
    assert row_fields(json.dumps(codec.envelope_schema)) == ["id", "x_y"]
    assert codec.key_schema is not None
    assert row_fields(json.dumps(codec.key_schema)) == ["id"]


@pytest.mark.parametrize("text", ["[1]", "not json", '{"type": "string"}'])
def test_row_fields_rejects_non_records(text: str) -> None:
    with pytest.raises(SchemaError, match="not an Avro record"):
        row_fields(text)


def test_unreachable_registry_is_a_schema_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connections are refused
        source = SchemaSource(f"http://127.0.0.1:{port}", timeout=5)
        with pytest.raises(SchemaError, match="unreachable"):
            source.writer(1)
        source.close()


def test_unknown_subject_and_id(registry_url: str) -> None:
    source = SchemaSource(registry_url)
    try:
        assert source.latest("no-such-subject-value") is None
        with pytest.raises(SchemaError, match="schema id 987654321 is not in the registry"):
            source.writer(987654321)
    finally:
        source.close()
