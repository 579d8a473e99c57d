"""Bounds-checked primitives shared by the decoders.

Decoders work on an immutable `bytes` message and explicit offsets: integers are read
without slicing (`bridge.source.wire`, or `unpack_from` with precompiled big-endian
formats), and a slice of `bytes` is already the owned copy a value needs. Every helper
here turns bad input into `ProtocolError`, so callers never see `struct.error` or
`UnicodeDecodeError`.
"""

from __future__ import annotations

import struct

from bridge.errors import ProtocolError

# Bound `unpack_from` methods of network-order (big-endian) formats, for pglogical's
# rarer fields (`bridge.source.wire` has the native readers of the per-message ones).
U16 = struct.Struct(">H").unpack_from
I32 = struct.Struct(">i").unpack_from


def type_name(buf: bytes) -> str:
    """The message type letter for error reports ("" for an empty message)."""
    return chr(buf[0]) if buf else ""


def end_error(buf: bytes, end: int) -> ProtocolError:
    """Explain why a message whose fields end at `end` does not end at `len(buf)`."""
    if end > len(buf):
        return ProtocolError(type_name(buf), len(buf), "truncated message")
    return ProtocolError(
        type_name(buf), end, f"{len(buf) - end} unexpected trailing byte(s) after the message"
    )


def expect_end(buf: bytes, end: int) -> None:
    """Reject truncated messages and trailing garbage (both mean we misread the stream)."""
    if end != len(buf):
        raise end_error(buf, end)


def read_cstring(buf: bytes, pos: int) -> tuple[str, int]:
    """Read a NUL-terminated UTF-8 string at `pos`; returns it and the offset past the NUL."""
    end = buf.find(0, pos)
    if end < 0:
        raise ProtocolError(type_name(buf), pos, "string is not NUL-terminated")
    try:
        return buf[pos:end].decode(), end + 1
    except UnicodeDecodeError as exc:
        raise ProtocolError(type_name(buf), pos + exc.start, "string is not valid UTF-8") from None


def read_bytes(buf: bytes, pos: int, size: int) -> tuple[bytes, int]:
    """Copy `size` bytes at `pos`; returns them and the offset past them."""
    end = pos + size
    if size < 0 or end > len(buf):
        raise ProtocolError(
            type_name(buf), pos, f"field of {size} bytes runs past the end of the message"
        )
    return buf[pos:end], end
