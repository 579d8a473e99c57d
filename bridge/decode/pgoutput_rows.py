"""pgoutput row messages (Insert, Update, Delete) and their TupleData parts.

This is the per-row hot path, kept apart from the rarer message types: every
handler reads fields with precompiled `unpack_from` at explicit offsets and copies
each column value out with one `bytes` slice. A slice never fails, so a value that
runs past the end is caught either by the next read (IndexError / struct.error,
converted by the decoder) or by the final end-of-message check.

Handlers take `(buf, pos, xid)` with defaults for the non-streamed case so the
decoder can call them with just the buffer; streamed variants pass `pos=5` and the
transaction id read from bytes 1..4.
"""

from __future__ import annotations

import struct
from typing import Final

from bridge.decode.messages import Delete, Insert, TupleData, Update, new_tuple
from bridge.decode.reader import end_error, type_name
from bridge.errors import ProtocolError

_RELID_TAG: Final = struct.Struct(">IB").unpack_from

_N: Final = ord("N")
# The kinds of an all-text or all-binary TupleData, by column count.
_UNIFORM_MAX: Final = 256
_ALL_TEXT: Final = tuple(b"t" * n for n in range(_UNIFORM_MAX))
_ALL_BINARY: Final = tuple(b"b" * n for n in range(_UNIFORM_MAX))
# Final aliases: statics once compiled, not module-dict lookups per row.
_TUPLE_DATA: Final = TupleData
_INSERT: Final = Insert
_UPDATE: Final = Update
_DELETE: Final = Delete


def read_tuple(buf: bytes, pos: int) -> tuple[TupleData, int]:
    """Read a TupleData part at `pos`; returns it and the offset just past it."""
    # Lengths are assembled from single bytes: compiled, that is native integer work,
    # where struct's unpack_from builds and frees a tuple per column.
    natts = (buf[pos] << 8) | buf[pos + 1]
    pos += 2
    # Most rows are all text or all binary: their kinds are a shared constant, and a
    # bytearray is only written (an item assignment per column) from the first other on.
    kinds: bytearray | None = None
    same = 116  # the kind of every column so far
    values: list[bytes | None] = [None] * natts
    for i in range(natts):
        kind = buf[pos]
        if kind in (116, 98):  # 't', 'b'
            size = (buf[pos + 1] << 24) | (buf[pos + 2] << 16) | (buf[pos + 3] << 8) | buf[pos + 4]
            end = pos + 5 + size
            values[i] = buf[pos + 5 : end]
            pos = end
        elif kind in (110, 117):  # 'n', 'u'
            pos += 1
        else:
            raise ProtocolError(type_name(buf), pos, f"unknown TupleData kind {chr(kind)!r}")
        if kind != same:
            if i == 0 and kind == 98:
                same = 98
            else:
                if kinds is None:
                    kinds = bytearray(_uniform(same, natts))
                kinds[i] = kind
    return new_tuple(
        _TUPLE_DATA, (_uniform(same, natts) if kinds is None else bytes(kinds), tuple(values))
    ), pos


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
    relid, tag = _RELID_TAG(buf, pos)
    if tag != _N:
        raise _tag_error(buf, pos + 4, tag, "'N'")
    new, end = read_tuple(buf, pos + 5)
    if end != len(buf):
        raise end_error(buf, end)
    return new_tuple(_INSERT, (xid, relid, new))


def decode_update(buf: bytes, pos: int = 1, xid: int | None = None) -> Update:
    relid, tag = _RELID_TAG(buf, pos)
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
    return new_tuple(_UPDATE, (xid, relid, old_kind, old, new))


def decode_delete(buf: bytes, pos: int = 1, xid: int | None = None) -> Delete:
    relid, tag = _RELID_TAG(buf, pos)
    if tag not in (75, 79):  # 'K', 'O'
        raise _tag_error(buf, pos + 4, tag, "'K' or 'O'")
    old, end = read_tuple(buf, pos + 5)
    if end != len(buf):
        raise end_error(buf, end)
    return new_tuple(_DELETE, (xid, relid, chr(tag), old))
