"""Decoder for PostgreSQL's built-in `pgoutput` plugin, protocol versions 1-4.

Follows the wire format written by src/backend/replication/logical/proto.c.
The decoder is stateful only in one respect: between Stream Start and Stream Stop,
Relation/Type/Insert/Update/Delete/Truncate/Message carry the streamed
transaction's xid right after the type byte. Two dispatch tables (outside and
inside a stream block) make that a table swap instead of a per-message branch, and
reject messages that cannot occur in the current state.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final, Protocol

from bridge.decode.messages import (
    Begin,
    BeginPrepare,
    Column,
    Commit,
    CommitPrepared,
    LogicalMessage,
    Message,
    Origin,
    Prepare,
    Relation,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    TypeMessage,
    new_tuple,
)
from bridge.decode.pgoutput_options import check_proto_version, pgoutput_options
from bridge.decode.pgoutput_rows import decode_delete, decode_insert, decode_update
from bridge.decode.reader import end_error, expect_end, read_bytes, read_cstring
from bridge.errors import ProtocolError
from bridge.source.wire import i64be, u32, u64

__all__ = ["PgoutputDecoder", "pgoutput_options"]

Handler = Callable[[bytes], Message]


class _Body(Protocol):
    """A handler that can also be told where its fields start and the streamed xid."""

    def __call__(self, buf: bytes, pos: int = 1, xid: int | None = None, /) -> Message: ...


_LSN: Final = struct.Struct(">Q").unpack_from
_OID_TYPMOD: Final = struct.Struct(">Ii").unpack_from
_REL_HEAD: Final = struct.Struct(">BH").unpack_from
_COL_FLAGS: Final = struct.Struct(">B").unpack_from
_TRUNC_HEAD: Final = struct.Struct(">IB").unpack_from
_MSG_HEAD: Final = struct.Struct(">BQ").unpack_from
_STREAM_START: Final = struct.Struct(">IB").unpack_from
_STREAM_COMMIT: Final = struct.Struct(">IBQQq").unpack_from
_STREAM_ABORT: Final = struct.Struct(">II").unpack_from
_STREAM_ABORT_V4: Final = struct.Struct(">IIQq").unpack_from
_BEGIN_PREPARE: Final = struct.Struct(">QQqI").unpack_from
_PREPARE: Final = struct.Struct(">BQQqI").unpack_from  # also Commit Prepared, Stream Prepare
_ROLLBACK_PREPARED: Final = struct.Struct(">BQQqqI").unpack_from
# Once per transaction each: built in C by `new_tuple` (see bridge.decode.messages).
_BEGIN_T: Final = Begin
_COMMIT_T: Final = Commit


def _fixed(buf: bytes, size: int) -> None:
    if len(buf) != size:
        raise end_error(buf, size)


# Begin and Commit, once per transaction each, read their fields natively (wire).
def _begin(buf: bytes) -> Begin:
    _fixed(buf, 21)
    begin: Begin = new_tuple(_BEGIN_T, (u64(buf, 1), i64be(buf, 9), u32(buf, 17)))
    return begin


def _commit(buf: bytes) -> Commit:
    _fixed(buf, 26)
    commit: Commit = new_tuple(_COMMIT_T, (buf[1], u64(buf, 2), u64(buf, 10), i64be(buf, 18)))
    return commit


def _origin(buf: bytes) -> Origin:
    (lsn,) = _LSN(buf, 1)
    name, end = read_cstring(buf, 9)
    expect_end(buf, end)
    return Origin(lsn, name)


def _namespace(buf: bytes, pos: int) -> tuple[str, int]:
    """pgoutput abbreviates pg_catalog to the empty string; undo that."""
    name, pos = read_cstring(buf, pos)
    return name or "pg_catalog", pos


def _relation(buf: bytes, pos: int = 1, xid: int | None = None) -> Relation:
    oid = u32(buf, pos)
    namespace, pos = _namespace(buf, pos + 4)
    name, pos = read_cstring(buf, pos)
    replident, natts = _REL_HEAD(buf, pos)
    pos += 3
    columns = []
    for _ in range(natts):
        (flags,) = _COL_FLAGS(buf, pos)
        colname, pos = read_cstring(buf, pos + 1)
        type_oid, typmod = _OID_TYPMOD(buf, pos)
        pos += 8
        columns.append(Column(flags, colname, type_oid, typmod))
    expect_end(buf, pos)
    return Relation(xid, oid, namespace, name, chr(replident), tuple(columns))


def _type(buf: bytes, pos: int = 1, xid: int | None = None) -> TypeMessage:
    oid = u32(buf, pos)
    namespace, pos = _namespace(buf, pos + 4)
    name, pos = read_cstring(buf, pos)
    expect_end(buf, pos)
    return TypeMessage(xid, oid, namespace, name)


def _truncate(buf: bytes, pos: int = 1, xid: int | None = None) -> Truncate:
    count, options = _TRUNC_HEAD(buf, pos)
    pos += 5
    # Check before building the format so a corrupt count cannot allocate a huge one.
    expect_end(buf, pos + 4 * count)
    return Truncate(xid, options, struct.unpack_from(f">{count}I", buf, pos))


def _message(buf: bytes, pos: int = 1, xid: int | None = None) -> LogicalMessage:
    flags, lsn = _MSG_HEAD(buf, pos)
    prefix, pos = read_cstring(buf, pos + 9)
    size = u32(buf, pos)
    content, pos = read_bytes(buf, pos + 4, size)
    expect_end(buf, pos)
    return LogicalMessage(xid, bool(flags & 1), lsn, prefix, content)


def _stream_commit(buf: bytes) -> StreamCommit:
    _fixed(buf, 30)
    return StreamCommit(*_STREAM_COMMIT(buf, 1))


def _stream_abort_v2(buf: bytes) -> StreamAbort:
    if len(buf) == 25:
        raise ProtocolError("A", 9, "abort LSN and timestamp are only sent with proto_version 4")
    _fixed(buf, 9)
    xid, subxid = _STREAM_ABORT(buf, 1)
    return StreamAbort(xid, subxid, None, None)


def _stream_abort_v4(buf: bytes) -> StreamAbort:
    """Only streaming=parallel adds abort LSN and time, so both lengths are valid."""
    if len(buf) == 25:
        xid, subxid, lsn, ts = _STREAM_ABORT_V4(buf, 1)
        return StreamAbort(xid, subxid, lsn, ts)
    _fixed(buf, 9)
    xid, subxid = _STREAM_ABORT(buf, 1)
    return StreamAbort(xid, subxid, None, None)


def _begin_prepare(buf: bytes) -> BeginPrepare:
    lsn, end_lsn, ts, xid = _BEGIN_PREPARE(buf, 1)
    gid, end = read_cstring(buf, 29)
    expect_end(buf, end)
    return BeginPrepare(lsn, end_lsn, ts, xid, gid)


def _prepared(buf: bytes) -> tuple[int, int, int, int, int, str]:
    """Prepare, Commit Prepared and Stream Prepare share one layout: flags, two LSNs, a
    timestamp, the xid and the GID."""
    flags, lsn, end_lsn, ts, xid = _PREPARE(buf, 1)
    gid, end = read_cstring(buf, 30)
    expect_end(buf, end)
    return flags, lsn, end_lsn, ts, xid, gid


def _prepare(buf: bytes) -> Prepare:
    return Prepare(*_prepared(buf))


def _commit_prepared(buf: bytes) -> CommitPrepared:
    return CommitPrepared(*_prepared(buf))


def _rollback_prepared(buf: bytes) -> RollbackPrepared:
    flags, prepare_end, rollback_end, prepare_ts, rollback_ts, xid = _ROLLBACK_PREPARED(buf, 1)
    gid, end = read_cstring(buf, 38)
    expect_end(buf, end)
    return RollbackPrepared(flags, prepare_end, rollback_end, prepare_ts, rollback_ts, xid, gid)


def _stream_prepare(buf: bytes) -> StreamPrepare:
    return StreamPrepare(*_prepared(buf))


def _streamed(body: _Body) -> Handler:
    """Wrap a handler for use inside a stream block, where an xid follows the type byte."""

    def handler(buf: bytes) -> Message:
        return body(buf, 5, u32(buf, 1))

    return handler


_PROTO_OF: Final = {
    ord(t): v for v, types in ((1, "BCORYIUDTM"), (2, "SEcA"), (3, "bPKrp")) for t in types
}
"""Lowest proto_version that may send each message type."""

_INSERT: Final = ord("I")
_UPDATE: Final = ord("U")
_DELETE: Final = ord("D")

_STREAMED: Final[dict[str, _Body]] = {
    "R": _relation,
    "Y": _type,
    "I": decode_insert,
    "U": decode_update,
    "D": decode_delete,
    "T": _truncate,
    "M": _message,
}


class PgoutputDecoder:
    """Turns one pgoutput message (the payload of an XLogData frame) into a `Message`.

    One instance per replication connection: it tracks whether a stream block is
    open, which the wire format leaves implicit. `in_stream` is the state it starts
    in: True for the decoder that replays buffered streamed records after their
    Stream Start … Stream Stop block has closed (each still carries its xid).
    """

    __slots__ = ("_inside", "_outside", "_proto_version", "_table")

    def __init__(self, proto_version: int, *, in_stream: bool = False) -> None:
        check_proto_version(proto_version)
        if in_stream and proto_version < 2:
            raise ProtocolError(
                "S", 0, f"proto_version {proto_version} has no stream blocks (streaming needs 2+)"
            )
        self._proto_version = proto_version
        outside: dict[int, Handler] = {
            ord("B"): _begin,
            ord("C"): _commit,
            ord("O"): _origin,
            **{ord(t): body for t, body in _STREAMED.items()},
        }
        if proto_version >= 2:
            outside[ord("S")] = self._stream_start
            outside[ord("c")] = _stream_commit
            outside[ord("A")] = _stream_abort_v4 if proto_version >= 4 else _stream_abort_v2
        if proto_version >= 3:
            outside[ord("b")] = _begin_prepare
            outside[ord("P")] = _prepare
            outside[ord("K")] = _commit_prepared
            outside[ord("r")] = _rollback_prepared
            outside[ord("p")] = _stream_prepare
        inside: dict[int, Handler] = {ord(t): _streamed(body) for t, body in _STREAMED.items()}
        inside[ord("O")] = _origin  # sent at Stream Start for replicated-origin changes
        inside[ord("E")] = self._stream_stop
        self._outside = outside
        self._inside = inside
        self._table = inside if in_stream else outside

    @property
    def proto_version(self) -> int:
        return self._proto_version

    @property
    def in_stream(self) -> bool:
        """True between Stream Start and Stream Stop."""
        return self._table is self._inside

    def decode(self, data: bytes | memoryview) -> Message:
        # One copy up front: the caller reuses its buffer, and slicing `bytes` then
        # yields owned values directly (cheaper than memoryview slice + bytes()).
        buf = data if type(data) is bytes else bytes(data)
        try:
            tag = buf[0]
            if self._table is self._outside:
                # Most messages are rows outside a stream block: a native call each,
                # not a table look-up and a generic call (~390 instructions a row).
                if tag == _INSERT:
                    return decode_insert(buf)
                if tag == _UPDATE:
                    return decode_update(buf)
                if tag == _DELETE:
                    return decode_delete(buf)
            return self._table[tag](buf)
        except (IndexError, KeyError, struct.error):
            raise self._failure(buf) from None

    def _failure(self, buf: bytes) -> ProtocolError:
        if not buf:
            return ProtocolError("", 0, "empty message")
        code = buf[0]
        name = chr(code)
        if code in self._table:
            return ProtocolError(name, len(buf), "truncated message")
        needed = _PROTO_OF.get(code)
        if needed is None:
            return ProtocolError(name, 0, "unknown message type")
        if needed > self._proto_version:
            return ProtocolError(
                name,
                0,
                f"message type needs proto_version >= {needed}, "
                f"but {self._proto_version} was negotiated",
            )
        # Only Stream Stop is confined to stream blocks; all else is refused inside them.
        if not self.in_stream:
            return ProtocolError(name, 0, "Stream Stop without a preceding Stream Start")
        if name == "S":
            return ProtocolError(name, 0, "Stream Start while a stream block is already open")
        return ProtocolError(name, 0, "message type not allowed inside a stream block")

    def _stream_start(self, buf: bytes) -> StreamStart:
        _fixed(buf, 6)
        xid, first = _STREAM_START(buf, 1)
        self._table = self._inside
        return StreamStart(xid, bool(first))

    def _stream_stop(self, buf: bytes) -> StreamStop:
        _fixed(buf, 1)
        self._table = self._outside
        return StreamStop()
