"""TupleData → Avro key and row bodies in one pass: the one encoder of a table version's rows.

Built once per table version (when its Relation arrives) from the column types that
`bridge.schema.table.TableCodec` holds. One loop, compiled with the rest of the hot path
(setup.py), reads each column's wire bytes and appends its Avro encoding, dispatching on
the shape its declared wire form (`bridge.schema.pgtypes.Wire`) gives it: text that
already is the Avro string's bytes is copied, integers are parsed by `parse_int` and
zigzag-encoded, numeric(p, s) digits become the decimal's bytes, float8, bool, date and
timestamptz are converted inline; anything else goes through the column's converter
(`bridge.encode.columns`) and its compiled value writer (`bridge.encode.avro`). Binary
values (binary tuples, a snapshot's binary COPY) take the same shapes where their send
format allows: a float8's bytes are the Avro double's reversed, an integer, date or
timestamp is read byte by byte (`binvalues.signed_be`), a jsonb is its text after a
version byte and a uuid's text is printed from its 16 bytes.

Everything unusual is handled here too, for text and binary tuples alike: an unchanged
TOASTed value (filled from a REPLICA IDENTITY FULL old row, a placeholder, or NULL and
listed), a NaN numeric (NULL), a NULL key column, a value its schema cannot hold and a
column count that disagrees with the Relation message each end in a typed error
(`ValueConversionError`, `ProtocolError`, `SchemaError`). A field with a default lists its
union's value branch first ([T, "null"]); each column carries its own branch bytes, so such a
field takes the same path as any other. Equality with fastavro on the
registered schema is tested byte for byte (tests/encode/test_plan.py).
"""

from __future__ import annotations

import struct
from typing import Any, Final

from bridge.config import ColumnRule
from bridge.decode.messages import KIND_BINARY, KIND_NULL, KIND_TEXT, KIND_UNCHANGED, Column
from bridge.encode.avro import Writer, compile_value_writer, decimal_bytes, long_bytes
from bridge.encode.binvalues import (
    float8_avro,
    jsonb_text,
    numeric_unscaled,
    parse_date,
    parse_timestamp,
    signed_be,
    uuid_text,
)
from bridge.encode.columns import (
    BAD_INPUT,
    Converter,
    array_text,
    codec_of,
    special_text,
    text_is_value,
)
from bridge.encode.rewrite import rewritten
from bridge.encode.textvalues import parse_int, parse_unscaled, wire_date, wire_timestamptz
from bridge.errors import ProtocolError, SchemaError, ValueConversionError
from bridge.schema.pgtypes import ColumnType, Wire
from bridge.schema.table import UNAVAILABLE, TableCodec

RowBodies = tuple[bytes, bytes]  # (key record body, or b"" without a key; row record body)

# Column shapes, by how the loop writes a text (or binary) value.
_CONVERT: Final = 0  # the converter, then the value writer (integers directly)
_UTF8: Final = 1  # the wire bytes are the Avro string's bytes (validated as UTF-8)
_DECIMAL: Final = 2  # numeric(p, s) text or send format -> the decimal's two's-complement bytes
_JSONB: Final = 3  # binary: the jsonb's text after its version byte
_UUID: Final = 4  # binary: the uuid's text printed from its 16 bytes
# From here on, shapes written without converter and writer unless part of the key.
_INT: Final = 7  # parse_int of the text (the 8 bytes of an int8), an Avro long
_DOUBLE: Final = 8  # float() of the text (the send format's bytes reversed)
_BOOL: Final = 9  # 't' or 'f' (1 or 0)
_TIMESTAMPTZ: Final = 10  # wire_timestamptz (parse_timestamp), an Avro long
_DATE: Final = 11  # wire_date (parse_date), an Avro int

