"""pgoutput row messages (Insert, Update, Delete) and their TupleData parts.

This is the per-row hot path, kept apart from the rarer message types: every
handler reads its integers byte by byte at explicit offsets and copies each column
value out with one `bytes` slice. A slice never fails, so a value that runs past the
end is caught either by the next read (IndexError, converted by the decoder) or by the
final end-of-message check.

Handlers take `(buf, pos, xid)` with defaults for the non-streamed case so the
decoder can call them with just the buffer; streamed variants pass `pos=5` and the
transaction id read from bytes 1..4.
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

from bridge.decode.messages import Delete, Insert, TupleData, Update
from bridge.decode.reader import end_error, type_name
from bridge.errors import ProtocolError
from bridge.source.wire import u16, u32

_N: Final = ord("N")
# The kinds of an all-text or all-binary TupleData, by column count.
_UNIFORM_MAX: Final = 256
_ALL_TEXT: Final = tuple(b"t" * n for n in range(_UNIFORM_MAX))
_ALL_BINARY: Final = tuple(b"b" * n for n in range(_UNIFORM_MAX))


def read_tuple(buf: bytes, pos: int) -> tuple[TupleData, int]:
    """Read a TupleData part at `pos`; returns it and the offset just past it."""
    # Offsets, lengths and kinds as i64: compiled, that is native integer work, where
    # struct's unpack_from builds and frees a tuple per column and tagged ints check
    # every shift and sum for overflow.
    p: i64 = pos
    natts = u16(buf, p)
    p += 2
    # Most rows are all text or all binary: their kinds are a shared constant, and a
    # bytearray is only written (an item assignment per column) from the first other on.
    kinds: bytearray | None = None
    same: i64 = 116  # the kind of every column so far
    values: list[bytes | None] = [None] * natts
    for i in range(natts):
        kind: i64 = buf[p]
        if kind in (116, 98):  # 't', 'b'
            end = p + 5 + u32(buf, p + 1)
            values[i] = buf[p + 5 : end]
            p = end
        elif kind in (110, 117):  # 'n', 'u'
            p += 1
        else:
            raise ProtocolError(type_name(buf), p, f"unknown TupleData kind {chr(kind)!r}")
        if kind != same:
            if i == 0 and kind == 98:
                same = 98
            else:
                if kinds is None:
                    kinds = bytearray(_uniform(same, natts))
                kinds[i] = kind
    return TupleData(_uniform(same, natts) if kinds is None else bytes(kinds), tuple(values)), p


def _uniform(kind: int, natts: int) -> bytes:
    """The kinds of `natts` columns all of `kind` ('t' or 'b')."""
    if natts < _UNIFORM_MAX:
        return _ALL_TEXT[natts] if kind == 116 else _ALL_BINARY[natts]
    return bytes([kind]) * natts


def _tag_error(buf: bytes, pos: int, tag: int, expected: str) -> ProtocolError:
    return ProtocolError(
        type_name(buf), pos, f"expected submessage tag {expected}, got {chr(tag)!r}"
    )


def decode_insert(buf: bytes, pos: int = 1, xid: int | None = None) -> Insert:
    relid = u32(buf, pos)
    tag = buf[pos + 4]
    if tag != _N:
        raise _tag_error(buf, pos + 4, tag, "'N'")
    new, end = read_tuple(buf, pos + 5)
    if end != len(buf):
        raise end_error(buf, end)
    return Insert(xid, relid, new)


def decode_update(buf: bytes, pos: int = 1, xid: int | None = None) -> Update:
    relid = u32(buf, pos)
    tag = buf[pos + 4]
    pos += 5
    old: TupleData | None = None
    old_kind = ""
    if tag in (75, 79):  # 'K', 'O'
        old_kind = chr(tag)
        old, pos = read_tuple(buf, pos)
        tag = buf[pos]
        pos += 1
    if tag != _N:
        raise _tag_error(buf, pos - 1, tag, "'N'" if old_kind else "'K', 'O' or 'N'")
    new, end = read_tuple(buf, pos)
    if end != len(buf):
        raise end_error(buf, end)
    return Update(xid, relid, old_kind, old, new)


def decode_delete(buf: bytes, pos: int = 1, xid: int | None = None) -> Delete:
    relid = u32(buf, pos)
    tag = buf[pos + 4]
    if tag not in (75, 79):  # 'K', 'O'
        raise _tag_error(buf, pos + 4, tag, "'K' or 'O'")
    old, end = read_tuple(buf, pos + 5)
    if end != len(buf):
        raise end_error(buf, end)
    return Delete(xid, relid, chr(tag), old)
