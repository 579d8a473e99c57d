"""Prometheus metrics and health state, read at scrape time (never per row through a library).

The pipeline handles well over 100k rows/s; a prometheus_client `labels(...).inc()`
costs about a microsecond, so the pipeline only bumps plain ints (the one-item
counters of `Metrics.events`) and calls per-transaction hooks. `BridgeCollector`
turns that state, and the ack tracker's and producer's own counters, into metric
families when /metrics is scraped. Every value has one writer (the pipeline thread;
the monitor thread for its probes' results); scrapes run on HTTP threads and read
single attributes or C-level dict copies, which the GIL keeps whole.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Final, Protocol

from confluent_kafka import KafkaError
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from bridge import __version__
from bridge.decode.messages import PG_EPOCH_OFFSET_US
from bridge.errors import (
    BridgeError,
    ConfigError,
    DeliveryError,
    ProtocolError,
    SchemaError,
    SourceError,
)
from bridge.kafka.acks import CommitTimes

log = logging.getLogger("bridge.metrics")

DEPENDENCIES: Final = ("postgres", "kafka", "registry")
# Pre-set to 0 so rate() works from the first scrape. "kafka": client errors
# reported by librdkafka (mostly transient); "monitor": failed background probes.
ERROR_STAGES: Final = (
    "source",
    "decode",
    "schema",
    "produce",
    "config",
    "kafka",
    "monitor",
    "pipeline",
    "internal",
)
_STAGE_OF: tuple[tuple[type[BridgeError], str], ...] = (
    (ProtocolError, "decode"),
    (SchemaError, "schema"),
    (DeliveryError, "produce"),
    (ConfigError, "config"),
    (SourceError, "source"),
    (BridgeError, "pipeline"),
)
KAFKA_STATS_INTERVAL_MS: Final = 5_000


class Tracked(Protocol):
    """What the collector reads from `bridge.kafka.acks.AckTracker`."""

    in_flight_records: int
    in_flight_bytes: int

    @property
    def failed(self) -> bool: ...

    @property
    def open_transactions(self) -> int: ...


class Blocking(Protocol):
    """What the collector reads from `bridge.kafka.producer.Producer`."""

    blocked_turns: int


class Received(Protocol):
    """What liveness reads from `bridge.source.status.StatusTracker`."""

    @property
    def received(self) -> int: ...


class SnapshotTable(Protocol):
    """One table's row of `bridge.snapshot.progress.SnapshotProgress.tables()`."""

    @property
    def table(self) -> str: ...

    @property
    def rows_done(self) -> int: ...

    @property
    def rows_total(self) -> int: ...


class SnapshotSource(Protocol):
    def tables(self) -> Sequence[SnapshotTable]: ...


def _unix(commit_ts: int) -> float:
    """A commit time as on the wire (µs since 2000-01-01) in Unix seconds."""
    return (commit_ts + PG_EPOCH_OFFSET_US) / 1e6


