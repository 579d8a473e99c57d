"""The loop that wires source → decode → events → schema → serialize → produce → acks.

Loop priorities, highest first:
1. a failed delivery stops everything (nothing past it is ever acknowledged);
2. keepalives and status updates (inside `ReplicationStream.read`, and through
   `service()` while the producer applies backpressure);
3. the next replication message, decoded and turned into records;
4. delivery callbacks (`poll`), Kafka transaction commits (exactly-once mode),
   heartbeats, and the flush LSN, recomputed after each commit and whenever the
   stream is quiet.
"""

from __future__ import annotations

import logging
import signal
import time
from types import FrameType
from typing import Any, Final

from confluent_kafka.schema_registry import SchemaRegistryClient

from bridge import __version__
from bridge.acks import AckTracker, TxHandle
from bridge.config import Config, RaiseOnRefusal
from bridge.decode.messages import Relation
from bridge.encode.records import ChangeEncoder, Record, TxSource
from bridge.encoders import encoder_cache
from bridge.eos import KafkaTransactions, ensure_offsets_topic, read_committed_lsn
from bridge.events.assembler import EventAssembler
from bridge.events.model import Change, LogicalMessageEvent, TxBegin, TxCommit
from bridge.http import operations
from bridge.lsn import LSN
from bridge.metrics import Metrics
from bridge.oversized import OversizedPolicy, TopicLimits, producer_max_bytes
from bridge.plugins import Plugin, open_plugin
from bridge.produce import Producer, ProducerStoppedError
from bridge.routing import Routing
from bridge.schema.registry import Registry
from bridge.sidetopics import (
    HEARTBEAT_PREFIX,
    Heartbeat,
    MessageTopic,
    TransactionTopic,
    tx_id,
)
from bridge.snapshot import SnapshotManager
from bridge.source import libpq, slots
from bridge.source.status import StatusTracker
from bridge.source.stream import ReplicationStream

log: Final = logging.getLogger("bridge.pipeline")
_SERVICE_EVERY: Final = 4096
# A commit re-computes the flush position at most this often (each time polls the producer
# and walks the tracker); idle moments always do. Small transactions would otherwise pay
# for it one by one.
_ACK_EVERY_S: Final = 0.005
_IDLE_WAIT_S: Final = 0.2
_IN_FLIGHT_WAIT_S: Final = 0.01
# Final aliases: compiled code reads them as statics; the imported names are looked up in
# the module's dict on every use, and these are used per event.
_CHANGE: Final = Change
_TX_BEGIN: Final = TxBegin
_TX_COMMIT: Final = TxCommit
_MESSAGE_EVENT: Final = LogicalMessageEvent
_VERSION: Final = __version__


