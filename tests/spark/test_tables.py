"""bridge.spark.tables: one streaming query applies every table of a topic pattern, and a Spark
driver killed inside a micro-batch loses and duplicates nothing.

The real bridge captures two PostgreSQL tables (an int key, a composite key)
through inserts, updates, deletes, a primary-key change and transactions across tables. A driver
in its own process runs `apply_tables` and is killed (its whole process group, JVM included)
after its micro-batch applied one of the two tables; the query restarted from the checkpoint
in this process re-runs that batch and finishes, every table equals its PostgreSQL table,
and the table the killed batch had reached is as the kill left it (Delta's history,
Iceberg's snapshots). Both formats, Delta tables by path and Iceberg tables of a catalog.
The same workload streamed into Iceberg tables ends equal too, and the whole backlog
applied again as one micro-batch changes nothing in either table.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession
from running import running
from schema.live import bridge_config, unique, wait_delivered
from waiting import wait_for

from bridge.spark.formats import target_table
from bridge.spark.reader import ChangeStream, read_changes
from bridge.spark.tables import TableOptions, apply_tables, apply_tables_batch

from .conftest import Lake

DDL = [
    "CREATE TABLE orders (id int PRIMARY KEY, customer text, amount numeric(10,2))",
    "CREATE TABLE lines (region text, n int, qty int, PRIMARY KEY (region, n))",
]
WORKLOAD = [
    "INSERT INTO orders SELECT i, 'c' || i, i * 1.5 FROM generate_series(1, 60) i",
    "INSERT INTO lines SELECT r, n, n FROM unnest(ARRAY['eu','us']) r, generate_series(1, 30) n",
    "BEGIN; UPDATE orders SET amount = amount + 1 WHERE id % 3 = 0;"
    " UPDATE lines SET qty = qty * 10 WHERE n % 5 = 0; COMMIT",
    "DELETE FROM orders WHERE id % 4 = 0",
    "UPDATE orders SET id = 1000 WHERE id = 7",
    "BEGIN; DELETE FROM lines WHERE region = 'us' AND n > 25;"
    " INSERT INTO lines VALUES ('us', 26, 99); UPDATE orders SET customer = NULL WHERE id = 5;"
    " COMMIT",
    "INSERT INTO orders VALUES (8, 'back', 0)",
]
TABLES = ("lines", "orders")


def _rows(conn: psycopg.Connection[Any], table: str) -> set[tuple[Any, ...]]:
    return {tuple(r) for r in conn.execute(f"SELECT * FROM {table}").fetchall()}


@pytest.fixture(scope="module")
def captured(stack: Any) -> Iterator[tuple[str, dict[str, set[tuple[Any, ...]]]]]:
    """The workload made by the real bridge: (topic prefix, PostgreSQL's final rows)."""
    dbname, prefix = unique("tables"), unique("mt")
    stack.create_database(dbname)
    try:
        with psycopg.connect(stack.dsn(dbname), autocommit=True) as conn:
            for ddl in DDL:
                conn.execute(ddl)
            cfg = bridge_config(stack, dbname, prefix=prefix)
            with running(cfg) as bridge:
                for statement in WORKLOAD:
                    conn.execute(statement)
                wait_delivered(bridge, conn, cfg)
            yield prefix, {t: _rows(conn, t) for t in TABLES}
    finally:
        stack.drop_database(dbname)


def _live(lake: Lake, target: str) -> set[tuple[Any, ...]]:
    """The table's rows that are not deleted, without the apply's columns; none while the
    table does not exist."""
    if not target_table(lake.spark, target, lake.format).exists():
        return set()
    df = lake.rows(target)
    columns = [c for c in df.columns if not c.startswith("_")]
    return {tuple(r) for r in df.where("NOT _deleted").select(*columns).collect()}


# Two Spark drivers one after the other: about ten minutes on a 2-core machine shared with
# other work (load ~20), where the suite's 600 s default cut the final check short.
@pytest.mark.timeout(1200)
def test_driver_killed_mid_batch_loses_and_duplicates_nothing(
    spark: SparkSession,
    stack: Any,
    captured: tuple[str, dict[str, set[tuple[Any, ...]]]],
    lake: Lake,
    tmp_path: Path,
) -> None:
    prefix, expected = captured
    assert (1000, "c7", Decimal("10.50")) in expected["orders"]
    checkpoint, marker = str(tmp_path / "chk"), tmp_path / "marker"
    pattern = re.escape(prefix) + r"\.public\..*"
    target = lake.target(unique("kill") + "_{table}")  # Iceberg's catalog: the format follows
    lines, orders = (target.format(table=t) for t in TABLES)
    args = {
        "bootstrap": stack.kafka_bootstrap,
        "registry": stack.registry_url,
        "pattern": pattern,
        "target": target,
        "checkpoint": checkpoint,
        "marker": str(marker),
        "conf": {"spark.sql.warehouse.dir": str(tmp_path / "warehouse"), **lake.conf()},
    }
    child = Path(__file__).with_name("tables_child.py")
    with (tmp_path / "driver.log").open("w") as log:
        driver = subprocess.Popen(
            [sys.executable, str(child), json.dumps(args)],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            start_new_session=True,
        )
        try:

            def stopped() -> bool:
                if driver.poll() is not None:
                    raise AssertionError(
                        "the driver ended by itself:\n" + (tmp_path / "driver.log").read_text()
                    )
                return marker.is_file() and marker.stat().st_size > 0

            wait_for(stopped, 300, "the driver to apply one table of its micro-batch")
        finally:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    killed = json.loads(marker.read_text())
    assert killed["applied"] == [lines]  # topics in name order
    assert _live(lake, lines) == expected["lines"]
    assert not target_table(spark, orders, lake.format).exists()
    before = lake.commits(lines)

    stream = read_changes(
        spark,
        pattern=pattern,
        kafka_options={"kafka.bootstrap.servers": stack.kafka_bootstrap},
        registry_url=stack.registry_url,
        streaming=True,
    )
    assert isinstance(stream, ChangeStream)
    query = apply_tables(stream, target, checkpoint=checkpoint, trigger={"availableNow": True})
    assert query.awaitTermination(300)
    assert query.exception() is None
    assert query.recentProgress[0]["batchId"] == killed["batch"]
    for table in TABLES:
        assert _live(lake, target.format(table=table)) == expected[table], table
    lake.unchanged_since(lines, before)  # the killed batch, applied to its table again


def test_tables_stream_into_iceberg_and_a_rerun_changes_nothing(
    spark: SparkSession,
    stack: Any,
    iceberg: str,
    captured: tuple[str, dict[str, set[tuple[Any, ...]]]],
    tmp_path: Path,
) -> None:
    prefix, expected = captured
    namespace = f"{iceberg}.{unique('mt')}"
    lake = Lake(spark, "iceberg", tmp_path, namespace)
    pattern = re.escape(prefix) + r"\.public\..*"
    kafka = {"kafka.bootstrap.servers": stack.kafka_bootstrap}
    stream = read_changes(
        spark, pattern=pattern, kafka_options=kafka, registry_url=stack.registry_url, streaming=True
    )
    assert isinstance(stream, ChangeStream)
    target = namespace + ".{table}"  # an Iceberg catalog's table: the format follows
    once = {"availableNow": True}
    query = apply_tables(stream, target, checkpoint=str(tmp_path / "chk"), trigger=once)
    assert query.awaitTermination(300)
    assert query.exception() is None
    for table in TABLES:
        assert _live(lake, f"{namespace}.{table}") == expected[table], table
    stored = {t: set(spark.table(f"{namespace}.{t}").collect()) for t in TABLES}

    raw = (
        spark.read.format("kafka")
        .options(**kafka, subscribePattern=pattern, includeHeaders="true")
        .option("startingOffsets", "earliest")
        .load()
        .persist()
    )
    apply_tables_batch(stream.decoder, raw, target, {}, TableOptions(), table_format="iceberg")
    raw.unpersist()
    # every row as it was, positions and soft deletes included: no change applied twice
    assert {t: set(spark.table(f"{namespace}.{t}").collect()) for t in TABLES} == stored
