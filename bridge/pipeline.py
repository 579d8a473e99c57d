"""The loop that wires source → decode → events → schema → serialize → produce → acks.

Loop priorities, highest first:
1. a failed delivery stops everything (nothing past it is ever acknowledged);
2. keepalives and status updates (inside `ReplicationStream.read`, and through
   `service()` while the producer applies backpressure);
3. the next replication message, decoded and turned into records;
4. delivery callbacks (`poll(0)`) and the flush LSN, recomputed after each commit
   and whenever the stream is quiet.
"""

from __future__ import annotations

import logging
import signal
from types import FrameType
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient

from bridge import __version__
from bridge.acks import AckTracker, TxHandle
from bridge.config import Config
from bridge.decode.messages import Relation
from bridge.errors import BridgeError
from bridge.events.assembler import EventAssembler
from bridge.events.model import Change, LogicalMessageEvent, TxBegin, TxCommit
from bridge.lsn import LSN
from bridge.plugins import Plugin, open_plugin
from bridge.produce import Producer
from bridge.schema.catalog import PgCatalog
from bridge.schema.encoders import EncoderCache, load_table_details
from bridge.schema.pgtypes import CodecOptions
from bridge.schema.registry import Registry
from bridge.serialize import TxSource
from bridge.source import libpq, slots
from bridge.source.status import StatusTracker
from bridge.source.stream import ReplicationStream

log = logging.getLogger("bridge.pipeline")


class Pipeline:
    """One replication slot streamed into Kafka until `stop()` or an error."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._stopping = False
        src = cfg.source
        self._catalog_conn = libpq.connect(src.conninfo(), replication=False)
        rc = libpq.ReplicationConnection(libpq.connect(src.conninfo(), replication=True))
        self._rc = rc
        version = slots.check_prerequisites(rc)
        self.plugin: Plugin = open_plugin(cfg, version, self._catalog_conn)
        slot = slots.ensure_slot(
            rc, src.slot_name, src.plugin, create=src.create_slot, two_phase=src.two_phase
        )
        self.start_lsn = slot.confirmed_flush or LSN(0)
        self.assembler = EventAssembler(
            decode=self.plugin.decode,
            decode_streamed=self.plugin.decode_streamed,
            spill_dir=cfg.pipeline.spill_dir / src.slot_name,
            memory_limit_bytes=cfg.pipeline.memory_limit_mb << 20,
        )
        self.encoders = EncoderCache(
            Registry(SchemaRegistryClient(cfg.registry.client_config()), cfg.avro.subject_strategy),
            PgCatalog(self._catalog_conn),
            lambda oid: load_table_details(self._catalog_conn, oid),
            self.topic_for,
            server_name=cfg.kafka.topic_prefix,
            options=CodecOptions(cfg.avro.timestamptz_mode, cfg.avro.numeric_mode),
            toast_mode=cfg.avro.toast_mode,
            tombstones=cfg.pipeline.tombstones,
            binary=src.binary,
        )
        self.stream = ReplicationStream(rc, StatusTracker(src.status_interval_s, self.start_lsn))
        self.tracker = AckTracker(self.start_lsn)
        self.producer = Producer(
            cfg.kafka.client_config(),
            self.tracker,
            overrides=cfg.kafka.producer,
            max_in_flight_records=cfg.pipeline.max_in_flight_records,
            max_in_flight_bytes=cfg.pipeline.max_in_flight_mb << 20,
            while_blocked=self.stream.service,
        )
        self._tx: TxHandle | None = None
        self._tx_source: TxSource | None = None

    def topic_for(self, relation: Relation) -> str:
        return f"{self.cfg.kafka.topic_prefix}.{relation.namespace}.{relation.name}"

    def run(self) -> None:
        """Stream until stopped; on the way out flush, confirm and close cleanly."""
        slots.start_replication(
            self._rc,
            self.cfg.source.slot_name,
            self.start_lsn,
            self.plugin.options,
            busy_timeout_s=self.cfg.source.slot_busy_timeout_s,
        )
        self.plugin.after_start(self.stream)
        log.info(
            "streaming slot %s from %s with %s",
            self.cfg.source.slot_name,
            self.start_lsn,
            self.plugin.describe(),
        )
        try:
            self._loop()
            self._drain()
        finally:
            self._close()

    def stop(self) -> None:
        self._stopping = True

    def _loop(self) -> None:
        stream, assembler, producer, decode = (
            self.stream,
            self.assembler,
            self.producer,
            self.plugin.decode,
        )
        while not self._stopping:
            data = stream.read(0.2)
            if data is None:
                self._acknowledge()
                continue
            raw = bytes(data.payload)
            for event in assembler.feed(decode(raw), raw, data.wal_end):
                if type(event) is Change:
                    self._change(event)
                elif type(event) is TxBegin:
                    self._begin(event)
                elif type(event) is TxCommit:
                    self._commit(event)
                elif type(event) is LogicalMessageEvent:
                    log.debug("non-transactional logical message %s", event.prefix)
            producer.poll()

    def _begin(self, event: TxBegin) -> None:
        self._tx = self.tracker.open_tx()
        self._tx_source = TxSource(
            self.cfg.kafka.topic_prefix,
            self.cfg.source.dbname,
            event.xid,
            event.commit_lsn,
            event.commit_ts,
            __version__,
        )

    def _change(self, change: Change) -> None:
        if change.relation is None:
            return  # logical decoding message: routed with the heartbeat work
        assert self._tx is not None and self._tx_source is not None
        topic, encoder = self.encoders.get(change.relation)
        for key, value in encoder.records(change, self._tx_source):
            self.producer.produce(topic, key, value, self._tx)

    def _commit(self, event: TxCommit) -> None:
        assert self._tx is not None
        self.tracker.close_tx(self._tx, event.end_lsn)
        self._tx = None
        self._acknowledge()

    def _acknowledge(self) -> None:
        self.producer.poll()
        self.tracker.raise_if_failed()
        idle = self.assembler.idle_wal_end()
        if idle is not None:
            idle = max(idle, self.stream.server_wal_end)
        self.stream.confirm(
            self.tracker.flush_lsn(idle_position=idle, hold_lsn=self.assembler.hold_lsn())
        )

    def _drain(self) -> None:
        """Graceful stop: deliver what is in flight, then report the final position."""
        if not self.producer.flush(self.cfg.pipeline.shutdown_timeout_s):
            log.warning(
                "records still undelivered after %.0fs", self.cfg.pipeline.shutdown_timeout_s
            )
        self._acknowledge()
        log.info("stopped at flush LSN %s", LSN(self.stream.status.flushed))

    def _close(self) -> None:
        self.assembler.close()
        self.producer.close()
        try:
            self.stream.close()
        except BridgeError as exc:
            log.warning("closing the replication stream: %s", exc)
        self._catalog_conn.close()


def run_pipeline(cfg: Config) -> None:
    """`bridge run`: SIGTERM/SIGINT stop the loop gracefully."""
    pipeline = Pipeline(cfg)

    def on_signal(signum: int, frame: FrameType | None) -> Any:
        log.info("signal %s: stopping", signal.Signals(signum).name)
        pipeline.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    pipeline.run()
