"""Binary (send/recv) datum -> the exact text PostgreSQL's output function prints.

Types that travel as strings (network, geometric, bit strings, timetz, ...) must
read the same whichever wire format the stream uses, so the binary path re-creates
the server's text output. Floats follow float8out with extra_float_digits >= 1
(the default): shortest round-trip digits, exponent form below 1e-4 and from 1e15.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from decimal import Decimal

from bridge.encode import binvalues as bv
from bridge.encode.temporal import (
    format_date,
    format_offset,
    format_time,
    format_timestamp,
)

_F64 = struct.Struct(">d")
_F64X2 = struct.Struct(">dd")
_F64X3 = struct.Struct(">ddd")
_F64X4 = struct.Struct(">dddd")
_I32 = struct.Struct(">i")
_TIMETZ = struct.Struct(">qi")
_TID = struct.Struct(">IH")
_PATH_HEAD = struct.Struct(">?i")
_PGSQL_AF_INET, _PGSQL_AF_INET6 = 2, 3

Renderer = Callable[[bytes], str]


def float8_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign, digit_tuple, exp = Decimal(repr(value)).normalize().as_tuple()
    if not isinstance(exp, int):  # unreachable: special values were handled above
        raise ValueError(f"not a finite float: {value!r}")
    digits = "".join(map(str, digit_tuple))
    point = exp + len(digits) - 1  # decimal exponent of the leading digit
    if -4 <= point < 15:
        if exp >= 0:
            body = digits + "0" * exp
        elif point >= 0:
            body = f"{digits[: point + 1]}.{digits[point + 1 :]}"
        else:
            body = "0." + "0" * (-point - 1) + digits
    else:
        mantissa = f"{digits[0]}.{digits[1:]}" if len(digits) > 1 else digits
        body = f"{mantissa}e{'+' if point >= 0 else '-'}{abs(point):02d}"
    return "-" + body if sign else body


def _pair(x: float, y: float) -> str:
    return f"({float8_text(x)},{float8_text(y)})"


def _points(data: bytes, offset: int, count: int) -> str:
    if count < 0 or len(data) != offset + 16 * count:
        raise ValueError(f"{count} points need {offset + 16 * count} bytes, got {len(data)}")
    return ",".join(_pair(*_F64X2.unpack_from(data, offset + 16 * i)) for i in range(count))


def render_float8(data: bytes) -> str:
    return float8_text(_F64.unpack(data)[0])


def render_point(data: bytes) -> str:
    return _pair(*_F64X2.unpack(data))


def render_line(data: bytes) -> str:
    return "{" + ",".join(map(float8_text, _F64X3.unpack(data))) + "}"


def render_lseg(data: bytes) -> str:
    x1, y1, x2, y2 = _F64X4.unpack(data)
    return f"[{_pair(x1, y1)},{_pair(x2, y2)}]"


def render_box(data: bytes) -> str:
    x1, y1, x2, y2 = _F64X4.unpack(data)
    return f"{_pair(x1, y1)},{_pair(x2, y2)}"


def render_path(data: bytes) -> str:
    closed, count = _PATH_HEAD.unpack_from(data)
    body = _points(data, 5, count)
    return f"({body})" if closed else f"[{body}]"


def render_polygon(data: bytes) -> str:
    return f"({_points(data, 4, _I32.unpack_from(data)[0])})"


def render_circle(data: bytes) -> str:
    x, y, radius = _F64X3.unpack(data)
    return f"<{_pair(x, y)},{float8_text(radius)}>"


def _ipv6_text(addr: bytes) -> str:
    """inet_net_ntop_ipv6 without the mask: longest zero run (>= 2 words) as "::",
    embedded IPv4 for ::a.b.c.d and ::ffff:a.b.c.d."""
    words = [addr[i] << 8 | addr[i + 1] for i in range(0, 16, 2)]
    base, length = _zero_run(words)
    out: list[str] = []
    for i in range(8):
        if base <= i < base + length:
            if i == base:
                out.append(":")
            continue
        if i:
            out.append(":")
        if i == 6 and _embeds_ipv4(words, base, length):
            out.append(".".join(map(str, addr[12:])))
            break
        out.append(f"{words[i]:x}")
    if length and base + length == 8:
        out.append(":")
    return "".join(out)


def _zero_run(words: list[int]) -> tuple[int, int]:
    """(start, length) of the first longest run of zero words; (-1, 0) when none has two
    or more (a single zero word is written out)."""
    best_base, best_len, cur_base, cur_len = -1, 0, -1, 0
    for i, word in enumerate([*words, 1]):  # sentinel closes a trailing run
        if word == 0:
            cur_base, cur_len = (i, 1) if cur_base == -1 else (cur_base, cur_len + 1)
        elif cur_base != -1:
            if best_base == -1 or cur_len > best_len:
                best_base, best_len = cur_base, cur_len
            cur_base = -1
    return (best_base, best_len) if best_len >= 2 else (-1, 0)


def _embeds_ipv4(words: list[int], base: int, length: int) -> bool:
    """Whether the last two words are printed as IPv4, as PostgreSQL does: ::a.b.c.d (but
    not ::1) and ::ffff:a.b.c.d."""
    return base == 0 and (
        length == 6 or (length == 7 and words[7] != 1) or (length == 5 and words[5] == 0xFFFF)
    )


def render_inet(data: bytes) -> str:
    """inet_send: family, bits, is_cidr, address length, address (inet and cidr alike)."""
    family, bits, is_cidr, size = data[0], data[1], data[2], data[3]
    addr = data[4:]
    if len(addr) != size:
        raise ValueError(f"inet address length {size} but {len(addr)} bytes follow")
    if family == _PGSQL_AF_INET and size == 4 and bits <= 32:
        text = ".".join(map(str, addr))
        full = 32
    elif family == _PGSQL_AF_INET6 and size == 16 and bits <= 128:
        text = _ipv6_text(addr)
        full = 128
    else:
        raise ValueError(f"bad inet family {family} size {size} bits {bits}")
    return f"{text}/{bits}" if is_cidr or bits != full else text


def render_macaddr(data: bytes) -> str:
    if len(data) != 6:
        raise ValueError(f"macaddr needs 6 bytes, got {len(data)}")
    return ":".join(f"{b:02x}" for b in data)


def render_macaddr8(data: bytes) -> str:
    if len(data) != 8:
        raise ValueError(f"macaddr8 needs 8 bytes, got {len(data)}")
    return ":".join(f"{b:02x}" for b in data)


def render_bit(data: bytes) -> str:
    """bit_send: int32 bit length, then the bits MSB-first padded to whole bytes."""
    (length,) = _I32.unpack_from(data)
    body = data[4:]
    if length < 0 or len(body) != (length + 7) // 8:
        raise ValueError(f"bit string of {length} bits with {len(body)} bytes")
    if not length:
        return ""
    return format(int.from_bytes(body, "big"), f"0{8 * len(body)}b")[:length]


def render_timetz(data: bytes) -> str:
    """Time plus zone, where the zone is seconds *west* of UTC."""
    micros, zone = _TIMETZ.unpack(data)
    return format_time(micros) + format_offset(-zone)


def render_tid(data: bytes) -> str:
    return "({},{})".format(*_TID.unpack(data))


def render_pg_lsn(data: bytes) -> str:
    lsn = bv.parse_uint8(data)
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def render_char(data: bytes) -> str:
    """ "char" prints non-ASCII bytes as \\ooo (PostgreSQL 15+) and NUL as ""."""
    if len(data) > 1:
        raise ValueError(f'"char" needs at most 1 byte, got {len(data)}')
    code = data[0] if data else 0
    if code >= 0x80:
        return f"\\{code:03o}"
    return chr(code) if code else ""


def render_date(data: bytes) -> str:
    return format_date(bv.parse_date(data))


def render_time(data: bytes) -> str:
    return format_time(bv.parse_time(data))


def render_timestamp(data: bytes) -> str:
    return format_timestamp(bv.parse_int8(data), utc=False)


def render_timestamptz(data: bytes) -> str:
    """Rendered for TimeZone=UTC, whatever the server's setting (see ranges)."""
    return format_timestamp(bv.parse_int8(data), utc=True)


