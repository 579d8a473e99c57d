"""The message model shared by both decoders.

NamedTuples, except the messages built once per changed row (`TupleData`, `Insert`,
`Update`, `Delete`): those are plain classes (`PerRow`), which the compiled modules
build and free as C structs, where a NamedTuple is built through `tuple.__new__` and
freed by the generic subclass deallocator (~1,000 instructions per object more;
bench/README.md, "Per-row objects as compiled classes").
Timestamps are microseconds since the PostgreSQL epoch (2000-01-01 UTC); LSNs are
plain ints (see `bridge.lsn.LSN` for formatting). `xid` is set only on messages
that belong to a streamed (in-progress) transaction, else None.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, NamedTuple, TypeVar

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

# Builds a NamedTuple in C: `new_tuple(Begin, (final_lsn, commit_ts, xid))` is
# `Begin(final_lsn, commit_ts, xid)` without the Python-level __new__ NamedTuple generates
# (per-transaction messages and events; the per-row ones are `PerRow` classes).
new_tuple: Final = tuple.__new__


_P = TypeVar("_P", bound="PerRow")


class PerRow:
    """Equality, hash, repr, `_replace` and pickling by field (`FIELDS`), as a
    NamedTuple's, for the classes whose objects are built per row. Their fields are set
    once, in `__init__`, which takes them in `FIELDS` order."""

    FIELDS: ClassVar[tuple[str, ...]] = ()

    def fields(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self.FIELDS])

    def _replace(self: _P, **changes: Any) -> _P:
        values = [changes.pop(name, getattr(self, name)) for name in self.FIELDS]
        if changes:
            raise TypeError(f"{type(self).__name__} has no field {next(iter(changes))!r}")
        return type(self)(*values)

    def __reduce__(self) -> tuple[type[PerRow], tuple[Any, ...]]:
        return type(self), self.fields()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PerRow) or type(other) is not type(self):
            return False
        return self.fields() == other.fields()

    def __hash__(self) -> int:
        return hash(self.fields())

    def __repr__(self) -> str:
        pairs = ", ".join(f"{n}={v!r}" for n, v in zip(self.FIELDS, self.fields(), strict=True))
        return f"{type(self).__name__}({pairs})"


class TupleData(PerRow):
    """Column values of one row: `kinds[i]` says how to read `values[i]`."""

    FIELDS: ClassVar[tuple[str, ...]] = ("kinds", "values")

    def __init__(self, kinds: bytes, values: tuple[bytes | None, ...]) -> None:
        self.kinds = kinds
        self.values = values


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


class Insert(PerRow):
    FIELDS: ClassVar[tuple[str, ...]] = ("xid", "relid", "new")

    def __init__(self, xid: int | None, relid: int, new: TupleData) -> None:
        self.xid = xid
        self.relid = relid
        self.new = new


class Update(PerRow):
    FIELDS: ClassVar[tuple[str, ...]] = ("xid", "relid", "old_kind", "old", "new")

    def __init__(
        self, xid: int | None, relid: int, old_kind: str, old: TupleData | None, new: TupleData
    ) -> None:
        self.xid = xid
        self.relid = relid
        self.old_kind = old_kind  # "K" key only, "O" full old row, "" none sent
        self.old = old
        self.new = new


class Delete(PerRow):
    FIELDS: ClassVar[tuple[str, ...]] = ("xid", "relid", "old_kind", "old")

    def __init__(self, xid: int | None, relid: int, old_kind: str, old: TupleData) -> None:
        self.xid = xid
        self.relid = relid
        self.old_kind = old_kind  # "K" or "O"
        self.old = old


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
