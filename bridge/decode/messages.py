"""The message model shared by both decoders.

NamedTuples rather than dataclasses: row messages are built once per changed row
and tuple construction is the cheapest immutable object CPython offers.
Timestamps are microseconds since the PostgreSQL epoch (2000-01-01 UTC); LSNs are
plain ints (see `bridge.lsn.LSN` for formatting). `xid` is set only on messages
that belong to a streamed (in-progress) transaction, else None.
"""

from __future__ import annotations

from typing import Final, NamedTuple

# Defined with the replication envelope (source, the layer below); re-exported (the `as`
# form is mypy's explicit re-export) for the layers above, whose commit timestamps come
# from these messages.
from bridge.source.envelope import PG_EPOCH_OFFSET_US as PG_EPOCH_OFFSET_US  # noqa: PLC0414

# Tuple value kinds, one byte per column in TupleData.kinds.
KIND_NULL: Final = ord("n")
KIND_UNCHANGED: Final = ord("u")  # unchanged TOASTed value, not sent
KIND_TEXT: Final = ord("t")
KIND_BINARY: Final = ord("b")  # type's send/recv format
KIND_INTERNAL: Final = ord("i")  # pglogical only: internal binary; refused by the client

# Builds a NamedTuple in C: `new_tuple(Insert, (xid, relid, new))` is `Insert(xid, relid,
# new)` without the Python-level __new__ NamedTuple generates (per-row and per-transaction
# messages and events).
new_tuple: Final = tuple.__new__


class TupleData(NamedTuple):
    """Column values of one row: `kinds[i]` says how to read `values[i]`."""

    kinds: bytes
    values: tuple[bytes | None, ...]


class Column(NamedTuple):
    flags: int  # 1 = part of the replica identity key
    name: str
    type_oid: int  # 0 when the plugin did not send it
    typmod: int

    @property
    def is_key(self) -> bool:
        return bool(self.flags & 1)


class Begin(NamedTuple):
    final_lsn: int
    commit_ts: int
    xid: int


class Commit(NamedTuple):
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts: int


class Origin(NamedTuple):
    commit_lsn: int
    name: str


class Relation(NamedTuple):
    xid: int | None
    oid: int
    namespace: str  # "pg_catalog" when pgoutput sent the empty string
    name: str
    replica_identity: str  # d, n, f or i (pg_class.relreplident); "" if unknown
    columns: tuple[Column, ...]


class TypeMessage(NamedTuple):
    xid: int | None
    oid: int
    namespace: str
    name: str


class Insert(NamedTuple):
    xid: int | None
    relid: int
    new: TupleData


class Update(NamedTuple):
    xid: int | None
    relid: int
    old_kind: str  # "K" key only, "O" full old row, "" none sent
    old: TupleData | None
    new: TupleData


class Delete(NamedTuple):
    xid: int | None
    relid: int
    old_kind: str  # "K" or "O"
    old: TupleData


class Truncate(NamedTuple):
    xid: int | None
    options: int  # 1 CASCADE, 2 RESTART IDENTITY
    relids: tuple[int, ...]


class LogicalMessage(NamedTuple):
    xid: int | None
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


class StreamStart(NamedTuple):
    xid: int
    first_segment: bool


class StreamStop(NamedTuple):
    pass


class StreamCommit(NamedTuple):
    xid: int
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts: int


class StreamAbort(NamedTuple):
    xid: int
    subxid: int
    abort_lsn: int | None  # protocol 4 with streaming=parallel only
    abort_ts: int | None


class BeginPrepare(NamedTuple):
    prepare_lsn: int
    end_lsn: int
    prepare_ts: int
    xid: int
    gid: str


class Prepare(NamedTuple):
    flags: int
    prepare_lsn: int
    end_lsn: int
    prepare_ts: int
    xid: int
    gid: str


class CommitPrepared(NamedTuple):
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts: int
    xid: int
    gid: str


class RollbackPrepared(NamedTuple):
    flags: int
    prepare_end_lsn: int
    rollback_end_lsn: int
    prepare_ts: int
    rollback_ts: int
    xid: int
    gid: str


class StreamPrepare(NamedTuple):
    flags: int
    prepare_lsn: int
    end_lsn: int
    prepare_ts: int
    xid: int
    gid: str


class Startup(NamedTuple):
    """pglogical_output's first message: the server's take-it-or-leave-it settings."""

    version: int
    params: dict[str, str]


Message = (
    Begin
    | Commit
    | Origin
    | Relation
    | TypeMessage
    | Insert
    | Update
    | Delete
    | Truncate
    | LogicalMessage
    | StreamStart
    | StreamStop
    | StreamCommit
    | StreamAbort
    | BeginPrepare
    | Prepare
    | CommitPrepared
    | RollbackPrepared
    | StreamPrepare
    | Startup
)
