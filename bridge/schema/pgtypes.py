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
                            (p' > 38: wide_decimal_mode "string" (default): the text |
                            "double" | "decimal"; decimal_mode double/string: all p)
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
  bytea                     bytes (binary_mode base64/hex: string)
  date                      int (logicalType date)          days since 1970-01-01
  time                      long (time-micros)              µs since midnight (<= 24:00:00)
                            (time_precision_mode connect/adaptive: int time-millis)
  timestamp                 long (local-timestamp-micros)   µs since epoch of the wall clock
                            (timestamp_mode "instant": timestamp-micros; connect/adaptive:
                            millis)
  timestamptz               timestamptz_mode "micros" (default): long timestamp-micros, UTC |
                            "iso": string "2020-01-01T12:00:00.5Z" (years outside 0-9999 as
                            -0043 / +10000)
  interval                  string, Debezium's ISO 8601 "P1Y2M3DT4H5M6.78S" (interval_mode
                            "record": bridge.pg.Interval {months:int, days:int, micros:long} |
                            "numeric": MicroDuration µs)
  hstore                    map of ["null", string]         dict (hstore_mode json: string)
Temporal, decimal, uuid, json, enum and interval schemas carry Debezium's connect.name
(and connect.version / connect.parameters) beside the Avro logical type.
  T[]                       array of ["null", T], nested to the column's dimension count
                            (array_mode "portable" (default): numeric(p,s) and money elements
                            as their text; arrays of 2+ dimensions as PostgreSQL's array text, a
                            string | "typed": decimal elements, nested arrays)

Special values, identical from both wire formats:
- numeric NaN / ±Infinity: None in decimal and "variable" form (ColumnCodec.may_be_null
  tells the caller the field must be nullable even for NOT NULL columns).
- date ±infinity: int32 max / min; timestamp(tz) ±infinity: int64 max / min (as
  Debezium), "infinity"/"-infinity" in iso mode. Timestamps after 294247 AD do not fit
  an int64 of Unix µs and clamp to the same sentinels. With out_of_range "clamp"
  (default) ColumnType.bounds gives the range every consumer reads (0001-01-01 ..
  9999-12-31 23:59:59.999999, timestamptz 0001-01-03 .. 9999-12-30 23:59:59.999999 UTC,
  time below 24:00): the encoder clamps values outside it
  and names them in the envelope's special_values (bridge.encode.plan).
- interval ±infinity (PostgreSQL 17+): every field at its max / min.
- money: lc_monetary must have two fraction digits (the text form is read as cents).
- numeric(p,s) with s < 0 maps to decimal(p - s, 0); with s > p to decimal(s, s).
Array dimensions: see `bridge.encode.arrays`. timetz keeps PostgreSQL's text
("12:00:00+05:30", ISO 8601 time with offset). Unknown types have no binary decoder
(Wire.UNKNOWN): the caller must refuse binary mode for them, unless they have no send
function (`sent_as_text`: pgoutput sends them as text in binary mode too). A composite's binary form
(record_send) is printed as record_out prints it where every attribute's binary form has a
text renderer that does not depend on the session (not timestamptz): Wire.COMPOSITE with
the attributes' types in `fields`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final, NamedTuple

