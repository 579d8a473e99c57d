"""Range and multirange values as PostgreSQL's text form, from either wire format.

The binary form (flags byte, then length-prefixed bound datums) is rendered with
the subtype's text renderer and range_out's quoting rules. timestamptz bounds are
the one subtype whose text depends on the session (TimeZone), so for those the
text form is parsed and re-rendered in UTC as well: both paths then print
"+00" offsets regardless of the server's TimeZone.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from bridge.encode.temporal import PG_EPOCH_US, format_timestamp
from bridge.encode.textvalues import timestamptz_us

_I32 = struct.Struct(">i")
_EMPTY, _LB_INC, _UB_INC, _LB_INF, _UB_INF = 0x01, 0x02, 0x04, 0x08, 0x10
_NEEDS_QUOTES = frozenset('"\\()[],') | frozenset(" \t\n\r\v\f")

Renderer = Callable[[bytes], str]
TextMap = Callable[[str], str]


def bound_escape(text: str) -> str:
    """range_bound_escape: quote empty or special text, doubling quotes and backslashes."""
    if text and not any(ch in _NEEDS_QUOTES for ch in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '""') + '"'


def _format(lower_inc: bool, lower: str | None, upper: str | None, upper_inc: bool) -> str:
    lo = "" if lower is None else bound_escape(lower)
    hi = "" if upper is None else bound_escape(upper)
    return f"{'[' if lower_inc else '('}{lo},{hi}{']' if upper_inc else ')'}"


def _render_range(data: bytes, start: int, end: int, bound: Renderer) -> str:
    flags = data[start]
    if flags & _EMPTY:
        if end != start + 1:
            raise ValueError("empty range with trailing bytes")
        return "empty"
    pos = start + 1
    texts: list[str | None] = []
    for infinite in (flags & _LB_INF, flags & _UB_INF):
        if infinite:
            texts.append(None)
            continue
        (length,) = _I32.unpack_from(data, pos)
        if length < 0 or pos + 4 + length > end:
            raise ValueError(f"bad range bound length {length} at {pos}")
        texts.append(bound(data[pos + 4 : pos + 4 + length]))
        pos += 4 + length
    if pos != end:
        raise ValueError(f"{end - pos} trailing bytes after range")
    return _format(bool(flags & _LB_INC), texts[0], texts[1], bool(flags & _UB_INC))


def range_renderer(bound: Renderer) -> Renderer:
    def render(data: bytes) -> str:
        return _render_range(data, 0, len(data), bound)

    return render


def multirange_renderer(bound: Renderer) -> Renderer:
    """multirange_send: int32 count, then int32-length-prefixed ranges; printed {r1,r2}."""

    def render(data: bytes) -> str:
        (count,) = _I32.unpack_from(data)
        pos, parts = 4, []
        for _ in range(max(count, 0)):
            (length,) = _I32.unpack_from(data, pos)
            if length < 1 or pos + 4 + length > len(data):
                raise ValueError(f"bad range length {length} at {pos}")
            parts.append(_render_range(data, pos + 4, pos + 4 + length, bound))
            pos += 4 + length
        if count < 0 or pos != len(data):
            raise ValueError("malformed multirange")
        return "{" + ",".join(parts) + "}"

    return render


def _parse_bound(text: str, pos: int) -> tuple[str | None, int]:
    """range_parse_bound: quotes group, "" inside quotes and backslash escape a char."""
    if text[pos] in ",)]":
        return None, pos
    out: list[str] = []
    quoted = False
    while quoted or text[pos] not in ",)]":
        ch = text[pos]
        pos += 1
        if ch == "\\":
            out.append(text[pos])
            pos += 1
        elif ch != '"':
            out.append(ch)
        elif quoted and text[pos] == '"':
            out.append('"')
            pos += 1
        else:
            quoted = not quoted
    return "".join(out), pos


def _map_range(text: str, pos: int, fn: TextMap) -> tuple[str, int]:
    if text.startswith("empty", pos):
        return "empty", pos + 5
    if text[pos] not in "[(":
        raise ValueError(f"range must start with [ or ( at {pos}")
    lower_inc = text[pos] == "["
    lower, pos = _parse_bound(text, pos + 1)
    if text[pos] != ",":
        raise ValueError(f"missing comma in range at {pos}")
    upper, pos = _parse_bound(text, pos + 1)
    if text[pos] not in ")]":
        raise ValueError(f"range must end with ] or ) at {pos}")
    lower = None if lower is None else fn(lower)
    upper = None if upper is None else fn(upper)
    return _format(lower_inc, lower, upper, text[pos] == "]"), pos + 1


def map_range_text(fn: TextMap) -> TextMap:
    """Rewrite every bound of a range's text form through `fn`."""

    def rewrite(text: str) -> str:
        result, end = _map_range(text, 0, fn)
        if end != len(text):
            raise ValueError(f"junk after range at {end}")
        return result

    return rewrite


def map_multirange_text(fn: TextMap) -> TextMap:
    def rewrite(text: str) -> str:
        if text[0] != "{":
            raise ValueError("multirange must start with {")
        parts, pos = [], 1
        while text[pos] != "}":
            part, pos = _map_range(text, pos, fn)
            parts.append(part)
            if text[pos] == ",":
                pos += 1
            elif text[pos] != "}":
                raise ValueError(f"missing comma in multirange at {pos}")
        if pos + 1 != len(text):
            raise ValueError(f"junk after multirange at {pos + 1}")
        return "{" + ",".join(parts) + "}"

    return rewrite


def tstz_bound_utc(text: str) -> str:
    """A timestamptz bound re-rendered as with TimeZone=UTC."""
    if text in ("infinity", "-infinity"):
        return text
    return format_timestamp(timestamptz_us(text) - PG_EPOCH_US, utc=True)
