"""End-to-end figures of the bridge on the local stack: throughput and latency.

    python bench/e2e.py [--rows 200000] [--txn-rows 1000] [--rate 500] [--seconds 30]
                        [--exactly-once]

Everything is real: PostgreSQL, Kafka and the registry from deploy/local/stack.py,
and the bridge as `python -m bridge run` in its own process.

* Throughput, live: the bridge is caught up when one session commits `--rows`
  rows in transactions of `--txn-rows`. Reported: rows/s from the first commit
  until Kafka holds every record (high watermarks), and until the slot's
  confirmed_flush_lsn passes the last commit, i.e. until the broker acknowledged
  everything (the bridge acknowledges an LSN only after Kafka confirmed delivery).
* Throughput, backlog: the same load committed while the bridge is stopped, then
  the bridge started (timed from the process start): its own speed, without a
  loader competing for the CPU. Both also report the bridge process's CPU
  seconds (from /proc, start-up excluded): rows per CPU second varies much less
  than wall-clock rates on a shared machine.
* Latency: `--rate` single-row transactions per second for `--seconds`, below
  saturation; latency = consumer receive time - source.ts_ms (commit time), both
  wall clock on this machine, so the figure is commit -> visible to a consumer.
  The record's CreateTime splits it into commit -> produce and produce -> consume.

`--exactly-once` runs the bridge with `kafka.exactly_once: true` (transactional
producer). Records then count as visible only once their Kafka transaction committed:
the throughput run counts them with a read_committed consumer instead of summing high
watermarks (those include uncommitted records and transaction markers), and the
latency consumer reads committed records only (librdkafka's default isolation level).

The loader sessions use synchronous_commit = on (the stack defaults to off) so the
WAL writer's delay does not count against the bridge: logical decoding only sees
flushed WAL.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

ROOT = Path(__file__).resolve().parents[1]
DB = "bench"
TABLE_DDL = (
    "CREATE TABLE rows (id bigserial PRIMARY KEY, n int NOT NULL, payload text NOT NULL, "
    "created timestamptz NOT NULL DEFAULT now())"
)
PARTITIONS = 3


def load_stack() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "pgkb_local_stack", ROOT / "deploy" / "local" / "stack.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class Bridge:
    """The bridge as a child process, configured for the bench database."""

    def __init__(
        self,
        stack: Any,
        prefix: str,
        workdir: Path,
        *,
        exactly_once: bool,
        source: dict[str, Any] | None = None,
    ) -> None:
        """`source` adds settings to the source section (e.g. streaming)."""
        settings = {
            "source": {
                "host": stack.pg_host,
                "port": stack.pg_port,
                "dbname": DB,
                "user": stack.pg_user,
                "password": stack.pg_password,
                "slot_name": prefix,
                "publication_name": prefix,
                "status_interval_s": 1.0,
                **(source or {}),
            },
            "kafka": {
                "bootstrap_servers": stack.kafka_bootstrap,
                "topic_prefix": prefix,
                "exactly_once": exactly_once,
            },
            "registry": {"url": stack.registry_url},
            "pipeline": {"spill_dir": str(workdir / "spill")},
            "snapshot": {"mode": "no_data"},
            "http": {"port": 0},
            "log": {"level": "WARNING"},
        }
        self.config = workdir / f"{prefix}.yaml"
        self.config.write_text(yaml.safe_dump(settings))
        self.log = workdir / f"{prefix}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.wrapper: list[str] = []  # a command the bridge runs under (bench/instructions.py)

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "bridge", "run", "--config", str(self.config)]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [*self.wrapper, *command],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def stop(self, timeout: float = 60) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            if self.proc.wait(timeout) != 0:
                tail = self.log.read_text(errors="replace")[-4000:]
                raise SystemExit(f"bridge exited badly; the end of its log {self.log}:\n{tail}")

    def cpu_s(self) -> float:
        """User + system CPU seconds the running bridge process used so far."""
        assert self.proc is not None
        return proc_cpu_s(self.proc.pid)

    def peak_rss_mib(self) -> float:
        """The running bridge process's peak resident set (VmHWM) so far, in MiB."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise SystemExit("no VmHWM in /proc status")

    def check(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise SystemExit(f"bridge is not running:\n{self.log.read_text()[-3000:]}")


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid`, all threads, so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait(probe: Callable[[], bool], timeout: float, what: str, check: Callable[[], None]) -> None:
    """Poll `probe` every 20 ms (the resolution of the figures); `check` fails fast."""
    deadline = time.monotonic() + timeout
    while not probe():
        check()
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)


def lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


class Slot:
    def __init__(self, conn: psycopg.Connection[Any], name: str) -> None:
        self.conn, self.name = conn, name

    def state(self) -> tuple[bool, int]:
        row = self.conn.execute(
            "SELECT active, confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = %s",
            (self.name,),
        ).fetchone()
        return (False, 0) if row is None else (bool(row[0]), lsn(row[1] or "0/0"))

    def drop(self) -> None:
        """An inactive slot still pins WAL: remove it once a run is measured."""
        self.conn.execute("SELECT pg_drop_replication_slot(%s)", (self.name,))


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[
        topic
    ].result(30)


def insert_lsn(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return lsn(row[0])


class Visible:
    """Records a consumer can read: high watermarks, or (exactly-once) committed records
    counted by a read_committed consumer, since offsets also cover transaction markers."""

    def __init__(self, bootstrap: str, topic: str, group: str, *, exactly_once: bool) -> None:
        self.partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.exactly_once = exactly_once
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"}
        )
        if exactly_once:
            self.consumer.assign(
                [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
            )
        self.counted = 0

    def __call__(self) -> int:
        if not self.exactly_once:
            return sum(
                high - low
                for low, high in (
                    self.consumer.get_watermark_offsets(tp, timeout=10) for tp in self.partitions
                )
            )
        while batch := self.consumer.consume(10_000, 0):
            self.counted += sum(1 for msg in batch if not msg.error())
        return self.counted

    def close(self) -> None:
        self.consumer.close()


def load(dsn: str, rows: int, txn_rows: int) -> int:
    """Commit `rows` rows in transactions of `txn_rows`; returns the WAL position after."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        for start in range(0, rows, txn_rows):
            conn.execute(
                "INSERT INTO rows (n, payload) SELECT g, repeat('p', 100) "
                "FROM generate_series(%s::int, %s::int) g",
                (start, min(start + txn_rows, rows) - 1),
            )
        return insert_lsn(conn)


def throughput(
    args: argparse.Namespace, stack: Any, workdir: Path, *, backlog: bool
) -> dict[str, Any]:
    prefix = f"tp{int(backlog)}_{time.time_ns() % 10**9}"
    dsn = str(stack.dsn(DB))
    topic = f"{prefix}.public.rows"
    create_topic(stack.kafka_bootstrap, topic)
    visible = Visible(stack.kafka_bootstrap, topic, prefix, exactly_once=args.exactly_once)
    bridge = Bridge(stack, prefix, workdir, exactly_once=args.exactly_once)
    with psycopg.connect(dsn, autocommit=True) as conn:
        slot = Slot(conn, prefix)
        bridge.start()
        wait(lambda: slot.state()[0], 60, "the slot", bridge.check)
        if backlog:
            bridge.stop()
            wait(lambda: not slot.state()[0], 60, "the slot released", lambda: None)
            end = load(dsn, args.rows, args.txn_rows)
            t0 = time.monotonic()
            bridge.start()
            wait(lambda: slot.state()[0], 60, "the slot", bridge.check)
            cpu0 = bridge.cpu_s()  # interpreter start-up excluded
        else:
            cpu0 = bridge.cpu_s()
            t0 = time.monotonic()
            end = load(dsn, args.rows, args.txn_rows)
        t_load = time.monotonic() - t0
        wait(lambda: visible() >= args.rows, 600, "records", bridge.check)
        t_visible = time.monotonic() - t0
        wait(lambda: slot.state()[1] >= end, 120, "the acknowledgement", bridge.check)
        t_acked = time.monotonic() - t0
        cpu = bridge.cpu_s() - cpu0
        bridge.stop()
        slot.drop()
    visible.close()
    return {
        "mode": "backlog (bridge started after the load)" if backlog else "live",
        "exactly_once": args.exactly_once,
        "rows": args.rows,
        "txn_rows": args.txn_rows,
        "load_s": None if backlog else round(t_load, 2),
        "visible_s": round(t_visible, 2),
        "acked_s": round(t_acked, 2),
        "rows_per_s_visible": round(args.rows / t_visible),
        "rows_per_s_acked": round(args.rows / t_acked),
        "bridge_cpu_s": round(cpu, 2),
        "rows_per_bridge_cpu_s": round(args.rows / cpu),
    }


def latency_consumer(stack: Any, group: str, topic: str) -> Consumer:
    """Create `topic` and a consumer of all its partitions from the start, tuned to hand
    over each record at once (read_committed: exactly-once records count when visible)."""
    create_topic(stack.kafka_bootstrap, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": stack.kafka_bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 5,
            "fetch.min.bytes": 1,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    return consumer


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(args: argparse.Namespace, stack: Any, workdir: Path) -> dict[str, Any]:
    prefix = f"lat_{time.time_ns() % 10**9}"
    dsn = str(stack.dsn(DB))
    topic = f"{prefix}.public.rows"
    consumer = latency_consumer(stack, prefix, topic)
    decode = AvroDeserializer(SchemaRegistryClient({"url": stack.registry_url}))
    bridge = Bridge(stack, prefix, workdir, exactly_once=args.exactly_once)
    with psycopg.connect(dsn, autocommit=True) as conn:
        slot = Slot(conn, prefix)
        bridge.start()
        wait(lambda: slot.state()[0], 60, "the slot", bridge.check)
    total = int(args.rate * args.seconds)
    committed: list[float] = []

    def write() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET synchronous_commit = on")
            start = time.monotonic()
            for i in range(total):
                ahead = start + i / args.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)  # pacing the offered rate
                conn.execute("INSERT INTO rows (n, payload) VALUES (%s, 'p')", (i,))
            committed.append(time.monotonic() - start)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    e2e: list[float] = []
    to_produce: list[float] = []
    to_consume: list[float] = []
    deadline = time.monotonic() + args.seconds + 120
    while len(e2e) < total and time.monotonic() < deadline:
        msg = consumer.poll(0.1)  # not consume(n, t): that waits for n records or t
        now_ms = time.time() * 1000
        if msg is not None and not msg.error():
            value = decode(msg.value(), SerializationContext(topic, MessageField.VALUE))
            commit_ms = value["source"]["ts_ms"]
            created_ms = msg.timestamp()[1]
            e2e.append(now_ms - commit_ms)
            to_produce.append(created_ms - commit_ms)
            to_consume.append(now_ms - created_ms)
    writer.join()
    bridge.stop()
    consumer.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        Slot(conn, prefix).drop()
    ms = {
        name: {
            "p50": round(statistics.median(vals), 1),
            "p99": round(percentile(vals, 0.99), 1),
            "max": round(max(vals), 1),
        }
        for name, vals in (
            ("commit_to_consumer_ms", e2e),
            ("commit_to_produce_ms", to_produce),
            ("produce_to_consumer_ms", to_consume),
        )
    }
    return {
        "exactly_once": args.exactly_once,
        "offered_txn_per_s": args.rate,
        "achieved_txn_per_s": round(total / committed[0]) if committed else None,
        "records": len(e2e),
        **ms,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--txn-rows", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument(
        "--exactly-once", action="store_true", help="run the bridge with kafka.exactly_once"
    )
    args = parser.parse_args()
    stack = load_stack().Stack()
    stack.start()
    try:
        stack.create_database(DB)
        with psycopg.connect(str(stack.dsn(DB)), autocommit=True) as conn:
            conn.execute(TABLE_DDL)
        with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
            results = [
                throughput(args, stack, Path(tmp), backlog=False),
                throughput(args, stack, Path(tmp), backlog=True),
                latency(args, stack, Path(tmp)),
            ]
    finally:
        stack.stop()
    for result in results:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
