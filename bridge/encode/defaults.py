"""A column's missing value (pg_attribute.attmissingval) → its Avro field's JSON default.

`ALTER TABLE t ADD COLUMN w text DEFAULT 'dflt'` does not rewrite the table: PostgreSQL keeps
'dflt' in the catalog and returns it for every row written before the ALTER. Those rows' records
in Kafka lack the field, so Avro schema resolution gives a consumer reading them with the newer
schema the field's default; making that default the missing value makes it read what
PostgreSQL reads.

The value is encoded by the table version's own `RowPlan` (the one per-row path, so a default
is exactly what a record carrying that value would hold) and read back without logical types,
which is the form Avro's JSON defaults take (a date as its day number, a decimal as its bytes).
A value that has no JSON default form is left out (the field then defaults to null, as before):
NaN and infinite floats (JSON has no such numbers), a NaN numeric (written as null anyway), and
values whose type nests a union (arrays with nullable elements, ranges, hstore): Avro reads a
nested union's default through its first branch, null, so no non-null element could be written.
"""

from __future__ import annotations

import copy
import io
import math
from collections.abc import Mapping
from typing import Any

import fastavro

from bridge.decode.messages import KIND_NULL, KIND_TEXT, Relation
from bridge.encode.plan import RowPlan
from bridge.schema.table import TableCodec, TableDetails


def without_key(relation: Relation, details: TableDetails) -> tuple[Relation, TableDetails]:
    """The relation and details of a table version without a record key: the version that
    `missing_defaults` encodes each value with, every other column NULL."""
    columns = tuple(c._replace(flags=0) for c in relation.columns)
    return relation._replace(replica_identity="n", columns=columns), details._replace(
        primary_key=()
    )


def missing_defaults(table: TableCodec, missing: Mapping[str, str]) -> dict[str, Any]:
    """PostgreSQL column name -> Avro JSON default, for the kept columns in `missing` (column
    name -> the missing value's text) whose value has a JSON default form. `table` is the
    version built from `without_key`'s relation and details (a NULL key column is refused)."""
    relation = table.relation
    wanted = [
        (pos, index)
        for pos, index in enumerate(table.kept)
        if relation.columns[index].name in missing
        and not _nests_union(table.types[pos].avro_schema)
    ]
    if not wanted:
        return {}
    row_schema = fastavro.parse_schema(_plain(table.envelope_schema["fields"][0]["type"][1]))
    plan = RowPlan(table)
    width = len(relation.columns)
    out: dict[str, Any] = {}
    for pos, index in wanted:
        name = relation.columns[index].name
        kinds = bytearray([KIND_NULL] * width)
        kinds[index] = KIND_TEXT
        values: list[bytes | None] = [None] * width
        values[index] = missing[name].encode()
        _, body = plan.write(bytes(kinds), tuple(values))
        row = fastavro.schemaless_reader(io.BytesIO(body), row_schema, None)
        assert isinstance(row, dict)
        value = _json_default(row[table.field_names[pos]])
        if value is not None:
            out[name] = value
    return out


def _json_default(value: Any) -> Any:
    """Avro's JSON form of a datum read without logical types; None when it has none."""
    if isinstance(value, bytes):
        return value.decode("latin-1")  # Avro: bytes as a string of code points 0-255
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        fields = {k: _json_default(v) for k, v in value.items()}
        return None if any(v is None for v in fields.values()) else fields
    if isinstance(value, list):
        items = [_json_default(v) for v in value]
        return None if any(v is None for v in items) else items
    return value


def _nests_union(schema: Any) -> bool:
    if isinstance(schema, list):
        return True
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "record":
            return any(_nests_union(f["type"]) for f in schema["fields"])
        if kind == "array":
            return _nests_union(schema["items"])
        if kind == "map":
            return _nests_union(schema["values"])
        return _nests_union(kind) if isinstance(kind, (dict, list)) else False
    return False


def _plain(schema: Any) -> Any:
    """`schema` without logical types: fastavro then returns the encoded form of each value."""
    out = copy.deepcopy(schema)

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("logicalType", None)
            for child in node.values():
                strip(child)
        elif isinstance(node, list):
            for child in node:
                strip(child)

    strip(out)
    return out
