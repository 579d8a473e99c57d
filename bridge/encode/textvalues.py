"""Parsers for PostgreSQL's text output format: `str` -> Avro-ready value.

They assume the server defaults that also govern pgoutput's text values:
DateStyle=ISO, IntervalStyle=postgres, extra_float_digits >= 1 and an
lc_monetary with two fraction digits. Malformed input raises whatever Python
raises (ValueError, IndexError, ...); the encoder turns that into a
ValueConversionError naming table and column (`bridge.encode.columns`).
"""

from __future__ import annotations

import datetime
import re
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
    US_PER_DAY,
    US_PER_SECOND,
    clamp_us,
    days_from_civil,
)

_F4: Final = struct.Struct(">f")
_BOOL: Final = {"t": True, "f": False}
_NOT_DIGIT: Final = re.compile(r"\D")
_BYTEA_ESCAPE: Final = re.compile(rb"\\(\\|[0-3][0-7]{2})")
_HSTORE_PAIR: Final = re.compile(r'"((?:[^"\\]|\\.)*)"=>(?:"((?:[^"\\]|\\.)*)"|(NULL))(, |$)', re.S)
_BACKSLASH: Final = re.compile(r"\\(.)", re.S)
_NUMERIC_SPECIAL: Final = frozenset({"NaN", "Infinity", "-Infinity"})
_time_fromisoformat: Final = datetime.time.fromisoformat
_datetime_fromisoformat: Final = datetime.datetime.fromisoformat
_UNIX_ORDINAL: Final = 719_163  # datetime.date(1970, 1, 1).toordinal()
INTERVAL_INFINITY: Final = {"months": INT32_MAX, "days": INT32_MAX, "micros": INT64_MAX}
INTERVAL_MINUS_INFINITY: Final = {"months": INT32_MIN, "days": INT32_MIN, "micros": INT64_MIN}


def identity(text: str) -> str:
    return text


def parse_bool(text: str) -> bool:
    return _BOOL[text]


def parse_float4(text: str) -> float:
    """Round to single precision so text and binary (4-byte) yield the same double."""
    return float(_F4.unpack(_F4.pack(float(text)))[0])


def parse_bytea(text: str) -> bytes:
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    return _BYTEA_ESCAPE.sub(_unescape_octal, text.encode("ascii"))


def _unescape_octal(match: re.Match[bytes]) -> bytes:
    code = match.group(1)
    return b"\\" if code == b"\\" else bytes((int(code, 8),))


def parse_time(text: str) -> int:
    """HH:MM:SS[.ffffff] -> microseconds since midnight (24:00:00 is valid).

    The C-speed time.fromisoformat handles the shape PostgreSQL prints; the
    length/colon guard keeps its ISO leniency (offsets, HH:MM) out.
    """
    size = len(text)
    if 8 <= size <= 15 and text[2] == ":" and text[5] == ":" and (size == 8 or text[8] == "."):
        try:
            t = _time_fromisoformat(text)
        except ValueError:  # 24:00:00
            return _parse_time_exact(text)
        if t.tzinfo is None:
            return ((t.hour * 60 + t.minute) * 60 + t.second) * US_PER_SECOND + t.microsecond
    return _parse_time_exact(text)


def _parse_time_exact(text: str) -> int:
    if text[2] != ":" or text[5] != ":" or (len(text) > 8 and text[8] != "."):
        raise ValueError(f"bad time {text!r}")
    frac = text[9:]
    if len(frac) > 6 or (len(text) > 8 and not frac):
        raise ValueError(f"bad time fraction {text!r}")
    seconds = int(text[:2]) * 3600 + int(text[3:5]) * 60 + int(text[6:8])
    return seconds * US_PER_SECOND + (int(frac.ljust(6, "0")) if frac else 0)


def _days(date: str, bc: bool) -> int:
    """Unix days of 'YYYY-MM-DD' (any year width), BC years counted astronomically.

    Only the shapes `wire_date` and `wire_timestamptz` do not read digit by digit (BC,
    years past 9999) and timestamps without time zone come here, so no cache: the
    process-wide one it had served the shapes the digit readers now take."""
    year, month, day = date.rsplit("-", 2)
    y = int(year)
    return days_from_civil(1 - y if bc else y, int(month), int(day))


def parse_date(text: str) -> int:
    """Unix days; infinity maps to the int32 sentinels (`wire_date` of the text)."""
    return wire_date(text.encode())


