"""bridge/metrics.py and bridge/http.py: the collector, health answers, the endpoint, the monitor,
and one live run of a Pipeline scraped over HTTP."""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import psycopg
import pytest
from confluent_kafka import KafkaError
from delivery.helpers import bridge_settings
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from running import running
from waiting import wait_for

from bridge import __version__
from bridge.build import build_pipeline
from bridge.config import Config
from bridge.decode.messages import PG_EPOCH_OFFSET_US
from bridge.errors import ConfigError, DeliveryError, ProtocolError, SourceError
from bridge.http import HealthServer, Monitor, operations
from bridge.metrics import ERROR_STAGES, BridgeCollector, Metrics, collector_registry

DASHBOARD = Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "dashboard.json"


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeTracker:
    def __init__(self) -> None:
        self.in_flight_records = 7
        self.in_flight_bytes = 700
        self.failed = False
        self.open_transactions = 2


class FakeProducer:
    blocked_turns = 5


class FakeStatus:
    def __init__(self, received: int) -> None:
        self.received = received


class SnapshotRow(NamedTuple):
    table: str
    rows_done: int
    rows_total: int


class FakeSnapshot:
    def __init__(self) -> None:
        self.rows = [SnapshotRow("public.t", 10, 100)]

    def tables(self) -> list[SnapshotRow]:
        return list(self.rows)


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """{(sample name, labels): value} from the Prometheus text format."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name, frozenset(s.labels.items())] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float | None:
    return samples(text).get((name, frozenset(labels.items())))


def scrape(metrics: Metrics) -> str:
    return generate_latest(collector_registry(metrics)).decode()


def busy_metrics() -> Metrics:
    """Every kind of state set, so every family has samples."""
    m = Metrics()
    m.tick()
    m.event_counter("public", "t", "c")[0] += 3
    m.event_counter("public", "t", "d")[0] += 1
    m.event_counter("shop", "orders", "u")[0] += 2
    m.error("kafka")
    m.set_connected("postgres", True)
    m.slot_lag_bytes = 4096
    m.commits.committed(200, 0)
    m.confirmed(200)
    m.watch(FakeTracker(), FakeProducer(), FakeSnapshot())
    m.subject_moved("public.t")
    m.subject_moved("public.t")
    return m


# --- the collector ---------------------------------------------------------------------------


def test_exposition_of_every_bridge_metric() -> None:
    text = scrape(busy_metrics())
    assert value(text, "bridge_events_total", table="public.t", op="c") == 3
    assert value(text, "bridge_events_total", table="public.t", op="d") == 1
    assert value(text, "bridge_events_total", table="shop.orders", op="u") == 2
    assert value(text, "bridge_errors_total", stage="kafka") == 1
    for stage in ERROR_STAGES:
        assert value(text, "bridge_errors_total", stage=stage) is not None, stage
    assert value(text, "bridge_connected", dependency="postgres") == 1
    assert value(text, "bridge_connected", dependency="kafka") == 0
    assert value(text, "bridge_connected", dependency="registry") == 0
    assert value(text, "bridge_build_info", version=__version__) == 1
    assert value(text, "bridge_slot_lag_bytes") == 4096
    assert value(text, "bridge_confirmed_flush_lsn") == 200
    assert value(text, "bridge_in_flight_records") == 7
    assert value(text, "bridge_in_flight_bytes") == 700
    assert value(text, "bridge_open_transactions") == 2
    assert value(text, "bridge_backpressure_waits_total") == 5
    assert value(text, "bridge_snapshot_rows_total", table="public.t") == 10
    assert value(text, "bridge_snapshot_rows_estimate", table="public.t") == 100
    source_lag = value(text, "bridge_source_lag_seconds")
    assert source_lag is not None and source_lag > 0  # committed at 2000-01-01
    assert "process_cpu_seconds_total" in text  # process metrics come along
    assert value(text, "bridge_slot_lost_total") == 0  # exported before any loss
    assert value(text, "bridge_schema_subject_moves_total", table="public.t") == 2


def test_metric_types_follow_prometheus_conventions() -> None:
    types = {f.name: f.type for f in text_string_to_metric_families(scrape(busy_metrics()))}
    bridge = {name: kind for name, kind in types.items() if name.startswith("bridge_")}
    counters = {
        "bridge_events",
        "bridge_errors",
        "bridge_snapshot_rows",
        "bridge_backpressure_waits",
        "bridge_slot_lost",
        "bridge_slot_lost_gap_bytes",
        "bridge_takeovers",
        "bridge_dead_lettered",
        "bridge_skipped_changes",
        "bridge_schema_subject_moves",
    }
    for name, kind in bridge.items():
        assert (kind == "counter") == (name in counters), name


def test_every_dashboard_metric_is_exported() -> None:
    wanted = set(re.findall(r"\bbridge_[a-z_]+", DASHBOARD.read_text(encoding="utf-8")))
    exported = {name for name, _ in samples(scrape(busy_metrics()))}
    assert wanted, "the dashboard names no bridge metric"
    assert wanted <= exported, f"dashboard queries unknown metrics {wanted - exported}"


def test_unknown_values_are_absent_not_zero() -> None:
    text = scrape(Metrics())
    for name in (
        "bridge_slot_lag_bytes",
        "bridge_source_lag_seconds",
        "bridge_confirmed_flush_lsn",
        "bridge_in_flight_records",
    ):
        assert value(text, name) is None, name
    assert value(text, "bridge_errors_total", stage="produce") == 0


def test_describe_names_families_without_collecting() -> None:
    names = {f.name for f in BridgeCollector(Metrics()).describe()}
    assert {"bridge_events", "bridge_slot_lag_bytes", "bridge_build_info"} <= names
    assert all(not f.samples for f in BridgeCollector(Metrics()).describe())


def test_registries_are_private() -> None:
    # Two pipelines in one process (tests) must not clash on the global registry.
    first, second = scrape(busy_metrics()), scrape(Metrics())
    assert value(first, "bridge_events_total", table="public.t", op="c") == 3
    assert value(second, "bridge_events_total", table="public.t", op="c") is None


def test_failure_stage_follows_the_error_type() -> None:
    m = Metrics()
    m.failed(ProtocolError("B", 3, "short"))
    m.failed(SourceError("gone"))
    m.failed(DeliveryError("refused"))
    m.failed(ConfigError("bad"))
    m.failed(RuntimeError("bug"))
    assert {s: m.errors[s] for s in ("decode", "source", "produce", "config", "internal")} == {
        "decode": 1,
        "source": 1,
        "produce": 1,
        "config": 1,
        "internal": 1,
    }


# --- source lag ------------------------------------------------------------------------------


def pg_ts(unix_s: float) -> int:
    return int(unix_s * 1e6) - PG_EPOCH_OFFSET_US


def test_source_lag_grows_while_delivery_is_pending_and_freezes_when_idle() -> None:
    wall = FakeClock(10_000.0)
    m = Metrics(wall=wall)
    assert m.source_lag_seconds() is None
    m.commits.committed(100, pg_ts(9_999.0))
    m.commits.committed(200, pg_ts(9_999.5))
    wall.now = 10_002.0
    assert m.source_lag_seconds() == pytest.approx(3.0)  # the oldest pending commit
    m.confirmed(150)  # first transaction delivered, second pending
    assert m.source_lag_seconds() == pytest.approx(2.5)
    m.confirmed(200)
    assert m.source_lag_seconds() == pytest.approx(2.5)  # latency of the last delivered
    wall.now = 20_000.0  # an idle hour does not look like lag
    assert m.source_lag_seconds() == pytest.approx(2.5)
    m.commits.committed(300, pg_ts(19_999.9))  # a new commit after idling is not an hour late
    assert m.source_lag_seconds() == pytest.approx(0.1)
    assert m.confirmed_flush_lsn == 200


def test_confirmed_without_commits_only_moves_the_flush_lsn() -> None:
    m = Metrics()
    m.confirmed(500)
    assert m.confirmed_flush_lsn == 500
    assert m.source_lag_seconds() is None


# --- liveness and readiness ------------------------------------------------------------------


def test_liveness_follows_ticks_and_rows() -> None:
    clock = FakeClock()
    m = Metrics(liveness_timeout_s=30, clock=clock)
    ok, why = m.alive()
    assert not ok and "starting" in why
    m.tick()
    assert m.alive() == (True, "ok")
    clock.now += 31
    ok, why = m.alive()
    assert not ok and "no progress for 31s" in why
    # One huge transaction replays within a single loop iteration: rows prove life.
    m.event_counter("public", "t", "c")[0] += 1
    assert m.alive()[0]
    clock.now += 31
    assert not m.alive()[0]
    m.ticking(lambda: None)()  # waiting on Kafka counts as alive
    assert m.alive()[0]


def test_received_wal_proves_life_but_the_start_position_does_not() -> None:
    clock = FakeClock()
    m = Metrics(liveness_timeout_s=30, clock=clock)
    status = FakeStatus(received=5000)  # the slot's confirmed position at start
    m.watch(FakeTracker(), status=status)
    assert m.alive() == (False, "starting: nothing received or copied yet")
    status.received = 6000  # a busy stream needs no tick per message
    assert m.alive() == (True, "ok")
    clock.now += 31
    assert not m.alive()[0]


def test_snapshot_rows_prove_life_before_the_loop_runs() -> None:
    clock = FakeClock()
    m = Metrics(liveness_timeout_s=30, clock=clock)
    snapshot = FakeSnapshot()
    snapshot.rows = [SnapshotRow("public.t", 0, 100_000)]
    m.watch(FakeTracker(), snapshot=snapshot)
    assert not m.alive()[0]  # starting
    snapshot.rows = [SnapshotRow("public.t", 5000, 100_000)]
    assert m.alive()[0]
    clock.now += 31
    ok, why = m.alive()
    assert not ok and "no progress for 31s" in why


def test_ticking_calls_through() -> None:
    calls: list[int] = []
    Metrics().ticking(lambda: calls.append(1))()
    assert calls == [1]


def test_readiness_needs_every_dependency_and_no_failure() -> None:
    m = Metrics()
    tracker = FakeTracker()
    m.watch(tracker)
    ok, why = m.ready()
    assert not ok
    assert "postgres not connected" in why and "starting" in why
    m.tick()
    for dep in ("postgres", "kafka", "registry"):
        m.set_connected(dep, True)
    assert m.ready() == (True, "ok")
    m.set_connected("registry", False)
    assert m.ready() == (False, "registry not connected")
    m.set_connected("registry", True)
    tracker.failed = True
    assert m.ready() == (False, "a Kafka delivery failed")


# --- librdkafka callbacks --------------------------------------------------------------------


def test_kafka_statistics_decide_connected() -> None:
    m = Metrics()
    conf = m.kafka_callbacks()
    assert conf["statistics.interval.ms"] > 0
    stats = conf["stats_cb"]
    stats(json.dumps({"brokers": {"b:9092/1": {"state": "UP"}, "b:9092/2": {"state": "DOWN"}}}))
    assert m.connected["kafka"]
    stats(json.dumps({"brokers": {"b:9092/bootstrap": {"state": "CONNECT"}}}))
    assert not m.connected["kafka"]
    stats("not json")
    assert not m.connected["kafka"]


def test_kafka_errors_are_counted_and_all_brokers_down_disconnects(
    caplog: pytest.LogCaptureFixture,
) -> None:
    m = Metrics()
    error_cb = m.kafka_callbacks()["error_cb"]
    m.set_connected("kafka", True)
    error_cb(KafkaError(KafkaError._TRANSPORT, "connection refused"))
    assert m.connected["kafka"] and m.errors["kafka"] == 1
    with caplog.at_level(logging.WARNING, "bridge.metrics"):
        error_cb(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
        error_cb(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert not m.connected["kafka"] and m.errors["kafka"] == 3
    assert len(caplog.records) == 1  # logged on the transition only
    m.set_connected("kafka", True)
    error_cb(KafkaError(KafkaError._FATAL, "fenced", fatal=True))
    assert not m.connected["kafka"]


# --- the HTTP endpoint -----------------------------------------------------------------------


@pytest.fixture
def served() -> Iterator[tuple[Metrics, str]]:
    metrics = busy_metrics()
    server = HealthServer(metrics, "127.0.0.1", 0).start()
    try:
        yield metrics, f"http://127.0.0.1:{server.port}"
    finally:
        server.close()


def test_metrics_endpoint(served: tuple[Metrics, str]) -> None:
    metrics, base = served
    reply = httpx.get(f"{base}/metrics")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    assert value(reply.text, "bridge_events_total", table="public.t", op="c") == 3
    metrics.event_counter("public", "t", "c")[0] += 1  # read at scrape time
    again = httpx.get(f"{base}/metrics?debug=1").text
    assert value(again, "bridge_events_total", table="public.t", op="c") == 4


def test_metrics_endpoint_speaks_openmetrics(served: tuple[Metrics, str]) -> None:
    _, base = served
    reply = httpx.get(f"{base}/metrics", headers={"Accept": "application/openmetrics-text"})
    assert reply.headers["content-type"].startswith("application/openmetrics-text")
    assert reply.text.rstrip().endswith("# EOF")


def test_health_endpoints(served: tuple[Metrics, str]) -> None:
    metrics, base = served
    assert httpx.get(f"{base}/healthz").status_code == 200
    reply = httpx.get(f"{base}/readyz")
    assert reply.status_code == 503
    assert "kafka not connected" in reply.text and "registry not connected" in reply.text
    metrics.set_connected("kafka", True)
    metrics.set_connected("registry", True)
    reply = httpx.get(f"{base}/readyz")
    assert (reply.status_code, reply.text) == (200, "ok\n")


def test_liveness_endpoint_before_the_loop_runs() -> None:
    server = HealthServer(Metrics(), "127.0.0.1", 0).start()
    try:
        reply = httpx.get(f"http://127.0.0.1:{server.port}/healthz")
    finally:
        server.close()
    assert reply.status_code == 503 and "starting" in reply.text


def test_unknown_path_is_404(served: tuple[Metrics, str]) -> None:
    _, base = served
    assert httpx.get(f"{base}/").status_code == 404
    assert httpx.get(f"{base}/metricsx").status_code == 404


def test_concurrent_scrapes(served: tuple[Metrics, str]) -> None:
    _, base = served
    codes: list[int] = []

    def get() -> None:
        codes.append(httpx.get(f"{base}/metrics").status_code)

    threads = [threading.Thread(target=get) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert codes == [200] * 8


def test_close_frees_the_port() -> None:
    server = HealthServer(Metrics(), "127.0.0.1", 0).start()
    port = server.port
    server.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_busy_port_is_a_config_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ConfigError, match=r"http\.port"):
            HealthServer(Metrics(), "127.0.0.1", port)


def test_port_zero_in_the_config_disables_the_endpoint() -> None:
    cfg = Config(http={"port": 0})
    with operations(cfg, Metrics()) as server:
        assert server is None
    assert not [t for t in threading.enumerate() if t.name in {"bridge-http", "bridge-monitor"}]


# --- the monitor -----------------------------------------------------------------------------


class FakeProbes:
    def __init__(self) -> None:
        self.lag: int | None = 1234
        self.failing = False

    def slot_lag(self) -> int | None:
        if self.failing:
            raise SourceError("cannot connect")
        return self.lag

    def registry(self) -> None:
        if self.failing:
            raise ConnectionError("refused")


def test_monitor_records_probe_results(caplog: pytest.LogCaptureFixture) -> None:
    m = Metrics()
    probes = FakeProbes()
    monitor = Monitor(m, slot_lag=probes.slot_lag, registry=probes.registry)
    monitor.probe_once()
    assert (m.slot_lag_bytes, m.connected["registry"], m.errors["monitor"]) == (1234, True, 0)
    probes.failing = True
    with caplog.at_level(logging.INFO, "bridge.http"):
        monitor.probe_once()
        monitor.probe_once()
        assert (m.slot_lag_bytes, m.connected["registry"], m.errors["monitor"]) == (None, False, 4)
        assert len(caplog.records) == 2  # one warning per probe, not per round
        probes.failing, probes.lag = False, None  # the slot is gone: no value
        monitor.probe_once()
    assert (m.slot_lag_bytes, m.connected["registry"]) == (None, True)
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING", "INFO", "INFO"]


def test_monitor_thread_probes_until_stopped() -> None:
    m = Metrics()
    probed = threading.Event()
    closed = threading.Event()

    def lag() -> int:
        probed.set()
        return 1

    monitor = Monitor(m, slot_lag=lag, registry=lambda: None, interval_s=0.05, close=closed.set)
    monitor.start()
    assert probed.wait(10)
    monitor.stop()
    assert closed.is_set() and m.slot_lag_bytes == 1


def test_monitor_silences_per_probe_request_logs(caplog: pytest.LogCaptureFixture) -> None:
    """The registry client's HTTP library logs each request at INFO: not every 5 s, please."""
    http_log = logging.getLogger("httpx2")
    done = threading.Event()

    def registry() -> None:
        http_log.info("HTTP Request: GET /schemas/types")
        http_log.warning("registry answered slowly")
        done.set()

    monitor = Monitor(Metrics(), slot_lag=lambda: 1, registry=registry, interval_s=60)
    with caplog.at_level(logging.INFO):
        monitor.start()
        assert done.wait(10)
        monitor.stop()
        http_log.info("HTTP Request: POST /subjects/t-value/versions")  # the pipeline's own
    assert [r.getMessage() for r in caplog.records if r.name == "httpx2"] == [
        "registry answered slowly",
        "HTTP Request: POST /subjects/t-value/versions",
    ]


