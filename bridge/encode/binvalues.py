"""Parsers for PostgreSQL's binary (send/recv) format: `bytes` -> Avro-ready value.

Every parser yields exactly what the matching `textvalues` parser yields for the
same datum. Lengths are checked by the fixed-size struct formats (struct.error on
a short or long buffer); the encoder maps such errors to ValueConversionError.
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any, Final

from bridge.encode.avro import decimal_bytes
from bridge.encode.temporal import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    PG_EPOCH_DAYS,
    PG_EPOCH_US,
    clamp_us,
)
from bridge.encode.textvalues import INTERVAL_INFINITY, INTERVAL_MINUS_INFINITY

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_U32: Final = struct.Struct(">I")
_I64: Final = struct.Struct(">q")
_U64: Final = struct.Struct(">Q")
_F32: Final = struct.Struct(">f")
_F64: Final = struct.Struct(">d")
_INTERVAL: Final = struct.Struct(">qii")
_NUMERIC_HEAD: Final = struct.Struct(">hhHh")
_BOOL: Final = {b"\x01": True, b"\x00": False}
_NUMERIC_POS, _NUMERIC_NEG = 0x0000, 0x4000
_NUMERIC_SPECIAL: Final = {0xC000: "NaN", 0xD000: "Infinity", 0xF000: "-Infinity"}


def parse_bool(data: bytes) -> bool:
    return _BOOL[data]


def parse_int2(data: bytes) -> int:
    return int(_I16.unpack(data)[0])


def parse_int4(data: bytes) -> int:
    return int(_I32.unpack(data)[0])


def parse_uint4(data: bytes) -> int:
    return int(_U32.unpack(data)[0])


def parse_int8(data: bytes) -> int:
    return int(_I64.unpack(data)[0])


def parse_uint8(data: bytes) -> int:
    return int(_U64.unpack(data)[0])


def parse_float4(data: bytes) -> float:
    return float(_F32.unpack(data)[0])


def parse_float8(data: bytes) -> float:
    return float(_F64.unpack(data)[0])


def parse_bytea(data: bytes) -> bytes:
    return bytes(data)


def parse_utf8(data: bytes) -> str:
    return data.decode()


def parse_jsonb(data: bytes) -> str:
    """jsonb_send prefixes its text with format version 1."""
    if data[:1] != b"\x01":
        raise ValueError(f"unsupported jsonb format version {data[:1]!r}")
    return data[1:].decode()


def parse_uuid(data: bytes) -> str:
    if len(data) != 16:
        raise ValueError(f"uuid needs 16 bytes, got {len(data)}")
    h = data.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_date(data: bytes) -> int:
    days = int(_I32.unpack(data)[0])
    if days in (INT32_MAX, INT32_MIN):
        return days
    return days + PG_EPOCH_DAYS


def timestamp_us(data: bytes) -> int:
    """Unbounded Unix microseconds, infinity kept as the int64 sentinels."""
    pg_us = int(_I64.unpack(data)[0])
    if pg_us in (INT64_MAX, INT64_MIN):
        return pg_us
    return pg_us + PG_EPOCH_US


def parse_timestamp(data: bytes) -> int:
    return clamp_us(timestamp_us(data))


def parse_time(data: bytes) -> int:
    return int(_I64.unpack(data)[0])


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
    ndigits, weight, sign, dscale = _NUMERIC_HEAD.unpack_from(data)
    if sign in _NUMERIC_SPECIAL and ndigits == 0:
        return _NUMERIC_SPECIAL[sign]
    if sign not in (_NUMERIC_POS, _NUMERIC_NEG) or ndigits < 0 or dscale < 0:
        raise ValueError(f"bad numeric header sign=0x{sign:04x} ndigits={ndigits}")
    digits = struct.unpack_from(f">{ndigits}h", data, 8)
    if len(data) != 8 + 2 * ndigits:
        raise ValueError(f"numeric with {ndigits} digits has {len(data)} bytes")
    value = 0
    for digit in digits:
        if not 0 <= digit < 10_000:
            raise ValueError(f"bad numeric digit {digit}")
        value = value * 10_000 + digit
    shift = 4 * (weight - ndigits + 1) + dscale
    value = value * 10**shift if shift >= 0 else value // 10**-shift
    return (-value if sign == _NUMERIC_NEG else value), dscale


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