def _parse_date_general(text: str) -> int:
    if text == "infinity":
        return INT32_MAX
    if text == "-infinity":
        return INT32_MIN
    bc = text.endswith(" BC")
    return _days(text[:-3] if bc else text, bc)


def _split_timestamp(text: str) -> tuple[int, str] | int:
    if text == "infinity":
        return INT64_MAX
    if text == "-infinity":
        return INT64_MIN
    bc = text.endswith(" BC")
    date, sep, time = (text[:-3] if bc else text).partition(" ")
    if not sep:
        raise ValueError(f"bad timestamp {text!r}")
    return _days(date, bc), time


def _local_us(moment: datetime.datetime) -> int:
    days = moment.toordinal() - _UNIX_ORDINAL
    clock = (moment.hour * 60 + moment.minute) * 60 + moment.second
    return days * US_PER_DAY + clock * US_PER_SECOND + moment.microsecond


def parse_timestamp(text: str) -> int:
    """Unix microseconds of a timestamp without time zone, read as UTC.

    Four-digit AD years take the C-speed datetime.fromisoformat path; BC, years
    past 9999 and infinity take the general parser.
    """
    if 19 <= len(text) <= 26 and text[10] == " " and text[4] == "-":
        try:
            moment = _datetime_fromisoformat(text)
        except ValueError:
            return _parse_timestamp_general(text)
        if moment.tzinfo is None:
            return _local_us(moment)
    return _parse_timestamp_general(text)


def _parse_timestamp_general(text: str) -> int:
    parts = _split_timestamp(text)
    if isinstance(parts, int):
        return parts
    days, time = parts
    return clamp_us(days * US_PER_DAY + parse_time(time))


def timestamptz_us(text: str) -> int:
    """Unbounded Unix microseconds of a timestamptz (sentinels for infinity)."""
    parts = _split_timestamp(text)
    if isinstance(parts, int):
        return parts
    days, time = parts
    cut = max(time.rfind("+"), time.rfind("-"))
    if cut < 8:
        raise ValueError(f"timestamptz without offset {text!r}")
    return days * US_PER_DAY + parse_time(time[:cut]) - _offset_seconds(time[cut:]) * US_PER_SECOND


def parse_timestamptz(text: str) -> int:
    """Unix microseconds of a timestamptz (`wire_timestamptz` of the text)."""
    return wire_timestamptz(text.encode())


def wire_date(raw: bytes) -> int:
    """Unix days of a date's text: 'YYYY-MM-DD' (what the server prints for AD
    years below 10000) read digit by digit, anything else decoded."""
    if len(raw) == 10 and raw[4] == _DASH and raw[7] == _DASH:
        year = _digits(raw, 0, 4)
        month = _digits(raw, 5, 2)
        day = _digits(raw, 8, 2)
        if _valid_date(year, month, day):
            return days_from_civil(year, month, day)
    return _parse_date_general(raw.decode())


def wire_timestamptz(raw: bytes) -> int:
    """Unix microseconds of a timestamptz's text, the one timestamptz parser: the common
    shape is read digit by digit from the bytes (compiled, that is integer work with no
    objects), the rest (BC, years past 9999, infinity) decoded by `timestamptz_us`."""
    us = _iso_timestamptz(raw)
    return clamp_us(timestamptz_us(raw.decode())) if us == _NOT_ISO else us


# Outside every result of _iso_timestamptz (4-digit years), inside a compiled short int.
# Final: compiled code reads these as constants, not from the module's dict.
_NOT_ISO: Final = -(1 << 61)
_FRACTION_SCALE: Final = (0, 100_000, 10_000, 1_000, 100, 10, 1)  # by count of digits
_DASH: Final = 45
_SPACE: Final = 32
_COLON: Final = 58
_DOT: Final = 46
_PLUS: Final = 43
_I64_MAX_HEAD: Final = 922_337_203_685_477_580  # (2**63 - 1) // 10
_I64_MAX_LAST: Final = 7  # (2**63 - 1) % 10


def _valid_date(year: i64, month: i64, day: i64) -> bool:
    """A Gregorian AD date (-1, for not digits, is never valid)."""
    # plain i64 comparisons: compiled, the tuple lookup and the bool sum boxed values
    if year < 1 or month < 1 or month > 12 or day < 1:
        return False
    if day <= 28:
        return True
    if month == 2:
        return day == 29 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if day <= 30:
        return True
    return day == 31 and month not in (4, 6, 9, 11)


