"""PostgreSQL column type -> Avro schema fragment and the wire shape of its values.

`column_type()` is called once per column of each relation version. Each type declares
here, once, how its values travel (`Wire`); `bridge.encode.columns` turns a wire shape
into text and binary converters, and the encoder dispatches on it. This module is pure
mapping: it imports nothing above `bridge.schema`. Schemas are the non-null type; the
caller wraps them in ["null", T]. Every fragment records the PostgreSQL type in a
"pg.type" property (except the shared named records, which must stay identical).

Mapping (value = what the converters of `bridge.encode.columns` return):

  bool                      boolean                         bool
  int2, int4                int                             int
  int8, oid, xid, cid, xid8 long                            int
  float4 / float8           float / double                  float (float4 rounded to single)
  numeric(p,s)              bytes decimal(p', s')           Decimal with scale s; NaN -> None
  numeric (no typmod)       numeric_mode "string" (default): PostgreSQL text, "NaN",
                            "Infinity" kept | "double": float (nan/inf kept) |
                            "variable": record bridge.pg.VariableScaleDecimal
                            {scale:int, value:bytes (unscaled two's complement)}; NaN/inf -> None
  money                     bytes decimal(19, 2)            Decimal, scale 2
  text, varchar, bpchar, name, citext, "char", enums, json, jsonb, xml, timetz,
  inet, cidr, macaddr(8), bit, varbit, tid, pg_lsn, geometric types, ranges,
  multiranges, composites and unknown types
                            string                          PostgreSQL's text output
  uuid                      string (logicalType uuid)       "xxxxxxxx-xxxx-..."
  bytea                     bytes                           bytes
  date                      int (logicalType date)          days since 1970-01-01
  time                      long (time-micros)              µs since midnight (<= 24:00:00)
  timestamp                 long (timestamp-micros)         µs since epoch, read as UTC
  timestamptz               timestamptz_mode "micros" (default): long timestamp-micros, UTC |
                            "iso": string "2020-01-01T12:00:00.5Z" (years outside 0-9999 as
                            -0043 / +10000)
  interval                  record bridge.pg.Interval {months:int, days:int, micros:long}
  hstore                    map of ["null", string]         dict
  T[]                       array of ["null", T], nested to the column's dimension count

Special values, identical from both wire formats:
- numeric NaN / ±Infinity: None in decimal and "variable" form (ColumnCodec.may_be_null
  tells the caller the field must be nullable even for NOT NULL columns).
- date ±infinity: int32 max / min; timestamp(tz) ±infinity: int64 max / min (as
  Debezium), "infinity"/"-infinity" in iso mode. Timestamps after 294247 AD do not fit
  an int64 of Unix µs and clamp to the same sentinels.
- interval ±infinity (PostgreSQL 17+): every field at its max / min.
- money: lc_monetary must have two fraction digits (the text form is read as cents).
- numeric(p,s) with s < 0 maps to decimal(p - s, 0); with s > p to decimal(s, s).
Array dimensions: see `bridge.encode.arrays`. timetz keeps PostgreSQL's text
("12:00:00+05:30", ISO 8601 time with offset). Unknown types have no binary decoder
(Wire.UNKNOWN): the caller must refuse binary mode for them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from bridge.errors import ConfigError
from bridge.schema.catalog import (
    KIND_ARRAY,
    KIND_BASE,
    KIND_DOMAIN,
    KIND_ENUM,
    KIND_MULTIRANGE,
    KIND_RANGE,
    PgType,
    TypeCatalog,
)

AvroSchema = dict[str, Any]

TIMESTAMPTZ_MODES: Final = ("micros", "iso")
NUMERIC_MODES: Final = ("string", "double", "variable")
_TIMESTAMPTZ_OID, _NUMERIC_OID = 1184, 1700

INTERVAL_SCHEMA: AvroSchema = {
    "type": "record",
    "name": "Interval",
    "namespace": "bridge.pg",
    "fields": [
        {"name": "months", "type": "int"},
        {"name": "days", "type": "int"},
        {"name": "micros", "type": "long"},
    ],
}
VARIABLE_DECIMAL_SCHEMA: AvroSchema = {
    "type": "record",
    "name": "VariableScaleDecimal",
    "namespace": "bridge.pg",
    "fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}],
}


class Wire(enum.Enum):
    """How a type's values travel in pgoutput's text and binary tuples, and so which
    converters read them: the one place a type says what its wire bytes are."""

    TEXT = enum.auto()  # text and binary forms are the UTF-8 text itself
    UNKNOWN = enum.auto()  # text only: no binary decoder
    NUMERIC_TEXT = enum.auto()  # numeric without typmod as numeric_out's text
    CHAR = enum.auto()
    TID = enum.auto()
    POINT = enum.auto()
    LSEG = enum.auto()
    PATH = enum.auto()
    BOX = enum.auto()
    POLYGON = enum.auto()
    LINE = enum.auto()
    CIRCLE = enum.auto()
    INET = enum.auto()
    MACADDR = enum.auto()
    MACADDR8 = enum.auto()
    TIMETZ = enum.auto()
    BIT = enum.auto()
    UUID = enum.auto()
    PG_LSN = enum.auto()
    JSONB = enum.auto()
    BOOL = enum.auto()
    BYTEA = enum.auto()
    INT2 = enum.auto()
    INT4 = enum.auto()
    INT8 = enum.auto()
    UINT4 = enum.auto()
    UINT8 = enum.auto()
    FLOAT4 = enum.auto()
    FLOAT8 = enum.auto()
    MONEY = enum.auto()
    DECIMAL = enum.auto()  # numeric(p, s)
    NUMERIC_DOUBLE = enum.auto()
    NUMERIC_VARIABLE = enum.auto()
    DATE = enum.auto()
    TIME = enum.auto()
    TIMESTAMP = enum.auto()
    TIMESTAMPTZ = enum.auto()
    TIMESTAMPTZ_ISO = enum.auto()
    INTERVAL = enum.auto()
    HSTORE = enum.auto()
    ARRAY = enum.auto()  # element: the element type
    RANGE = enum.auto()  # element: the bound subtype
    RANGE_UTC = enum.auto()  # timestamptz bounds, re-rendered in UTC
    MULTIRANGE = enum.auto()
    MULTIRANGE_UTC = enum.auto()


@dataclass(frozen=True)
class CodecOptions:
    timestamptz_mode: str = "micros"
    numeric_mode: str = "string"

    def __post_init__(self) -> None:
        if self.timestamptz_mode not in TIMESTAMPTZ_MODES:
            raise ConfigError(
                f"timestamptz_mode {self.timestamptz_mode!r} is not supported",
                hint=f"use one of {', '.join(TIMESTAMPTZ_MODES)}",
            )
        if self.numeric_mode not in NUMERIC_MODES:
            raise ConfigError(
                f"numeric_mode {self.numeric_mode!r} is not supported",
                hint=f"use one of {', '.join(NUMERIC_MODES)}",
            )


DEFAULT_OPTIONS: Final = CodecOptions()


class ColumnType(NamedTuple):
    """One column's Avro schema (the non-null type) and how its values travel."""

    avro_schema: AvroSchema
    pg_type_name: str
    wire: Wire
    may_be_null: bool = False  # a non-NULL datum can convert to None (NaN numeric)
    element: ColumnType | None = None  # arrays: the element; ranges: the bound subtype
    depth: int = 1  # arrays: nesting depth
    delim: str = ","  # arrays: the element type's delimiter