def render_int(parse: Callable[[bytes], int]) -> Renderer:
    def render(data: bytes) -> str:
        return str(parse(data))

    return render


def render_bool(data: bytes) -> str:
    return "t" if bv.parse_bool(data) else "f"


def render_bytea(data: bytes) -> str:
    """bytea_output=hex, PostgreSQL's default."""
    return "\\x" + data.hex()


_FIELD_HEAD = struct.Struct(">Ii")  # an attribute's type OID, then its length (-1: NULL)
_RECORD_QUOTED = frozenset('"\\(),') | frozenset(" \t\n\v\f\r")


def render_record(fields: list[Renderer]) -> Renderer:
    """record_send's bytes (int32 count, then per attribute its type OID, int32 length and
    send form) -> record_out's text, each attribute printed by its renderer: "(1,a,)" with
    an attribute quoted when it is empty or holds a quote, backslash, parenthesis, comma
    or white space (quotes and backslashes doubled inside), a NULL one left empty."""

    def render(data: bytes) -> str:
        (count,) = _I32.unpack_from(data)
        if count != len(fields):
            raise ValueError(f"a record of {count} attributes, the type has {len(fields)}")
        pos, parts = 4, []
        for field in fields:
            _, length = _FIELD_HEAD.unpack_from(data, pos)
            pos += 8
            if length < 0:
                parts.append("")
                continue
            if pos + length > len(data):
                raise ValueError(f"an attribute of {length} bytes past the record's end")
            parts.append(_record_field(field(data[pos : pos + length])))
            pos += length
        if pos != len(data):
            raise ValueError("bytes after the record's last attribute")
        return "(" + ",".join(parts) + ")"

    return render


def _record_field(text: str) -> str:
    if text and not any(c in _RECORD_QUOTED for c in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '""') + '"'