_PACK_DOUBLE: Final = struct.Struct("<d").pack
# Called through the method descriptor: compiled, `v.isascii()` looks the method up by name
# on every value.
_IS_ASCII: Final = bytes.isascii
# A union's branch index as its first byte (the Avro long 0 or 1, zigzag: 0x00 or 0x02):
# in ["null", T] (every key field and most row fields) null is branch 0, the value 1; a
# row field with a default is [T, "null"], the other way round (`_Column.null`, `.some`).
_NULL: Final = b"\x00"  # union branch 0 of ["null", T]
_SOME: Final = b"\x02"  # union branch 1 of ["null", T]
# By the value's branch byte, that byte then the Avro long of n (zigzag: 2n): the string
# lengths that take one byte.
_SHORT_LENGTHS: Final = {
    some: tuple(some + bytes([n << 1]) for n in range(64)) for some in (_NULL, _SOME)
}
# numeric's specials: a decimal has none, so they are NULL (ColumnType.may_be_null).
_NUMERIC_SPECIAL: Final = frozenset((b"NaN", b"Infinity", b"-Infinity"))
# _Column.integer: how a converted value is encoded without its writer.
_AVRO_INT: Final = 1
_AVRO_LONG: Final = 2
_INT_MIN: Final = -(1 << 31)
_INT_MAX: Final = (1 << 31) - 1
_LONG_MIN: Final = -(1 << 63)
_LONG_MAX: Final = (1 << 63) - 1
# A special value: (Avro field name, PostgreSQL's text of the value).
Special = tuple[str, str]
# Text shapes declared by the wire form alone (the others: _CONVERT, or _UTF8 by
# `text_is_value`).
_TEXT_SHAPES: Final = {
    Wire.DECIMAL: _DECIMAL,
    Wire.INT8: _INT,
    Wire.UINT4: _INT,
    Wire.UINT8: _INT,
    Wire.FLOAT8: _DOUBLE,
    Wire.NUMERIC_DOUBLE: _DOUBLE,
    Wire.BOOL: _BOOL,
    Wire.TIMESTAMPTZ: _TIMESTAMPTZ,
}
# Binary shapes: text's send format is its text; the text shapes whose binary reading is
# inline too; the two string shapes whose send format is not the text.
_BINARY_SHAPES: Final = {
    Wire.TEXT: _UTF8,
    Wire.DECIMAL: _DECIMAL,
    Wire.INT8: _INT,
    Wire.FLOAT8: _DOUBLE,
    Wire.BOOL: _BOOL,
    Wire.TIMESTAMPTZ: _TIMESTAMPTZ,
    Wire.JSONB: _JSONB,
    Wire.UUID: _UUID,
}


class Toast:
    """How one new tuple's unchanged TOASTed values are written: from the old row's
    column parts (`fill`: REPLICA IDENTITY FULL's whole row, or the old key's columns),
    else as the type's placeholder (`placeholders`) or NULL; the names of those not
    filled collect in `unchanged`."""

    def __init__(self, fill: list[bytes] | None, placeholders: bool) -> None:
        self.fill = fill
        self.placeholders = placeholders
        self.unchanged: list[str] = []


