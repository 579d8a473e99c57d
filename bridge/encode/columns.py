"""A column's declared wire shape (`bridge.schema.pgtypes.Wire`) -> its value converters.

Built once per column of each relation version. `text` and `binary` are the raw
parsers (bytes -> Avro-ready value; they raise whatever Python raises on bad input)
that the encoder's plan calls and wraps in a `ValueConversionError` naming table and
column; `from_text` / `from_binary` wrap them for callers without a table (the
per-type tests and campaigns). Text and binary parsers return identical values.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from bridge.encode import binvalues as bv
from bridge.encode import render as rd
from bridge.encode import textvalues as tv
from bridge.encode.arrays import (
    array_literal,
    binary_array_parser,
    binary_array_text,
    map_array_text,
    text_array_parser,
)
from bridge.encode.ranges import (
    map_multirange_text,
    map_range_text,
    multirange_renderer,
    range_renderer,
    tstz_bound_utc,
)
from bridge.encode.temporal import interval_iso, interval_micros, iso_utc, millis_of
from bridge.errors import ValueConversionError
from bridge.schema.catalog import TypeCatalog
from bridge.schema.pgtypes import (
    DEFAULT_OPTIONS,
    AvroSchema,
    CodecOptions,
    ColumnType,
    Wire,
    column_type,
)

Converter = Callable[[bytes], Any]
TextParser = Callable[[str], Any]
# What a parser raises on bytes it cannot read.
BAD_INPUT: Final = (
    ValueError,
    IndexError,
    KeyError,
    TypeError,
    AttributeError,
    struct.error,
    ArithmeticError,
)


def _utf8(raw: bytes) -> str:
    return raw.decode()


def _decoded(parse: TextParser) -> Converter:
    def convert(raw: bytes) -> Any:
        return parse(raw.decode())

    return convert


def _timestamptz_iso_text(raw: bytes) -> str:
    return iso_utc(tv.wire_timestamptz(raw))


def _timestamptz_iso_binary(data: bytes) -> str:
    return iso_utc(bv.parse_timestamp(data))


def _then(parse: Converter, after: Callable[[Any], Any]) -> Converter:
    """A converter followed by a representation change (the handling modes)."""

    def convert(raw: bytes) -> Any:
        return after(parse(raw))

    return convert


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _hex(data: bytes) -> str:
    return data.hex()


def _hex_bytea_text(text: str) -> str:
    """bytea's text in either bytea_output form, as bytea_output=hex prints it."""
    return rd.render_bytea(tv.parse_bytea(text))


