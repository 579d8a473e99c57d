"""TupleData → Avro key and row bodies in one pass, by a compiled loop over a column plan.

The general path (`TableCodec.row` builds a dict, a compiled writer walks it, the key is a
second dict) costs a dict, a lookup and two closure calls per column. Here one loop,
compiled with the rest of the hot path (setup.py), reads each column's wire bytes and
appends its Avro encoding, dispatching on the column's shape: text types whose wire
bytes already are the Avro string's bytes are copied, integers are parsed with int()
and zigzag-encoded, numeric(p, s) digits become the decimal's bytes, float8, bool and
timestamptz are converted inline; anything else goes through the column's own converter
and value writer. The plan is built once per table version, when the Relation arrives.

Anything unusual (a column count that disagrees with the Relation message, an unchanged
TOASTed value, a NULL key column, a value its schema cannot hold) returns None and the
caller takes the general path, which yields the same bytes or the typed error. Equality
with that path is tested byte for byte (tests/schema/test_rowwriter.py).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from bridge.decode.messages import KIND_BINARY, KIND_NULL, KIND_TEXT
from bridge.errors import SchemaError
from bridge.schema.fastwriter import Writer, compile_value_writer, write_long
from bridge.schema.pgtypes import ColumnCodec
from bridge.schema.table import TableCodec
from bridge.schema.textvalues import wire_timestamptz

RowBodies = tuple[bytes, bytes]  # (key record body, or b"" without a key; row record body)
RowWriter = Callable[[bytes, tuple[bytes | None, ...]], RowBodies | None]

# Column shapes, by how the loop writes a text (or binary) value.
_CONVERT: Final = 0  # the converter, then the value writer
_UTF8: Final = 1  # the wire bytes are the Avro string's bytes (validated as UTF-8)
_DECIMAL: Final = 2  # numeric(p, s) text -> the decimal's two's-complement bytes
_INT32: Final = 3  # int() of the text, an Avro int
_PARSE: Final = 4  # the str parser on the decoded text, then the value writer
_NONE: Final = 5  # no way to read this kind: the general path takes the row
# From here on, shapes written without the value writer unless part of the key.
_INT: Final = 6  # int() of the text, an Avro long
_DOUBLE: Final = 7  # float() of the text
_BOOL: Final = 8  # 't' or 'f'
_TIMESTAMPTZ: Final = 9  # wire_timestamptz, an Avro long

# What a converter or parser may raise on a value it cannot take (pgtypes._BAD_INPUT).
_FALLBACK_ERRORS: Final = (
    ValueError,
    TypeError,
    ArithmeticError,
    AttributeError,
    IndexError,
    KeyError,
    struct.error,
)
_PACK_DOUBLE: Final = struct.Struct("<d").pack
_NULL: Final = b"\x00"
_SOME: Final = b"\x02"  # union branch 1 of ["null", T]
_TRUE: Final = b"\x02\x01"  # branch 1, then the boolean
_FALSE: Final = b"\x02\x00"
# Avro long of n (zigzag: 2n) for the string lengths that take one byte.
_SHORT_LENGTHS: Final = tuple(bytes([n << 1]) for n in range(64))


class _Column:
    """One kept column: where its value is and how each wire kind is written."""

    def __init__(
        self,
        index: int,
        text_shape: int,
        binary_shape: int,
        key_slot: int,
        key_nullable: bool,
        codec: ColumnCodec,
        writer: Writer,
    ) -> None:
        self.index = index
        self.text_shape = text_shape
        self.binary_shape = binary_shape
        self.key_slot = key_slot  # -1: not a key column
        self.key_nullable = key_nullable
        self.from_text = codec.from_text
        self.text_parse = codec.text_parse
        self.from_binary = codec.from_binary
        self.writer = writer
        self.decimal_scale = 0
        self.decimal_bound = 0
        if codec.text_shape == "decimal":
            self.decimal_scale = codec.avro_schema.get("scale", 0)
            self.decimal_bound = 10 ** codec.avro_schema["precision"]


class RowPlan:
    """The fused writer of one table version: `write(kinds, values)`."""

    def __init__(self, width: int, columns: list[_Column], key_parts: int) -> None:
        self.width = width  # columns in the Relation message
        self.columns = columns
        self.key_parts = key_parts

    def write(self, kinds: bytes, values: tuple[bytes | None, ...]) -> RowBodies | None:
        if len(kinds) != self.width:
            return None
        out = bytearray()
        keys = [bytearray() for _ in range(self.key_parts)]
        try:
            for column in self.columns:
                kind = kinds[column.index]
                if kind == KIND_NULL:
                    if column.key_slot >= 0:
                        return None
                    out += _NULL
                    continue
                if kind == KIND_TEXT:
                    shape = column.text_shape
                elif kind == KIND_BINARY:
                    shape = column.binary_shape
                else:
                    return None
                value = values[column.index]
                if value is None or shape == _NONE:
                    return None
                if not _write_value(out, keys, column, shape, kind == KIND_TEXT, value):
                    return None
        except _FALLBACK_ERRORS:
            return None
        if not keys:
            return b"", bytes(out)
        if len(keys) == 1:
            return bytes(keys[0]), bytes(out)
        return b"".join(keys), bytes(out)


def _write_value(
    out: bytearray, keys: list[bytearray], column: _Column, shape: int, text: bool, v: bytes
) -> bool:
    """Append one non-NULL value (and its key part); False sends the row to the general path."""
    if shape in (_UTF8, _DECIMAL):
        if shape == _DECIMAL:
            v = _decimal_bytes(v, column.decimal_scale, column.decimal_bound)
        elif not v.isascii():
            v.decode()  # UnicodeDecodeError (a ValueError) for invalid UTF-8
        n = len(v)
        out += _SOME
        if n < 64:
            out += _SHORT_LENGTHS[n]
        else:
            write_long(out, n)
        out += v
        if column.key_slot >= 0:
            key = keys[column.key_slot]
            if column.key_nullable:
                key += _SOME
            write_long(key, n)
            key += v
        return True
    if shape >= _INT and column.key_slot < 0:
        return _write_inline(out, shape, v)
    x = _convert(column, shape, text, v)
    if x is None:
        out += _NULL
    else:
        out += _SOME
        column.writer(out, x)
    if column.key_slot >= 0:
        key = keys[column.key_slot]
        if x is None:
            if not column.key_nullable:
                return False
            key += _NULL
        else:
            if column.key_nullable:
                key += _SOME
            column.writer(key, x)
    return True


def _write_inline(out: bytearray, shape: int, v: bytes) -> bool:
    """A value of the shapes from _INT on, outside the key: no converter, no writer call."""
    if shape == _BOOL:
        if v == b"t":
            out += _TRUE
        elif v == b"f":
            out += _FALSE
        else:
            return False
        return True
    if shape == _DOUBLE:
        out += _SOME
        out += _PACK_DOUBLE(float(v))
        return True
    out += _SOME
    write_long(out, int(v) if shape == _INT else wire_timestamptz(v))
    return True


def _convert(column: _Column, shape: int, text: bool, v: bytes) -> Any:
    if shape in (_INT, _INT32):
        return int(v)
    if shape == _TIMESTAMPTZ:
        return wire_timestamptz(v)
    if shape == _PARSE and column.text_parse is not None:
        return column.text_parse(v.decode())
    if not text:
        convert = column.from_binary
        return None if convert is None else convert(v)
    return column.from_text(v)


def _decimal_bytes(text: bytes, scale: int, bound: int) -> bytes:
    """PostgreSQL's text of a numeric(p, s) → the Avro decimal's bytes, sized as fastavro
    sizes them; ValueError for NaN, infinities, or more digits than the schema holds."""
    whole, _, fraction = text.partition(b".")
    if len(fraction) > scale:
        raise ValueError("more fraction digits than the scale")
    unscaled = int(whole + fraction + b"0" * (scale - len(fraction)))
    if not -bound < unscaled < bound:
        raise ValueError("more digits than the precision")
    size = (abs(unscaled).bit_length() + 8) // 8
    return unscaled.to_bytes(size, "big", signed=True)


_TEXT_SHAPES: Final = {
    "utf8": _UTF8,
    "decimal": _DECIMAL,
    "double": _DOUBLE,
    "bool": _BOOL,
    "timestamptz": _TIMESTAMPTZ,
}


def _text_shape(codec: ColumnCodec) -> int:
    if codec.text_shape == "int":
        return _INT32 if codec.avro_schema.get("type") == "int" else _INT
    shape = _TEXT_SHAPES.get(codec.text_shape or "")
    if shape is not None:
        return shape
    return _PARSE if codec.text_parse is not None else _CONVERT


def compile_row_writer(table: TableCodec) -> RowWriter | None:
    """The fused writer for `table`, or None if a column's schema is outside fastwriter's."""
    key_slot = {pos: n for n, pos in enumerate(table.key_positions)}
    columns = []
    for pos, (index, codec) in enumerate(zip(table.kept, table.codecs, strict=True)):
        try:
            writer = compile_value_writer(codec.avro_schema)
        except SchemaError:
            return None
        if codec.from_binary is None:
            binary = _NONE
        else:
            binary = _UTF8 if codec.binary_shape == "utf8" else _CONVERT
        slot = key_slot.get(pos, -1)
        columns.append(
            _Column(index, _text_shape(codec), binary, slot, codec.may_be_null, codec, writer)
        )
    return RowPlan(len(table.relation.columns), columns, len(key_slot)).write