class _Column:
    """One kept column: where its value is and how each wire kind is written."""

    def __init__(
        self,
        table: str,
        name: str,
        column: Column,
        index: int,
        pos: int,
        t: ColumnType,
        key_slot: int,
        specials: list[Special],
        rules: tuple[ColumnRule, ...] = (),
        value_first: bool = False,
    ) -> None:
        codec = codec_of(t)
        avro_type = t.avro_schema.get("type")
        self.table = table
        self.name = name  # the Avro field's
        self.pg_name = column.name
        self.type_oid = column.type_oid
        self.pg_type = t.pg_type_name
        self.index = index  # in the Relation message
        self.pos = pos  # among the kept columns
        self.key_slot = key_slot  # -1: not a key column
        self.key_nullable = t.may_be_null
        # The row field's union branches as written: ["null", T], or [T, "null"] for a
        # column with a default (`value_first`). Each part of the row is written with
        # these, so such a column costs what any other does.
        self.null, self.some = (_SOME, _NULL) if value_first else (_NULL, _SOME)
        self.short_lengths = _SHORT_LENGTHS[self.some]
        self.true_part = self.some + b"\x01"  # the value's branch, then the boolean
        self.false_part = self.some + b"\x00"
        self.text = codec.text
        # a type without a send function: pgoutput sends it as text in binary mode too
        self.has_binary, self.sent_as_text = codec.binary is not None, t.sent_as_text
        self.binary: Converter = codec.binary or self._no_binary
        self.text_shape = _TEXT_SHAPES.get(t.wire, _CONVERT)
        if text_is_value(t.wire) and avro_type == "string":
            self.text_shape = _UTF8
        self.binary_shape = _BINARY_SHAPES.get(t.wire, _CONVERT)
        if self.binary_shape in (_JSONB, _UUID) and self.text_shape != _UTF8:
            self.binary_shape = _CONVERT  # jsonb and uuid as strings only, as their text
        self.writer: Writer = compile_value_writer(t.avro_schema)
        # An Avro int or long (dates and times among them) is encoded without the writer.
        self.integer = 0
        if avro_type == "int":
            self.integer = _AVRO_INT
        elif avro_type == "long":
            self.integer = _AVRO_LONG
        if t.wire == Wire.DATE and self.integer == _AVRO_INT:
            self.text_shape = self.binary_shape = _DATE
        self.decimal_scale = 0
        self.decimal_bound = 0
        if t.wire == Wire.DECIMAL:
            self.decimal_scale = t.avro_schema.get("scale", 0)
            self.decimal_bound = 10 ** t.avro_schema["precision"]
        if rules:  # avro.column_rules: through the converter, then the rewrites
            self.text = rewritten(self.text, rules)
            self.binary = rewritten(self.binary, rules)
            self.text_shape = self.binary_shape = _CONVERT
        # Values outside (low, high) are clamped and reported in `specials` (shared with
        # the plan); NaN numerics (converted to None) are reported too. `checked`: the
        # converted values of this column need the test; inline timestamptz values are
        # compared always, against the whole long range when not bounded.
        self.specials = specials
        self.low, self.high = t.bounds or (_LONG_MIN, _LONG_MAX)
        self.clamped_elements = codec.clamped  # arrays of bounded or NaN-able elements
        self.bounded = t.bounds is not None  # a scalar with bounds: its values are ints
        self.checked = (
            t.bounds is not None
            or codec.clamped is not None
            or t.wire in (Wire.DECIMAL, Wire.NUMERIC_VARIABLE)
        )
        self.special_text: Converter = special_text(t.wire) or array_text(t) or _utf8
        self.placeholder = self.null  # an unchanged TOASTed value in `placeholder` mode
        if avro_type in ("string", "bytes") and "logicalType" not in t.avro_schema:
            self.placeholder = self.some + _string_body(UNAVAILABLE.encode())

    def _no_binary(self, raw: bytes) -> Any:
        raise SchemaError(
            f"{self.table}.{self.pg_name} ({self.pg_type}, oid {self.type_oid}): the type has "
            "no binary decoder",
            hint="set source.binary: false (text mode handles every type)",
        )

    def error(self, value: object, reason: object) -> ValueConversionError:
        return ValueConversionError(self.table, self.pg_name, self.pg_type, value, reason)

    def special(self, raw: bytes, text: bool) -> None:
        """Report a value its schema cannot hold with PostgreSQL's text of it."""
        self.specials.append((self.name, raw.decode() if text else self.special_text(raw)))

    def check(self, x: Any, raw: bytes, text: bool) -> Any:
        """A converted value of a `checked` column: NaN (None) reported, a bounded value
        outside (low, high) clamped, an array with clamped elements reported. Numerics are
        checked for NaN only: their values are no ints (a VariableScaleDecimal record)."""
        clamped = self.clamped_elements
        if clamped is not None:
            if clamped:
                clamped.clear()
                self.special(raw, text)
            return x
        if x is None:
            self.special(raw, text)
        elif self.bounded and not self.low <= x <= self.high:
            return self.clamped(x, raw, text)
        return x

    def clamped(self, x: int, raw: bytes, text: bool) -> int:
        """A value outside (low, high): reported, and the nearest bound written."""
        self.special(raw, text)
        return self.low if x < self.low else self.high


def _utf8(raw: bytes) -> str:
    return raw.decode()


def _string_body(data: bytes) -> bytes:
    return long_bytes(len(data)) + data


def check_binary(table: TableCodec) -> None:
    """Binary tuples need a binary converter for every kept column the server sends in
    binary (`RowPlan.check_binary`); say which one lacks it."""
    RowPlan(table).check_binary()


