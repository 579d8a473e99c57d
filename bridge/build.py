"""Opens what a pipeline runs with, in order, and hands it over ready (`build_pipeline`).

Every step that opens something (connections, the slot's snapshot readers, spill
files, the Kafka producer) registers its close on one `ExitStack` the moment it
succeeded: when a later step fails (no publication, a refused login, the registry
unreachable), what is already open is closed before the error leaves, and the
pipeline that is built owns the stack and closes it when its run ends.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from contextlib import ExitStack
from types import FrameType

import psycopg

from bridge.config import Config
from bridge.encoders import EncoderCache, encoder_cache
from bridge.errors import BridgeError, SourceError, StopRequestedError
from bridge.events.assembler import EventAssembler
from bridge.http import operations
from bridge.kafka.acks import AckTracker
from bridge.kafka.eos import (
    TRANSACTION_TIMEOUT_MS,
    KafkaTransactions,
    ensure_offsets_topic,
    read_committed_lsn,
)
from bridge.kafka.oversized import (
    OversizedPolicy,
    TopicLimits,
    letters_so_far,
    producer_max_bytes,
)
from bridge.kafka.producer import Producer, RaiseOnRefusal, kafka_client_config
from bridge.kafka.registry import Registry, open_registry
from bridge.kafka.sidetopics import HEARTBEAT_PREFIX, Heartbeat, MessageTopic, TransactionTopic
from bridge.kafka.topics import topic_creator
from bridge.lsn import LSN
from bridge.metrics import Metrics
from bridge.outbox import OutboxRouter
from bridge.pipeline import Parts, Pipeline
from bridge.plugins import Pgoutput, Plugin, open_plugin
from bridge.renames import ANNOUNCED_FROM, CatalogRenames
from bridge.reselect import ToastReselect
from bridge.routing import Routing
from bridge.slotstate import PositionRecorder, guard
from bridge.snapshot.manager import SnapshotManager
from bridge.snapshot.notify import Notifier
from bridge.source import failover, libpq, slots, waiting
from bridge.source.status import StatusTracker
from bridge.source.stream import ReplicationStream
from bridge.standby import Lease, LeasedPositions, stand_by

log = logging.getLogger("bridge.build")


def build_pipeline(
    cfg: Config, metrics: Metrics | None = None, lease: Lease | None = None
) -> Pipeline:
    """A pipeline with everything open; nothing stays open if building fails. With the
    `lease` of a standby pair (bridge/standby.py), nothing is acknowledged once it may
    have ended."""
    with ExitStack() as opened:
        parts = _parts(cfg, metrics if metrics is not None else Metrics(), opened)
        if lease is not None:
            parts.positions = LeasedPositions(parts.positions, lease)
        parts.resources = opened.pop_all()
        return Pipeline(cfg, parts)


def run_pipeline(cfg: Config) -> None:
    """`bridge run`: SIGTERM/SIGINT stop the loop gracefully. With `ha.enabled` it first
    stands by until it holds the slot's lease, and releases it only after the pipeline
    closed (a graceful stop hands over at the position it confirmed).

    A stop that cuts a wait on PostgreSQL short (`StopRequestedError`: the server took
    longer than `waiting.STOP_GRACE_S` to answer, frozen or busy) ends the run as
    stopped, logged, exit code 0."""
    metrics = Metrics()
    stopper = _Stopper(waiting.STOP)
    signal.signal(signal.SIGTERM, stopper)
    signal.signal(signal.SIGINT, stopper)
    try:
        with operations(cfg, metrics), ExitStack() as held:
            lease = None
            if cfg.ha.enabled:
                lease = stand_by(cfg, metrics, lambda: stopper.requested)
                if lease is None:
                    log.info("stopped while standing by")
                    return
                held.callback(lease.close)
            try:
                _run(cfg, metrics, stopper, lease)
            except BridgeError as exc:
                if lease is not None:
                    lease.blame(exc)  # lost the lease first: reported as that
                raise
    except StopRequestedError as exc:
        log.info("%s; stopped", exc)


def _run(cfg: Config, metrics: Metrics, stopper: _Stopper, lease: Lease | None) -> None:
    """Build and run the pipeline; a lost PostgreSQL connection is a `SourceError`, so
    every way the run fails is a `BridgeError` the caller can weigh against the lease."""
    try:
        pipeline = build_pipeline(cfg, metrics, lease)
        if lease is not None:
            metrics.tick()  # built: from here a stalled loop lets the lease lapse
            lease.watch(lambda: not metrics.stalled())
        stopper.attach(pipeline)
        pipeline.run()
    except psycopg.OperationalError as exc:
        # A catalog query (a new table's key columns, a type, TOAST re-select) on a
        # connection the server closed: the same stop as the stream's own loss.
        raise SourceError(
            f"the connection to PostgreSQL was lost: {' '.join(str(exc).split())}",
            hint="the bridge exits; on restart it resumes from the slot's confirmed_flush_lsn",
        ) from None


class _Stopper:
    """The SIGTERM/SIGINT handler, installed before the build: building can take a while
    (creating a slot waits for running transactions), and a pod stopped then should
    exit 0, not die half-built: what is open is closed, and a wait on PostgreSQL under
    way ends within `waiting.STOP_GRACE_S` (`stop`, the process's, is set last: it may
    raise out of a connection attempt under way)."""

    def __init__(self, stop: waiting.Stop | None = None) -> None:
        self.requested = False
        self._pipeline: Pipeline | None = None
        self._stop = stop

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        log.info("signal %s: stopping", signal.Signals(signum).name)
        self.requested = True
        if self._pipeline is not None:
            self._pipeline.stop()
        if self._stop is not None:
            self._stop.set()

    def attach(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        if self.requested:
            pipeline.stop()


def _closing(opened: ExitStack, name: str, close: Callable[[], object]) -> None:
    """Close on the way out; a failure is logged, never raised over the error that ended
    the run (or the build), which is the one to report."""

    def step() -> None:
        try:
            close()
        except Exception as exc:  # cleanup only
            log.warning("closing the %s: %s", name, exc)

    opened.callback(step)


class _Source:
    """The PostgreSQL side: catalog and replication connections, plugin, slot."""

    def __init__(self, cfg: Config, metrics: Metrics, opened: ExitStack) -> None:
        src = cfg.source
        self.catalog = libpq.connect(src.conninfo(), replication=False, purpose="catalog")
        _closing(opened, "catalog connection", self.catalog.close)
        replication = libpq.connect(src.conninfo(), replication=True, purpose="replication")
        _closing(opened, "replication connection", replication.close)
        self.rc = libpq.ReplicationConnection(replication)
        version = slots.check_prerequisites(self.rc)
        self.plugin: Plugin = open_plugin(cfg, version, self.catalog)
        # pgoutput before 16 sends no new name after ALTER SCHEMA ... RENAME
        self.renames = (
            CatalogRenames(self.catalog, src.slot_name, version)
            if isinstance(self.plugin, Pgoutput) and version < ANNOUNCED_FROM
            else None
        )
        slot_guard = guard(cfg, self.rc, self.catalog, metrics)  # a lost slot: fail or resnapshot
        failover.prepare(self.rc, cfg, version)
        self.state = slot_guard.state
        # decides on a snapshot
        self.snapshots = SnapshotManager(cfg, self.state, _notifier(cfg, opened))
        _closing(opened, "snapshot readers", self.snapshots.close)
        slot = self.snapshots.ensure_slot(self.rc)
        catalog = self.catalog
        self.positions: PositionRecorder = slot_guard.recorder(
            slot,
            probe=lambda: slots.slot_info(catalog, src.slot_name),
            on_lost=src.on_slot_lost,
        )
        _closing(opened, "state producer", self.positions.close)
        self.start_lsn = slot.confirmed_flush or LSN(0)

    def start_streaming(self, cfg: Config) -> Callable[[], None]:
        def start() -> None:
            slots.start_replication(
                self.rc,
                cfg.source.slot_name,
                self.start_lsn,
                self.plugin.options,
                busy_timeout_s=cfg.source.slot_busy_timeout_s,
            )

        return start

    def emit_heartbeat(self) -> None:
        self.catalog.execute(
            "SELECT pg_logical_emit_message(false, %s, %s)",
            (HEARTBEAT_PREFIX, str(time.time_ns() // 1_000_000)),
        )


def _parts(cfg: Config, metrics: Metrics, opened: ExitStack) -> Parts:
    src, kafka = cfg.source, cfg.kafka
    source = _Source(cfg, metrics, opened)
    routing = Routing.from_config(cfg)
    assembler = EventAssembler(
        decode=source.plugin.decode,
        decode_streamed=source.plugin.decode_streamed,
        spill_dir=cfg.pipeline.spill_dir / src.slot_name,
        memory_limit_bytes=cfg.pipeline.memory_limit_mb << 20,
        resolve_renamed=source.renames,
    )
    _closing(opened, "spill buffers", assembler.close)
    registry = open_registry(cfg, on_move=metrics.subject_moved)
    encoders = encoder_cache(cfg, source.catalog, registry, routing.topic, binary=src.binary)
    stream = ReplicationStream(source.rc, StatusTracker(src.status_interval_s, source.start_lsn))
    _closing(opened, "replication stream", stream.close)
    tracker = AckTracker(source.start_lsn)
    producer = _producer(cfg, metrics, tracker, stream)
    source.state.while_blocked = metrics.ticking(stream.service)  # its transactional writes
    _closing(opened, "Kafka producer", producer.close)
    metrics.watch(tracker, producer, source.snapshots.progress, stream.status)
    if _dead_letters(cfg):
        topic, start = cfg.dead_letter_topic(), int(source.start_lsn)
        client, timeout = kafka_client_config(kafka), kafka.request_timeout_s
        metrics.letters_before(*letters_so_far(client, topic, start, timeout))
    return Parts(
        metrics=metrics,
        routing=routing,
        snapshots=source.snapshots,
        incremental=source.snapshots.incremental(encoders, assembler.relations.get, routing),
        encoders=encoders,
        decode=source.plugin.decode,
        start_streaming=source.start_streaming(cfg),
        start_lsn=source.start_lsn,
        describe=source.plugin.describe(),
        stream=stream,
        assembler=assembler,
        tracker=tracker,
        producer=producer,
        oversized=OversizedPolicy(
            cfg.dead_letter_topic(),
            TopicLimits(
                kafka_client_config(kafka),
                producer_max_bytes(kafka.producer),
                kafka.request_timeout_s,
            ),
            tracker.tables,
        ),
        eos=_transactions(cfg, producer) if kafka.exactly_once else None,
        txmeta=TransactionTopic(registry, kafka.topic_prefix),
        messages=MessageTopic(registry, kafka.topic_prefix),
        heartbeat=Heartbeat(
            registry,
            f"{cfg.pipeline.heartbeat_topic_prefix}.{kafka.topic_prefix}",
            kafka.topic_prefix,
            cfg.pipeline.heartbeat_interval_s,
            source.emit_heartbeat,
        ),
        positions=source.positions,
        resources=opened,
        reselect=_reselect(cfg, opened) if cfg.avro.toast_reselect else None,
        outbox=_outbox(cfg, encoders, registry) if cfg.outbox.tables else None,
        notices=source.snapshots.notifier,
    )


def _dead_letters(cfg: Config) -> bool:
    """Whether this configuration may dead-letter (any table's on_error dlq, or
    pipeline.oversized dead_letter): then the counts start from the dead-letter topic."""
    settings = cfg.pipeline
    modes = {settings.on_error, *settings.on_error_tables.values()}
    return "dlq" in modes or settings.oversized == "dead_letter"


def _notifier(cfg: Config, opened: ExitStack) -> Notifier | None:
    """`snapshot.notification_topic`: a producer of its own, closed after the snapshots."""
    if cfg.snapshot.notification_topic is None:
        return None
    notifier = Notifier(cfg)
    _closing(opened, "snapshot notifications", notifier.close)
    return notifier


def _outbox(cfg: Config, encoders: EncoderCache, registry: Registry) -> OutboxRouter:
    """`outbox.tables`: routed topics are created by the `kafka.topic_creation` rules too."""
    ensure = topic_creator(cfg).ensure if cfg.kafka.topic_creation else _exists
    return OutboxRouter(cfg.outbox, encoders.codec, registry, ensure)


def _exists(topic: str) -> None:
    """Without topic creation rules a topic is left to the broker (or made beforehand)."""


def _reselect(cfg: Config, opened: ExitStack) -> ToastReselect:
    """`avro.toast_reselect`: its own normal connection, so its SELECTs never wait behind
    (or sit inside) the catalog connection's work."""
    conn = libpq.connect(cfg.source.conninfo(), replication=False, purpose="toast_reselect")
    _closing(opened, "toast_reselect connection", conn.close)
    return ToastReselect(conn)


