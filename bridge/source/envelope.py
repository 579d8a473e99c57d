"""The streaming-replication envelope: XLogData (`w`), keepalive (`k`), status (`r`).

Parsed separately from the logical-decoding payload, as pglogrepl does, so the
decoders only ever see plugin bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from bridge.errors import ProtocolError
from bridge.source.wire import i64be, u64

# Timestamps on the wire (send_time, commit times, status updates) count µs from 2000-01-01.
PG_EPOCH_OFFSET_US: Final = 946_684_800_000_000  # 2000-01-01 minus 1970-01-01, in µs

_XLOG_END: Final = 25  # tag, wal_start, wal_end, send_time: where the payload starts
_KEEPALIVE_LEN: Final = 18  # tag, wal_end, send_time, reply_requested
_STATUS: Final = struct.Struct(">cQQQQB")


class XLogData:
    """One `w` message: its WAL positions and the plugin's payload.

    A plain class, one per message: compiled (setup.py), it is built in C, where a
    dataclass or NamedTuple would run a Python-level constructor per message.
    """

    def __init__(self, wal_start: int, wal_end: int, send_time: int, payload: bytes) -> None:
        self.wal_start = wal_start
        self.wal_end = wal_end
        self.send_time = send_time
        self.payload = payload


@dataclass(frozen=True, slots=True)
class Keepalive:
    wal_end: int
    send_time: int
    reply_requested: bool


def parse(data: bytes) -> XLogData | Keepalive:
    """Split one CopyData message from the walsender into envelope and payload (the
    payload a copy: the decoders read immutable bytes)."""
    size = len(data)
    if not size:
        raise ProtocolError("?", 0, "empty CopyData message")
    tag = data[0]
    if tag == 0x77:  # 'w'
        if size < _XLOG_END:
            raise ProtocolError("w", size, "XLogData header truncated")
        return XLogData(u64(data, 1), u64(data, 9), i64be(data, 17), data[_XLOG_END:])
    if tag == 0x6B:  # 'k'
        if size != _KEEPALIVE_LEN:
            raise ProtocolError("k", size, f"keepalive must be 18 bytes, got {size}")
        return Keepalive(u64(data, 1), i64be(data, 9), data[17] != 0)
    raise ProtocolError(chr(tag), 0, "unknown replication envelope message")


def status_update(write: int, flush: int, apply: int, now_us: int, reply: bool = False) -> bytes:
    """Standby status update; `now_us` is µs since the PostgreSQL epoch."""
    return _STATUS.pack(b"r", write, flush, apply, now_us, 1 if reply else 0)
