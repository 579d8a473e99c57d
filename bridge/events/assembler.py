"""From decoded replication messages to one ordered stream of transaction events.

Plain transactions (Begin ... Commit) pass straight through, one row in, one
`Change` out, so a transaction of any size flows in constant memory. Transactions
PostgreSQL sends before it has decided them are held in spillable buffers of raw
payloads (`bridge.events.spill`) and replayed, re-decoded, once decided:

* Streamed (protocol 2+): segments Stream Start(xid) ... Stream Stop of several
  top-level transactions interleave; Stream Commit releases one, Stream Abort drops
  it. Messages inside a segment carry the xid of the *sub*transaction that made the
  change (pgoutput sends `change->txn->xid` while streaming), while Stream Start
  names the top-level xid, so rows are buffered under the segment's top-level xid
  and each subxid's first position is remembered. A Stream Abort whose subxid differs
  from its xid (ROLLBACK TO SAVEPOINT) cuts the buffer at that subxid's first record:
  all later records belong to it or to its nested subtransactions, exactly as
  PostgreSQL's apply worker truncates its spool file. pgoutput then re-sends any
  Relation message the cut removed before the next row that needs it.
* Two-phase (protocol 3): Begin Prepare ... Prepare (or a streamed transaction
  ended by Stream Prepare) is held per GID until Commit Prepared releases it with
  the commit's LSN and time, or Rollback Prepared drops it.

Relation messages replace the cached description. Outside streams they apply at
once, also inside Begin Prepare ... Prepare (pgoutput then counts them as sent for
later transactions); the replay of that prepared transaction still sees each
relation as it was at that point of the transaction. Inside a stream they are
buffered and applied at replay, in order, as pgoutput tracks them per streamed
transaction.

Acknowledgement contract: after a restart PostgreSQL does not send again a PREPARE
whose record lies before the slot's confirmed_flush_lsn, so while `hold_lsn()` is not
None the flush LSN reported to it must stay strictly below that value (one byte of
margin); otherwise a restart loses the prepared transaction and its Commit Prepared
fails here as unknown. Streamed transactions need no such cap: an undecided one is
streamed again from its start after a restart.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from bridge.decode.messages import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Origin,
    Prepare,
    Relation,
    RollbackPrepared,
    Startup,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    TypeMessage,
    Update,
)
from bridge.errors import ProtocolError, StreamSequenceError
from bridge.events.model import Event, LogicalMessageEvent
from bridge.events.relations import CachedRelation, RelationCache, RenameResolver, describe
from bridge.events.spill import SpillBuffer, SpillPool
from bridge.events.transaction import Lookup, TxState

Decode = Callable[[bytes], Message]
_NOTHING: Final[tuple[Event, ...]] = ()
# A buffered record is its message's WAL position (8 bytes) then its payload, so a
# replayed change carries the LSN PostgreSQL sent it at.
_LSN: Final = struct.Struct(">Q")
_LSN_SIZE: Final = _LSN.size


class _Pending:
    """A transaction held back until PostgreSQL decides it."""

    __slots__ = ("base", "gid", "origin", "prepare_lsn", "records", "streamed", "xid")

    def __init__(self, records: SpillBuffer, xid: int, streamed: bool) -> None:
        self.records = records
        self.xid = xid
        self.streamed = streamed  # records need the in-stream decoder (xid prefix)
        self.origin: str | None = None
        self.gid: str | None = None
        self.prepare_lsn: int | None = None
        # Begin Prepare ... Prepare only: relid -> description before the transaction
        # re-described it (None: unknown before).
        self.base: dict[int, CachedRelation | None] = {}


class _Overlay:
    """Relation lookups while replaying a Begin Prepare ... Prepare transaction."""

    __slots__ = ("_cache", "_local")

    def __init__(self, cache: RelationCache, base: dict[int, CachedRelation | None]) -> None:
        self._cache = cache
        self._local = {relid: entry for relid, entry in base.items() if entry is not None}

    def entry(self, relid: int, message_type: str, lsn: int) -> CachedRelation:
        local = self._local.get(relid)
        return local if local is not None else self._cache.entry(relid, message_type, lsn)

    def put(self, relation: Relation) -> None:
        self._local[relation.oid] = describe(relation)


class EventAssembler:
    """Feed every decoded message in WAL order; get back the events it completes.

    `decode` re-decodes buffered payloads of Begin Prepare ... Prepare transactions,
    `decode_streamed` those recorded inside stream blocks (it must decode as if inside
    one). `feed` returns an iterable that must be consumed before the next `feed`: for
    a released transaction it replays lazily from memory and disk. An Origin message
    after a transaction's first change is ignored (plugins send it right after Begin).
    `resolve_renamed`: the name of a relation another one was described with since
    (`bridge.events.relations`), for the servers that do not describe it again.
    """

    def __init__(
        self,
        *,
        decode: Decode,
        decode_streamed: Decode,
        spill_dir: str | os.PathLike[str],
        memory_limit_bytes: int,
        resolve_renamed: RenameResolver | None = None,
    ) -> None:
        self._decode = decode
        self._decode_streamed = decode_streamed
        self.relations = RelationCache(resolve_renamed)
        self._entry = self.relations.entry  # bound once: looked up per row
        self.pool = SpillPool(spill_dir, memory_limit_bytes)
        self.last_commit_end_lsn: int | None = None
        self._tx: TxState | None = None  # plain transaction being passed through
        self._sink: _Pending | None = None  # open stream block or Begin Prepare
        self._streams: dict[int, _Pending] = {}  # top-level xid -> undecided
        self._prepared: dict[str, _Pending] = {}  # gid -> prepared, undecided
        self._wal_end = 0  # nothing received yet: idle at the start position
        self._wal_start = 0  # XLogData start of the message being fed: its change's LSN
        self._handlers: dict[type[Any], Callable[[Any, bytes], Iterable[Event]]] = {
            Insert: self._row,
            Update: self._row,
            Delete: self._row,
            Truncate: self._row,
            LogicalMessage: self._message,
            Begin: self._begin,
            Commit: self._commit,
            Origin: self._origin,
            Relation: self._relation,
            TypeMessage: self._type,
            StreamStart: self._stream_start,
            StreamStop: self._stream_stop,
            StreamCommit: self._stream_commit,
            StreamAbort: self._stream_abort,
            StreamPrepare: self._stream_prepare,
            BeginPrepare: self._begin_prepare,
            Prepare: self._prepare,
            CommitPrepared: self._commit_prepared,
            RollbackPrepared: self._rollback_prepared,
            Startup: self._startup,
        }

    def feed(self, msg: Message, raw: bytes, wal_start: int, wal_end: int) -> Iterable[Event]:
        """Take one message with its payload bytes and XLogData WAL positions (the start
        is the change's own LSN, the end the server's WAL end when sent)."""
        if isinstance(msg, (Insert, Update, Delete)):
            # most messages: native type checks and a native call, not a dict look-up and a
            # generic call
            self._wal_end = wal_end
            self._wal_start = wal_start
            return self._row(msg, raw)
        handler = self._handlers.get(type(msg))
        if handler is None:
            raise ProtocolError(type(msg).__name__, 0, "not a logical replication message")
        self._wal_end = wal_end
        self._wal_start = wal_start
        return handler(msg, raw)

    def hold_lsn(self) -> int | None:
        """Lowest PREPARE LSN still undecided; acknowledge strictly below it."""
        lsns = [p.prepare_lsn for p in self._prepared.values() if p.prepare_lsn is not None]
        sink = self._sink
        if sink is not None and sink.prepare_lsn is not None:
            lsns.append(sink.prepare_lsn)
        return min(lsns, default=None)

    def idle_wal_end(self) -> int | None:
        """wal_end of the last message if it left no transaction or stream block open.

        Lets the acknowledgement layer advance over stretches without commits (aborted
        or filtered transactions) once all events so far are delivered, capped by
        `hold_lsn()`.
        """
        return self._wal_end if self._tx is None and self._sink is None else None

    def close(self) -> None:
        """Drop all buffered transactions and their spill files."""
        self.pool.close()
        self._streams.clear()
        self._prepared.clear()
        self._tx = self._sink = None

    # -- plain transactions -------------------------------------------------------

    def _begin(self, msg: Begin, raw: bytes) -> Iterable[Event]:
        self._require_idle("B")
        self._tx = TxState(msg.xid, msg.final_lsn, msg.commit_ts, None)
        self.relations.at(msg.xid, msg.final_lsn)
        return _NOTHING

    def _commit(self, msg: Commit, raw: bytes) -> Iterable[Event]:
        tx = self._tx
        if tx is None or self._sink is not None:
            raise StreamSequenceError("C", "Commit without a matching Begin")
        self._tx = None
        self.last_commit_end_lsn = msg.end_lsn
        end = tx.commit(msg.commit_lsn, msg.end_lsn, msg.commit_ts)
        return (end,) if tx.started else (tx.begin(), end)

    def _origin(self, msg: Origin, raw: bytes) -> Iterable[Event]:
        if self._sink is not None:
            self._sink.origin = msg.name
        elif self._tx is not None:
            if not self._tx.started:
                self._tx.origin = msg.name
        else:
            raise StreamSequenceError("O", "Origin outside a transaction")
        return _NOTHING

    def _row(
        self, msg: Insert | Update | Delete | Truncate | LogicalMessage, raw: bytes
    ) -> Iterable[Event]:
        sink = self._sink
        if sink is not None:
            sink.records.append(self._stamped(raw), msg.xid)
            return _NOTHING
        tx = self._tx
        if tx is None:
            raise StreamSequenceError(type(msg).__name__, "change outside a transaction")
        changes = tx.changes(msg, self._entry, self._wal_start)
        return changes if tx.started else (tx.begin(), *changes)

    def _message(self, msg: LogicalMessage, raw: bytes) -> Iterable[Event]:
        if msg.transactional:
            return self._row(msg, raw)
        return (LogicalMessageEvent(msg.lsn, msg.prefix, msg.content),)

    def _relation(self, msg: Relation, raw: bytes) -> Iterable[Event]:
        sink = self._sink
        if sink is None:
            self.relations.put(msg)
        elif sink.streamed:
            sink.records.append(self._stamped(raw), msg.xid)
        else:
            sink.base.setdefault(msg.oid, self.relations.cached(msg.oid))
            self.relations.put(msg)
            sink.records.append(self._stamped(raw), None)
        return _NOTHING

    def _type(self, msg: TypeMessage, raw: bytes) -> Iterable[Event]:
        sink = self._sink
        if sink is not None and sink.streamed:
            sink.records.append(self._stamped(raw), msg.xid)
        else:
            self.relations.put_type(msg)
        return _NOTHING

    def _startup(self, msg: Startup, raw: bytes) -> Iterable[Event]:
        return _NOTHING  # pglogical's settings: checked by the source, no events

    # -- streamed transactions ----------------------------------------------------

    def _stream_start(self, msg: StreamStart, raw: bytes) -> Iterable[Event]:
        self._require_idle("S")
        xid = msg.xid
        pending = self._streams.get(xid)
        if pending is None:
            if not msg.first_segment:
                raise StreamSequenceError(
                    "S", f"stream segment of transaction {xid} whose first segment never came"
                )
            pending = _Pending(self.pool.buffer(f"stream-{xid}", xid), xid, streamed=True)
            self._streams[xid] = pending
        elif msg.first_segment:
            raise StreamSequenceError("S", f"transaction {xid} started streaming twice")
        self._sink = pending
        return _NOTHING

    def _stream_stop(self, msg: StreamStop, raw: bytes) -> Iterable[Event]:
        if self._sink is None or not self._sink.streamed:
            raise StreamSequenceError("E", "Stream Stop outside a stream block")
        self._sink = None
        return _NOTHING

    def _stream_commit(self, msg: StreamCommit, raw: bytes) -> Iterable[Event]:
        self._require_idle("c")
        pending = self._streams.pop(msg.xid, None)
        if pending is None:
            raise StreamSequenceError(
                "c", f"Stream Commit of transaction {msg.xid}, never streamed"
            )
        return self._replay(pending, msg.xid, msg.commit_lsn, msg.end_lsn, msg.commit_ts)

    def _stream_abort(self, msg: StreamAbort, raw: bytes) -> Iterable[Event]:
        self._require_idle("A")
        pending = self._streams.get(msg.xid)
        if pending is not None:
            if msg.subxid == msg.xid:
                del self._streams[msg.xid]
                pending.records.discard()
            else:
                pending.records.drop_subtransaction(msg.subxid)
        return _NOTHING

    def _stream_prepare(self, msg: StreamPrepare, raw: bytes) -> Iterable[Event]:
        self._require_idle("p")
        pending = self._streams.pop(msg.xid, None)
        if pending is None:
            raise StreamSequenceError(
                "p", f"Stream Prepare of transaction {msg.xid}, never streamed"
            )
        self._hold(pending, msg.gid, msg.prepare_lsn, "p")
        return _NOTHING

    # -- two-phase transactions ---------------------------------------------------

    def _begin_prepare(self, msg: BeginPrepare, raw: bytes) -> Iterable[Event]:
        self._require_idle("b")
        pending = _Pending(self.pool.buffer(f"prepare-{msg.xid}"), msg.xid, streamed=False)
        pending.gid = msg.gid
        pending.prepare_lsn = msg.prepare_lsn
        self._sink = pending
        self.relations.at(msg.xid, None)  # its Relation messages apply now, undecided
        return _NOTHING

    def _prepare(self, msg: Prepare, raw: bytes) -> Iterable[Event]:
        pending = self._sink
        if pending is None or pending.streamed or pending.gid != msg.gid:
            raise StreamSequenceError("P", f"Prepare of {msg.gid!r} without its Begin Prepare")
        self._sink = None
        self._hold(pending, msg.gid, msg.prepare_lsn, "P")
        return _NOTHING

    def _commit_prepared(self, msg: CommitPrepared, raw: bytes) -> Iterable[Event]:
        self._require_idle("K")
        pending = self._prepared.pop(msg.gid, None)
        if pending is None:
            raise StreamSequenceError(
                "K",
                f"Commit Prepared of {msg.gid!r}, whose PREPARE was never received "
                "(was a flush LSN at or past hold_lsn() acknowledged?)",
            )
        return self._replay(pending, msg.xid, msg.commit_lsn, msg.end_lsn, msg.commit_ts)

    def _rollback_prepared(self, msg: RollbackPrepared, raw: bytes) -> Iterable[Event]:
        self._require_idle("r")
        pending = self._prepared.pop(msg.gid, None)
        if pending is not None:
            pending.records.discard()
        return _NOTHING

    def _hold(self, pending: _Pending, gid: str, prepare_lsn: int, message_type: str) -> None:
        if gid in self._prepared:
            raise StreamSequenceError(message_type, f"transaction {gid!r} prepared twice")
        pending.gid = gid
        pending.prepare_lsn = prepare_lsn
        self._prepared[gid] = pending

    # -- shared -------------------------------------------------------------------

    def _stamped(self, raw: bytes) -> bytes:
        return _LSN.pack(self._wal_start) + raw

    def _require_idle(self, message_type: str) -> None:
        if self._tx is not None or self._sink is not None:
            raise StreamSequenceError(
                message_type, "message inside an open transaction or stream block"
            )

    def _replay(
        self, pending: _Pending, xid: int, commit_lsn: int, end_lsn: int, commit_ts: int
    ) -> Iterator[Event]:
        """Emit a decided transaction, decoding its records one at a time."""
        tx = TxState(xid, commit_lsn, commit_ts, pending.origin)
        yield tx.begin()
        relations = self.relations
        relations.at(xid, commit_lsn)
        lookup: Lookup
        remember: Callable[[Relation], None]
        if pending.streamed:
            decode, lookup, remember = self._decode_streamed, relations.entry, relations.put
        else:
            overlay = _Overlay(relations, pending.base)
            decode, lookup, remember = self._decode, overlay.entry, overlay.put
        for record in pending.records.replay():
            msg = decode(record[_LSN_SIZE:])
            if isinstance(msg, Relation):
                remember(msg)
            elif isinstance(msg, TypeMessage):
                relations.put_type(msg)
            else:
                yield from tx.changes(msg, lookup, _LSN.unpack_from(record)[0])
        self.last_commit_end_lsn = end_lsn
        yield tx.commit(commit_lsn, end_lsn, commit_ts)
