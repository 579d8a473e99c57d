"""`bridge demo`: the whole path on the local stack, from a fresh machine.

Starts PostgreSQL, Kafka and the registry (the local stack, `deploy/local/stack.py`:
development tooling, not part of the installed package), checks them with `bridge
check`, and streams a small shop workload on two tables (inserts, updates, deletes, a
primary-key change, transactions across both) through the bridge, printing what a plain
Avro consumer reads from each topic. Then the lake side: one Spark streaming query
(`bridge.spark.apply_tables`) applies every topic to a Delta table of its own; a column
added in PostgreSQL while the bridge and that query run reaches its Delta table without
a restart; and every Delta table is compared with its PostgreSQL table.

Each step waits on a condition, never for a fixed time: the bridge has delivered
everything committed once its slot's confirmed_flush_lsn passes
`pg_current_wal_insert_lsn()` (not the write position, which lags the last commits
under the stack's synchronous_commit=off), and the query has applied everything Kafka
holds once `processAllAvailable()` returns.

The stack is imported as the top-level module `stack`, found on the import path like
any other module: `./deploy/local/dev.sh demo` puts `deploy/local` on PYTHONPATH
(`PYTHONPATH=deploy/local bridge demo` does the same by hand). The package never
computes a path into the checkout, so an installed bridge does not depend on where
its sources were.
"""

from __future__ import annotations

import datetime
import importlib
import logging
import re
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import ModuleType
from typing import TYPE_CHECKING, Any

import psycopg
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from psycopg import sql

from bridge import log
from bridge.build import build_pipeline
from bridge.check import run_checks
from bridge.config import Config
from bridge.errors import BridgeError
from bridge.kafka.producer import kafka_client_config
from bridge.verify.topic import topic_offsets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

STACK_MODULE = "stack"  # deploy/local/stack.py, on PYTHONPATH (see above)

TABLES = ("customers", "orders")
DDL = (
    "CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL, email text, "
    "balance numeric(12,2), created timestamptz DEFAULT now(), tags text[])",
    "CREATE TABLE orders (id serial PRIMARY KEY, customer_id int NOT NULL, "
    "item text NOT NULL, quantity int NOT NULL)",
)
# (what a step shows, its statements): a step of several statements is one transaction
Step = tuple[str, tuple[str, ...]]
WORKLOAD: tuple[Step, ...] = (
    (
        "inserts",
        (
            "INSERT INTO customers (name, email, balance, tags) VALUES "
            "('Ada', 'ada@example.com', 10.50, '{vip}'), ('Linus', NULL, 0, '{}'), "
            "('Grace', 'grace@example.com', 99.99, '{vip,navy}')",
        ),
    ),
    (
        "inserts",
        (
            "INSERT INTO orders (customer_id, item, quantity) VALUES "
            "(1, 'keyboard', 1), (2, 'penguin', 5), (3, 'compiler', 2)",
        ),
    ),
    (
        "updates of both tables in one transaction",
        (
            "UPDATE orders SET quantity = 2 WHERE item = 'keyboard'",
            "UPDATE customers SET balance = balance + 5 WHERE name = 'Ada'",
        ),
    ),
    (
        "deletes",
        (
            "DELETE FROM orders WHERE customer_id = 2",
            "DELETE FROM customers WHERE name = 'Linus'",
        ),
    ),
    (
        "a primary-key change (Grace: id 3 -> 42), her order follows",
        (
            "UPDATE customers SET id = 42 WHERE name = 'Grace'",
            "UPDATE orders SET customer_id = 42 WHERE customer_id = 3",
        ),
    ),
)
SCHEMA_CHANGE: tuple[Step, ...] = (
    ("a new column", ("ALTER TABLE orders ADD COLUMN note text",)),
    (
        "changes that set it",
        (
            "INSERT INTO orders (customer_id, item, quantity, note) "
            "VALUES (42, 'punch cards', 100, 'leave at the door')",
        ),
    ),
    ("", ("UPDATE orders SET note = 'gift wrap' WHERE item = 'keyboard'",)),
)
OPS = {"c": "insert", "u": "update", "d": "delete", "r": "read", "t": "truncate"}
DELIVERY_TIMEOUT_S = 120.0
_POLL_S = 0.2


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


