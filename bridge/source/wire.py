"""The replication protocol's network-order integers, read from `bytes` natively.

Compiled (setup.py), each is a few byte loads and shifts in i64 arithmetic, where
`struct.unpack_from` is a generic call that builds a tuple and boxes every value:
about a thousand instructions for the three positions of each XLogData envelope.
Callers check the message's length first; a read past the end is an IndexError.
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

_TWO_32: Final = 4_294_967_296
_SIGN_32: Final = 0x8000_0000


def u16(buf: bytes, pos: i64) -> i64:
    """The big-endian uint16 at `pos` (a field count, a numeric's header word)."""
    hi: i64 = buf[pos]
    lo: i64 = buf[pos + 1]
    return (hi << 8) | lo


def u32(buf: bytes, pos: i64) -> i64:
    """The big-endian uint32 at `pos`, assembled from single bytes."""
    b0: i64 = buf[pos]
    b1: i64 = buf[pos + 1]
    b2: i64 = buf[pos + 2]
    b3: i64 = buf[pos + 3]
    return (b0 << 24) | (b1 << 16) | (b2 << 8) | b3


def u64(buf: bytes, pos: i64) -> int:
    """The big-endian uint64 at `pos` (an LSN)."""
    hi = u32(buf, pos)
    lo = u32(buf, pos + 4)
    if hi < _SIGN_32:
        return hi * _TWO_32 + lo  # fits an i64: native arithmetic
    return int(hi) * _TWO_32 + int(lo)  # at or past 2^63: as Python ints


def i64be(buf: bytes, pos: i64) -> i64:
    """The big-endian two's-complement int64 at `pos` (a timestamp)."""
    hi = u32(buf, pos)
    if hi >= _SIGN_32:
        hi -= _TWO_32
    return hi * _TWO_32 + u32(buf, pos + 4)
