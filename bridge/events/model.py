"""The change-event stream handed to the schema and produce stages.

Whatever the plugin and however PostgreSQL delivered a transaction (plain, streamed
in segments, or two-phase), downstream sees one shape: `TxBegin`, its `Change`s in
order, `TxCommit`; plus `LogicalMessageEvent` for non-transactional messages.
Events leave in (commit LSN, ordinal) order. NamedTuples, except `Change`, built per
row: a plain class, as the per-row messages are (`bridge.decode.messages.PerRow`).
"""

from __future__ import annotations

from typing import ClassVar, Final, NamedTuple

from bridge.decode.messages import LogicalMessage, PerRow, Relation, TupleData

OP_CREATE: Final = "c"
OP_UPDATE: Final = "u"
OP_DELETE: Final = "d"
OP_TRUNCATE: Final = "t"
OP_MESSAGE: Final = "m"


class TxBegin(NamedTuple):
    xid: int
    commit_lsn: int  # LSN of the commit (or COMMIT PREPARED) record
    commit_ts: int  # µs since 2000-01-01 UTC
    origin: str | None  # replication origin name, None for local transactions


class Change(PerRow):
    """One change at position `ordinal` (0-based) of its transaction.

    `relation` is the description current at that point of the transaction; it is
    None only for op "m" (a transactional logical message, see `message`). A TRUNCATE
    of several tables yields one "t" change per table, each listing all of them in
    `relations` with the CASCADE/RESTART IDENTITY bits in `truncate_options`. `lsn` is
    the WAL position of the change itself (its XLogData start, Debezium's
    `source.lsn`); a snapshot read carries the snapshot's LSN.
    """

    FIELDS: ClassVar[tuple[str, ...]] = (
        "op", "relation", "old_kind", "old", "new", "ordinal", "relations",
        "truncate_options", "message", "lsn",
    )  # fmt: skip

    def __init__(
        self,
        op: str,  # OP_CREATE, OP_UPDATE, OP_DELETE, OP_TRUNCATE or OP_MESSAGE
        relation: Relation | None,
        old_kind: str,  # "K" key only, "O" full old row, "" none
        old: TupleData | None,
        new: TupleData | None,
        ordinal: int,
        relations: tuple[Relation, ...],
        truncate_options: int,
        message: LogicalMessage | None,
        lsn: int = 0,
    ) -> None:
        self.op = op
        self.relation = relation
        self.old_kind = old_kind
        self.old = old
        self.new = new
        self.ordinal = ordinal
        self.relations = relations
        self.truncate_options = truncate_options
        self.message = message
        self.lsn = lsn


class TxCommit(NamedTuple):
    xid: int
    commit_lsn: int
    end_lsn: int  # acknowledge this once every event of the transaction is delivered
    commit_ts: int
    event_count_by_table: dict[str, int]  # "namespace.name" -> changes emitted


class LogicalMessageEvent(NamedTuple):
    """A non-transactional pg_logical_emit_message(false, ...): no transaction around it."""

    lsn: int
    prefix: str
    content: bytes


Event = TxBegin | Change | TxCommit | LogicalMessageEvent