def demo_config(stack: Any, dbname: str, name: str = "demo") -> Config:
    """The bridge for database `dbname`; `name` is its slot, publication and topic prefix."""
    return Config(
        source={
            "host": stack.pg_host,
            "port": stack.pg_port,
            "dbname": dbname,
            "user": stack.pg_user,
            "password": stack.pg_password,
            "slot_name": name,
            "publication_name": name,
            "status_interval_s": 1.0,
        },
        kafka={"bootstrap_servers": stack.kafka_bootstrap, "topic_prefix": name},
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


# Spark's WARNs about a micro-batch falling behind, a cancelled job group or a locally
# checkpointed RDD are a small machine's normal, not news for the demo's reader.
SPARK_LOG_LEVEL = "ERROR"


def quiet_logs() -> None:
    """Only what the reader must see between the demo's lines: warnings and errors of the
    bridge, errors of the Kafka client (a broker just started answers "coordinator load in
    progress: retrying" for a while; a lasting failure stops the demo with its cause).
    Spark's JVM logs errors only (`SPARK_LOG_LEVEL`)."""
    log.setup("WARNING", "text")
    logging.getLogger("bridge.kafka").setLevel(logging.ERROR)


def run_demo(*, keep: bool = False) -> None:
    stack_module = _load_stack()
    quiet_logs()
    print("starting the local stack (PostgreSQL 15, Kafka, schema registry)...", flush=True)
    stack = stack_module.Stack()
    stack.start()
    try:
        # The Spark side is an optional extra (pyspark, delta-spark): imported only here.
        from bridge.spark import spark_session  # noqa: PLC0415

        print("starting Spark (local[2], Kafka source, Avro and Delta jars)...", flush=True)
        spark = spark_session("bridge-demo", extra_conf={"spark.log.level": SPARK_LOG_LEVEL})
        try:
            with tempfile.TemporaryDirectory(prefix="bridge-demo-lake-") as lake:
                shop_demo(stack, spark, lake)
                if keep:
                    print(f"stack kept running: {stack.info()}\npress Ctrl-C to stop", flush=True)
                    threading.Event().wait()
        finally:
            spark.stop()
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop()


@dataclass(frozen=True)
class Verdict:
    """One table: PostgreSQL's columns and rows next to its Delta table's live ones. Rows
    are `comparable` tuples; the Delta rows are in `columns` order when the Delta table
    has exactly those data columns, else in `delta_columns` order."""

    table: str
    columns: tuple[str, ...]
    pg_rows: tuple[tuple[Any, ...], ...]
    delta_columns: tuple[str, ...]  # () when there is no Delta table
    delta_rows: tuple[tuple[Any, ...], ...]
    deleted: int  # soft-deleted rows the Delta table keeps (`_deleted = true`)

    @property
    def same_columns(self) -> bool:
        return sorted(self.columns) == sorted(self.delta_columns)

    @property
    def match(self) -> bool:
        return self.same_columns and Counter(self.pg_rows) == Counter(self.delta_rows)


def shop_demo(
    stack: Any, spark: SparkSession, lake: str, *, dbname: str = "shop", name: str = "demo"
) -> dict[str, Verdict]:
    """The demo on a started stack and Spark session, with its Delta tables under `lake`:
    the workload, the lake, the added column, then one `Verdict` per table (raises
    BridgeError when a Delta table differs from PostgreSQL). `name` is the bridge's slot,
    publication and topic prefix."""
    stack.create_database(dbname)
    cfg = demo_config(stack, dbname, name)
    with psycopg.connect(stack.dsn(dbname), autocommit=True) as conn:
        for ddl in DDL:
            conn.execute(ddl)
        print("\n$ bridge check")
        for result in run_checks(cfg):
            print(f"{'ok  ' if result.ok else 'FAIL'} {result.name}: {result.detail}")
        bridge = _Bridge(cfg)
        try:
            _section("1. a shop workload on two tables; the bridge streams it to Kafka")
            _run(conn, WORKLOAD)
            _delivered(conn, cfg, bridge)
            for table in TABLES:
                _show_topic(cfg, f"{name}.public.{table}")
            _section("2. Spark: one streaming query applies each topic to its own Delta table")
            query = _start_lake(spark, cfg, lake)
            try:
                query.processAllAvailable()
                for table in TABLES:
                    _show_lake(_verdict(conn, spark, lake, table))
                _section("3. a column added in PostgreSQL while the bridge and the query run")
                _run(conn, SCHEMA_CHANGE)
                _delivered(conn, cfg, bridge)
                query.processAllAvailable()
                print(
                    "\nthe same query, not restarted, read the records of the table's new "
                    "schema version and added the column to the Delta table:"
                )
                _show_lake(_verdict(conn, spark, lake, "orders"))
            finally:
                query.stop()
        finally:
            bridge.stop()
        verdicts = {table: _verdict(conn, spark, lake, table) for table in TABLES}
    _judge(verdicts)
    return verdicts


class _Bridge:
    """The pipeline on a thread. What ended it is kept, so that a wait for delivery fails
    at once with the reason rather than at its deadline."""

    def __init__(self, cfg: Config) -> None:
        self._pipeline = build_pipeline(cfg)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="bridge", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._pipeline.run()
        except BaseException as exc:  # reported by check(), on the demo's thread
            self._error = exc

    def check(self) -> None:
        if isinstance(self._error, BridgeError):
            raise self._error
        if self._error is not None or not self._thread.is_alive():
            raise BridgeError(
                f"the bridge stopped: {self._error!r}", hint="see its log above"
            ) from self._error

    def stop(self) -> None:
        self._pipeline.stop()
        self._thread.join(60)


def _section(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def _run(conn: psycopg.Connection[Any], steps: Sequence[Step]) -> None:
    for what, statements in steps:
        if what:
            print(f"\n-- {what}")
        if len(statements) == 1:
            print(f"SQL> {statements[0]}")
            conn.execute(statements[0])
            continue
        print("SQL> BEGIN")
        with conn.transaction():
            for statement in statements:
                print(f"SQL> {statement}")
                conn.execute(statement)
        print("SQL> COMMIT")


def _delivered(conn: psycopg.Connection[Any], cfg: Config, bridge: _Bridge) -> None:
    """Wait until the slot's confirmed_flush_lsn passes the WAL insert position of now:
    Kafka has confirmed every transaction committed so far."""
    row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    target = row[0]
    probe = (
        "SELECT confirmed_flush_lsn >= %s::pg_lsn, confirmed_flush_lsn::text "
        "FROM pg_replication_slots WHERE slot_name = %s"
    )
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while True:
        found = conn.execute(probe, (target, cfg.source.slot_name)).fetchone()
        if found is not None and found[0]:
            print(
                f"\ndelivered: slot {cfg.source.slot_name!r} confirmed_flush_lsn {found[1]} "
                f">= WAL insert position {target} (Kafka confirmed every commit)",
                flush=True,
            )
            return
        bridge.check()
        if time.monotonic() > deadline:
            raise BridgeError(
                f"the bridge did not confirm WAL position {target} within "
                f"{DELIVERY_TIMEOUT_S:.0f}s (slot at {found[1] if found else 'none'})",
                hint="see the bridge's log above",
            )
        time.sleep(_POLL_S)  # the pause between two probes of the condition


def _show_topic(cfg: Config, topic: str) -> None:
    """Every record `topic` holds, decoded as any Avro consumer decodes it."""
    held = sum(high - low for low, high in topic_offsets(cfg, topic).values())
    records = consume(cfg, topic, held)
    if len(records) < held:
        raise BridgeError(
            f"read {len(records)} of the {held} records of {topic}", hint="see the log above"
        )
    print(f"\nKafka topic {topic}, as a plain Avro consumer reads it (key -> op: row):")
    for key, value in records:
        print(f"  {_record_line(key, value)}")


def _record_line(key: dict[str, Any], value: dict[str, Any] | None) -> str:
    """One record: its key, op and after-image; a delete's before-image holds only the
    key under the default replica identity, so its unsent (null) columns are left out."""
    if value is None:
        return f"{_fields(key)} -> tombstone (null value: compaction may drop the key)"
    op = value["op"]
    if value["after"] is not None:
        row = value["after"]
    else:
        row = {k: v for k, v in (value["before"] or {}).items() if v is not None}
    return f"{_fields(key)} -> {op} ({OPS.get(op, op)}): {_fields(row)}"


def _start_lake(spark: SparkSession, cfg: Config, lake: str) -> StreamingQuery:
    """One streaming query for every table topic of the bridge, a Delta table per topic."""
    from bridge.spark import apply_tables, read_changes  # noqa: PLC0415 (optional extra)

    pattern = re.escape(cfg.kafka.topic_prefix) + r"\.public\..*"
    target = f"{lake}/{{schema}}/{{table}}"
    print(f"\nlake: {lake}")
    print(f'stream = read_changes(spark, pattern=r"{pattern}", streaming=True, ...)')
    print('query = apply_tables(stream, "<lake>/{schema}/{table}", checkpoint=...)')
    stream = read_changes(
        spark,
        pattern=pattern,
        streaming=True,
        kafka_options={"kafka.bootstrap.servers": cfg.kafka.bootstrap_servers},
        registry_url=cfg.registry.url,
    )
    return apply_tables(
        stream,
        target,
        checkpoint=f"{lake}/_checkpoint",
        trigger={"processingTime": "1 second"},  # an idle query polls Kafka once a second
    )


def _verdict(conn: psycopg.Connection[Any], spark: SparkSession, lake: str, table: str) -> Verdict:
    """`table` in PostgreSQL and in its Delta table (`<lake>/public/<table>`), now."""
    from delta.tables import DeltaTable  # noqa: PLC0415 (optional extra)

    cursor = conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(table)))
    columns = tuple(c.name for c in cursor.description or ())
    pg_rows = tuple(comparable(tuple(r)) for r in cursor.fetchall())
    path = f"{lake}/public/{table}"
    if not DeltaTable.isDeltaTable(spark, path):
        return Verdict(table, columns, pg_rows, (), (), 0)
    df = spark.read.format("delta").load(path)
    delta_columns = tuple(c for c in df.columns if not c.startswith("_"))
    chosen = columns if sorted(columns) == sorted(delta_columns) else delta_columns
    live = df.where("NOT _deleted").select(*chosen).collect()
    deleted = df.where("_deleted").count()
    return Verdict(
        table,
        columns,
        pg_rows,
        delta_columns,
        tuple(comparable(tuple(r)) for r in live),
        deleted,
    )


