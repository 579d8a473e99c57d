"""Latency the way Sequin publishes it: a mixed workload at fixed offered rates.

    python bench/latency.py [--rates 1000,5000,20000,max] [--sizes 100,1600]
                            [--seconds 20] [--modes alo,eos]

Everything is real: PostgreSQL, Kafka and the registry from deploy/local/stack.py, and
the bridge as `python -m bridge run` in its own process (bench/e2e.py's `Bridge`).

One table `lat (id bigserial PK, payload text, updated_at timestamptz)`. A writer
process commits, every 10 ms, one transaction holding that tick's share of the
offered rate: 50% inserts, 40% updates of live rows, 10% deletes of the oldest rows.
Every insert and update sets `updated_at = clock_timestamp()` in the statement, so the
row carries the moment it was written. `max` offers as fast as one writer session
can (saturation). Payloads are ~100 B or ~1.6 KB of incompressible text (below the
TOAST threshold, as in Sequin's runs). The first WARMUP_S seconds of each run (schema
registration, topic metadata) are written but not measured.

For each record a consumer in this process reads (read_committed):
* commit -> Kafka = the record's CreateTime (set by the bridge's producer when it
  hands the record to librdkafka) - the row's `updated_at`; for deletes, whose row
  no longer has a write time, `source.ts_ms` (the commit time) stands in;
* commit -> consumer = the consumer's receive time - the same start.
p50/p95/p99/max over every record of the run, achieved ops/s, and the bridge
process's CPU-µs per op. `eos` runs the bridge with `kafka.exactly_once: true`;
records are then visible only when their Kafka transaction commits
(`kafka.transaction_interval_ms`, the bridge's setting, bounds that wait).

PostgreSQL, Kafka, the bridge, the writer and the consumer share the machine's cores:
the figures include that contention, as on a single small host.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from e2e import DB, Bridge, Slot, latency_consumer, load_stack, percentile, wait

TICK_S = 0.01
WARMUP_S = 3.0  # schema registration, topic metadata, first batches: not measured
DDL = (
    "CREATE TABLE lat (id bigserial PRIMARY KEY, payload text NOT NULL, "
    "updated_at timestamptz NOT NULL)"
)
MIX = (("insert", 0.5), ("update", 0.4), ("delete", 0.1))


def write(
    dsn: str, rate: float | None, seconds: float, size: int, out: Any, warmup: float = WARMUP_S
) -> None:
    """The writer process: paced ticks of mixed operations for `warmup` + `seconds`.

    Sends back (all operations, operations and seconds after the warm-up, the wall
    time in ms the measured part began). Deletes take the oldest live ids and updates
    random live ones, so every operation touches an existing row and the table stays
    about the size the inserts make it.
    """
    rng = random.Random(7)
    low = high = 0  # live ids are low+1 .. high
    ops = 0
    measured: tuple[int, float, float] | None = None  # ops, monotonic, wall ms at start
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        start = time.monotonic()
        tick = 0
        while (now := time.monotonic()) - start < warmup + seconds:
            if measured is None and now - start >= warmup:
                measured = (ops, now, time.time() * 1000)
            per_tick = 100 if rate is None else rate * TICK_S
            n = int(per_tick * (tick + 1)) - int(per_tick * tick)
            tick += 1
            if rate is not None:
                ahead = start + tick * TICK_S - now
                if ahead > 0:
                    time.sleep(ahead)
            inserts = max(1, round(n * MIX[0][1]))
            live = high - low
            updates = min(live, round(n * MIX[1][1]))
            deletes = min(live - updates, round(n * MIX[2][1]))
            payload = rng.randbytes(size // 2).hex()
            with conn.transaction():
                conn.execute(
                    "INSERT INTO lat (payload, updated_at) "
                    "SELECT %s, clock_timestamp() FROM generate_series(1, %s)",
                    (payload, inserts),
                )
                if updates:
                    ids = rng.sample(range(low + deletes + 1, high + 1), updates)
                    conn.execute(
                        "UPDATE lat SET payload = %s, updated_at = clock_timestamp() "
                        "WHERE id = ANY(%s)",
                        (payload, ids),
                    )
                if deletes:
                    conn.execute("DELETE FROM lat WHERE id > %s AND id <= %s", (low, low + deletes))
            low += deletes
            high += inserts
            ops += inserts + updates + deletes
        assert measured is not None
        out.send((ops, ops - measured[0], time.monotonic() - measured[1], measured[2]))


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 1),
        "p95": round(percentile(values, 0.95), 1),
        "p99": round(percentile(values, 0.99), 1),
        "max": round(max(values), 1),
    }


def run(
    stack: Any, workdir: Path, *, rate: float | None, size: int, seconds: float, eos: bool
) -> dict[str, Any]:
    prefix = f"lat{size}_{time.time_ns() % 10**9}"
    dsn = str(stack.dsn(DB))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS lat")
        conn.execute(DDL)
    topic = f"{prefix}.public.lat"
    consumer = latency_consumer(stack, prefix, topic)
    decode = AvroDeserializer(SchemaRegistryClient({"url": stack.registry_url}))
    bridge = Bridge(stack, prefix, workdir, exactly_once=eos)
    with psycopg.connect(dsn, autocommit=True) as conn:
        slot = Slot(conn, prefix)
        bridge.start()
        wait(lambda: slot.state()[0], 60, "the slot", bridge.check)
        cpu0 = bridge.cpu_s()
        ours, theirs = multiprocessing.Pipe()
        writer = multiprocessing.Process(target=write, args=(dsn, rate, seconds, size, theirs))
        writer.start()
        seen: list[tuple[float, float, float]] = []  # start, CreateTime, receive (ms)
        result: tuple[int, int, float, float] | None = None
        deadline = time.monotonic() + seconds + 180
        while time.monotonic() < deadline:
            if result is None and ours.poll():
                result = ours.recv()
            if result is not None and len(seen) >= result[0]:
                break
            msg = consumer.poll(0.05)
            now_ms = time.time() * 1000
            if msg is None or msg.error() or msg.value() is None:
                continue  # tombstones follow their delete: one measurement per change
            value = decode(msg.value(), SerializationContext(topic, MessageField.VALUE))
            row = value["after"] or {}
            at = row.get("updated_at")
            start_ms = at.timestamp() * 1000 if at is not None else value["source"]["ts_ms"]
            seen.append((start_ms, msg.timestamp()[1], now_ms))
        writer.join()
        cpu = bridge.cpu_s() - cpu0
        bridge.stop()
        slot.drop()
    consumer.close()
    if result is None:
        raise SystemExit("the writer did not report")
    total, ops, took, measure_ms = result
    if len(seen) < total:
        raise SystemExit(f"only {len(seen)} of {total} changes arrived within the deadline")
    measured = [s for s in seen if s[0] >= measure_ms]
    to_kafka = [created - start for start, created, _ in measured]
    to_consumer = [received - start for start, _, received in measured]
    return {
        "mode": "exactly-once" if eos else "at-least-once",
        "row_bytes": size,
        "offered_ops_per_s": "max" if rate is None else int(rate),
        "achieved_ops_per_s": round(ops / took),
        "changes": ops,
        "commit_to_kafka_ms": summary(to_kafka),
        "commit_to_consumer_ms": summary(to_consumer),
        "bridge_cpu_us_per_op": round(cpu / total * 1e6, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rates", default="1000,5000,20000,max")
    parser.add_argument("--sizes", default="100,1600")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--modes", default="alo,eos", help="alo (at-least-once), eos")
    parser.add_argument("--warmup-seconds", type=float, default=15.0, help="a run not shown")
    args = parser.parse_args()
    rates = [None if r == "max" else float(r) for r in args.rates.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = args.modes.split(",")
    stack = load_stack().Stack()
    stack.start()
    print(f"# load average before: {os.getloadavg()}", file=sys.stderr)
    try:
        stack.create_database(DB)
        with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp:
            # Kafka's and the registry's JVMs are still compiling their hot paths after a
            # cold start: the first run measured seconds of lag that later runs never saw.
            run(stack, Path(tmp), rate=1000, size=100, seconds=args.warmup_seconds, eos=False)
            for mode in modes:
                for size in sizes:
                    for rate in rates:
                        figures = run(
                            stack,
                            Path(tmp),
                            rate=rate,
                            size=size,
                            seconds=args.seconds,
                            eos=mode == "eos",
                        )
                        print(json.dumps(figures), flush=True)
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