class Pipeline:
    """One replication slot streamed into Kafka until `stop()` or an error."""

    def __init__(self, cfg: Config, metrics: Metrics | None = None) -> None:
        self.cfg = cfg
        self.metrics = metrics if metrics is not None else Metrics()
        self._event_counts = self.metrics.events
        self._stopping = False
        src, kafka = cfg.source, cfg.kafka
        self.routing = Routing.from_config(cfg)
        self._catalog_conn = libpq.connect(src.conninfo(), replication=False)
        rc = libpq.ReplicationConnection(libpq.connect(src.conninfo(), replication=True))
        self._rc = rc
        version = slots.check_prerequisites(rc)
        self.plugin: Plugin = open_plugin(cfg, version, self._catalog_conn)
        self.snapshots = SnapshotManager(cfg)  # decides on a snapshot when it makes the slot
        slot = self.snapshots.ensure_slot(rc)
        self.start_lsn = slot.confirmed_flush or LSN(0)
        self.assembler = EventAssembler(
            decode=self.plugin.decode,
            decode_streamed=self.plugin.decode_streamed,
            spill_dir=cfg.pipeline.spill_dir / src.slot_name,
            memory_limit_bytes=cfg.pipeline.memory_limit_mb << 20,
        )
        registry = Registry(
            SchemaRegistryClient(cfg.registry.client_config()), cfg.avro.subject_strategy
        )
        self.encoders = encoder_cache(
            cfg, self._catalog_conn, registry, self.routing.topic, binary=src.binary
        )
        self.incremental = self.snapshots.incremental(self.encoders, self.assembler.relations.get)
        self.stream = ReplicationStream(rc, StatusTracker(src.status_interval_s, self.start_lsn))
        self.tracker = AckTracker(self.start_lsn)
        client_config = kafka.client_config()
        if kafka.exactly_once:
            client_config["transactional.id"] = kafka.transactional_id or f"bridge-{src.slot_name}"
            # A PostgreSQL transaction is never split across Kafka transactions, so a
            # large one must fit: the broker's default transaction.max.timeout.ms.
            client_config["transaction.timeout.ms"] = 900_000
        callbacks = self.metrics.kafka_callbacks()
        # Metrics observe every client error; a refused login or TLS handshake still stops us.
        callbacks["error_cb"] = RaiseOnRefusal(callbacks["error_cb"])
        self.producer = Producer(
            {**client_config, **callbacks},
            self.tracker,
            overrides=kafka.producer,
            max_in_flight_records=cfg.pipeline.max_in_flight_records,
            max_in_flight_bytes=cfg.pipeline.max_in_flight_mb << 20,
            while_blocked=self.metrics.ticking(self.stream.service),
        )
        self.metrics.watch(self.tracker, self.producer, self.snapshots.progress, self.stream.status)
        self.oversized = OversizedPolicy(
            cfg.pipeline.oversized,
            cfg.pipeline.dead_letter_topic or f"{kafka.topic_prefix}.dlq",
            TopicLimits(
                kafka.client_config(), producer_max_bytes(kafka.producer), kafka.request_timeout_s
            ),
            self.tracker.tables,
        )
        self.eos: KafkaTransactions | None = None
        if kafka.exactly_once:
            self.eos = self._start_transactions(client_config)
        self.txmeta = TransactionTopic(registry, kafka.topic_prefix)
        self.messages = MessageTopic(registry, kafka.topic_prefix)
        self.heartbeat = Heartbeat(
            registry, kafka.topic_prefix, cfg.pipeline.heartbeat_interval_s, self._emit_heartbeat
        )
        # Read per transaction: plain attributes, not lookups through the config models.
        self._server, self._db = kafka.topic_prefix, src.dbname
        self._tx_metadata = cfg.pipeline.transaction_metadata
        self._tx: TxHandle | None = None
        self._tx_source: TxSource | None = None
        self._tx_ident = ""
        self._skipping = False
        self._tx_records = 0
        self._next_ack = 0.0
        self._routes: dict[int, _Route] = {}

    def _start_transactions(self, client_config: dict[str, Any]) -> KafkaTransactions:
        kafka = self.cfg.kafka
        topic = kafka.offsets_topic or f"{kafka.topic_prefix}.bridge_offsets"
        timeout = kafka.request_timeout_s * 3
        ensure_offsets_topic(self.cfg.kafka.client_config(), topic, timeout)
        self.producer.init_transactions(timeout)  # fences an older instance first
        committed = read_committed_lsn(
            self.cfg.kafka.client_config(), topic, self.cfg.source.slot_name.encode(), timeout
        )
        eos = KafkaTransactions(
            self.producer,
            topic,
            self.cfg.source.slot_name,
            max_records=kafka.transaction_max_records,
            max_interval_s=kafka.transaction_interval_ms / 1000,
            commit_timeout_s=self.cfg.pipeline.shutdown_timeout_s,
        )
        eos.start(committed)
        log.info("exactly-once: last LSN committed in Kafka is %s", committed)
        return eos

    def run(self) -> None:
        """Stream until stopped; on the way out flush, confirm and close cleanly."""
        if not self.snapshots.run_initial(lambda: self._stopping):
            # initial_only, or stopped during the snapshot: replication never started
            self.stream.closed = True
            self._rc.close()
            self._close()
            return
        slots.start_replication(
            self._rc,
            self.cfg.source.slot_name,
            self.start_lsn,
            self.plugin.options,
            busy_timeout_s=self.cfg.source.slot_busy_timeout_s,
        )
        log.info(
            "streaming slot %s from %s with %s",
            self.cfg.source.slot_name,
            self.start_lsn,
            self.plugin.describe(),
        )
        self.metrics.set_connected("postgres", True)
        try:
            try:
                self._loop()
            except ProducerStoppedError:
                log.info(
                    "stop requested while Kafka was full; undelivered work is not acknowledged"
                )
            self._drain()
        except Exception as exc:
            self.metrics.failed(exc)
            raise
        finally:
            self.metrics.set_connected("postgres", False)
            self._close()

    def stop(self) -> None:
        """Safe from a signal handler: the loop and a full producer both notice."""
        self._stopping = True
        self.producer.stopping = True

    def _loop(self) -> None:
        stream, assembler, decode = self.stream, self.assembler, self.plugin.decode
        tracker, exactly_once = self.tracker, self.eos is not None
        while not self._stopping:
            data = stream.read(idle_wait_s(tracker.in_flight_records, exactly_once))
            if data is None:
                self._idle()
                continue
            raw = bytes(data.payload)
            unserviced = 0
            for event in assembler.feed(decode(raw), raw, data.wal_end):
                unserviced += 1
                if unserviced == _SERVICE_EVERY:
                    # One message can release millions of buffered changes (stream commit,
                    # COMMIT PREPARED): keep answering keepalives during the replay.
                    unserviced = 0
                    stream.service()
                kind = type(event)
                if kind is _CHANGE:
                    self._change(event)  # type: ignore[arg-type]
                elif kind is _TX_BEGIN:
                    self._begin(event)  # type: ignore[arg-type]
                elif kind is _TX_COMMIT:
                    self._commit(event)  # type: ignore[arg-type]
                elif kind is _MESSAGE_EVENT:
                    self._message(event)  # type: ignore[arg-type]

    def _begin(self, event: TxBegin) -> None:
        self._tx = self.tracker.open_tx()
        self._tx_records = 0
        self._skipping = self.eos is not None and self.eos.skip(event.commit_lsn)
        if self._tx_metadata:
            self._tx_ident = tx_id(event.xid, event.commit_lsn)
        self._tx_source = TxSource(
            self._server, self._db, event.xid, event.commit_lsn, event.commit_ts, _VERSION
        )
        if self._tx_metadata and not self._skipping:
            self._send(self.txmeta.topic, *self.txmeta.begin(self._tx_ident, event.commit_ts))

    def _change(self, change: Change) -> None:
        if self._skipping:
            return
        relation = change.relation
        if relation is None:  # transactional logical decoding message
            if change.message is not None and change.message.prefix != HEARTBEAT_PREFIX:
                xid = self._tx_source.base["txId"] if self._tx_source else None
                self._send(self.messages.topic, *self.messages.record(change.message, xid))
            return
        route = self._routes.get(relation.oid)
        if route is None or route.relation is not relation:
            route = self._routes[relation.oid] = _Route(relation, self)
        if route.private:
            return  # the bridge's own snapshot progress tables
        assert self._tx_source is not None
        records: list[Record] = []
        if route.captured and change.op not in self.routing.skipped_ops:
            op = change.op
            counted = route.count_keys.get(op)
            if counted is None:  # the same key object each time: the lookup skips comparing
                counted = route.count_keys[op] = (relation.namespace, relation.name, op)
            self._event_counts[counted] += 1
            encoder = route.encoder
            if encoder is None:
                encoder = route.resolve(self)
            topic = route.topic
            records = encoder.records(change, self._tx_source)
            for key, value in records:
                if len(key or b"") + len(value or b"") > route.limit:
                    key_schema = encoder.table.key_schema
                    self._send(
                        *self.oversized.divert(
                            topic, key, value, relation, key_schema, self._tx_source
                        )
                    )
                else:
                    self._send(topic, key, value)
        if self.incremental is not None:  # signals, watermarks, chunk rows at a window's end
            for extra in self.incremental.on_change(change, records, self._tx_source):
                self._send(*extra)

    def _send(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        assert self._tx is not None
        if self.eos is not None and self._tx_records == 0:
            self.eos.before_records()
        self._tx_records += 1
        self.producer.produce(topic, key, value, self._tx)

    def _commit(self, event: TxCommit) -> None:
        assert self._tx is not None
        if self._tx_metadata and not self._skipping:
            counts = event.event_count_by_table
            self._send(self.txmeta.topic, *self.txmeta.end(self._tx_ident, event.commit_ts, counts))
        self.tracker.close_tx(self._tx, event.end_lsn)
        self.metrics.committed(event.end_lsn, event.commit_ts)
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
            self._send_untracked(self.heartbeat.topic, *self.heartbeat.record(event.lsn))
        elif self.cfg.source.messages:
            key, value = self.messages.encode(
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
            self._send_untracked(self.messages.topic, key, value)

    def _send_untracked(self, topic: str, key: bytes, value: bytes) -> None:
        """A record outside PostgreSQL transactions: at-least-once, or inside the open
        Kafka transaction in exactly-once mode."""
        if self.eos is not None:
            self.eos.before_records()
        self.producer.produce_untracked(topic, key, value)

    def _idle(self) -> None:
        self.metrics.tick()
        if self.eos is not None and self._tx is None:
            self.eos.commit()
        now = time.monotonic()
        if self.heartbeat.due(now):
            self.heartbeat.beat(now)
        self._acknowledge()

    def _emit_heartbeat(self) -> None:
        self._catalog_conn.execute(
            "SELECT pg_logical_emit_message(false, %s, %s)",
            (HEARTBEAT_PREFIX, str(time.time_ns() // 1_000_000)),
        )

    def _acknowledge(self) -> None:
        self.producer.poll()
        idle = self.assembler.idle_wal_end()
        if idle is not None:
            idle = max(idle, self.stream.server_wal_end)
        holds = [h for h in (self.assembler.hold_lsn(), self._eos_hold()) if h is not None]
        lsn = self.tracker.flush_lsn(idle_position=idle, hold_lsn=min(holds) if holds else None)
        self.stream.confirm(lsn)
        self.metrics.confirmed(lsn)
        if self.incremental is not None:
            self.incremental.on_acknowledged(lsn)

    def _eos_hold(self) -> int | None:
        return self.eos.hold_lsn() if self.eos is not None else None

    def _drain(self) -> None:
        """Graceful stop: deliver what is in flight, then report the final position."""
        timeout = self.cfg.pipeline.shutdown_timeout_s
        if self.eos is not None and self._tx is None:
            self.eos.commit()
        if not self.producer.flush(timeout):
            log.warning("records still undelivered after %.0fs", timeout)
        self._acknowledge()
        self.stream.send_status()
        log.info("stopped at flush LSN %s", LSN(self.stream.status.flushed))

    def _close(self) -> None:
        """Every step runs even if an earlier one fails: the error that ended the run is
        the one to report, not a cleanup failure."""
        steps = (
            ("spill buffers", self.assembler.close),
            ("Kafka producer", self.producer.close),
            ("replication stream", self.stream.close),
            ("catalog connection", self._catalog_conn.close),
            ("snapshot readers", self.snapshots.close),
        )
        for name, close in steps:
            try:
                close()
            except Exception as exc:  # cleanup only: logged, never raised over the cause
                log.warning("closing the %s: %s", name, exc)


class _Route:
    """What the pipeline decided for one relation version, looked up once per change
    instead of asking routing, snapshots, encoders and the oversized policy each time.

    The encoder (and with it schema registration) is resolved at the table's first
    captured change, as before the cache existed: a table whose changes are all skipped
    never registers schemas.
    """

    __slots__ = ("captured", "count_keys", "encoder", "limit", "private", "relation", "topic")

    def __init__(self, relation: Relation, pipeline: Pipeline) -> None:
        self.relation = relation
        self.private = pipeline.snapshots.is_private(relation)
        self.captured = pipeline.routing.captured(relation)
        self.encoder: ChangeEncoder | None = None
        self.topic = ""
        self.limit = 0
        self.count_keys: dict[str, tuple[str, str, str]] = {}  # Metrics.events keys by op

    def resolve(self, pipeline: Pipeline) -> ChangeEncoder:
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


def run_pipeline(cfg: Config) -> None:
    """`bridge run`: SIGTERM/SIGINT stop the loop gracefully."""
    metrics = Metrics()
    with operations(cfg, metrics):
        _run_until_signalled(Pipeline(cfg, metrics))


def _run_until_signalled(pipeline: Pipeline) -> None:
    def on_signal(signum: int, frame: FrameType | None) -> Any:
        log.info("signal %s: stopping", signal.Signals(signum).name)
        pipeline.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    pipeline.run()