def _show_lake(verdict: Verdict) -> None:
    if not verdict.delta_columns:
        print(f"\nDelta table public/{verdict.table}: not created")
        return
    shown = verdict.columns if verdict.same_columns else verdict.delta_columns
    print(
        f"\nDelta table public/{verdict.table} (live rows; {verdict.deleted} deleted "
        "row(s) kept with _deleted = true):"
    )
    _print_rows(shown, verdict.delta_rows)


def _judge(verdicts: dict[str, Verdict]) -> None:
    """Print MATCH or MISMATCH per table (both sides of a mismatch) and raise on one."""
    print("\nverdict, every Delta table against its PostgreSQL table:")
    for verdict in verdicts.values():
        if verdict.match:
            print(
                f"  {verdict.table}: MATCH: {len(verdict.delta_rows)} live rows, "
                f"columns {', '.join(verdict.columns)}"
            )
            continue
        if not verdict.delta_columns:
            why = "no Delta table"
        elif not verdict.same_columns:
            why = f"columns differ: Delta has {', '.join(verdict.delta_columns)}"
        else:
            why = "rows differ"
        print(f"  {verdict.table}: MISMATCH: {why}")
        print(f"  PostgreSQL {verdict.table}:")
        _print_rows(verdict.columns, verdict.pg_rows)
        _show_lake(verdict)
    failed = [v.table for v in verdicts.values() if not v.match]
    if failed:
        raise BridgeError(
            f"the Delta table(s) of {', '.join(failed)} do not match PostgreSQL",
            hint="see both sides above",
        )


def _print_rows(columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
    """An aligned table, rows in order of the first column (the key of the demo's tables)."""
    cells = [list(columns)] + [[_text(v) for v in row] for row in sorted(rows, key=lambda r: r[0])]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    for line in cells:
        print("    " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def _fields(row: dict[str, Any] | None) -> str:
    if row is None:
        return "null"
    return " ".join(f"{k}={_text(v, quote=True)}" for k, v in row.items())


def _text(value: Any, *, quote: bool = False) -> str:
    """A value as a newcomer reads it: 15.50, not Decimal('15.50')."""
    if value is None:
        return "null"
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, str) and quote:
        return repr(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def comparable(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """One form for both sides: Spark gives naive UTC datetimes and lists, PostgreSQL aware
    datetimes and lists; lists become tuples so that rows can be counted."""
    out: list[Any] = []
    for value in row:
        if isinstance(value, datetime.datetime) and value.tzinfo is not None:
            out.append(value.astimezone(datetime.UTC).replace(tzinfo=None))
        elif isinstance(value, list):
            out.append(tuple(value))
        else:
            out.append(value)
    return tuple(out)