class RowPlan:
    """The compiled writer of one table version's keys and rows.

    The row's encoding is collected as a list of bytes parts: appending to a list and
    joining once costs less than growing a bytearray part by part, and the caller can
    join the row into its envelope without copying it first (`write_parts`).
    """

    def __init__(self, table: TableCodec) -> None:
        relation = table.relation
        label = f"{relation.namespace}.{relation.name}"
        self.label = label
        self.width = len(relation.columns)  # columns in the Relation message
        key_slot = {pos: n for n, pos in enumerate(table.key_positions)}
        # positions whose row field is [T, "null"] (a default from attmissingval)
        defaulted = frozenset(table.defaulted)
        # The special values of the row written last (see `take_specials`); empty
        # unless a value fell outside its schema, so the common row costs nothing.
        self.specials: list[Special] = []
        self.columns = [
            _Column(
                label,
                name,
                relation.columns[index],
                index,
                pos,
                t,
                key_slot.get(pos, -1),
                self.specials,
                rules,
                pos in defaulted,
            )
            for pos, (index, name, t, rules) in enumerate(
                zip(table.kept, table.field_names, table.types, table.rules, strict=True)
            )
        ]
        self.key_parts = len(key_slot)

    def check_binary(self, every_column: bool = False) -> None:
        """Binary tuples need a binary converter for every kept column the server sends in
        binary; say which one lacks it. pgoutput sends a value in binary only where its
        type has a send function, so a type without one passes here unless `every_column`
        (binary COPY, which the server refuses for such a type anyway)."""
        for column in self.columns:
            if not column.has_binary and (every_column or not column.sent_as_text):
                column.binary(b"")

    def write(
        self, kinds: bytes, values: tuple[bytes | None, ...], toast: Toast | None = None
    ) -> RowBodies:
        parts: list[bytes] = []
        key = self.write_parts(parts, kinds, values, toast)
        return key, b"".join(parts)

    def write_parts(
        self,
        parts: list[bytes],
        kinds: bytes,
        values: tuple[bytes | None, ...],
        toast: Toast | None = None,
        ends: list[int] | None = None,
    ) -> bytes:
        """Append the row record's body to `parts` and return the key record's body (b""
        without a key). Unchanged TOASTed values are NULL without `toast` (an old row);
        `ends` collects where each column's parts end (`write_columns`)."""
        if len(kinds) != self.width:
            raise self._width_error(kinds)
        keys = [b""] * self.key_parts
        try:
            for column in self.columns:
                kind = kinds[column.index]
                if kind in (KIND_TEXT, KIND_BINARY):
                    value = values[column.index]
                    if value is None:
                        raise _without_bytes(column)
                    text = kind == KIND_TEXT
                    shape = column.text_shape if text else column.binary_shape
                    _write_value(parts, keys, column, shape, text, value)
                elif kind == KIND_NULL:
                    parts.append(column.null)
                    if column.key_slot >= 0:
                        _key_from(keys, column, column.null, None)
                else:
                    _write_absent(parts, keys, column, kind, toast)
                if ends is not None:
                    ends.append(len(parts))
        except BAD_INPUT as exc:
            self._discard_specials(column)
            raise column.error(values[column.index], exc) from exc
        return keys[0] if len(keys) == 1 else b"".join(keys)

    def _discard_specials(self, column: _Column) -> None:
        """A row that is not written: nor are its special values."""
        self.specials.clear()
        if column.clamped_elements:
            column.clamped_elements.clear()

    def take_specials(self, prefix: str, into: dict[str, str]) -> None:
        """Move the special values of the row written last into `into`, keyed
        "<prefix><field>" as the envelope's special_values map has them."""
        for name, text in self.specials:
            into[prefix + name] = text
        self.specials.clear()

    def write_columns(
        self, kinds: bytes, values: tuple[bytes | None, ...]
    ) -> tuple[bytes, list[bytes]]:
        """The key body and each column's encoding apart: an old row whose values fill
        the new row's unchanged TOASTed columns (joined, they are its row body)."""
        parts: list[bytes] = []
        ends: list[int] = []
        key = self.write_parts(parts, kinds, values, None, ends)
        columns = []
        start = 0
        for end in ends:
            columns.append(b"".join(parts[start:end]))
            start = end
        return key, columns

    def _width_error(self, kinds: bytes) -> ProtocolError:
        return ProtocolError(
            "tuple",
            0,
            f"{len(kinds)} columns for {self.label}, whose Relation message has {self.width}",
        )


def _without_bytes(column: _Column) -> ProtocolError:
    return ProtocolError("tuple", 0, f"{column.table}.{column.pg_name}: a value without bytes")


def _write_absent(
    parts: list[bytes], keys: list[bytes], column: _Column, kind: int, toast: Toast | None
) -> None:
    """An unchanged TOASTed value: the old row's, the placeholder, or NULL."""
    if kind != KIND_UNCHANGED:
        raise ProtocolError("tuple", 0, f"{column.table}.{column.pg_name}: unknown kind {kind}")
    part = column.null
    if toast is not None:
        fill = toast.fill
        if fill is not None:
            part = fill[column.pos]
        if part == column.null:
            if toast.placeholders:
                part = column.placeholder
            toast.unchanged.append(column.name)
    parts.append(part)
    if column.key_slot >= 0:
        _key_from(keys, column, part, None)


def _key_from(keys: list[bytes], column: _Column, part: bytes, value: object) -> None:
    """A key column's part from its row part (NULL or a value, in the row field's union):
    T in the key, or ["null", T] where the type can convert to NULL."""
    if part == column.null:
        if not column.key_nullable:
            raise column.error(value, "NULL in a column of the record key")
        keys[column.key_slot] = _NULL
    else:
        keys[column.key_slot] = _SOME + part[1:] if column.key_nullable else part[1:]


