"""Turning the row messages of one transaction into numbered `Change` events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from bridge.decode.messages import (
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Truncate,
    Update,
    new_tuple,
)
from bridge.errors import StreamSequenceError
from bridge.events.model import (
    OP_CREATE,
    OP_DELETE,
    OP_MESSAGE,
    OP_TRUNCATE,
    OP_UPDATE,
    Change,
    TxBegin,
    TxCommit,
)
from bridge.events.relations import CachedRelation

# (relid, message type letter, the row's LSN) -> the relation current at that point of the
# stream.
Lookup = Callable[[int, str, int], CachedRelation]
# Final aliases: statics once compiled, not module-dict lookups per transaction.
_TX_BEGIN: Final = TxBegin
_TX_COMMIT: Final = TxCommit


class TxState:
    """The transaction being emitted: its identity, next ordinal and per-table counts."""

    __slots__ = (
        "_counts",
        "_run",
        "_run_name",
        "commit_lsn",
        "commit_ts",
        "ordinal",
        "origin",
        "started",
        "xid",
    )

    def __init__(self, xid: int, commit_lsn: int, commit_ts: int, origin: str | None) -> None:
        self.xid = xid
        self.commit_lsn = commit_lsn
        self.commit_ts = commit_ts
        self.origin = origin
        self.ordinal = 0
        # Changes come in runs of one table: a run is counted in two plain attributes and
        # added to `_counts` when it ends, not with a dict update per change; complete
        # only once `commit` ended the last run, so nothing else reads it.
        self._counts: dict[str, int] = {}
        self._run_name = ""
        self._run = 0
        self.started = False  # TxBegin emitted (deferred until the Origin message passed)

    def begin(self) -> TxBegin:
        self.started = True
        begin: TxBegin = new_tuple(
            _TX_BEGIN, (self.xid, self.commit_lsn, self.commit_ts, self.origin)
        )
        return begin

    def commit(self, commit_lsn: int, end_lsn: int, commit_ts: int) -> TxCommit:
        self._end_run()
        end: TxCommit = new_tuple(
            _TX_COMMIT, (self.xid, commit_lsn, end_lsn, commit_ts, self._counts)
        )
        return end

    def changes(self, msg: Message, lookup: Lookup, lsn: int) -> tuple[Change, ...]:
        """The events of one row-level message at WAL position `lsn`; other message
        kinds are out of place."""
        if isinstance(msg, Insert):
            relation, name = lookup(msg.relid, "I", lsn)
            ordinal = self._next(name)
            return (Change(OP_CREATE, relation, "", None, msg.new, ordinal, (), 0, None, lsn),)
        if isinstance(msg, Update):
            relation, name = lookup(msg.relid, "U", lsn)
            ordinal = self._next(name)
            old_kind, old = msg.old_kind, msg.old
            return (Change(OP_UPDATE, relation, old_kind, old, msg.new, ordinal, (), 0, None, lsn),)
        if isinstance(msg, Delete):
            relation, name = lookup(msg.relid, "D", lsn)
            ordinal = self._next(name)
            old_kind, old = msg.old_kind, msg.old
            return (Change(OP_DELETE, relation, old_kind, old, None, ordinal, (), 0, None, lsn),)
        if isinstance(msg, Truncate):
            cached = [lookup(relid, "T", lsn) for relid in msg.relids]
            relations = tuple(entry.relation for entry in cached)
            options = msg.options
            at = self._next
            return tuple(
                Change(OP_TRUNCATE, rel, "", None, None, at(name), relations, options, None, lsn)
                for rel, name in cached
            )
        if isinstance(msg, LogicalMessage) and msg.transactional:
            ordinal = self.ordinal
            self.ordinal = ordinal + 1
            return (Change(OP_MESSAGE, None, "", None, None, ordinal, (), 0, msg, lsn),)
        raise StreamSequenceError(
            type(msg).__name__, "message cannot appear among a transaction's changes"
        )

    def _next(self, name: str) -> int:
        """Count one change of table `name`; return its ordinal."""
        if name is not self._run_name:  # one CachedRelation's string per table version
            self._end_run()
            self._run_name = name
        self._run += 1
        ordinal = self.ordinal
        self.ordinal = ordinal + 1
        return ordinal

    def _end_run(self) -> None:
        if self._run:
            counts = self._counts
            counts[self._run_name] = counts.get(self._run_name, 0) + self._run
            self._run = 0