from bridge.errors import ConfigError
from bridge.schema.catalog import (
    KIND_ARRAY,
    KIND_BASE,
    KIND_COMPOSITE,
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
TIMESTAMP_MODES: Final = ("local", "instant")
WIDE_DECIMAL_MODES: Final = ("string", "double", "decimal")
OUT_OF_RANGE_MODES: Final = ("clamp", "sentinel")
DECIMAL_MODES: Final = ("precise", "double", "string")
BINARY_MODES: Final = ("bytes", "base64", "hex")
TIME_PRECISION_MODES: Final = ("micros", "connect", "adaptive")
INTERVAL_MODES: Final = ("record", "string", "numeric")
HSTORE_MODES: Final = ("map", "json")
ARRAY_MODES: Final = ("portable", "typed")
_TIMESTAMPTZ_OID, _NUMERIC_OID = 1184, 1700
_DATE_OID, _TIME_OID, _TIMESTAMP_OID, _BYTEA_OID, _INTERVAL_OID = 1082, 1083, 1114, 17, 1186
# The widest decimal every consumer reads (Spark's DecimalType holds 38 digits).
MAX_DECIMAL_PRECISION: Final = 38
# What every consumer's calendar holds (Python's datetime, Spark, Java): 0001-01-01 to
# 9999-12-31 23:59:59.999999, as Unix days / microseconds; time before 24:00:00.
DATE_MIN: Final = -719_162
DATE_MAX: Final = 2_932_896
_US_PER_DAY: Final = 86_400_000_000
TIMESTAMP_MIN_US: Final = DATE_MIN * _US_PER_DAY
TIMESTAMP_MAX_US: Final = (DATE_MAX + 1) * _US_PER_DAY - 1
TIME_MAX_US: Final = _US_PER_DAY - 1
# An instant is read as local time by some consumers (Spark's collect() of a TimestampType,
# through Python's datetime.fromtimestamp): one more day inside each end keeps every time
# zone's local value, and the conversion's own day of margin, within years 1..9999.
TIMESTAMPTZ_MIN_US: Final = TIMESTAMP_MIN_US + 2 * _US_PER_DAY
TIMESTAMPTZ_MAX_US: Final = TIMESTAMP_MAX_US - _US_PER_DAY
# Kafka Connect's own logical types, which its Avro converters derive from these Avro
# logical types themselves: a field carrying one of them must not name another type in
# connect.name (the converter refuses the record: "Mismatched names ... differs from name
# in source schema", and Debezium's JDBC sink task dies), so Debezium's names for the same
# values (io.debezium.time.Date, .Time, .Timestamp) give way to Connect's here.
_CONNECT_LOGICAL: Final = {
    "date": "org.apache.kafka.connect.data.Date",
    "time-millis": "org.apache.kafka.connect.data.Time",
    "timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
}
_CONNECT_DECIMAL: Final = "org.apache.kafka.connect.data.Decimal"

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
    MONEY_TEXT = enum.auto()  # money's numeric text ("12.50"): array elements, portable
    DECIMAL = enum.auto()  # numeric(p, s)
    NUMERIC_DOUBLE = enum.auto()
    NUMERIC_VARIABLE = enum.auto()
    DATE = enum.auto()
    TIME = enum.auto()
    TIMESTAMP = enum.auto()
    TIMESTAMPTZ = enum.auto()
    TIMESTAMPTZ_ISO = enum.auto()
    TIME_MILLIS = enum.auto()  # time.precision.mode connect / adaptive
    TIMESTAMP_MILLIS = enum.auto()
    INTERVAL = enum.auto()
    INTERVAL_ISO = enum.auto()  # "P1Y2M3DT4H5M6.78S" as Debezium writes it
    INTERVAL_MICROS = enum.auto()  # Debezium's MicroDuration
    HSTORE = enum.auto()
    HSTORE_JSON = enum.auto()
    BYTEA_BASE64 = enum.auto()
    BYTEA_HEX = enum.auto()
    ARRAY = enum.auto()  # element: the element type
    ARRAY_TEXT = enum.auto()  # array_out's text; element: the element type
    RANGE = enum.auto()  # element: the bound subtype
    RANGE_UTC = enum.auto()  # timestamptz bounds, re-rendered in UTC
    MULTIRANGE = enum.auto()
    MULTIRANGE_UTC = enum.auto()
    COMPOSITE = enum.auto()  # record_out's text; fields: the attributes' types


@dataclass(frozen=True)
class CodecOptions:
    """How values become Avro (config `avro.*`; docs/concepts/types.md says why each default)."""

    timestamptz_mode: str = "micros"
    numeric_mode: str = "string"
    timestamp_mode: str = "local"
    wide_decimal_mode: str = "string"
    out_of_range: str = "clamp"
    decimal_mode: str = "precise"
    binary_mode: str = "bytes"
    time_precision_mode: str = "micros"
    interval_mode: str = "string"
    hstore_mode: str = "map"
    array_mode: str = "portable"

    def __post_init__(self) -> None:
        for name, allowed in (
            ("timestamptz_mode", TIMESTAMPTZ_MODES),
            ("numeric_mode", NUMERIC_MODES),
            ("timestamp_mode", TIMESTAMP_MODES),
            ("wide_decimal_mode", WIDE_DECIMAL_MODES),
            ("out_of_range", OUT_OF_RANGE_MODES),
            ("decimal_mode", DECIMAL_MODES),
            ("binary_mode", BINARY_MODES),
            ("time_precision_mode", TIME_PRECISION_MODES),
            ("interval_mode", INTERVAL_MODES),
            ("hstore_mode", HSTORE_MODES),
            ("array_mode", ARRAY_MODES),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(
                    f"{name} {value!r} is not supported", hint=f"use one of {', '.join(allowed)}"
                )

    @property
    def clamp(self) -> bool:
        return self.out_of_range == "clamp"


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
    # (lowest, highest) value every consumer reads: outside it the value is clamped and
    # its PostgreSQL text goes to the envelope's special_values (avro.out_of_range clamp)
    bounds: tuple[int, int] | None = None
    fields: tuple[ColumnType, ...] = ()  # composites: each attribute's type, in order
    # pgoutput's binary mode sends this type's values as text (no send function: only
    # types the bridge does not know can lack one)
    sent_as_text: bool = False


def _s(avro_type: str, **extra: Any) -> AvroSchema:
    return {"type": avro_type, **extra}


def _connect(schema: AvroSchema, name: str, **parameters: str) -> AvroSchema:
    """Debezium's semantic type name as its Avro converter writes it (connect.name,
    connect.version and connect.parameters), beside the Avro logical type; Connect's own
    name where the logical type is one of Connect's (`_CONNECT_LOGICAL`)."""
    name = _CONNECT_LOGICAL.get(schema.get("logicalType", ""), name)
    out = {**schema, "connect.name": name, "connect.version": 1}
    if parameters:
        out["connect.parameters"] = parameters
    return out


_STRING, _LONG = _s("string"), _s("long")
_MICRO_TIMESTAMP: Final = "io.debezium.time.MicroTimestamp"
_JSON = _connect(_STRING, "io.debezium.data.Json")
_TEXT = (_STRING, Wire.TEXT)
_STATIC: dict[int, tuple[AvroSchema, Wire]] = {
    16: (_s("boolean"), Wire.BOOL),
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
    114: (_JSON, Wire.TEXT),
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
    1266: (_STRING, Wire.TIMETZ),
    1560: (_STRING, Wire.BIT),
    1562: (_STRING, Wire.BIT),
    2950: (_connect(_s("string", logicalType="uuid"), "io.debezium.data.Uuid"), Wire.UUID),
    3220: (_STRING, Wire.PG_LSN),
    3802: (_JSON, Wire.JSONB),
    5069: (_LONG, Wire.UINT8),
}
_EXTENSIONS: dict[str, tuple[AvroSchema, Wire]] = {"citext": _TEXT}


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
    if t.kind == KIND_COMPOSITE:
        fields = tuple(
            _column_type(catalog.lookup(oid), -1, catalog, options, 1) for oid in t.fields
        )
        return _typed(_STRING, t, Wire.COMPOSITE)._replace(fields=fields)
    if t.kind == KIND_ENUM:
        labels = list(t.enum_labels)
        schema = _connect(_STRING, "io.debezium.data.Enum", allowed=",".join(labels))
        return _typed({**schema, "pg.enum.labels": labels}, t, Wire.TEXT)
    if t.oid == _NUMERIC_OID:
        return _numeric_type(t, typmod, options)
    configured = _configured(t)
    if configured is not None:
        return configured(t, typmod, options)
    spec = _STATIC.get(t.oid) if t.namespace == "pg_catalog" else None
    if spec is None and t.kind == KIND_BASE:
        spec = _EXTENSIONS.get(t.name)
    if spec is None:
        return _typed(_STRING, t, Wire.UNKNOWN)._replace(sent_as_text=not t.has_send)
    return _typed(spec[0], t, spec[1])


def _typed(schema: AvroSchema, t: PgType, wire: Wire) -> ColumnType:
    return ColumnType(_annotate(schema, "pg.type", t.qualified_name), t.qualified_name, wire)


def _annotate(schema: AvroSchema, key: str, value: str) -> AvroSchema:
    """Add a pg.* property; shared named records stay untouched so they can be folded."""
    return schema if "name" in schema else {**schema, key: value}


def _array_type(
    t: PgType, typmod: int, catalog: TypeCatalog, options: CodecOptions, depth: int
) -> ColumnType:
    """Arrays as nested Avro arrays; under array_mode "portable" in the forms Debezium's
    JDBC sink (3.3) can bind. It binds an array through PgJDBC's createArrayOf(name of the
    element's column type): a Connect decimal's name is "decimal(p,s)", which names no
    server type (its task dies), so decimal elements (numeric(p,s), money) travel as their
    exact text; a nested array's name ("integer[]") names no element type either, so
    arrays of two or more dimensions travel as PostgreSQL's own text of the array."""
    elem_type = catalog.lookup(t.elem_oid)
    portable = options.array_mode == "portable"
    elem_options = options
    if portable and options.decimal_mode == "precise":
        elem_options = replace(options, decimal_mode="string")
    elem = _column_type(elem_type, typmod, catalog, elem_options, 1)
    if portable and elem.wire == Wire.MONEY:  # a decimal(19,2): its text too
        notes = {k: v for k, v in elem.avro_schema.items() if k.startswith("pg.")}
        elem = elem._replace(avro_schema={**_STRING, **notes}, wire=Wire.MONEY_TEXT)
    if portable and depth > 1:
        typed = _typed(_STRING, t, Wire.ARRAY_TEXT)
    else:
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
        precision = max(precision, scale)
        mode = options.decimal_mode
        wide = options.wide_decimal_mode
        if mode == "precise" and precision > MAX_DECIMAL_PRECISION and wide != "decimal":
            mode = wide  # a decimal Spark cannot read: string (exact) or double
        if mode == "double":
            return _typed(_s("double"), t, Wire.NUMERIC_DOUBLE)
        if mode == "string":
            return _typed(_STRING, t, Wire.NUMERIC_TEXT)
        schema = _connect(
            _s("bytes", logicalType="decimal", precision=precision, scale=scale),
            _CONNECT_DECIMAL,
            scale=str(scale),
            **{"connect.decimal.precision": str(precision)},
        )
        return _typed(schema, t, Wire.DECIMAL)._replace(may_be_null=True)
    if options.numeric_mode == "double":
        return _typed(_s("double"), t, Wire.NUMERIC_DOUBLE)
    if options.numeric_mode == "variable":
        return ColumnType(
            VARIABLE_DECIMAL_SCHEMA, t.qualified_name, Wire.NUMERIC_VARIABLE, may_be_null=True
        )
    return _typed(_STRING, t, Wire.NUMERIC_TEXT)


def _millis(typmod: int, options: CodecOptions) -> bool:
    """time.precision.mode: connect is always milliseconds, adaptive for precision <= 3."""
    mode = options.time_precision_mode
    return mode == "connect" or (mode == "adaptive" and 0 <= typmod <= 3)


def _bounded(typed: ColumnType, low: int, high: int, options: CodecOptions) -> ColumnType:
    return typed._replace(bounds=(low, high)) if options.clamp else typed


def _date_type(t: PgType, typmod: int, options: CodecOptions) -> ColumnType:
    schema = _connect(_s("int", logicalType="date"), _CONNECT_LOGICAL["date"])
    typed = _typed(schema, t, Wire.DATE)
    return _bounded(typed, DATE_MIN, DATE_MAX, options)


def _time_type(t: PgType, typmod: int, options: CodecOptions) -> ColumnType:
    if _millis(typmod, options):
        name = "org.apache.kafka.connect.data.Time"
        if options.time_precision_mode == "adaptive":
            name = "io.debezium.time.Time"
        schema = _connect(_s("int", logicalType="time-millis"), name)
        return _bounded(_typed(schema, t, Wire.TIME_MILLIS), 0, TIME_MAX_US // 1000, options)
    schema = _connect(_s("long", logicalType="time-micros"), "io.debezium.time.MicroTime")
    return _bounded(_typed(schema, t, Wire.TIME), 0, TIME_MAX_US, options)


def _timestamp_type(t: PgType, typmod: int, options: CodecOptions) -> ColumnType:
    local = "local-" if options.timestamp_mode == "local" else ""
    if _millis(typmod, options):
        name = "org.apache.kafka.connect.data.Timestamp"
        if options.time_precision_mode == "adaptive":
            name = "io.debezium.time.Timestamp"
        schema = _connect(_s("long", logicalType=f"{local}timestamp-millis"), name)
        typed = _typed(schema, t, Wire.TIMESTAMP_MILLIS)
        return _bounded(typed, TIMESTAMP_MIN_US // 1000, TIMESTAMP_MAX_US // 1000, options)
    schema = _connect(_s("long", logicalType=f"{local}timestamp-micros"), _MICRO_TIMESTAMP)
    typed = _typed(schema, t, Wire.TIMESTAMP)
    return _bounded(typed, TIMESTAMP_MIN_US, TIMESTAMP_MAX_US, options)


def _timestamptz_type(t: PgType, typmod: int, options: CodecOptions) -> ColumnType:
    if options.timestamptz_mode == "iso":
        schema = _connect(_STRING, "io.debezium.time.ZonedTimestamp")
        return _typed(schema, t, Wire.TIMESTAMPTZ_ISO)
    # Debezium's name for int64 µs since the epoch: without it Connect-based consumers
    # (Debezium's JDBC sink via an Avro converter) see a plain int64 and the sink binds
    # a bigint to the timestamptz column. The value is UTC, the sink's default zone.
    schema = _connect(_s("long", logicalType="timestamp-micros"), _MICRO_TIMESTAMP)
    typed = _typed(schema, t, Wire.TIMESTAMPTZ)
    return _bounded(typed, TIMESTAMPTZ_MIN_US, TIMESTAMPTZ_MAX_US, options)


def _bytea_type(t: PgType, typmod: int, options: CodecOptions) -> ColumnType:
    if options.binary_mode == "base64":
        return _typed(_STRING, t, Wire.BYTEA_BASE64)
    if options.binary_mode == "hex":
        return _typed(_STRING, t, Wire.BYTEA_HEX)
    return _typed(_s("bytes"), t, Wire.BYTEA)


def _interval_type(t: PgType, typmod: int, options: CodecOptions) -> ColumnType:
    if options.interval_mode == "string":
        return _typed(_connect(_STRING, "io.debezium.time.Interval"), t, Wire.INTERVAL_ISO)
    if options.interval_mode == "numeric":
        schema = _connect(_LONG, "io.debezium.time.MicroDuration")
        return _typed(schema, t, Wire.INTERVAL_MICROS)
    return _typed(INTERVAL_SCHEMA, t, Wire.INTERVAL)


def _hstore_type(t: PgType, typmod: int, options: CodecOptions) -> ColumnType:
    if options.hstore_mode == "json":
        return _typed(_JSON, t, Wire.HSTORE_JSON)
    return _typed(_s("map", values=["null", "string"]), t, Wire.HSTORE)


_Configured = Callable[[PgType, int, CodecOptions], ColumnType]


def _configured(t: PgType) -> _Configured | None:
    """The schema function of a type whose schema depends on CodecOptions, if it is one."""
    if t.namespace == "pg_catalog":
        return _CONFIGURED.get(t.oid)
    return _hstore_type if t.kind == KIND_BASE and t.name == "hstore" else None


# pg_catalog types whose schema depends on CodecOptions.
_CONFIGURED: Final[dict[int, _Configured]] = {
    _DATE_OID: _date_type,
    _TIME_OID: _time_type,
    _TIMESTAMP_OID: _timestamp_type,
    _TIMESTAMPTZ_OID: _timestamptz_type,
    _BYTEA_OID: _bytea_type,
    _INTERVAL_OID: _interval_type,
}


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
