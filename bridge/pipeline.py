"""The loop that wires source → decode → events → schema → serialize → produce → acks.

`Pipeline` only runs: it gets ready collaborators (built and opened by
`bridge.build.build_pipeline`, which also owns closing them) and moves replication
messages through them. Compiled (setup.py): `_loop`, `_change` and `_send` run per
message and per row.

Loop priorities, highest first:
1. a failed delivery stops everything (nothing past it is ever acknowledged);
2. keepalives and status updates (inside `ReplicationStream.read`, and through
   `service()` while the producer applies backpressure);
3. the next replication message, decoded and turned into records;
4. delivery callbacks (`poll`), Kafka transaction commits (exactly-once mode),
   heartbeats, and the flush LSN, recomputed after each commit and whenever the
   stream is quiet.

A resumed initial snapshot (or `always`) is read in the middle of the stream, at its
LSN L (`Snapshots.pending_lsn`): the stream first delivers every transaction whose
commit record starts below L, has them confirmed, then pauses for the snapshot's
rows, then goes on (per-key order across the seam: see bridge/snapshot/modes.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Final, Protocol

from bridge import __version__
from bridge.config import Config
from bridge.decode.messages import Message, Relation
from bridge.encode.records import SourceBlock, TxSource
from bridge.errors import (
    BridgeError,
    IncompatibleSchemaError,
    RecordTooLargeError,
    SourceError,
    StopRequestedError,
    ValueConversionError,
)
from bridge.events.assembler import EventAssembler
from bridge.events.model import Change, LogicalMessageEvent, TxBegin, TxCommit
from bridge.kafka.acks import AckTracker, TxHandle
from bridge.kafka.eos import KafkaTransactions
from bridge.kafka.oversized import letter_id
from bridge.kafka.producer import Producer, ProducerStoppedError
from bridge.kafka.sidetopics import (
    HEARTBEAT_PREFIX,
    Heartbeat,
    MessageTopic,
    TransactionTopic,
    tx_id,
)
from bridge.lsn import LSN
from bridge.metrics import Metrics
from bridge.record import KafkaRecord
from bridge.routing import Routing
from bridge.source.stream import ReplicationStream

log: Final = logging.getLogger("bridge.pipeline")
_SERVICE_EVERY: Final = 4096
# A commit re-computes the flush position at most this often (each time polls the producer
# and walks the tracker); idle moments always do. Small transactions would otherwise pay
# for it one by one.
_ACK_EVERY_S: Final = 0.005
_IDLE_WAIT_S: Final = 0.2
_IN_FLIGHT_WAIT_S: Final = 0.01


# The seams below are the pipeline's collaborators, each built and opened by
# `bridge.build` and handed over ready. Common to all of them: the pipeline calls them
# from its one thread, in the order of the replication stream (commit order), never
# concurrently, and a `BridgeError` one raises stops the bridge with nothing acknowledged
# past the last transaction whose records Kafka confirmed (PostgreSQL resends the rest
# after a restart: delivery is at least once, or exactly once in exactly-once mode, where
# the Kafka transaction of a failed run is aborted). Records a collaborator returns are
# produced in the order of the list, after the records that came before in the stream.


class KeyedTable(Protocol):
    """A table version as its encoder sees it; `key_schema` names the Kafka key's Avro
    schema (None: records without a key), for dead-letter reports."""

    @property
    def key_schema(self) -> Mapping[str, Any] | None: ...


class RowEncoder(Protocol):
    """One table version's encoder (`bridge.encode.records.ChangeEncoder`).

    `records` is pure (no I/O): a change's records, in the order they must reach Kafka
    (a delete before its tombstone, a key change's delete before its create), all for the
    encoder's topic. Raises a `BridgeError` (`SchemaError`, `ValueConversionError`) for a
    value its schema cannot hold, before returning anything of the change.
    """

    @property
    def table(self) -> KeyedTable: ...

    def records(self, change: Change, tx: TxSource) -> list[KafkaRecord]: ...


class Encoders(Protocol):
    """Relation versions to their topic and encoder (`bridge.encoders.EncoderCache`)."""

    def get(self, relation: Relation) -> tuple[str, RowEncoder]:
        """Topic and encoder of a relation version. The first call for a version does I/O
        (the catalog, the registry: its schemas are registered then) and may block on it;
        later calls for the same `Relation` object return the same encoder. Raises a
        `BridgeError` (an incompatible schema, a registry or catalog failure); nothing of
        the change is produced then."""


class Snapshots(Protocol):
    """The initial snapshot, before streaming or at an LSN inside it
    (`bridge.snapshot.manager.SnapshotManager`); it produces through a producer of its
    own, delivers at least once, and keeps its own progress."""

    def run_initial(self, should_stop: Callable[[], bool]) -> bool:
        """Before replication starts: read (or resume) the snapshot, blocking until its
        records are delivered; False when streaming must not start (`initial_only`, or
        `should_stop()` became true)."""

    def pending_lsn(self) -> int | None:
        """The LSN L of a snapshot to read in the middle of the stream, if any: the stream
        delivers and confirms every transaction committed below L first."""

    def read_pending(
        self, flushed: int, should_stop: Callable[[], bool], keep_alive: Callable[[], None]
    ) -> bool:
        """Read that snapshot (`flushed`: the position PostgreSQL has confirmed), blocking
        until its records are delivered. Calls `keep_alive` at least every few seconds
        (the stream's keepalives and status updates) while it reads; False when stopped
        before the end (the stream must not go on)."""

    def is_private(self, relation: Relation) -> bool:
        """The bridge's own progress tables: their changes are never produced. Pure;
        the pipeline asks once per relation version."""


class Incremental(Protocol):
    """Incremental snapshots read while the stream runs (DBLog windows,
    `bridge.snapshot.incremental.IncrementalSnapshotter`). Its records are produced by the
    pipeline, so they are delivered and acknowledged with the stream's."""

    def on_change(
        self, change: Change, records: list[KafkaRecord], tx: TxSource
    ) -> list[KafkaRecord]:
        """Every streamed change of a non-private table, captured or not, after its own
        `records` were handed to the producer (empty for a change not produced). Returns
        records to produce right after them, as records of the same transaction (a closed
        window's rows). May query PostgreSQL on its own connection (a signal's window
        opens with a chunk read)."""

    def on_acknowledged(self, lsn: int) -> None:
        """After each flush report: everything at or below `lsn` is delivered (never
        decreasing), so positions it covers may be stored."""

    def on_idle(
        self, position: int, emit: Callable[[list[KafkaRecord]], Callable[[], bool]]
    ) -> bool:
        """The stream is idle at `position`, between transactions; `emit` sends records
        between transactions, tracked like a transaction that ends nowhere, and returns a
        callable that tells whether Kafka confirmed them all. True: ask the server how far
        the stream is."""


class Outbox(Protocol):
    """`outbox.tables`: the changes of an outbox table become routed events
    (`bridge.outbox.OutboxRouter`) instead of records of the table's topic."""

    def matches(self, relation: Relation) -> bool:
        """Whether `relation` is an outbox table; pure, asked once per relation version."""

    def route(self, change: Change) -> list[KafkaRecord]:
        """The records replacing `change`, each with its own topic, produced in the
        change's transaction; none for an operation the router skips. Registers a routed
        topic's schemas on its first event (registry I/O, may block); raises a
        `BridgeError` for a value it cannot write or an update under `on_update: fatal`."""


class Positions(Protocol):
    """Where a flush position must be recorded before PostgreSQL hears of it
    (`bridge.slotstate.PositionRecorder`: a lost slot is then recognised)."""

    def admit(self, lsn: int, quiet: bool = False) -> int:
        """The part of `lsn` PostgreSQL may be told: never more than `lsn`, never less than
        an earlier answer. Starts recording `lsn` asynchronously (at most one write in
        flight) and does not block; `quiet`: the stream has nothing to read, record now."""

    def settle(self, timeout: float) -> None:
        """Wait up to `timeout` s for the recording in flight (a clean stop)."""

    def lost_slot(self) -> BridgeError | None:
        """After the stream failed: the slot's loss, when that is why."""


class Oversized(Protocol):
    """Rows over their topic's size limit (`bridge.kafka.oversized.OversizedPolicy`)."""

    def limit(self, topic: str, relation: Relation) -> int:
        """The largest record (`KafkaRecord.size`) `topic` takes; asked once per relation
        version (may ask the broker the first time for a topic)."""

    def too_large(
        self,
        record: KafkaRecord,
        relation: Relation,
        key_schema: Mapping[str, Any] | None,
        tx: TxSource,
    ) -> RecordTooLargeError:
        """The error of `record`, over its limit: raised where the table's policy is to
        stop, else the dead letter's error."""

    @property
    def dead_letter_topic(self) -> str: ...

    def park(
        self,
        relation: Relation,
        change: Change,
        error: BridgeError,
        tx: TxSource,
        record: KafkaRecord | None = None,
        key_schema: Mapping[str, Any] | None = None,
    ) -> KafkaRecord:
        """The dead-letter record of a change the bridge could not encode or register, or
        of its `record` over the topic's limit (`pipeline.on_error: dlq`), produced in its
        place in the same transaction, so the slot passes it only once it is delivered."""


class Notices(Protocol):
    """`snapshot.notification_topic` (`bridge.snapshot.notify.Notifier`): sent without
    waiting, outside the records' transactions."""

    def degraded(self, table: str, policy: str, error: BridgeError, where: dict[str, str]) -> None:
        """`table` degraded: its change dead-lettered or skipped (`policy`) at `where`."""


class Reselect(Protocol):
    """`avro.toast_reselect`: a change whose new row lacks unchanged TOASTed values comes
    back with them read from the table (`bridge.reselect.ToastReselect`)."""

    def complete(self, change: Change) -> Change:
        """`change`, completed by a SELECT on a connection of its own (blocks on it; a
        change with nothing missing comes back as it is). Raises `SourceError`."""


@dataclass
class Parts:
    """What a pipeline runs with, ready to use; `resources` closes whatever is open."""

    metrics: Metrics
    routing: Routing
    snapshots: Snapshots
    incremental: Incremental | None
    encoders: Encoders
    decode: Callable[[bytes], Message]
    start_streaming: Callable[[], None]  # START_REPLICATION on the replication connection
    start_lsn: LSN  # where the slot resumes
    describe: str  # the plugin and its options, for the log
    stream: ReplicationStream
    assembler: EventAssembler
    tracker: AckTracker
    producer: Producer
    oversized: Oversized
    eos: KafkaTransactions | None
    txmeta: TransactionTopic
    messages: MessageTopic
    heartbeat: Heartbeat
    positions: Positions
    resources: ExitStack
    reselect: Reselect | None = None  # avro.toast_reselect
    outbox: Outbox | None = None  # outbox.tables
    notices: Notices | None = None  # snapshot.notification_topic


class Pipeline:
    """One replication slot streamed into Kafka until `stop()` or an error.

    Takes its collaborators ready (`Parts`) and closes them through `parts.resources`
    when `run` ends, or on `close()` if it never runs.
    """

    def __init__(self, cfg: Config, parts: Parts) -> None:
        self.cfg = cfg
        self.metrics = parts.metrics
        self.routing = parts.routing
        self.snapshots = parts.snapshots
        self.incremental = parts.incremental
        self.encoders = parts.encoders
        self.decode = parts.decode
        self.stream = parts.stream
        self.assembler = parts.assembler
        self.tracker = parts.tracker
        self.producer = parts.producer
        self.oversized = parts.oversized
        self.eos = parts.eos
        self.txmeta = parts.txmeta
        self.messages = parts.messages
        self.heartbeat = parts.heartbeat
        self.positions = parts.positions
        self.reselect = parts.reselect
        self.outbox = parts.outbox
        self.notices = parts.notices
        self._start_streaming = parts.start_streaming
        self.start_lsn = parts.start_lsn
        self._describe = parts.describe
        self._resources = parts.resources
        self._event_counter = parts.metrics.event_counter
        self._commits = parts.metrics.commits
        self._stopping = False
        self._finish_by: float | None = None  # a stop inside a transaction reads on until then
        # Read per transaction: plain attributes, not lookups through the config models.
        self._source_block = SourceBlock(cfg.kafka.topic_prefix, cfg.source.dbname, __version__)
        self._tx_metadata = cfg.pipeline.transaction_metadata
        self._messages_on = cfg.source.messages
        self._skipped_ops = self.routing.skipped_ops
        self._tx: TxHandle | None = None
        self._tx_source: TxSource | None = None
        self._tx_ident = ""
        self._skipping = False
        self._tx_records = 0
        self._next_ack = 0.0
        self._routes: dict[int, _Route] = {}
        self._last_route: _Route | None = None
        self._snapshot_at: int | None = None  # L of a snapshot to read when the stream is there

    def run(self) -> None:
        """Stream until stopped; on the way out flush, confirm and close cleanly."""
        try:
            if not self.snapshots.run_initial(lambda: self._stopping):
                # initial_only, or stopped during the snapshot: replication never started,
                # so there is no stream to end with a status update
                self.stream.closed = True
                return
            self._stream()
        finally:
            self.close()

    def _stream(self) -> None:
        self._snapshot_at = self.snapshots.pending_lsn()
        self._start_streaming()
        log.info(
            "streaming slot %s from %s with %s",
            self.cfg.source.slot_name,
            self.start_lsn,
            self._describe,
        )
        self.metrics.set_connected("postgres", True)
        try:
            try:
                self._loop()
            except ProducerStoppedError:
                log.info(
                    "stop requested while Kafka was full; undelivered work is not acknowledged"
                )
            except StopRequestedError as exc:  # a wait on PostgreSQL cut short by the stop
                log.info("%s; undelivered work is not acknowledged", exc)
            except SourceError as exc:
                lost = self.positions.lost_slot()
                if lost is None:
                    raise
                raise lost from exc
            except _SnapshotStoppedError:
                # Settled before the snapshot (`_read_snapshot`), nothing sent since; a
                # drain could take the transaction being replayed as passed (its TxBegin
                # did not open it yet).
                log.info("stop requested while the stream waited for the snapshot")
                return
            self._drain()
        except Exception as exc:
            self.metrics.failed(exc)
            raise
        finally:
            self.metrics.set_connected("postgres", False)

    def stop(self) -> None:
        """Safe from a signal handler: the loop and a full producer both notice."""
        self._stopping = True
        self.producer.stopping = True

    def close(self) -> None:
        """Close every collaborator that is open (the builder registered each one)."""
        self._resources.close()

    def _loop(self) -> None:
        stream, assembler, decode = self.stream, self.assembler, self.decode
        tracker, exactly_once = self.tracker, self.eos is not None
        while not self._stopping or self._finishing_tx():
            data = stream.read(idle_wait_s(tracker.in_flight_records, exactly_once))
            if data is None:
                self._idle()
                continue
            raw = data.payload
            unserviced = 0
            for event in assembler.feed(decode(raw), raw, data.wal_start, data.wal_end):
                unserviced += 1
                if unserviced == _SERVICE_EVERY:
                    # One message can release millions of buffered changes (stream commit,
                    # COMMIT PREPARED): keep answering keepalives during the replay.
                    unserviced = 0
                    stream.service()
                match event:
                    case Change():
                        self._change(event)
                    case TxBegin():
                        self._begin(event)
                    case TxCommit():
                        self._commit(event)
                    case LogicalMessageEvent():
                        self._message(event)

    def _finishing_tx(self) -> bool:
        """After a stop: whether to read on to the commit of the transaction being read.

        PostgreSQL resends a transaction whose commit was not confirmed, from its start:
        stopping in its middle leaves the records already sent in Kafka twice after the
        restart, which a consumer of a table without a key cannot tell from two rows. Its
        remaining changes follow at once (the walsender sends a transaction only once it
        committed; streamed and prepared ones are buffered until their commit, so no
        transaction is open while PostgreSQL has not decided it), so a graceful stop
        finishes it, within half of `shutdown_timeout_s` (the rest is for the drain)."""
        if self._tx is None:
            return False
        now = time.monotonic()
        budget = self.cfg.pipeline.shutdown_timeout_s / 2
        if self._finish_by is None:
            self._finish_by = now + budget
            log.info("stop requested inside a transaction: reading on to its commit")
        if now < self._finish_by:
            return True
        log.warning(
            "stop requested: the transaction being read did not reach its commit within %.0fs; "
            "PostgreSQL sends it again after the restart, its records sent so far twice",
            budget,
        )
        return False

    def _begin(self, event: TxBegin) -> None:
        snapshot_at = self._snapshot_at
        if snapshot_at is not None and event.commit_lsn >= snapshot_at:
            self._read_snapshot()  # the first transaction the snapshot does not see
        self._tx = self.tracker.open_tx()
        self._tx_records = 0
        self._skipping = self.eos is not None and self.eos.skip(event.commit_lsn)
        if self._tx_metadata:
            self._tx_ident = tx_id(event.xid, event.commit_lsn)
        self._tx_source = TxSource(
            self._source_block,
            event.xid,
            event.commit_lsn,
            event.commit_ts,
            self.assembler.last_commit_end_lsn,  # the previous transaction's, until its end
        )
        if self._tx_metadata and not self._skipping:
            self._send(self.txmeta.begin(self._tx_ident, event.commit_ts))

    def _change(self, change: Change) -> None:
        if self._skipping:
            return
        tx = self._tx_source
        assert tx is not None
        relation = change.relation
        if relation is None:  # transactional logical decoding message
            message = change.message
            if message is not None and message.prefix != HEARTBEAT_PREFIX:
                self._send(self.messages.record(message, tx.base["txId"]))
            return
        route = self._last_route  # rows come in runs of one table: skip the dict then
        if route is None or route.relation is not relation:
            route = self._routes.get(relation.oid)
            if route is None or route.relation is not relation:
                route = self._routes[relation.oid] = _Route(relation, self)
            self._last_route = route
        if route.private:
            return  # the bridge's own snapshot progress tables
        records: list[KafkaRecord] = []
        if route.captured and change.op not in self._skipped_ops:
            records = (
                self._records(route, change, tx)
                if route.on_error == "fail"
                else self._tolerating(route, change, tx)
            )
        if self.incremental is not None:  # signals, watermarks, chunk rows at a window's end
            for extra in self.incremental.on_change(change, records, tx):
                self._send(extra)

    def _records(self, route: _Route, change: Change, tx: TxSource) -> list[KafkaRecord]:
        """Encode and send one captured change; its records (for the incremental snapshot).
        An outbox table's change goes to the outbox router: its events are no table records."""
        outbox = route.outbox
        if outbox is not None:
            for routed in outbox.route(change):
                self._send(routed)
            return []
        op = change.op
        counter = route.counters.get(op)
        if counter is None:  # the table's first change with this op
            relation = route.relation
            counter = self._event_counter(relation.namespace, relation.name, op)
            route.counters[op] = counter
        counter[0] = counter[0] + 1  # compiled, `+=` on an item is a generic in-place add
        encoder = route.encoder
        if encoder is None:
            encoder = route.resolve(self)
        limit = route.limit
        if self.reselect is not None:
            change = self.reselect.complete(change)
        records = encoder.records(change, tx)
        for record in records:
            if record.size() > limit:
                self._too_large(route, change, record, encoder.table.key_schema, tx)
            else:
                self._send(record)
        return records

    def _too_large(
        self,
        route: _Route,
        change: Change,
        record: KafkaRecord,
        key_schema: Mapping[str, Any] | None,
        tx: TxSource,
    ) -> None:
        """A record over its topic's limit: stop, or tolerate it as the table's policy
        (`PipelineConfig.oversized_for`) says. The change's other records (a primary-key
        change's delete and tombstone) go out as they are."""
        error = self.oversized.too_large(record, route.relation, key_schema, tx)
        if route.oversized == "fail":
            raise error
        self._tolerate(route, route.oversized, change, tx, error, record, key_schema)

    def _tolerating(self, route: _Route, change: Change, tx: TxSource) -> list[KafkaRecord]:
        """`_records` for a table whose `pipeline.on_error` is dlq or skip: a change it
        cannot encode, or whose schema the registry refuses, is dead-lettered (in its
        transaction, so the slot passes it once the dead letter is delivered) or skipped,
        counted, and the stream goes on. A table version whose registration failed is not
        asked again: its later changes go the same way without a registry round trip.
        Every other error (the registry unreachable, the source, Kafka) still stops."""
        error = route.broken
        if error is None:
            try:
                return self._records(route, change, tx)
            except (ValueConversionError, IncompatibleSchemaError) as exc:
                error = exc
                if route.encoder is None:
                    route.broken = exc
        self._tolerate(route, route.on_error, change, tx, error)
        return []

    def _tolerate(
        self,
        route: _Route,
        policy: str,
        change: Change,
        tx: TxSource,
        error: BridgeError,
        record: KafkaRecord | None = None,
        key_schema: Mapping[str, Any] | None = None,
    ) -> None:
        """The one way a table's trouble is let pass (`policy` dlq or skip): the change
        (or its `record` over the size limit) dead-lettered or skipped, counted, the table
        marked degraded; the first of the table version logged at WARNING and notified."""
        relation = route.relation
        table = f"{relation.namespace}.{relation.name}"
        parked = policy == "dlq"
        first = not route.degraded
        route.degraded = True
        lsn, commit_lsn = LSN(change.lsn), LSN(tx.base["commit_lsn"])
        dead_letter_topic = self.oversized.dead_letter_topic
        log.log(
            logging.WARNING if first else logging.DEBUG,
            "table %s is degraded: a change at LSN %s (commit LSN %s) %s: %s",
            table,
            lsn,
            commit_lsn,
            f"sent to dead-letter topic {dead_letter_topic!r}"
            if parked
            else "skipped (pipeline.on_error: skip)",
            error.message,  # its hint (nothing acknowledged past it) is for a stop
        )
        if first and self.notices is not None:
            where = {"lsn": str(lsn), "commit_lsn": str(commit_lsn)}
            if parked:
                where["dead_letter_topic"] = dead_letter_topic
            self.notices.degraded(table, policy, error, where)
        if parked:
            self._send(self.oversized.park(relation, change, error, tx, record, key_schema))
        letter = letter_id(table, change.lsn, tx.base["commit_lsn"], error.message)
        self.metrics.tolerated(table, letter if parked else None)

    def _send(self, record: KafkaRecord) -> None:
        assert self._tx is not None
        if self.eos is not None and self._tx_records == 0:
            self.eos.before_records()
        self._tx_records += 1
        self.producer.produce(record, self._tx)

    def _commit(self, event: TxCommit) -> None:
        assert self._tx is not None
        if self._tx_metadata and not self._skipping:
            counts = event.event_count_by_table
            self._send(self.txmeta.end(self._tx_ident, event.commit_ts, counts))
        self.tracker.close_tx(self._tx, event.end_lsn)
        self._commits.committed(event.end_lsn, event.commit_ts)
        self._tx = None
        if self.eos is not None:
            self.eos.after_tx(event.end_lsn, self._tx_records)
        now = time.monotonic()
        if now >= self._next_ack:
            self._next_ack = now + _ACK_EVERY_S
            self._acknowledge()

    def _message(self, event: LogicalMessageEvent) -> None:
        """Non-transactional logical decoding message (heartbeats among them)."""
        if event.prefix == HEARTBEAT_PREFIX:
            self._send_untracked(self.heartbeat.record(event.lsn))
        elif self._messages_on:
            record = self.messages.make(
                {"prefix": event.prefix},
                {
                    "op": "m",
                    "ts_ms": time.time_ns() // 1_000_000,
                    "transactional": False,
                    "lsn": event.lsn,
                    "txId": None,
                    "message": {"prefix": event.prefix, "content": event.content},
                },
            )
            self._send_untracked(record)

    def _send_untracked(self, record: KafkaRecord) -> None:
        """A record outside PostgreSQL transactions: at-least-once, or inside the open
        Kafka transaction in exactly-once mode."""
        if self.eos is not None:
            self.eos.before_records()
        self.producer.produce_untracked(record)

    def _idle(self) -> None:
        self.metrics.tick()
        snapshot_at = self._snapshot_at
        if snapshot_at is not None and self._tx is None:
            if self.stream.server_wal_end >= snapshot_at:
                self._read_snapshot()  # every transaction committed before it was seen
            else:
                self.stream.send_status(reply=True)  # a keepalive tells how far decoding is
        if self.eos is not None and self._tx is None:
            self.eos.commit()
        now = time.monotonic()
        if self.heartbeat.due(now):
            self.heartbeat.beat(now)
        self._acknowledge(quiet=True)
        if self.incremental is not None and self._tx is None:
            idle_at = self.assembler.idle_wal_end()
            if idle_at is not None and self.incremental.on_idle(
                max(idle_at, self.stream.server_wal_end), self._emit_between
            ):
                self.stream.send_status(reply=True)  # a keepalive tells how far decoding is

    def _emit_between(self, records: list[KafkaRecord]) -> Callable[[], bool]:
        """Records of no PostgreSQL transaction (an incremental snapshot's chunk whose
        window closed while the stream was idle), tracked like one that ends nowhere: the
        flush position passes later transactions only once they are delivered. Returns
        whether Kafka confirmed them all (exactly-once: committed here and now, so a
        confirmed record is never one of an aborted Kafka transaction)."""
        self._tx = handle = self.tracker.open_tx()
        self._tx_records = 0
        for record in records:
            self._send(record)
        self.tracker.close_tx(handle, 0)
        self._tx = None
        if self.eos is not None:
            self.eos.commit()
        return lambda: handle.complete

    def _read_snapshot(self) -> None:
        """Read the pending snapshot now that every transaction it sees was received.

        They are delivered and confirmed first (`Snapshots.read_pending` waits until
        the slot shows it), so a kill from here on never resends them after the rows.
        The stream waits meanwhile, its keepalives answered. Called between two
        transactions, maybe with the next one's events under way (a streamed or
        prepared transaction being replayed leaves the assembler idle), so the position
        reported stops at the last delivered transaction, not at an idle position."""
        self._snapshot_at = None
        while not self._settle(self.cfg.pipeline.shutdown_timeout_s, idle=False):
            if self._stopping:
                raise _SnapshotStoppedError
        keep_alive = self.metrics.ticking(self.stream.service)
        if not self.snapshots.read_pending(
            self.stream.status.flushed, lambda: self._stopping, keep_alive
        ):
            raise _SnapshotStoppedError

    def _acknowledge(self, idle: bool = True, quiet: bool = False) -> bool:
        """Report the flush position (past an idle stretch of WAL when `idle`; `quiet`:
        called from the loop's idle turn); True if it is all that was delivered (not held
        back until the state topic recorded it)."""
        self.producer.poll()
        lsn = self.tracker.flush_lsn(
            idle_position=self.assembler.idle_wal_end() if idle else None,
            server_wal_end=self.stream.server_wal_end,
            holds=(self.assembler.hold_lsn(), None if self.eos is None else self.eos.hold_lsn()),
        )
        # recorded in Kafka before PostgreSQL hears of it
        admitted = self.positions.admit(lsn, quiet)
        self.stream.confirm(admitted)
        self.metrics.confirmed(admitted)
        if self.incremental is not None:
            self.incremental.on_acknowledged(admitted)
        return admitted >= lsn

    def _settle(self, timeout: float, idle: bool = True) -> bool:
        """Deliver what is in flight and report the position it reaches (each step
        waits up to `timeout` s); True if all of it is delivered and reported."""
        if self.eos is not None and self._tx is None:
            self.eos.commit()
        delivered = self.producer.flush(timeout)
        self._acknowledge(idle)
        self.positions.settle(timeout)
        reported = self._acknowledge(idle)
        self.stream.send_status()
        return delivered and reported

    def _drain(self) -> None:
        """Graceful stop: deliver what is in flight, then report the final position."""
        timeout = self.cfg.pipeline.shutdown_timeout_s
        if not self._settle(timeout):
            log.warning("records or the position still unconfirmed after %.0fs", timeout)
        log.info("stopped at flush LSN %s", LSN(self.stream.status.flushed))


class _SnapshotStoppedError(Exception):
    """A stop while the stream waited for the pending snapshot: leave the loop
    without the transaction that was about to start."""


class _Route:
    """What the pipeline decided for one relation version, looked up once per change
    instead of asking routing, snapshots, encoders, the oversized policy and the failure
    policy (`pipeline.on_error`) each time.

    The encoder (and with it schema registration) is resolved at the table's first
    captured change, as before the cache existed: a table whose changes are all skipped
    never registers schemas.
    """

    __slots__ = (
        "broken",
        "captured",
        "counters",
        "degraded",
        "encoder",
        "limit",
        "on_error",
        "outbox",
        "oversized",
        "private",
        "relation",
        "topic",
    )

    def __init__(self, relation: Relation, pipeline: Pipeline) -> None:
        self.relation = relation
        self.private = pipeline.snapshots.is_private(relation)
        self.captured = pipeline.routing.captured(relation)
        outbox = pipeline.outbox
        self.outbox = outbox if outbox is not None and outbox.matches(relation) else None
        self.encoder: RowEncoder | None = None
        self.topic = ""
        self.limit = 0
        self.counters: dict[str, list[int]] = {}  # op -> its Metrics.events counter
        settings = pipeline.cfg.pipeline
        self.on_error = settings.on_error_for(relation.namespace, relation.name)
        self.oversized = settings.oversized_for(relation.namespace, relation.name)
        self.broken: BridgeError | None = None  # dlq/skip: the registration that failed
        self.degraded = False  # a change of this version dead-lettered or skipped: told once

    def resolve(self, pipeline: Pipeline) -> RowEncoder:
        self.topic, encoder = pipeline.encoders.get(self.relation)
        self.limit = pipeline.oversized.limit(self.topic, self.relation)
        self.encoder = encoder
        return encoder


def idle_wait_s(in_flight_records: int, exactly_once: bool) -> float:
    """How long the loop blocks on PostgreSQL before its idle upkeep (`_idle`).

    With records in flight it comes back soon for their delivery reports, so the flush
    position follows Kafka's acknowledgement when the source goes quiet instead of up to
    `_IDLE_WAIT_S` later. Exactly-once keeps the long wait: each idle turn commits the
    open Kafka transaction, and a short wait would commit after every short pause.
    """
    return _IN_FLIGHT_WAIT_S if in_flight_records and not exactly_once else _IDLE_WAIT_S