def _s(avro_type: str, **extra: Any) -> AvroSchema:
    return {"type": avro_type, **extra}


_STRING, _LONG = _s("string"), _s("long")
_MICRO_TIMESTAMP: Final = "io.debezium.time.MicroTimestamp"
_TEXT = (_STRING, Wire.TEXT)
_STATIC: dict[int, tuple[AvroSchema, Wire]] = {
    16: (_s("boolean"), Wire.BOOL),
    17: (_s("bytes"), Wire.BYTEA),
    18: (_STRING, Wire.CHAR),
    19: _TEXT,
    20: (_LONG, Wire.INT8),
    21: (_s("int"), Wire.INT2),
    23: (_s("int"), Wire.INT4),
    25: _TEXT,
    26: (_LONG, Wire.UINT4),
    27: (_STRING, Wire.TID),
    28: (_LONG, Wire.UINT4),
    29: (_LONG, Wire.UINT4),
    114: _TEXT,
    142: _TEXT,
    600: (_STRING, Wire.POINT),
    601: (_STRING, Wire.LSEG),
    602: (_STRING, Wire.PATH),
    603: (_STRING, Wire.BOX),
    604: (_STRING, Wire.POLYGON),
    628: (_STRING, Wire.LINE),
    650: (_STRING, Wire.INET),
    700: (_s("float"), Wire.FLOAT4),
    701: (_s("double"), Wire.FLOAT8),
    718: (_STRING, Wire.CIRCLE),
    774: (_STRING, Wire.MACADDR8),
    790: (_s("bytes", logicalType="decimal", precision=19, scale=2), Wire.MONEY),
    829: (_STRING, Wire.MACADDR),
    869: (_STRING, Wire.INET),
    1042: _TEXT,
    1043: _TEXT,
    1082: (_s("int", logicalType="date"), Wire.DATE),
    1083: (_s("long", logicalType="time-micros"), Wire.TIME),
    1114: (_s("long", logicalType="timestamp-micros"), Wire.TIMESTAMP),
    1186: (INTERVAL_SCHEMA, Wire.INTERVAL),
    1266: (_STRING, Wire.TIMETZ),
    1560: (_STRING, Wire.BIT),
    1562: (_STRING, Wire.BIT),
    2950: (_s("string", logicalType="uuid"), Wire.UUID),
    3220: (_STRING, Wire.PG_LSN),
    3802: (_STRING, Wire.JSONB),
    5069: (_LONG, Wire.UINT8),
}
_EXTENSIONS: dict[str, tuple[AvroSchema, Wire]] = {
    "citext": _TEXT,
    "hstore": (_s("map", values=["null", "string"]), Wire.HSTORE),
}


