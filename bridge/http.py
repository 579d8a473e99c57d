"""The operations endpoint: /metrics, /healthz, /readyz, and the probes that feed them.

Everything here runs on daemon threads of its own, off the replication loop: the
HTTP server answers from `bridge.metrics.Metrics`, and `Monitor` queries the slot
lag on its own PostgreSQL connection and checks the registry every few seconds.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import psycopg
from confluent_kafka.schema_registry import SchemaRegistryClient
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from bridge.config import Config, RegistryConfig, SourceConfig
from bridge.errors import ConfigError
from bridge.metrics import Metrics, collector_registry
from bridge.source import libpq

log = logging.getLogger("bridge.http")

# The WAL the slot holds back; on a standby the replay position stands for "current".
SLOT_LAG_SQL = (
    "SELECT pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
    "ELSE pg_current_wal_lsn() END, confirmed_flush_lsn)::bigint "
    "FROM pg_replication_slots WHERE slot_name = %s"
)
PROBE_TIMEOUT_S = 5
MONITOR_THREAD = "bridge-monitor"
# The registry client's HTTP library logs every request at INFO: one line per probe.
_CHATTY_LOGGERS = ("httpx", "httpx2")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, metrics: Metrics, registry: CollectorRegistry):
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.metrics = metrics
        self.registry = registry
        super().__init__((host, port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver would print the traceback to stderr, past the log set-up and its mask.
        log.exception("HTTP request from %s failed", client_address)


class _Handler(BaseHTTPRequestHandler):
    server_version = "pg-kafka-bridge"

    def do_GET(self) -> None:
        server = self.server
        assert isinstance(server, _Server)
        path = urlsplit(self.path).path
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self._reply(200, encoder(server.registry), content_type)
        elif path in {"/healthz", "/readyz"}:
            check = server.metrics.alive if path == "/healthz" else server.metrics.ready
            ok, detail = check()
            self._reply(200 if ok else 503, f"{detail}\n".encode(), "text/plain; charset=utf-8")
        else:
            self._reply(404, b"not found: try /metrics, /healthz or /readyz\n", "text/plain")

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class HealthServer:
    """/metrics, /healthz and /readyz on a daemon thread.

    `port` 0 binds an ephemeral port (tests read `.port`); the configuration's
    "0 disables the endpoint" is decided by `operations`, not here.
    """

    def __init__(
        self,
        metrics: Metrics,
        host: str,
        port: int,
        registry: CollectorRegistry | None = None,
    ) -> None:
        registry = registry if registry is not None else collector_registry(metrics)
        try:
            self._httpd = _Server(host, port, metrics, registry)
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics and health on {host}:{port}: {exc.strerror}",
                hint="set http.port to a free port (0 disables the endpoint)",
            ) from None
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="bridge-http", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join()
        self._httpd.server_close()


class SlotLagProbe:
    """pg_wal_lsn_diff(current, confirmed_flush_lsn) for the slot, on a connection of its own."""

    def __init__(self, source: SourceConfig) -> None:
        self._conninfo = {
            **source.conninfo(),
            "application_name": f"bridge:{source.slot_name}:monitor"[:63],
            "options": f"-c statement_timeout={PROBE_TIMEOUT_S * 1000}",
        }
        self._slot = source.slot_name
        self._conn: psycopg.Connection[Any] | None = None

    def __call__(self) -> int | None:
        """The lag in bytes; None while the slot does not exist."""
        if self._conn is None:
            self._conn = libpq.connect(self._conninfo, replication=False)
        try:
            row = self._conn.execute(SLOT_LAG_SQL, (self._slot,)).fetchone()
        except psycopg.Error:
            self.close()  # reconnect on the next round
            raise
        return None if row is None or row[0] is None else int(row[0])

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def registry_probe(registry: RegistryConfig) -> Callable[[], None]:
    """Raises unless the registry answers (GET /schemas/types: tiny, any client may call it)."""
    conf = {**registry.client_config(), "timeout": PROBE_TIMEOUT_S, "max.retries": 0}
    clients: list[SchemaRegistryClient] = []

    def probe() -> None:
        if not clients:  # made on first use: a bad URL is a failed probe, not a crash here
            clients.append(SchemaRegistryClient(conf))
        clients[0].get_schema_types()

    return probe


class _QuietProbes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.threadName != MONITOR_THREAD


class Monitor:
    """Runs the probes every `interval_s` on a daemon thread; logs only changes of state."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        slot_lag: Callable[[], int | None],
        registry: Callable[[], None],
        interval_s: float = 5.0,
        close: Callable[[], None] = lambda: None,
    ) -> None:
        self._metrics = metrics
        self._slot_lag = slot_lag
        self._registry = registry
        self._interval_s = interval_s
        self._close = close
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=MONITOR_THREAD, daemon=True)
        self._failing: set[str] = set()
        self._quiet = _QuietProbes()

    @classmethod
    def for_config(cls, cfg: Config, metrics: Metrics, interval_s: float = 5.0) -> Monitor:
        lag = SlotLagProbe(cfg.source)
        return cls(
            metrics,
            slot_lag=lag,
            registry=registry_probe(cfg.registry),
            interval_s=interval_s,
            close=lag.close,
        )

    def start(self) -> Monitor:
        for name in _CHATTY_LOGGERS:
            logging.getLogger(name).addFilter(self._quiet)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop probing; waits for a probe in progress only up to its own timeout."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(PROBE_TIMEOUT_S * 2)
        for name in _CHATTY_LOGGERS:
            logging.getLogger(name).removeFilter(self._quiet)

    def _run(self) -> None:
        try:
            while True:
                self.probe_once()
                if self._stop.wait(self._interval_s):
                    return
        finally:
            self._close()

    def probe_once(self) -> None:
        metrics = self._metrics
        ok, lag = self._attempt("slot lag query", self._slot_lag)
        metrics.slot_lag_bytes = lag if ok else None
        ok, _ = self._attempt("schema registry", self._registry)
        metrics.set_connected("registry", ok)

    def _attempt(self, name: str, probe: Callable[[], Any]) -> tuple[bool, Any]:
        """(True, result), or (False, None) if the probe raised: counted, logged once."""
        try:
            result = probe()
        except Exception as exc:  # a probe reports any failure; it must not end the thread
            self._metrics.error("monitor")
            if name not in self._failing:
                self._failing.add(name)
                log.warning("%s failed: %s", name, exc)
            return False, None
        if name in self._failing:
            self._failing.discard(name)
            log.info("%s works again", name)
        return True, result


@contextmanager
def operations(cfg: Config, metrics: Metrics) -> Iterator[HealthServer | None]:
    """Serve the endpoint and run the monitor for the block; nothing when http.port is 0."""
    if cfg.http.port == 0:
        yield None
        return
    server = HealthServer(metrics, cfg.http.host, cfg.http.port).start()
    monitor = Monitor.for_config(cfg, metrics).start()
    log.info("serving /metrics, /healthz and /readyz on %s:%d", cfg.http.host, server.port)
    try:
        yield server
    finally:
        monitor.stop()
        server.close()