def _digits(raw: bytes, at: i64, count: i64) -> i64:
    """The number written by `count` ASCII digits at `at`, or -1."""
    value: i64 = 0
    for i in range(at, at + count):
        code: i64 = raw[i]  # then native arithmetic, not a tagged int's checked one
        digit = code - 48
        if not 0 <= digit <= 9:
            return -1
        value = value * 10 + digit
    return value


def parse_int(raw: bytes) -> int:
    """int(raw), for the integers in text tuples: what the server prints ('-' and up to
    19 digits within an i64) is read digit by digit, natively once compiled, where
    int() goes through the type call and the general string parser. Anything else is
    int()'s, error message included."""
    size: i64 = len(raw)
    if 0 < size <= 20:
        negative = raw[0] == _DASH
        start: i64 = 1 if negative else 0
        count = size - start
        value: i64 = -1
        if 0 < count <= 18:
            value = _digits(raw, start, count)
        elif count == 19:  # random 63-bit ids: the last digit must not leave the i64
            head = _digits(raw, start, 18)
            last: i64 = raw[size - 1] - 48
            within = head < _I64_MAX_HEAD or (head == _I64_MAX_HEAD and last <= _I64_MAX_LAST)
            if head >= 0 and 0 <= last <= 9 and within:
                value = head * 10 + last
        if value >= 0:
            return -value if negative else value
    return int(raw)


def parse_unscaled(raw: bytes, scale: int) -> int:
    """PostgreSQL's text of a finite numeric, times 10**scale: the unscaled integer of a
    numeric(p, scale) value. ValueError for more fraction digits than `scale` and for
    text that is no number (NaN, ±Infinity). What the server prints with up to 18 digits
    in all is read natively in one pass, like `parse_int`; anything else by splitting at
    the point."""
    size: i64 = len(raw)
    if 0 < size <= 20 and 0 <= scale <= 18:
        negative = raw[0] == _DASH
        magnitude = _unscaled_magnitude(raw, 1 if negative else 0, scale)
        if magnitude >= 0:
            return -magnitude if negative else magnitude
    whole, _, rest = raw.partition(b".")
    if len(rest) > scale:
        raise ValueError("more fraction digits than the scale")
    return parse_int(whole + rest + b"0" * (scale - len(rest)))


def _unscaled_magnitude(raw: bytes, pos: i64, places: i64) -> i64:
    """Digits with at most one point from `pos` to the end, times 10**places, if there
    are at most 18 digits in all (an i64 holds them); -1 for any other text. ValueError
    for more fraction digits than `places`."""
    size: i64 = len(raw)
    value: i64 = 0
    digits: i64 = 0
    fraction: i64 = -1  # digits after the point; -1 before it
    while pos < size:
        code: i64 = raw[pos]
        digit = code - 48
        if 0 <= digit <= 9 and digits < 18:
            value = value * 10 + digit
            digits += 1
            if fraction >= 0:
                fraction += 1
        elif code == _DOT and fraction < 0:
            fraction = 0
        else:
            return -1
        pos += 1
    if fraction < 0:
        fraction = 0
    elif fraction > places:
        raise ValueError("more fraction digits than the scale")
    if digits == 0 or digits + places - fraction > 18:
        return -1
    for _ in range(places - fraction):
        value *= 10
    return value