def column_type(
    type_oid: int,
    typmod: int,
    catalog: TypeCatalog,
    options: CodecOptions = DEFAULT_OPTIONS,
    ndims: int = 1,
) -> ColumnType:
    """Schema and wire shape of one column.

    typmod is pg_attribute.atttypmod (-1 if none); ndims is pg_attribute.attndims and
    only matters for arrays (nesting depth, at least 1). Raises SchemaError when a
    type OID cannot be described by `catalog`.
    """
    pg_type = catalog.lookup(type_oid)
    return _column_type(pg_type, typmod, catalog, options, max(ndims, 1))


def _column_type(
    t: PgType, typmod: int, catalog: TypeCatalog, options: CodecOptions, depth: int
) -> ColumnType:
    if t.kind == KIND_DOMAIN:
        base_typmod = t.base_typmod if t.base_typmod >= 0 else typmod
        inner = _column_type(catalog.lookup(t.base_oid), base_typmod, catalog, options, depth)
        schema = _annotate(inner.avro_schema, "pg.domain", t.qualified_name)
        return inner._replace(avro_schema=schema, pg_type_name=t.qualified_name)
    if t.kind == KIND_ARRAY:
        return _array_type(t, typmod, catalog, options, depth)
    if t.kind in (KIND_RANGE, KIND_MULTIRANGE):
        return _range_type(t, catalog)
    if t.kind == KIND_ENUM:
        return _typed(_s("string", **{"pg.enum.labels": list(t.enum_labels)}), t, Wire.TEXT)
    if t.oid == _NUMERIC_OID:
        return _numeric_type(t, typmod, options)
    if t.oid == _TIMESTAMPTZ_OID:
        if options.timestamptz_mode == "iso":
            return _typed(_STRING, t, Wire.TIMESTAMPTZ_ISO)
        # Debezium's name for int64 µs since the epoch: without it Connect-based consumers
        # (Debezium's JDBC sink via an Avro converter) see a plain int64 and the sink binds
        # a bigint to the timestamptz column. The value is UTC, the sink's default zone.
        schema = _s("long", logicalType="timestamp-micros", **{"connect.name": _MICRO_TIMESTAMP})
        return _typed(schema, t, Wire.TIMESTAMPTZ)
    spec = _STATIC.get(t.oid) if t.namespace == "pg_catalog" else None
    if spec is None and t.kind == KIND_BASE:
        spec = _EXTENSIONS.get(t.name)
    if spec is None:
        return _typed(_STRING, t, Wire.UNKNOWN)
    return _typed(spec[0], t, spec[1])