class Metrics:
    """Counters and flags the pipeline updates cheaply; health answers derived from them.

    Liveness costs the hot loop nothing: progress seen between two health checks
    (WAL received, rows counted, the flush LSN, snapshot rows) proves the bridge is
    alive; only where nothing moves does the pipeline `tick()`: when the stream is
    idle, and while it waits for Kafka (`ticking(...)`).
    """

    def __init__(
        self,
        *,
        liveness_timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.liveness_timeout_s = liveness_timeout_s
        self._clock = clock
        self._wall = wall
        # (schema, table, op) -> a one-item counter. The pipeline keeps each table's
        # counters and adds to them in place: a dict update keyed by a tuple (hashed
        # twice) cost ~1,400 instructions per row, the counter ~100.
        self.events: dict[tuple[str, str, str], list[int]] = {}
        self.errors: dict[str, int] = dict.fromkeys(ERROR_STAGES, 0)
        self.connected: dict[str, bool] = dict.fromkeys(DEPENDENCIES, False)
        self.confirmed_flush_lsn: int | None = None
        self.slot_lag_bytes: int | None = None  # set by the monitor thread
        # "schema.table" -> its changes dead-lettered / skipped (pipeline.on_error): a table
        # in the first is degraded
        self.dead_lettered: dict[str, int] = {}
        self.skipped: dict[str, int] = {}
        # "schema.table" -> its schema's moves to a new subject (registry.on_incompatible)
        self.subject_moves: dict[str, int] = {}
        self._resent: set[Hashable] = set()  # see letters_before
        self.slot_losses = 0  # slots found lost and replaced by a new one (bridge/slotstate.py)
        self.slot_gap_bytes = 0  # WAL bytes of changes the lost slots never delivered
        self.role: str | None = None  # ha.enabled: "standby" until the lease, then "active"
        self.takeovers = 0  # leases this process took (bridge/standby.py)
        self.tracker: Tracked | None = None
        self.producer: Blocking | None = None
        self.snapshot: SnapshotSource | None = None
        self.status: Received | None = None
        # the pipeline records each commit here (compiled: once per transaction)
        self.commits = CommitTimes()
        self._last_latency: float | None = None  # commit to confirmation, last delivered
        self._last_tick: float | None = None
        self._progress: tuple[int, int, int | None, int] = (0, 0, None, 0)
        self._progress_at: float | None = None

    def watch(
        self,
        tracker: Tracked,
        producer: Blocking | None = None,
        snapshot: SnapshotSource | None = None,
        status: Received | None = None,
    ) -> None:
        """Read in-flight counts from the ack tracker, backpressure waits from the producer,
        rows copied from the snapshot progress and WAL received from the stream's status,
        when scraped or probed."""
        self.tracker = tracker
        self.producer = producer
        self.snapshot = snapshot
        self.status = status
        self._progress = self._measure()  # the start position is no progress

    def event_counter(self, namespace: str, name: str, op: str) -> list[int]:
        """The counter of `op` changes to `namespace.name` (its one item), created at 0."""
        return self.events.setdefault((namespace, name, op), [0])

    def tick(self) -> None:
        self._last_tick = self._clock()

    def ticking(self, fn: Callable[[], None]) -> Callable[[], None]:
        """`fn` that also ticks: for the producer's `while_blocked`, so waiting counts as alive."""

        def wrapped() -> None:
            self._last_tick = self._clock()
            fn()

        return wrapped

    def set_connected(self, dependency: str, up: bool) -> None:
        self.connected[dependency] = up

    def error(self, stage: str) -> None:
        self.errors[stage] = self.errors.get(stage, 0) + 1

    def failed(self, exc: BaseException) -> None:
        """Count a failure that ends the pipeline, by the stage its error type belongs to."""
        stage = next((s for cls, s in _STAGE_OF if isinstance(exc, cls)), "internal")
        self.error(stage)

    def letters_before(self, counts: dict[str, int], pending: Iterable[Hashable]) -> None:
        """At the start: the dead letters the topic already holds, by table
        (`bridge.kafka.oversized.letters_so_far`), and the ids of those PostgreSQL sends
        again (their transaction unconfirmed), not to be counted twice."""
        self.dead_lettered.update(counts)
        self._resent = set(pending)

    def tolerated(self, table: str, letter: Hashable | None) -> None:
        """A change of `table` the bridge could not encode or register, dead-lettered
        (`letter`: the dead letter's id) or skipped (None) instead of stopping
        (pipeline.on_error). A letter the topic held at the start is counted already."""
        if letter is not None and letter in self._resent:
            self._resent.discard(letter)
            return
        counts = self.dead_lettered if letter is not None else self.skipped
        counts[table] = counts.get(table, 0) + 1

    def subject_moved(self, table: str) -> None:
        """A schema of `table` the registry refused under its subject, registered under
        the subject's next generation (`bridge.kafka.registry.Registry`)."""
        self.subject_moves[table] = self.subject_moves.get(table, 0) + 1

    def degraded(self) -> str:
        """The tables whose changes were dead-lettered or skipped, for /readyz: the bridge
        stays ready (the other tables stream), the detail names them."""
        parts = [f"{t} ({n} dead-lettered)" for t, n in sorted(self.dead_lettered.copy().items())]
        parts += [f"{t} ({n} skipped)" for t, n in sorted(self.skipped.copy().items())]
        return f"degraded tables: {', '.join(parts)}" if parts else ""

    def confirmed(self, flush_lsn: int) -> None:
        """The flush position reported to PostgreSQL: transactions ending at or below it
        (their commits recorded in `commits`) are delivered."""
        self.confirmed_flush_lsn = flush_lsn
        commit = self.commits.confirmed(flush_lsn)
        if commit is not None:
            self._last_latency = max(0.0, self._wall() - _unix(commit))

    def source_lag_seconds(self) -> float | None:
        """Commit-to-delivery time: of the oldest transaction still being delivered (so it
        grows while the bridge is stuck), else of the last delivered one (so it does not
        grow while the database is idle). None before the first delivery."""
        oldest = self.commits.oldest()
        if oldest is not None:
            return max(0.0, self._wall() - _unix(oldest))
        return self._last_latency

    def kafka_callbacks(self) -> dict[str, Any]:
        """librdkafka settings for the pipeline's producer that feed these metrics.

        Statistics (every 5 s) tell whether any broker connection is up; `error_cb`
        counts client errors and notices when every broker is down.
        """
        return {
            "error_cb": self._kafka_error,
            "stats_cb": self._kafka_stats,
            "statistics.interval.ms": KAFKA_STATS_INTERVAL_MS,
        }

    def _kafka_error(self, err: KafkaError) -> None:
        self.error("kafka")
        if err.fatal():
            log.error("Kafka client: fatal error: %s", err.str())
            self.connected["kafka"] = False
        elif err.code() == KafkaError._ALL_BROKERS_DOWN:
            if self.connected["kafka"]:
                log.warning("Kafka client: %s", err.str())
            self.connected["kafka"] = False

    def _kafka_stats(self, stats: str) -> None:
        try:
            brokers = json.loads(stats).get("brokers", {})
            up = any(b.get("state") == "UP" for b in brokers.values())
        except (ValueError, AttributeError):
            log.debug("unreadable Kafka client statistics ignored")
            return
        if up != self.connected["kafka"]:
            log.info("Kafka %s", "connected" if up else "disconnected: no broker connection is up")
        self.connected["kafka"] = up

    def alive(self) -> tuple[bool, str]:
        """Liveness: the loop ticked, or data moved, within `liveness_timeout_s`."""
        now = self._clock()
        progress = self._measure()
        if progress != self._progress:
            self._progress, self._progress_at = progress, now
        seen = [t for t in (self._last_tick, self._progress_at) if t is not None]
        if not seen:
            return False, "starting: nothing received or copied yet"
        idle = now - max(seen)
        if idle > self.liveness_timeout_s:
            return False, f"no progress for {idle:.0f}s: the replication loop is stuck"
        return True, "ok"

    def _measure(self) -> tuple[int, int, int | None, int]:
        snapshot = self.snapshot.tables() if self.snapshot is not None else ()
        return (
            self.status.received if self.status is not None else 0,
            sum(count[0] for count in self.events.copy().values()),
            self.confirmed_flush_lsn,
            sum(t.rows_done for t in snapshot),
        )

    def stalled(self) -> bool:
        """The loop neither ticked nor moved for `liveness_timeout_s`: an active bridge
        then stops renewing its lease (bridge/standby.py), so the standby takes over."""
        return not self.alive()[0]

    def ready(self) -> tuple[bool, str]:
        """Readiness: streaming from PostgreSQL, Kafka and the registry reachable, no failure.

        A standby (ha.enabled) is ready while it could take over: PostgreSQL (its lease
        connection), Kafka and the registry reachable; the answer starts with its role."""
        problems = [f"{dep} not connected" for dep, up in self.connected.items() if not up]
        if self.role == "standby":
            alive, why = self.alive()
            if not alive:
                problems.append(why)
            return not problems, "standby: " + ("; ".join(problems) or "ok, waiting for the lease")
        if self.tracker is not None and self.tracker.failed:
            problems.append("a Kafka delivery failed")
        alive, why = self.alive()
        if not alive:
            problems.append(why)
        degraded = self.degraded()
        detail = "; ".join(problems) or "ok"
        if degraded:
            detail = f"{detail}; {degraded}"
        return not problems, detail if self.role is None else f"{self.role}: {detail}"


class BridgeCollector:
    """The `bridge_*` metric families, built from `Metrics` at each scrape."""

    def __init__(self, metrics: Metrics, version: str = __version__) -> None:
        self._metrics = metrics
        self._version = version

    def describe(self) -> Iterable[Metric]:
        return self._families().values()

    def collect(self) -> Iterable[Metric]:
        m = self._metrics
        f = self._families()
        f["build"].add_metric([self._version], 1)
        for (namespace, name, op), counter in m.events.copy().items():
            f["events"].add_metric([f"{namespace}.{name}", op], counter[0])
        for stage, count in m.errors.copy().items():
            f["errors"].add_metric([stage], count)
        for dep, up in m.connected.copy().items():
            f["connected"].add_metric([dep], 1 if up else 0)
        for table in m.snapshot.tables() if m.snapshot is not None else ():
            f["snapshot_rows"].add_metric([table.table], table.rows_done)
            f["snapshot_estimate"].add_metric([table.table], table.rows_total)
        for key, value in (
            ("slot_lag", m.slot_lag_bytes),
            ("source_lag", m.source_lag_seconds()),
            ("flush_lsn", m.confirmed_flush_lsn),
        ):
            if value is not None:
                f[key].add_metric([], value)
        if m.role is not None:
            f["active"].add_metric([], 1 if m.role == "active" else 0)
            f["takeovers"].add_metric([], m.takeovers)
        _per_table(m, f)
        f["slot_losses"].add_metric([], m.slot_losses)
        f["slot_gap"].add_metric([], m.slot_gap_bytes)
        if m.tracker is not None:
            f["in_flight_records"].add_metric([], m.tracker.in_flight_records)
            f["in_flight_bytes"].add_metric([], m.tracker.in_flight_bytes)
            f["open_txs"].add_metric([], m.tracker.open_transactions)
        if m.producer is not None:
            f["blocked"].add_metric([], m.producer.blocked_turns)
        return f.values()

    @staticmethod
    def _families() -> dict[str, CounterMetricFamily | GaugeMetricFamily]:
        g, c = GaugeMetricFamily, CounterMetricFamily
        return {
            "build": g("bridge_build_info", "Version of the running bridge.", labels=["version"]),
            "events": c(
                "bridge_events_total",
                "Row changes handed to Kafka, by table and op (c, u, d, t).",
                labels=["table", "op"],
            ),
            "errors": c("bridge_errors_total", "Errors, by pipeline stage.", labels=["stage"]),
            "connected": g(
                "bridge_connected",
                "1 when the dependency (postgres, kafka, registry) is reachable.",
                labels=["dependency"],
            ),
            "snapshot_rows": c(
                "bridge_snapshot_rows_total", "Rows copied by snapshots.", labels=["table"]
            ),
            "snapshot_estimate": g(
                "bridge_snapshot_rows_estimate",
                "Rows a snapshot expects to copy (planner estimate, never below rows copied).",
                labels=["table"],
            ),
            "slot_lag": g(
                "bridge_slot_lag_bytes",
                "WAL bytes between the server's current position and the slot's "
                "confirmed_flush_lsn (the WAL the slot retains).",
            ),
            "active": g(
                "bridge_active",
                "ha.enabled: 1 while this bridge holds the slot's lease and streams, 0 while it "
                "stands by.",
            ),
            "takeovers": c(
                "bridge_takeovers_total", "ha.enabled: leases of the slot this process took."
            ),
            "dead_lettered": c(
                "bridge_dead_lettered_total",
                "Changes the bridge could not encode or register, or records too large, "
                "sent to the dead-letter topic (pipeline.on_error: dlq), by table; counted "
                "from the topic's letters at the start.",
                labels=["table"],
            ),
            "subject_moves": c(
                "bridge_schema_subject_moves_total",
                "Schema versions the registry refused as incompatible under a table's "
                "subject and the bridge registered under the subject's next generation "
                "(<subject>-v2, ...; registry.on_incompatible: new_subject), by table.",
                labels=["table"],
            ),
            "skipped": c(
                "bridge_skipped_changes_total",
                "Changes the bridge could not encode or register, skipped "
                "(pipeline.on_error: skip), by table.",
                labels=["table"],
            ),
            "degraded": g(
                "bridge_table_degraded",
                "1 for a table with changes dead-lettered (in the dead-letter topic) or "
                "skipped since the start.",
                labels=["table"],
            ),
            "slot_losses": c(
                "bridge_slot_lost_total",
                "Replication slots found lost (invalidated, dropped, recreated, or missing after "
                "a failover) and replaced by a new slot and a snapshot.",
            ),
            "slot_gap": c(
                "bridge_slot_lost_gap_bytes_total",
                "WAL bytes between the last delivered position and a replacing slot's start: "
                "changes never streamed (a resnapshot re-reads the rows they left).",
            ),
            "source_lag": g(
                "bridge_source_lag_seconds",
                "Seconds from commit in PostgreSQL to delivery in Kafka.",
            ),
            "flush_lsn": g(
                "bridge_confirmed_flush_lsn",
                "Flush LSN reported to PostgreSQL (as a number: derive for WAL bytes/s).",
            ),
            "in_flight_records": g(
                "bridge_in_flight_records", "Records handed to Kafka, not yet acknowledged."
            ),
            "in_flight_bytes": g(
                "bridge_in_flight_bytes", "Value bytes handed to Kafka, not yet acknowledged."
            ),
            "open_txs": g(
                "bridge_open_transactions", "Transactions not yet passed by the flush LSN."
            ),
            "blocked": c(
                "bridge_backpressure_waits_total",
                "Waits for Kafka to make room (in-flight bounds or client queue full).",
            ),
        }


def _per_table(m: Metrics, f: dict[str, CounterMetricFamily | GaugeMetricFamily]) -> None:
    """The per-table families of pipeline.on_error (dead-lettered, skipped, degraded) and
    of registry.on_incompatible (subject moves)."""
    for name, moves in m.subject_moves.copy().items():
        f["subject_moves"].add_metric([name], moves)
    dead, skipped = m.dead_lettered.copy(), m.skipped.copy()
    for name, count in dead.items():
        f["dead_lettered"].add_metric([name], count)
    for name, count in skipped.items():
        f["skipped"].add_metric([name], count)
    for name in dead.keys() | skipped.keys():
        f["degraded"].add_metric([name], 1)


def collector_registry(metrics: Metrics) -> CollectorRegistry:
    """A registry of its own (not the global one): bridge metrics plus process/Python ones."""
    registry = CollectorRegistry()
    registry.register(BridgeCollector(metrics))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry
