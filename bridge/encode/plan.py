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
from typing import Any, Final

from bridge.decode.messages import KIND_BINARY, KIND_NULL, KIND_TEXT
from bridge.encode.avro import Writer, compile_value_writer, long_bytes, write_int, write_long
from bridge.encode.textvalues import wire_date, wire_timestamptz
from bridge.errors import SchemaError
from bridge.schema.pgtypes import ColumnCodec
from bridge.schema.table import TableCodec

RowBodies = tuple[bytes, bytes]  # (key record body, or b"" without a key; row record body)

# Column shapes, by how the loop writes a text (or binary) value.
_CONVERT: Final = 0  # the converter, then the value writer
_UTF8: Final = 1  # the wire bytes are the Avro string's bytes (validated as UTF-8)
_DECIMAL: Final = 2  # numeric(p, s) text -> the decimal's two's-complement bytes
_INT32: Final = 3  # int() of the text, an Avro int
_PARSE: Final = 4  # the str parser on the decoded text, then the value writer
_DATE: Final = 5  # wire_date, an Avro int
_NONE: Final = 6  # no way to read this kind: the general path takes the row
# From here on, shapes written without the value writer unless part of the key.
_INT: Final = 7  # int() of the text, an Avro long
_DOUBLE: Final = 8  # float() of the text
_BOOL: Final = 9  # 't' or 'f'
_TIMESTAMPTZ: Final = 10  # wire_timestamptz, an Avro long

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
# Branch 1, then the Avro long of n (zigzag: 2n): the string lengths that take one byte.
_SOME_SHORT_LENGTHS: Final = tuple(bytes([2, n << 1]) for n in range(64))
# _Column.integer: how a converted value is encoded without its writer.
_AVRO_INT: Final = 1
_AVRO_LONG: Final = 2
_INT_MIN: Final = -(1 << 31)
_INT_MAX: Final = (1 << 31) - 1


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
        # An Avro int or long (dates and times among them) is encoded without the writer.
        self.integer = 0
        if writer is write_int:
            self.integer = _AVRO_INT
        elif writer is write_long:
            self.integer = _AVRO_LONG
        self.decimal_scale = 0
        self.decimal_bound = 0
        if codec.text_shape == "decimal":
            self.decimal_scale = codec.avro_schema.get("scale", 0)
            self.decimal_bound = 10 ** codec.avro_schema["precision"]


class RowPlan:
    """The fused writer of one table version.

    The row's encoding is collected as a list of bytes parts: appending to a list and
    joining once costs less than growing a bytearray part by part, and the caller can
    join the row into its envelope without copying it first (`write_parts`).
    """

    def __init__(self, width: int, columns: list[_Column], key_parts: int) -> None:
        self.width = width  # columns in the Relation message
        self.columns = columns
        self.key_parts = key_parts

    def write(self, kinds: bytes, values: tuple[bytes | None, ...]) -> RowBodies | None:
        parts: list[bytes] = []
        key = self.write_parts(parts, kinds, values)
        return None if key is None else (key, b"".join(parts))

    def write_parts(
        self, parts: list[bytes], kinds: bytes, values: tuple[bytes | None, ...]
    ) -> bytes | None:
        """Append the row record's body to `parts` and return the key record's body (b""
        without a key); None: the general path takes the row (`parts` is then partial)."""
        if len(kinds) != self.width:
            return None
        keys = [b""] * self.key_parts
        try:
            for column in self.columns:
                kind = kinds[column.index]
                if kind == KIND_NULL:
                    if column.key_slot >= 0:
                        return None
                    parts.append(_NULL)
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
                if not _write_value(parts, keys, column, shape, kind == KIND_TEXT, value):
                    return None
        except _FALLBACK_ERRORS:
            return None
        if len(keys) == 1:
            return keys[0]
        return b"".join(keys)


def _write_value(
    parts: list[bytes], keys: list[bytes], column: _Column, shape: int, text: bool, v: bytes
) -> bool:
    """Append one non-NULL value (and set its key part); False sends the row to the general
    path."""
    if shape in (_UTF8, _DECIMAL):
        if shape == _DECIMAL:
            v = _decimal_bytes(v, column.decimal_scale, column.decimal_bound)
        elif not v.isascii():
            v.decode()  # UnicodeDecodeError (a ValueError) for invalid UTF-8
        n = len(v)
        if n < 64:
            parts.append(_SOME_SHORT_LENGTHS[n])
        else:
            parts.append(_SOME)
            parts.append(long_bytes(n))
        parts.append(v)
        if column.key_slot >= 0:
            key = long_bytes(n) + v
            keys[column.key_slot] = _SOME + key if column.key_nullable else key
        return True
    if shape >= _INT and column.key_slot < 0:
        return _write_inline(parts, shape, v)
    x = _convert(column, shape, text, v)
    if x is None:
        parts.append(_NULL)
        if column.key_slot >= 0:
            if not column.key_nullable:
                return False
            keys[column.key_slot] = _NULL
        return True
    body = _encode(column, x)
    parts.append(_SOME)
    parts.append(body)
    if column.key_slot >= 0:
        keys[column.key_slot] = _SOME + body if column.key_nullable else body
    return True


def _encode(column: _Column, x: Any) -> bytes:
    """A converted value's encoding: integers directly, anything else by its writer."""
    if column.integer == _AVRO_LONG:
        return long_bytes(x)
    if column.integer == _AVRO_INT:
        if not _INT_MIN <= x <= _INT_MAX:
            raise ValueError(f"{x} does not fit an Avro int")
        return long_bytes(x)
    out = bytearray()
    column.writer(out, x)
    return bytes(out)


def _write_inline(parts: list[bytes], shape: int, v: bytes) -> bool:
    """A value of the shapes from _INT on, outside the key: no converter, no writer call."""
    if shape == _BOOL:
        if v == b"t":
            parts.append(_TRUE)
        elif v == b"f":
            parts.append(_FALSE)
        else:
            return False
        return True
    parts.append(_SOME)
    if shape == _DOUBLE:
        parts.append(_PACK_DOUBLE(float(v)))
    else:
        parts.append(long_bytes(int(v) if shape == _INT else wire_timestamptz(v)))
    return True


def _convert(column: _Column, shape: int, text: bool, v: bytes) -> Any:
    if shape in (_INT, _INT32):
        return int(v)
    if shape == _TIMESTAMPTZ:
        return wire_timestamptz(v)
    if shape == _DATE:
        return wire_date(v)
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
    "date": _DATE,
}


def _text_shape(codec: ColumnCodec) -> int:
    if codec.text_shape == "int":
        return _INT32 if codec.avro_schema.get("type") == "int" else _INT
    shape = _TEXT_SHAPES.get(codec.text_shape or "")
    if shape is not None:
        return shape
    return _PARSE if codec.text_parse is not None else _CONVERT


def compile_row_writer(table: TableCodec) -> RowPlan | None:
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
    return RowPlan(len(table.relation.columns), columns, len(key_slot))