def _typed(schema: AvroSchema, t: PgType, wire: Wire) -> ColumnType:
    return ColumnType(_annotate(schema, "pg.type", t.qualified_name), t.qualified_name, wire)


def _annotate(schema: AvroSchema, key: str, value: str) -> AvroSchema:
    """Add a pg.* property; shared named records stay untouched so they can be folded."""
    return schema if "name" in schema else {**schema, key: value}


def _array_type(
    t: PgType, typmod: int, catalog: TypeCatalog, options: CodecOptions, depth: int
) -> ColumnType:
    elem_type = catalog.lookup(t.elem_oid)
    elem = _column_type(elem_type, typmod, catalog, options, 1)
    schema: AvroSchema = {"type": "array", "items": ["null", elem.avro_schema]}
    for _ in range(depth - 1):
        schema = {"type": "array", "items": schema}
    typed = _typed(schema, t, Wire.ARRAY)
    return typed._replace(element=elem, depth=depth, delim=elem_type.delim)


def _numeric_type(t: PgType, typmod: int, options: CodecOptions) -> ColumnType:
    if typmod >= 4:  # VARHDRSZ + (precision << 16 | scale)
        precision = ((typmod - 4) >> 16) & 0xFFFF
        scale = (((typmod - 4) & 0x7FF) ^ 1024) - 1024
        if scale < 0:  # multiples of 10^-scale: whole numbers with -scale more digits
            precision, scale = precision - scale, 0
        schema = _s("bytes", logicalType="decimal", precision=max(precision, scale), scale=scale)
        return _typed(schema, t, Wire.DECIMAL)._replace(may_be_null=True)
    if options.numeric_mode == "double":
        return _typed(_s("double"), t, Wire.NUMERIC_DOUBLE)
    if options.numeric_mode == "variable":
        return ColumnType(
            VARIABLE_DECIMAL_SCHEMA, t.qualified_name, Wire.NUMERIC_VARIABLE, may_be_null=True
        )
    return _typed(_STRING, t, Wire.NUMERIC_TEXT)


def _range_type(t: PgType, catalog: TypeCatalog) -> ColumnType:
    subtype = catalog.lookup(t.range_subtype)
    while subtype.kind == KIND_DOMAIN:
        subtype = catalog.lookup(subtype.base_oid)
    multi = t.kind == KIND_MULTIRANGE
    if subtype.oid == _TIMESTAMPTZ_OID:
        wire = Wire.MULTIRANGE_UTC if multi else Wire.RANGE_UTC
    else:
        wire = Wire.MULTIRANGE if multi else Wire.RANGE
    bound = _column_type(subtype, -1, catalog, DEFAULT_OPTIONS, 1)
    return _typed(_STRING, t, wire)._replace(element=bound)
