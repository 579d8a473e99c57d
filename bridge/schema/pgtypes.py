"""PostgreSQL column type -> Avro schema fragment plus text and binary converters.

`column_codec()` is called once per column of each relation version; the returned
converters are plain closures, so the per-row path has no type dispatch. Text and
binary converters return identical values. Schemas are the non-null type; the
caller wraps them in ["null", T]. Every fragment records the PostgreSQL type in a
"pg.type" property (except the shared named records, which must stay identical).

Mapping (value = what the converters return, ready for fastavro):

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
(ColumnCodec.supports_binary is False): the caller must refuse binary mode for them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from bridge.encode import binvalues as bv
from bridge.encode import render as rd
from bridge.encode import textvalues as tv
from bridge.encode.arrays import binary_array_parser, text_array_parser
from bridge.encode.ranges import (
    map_multirange_text,
    map_range_text,
    multirange_renderer,
    range_renderer,
    tstz_bound_utc,
)
from bridge.encode.temporal import iso_utc
from bridge.errors import ConfigError, ProtocolError
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
TextParser = Callable[[str], Any]
BinaryParser = Callable[[bytes], Any]
Converter = Callable[[bytes], Any]

TIMESTAMPTZ_MODES: Final = ("micros", "iso")
NUMERIC_MODES: Final = ("string", "double", "variable")
_TIMESTAMPTZ_OID, _NUMERIC_OID = 1184, 1700
_BAD_INPUT: Final = (ValueError, IndexError, KeyError, TypeError, struct.error, ArithmeticError)

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


class ColumnCodec(NamedTuple):
    avro_schema: AvroSchema
    from_text: Converter
    from_binary: Converter | None  # None: the type's binary format is not understood
    pg_type_name: str
    may_be_null: bool = False  # a non-NULL datum can convert to None (NaN numeric)
    # How bridge.encode.plan may skip the converter: "utf8" (the wire bytes are the
    # Avro string's bytes), "int" (int() of the text), "decimal" (the text's digits are
    # the unscaled value), "double" (float() of the text), "bool" ('t' or 'f'),
    # "timestamptz" (textvalues.wire_timestamptz), "date" (textvalues.wire_date), None
    # (call `text_parse` on the decoded text, or the converter).
    text_shape: str | None = None
    binary_shape: str | None = None
    # The str parser inside `from_text`, for the row writer to call without the wrapper
    # (its errors send the row down the general path, which reports them typed).
    text_parse: TextParser | None = None

    @property
    def supports_binary(self) -> bool:
        return self.from_binary is not None


class _Codec(NamedTuple):
    schema: AvroSchema
    text: TextParser
    binary: BinaryParser | None
    may_be_null: bool = False


def _s(avro_type: str, **extra: Any) -> AvroSchema:
    return {"type": avro_type, **extra}


_STRING, _LONG = _s("string"), _s("long")
_TEXT_LIKE = (_STRING, tv.identity, bv.parse_utf8)
_STATIC: dict[int, tuple[AvroSchema, TextParser, BinaryParser | None]] = {
    16: (_s("boolean"), tv.parse_bool, bv.parse_bool),
    17: (_s("bytes"), tv.parse_bytea, bv.parse_bytea),
    18: (_STRING, tv.identity, rd.render_char),
    19: _TEXT_LIKE,
    20: (_LONG, int, bv.parse_int8),
    21: (_s("int"), int, bv.parse_int2),
    23: (_s("int"), int, bv.parse_int4),
    25: _TEXT_LIKE,
    26: (_LONG, int, bv.parse_uint4),
    27: (_STRING, tv.identity, rd.render_tid),
    28: (_LONG, int, bv.parse_uint4),
    29: (_LONG, int, bv.parse_uint4),
    114: _TEXT_LIKE,
    142: _TEXT_LIKE,
    600: (_STRING, tv.identity, rd.render_point),
    601: (_STRING, tv.identity, rd.render_lseg),
    602: (_STRING, tv.identity, rd.render_path),
    603: (_STRING, tv.identity, rd.render_box),
    604: (_STRING, tv.identity, rd.render_polygon),
    628: (_STRING, tv.identity, rd.render_line),
    650: (_STRING, tv.identity, rd.render_inet),
    700: (_s("float"), tv.parse_float4, bv.parse_float4),
    701: (_s("double"), float, bv.parse_float8),
    718: (_STRING, tv.identity, rd.render_circle),
    774: (_STRING, tv.identity, rd.render_macaddr8),
    790: (
        _s("bytes", logicalType="decimal", precision=19, scale=2),
        tv.parse_money,
        bv.parse_money,
    ),
    829: (_STRING, tv.identity, rd.render_macaddr),
    869: (_STRING, tv.identity, rd.render_inet),
    1042: _TEXT_LIKE,
    1043: _TEXT_LIKE,
    1082: (_s("int", logicalType="date"), tv.parse_date, bv.parse_date),
    1083: (_s("long", logicalType="time-micros"), tv.parse_time, bv.parse_time),
    1114: (_s("long", logicalType="timestamp-micros"), tv.parse_timestamp, bv.parse_timestamp),
    1186: (INTERVAL_SCHEMA, tv.parse_interval, bv.parse_interval),
    1266: (_STRING, tv.identity, rd.render_timetz),
    1560: (_STRING, tv.identity, rd.render_bit),
    1562: (_STRING, tv.identity, rd.render_bit),
    2950: (_s("string", logicalType="uuid"), tv.identity, bv.parse_uuid),
    3220: (_STRING, tv.identity, rd.render_pg_lsn),
    3802: (_STRING, tv.identity, bv.parse_jsonb),
    5069: (_LONG, int, bv.parse_uint8),
}
_EXTENSIONS: dict[str, tuple[AvroSchema, TextParser, BinaryParser | None]] = {
    "citext": _TEXT_LIKE,
    "hstore": (_s("map", values=["null", "string"]), tv.parse_hstore, bv.parse_hstore),
}
# Binary -> text renderers for range bounds whose Avro value is not already that text.
_BOUND_RENDERERS: dict[int, rd.Renderer] = {
    20: rd.render_int(bv.parse_int8),
    21: rd.render_int(bv.parse_int2),
    23: rd.render_int(bv.parse_int4),
    26: rd.render_int(bv.parse_uint4),
    701: rd.render_float8,
    1082: rd.render_date,
    1083: rd.render_time,
    1114: rd.render_timestamp,
    1184: rd.render_timestamptz,
    1700: bv.numeric_text,
}


def column_codec(
    type_oid: int,
    typmod: int,
    catalog: TypeCatalog,
    options: CodecOptions = DEFAULT_OPTIONS,
    ndims: int = 1,
) -> ColumnCodec:
    """Schema and converters for one column.

    typmod is pg_attribute.atttypmod (-1 if none); ndims is pg_attribute.attndims and
    only matters for arrays (nesting depth, at least 1). Raises SchemaError when a
    type OID cannot be described by `catalog`.
    """
    pg_type = catalog.lookup(type_oid)
    codec = _codec(pg_type, typmod, catalog, options, max(ndims, 1))
    label = pg_type.qualified_name
    binary = None if codec.binary is None else _binary_converter(codec.binary, label)
    avro_type = codec.schema.get("type")
    is_string = avro_type == "string"
    text_shape = "utf8" if codec.text is tv.identity and is_string else None
    if codec.text is int and avro_type in ("int", "long") and "logicalType" not in codec.schema:
        text_shape = "int"
    if codec.text is tv.parse_decimal and codec.schema.get("logicalType") == "decimal":
        text_shape = "decimal"
    if codec.text is float and avro_type == "double" and "logicalType" not in codec.schema:
        text_shape = "double"
    if codec.text is tv.parse_bool and avro_type == "boolean":
        text_shape = "bool"
    if codec.text is tv.parse_timestamptz:
        text_shape = "timestamptz"
    if codec.text is tv.parse_date and avro_type == "int":
        text_shape = "date"
    return ColumnCodec(
        codec.schema,
        _text_converter(codec.text, label),
        binary,
        label,
        codec.may_be_null,
        text_shape=text_shape,
        binary_shape="utf8" if codec.binary is bv.parse_utf8 and is_string else None,
        text_parse=None if codec.text is tv.identity or codec.text in _WIRE_PARSERS else codec.text,
    )


def _codec(
    t: PgType, typmod: int, catalog: TypeCatalog, options: CodecOptions, depth: int
) -> _Codec:
    if t.kind == KIND_DOMAIN:
        base_typmod = t.base_typmod if t.base_typmod >= 0 else typmod
        inner = _codec(catalog.lookup(t.base_oid), base_typmod, catalog, options, depth)
        return inner._replace(schema=_annotate(inner.schema, "pg.domain", t.qualified_name))
    if t.kind == KIND_ARRAY:
        return _array_codec(t, typmod, catalog, options, depth)
    if t.kind in (KIND_RANGE, KIND_MULTIRANGE):
        return _range_codec(t, catalog)
    if t.kind == KIND_ENUM:
        schema = _s("string", **{"pg.enum.labels": list(t.enum_labels)})
        return _typed(schema, t, tv.identity, bv.parse_utf8)
    if t.oid == _NUMERIC_OID:
        return _numeric_codec(t, typmod, options)
    if t.oid == _TIMESTAMPTZ_OID:
        return _timestamptz_codec(t, options)
    spec = _STATIC.get(t.oid) if t.namespace == "pg_catalog" else None
    if spec is None and t.kind == KIND_BASE:
        spec = _EXTENSIONS.get(t.name)
    if spec is None:
        return _typed(_STRING, t, tv.identity, None)
    schema, text, binary = spec
    return _typed(schema, t, text, binary)


def _typed(schema: AvroSchema, t: PgType, text: TextParser, binary: BinaryParser | None) -> _Codec:
    return _Codec(_annotate(schema, "pg.type", t.qualified_name), text, binary)


def _annotate(schema: AvroSchema, key: str, value: str) -> AvroSchema:
    """Add a pg.* property; shared named records stay untouched so they can be folded."""
    return schema if "name" in schema else {**schema, key: value}


def _array_codec(
    t: PgType, typmod: int, catalog: TypeCatalog, options: CodecOptions, depth: int
) -> _Codec:
    elem_type = catalog.lookup(t.elem_oid)
    elem = _codec(elem_type, typmod, catalog, options, 1)
    schema: AvroSchema = {"type": "array", "items": ["null", elem.schema]}
    for _ in range(depth - 1):
        schema = {"type": "array", "items": schema}
    text = text_array_parser(elem_type.delim, elem.text, depth)
    binary = None if elem.binary is None else binary_array_parser(elem.binary, depth)
    return _Codec(_annotate(schema, "pg.type", t.qualified_name), text, binary)


def _numeric_codec(t: PgType, typmod: int, options: CodecOptions) -> _Codec:
    if typmod >= 4:  # VARHDRSZ + (precision << 16 | scale)
        precision = ((typmod - 4) >> 16) & 0xFFFF
        scale = (((typmod - 4) & 0x7FF) ^ 1024) - 1024
        if scale < 0:  # multiples of 10^-scale: whole numbers with -scale more digits
            precision, scale = precision - scale, 0
        schema = _s("bytes", logicalType="decimal", precision=max(precision, scale), scale=scale)
        return _typed(schema, t, tv.parse_decimal, bv.parse_decimal)._replace(may_be_null=True)
    if options.numeric_mode == "double":
        return _typed(_s("double"), t, float, bv.parse_numeric_double)
    if options.numeric_mode == "variable":
        codec = _Codec(
            VARIABLE_DECIMAL_SCHEMA, tv.parse_variable_decimal, bv.parse_variable_decimal
        )
        return codec._replace(may_be_null=True)
    return _typed(_STRING, t, tv.identity, bv.numeric_text)


def _timestamptz_iso_text(text: str) -> str:
    return iso_utc(tv.parse_timestamptz(text))


def _timestamptz_iso_binary(data: bytes) -> str:
    return iso_utc(bv.parse_timestamp(data))


def _timestamptz_codec(t: PgType, options: CodecOptions) -> _Codec:
    if options.timestamptz_mode == "iso":
        return _typed(_STRING, t, _timestamptz_iso_text, _timestamptz_iso_binary)
    schema = _s("long", logicalType="timestamp-micros")
    return _typed(schema, t, tv.parse_timestamptz, bv.parse_timestamp)


def _range_codec(t: PgType, catalog: TypeCatalog) -> _Codec:
    subtype = catalog.lookup(t.range_subtype)
    while subtype.kind == KIND_DOMAIN:
        subtype = catalog.lookup(subtype.base_oid)
    multi = t.kind == KIND_MULTIRANGE
    text: TextParser = tv.identity
    if subtype.oid == _TIMESTAMPTZ_OID:
        text = (map_multirange_text if multi else map_range_text)(tstz_bound_utc)
    bound = _BOUND_RENDERERS.get(subtype.oid)
    if bound is None:
        sub = _codec(subtype, -1, catalog, DEFAULT_OPTIONS, 1)
        bound = sub.binary if sub.text is tv.identity else None
    binary = None if bound is None else (multirange_renderer if multi else range_renderer)(bound)
    return _typed(_STRING, t, text, binary)


def _malformed(label: str, exc: Exception) -> ProtocolError:
    return ProtocolError("value", 0, f"{label}: {type(exc).__name__}: {exc}")


# Parsers with a twin that reads the undecoded text.
_WIRE_PARSERS: dict[TextParser, BinaryParser] = {
    int: int,
    float: float,
    tv.parse_timestamptz: tv.wire_timestamptz,
    tv.parse_date: tv.wire_date,
}


def _text_converter(parse: TextParser, label: str) -> Converter:
    if parse in _WIRE_PARSERS:  # int() and float() accept bytes: skip the decode
        return _binary_converter(_WIRE_PARSERS[parse], label)
    if parse is tv.identity:

        def decode(raw: bytes) -> Any:
            try:
                return raw.decode()
            except UnicodeDecodeError as exc:
                raise _malformed(label, exc) from exc

        return decode

    def convert(raw: bytes) -> Any:
        try:
            return parse(raw.decode())
        except _BAD_INPUT as exc:
            raise _malformed(label, exc) from exc

    return convert


def _binary_converter(parse: BinaryParser, label: str) -> Converter:
    def convert(raw: bytes) -> Any:
        try:
            return parse(raw)
        except _BAD_INPUT as exc:
            raise _malformed(label, exc) from exc

    return convert
