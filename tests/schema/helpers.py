"""Shared test helpers: raw wire fetches, exact value comparison, Avro round trips."""

from __future__ import annotations

import io
import json
import math
from decimal import Decimal
from typing import Any

import fastavro
import psycopg
from psycopg.pq import ExecStatus

from bridge.schema import fold_named_types

Conn = psycopg.Connection[tuple[Any, ...]]


def fetch_raw(
    conn: Conn, sql: str, params: list[str], binary: bool
) -> tuple[list[bytes | None], list[tuple[int, int]]]:
    """One row's raw wire values and (type OID, typmod) per column, as a client sees them."""
    result = conn.pgconn.exec_params(
        sql.encode(), [p.encode() for p in params], result_format=1 if binary else 0
    )
    if result.status != ExecStatus.TUPLES_OK:
        raise AssertionError(f"{sql}: {result.error_message.decode()}")
    values = [result.get_value(0, i) for i in range(result.nfields)]
    return values, [(result.ftype(i), result.fmod(i)) for i in range(result.nfields)]


def canon(value: Any) -> Any:
    """A form where == is exact: NaN equals NaN, -0.0 differs from 0.0, Decimal keeps its
    scale, True differs from 1."""
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else repr(value))
    if isinstance(value, Decimal):
        return ("decimal", str(value))
    if isinstance(value, list):
        return [canon(v) for v in value]
    if isinstance(value, dict):
        return {k: canon(v) for k, v in value.items()}
    return (type(value).__name__, value)


def _strip_logical(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_strip_logical(s) for s in schema]
    if isinstance(schema, dict):
        return {k: _strip_logical(v) for k, v in schema.items() if k != "logicalType"}
    return schema


def _wire(schema: Any, value: Any) -> Any:
    """What a reader without logical types returns for `value` written with `schema`."""
    if value is None:
        return None
    if isinstance(schema, list):
        return _wire(next(s for s in schema if s != "null"), value)
    if not isinstance(schema, dict):
        return value
    kind = schema["type"]
    if kind == "array":
        return [_wire(schema["items"], v) for v in value]
    if kind == "map":
        return {k: _wire(schema["values"], v) for k, v in value.items()}
    if kind == "record":
        return {f["name"]: _wire(f["type"], value[f["name"]]) for f in schema["fields"]}
    if schema.get("logicalType") == "decimal":
        sign, digits, exp = value.as_tuple()
        unscaled = int("".join(map(str, digits))) * 10 ** (exp + schema["scale"])
        unscaled = -unscaled if sign else unscaled
        return unscaled.to_bytes((abs(unscaled).bit_length() + 8) // 8, "big", signed=True)
    return value


_CHECKS: dict[str, AvroCheck] = {}


def avro_check(schema: Any) -> AvroCheck:
    """One parsed AvroCheck per distinct schema."""
    key = json.dumps(schema, sort_keys=True)
    if key not in _CHECKS:
        _CHECKS[key] = AvroCheck(schema)
    return _CHECKS[key]


class AvroCheck:
    """Writes a value as field "v" of a record with the codec's schema (fastavro applies
    its logical-type checks) and reads it back with logical types stripped."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        record = {"type": "record", "name": "Row", "fields": [{"name": "v", "type": schema}]}
        record = fold_named_types(record)
        self._writer = fastavro.parse_schema(record)
        self._reader = fastavro.parse_schema(_strip_logical(record))

    def assert_roundtrip(self, value: Any) -> None:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, self._writer, {"v": value})
        buf.seek(0)
        back: Any = fastavro.schemaless_reader(buf, self._reader)
        assert canon(back["v"]) == canon(_wire(self.schema, value))


def fetch_column(conn: Conn, sql: str, params: list[str], binary: bool) -> list[bytes]:
    """Column 0 of every row (no NULLs expected), raw as on the wire."""
    result = conn.pgconn.exec_params(
        sql.encode(), [p.encode() for p in params], result_format=1 if binary else 0
    )
    if result.status != ExecStatus.TUPLES_OK:
        raise AssertionError(f"{sql}: {result.error_message.decode()}")
    values = [result.get_value(i, 0) for i in range(result.ntuples)]
    assert all(v is not None for v in values)
    return [v for v in values if v is not None]


def text_array_literal(items: list[str]) -> str:
    """A text[] input literal with every element quoted."""
    quoted = ('"' + i.replace("\\", "\\\\").replace('"', '\\"') + '"' for i in items)
    return "{" + ",".join(quoted) + "}"