def _producer(
    cfg: Config, metrics: Metrics, tracker: AckTracker, stream: ReplicationStream
) -> Producer:
    kafka = cfg.kafka
    client_config = kafka.client_config()
    if kafka.exactly_once:
        client_config["transactional.id"] = cfg.transactional_id()
        client_config["transaction.timeout.ms"] = TRANSACTION_TIMEOUT_MS
    callbacks = metrics.kafka_callbacks()
    # Metrics observe every client error; a refused login or TLS handshake still stops us.
    callbacks["error_cb"] = RaiseOnRefusal(callbacks["error_cb"])
    return Producer(
        {**client_config, **callbacks},
        tracker,
        overrides=kafka.producer,
        max_in_flight_records=cfg.pipeline.max_in_flight_records,
        max_in_flight_bytes=cfg.pipeline.max_in_flight_mb << 20,
        while_blocked=metrics.ticking(stream.service),
    )


def _transactions(cfg: Config, producer: Producer) -> KafkaTransactions:
    """Exactly-once: fence an older instance, then resume after Kafka's committed LSN."""
    kafka = cfg.kafka
    topic = kafka.offsets_topic or f"{kafka.topic_prefix}.bridge_offsets"
    timeout = kafka.request_timeout_s * 3
    ensure_offsets_topic(kafka_client_config(kafka), topic, timeout)
    producer.init_transactions(timeout)  # fences an older instance first
    committed = read_committed_lsn(
        kafka_client_config(kafka), topic, cfg.source.slot_name.encode(), timeout
    )
    eos = KafkaTransactions(
        producer,
        topic,
        cfg.source.slot_name,
        max_records=kafka.transaction_max_records,
        max_interval_s=kafka.transaction_interval_ms / 1000,
        commit_timeout_s=cfg.pipeline.shutdown_timeout_s,
    )
    eos.start(committed)
    log.info("exactly-once: last LSN committed in Kafka is %s", committed)
    return eos
