"""Avro binary writers compiled once per schema: a faster stand-in for fastavro's writer.

fastavro interprets the schema for every datum (type dispatch, union branch search,
logical-type hooks). The schemas TableCodec builds use a small subset of Avro, so a
tree of closures specialised to the schema, built once per relation version, writes
the same bytes with less work per row. Output is byte-for-byte fastavro's (see
tests/schema/test_fastwriter.py): zigzag varints, one block per non-empty array or
map, and decimals sized as fastavro sizes them.

`compile_writer` raises SchemaError for constructs outside the subset (unions other
than ["null", T] and [T, "null"], enums, fixed), so a caller can fall back to fastavro.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

from fastavro import parse_schema
from mypy_extensions import i64

from bridge.errors import SchemaError

Writer = Callable[[bytearray, Any], None]
_FLOAT: Final = struct.Struct("<f").pack
_DOUBLE: Final = struct.Struct("<d").pack
_LONG_MIN: Final = -(1 << 63)
_LONG_MAX: Final = (1 << 63) - 1
_INT_MIN: Final = -(1 << 31)
_INT_MAX: Final = (1 << 31) - 1
_ZIGZAG_MIN: Final = -(1 << 62)  # zigzag of [-2**62, 2**62) fits a signed 64-bit int
_ZIGZAG_MAX: Final = (1 << 62) - 1
_GATHERED_MAX: Final = 1 << 56  # zigzag values of at most 8 varint bytes
_ONE_BYTE: Final = tuple(bytes([n]) for n in range(0x80))
_PACK_9: Final = struct.Struct("<qB").pack  # a 9-byte varint: 8 bytes as an i64, then 1


def long_bytes(value: int) -> bytes:
    """The Avro long `value` (a zigzag varint) as bytes, for writers that collect parts."""
    if _ZIGZAG_MIN <= value <= _ZIGZAG_MAX:
        # native 64-bit arithmetic once compiled (mypyc's i64), instead of tagged ints
        v: i64 = value
        n: i64 = (v << 1) ^ (v >> 63)
        if n < 0x80:
            return _ONE_BYTE[n]
        acc: i64 = 0
        shift: i64 = 0
        if n < _GATHERED_MAX:
            # up to 8 varint bytes gathered in one int and converted at once
            while n > 0x7F:
                acc |= ((n & 0x7F) | 0x80) << shift
                shift += 8
                n >>= 7
            acc |= n << shift
            whole: int = acc
            # both as int, not i64: only then is to_bytes compiled to a direct call
            size: int = (shift >> 3) + 1
            return whole.to_bytes(size, "little")
        # 9 varint bytes (random 64-bit ids, hashes): the first seven gathered as above,
        # the eighth added as the top byte of a signed i64 (its continuation bit is the
        # sign bit), packed with the ninth in one call
        while shift < 56:
            acc |= ((n & 0x7F) | 0x80) << shift
            shift += 8
            n >>= 7
        eighth: i64 = (n & 0x7F) | 0x80
        return _PACK_9(acc + (eighth - 0x100) * _GATHERED_MAX, n >> 7)
    elif not _LONG_MIN <= value <= _LONG_MAX:
        raise ValueError(f"{value} does not fit an Avro long")
    return _zigzag_bytes((value << 1) ^ (value >> 63))


def _zigzag_bytes(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decimal_bytes(unscaled: int) -> bytes:
    """An Avro decimal's bytes: big-endian two's complement of the unscaled value, one byte
    per started 8 bits of its magnitude plus a sign bit, as fastavro and Debezium size it
    (not always the minimum: -128 takes two bytes). The one decimal sizing of the bridge."""
    return unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)


def write_long(out: bytearray, value: int) -> None:
    out += long_bytes(value)


def write_int(out: bytearray, value: int) -> None:
    if not _INT_MIN <= value <= _INT_MAX:
        raise ValueError(f"{value} does not fit an Avro int")
    write_long(out, value)


def _write_bytes(out: bytearray, value: bytes) -> None:
    write_long(out, len(value))
    out += value


def _write_string(out: bytearray, value: str) -> None:
    data = value.encode()
    write_long(out, len(data))
    out += data


def _write_uuid(out: bytearray, value: Any) -> None:
    _write_string(out, value if isinstance(value, str) else str(value))


def _write_boolean(out: bytearray, value: bool) -> None:
    out.append(1 if value else 0)


def _write_float(out: bytearray, value: float) -> None:
    out += _FLOAT(value)


def _write_double(out: bytearray, value: float) -> None:
    out += _DOUBLE(value)


def _write_null(out: bytearray, value: None) -> None:
    return None


def _decimal_writer(precision: int, scale: int) -> Writer:
    def write(out: bytearray, value: Any) -> None:
        if not isinstance(value, Decimal):
            _write_bytes(out, value)
            return
        sign, digits, exp = value.as_tuple()
        delta = int(exp) + scale
        if delta < 0:
            raise ValueError(f"{value} has more than {scale} fraction digits")
        if len(digits) + delta > precision:  # checked before 10**delta: 1e999999999 is cheap
            raise ValueError(f"{value} has more than {precision} digits at scale {scale}")
        unscaled = int("".join(map(str, digits))) * 10**delta
        _write_bytes(out, decimal_bytes(-unscaled if sign else unscaled))

    return write


_PRIMITIVES: Final[dict[str, Writer]] = {
    "null": _write_null,
    "boolean": _write_boolean,
    "int": write_int,
    "long": write_long,
    "float": _write_float,
    "double": _write_double,
    "bytes": _write_bytes,
    "string": _write_string,
}


def _nullable(inner: Writer, null_first: bool = True) -> Writer:
    """["null", T] (or [T, "null"], as Debezium's source.snapshot); a (name, value) tuple
    (fastavro's branch notation) is unwrapped."""
    null_tag, some_tag = (0, 2) if null_first else (2, 0)  # zigzag(0), zigzag(1)

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            out.append(null_tag)
            return
        if type(value) is tuple:
            value = value[1]
        out.append(some_tag)
        inner(out, value)

    return write


def _record(fields: list[tuple[str, Writer]]) -> Writer:
    def write(out: bytearray, value: Any) -> None:
        for name, field in fields:
            field(out, value[name])

    return write


def _array(items: Writer) -> Writer:
    def write(out: bytearray, value: Any) -> None:
        if value:
            write_long(out, len(value))
            for item in value:
                items(out, item)
        out.append(0)

    return write


def _map(values: Writer) -> Writer:
    def write(out: bytearray, value: Any) -> None:
        if value:
            write_long(out, len(value))
            for key, item in value.items():
                _write_string(out, key)
                values(out, item)
        out.append(0)

    return write


class _Compiler:
    def __init__(self) -> None:
        self.named: dict[str, Writer] = {}

    def compile(self, schema: Any) -> Writer:
        if isinstance(schema, str):
            found = _PRIMITIVES.get(schema) or self.named.get(schema)
            if found is None:
                raise SchemaError(f"fastwriter: unknown type name {schema!r}")
            return found
        if isinstance(schema, list):
            return self._union(schema)
        kind = schema.get("type")
        logical = schema.get("logicalType")
        if kind == "record":
            fields = [(f["name"], self.compile(f["type"])) for f in schema["fields"]]
            writer = _record(fields)
            self.named[schema["name"]] = writer
            return writer
        if kind == "array":
            return _array(self.compile(schema["items"]))
        if kind == "map":
            return _map(self.compile(schema["values"]))
        if kind == "bytes" and logical == "decimal":
            return _decimal_writer(schema["precision"], schema.get("scale", 0))
        if kind == "string" and logical == "uuid":
            return _write_uuid
        if isinstance(kind, str | list):
            return self.compile(kind)  # date/time/timestamp values are already numbers
        raise SchemaError(f"fastwriter: unsupported schema {schema!r}")

    def _union(self, branches: list[Any]) -> Writer:
        if len(branches) != 2 or "null" not in branches or branches[0] == branches[1]:
            raise SchemaError(
                f"fastwriter: only [null, T] and [T, null] unions are supported, not {branches}"
            )
        null_first = branches[0] == "null"
        return _nullable(self.compile(branches[1 if null_first else 0]), null_first)


def compile_value_writer(schema: Any) -> Writer:
    """The `(out, value)` writer of one schema, for writers composed elsewhere (rowwriter)."""
    return _Compiler().compile(parse_schema(schema))


def compile_writer(schema: dict[str, Any] | list[Any]) -> Callable[[Any], bytes]:
    """Avro binary (no framing) of a datum of `schema`; raises SchemaError if unsupported."""
    write = _Compiler().compile(parse_schema(schema))

    def encode(datum: Any) -> bytes:
        out = bytearray()
        write(out, datum)
        return bytes(out)

    return encode