def _json(value: dict[str, str | None]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# Wire shapes whose text form is the Avro string itself, with their binary reader.
_TEXT_AS_IS: Final[dict[Wire, Converter | None]] = {
    Wire.TEXT: bv.parse_utf8,
    Wire.UNKNOWN: None,
    Wire.NUMERIC_TEXT: bv.numeric_text,
    Wire.CHAR: rd.render_char,
    Wire.TID: rd.render_tid,
    Wire.POINT: rd.render_point,
    Wire.LSEG: rd.render_lseg,
    Wire.PATH: rd.render_path,
    Wire.BOX: rd.render_box,
    Wire.POLYGON: rd.render_polygon,
    Wire.LINE: rd.render_line,
    Wire.CIRCLE: rd.render_circle,
    Wire.INET: rd.render_inet,
    Wire.MACADDR: rd.render_macaddr,
    Wire.MACADDR8: rd.render_macaddr8,
    Wire.TIMETZ: rd.render_timetz,
    Wire.BIT: rd.render_bit,
    Wire.UUID: bv.parse_uuid,
    Wire.PG_LSN: rd.render_pg_lsn,
    Wire.JSONB: bv.parse_jsonb,
}
# (text parser of the undecoded bytes, binary parser) of every other scalar shape.
_BASE_PARSED: Final[dict[Wire, tuple[Converter, Converter]]] = {
    Wire.BOOL: (_decoded(tv.parse_bool), bv.parse_bool),
    Wire.BYTEA: (_decoded(tv.parse_bytea), bv.parse_bytea),
    Wire.INT2: (tv.parse_int, bv.parse_int2),
    Wire.INT4: (tv.parse_int, bv.parse_int4),
    Wire.INT8: (tv.parse_int, bv.parse_int8),
    Wire.UINT4: (tv.parse_int, bv.parse_uint4),
    Wire.UINT8: (tv.parse_int, bv.parse_uint8),
    Wire.FLOAT4: (_decoded(tv.parse_float4), bv.parse_float4),
    Wire.FLOAT8: (float, bv.parse_float8),
    Wire.MONEY: (_decoded(tv.parse_money), bv.parse_money),
    Wire.DECIMAL: (_decoded(tv.parse_decimal), bv.parse_decimal),
    Wire.NUMERIC_DOUBLE: (float, bv.parse_numeric_double),
    Wire.NUMERIC_VARIABLE: (_decoded(tv.parse_variable_decimal), bv.parse_variable_decimal),
    Wire.DATE: (tv.wire_date, bv.parse_date),
    Wire.TIME: (_decoded(tv.parse_time), bv.parse_time),
    Wire.TIMESTAMP: (_decoded(tv.parse_timestamp), bv.parse_timestamp),
    Wire.TIMESTAMPTZ: (tv.wire_timestamptz, bv.parse_timestamp),
    Wire.TIMESTAMPTZ_ISO: (_timestamptz_iso_text, _timestamptz_iso_binary),
    Wire.INTERVAL: (_decoded(tv.parse_interval), bv.parse_interval),
    Wire.HSTORE: (_decoded(tv.parse_hstore), bv.parse_hstore),
}
# The handling modes: a representation of another shape's value.
_DERIVED: Final[dict[Wire, tuple[Wire, Callable[[Any], Any]]]] = {
    Wire.TIME_MILLIS: (Wire.TIME, millis_of),
    Wire.TIMESTAMP_MILLIS: (Wire.TIMESTAMP, millis_of),
    Wire.INTERVAL_ISO: (Wire.INTERVAL, interval_iso),
    Wire.INTERVAL_MICROS: (Wire.INTERVAL, interval_micros),
    Wire.HSTORE_JSON: (Wire.HSTORE, _json),
    Wire.BYTEA_BASE64: (Wire.BYTEA, _base64),
    Wire.BYTEA_HEX: (Wire.BYTEA, _hex),
    Wire.MONEY_TEXT: (Wire.MONEY, str),
}
_PARSED: Final[dict[Wire, tuple[Converter, Converter]]] = {
    **_BASE_PARSED,
    **{
        wire: (_then(_BASE_PARSED[base][0], after), _then(_BASE_PARSED[base][1], after))
        for wire, (base, after) in _DERIVED.items()
    },
}
# Binary values whose Avro value is not already their text, rendered as PostgreSQL prints
# them: range bounds, and the elements of arrays written as text.
_TEXT_RENDERERS: Final[dict[Wire, Converter]] = {
    Wire.INT8: rd.render_int(bv.parse_int8),
    Wire.INT2: rd.render_int(bv.parse_int2),
    Wire.INT4: rd.render_int(bv.parse_int4),
    Wire.UINT4: rd.render_int(bv.parse_uint4),
    Wire.FLOAT8: rd.render_float8,
    Wire.DATE: rd.render_date,
    Wire.TIME: rd.render_time,
    Wire.TIMESTAMP: rd.render_timestamp,
    Wire.TIMESTAMPTZ: rd.render_timestamptz,
    Wire.TIMESTAMPTZ_ISO: rd.render_timestamptz,
    Wire.DECIMAL: bv.numeric_text,
    Wire.BOOL: rd.render_bool,
    Wire.BYTEA: rd.render_bytea,
    Wire.BYTEA_BASE64: rd.render_bytea,
    Wire.BYTEA_HEX: rd.render_bytea,
}
# Text that depends on session settings the walsender does not fix (TimeZone,
# bytea_output), re-rendered as the binary renderers print it, inside arrays written as text.
_NORMALIZED_TEXT: Final[dict[Wire, Callable[[str], str]]] = {
    Wire.TIMESTAMPTZ: tstz_bound_utc,
    Wire.TIMESTAMPTZ_ISO: tstz_bound_utc,
    Wire.RANGE_UTC: map_range_text(tstz_bound_utc),
    Wire.MULTIRANGE_UTC: map_multirange_text(tstz_bound_utc),
    **dict.fromkeys((Wire.BYTEA, Wire.BYTEA_BASE64, Wire.BYTEA_HEX), _hex_bytea_text),
}
_RANGES: Final = (Wire.RANGE, Wire.RANGE_UTC, Wire.MULTIRANGE, Wire.MULTIRANGE_UTC)


# Binary value -> PostgreSQL's text, for the values a schema cannot hold (special_values).
_SPECIAL_TEXT: Final[dict[Wire, Converter]] = {
    Wire.DATE: rd.render_date,
    Wire.TIME: rd.render_time,
    Wire.TIME_MILLIS: rd.render_time,
    Wire.TIMESTAMP: rd.render_timestamp,
    Wire.TIMESTAMP_MILLIS: rd.render_timestamp,
    Wire.TIMESTAMPTZ: rd.render_timestamptz,
    Wire.DECIMAL: bv.numeric_text,
    Wire.NUMERIC_VARIABLE: bv.numeric_text,
}


def special_text(wire: Wire) -> Converter | None:
    """How a binary value of `wire` prints as PostgreSQL text, for the shapes whose
    values can fall outside their schema (clamped temporal values, numeric NaN)."""
    return _SPECIAL_TEXT.get(wire)


def text_is_value(wire: Wire) -> bool:
    """The text form is the Avro string (no parsing, only UTF-8 validation)."""
    return wire in _TEXT_AS_IS or wire == Wire.COMPOSITE


class ColumnCodec(NamedTuple):
    """A column's type (schema, wire shape) with the converters of its wire forms."""

    type: ColumnType
    text: Converter
    binary: Converter | None  # None: the type's binary format is not understood
    # Arrays of bounded or NaN-able elements: an element clamped to its bounds or a NaN
    # written as null appends here (the encoder reports the array in special_values);
    # None for every other column.
    clamped: list[int] | None = None

    @property
    def avro_schema(self) -> AvroSchema:
        return self.type.avro_schema

    @property
    def pg_type_name(self) -> str:
        return self.type.pg_type_name

    @property
    def may_be_null(self) -> bool:
        return self.type.may_be_null

    @property
    def supports_binary(self) -> bool:
        return self.binary is not None

    def from_text(self, raw: bytes) -> Any:
        return _checked(self.text, raw, self.type)

    def from_binary(self, raw: bytes) -> Any:
        if self.binary is None:
            raise ValueConversionError(None, None, self.type.pg_type_name, raw, "no binary form")
        return _checked(self.binary, raw, self.type)


def _checked(convert: Converter, raw: bytes, t: ColumnType) -> Any:
    try:
        return convert(raw)
    except BAD_INPUT as exc:
        raise ValueConversionError(None, None, t.pg_type_name, raw, exc) from exc


def column_codec(
    type_oid: int,
    typmod: int,
    catalog: TypeCatalog,
    options: CodecOptions = DEFAULT_OPTIONS,
    ndims: int = 1,
) -> ColumnCodec:
    """`column_type` with its converters (see `codec_of`)."""
    return codec_of(column_type(type_oid, typmod, catalog, options, ndims))


def codec_of(t: ColumnType) -> ColumnCodec:
    element = t.element
    if t.wire == Wire.ARRAY and element is not None and _reported(element):
        clamped: list[int] = []
        text, binary = _array_converters(t, element, clamped)
        return ColumnCodec(t, text, binary, clamped)
    text, binary = _converters(t)
    return ColumnCodec(t, text, binary)


def _reported(element: ColumnType) -> bool:
    """Arrays of these elements report themselves in special_values when an element is
    clamped to its bounds or written as null although it is a value (NaN numerics)."""
    return element.bounds is not None or element.may_be_null


def array_text(t: ColumnType) -> Converter | None:
    """PostgreSQL's text of a binary array value whose elements `special_text` prints
    (the special_values entry of an array with a clamped element)."""
    element = t.element
    render = None if element is None or t.wire != Wire.ARRAY else special_text(element.wire)
    if render is None:
        return None
    parse = binary_array_parser(render, t.depth)
    delim = t.delim

    def text(raw: bytes) -> str:
        return array_literal(parse(raw), delim)

    return text


def _clamping(parse: Any, bounds: tuple[int, int] | None, clamped: list[int]) -> Any:
    """An element parser that clamps to `bounds` (if any) and notes in `clamped` each
    element clamped or written as null although not NULL (a NaN numeric: the array
    parsers never call it for NULL elements)."""
    low, high = bounds or (0, 0)

    def convert(item: Any) -> Any:
        value = parse(item)
        if value is None:
            clamped.append(1)
            return None
        if bounds is None or low <= value <= high:
            return value
        clamped.append(1)
        return low if value < low else high

    return convert


def _converters(t: ColumnType) -> tuple[Converter, Converter | None]:
    wire = t.wire
    if wire == Wire.COMPOSITE:
        return _utf8, _binary_text(t)
    if wire in _TEXT_AS_IS:
        return _utf8, _TEXT_AS_IS[wire]
    if wire in _PARSED:
        return _PARSED[wire]
    element = t.element
    if element is None:
        raise AssertionError(f"{wire} needs an element type")  # pgtypes always sets it
    if wire == Wire.ARRAY:
        return _array_converters(t, element)
    if wire == Wire.ARRAY_TEXT:
        return _array_text_converters(t, element)
    return _range_converters(wire, element)


def _array_converters(
    t: ColumnType, element: ColumnType, clamped: list[int] | None = None
) -> tuple[Converter, Converter | None]:
    elem_text, elem_binary = _element_parsers(element)
    if clamped is not None:
        elem_text = _clamping(elem_text, element.bounds, clamped)
        if elem_binary is not None:
            elem_binary = _clamping(elem_binary, element.bounds, clamped)
    parse_text = text_array_parser(t.delim, elem_text, t.depth)
    binary = None if elem_binary is None else binary_array_parser(elem_binary, t.depth)
    return _decoded(parse_text), binary


def _array_text_converters(
    t: ColumnType, element: ColumnType
) -> tuple[Converter, Converter | None]:
    """PostgreSQL's text of the array: the text form as it arrives (elements whose text
    depends on session settings re-rendered, `_NORMALIZED_TEXT`); the binary form printed
    with the element's text renderer, or no binary form when the element has none."""
    normalize = _NORMALIZED_TEXT.get(element.wire)
    text = _utf8 if normalize is None else _decoded(map_array_text(t.delim, normalize))
    render = _text_renderer(element.wire)
    if render is None and element.wire in _RANGES and element.element is not None:
        render = _range_converters(element.wire, element.element)[1]
    return text, None if render is None else binary_array_text(render, t.delim)


# Attribute types whose text depends on the walsender's session (TimeZone): a composite
# holding one keeps its text form only, so that both wire formats read the same.
_SESSION_TEXT: Final = frozenset(
    {Wire.TIMESTAMPTZ, Wire.TIMESTAMPTZ_ISO, Wire.RANGE_UTC, Wire.MULTIRANGE_UTC}
)


def _binary_text(t: ColumnType) -> Converter | None:
    """PostgreSQL's text of a binary value of `t` as a composite's attribute: composites,
    arrays and ranges of renderable types, and every type with a text renderer; None for
    the others (no binary form for the composite then, as for a 2-D array of them)."""
    wire = t.wire
    if wire in _SESSION_TEXT:
        return None
    if wire == Wire.COMPOSITE:
        fields = [_binary_text(f) for f in t.fields]
        known = [f for f in fields if f is not None]
        return rd.render_record(known) if len(known) == len(fields) else None
    element = t.element
    if wire in (Wire.ARRAY, Wire.ARRAY_TEXT) and element is not None:
        render = _binary_text(element)
        return None if render is None else binary_array_text(render, t.delim)
    if wire in _RANGES and element is not None:
        render = _binary_text(element)
        if render is None:
            return None
        multi = wire in (Wire.MULTIRANGE, Wire.MULTIRANGE_UTC)
        return (multirange_renderer if multi else range_renderer)(render)
    return _text_renderer(wire)


def _text_renderer(wire: Wire) -> Converter | None:
    """How a binary value of `wire` prints as PostgreSQL's text, if known."""
    render = _TEXT_RENDERERS.get(wire)
    return _TEXT_AS_IS.get(wire) if render is None else render


def _element_parsers(element: ColumnType) -> tuple[TextParser, Converter | None]:
    """Array elements arrive as decoded text (the array parser splits a str)."""
    text, binary = _converters(element)
    if element.wire in _TEXT_AS_IS:
        return _identity, binary

    def parse(item: str) -> Any:
        return text(item.encode())

    return parse, binary


def _identity(text: str) -> str:
    return text


def _range_converters(wire: Wire, bound: ColumnType) -> tuple[Converter, Converter | None]:
    multi = wire in (Wire.MULTIRANGE, Wire.MULTIRANGE_UTC)
    text: Converter = _utf8
    if wire in (Wire.RANGE_UTC, Wire.MULTIRANGE_UTC):
        text = _decoded((map_multirange_text if multi else map_range_text)(tstz_bound_utc))
    render = _text_renderer(bound.wire)
    if render is None:
        return text, None
    return text, (multirange_renderer if multi else range_renderer)(render)