# --- live: a Pipeline scraped over HTTP ------------------------------------------------------


def test_live_pipeline_metrics_and_health(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    pg_conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.execute("INSERT INTO t VALUES (100, 'before'), (101, 'before')")  # snapshotted
    settings = bridge_settings(
        stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path / "spill"
    )
    settings["snapshot"] = {"mode": "initial"}
    cfg = Config(**settings)
    metrics = Metrics()
    pipeline = build_pipeline(cfg, metrics)
    server = HealthServer(metrics, "127.0.0.1", 0).start()
    monitor = Monitor.for_config(cfg, metrics, interval_s=0.5).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        with running(pipeline):
            wait_for(lambda: httpx.get(f"{base}/readyz").status_code == 200, 60, "/readyz 200")
            assert httpx.get(f"{base}/healthz").status_code == 200
            row = pg_conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
            assert row is not None
            before = int(row[0])
            for i in range(3):
                pg_conn.execute("INSERT INTO t VALUES (%s, 'x')", (i,))
            pg_conn.execute("INSERT INTO t SELECT g, 'y' FROM generate_series(10, 13) g")
            pg_conn.execute("UPDATE t SET v = 'z' WHERE id = 10")
            pg_conn.execute("DELETE FROM t WHERE id = 11")

            def acknowledged() -> str | None:
                # Every transaction begun (its rows counted) and passed by the flush LSN: the
                # tracker's, and the one reported, which waits for the position's record in the
                # state topic (bridge/slotstate.py, at most a second behind).
                text = httpx.get(f"{base}/metrics").text
                counted = value(text, "bridge_events_total", table="public.t", op="d") == 1
                reported = (value(text, "bridge_confirmed_flush_lsn") or 0) > before
                passed = value(text, "bridge_open_transactions") == 0
                return text if counted and passed and reported else None

            text = wait_for(acknowledged, 60, "the changes to be acknowledged")
            assert value(text, "bridge_events_total", table="public.t", op="c") == 7
            assert value(text, "bridge_events_total", table="public.t", op="u") == 1
            assert value(text, "bridge_snapshot_rows_total", table="public.t") == 2
            flushed = value(text, "bridge_confirmed_flush_lsn")
            assert flushed is not None and flushed > before
            assert value(text, "bridge_in_flight_records") == 0
            source_lag = value(text, "bridge_source_lag_seconds")
            assert source_lag is not None and 0 <= source_lag < 60
            for dep in ("postgres", "kafka", "registry"):
                assert value(text, "bridge_connected", dependency=dep) == 1, dep
            assert value(text, "bridge_errors_total", stage="produce") == 0
            wait_for(
                lambda: (
                    value(httpx.get(f"{base}/metrics").text, "bridge_slot_lag_bytes") is not None
                ),
                60,
                "a slot lag sample",
            )
            assert httpx.get(f"{base}/healthz").status_code == 200
    finally:
        monitor.stop()
    try:
        reply = httpx.get(f"{base}/readyz")
        assert reply.status_code == 503 and "postgres not connected" in reply.text
    finally:
        server.close()
