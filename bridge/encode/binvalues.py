"""Parsers for PostgreSQL's binary (send/recv) format: `bytes` -> Avro-ready value.

Every parser yields exactly what the matching `textvalues` parser yields for the
same datum. Lengths are checked (ValueError, or struct.error from the fixed-size struct
formats, on a short or long buffer); the encoder maps such errors to ValueConversionError.
The integers, timestamps, dates, numerics and uuids of a snapshot's binary COPY and of
binary tuples are read byte by byte (`signed_be`): compiled, that is native arithmetic,
where a `struct` call builds a tuple per value.
"""

from __future__ import annotations

import binascii
import struct
from decimal import Decimal
from typing import Any, Final

from mypy_extensions import i64

from bridge.encode.avro import decimal_bytes
from bridge.encode.temporal import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    PG_EPOCH_DAYS,
    PG_EPOCH_US,
)
from bridge.encode.textvalues import INTERVAL_INFINITY, INTERVAL_MINUS_INFINITY
from bridge.source.wire import u16

_I32: Final = struct.Struct(">i")
_U32: Final = struct.Struct(">I")
_I64: Final = struct.Struct(">q")
_U64: Final = struct.Struct(">Q")
_F32: Final = struct.Struct(">f")
_F64: Final = struct.Struct(">d")
_INTERVAL: Final = struct.Struct(">qii")
_BOOL: Final = {b"\x01": True, b"\x00": False}
# Called unbound: compiled, a method call on a value looks the method up by name.
_HEX: Final = binascii.hexlify
_DASH_JOIN: Final = b"-".join
# 10**n for the shifts of a numeric's digits to its display scale (more: pow)
_POW10: Final = tuple(10**n for n in range(19))
_NUMERIC_POS, _NUMERIC_NEG = 0x0000, 0x4000
_NUMERIC_SPECIAL: Final = {0xC000: "NaN", 0xD000: "Infinity", 0xF000: "-Infinity"}


def parse_bool(data: bytes) -> bool:
    return _BOOL[data]


def signed_be(data: bytes, size: i64) -> i64:
    """The big-endian two's-complement integer of exactly `size` (at most 8) bytes."""
    if len(data) != size:
        raise ValueError(f"{size} bytes expected, got {len(data)}")
    x: i64 = data[0]
    if x >= 128:
        x -= 256
    i: i64 = 1
    while i < size:
        byte: i64 = data[i]
        x = (x << 8) | byte
        i += 1
    return x


def parse_int2(data: bytes) -> int:
    return signed_be(data, 2)


def parse_int4(data: bytes) -> int:
    return signed_be(data, 4)


def parse_uint4(data: bytes) -> int:
    return int(_U32.unpack(data)[0])


def parse_int8(data: bytes) -> int:
    return signed_be(data, 8)


def parse_uint8(data: bytes) -> int:
    return int(_U64.unpack(data)[0])


def parse_float4(data: bytes) -> float:
    return float(_F32.unpack(data)[0])


def parse_float8(data: bytes) -> float:
    return float(_F64.unpack(data)[0])


def float8_avro(data: bytes) -> bytes:
    """An Avro double's bytes from float8's send format: the same IEEE 754 bits, stored
    little-endian where the server sends them big-endian."""
    if len(data) != 8:
        raise ValueError(f"float8 needs 8 bytes, got {len(data)}")
    return data[::-1]


def parse_bytea(data: bytes) -> bytes:
    return bytes(data)


def parse_utf8(data: bytes) -> str:
    return data.decode()


def jsonb_text(data: bytes) -> bytes:
    """jsonb_send prefixes its text with format version 1."""
    if data[:1] != b"\x01":
        raise ValueError(f"unsupported jsonb format version {data[:1]!r}")
    return data[1:]


def parse_jsonb(data: bytes) -> str:
    return jsonb_text(data).decode()


def uuid_text(data: bytes) -> bytes:
    """uuid_out's text (8-4-4-4-12 lowercase hex digits) of a uuid's 16 bytes."""
    if len(data) != 16:
        raise ValueError(f"uuid needs 16 bytes, got {len(data)}")
    h = _HEX(data)
    return _DASH_JOIN((h[:8], h[8:12], h[12:16], h[16:20], h[20:]))


def parse_uuid(data: bytes) -> str:
    return uuid_text(data).decode()


def parse_date(data: bytes) -> int:
    days = signed_be(data, 4)
    if days in (INT32_MAX, INT32_MIN):
        return days
    return days + PG_EPOCH_DAYS


def parse_timestamp(data: bytes) -> int:
    """Unix microseconds, infinity kept as the int64 sentinels and what lies past 294247 AD
    (valid in PostgreSQL) clamped to the Avro long's end, as `clamp_us` would: in i64,
    where comparing tagged ints with the int64 bounds takes a slow path."""
    pg_us = signed_be(data, 8)
    if pg_us in (INT64_MAX, INT64_MIN):
        return pg_us
    if pg_us > INT64_MAX - PG_EPOCH_US:
        return INT64_MAX
    return pg_us + PG_EPOCH_US


def parse_time(data: bytes) -> int:
    return signed_be(data, 8)


def parse_interval(data: bytes) -> dict[str, int]:
    micros, days, months = _INTERVAL.unpack(data)
    if (micros, days, months) == (INT64_MAX, INT32_MAX, INT32_MAX):
        return dict(INTERVAL_INFINITY)
    if (micros, days, months) == (INT64_MIN, INT32_MIN, INT32_MIN):
        return dict(INTERVAL_MINUS_INFINITY)
    return {"months": months, "days": days, "micros": micros}


def parse_money(data: bytes) -> Decimal:
    return Decimal(f"{_I64.unpack(data)[0]}E-2")


def numeric_fields(data: bytes) -> tuple[int, int] | str:
    """(unscaled, display scale) of a finite numeric, else "NaN"/"Infinity"/"-Infinity".

    Base-10000 digits are summed into one integer and truncated to the display
    scale, exactly as numeric_out prints them.
    """
    size: i64 = len(data)
    if size < 8:
        raise ValueError(f"numeric needs an 8-byte header, got {size} bytes")
    ndigits = _int16(data, 0)
    weight = _int16(data, 2)
    sign = u16(data, 4)
    dscale = _int16(data, 6)
    if ndigits == 0 and sign in _NUMERIC_SPECIAL:
        return _NUMERIC_SPECIAL[sign]
    if sign not in (_NUMERIC_POS, _NUMERIC_NEG) or ndigits < 0 or dscale < 0:
        raise ValueError(f"bad numeric header sign=0x{sign:04x} ndigits={ndigits}")
    if size != 8 + 2 * ndigits:
        raise ValueError(f"numeric with {ndigits} digits has {size} bytes")
    value: int = 0  # not i64: a numeric has up to 131072 digits before its point
    pos: i64 = 8
    while pos < size:
        digit: int = _int16(data, pos)
        if not 0 <= digit < 10_000:
            raise ValueError(f"bad numeric digit {digit}")
        value = value * 10_000 + digit
        pos += 2
    shift = 4 * (weight - ndigits + 1) + dscale
    if shift >= 0:
        value *= _POW10[shift] if shift < 19 else 10**shift
    else:
        value //= _POW10[-shift] if shift > -19 else 10**-shift
    return (-value if sign == _NUMERIC_NEG else value), dscale


def _int16(data: bytes, pos: i64) -> i64:
    """The signed big-endian 16-bit integer at `pos` (the caller checked the length)."""
    x = u16(data, pos)
    return x - 0x10000 if x >= 0x8000 else x


def numeric_unscaled(data: bytes, scale: int) -> int | None:
    """A finite numeric times 10**scale: the unscaled integer of a numeric(p, scale)
    value (ValueError for more fraction digits than `scale`); None for NaN and
    ±Infinity, which a decimal has not."""
    fields = numeric_fields(data)
    if isinstance(fields, str):
        return None
    unscaled, dscale = fields
    if dscale > scale:
        raise ValueError("more fraction digits than the scale")
    shift = scale - dscale
    factor: int = _POW10[shift] if shift < 19 else 10**shift
    return unscaled * factor


def numeric_text(data: bytes) -> str:
    """numeric_out's text: plain notation with exactly dscale fraction digits."""
    fields = numeric_fields(data)
    if isinstance(fields, str):
        return fields
    unscaled, scale = fields
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    sign = "-" if unscaled < 0 else ""
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}" if scale else f"{sign}{digits}"


def parse_decimal(data: bytes) -> Decimal | None:
    fields = numeric_fields(data)
    if isinstance(fields, str):
        return None
    unscaled, scale = fields
    return Decimal(f"{unscaled}E-{scale}")


def parse_numeric_double(data: bytes) -> float:
    return float(numeric_text(data))


def parse_variable_decimal(data: bytes) -> dict[str, Any] | None:
    fields = numeric_fields(data)
    if isinstance(fields, str):
        return None
    unscaled, scale = fields
    return {"scale": scale, "value": decimal_bytes(unscaled)}


def parse_hstore(data: bytes) -> dict[str, str | None]:
    """hstore_send: int32 count, then per pair int32-length key and value (-1 = NULL)."""
    (count,) = _I32.unpack_from(data)
    if count < 0:
        raise ValueError(f"negative hstore pair count {count}")
    pos, end = 4, len(data)
    result: dict[str, str | None] = {}
    for _ in range(count):
        (klen,) = _I32.unpack_from(data, pos)
        if klen < 0 or pos + 4 + klen > end:
            raise ValueError(f"bad hstore key length {klen} at {pos}")
        key = data[pos + 4 : pos + 4 + klen].decode()
        pos += 4 + klen
        (vlen,) = _I32.unpack_from(data, pos)
        pos += 4
        if vlen == -1:
            result[key] = None
            continue
        if vlen < 0 or pos + vlen > end:
            raise ValueError(f"bad hstore value length {vlen} at {pos - 4}")
        result[key] = data[pos : pos + vlen].decode()
        pos += vlen
    if pos != end:
        raise ValueError(f"{end - pos} trailing bytes after hstore")
    return result