def _write_value(
    parts: list[bytes], keys: list[bytes], column: _Column, shape: int, text: bool, v: bytes
) -> None:
    """Append one non-NULL value (and set its key part)."""
    if _UTF8 <= shape <= _UUID:  # an Avro string, or a decimal's bytes
        body = _string_bytes(column, shape, text, v)
        if body is None:  # NaN, ±Infinity: a decimal has none
            column.special(v, text)
            _write_converted(parts, keys, column, None, v)
            return
        v = body
        n = len(v)
        if n < 64:
            parts.append(column.short_lengths[n])
        else:
            parts.append(column.some)
            parts.append(long_bytes(n))
        parts.append(v)
        if column.key_slot >= 0:
            key = long_bytes(n) + v
            keys[column.key_slot] = _SOME + key if column.key_nullable else key
        return
    if shape >= _INT and column.key_slot < 0:
        _write_inline(parts, column, shape, text, v)
        return
    x = column.text(v) if text else column.binary(v)
    # a bounded scalar within its bounds (the common case) needs no call
    if column.checked and not (column.bounded and column.low <= x <= column.high):
        x = column.check(x, v, text)
    _write_converted(parts, keys, column, x, v)


def _write_converted(
    parts: list[bytes], keys: list[bytes], column: _Column, x: Any, raw: bytes
) -> None:
    if x is None:
        parts.append(column.null)
        if column.key_slot >= 0:
            _key_from(keys, column, column.null, raw)
        return
    body = _encode(column, x)
    parts.append(column.some)
    parts.append(body)
    if column.key_slot >= 0:
        keys[column.key_slot] = _SOME + body if column.key_nullable else body


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


def _write_inline(parts: list[bytes], column: _Column, shape: int, text: bool, v: bytes) -> None:
    """A value of the shapes from _INT on, outside the key: no converter, no writer call."""
    if shape == _BOOL:
        if v == (b"t" if text else b"\x01"):
            parts.append(column.true_part)
        elif v == (b"f" if text else b"\x00"):
            parts.append(column.false_part)
        else:
            raise ValueError("a boolean is 't' or 'f'" if text else "a boolean is 1 or 0")
        return
    parts.append(column.some)
    if shape == _DOUBLE:
        parts.append(_PACK_DOUBLE(float(v)) if text else float8_avro(v))
    elif shape == _INT:
        parts.append(long_bytes(parse_int(v) if text else signed_be(v, 8)))
    else:  # a timestamptz or a date: clamped into the schema's bounds, if it has them
        if shape == _TIMESTAMPTZ:
            x = wire_timestamptz(v) if text else parse_timestamp(v)
        else:
            x = wire_date(v) if text else parse_date(v)
        if not column.low <= x <= column.high:
            x = column.clamped(x, v, text)
        if shape == _DATE and not _INT_MIN <= x <= _INT_MAX:  # unbounded (no clamp)
            raise ValueError(f"{x} does not fit an Avro int")
        parts.append(long_bytes(x))


def _string_bytes(column: _Column, shape: int, text: bool, v: bytes) -> bytes | None:
    """The bytes of an Avro string or decimal (shapes _UTF8 to _UUID), without their
    length; None for a numeric's NaN and ±Infinity."""
    if shape == _DECIMAL:
        unscaled = _unscaled(v, column.decimal_scale, text)
        if unscaled is None:
            return None
        if not -column.decimal_bound < unscaled < column.decimal_bound:
            raise ValueError("more digits than the precision")
        return decimal_bytes(unscaled)
    if shape == _UUID:
        return uuid_text(v)  # hex digits and dashes: valid UTF-8
    if shape == _JSONB:
        v = jsonb_text(v)
    if not _IS_ASCII(v):
        v.decode()  # UnicodeDecodeError (a ValueError) for invalid UTF-8
    return v


def _unscaled(v: bytes, scale: int, text: bool) -> int | None:
    """A numeric(p, s) value's unscaled integer from its text or send format; None for
    NaN and ±Infinity. ValueError for more fraction digits than the scale."""
    if not text:
        return numeric_unscaled(v, scale)
    try:
        return parse_unscaled(v, scale)
    except ValueError:
        # NaN and ±Infinity parse as no number: looked for only when one fails
        if v not in _NUMERIC_SPECIAL:
            raise
        return None
