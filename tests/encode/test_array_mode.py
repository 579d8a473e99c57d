"""avro.array_mode (pure unit tests). portable, the default: numeric(p,s) elements as their
exact text and arrays of two or more dimensions as PostgreSQL's text of the array, the
forms Debezium's JDBC sink (3.3) can bind (createArrayOf("decimal(5,2)") and
createArrayOf("integer[]") name no server type); typed: decimal elements, nested arrays.
The consumer matrix (tests/consumers) proves the sink applies the portable forms."""

from __future__ import annotations

import struct
from decimal import Decimal

import pytest

from bridge.encode.columns import column_codec
from bridge.errors import ConfigError
from bridge.schema import CodecOptions, StaticCatalog

CATALOG = StaticCatalog()
TYPED = CodecOptions(array_mode="typed")
NUMERIC_5_2 = ((5 << 16) | 2) + 4
_NUMERIC, _INT4_ARRAY, _TSTZ_ARRAY, _BYTEA_ARRAY = 1231, 1007, 1185, 1001


def _int4_grid(rows: list[list[int | None]], lower: int = 1) -> bytes:
    """array_send of a 2-D int4 array."""
    out = struct.pack(">iiI", 2, 1, 23) + struct.pack(">iiii", len(rows), lower, len(rows[0]), 1)
    for item in (x for row in rows for x in row):
        out += struct.pack(">i", -1) if item is None else struct.pack(">ii", 4, item)
    return out


def _numeric(unscaled_digits: tuple[int, ...], weight: int, dscale: int) -> bytes:
    head = struct.pack(">hhHh", len(unscaled_digits), weight, 0, dscale)
    return head + b"".join(struct.pack(">h", d) for d in unscaled_digits)


def test_numeric_elements_are_their_text_by_default() -> None:
    codec = column_codec(_NUMERIC, NUMERIC_5_2, CATALOG)
    assert codec.avro_schema == {
        "type": "array",
        "items": ["null", {"type": "string", "pg.type": "numeric"}],
        "pg.type": "_numeric",
    }
    assert codec.from_text(b"{1.50,NaN,NULL}") == ["1.50", "NaN", None]
    nan = struct.pack(">hhHh", 0, 0, 0xC000, 0)
    binary = struct.pack(">iiIii", 1, 1, 1700, 3, 1)
    for item in (_numeric((1, 5000), 0, 2), nan, None):
        binary += struct.pack(">i", -1) if item is None else struct.pack(">i", len(item)) + item
    assert codec.from_binary(binary) == ["1.50", "NaN", None]


def test_typed_keeps_decimal_elements() -> None:
    codec = column_codec(_NUMERIC, NUMERIC_5_2, CATALOG, TYPED)
    items = codec.avro_schema["items"][1]
    assert (items["logicalType"], items["precision"], items["scale"]) == ("decimal", 5, 2)
    assert codec.from_text(b"{1.50,NULL}") == [Decimal("1.50"), None]


def test_multidimensional_arrays_are_postgresql_text_by_default() -> None:
    codec = column_codec(_INT4_ARRAY, -1, CATALOG, ndims=2)
    assert codec.avro_schema == {"type": "string", "pg.type": "_int4"}
    assert codec.from_text(b"{{1,2},{3,NULL}}") == "{{1,2},{3,NULL}}"
    assert codec.from_binary(_int4_grid([[1, 2], [3, None]])) == "{{1,2},{3,NULL}}"
    # The value's own shape and lower bounds, whatever the column declares.
    assert codec.from_text(b"[0:1][1:1]={{7},{8}}") == "[0:1][1:1]={{7},{8}}"
    assert codec.from_binary(_int4_grid([[7], [8]], lower=0)) == "[0:1][1:1]={{7},{8}}"
    typed = column_codec(_INT4_ARRAY, -1, CATALOG, TYPED, ndims=2)
    assert typed.from_text(b"{{1,2},{3,NULL}}") == [[1, 2], [3, None]]


def test_session_dependent_elements_print_as_from_binary() -> None:
    """timestamptz elements in UTC and bytea in hex, whatever the walsender's TimeZone and
    bytea_output, as the binary renderers print them."""
    tstz = column_codec(_TSTZ_ARRAY, -1, CATALOG, ndims=2)
    assert tstz.from_text(b'{{"2020-01-01 01:00:00+01",NULL},{infinity,-infinity}}') == (
        '{{"2020-01-01 00:00:00+00",NULL},{infinity,-infinity}}'
    )
    bytea = column_codec(_BYTEA_ARRAY, -1, CATALOG, ndims=2)
    assert bytea.from_text(b'{{"\\\\001abc",""}}') == '{{"\\\\x01616263","\\\\x"}}'
    assert bytea.from_text(b'{{"\\\\x01616263"}}') == '{{"\\\\x01616263"}}'


def test_unknown_array_mode_is_refused() -> None:
    with pytest.raises(ConfigError):
        CodecOptions(array_mode="nested")
