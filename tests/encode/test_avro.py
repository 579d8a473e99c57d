"""fastwriter writes exactly fastavro's bytes for the schemas TableCodec builds (hypothesis)."""

from __future__ import annotations

import io
from decimal import Decimal
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.decode.messages import Column, Relation
from bridge.encode.avro import compile_writer, write_long
from bridge.errors import SchemaError
from bridge.schema import CodecOptions, StaticCatalog
from bridge.schema.catalog import PgType
from bridge.schema.table import ColumnDetails, TableCodec, TableDetails

HSTORE = PgType(90001, "hstore", "public")
NUMERIC_9_3 = ((9 << 16) | 3) + 4
# (name, type oid, typmod, ndims): every Avro shape the type mapping produces
COLUMNS = [
    ("id", 23, -1, 1), ("i2", 21, -1, 1), ("i8", 20, -1, 1), ("f4", 700, -1, 1),
    ("f8", 701, -1, 1), ("dec", 1700, NUMERIC_9_3, 1), ("num", 1700, -1, 1),
    ("money", 790, -1, 1), ("txt", 25, -1, 1), ("raw", 17, -1, 1), ("ref", 2950, -1, 1),
    ("ok", 16, -1, 1), ("day", 1082, -1, 1), ("at", 1083, -1, 1), ("ts", 1114, -1, 1),
    ("tstz", 1184, -1, 1), ("span", 1186, -1, 1), ("spans", 1187, -1, 1),
    ("tags", 90001, -1, 1), ("grid", 1009, -1, 2), ("decs", 1231, NUMERIC_9_3, 1),
    ("nums", 1231, -1, 1),
]  # fmt: skip
RELATION = Relation(
    None, 1, "public", "wide", "d", tuple(Column(0, n, oid, tm) for n, oid, tm, _ in COLUMNS)
)
DETAILS = TableDetails(("id", "dec"), {n: ColumnDetails(d) for n, _, _, d in COLUMNS})
TABLES = {
    "default": TableCodec(RELATION, StaticCatalog([HSTORE]), DETAILS, CodecOptions(), "srv"),
    "typed-arrays": TableCodec(  # nested arrays, decimal elements
        RELATION, StaticCatalog([HSTORE]), DETAILS, CodecOptions(array_mode="typed"), "srv"
    ),
    "variable-iso": TableCodec(
        RELATION,
        StaticCatalog([HSTORE]),
        DETAILS,
        CodecOptions(timestamptz_mode="iso", numeric_mode="variable"),
        "srv",
    ),
}
_PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "int": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(width=32),
    "double": st.floats(),
    "bytes": st.binary(max_size=12),
    "string": st.text(max_size=12),
}


def _decimals(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    bound = 10**precision - 1
    return st.integers(-bound, bound).map(lambda unscaled: Decimal(unscaled).scaleb(-scale))


def values_for(schema: Any, named: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """Data fitting a parsed schema; named record branches sometimes in (name, value) form."""
    if isinstance(schema, str):
        return _PRIMITIVES[schema] if schema in _PRIMITIVES else named[schema]
    if isinstance(schema, list):
        inner = values_for(schema[1], named)
        name = schema[1] if isinstance(schema[1], str) else schema[1].get("name")
        if name in named:
            inner = inner | inner.map(lambda v: (name, v))
        return st.none() | inner
    kind = schema["type"]
    if kind == "record":
        fields = {f["name"]: values_for(f["type"], named) for f in schema["fields"]}
        named[schema["name"]] = st.fixed_dictionaries(fields)
        return named[schema["name"]]
    if kind == "array":
        return st.lists(values_for(schema["items"], named), max_size=3)
    if kind == "map":
        return st.dictionaries(st.text(max_size=4), values_for(schema["values"], named), max_size=3)
    if schema.get("logicalType") == "decimal":
        return _decimals(schema["precision"], schema["scale"])
    if schema.get("logicalType") == "uuid":
        return st.uuids().map(str)
    return values_for(kind, named)


def fastavro_bytes(schema: Any, datum: Any) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, schema, datum)
    return buf.getvalue()


@pytest.mark.parametrize("mode", TABLES)
@pytest.mark.parametrize("part", ["envelope_schema", "key_schema"])
def test_same_bytes_as_fastavro(mode: str, part: str) -> None:
    schema = getattr(TABLES[mode], part)
    parsed = parse_schema(schema)
    write = compile_writer(schema)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(values_for(parsed, {}))
    def check(datum: Any) -> None:
        assert write(datum) == fastavro_bytes(parsed, datum)

    check()


@pytest.mark.parametrize(
    ("value", "precision"),
    [(Decimal("-1.28"), 3), (Decimal("1.27"), 3), (Decimal("-0.00"), 3), (Decimal("5E+2"), 5)],
)
def test_decimal_sizes_and_exponents_match(value: Decimal, precision: int) -> None:
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": 2}
    schema = {"type": "record", "name": "R", "fields": [{"name": "v", "type": decimal}]}
    parsed = parse_schema(schema)
    assert compile_writer(schema)({"v": value}) == fastavro_bytes(parsed, {"v": value})


def test_out_of_range_and_unsupported() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "v", "type": "int"}]}
    with pytest.raises(ValueError, match="does not fit an Avro int"):
        compile_writer(schema)({"v": 2**31})
    union = {"type": "record", "name": "U", "fields": [{"name": "v", "type": ["int", "string"]}]}
    with pytest.raises(SchemaError, match=r"only \[null, T\] and \[T, null\] unions"):
        compile_writer(union)


@pytest.mark.parametrize("value", [None, "false", "last"])
def test_null_second_union_matches_fastavro(value: str | None) -> None:
    """Debezium's source.snapshot is ["string", "null"]: the null branch is index 1."""
    schema = {"type": "record", "name": "R", "fields": [{"name": "v", "type": ["string", "null"]}]}
    parsed = parse_schema(schema)
    assert compile_writer(schema)({"v": value}) == fastavro_bytes(parsed, {"v": value})


_EDGES = [0, 63, 64, 2**55, 2**62, 2**63 - 1]  # varint length steps and write_long's paths


@given(
    st.one_of(
        st.sampled_from([s * e + d for e in _EDGES for s in (1, -1) for d in (-1, 0, 1)]),
        st.integers(-(2**63), 2**63 - 1),
    )
)
def test_long_matches_fastavro_at_every_length(value: int) -> None:
    if not -(2**63) <= value < 2**63:
        with pytest.raises(ValueError, match="does not fit an Avro long"):
            write_long(bytearray(), value)
        return
    out = bytearray()
    write_long(out, value)
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema("long"), value)
    assert bytes(out) == buf.getvalue()