# Complex on purpose (C901): the one-pass reader of every timestamptz value in text tuples,
# compiled: helpers for the fraction and the offset would hand back (position, value) pairs,
# boxed tuples per value where the i64 locals here cost nothing. Other shapes (BC, years past
# 9999) are left to the general parsers.
def _iso_timestamptz(raw: bytes) -> int:  # noqa: C901
    """Unix µs of 'YYYY-MM-DD HH:MM:SS[.f]+HH[:MM[:SS]]' (what the server prints for AD
    years below 10000); `_NOT_ISO` for any other text, which the general parsers then
    take (they also own the error messages)."""
    size: i64 = len(raw)
    if not 22 <= size <= 35 or raw[4] != _DASH or raw[7] != _DASH or raw[10] != _SPACE:
        return _NOT_ISO
    if raw[13] != _COLON or raw[16] != _COLON:
        return _NOT_ISO
    year = _digits(raw, 0, 4)  # one assignment each: a tuple assignment boxes them
    month = _digits(raw, 5, 2)
    day = _digits(raw, 8, 2)
    hour = _digits(raw, 11, 2)
    minute = _digits(raw, 14, 2)
    second = _digits(raw, 17, 2)
    if not _valid_date(year, month, day) or hour > 23 or minute > 59 or second > 59:
        return _NOT_ISO  # -1 (not digits) fails these too
    pos: i64 = 19
    fraction: i64 = 0
    if raw[pos] == _DOT:
        pos += 1
        start = pos
        while pos < size and pos - start < 6:
            digit: i64 = raw[pos] - 48
            if not 0 <= digit <= 9:
                break
            fraction = fraction * 10 + digit
            pos += 1
        if pos == start:
            return _NOT_ISO
        fraction *= _FRACTION_SCALE[pos - start]
    sign = raw[pos]
    if sign not in (_PLUS, _DASH) or pos + 3 > size:
        return _NOT_ISO
    offset: i64 = _digits(raw, pos + 1, 2) * 3600
    pos += 3
    unit: i64 = 60
    while pos < size and unit:
        part = _digits(raw, pos + 1, 2) if pos + 3 <= size and raw[pos] == _COLON else -1
        if not 0 <= part <= 59:
            return _NOT_ISO
        offset += part * unit
        unit = 1 if unit == 60 else 0
        pos += 3
    if pos != size or offset < 0:
        return _NOT_ISO
    days: i64 = days_from_civil(year, month, day)
    seconds: i64 = ((hour * 60 + minute) * 60 + second) - (offset if sign == _PLUS else -offset)
    local: i64 = (days * 86_400 + seconds) * 1_000_000 + fraction  # i64: native multiplies
    return local


def _offset_seconds(text: str) -> int:
    fields = text[1:].split(":")
    if text[0] not in "+-" or len(fields) > 3 or not all(len(f) == 2 for f in fields):
        raise ValueError(f"bad UTC offset {text!r}")
    seconds = sum(int(f) * m for f, m in zip(fields, (3600, 60, 1), strict=False))
    return -seconds if text[0] == "-" else seconds


def parse_interval(text: str) -> dict[str, int]:
    """IntervalStyle=postgres output ("1 year 2 mons -3 days +04:05:06.5") -> record."""
    if text == "infinity":
        return dict(INTERVAL_INFINITY)
    if text == "-infinity":
        return dict(INTERVAL_MINUS_INFINITY)
    months = days = micros = 0
    tokens = text.split(" ")
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if ":" in token:
            negative = token[0] == "-"
            hours, minutes, seconds = token.lstrip("+-").split(":")
            whole, _, frac = seconds.partition(".")
            if len(frac) > 6:
                raise ValueError(f"bad interval fraction {text!r}")
            micros = (int(hours) * 3600 + int(minutes) * 60 + int(whole)) * US_PER_SECOND + int(
                frac.ljust(6, "0")
            )
            micros = -micros if negative else micros
            i += 1
            continue
        count, unit = int(token), tokens[i + 1]
        if unit in ("year", "years"):
            months += count * 12
        elif unit in ("mon", "mons"):
            months += count
        elif unit in ("day", "days"):
            days += count
        else:
            raise ValueError(f"unknown interval unit {unit!r}")
        i += 2
    return {"months": months, "days": days, "micros": micros}


def parse_money(text: str) -> Decimal:
    """Locale-formatted money ("-$1,234.56") -> Decimal with scale 2: the digits are the cents."""
    cents = int(_NOT_DIGIT.sub("", text))
    negative = "-" in text or "(" in text
    return Decimal(f"{'-' if negative else ''}{cents}E-2")


def parse_decimal(text: str) -> Decimal | None:
    """Finite numerics keep PostgreSQL's display scale; NaN/Infinity become None."""
    if text in _NUMERIC_SPECIAL:
        return None
    return Decimal(text)


def parse_variable_decimal(text: str) -> dict[str, Any] | None:
    if text in _NUMERIC_SPECIAL:
        return None
    whole, _, frac = text.partition(".")
    unscaled = int(whole + frac)
    return {"scale": len(frac), "value": decimal_bytes(unscaled)}


def parse_hstore(text: str) -> dict[str, str | None]:
    result: dict[str, str | None] = {}
    pos, end = 0, len(text)
    while pos < end:
        match = _HSTORE_PAIR.match(text, pos)
        if match is None or (match.group(4) == "" and match.end() != end):
            raise ValueError(f"bad hstore text at {pos}")
        key, value = match.group(1), match.group(2)
        result[_unbackslash(key)] = None if value is None else _unbackslash(value)
        pos = match.end()
    return result


def _unbackslash(text: str) -> str:
    return _BACKSLASH.sub(r"\1", text) if "\\" in text else text
