"""`bridge demo`: the whole path on the local stack, from a fresh machine.

Starts PostgreSQL, Kafka and the registry (the local stack, `deploy/local/stack.py`:
development tooling, not part of the installed package), checks them with `bridge
check`, streams a small shop workload through the bridge, and prints what a plain Avro
consumer reads next to what PostgreSQL holds.

The stack is imported as the top-level module `stack`, found on the import path like
any other module: `./deploy/local/dev.sh demo` puts `deploy/local` on PYTHONPATH
(`PYTHONPATH=deploy/local bridge demo` does the same by hand). The package never
computes a path into the checkout, so an installed bridge does not depend on where
its sources were.
"""

from __future__ import annotations

import datetime
import importlib
import tempfile
import threading
import time
from types import ModuleType
from typing import Any

import psycopg
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from bridge.build import build_pipeline
from bridge.check import run_checks
from bridge.config import Config
from bridge.errors import BridgeError
from bridge.produce import kafka_client_config

STACK_MODULE = "stack"  # deploy/local/stack.py, on PYTHONPATH (see above)

WORKLOAD = [
    "CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL, email text, "
    "balance numeric(12,2), created timestamptz DEFAULT now(), tags text[])",
    "INSERT INTO customers (name, email, balance, tags) VALUES "
    "('Ada', 'ada@example.com', 10.50, '{vip}'), ('Linus', NULL, 0, '{}'), "
    "('Grace', 'grace@example.com', 99.99, '{vip,navy}')",
    "UPDATE customers SET balance = balance + 5 WHERE name = 'Ada'",
    "DELETE FROM customers WHERE name = 'Linus'",
    "UPDATE customers SET id = 42 WHERE name = 'Grace'",
]


def _load_stack() -> ModuleType:
    try:
        module = importlib.import_module(STACK_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != STACK_MODULE:
            raise
        module = None
    if module is None or not hasattr(module, "Stack"):
        raise BridgeError(
            "the local stack (deploy/local/stack.py) is not on the import path",
            hint="run the demo from a checkout: ./deploy/local/dev.sh demo, or "
            "PYTHONPATH=deploy/local bridge demo",
        )
    return module


def demo_config(stack: Any, dbname: str) -> Config:
    return Config(
        source={
            "host": stack.pg_host,
            "port": stack.pg_port,
            "dbname": dbname,
            "user": stack.pg_user,
            "password": stack.pg_password,
            "slot_name": "demo",
            "publication_name": "demo",
            "status_interval_s": 1.0,
        },
        kafka={"bootstrap_servers": stack.kafka_bootstrap, "topic_prefix": "demo"},
        registry={"url": stack.registry_url},
        http={"port": 0},
    )


def consume(cfg: Config, topic: str, count: int, timeout: float = 60.0) -> list[tuple[Any, Any]]:
    """Read `count` records (tombstones included) with a plain Avro consumer."""
    registry = SchemaRegistryClient(cfg.registry.client_config())
    decode = AvroDeserializer(registry)
    consumer = Consumer(
        {
            **kafka_client_config(cfg.kafka),
            "group.id": f"demo-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    out: list[tuple[Any, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            key = decode(msg.key(), SerializationContext(topic, MessageField.KEY))
            value = decode(msg.value(), SerializationContext(topic, MessageField.VALUE))
            out.append((key, value))
    finally:
        consumer.close()
    return out


def run_demo(*, keep: bool = False) -> None:
    stack_module = _load_stack()
    print("starting the local stack (PostgreSQL 15, Kafka, schema registry)...", flush=True)
    stack = stack_module.Stack()
    stack.start()
    try:
        _demo(stack)
        if keep:
            print(f"stack kept running: {stack.info()}\npress Ctrl-C to stop", flush=True)
            threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop()


def _demo(stack: Any) -> None:
    stack.create_database("shop")
    cfg = demo_config(stack, "shop")
    with psycopg.connect(stack.dsn("shop"), autocommit=True) as conn:
        conn.execute(WORKLOAD[0])
        print("\n$ bridge check")
        for result in run_checks(cfg):
            print(f"{'ok  ' if result.ok else 'FAIL'} {result.name}: {result.detail}")
        pipeline = build_pipeline(cfg)
        worker = threading.Thread(target=pipeline.run, name="bridge", daemon=True)
        worker.start()
        for statement in WORKLOAD[1:]:
            print(f"\nSQL> {statement}")
            conn.execute(statement)
        # 3 creates, 1 update, delete+tombstone, PK change = delete+tombstone+create
        records = consume(cfg, "demo.public.customers", 9)
        pipeline.stop()
        worker.join(60)
        print("\nKafka topic demo.public.customers (key → op, after):")
        for key, value in records:
            if value is None:
                print(f"  {key} → tombstone")
            else:
                print(f"  {key} → {value['op']} {value['after'] or value['before']}")
        rows = conn.execute(
            "SELECT id, name, email, balance, created, tags FROM customers ORDER BY id"
        ).fetchall()
        print("\nPostgreSQL customers now:")
        for row in rows:
            print(f"  {row}")
        flushed = conn.execute(
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'demo'"
        ).fetchone()
        print(f"slot 'demo' confirmed_flush_lsn: {flushed[0] if flushed else None}")
        if len(records) != 9:
            raise BridgeError(f"expected 9 records, read {len(records)}", hint="see the log above")
        _spark_side(cfg, "demo.public.customers", rows)


def _spark_side(cfg: Config, topic: str, pg_rows: list[tuple[Any, ...]]) -> None:
    """Downstream: PySpark reads the topic and MERGEs it into a Delta table."""
    # The Spark side is an optional extra (pyspark, delta-spark): imported only here.
    from bridge.spark import apply_batch, read_changes, spark_session  # noqa: PLC0415

    print("\nSpark: read_changes → apply_batch into a Delta table (local[2])...", flush=True)
    spark = spark_session("bridge-demo")
    try:
        with tempfile.TemporaryDirectory(prefix="bridge-demo-delta-") as lake:
            changes = read_changes(
                spark,
                [topic],
                kafka_options={"kafka.bootstrap.servers": cfg.kafka.bootstrap_servers},
                registry_url=cfg.registry.url,
            )
            apply_batch(changes, lake, ["id"])
            columns = ["id", "name", "email", "balance", "created", "tags"]
            live = spark.read.format("delta").load(lake).where("NOT _deleted").select(*columns)
            delta_rows = sorted(tuple(r) for r in live.collect())
    finally:
        spark.stop()
    print("Delta table (live rows):")
    for row in delta_rows:
        print(f"  {row}")
    pg = sorted(_comparable(r) for r in pg_rows)
    delta = sorted(_comparable(r) for r in delta_rows)
    verdict = "MATCH" if pg == delta else "MISMATCH"
    print(
        f"\nverdict: {verdict}: Delta table {'equals' if pg == delta else 'differs from'} "
        f"the PostgreSQL table ({len(delta)} live rows vs {len(pg)})"
    )
    if pg != delta:
        raise BridgeError("the Delta table does not match PostgreSQL", hint="see both above")


def _comparable(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Spark gives naive UTC datetimes and lists; PostgreSQL aware datetimes."""
    out: list[Any] = []
    for value in row:
        if isinstance(value, datetime.datetime) and value.tzinfo is not None:
            out.append(value.astimezone(datetime.UTC).replace(tzinfo=None))
        elif isinstance(value, list):
            out.append(tuple(value))
        else:
            out.append(value)
    return tuple(out)
