"""`bridge verify --lake`: a Delta or Iceberg table written by the Spark apply checked
against PostgreSQL (issue 25), with the real bridge, PostgreSQL, Kafka, registry and Spark.

The bridge streams a workload (types Spark converts: numeric, timestamptz, arrays, dates;
an update, a delete, a primary-key change); `bridge.spark.apply` applies the topic to a
Delta table (a path) or an Iceberg table (of a Hadoop catalog); verify finds the lake equal.
Then the lake is changed behind the apply's back with Spark SQL (a value updated, a row
marked deleted, a row removed, a deleted row revived) and
PostgreSQL gets a row the apply has not read yet: verify reports exactly those keys, the
unapplied and the removed one as behind (still so when its --timeout ends).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from pyspark.sql import SparkSession
from running import running
from schema.live import unique

from bridge.config import Config
from bridge.lsn import LSN
from bridge.spark import apply_batch, read_changes
from bridge.spark.formats import FORMATS, TableFormat, target_table
from bridge.verify.repair import repair
from bridge.verify.report import as_json, as_table
from bridge.verify.run import Verification, await_delivered, verify
from verify.live import bridge_config

SCHEMA = """
CREATE TABLE items (id int PRIMARY KEY, amount numeric(10,2), at timestamptz, tags int[],
                    day date, body text);
CREATE TABLE signals (id text PRIMARY KEY, type text NOT NULL, data text);
"""
WORKLOAD = [
    "INSERT INTO items SELECT g, g * 1.25, '2026-01-02 03:04:05+01'::timestamptz + g *"
    " interval '1h', ARRAY[g, g + 1], '2026-03-01'::date + g, 'row ' || g"
    " FROM generate_series(1, 30) g",
    "UPDATE items SET amount = 0, day = 'infinity' WHERE id <= 5",
    "DELETE FROM items WHERE id = 7",
    "UPDATE items SET id = 107 WHERE id = 8",
]


def _apply(spark: SparkSession, cfg: Config, topic: str, target: str) -> None:
    """Everything in the topic now, applied to the lake table (the apply is idempotent)."""
    changes = read_changes(
        spark,
        [topic],
        kafka_options={"kafka.bootstrap.servers": cfg.kafka.bootstrap_servers},
        registry_url=cfg.registry.url,
    )
    apply_batch(changes, target, ["id"])


def _delivered(cfg: Config, conn: psycopg.Connection[Any]) -> None:
    row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    await_delivered(cfg, conn, int(LSN.parse(row[0])), 60)


def _items(result: Verification, table: str = "public.items") -> Any:
    (found,) = [t for t in result.tables if t.table == table]
    return found


def _lake_verdict(result: Verification) -> Any:
    """The lake's counts, differing columns and sample keys, and the Kafka counts."""
    items = _items(result)
    assert items.lake is not None
    lake = items.lake
    kafka = (items.equal, items.missing, items.ghosts, items.different)
    return dict(lake.counts), dict(lake.columns), lake.samples, kafka


@pytest.fixture
def setup(stack: Any, pg_conn: psycopg.Connection[Any], pg_db: str) -> Config:
    pg_conn.execute(SCHEMA)
    publication = unique("pub")
    pg_conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE items, signals")
    return bridge_config(stack, pg_db, publication)


@pytest.mark.parametrize("table_format", FORMATS)
def test_lake_table_checked_against_postgres(
    setup: Config,
    pg_conn: psycopg.Connection[Any],
    spark: SparkSession,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    table_format: TableFormat,
) -> None:
    cfg = setup
    target = (
        str(tmp_path / "items")
        if table_format == "delta"
        else f"{request.getfixturevalue('iceberg')}.{unique('v')}.items"
    )
    topic = f"{cfg.kafka.topic_prefix}.public.items"
    lake = {"public.items": target}
    with running(cfg) as bridge:
        for statement in WORKLOAD:
            pg_conn.execute(statement)
        _delivered(cfg, pg_conn)
        _apply(spark, cfg, topic, target)
        clean = verify(cfg, ["public.items"], timeout=60, delta=lake, spark=spark)
        in_spark_clean = verify(
            cfg, ["public.items"], timeout=60, delta=lake, spark=spark, distributed=True
        )
        bridge.check()

        table = target_table(spark, target)  # its SQL name and the soft-delete column's
        deleted = table.col("_deleted")
        spark.sql(f"UPDATE {table.sql} SET amount = 42 WHERE id = 3")
        spark.sql(f"UPDATE {table.sql} SET {deleted} = true WHERE id = 4")  # position kept
        spark.sql(f"DELETE FROM {table.sql} WHERE id = 6")  # gone: as if never applied
        spark.sql(f"UPDATE {table.sql} SET {deleted} = false WHERE id = 7")  # delete undone
        pg_conn.execute("INSERT INTO items (id, amount) VALUES (200, 1)")  # not applied yet
        _delivered(cfg, pg_conn)  # in Kafka: verify's short --timeout is the lake's alone
        found = verify(cfg, ["public.items"], timeout=3, delta=lake, spark=spark)
        in_spark = verify(
            cfg, ["public.items"], timeout=3, delta=lake, spark=spark, distributed=True
        )
        bridge.check()

    # --spark --delta: the bucketed comparison with the lake as the other side finds the same
    assert _lake_verdict(in_spark_clean) == _lake_verdict(clean)
    assert _lake_verdict(in_spark) == _lake_verdict(found)
    assert in_spark.ok is False and _items(in_spark).equal == 30

    items = _items(clean)
    assert clean.ok, as_json(clean)
    assert items.lake is not None
    assert dict(items.lake.counts) == {"equal": 29}  # 30 inserted, one deleted, one moved
    assert items.lake.format == table_format
    pinned = items.lake.version

    items = _items(found)
    assert items.equal == 30 and items.ok is False  # Kafka holds every row: the lake differs
    assert items.lake is not None
    assert dict(items.lake.counts) == {
        "equal": 26,
        "different": 1,
        "missing": 1,
        "ghost": 1,
        "behind": 2,
    }
    assert dict(items.lake.columns) == {"amount": 1}
    assert items.lake.samples == {
        "different": ['{"id": 3}'],
        "missing": ['{"id": 4}'],
        "ghost": ['{"id": 7}'],
        "behind": ['{"id": 6}', '{"id": 200}'],  # in key order
    }
    assert items.lake.version != pinned  # the newest version (snapshot) since the changes
    name = {"delta": "Delta", "iceberg": "Iceberg"}[table_format]
    assert f"public.items: {name} table {target}" in as_table(found)


def test_repair_reemits_what_differs_only_in_the_lake(
    setup: Config, pg_conn: psycopg.Connection[Any], spark: SparkSession, tmp_path: Path
) -> None:
    """Rows changed in the lake behind the apply's back while Kafka holds them right: verify
    --delta finds them, --repair re-emits them through the topic (a changed and a deleted
    row re-read, a revived row deleted again), and once the apply has run the lake equals
    PostgreSQL. --spark --delta brings back the same keys to fix; the repair acts on
    those."""
    cfg = setup
    path = str(tmp_path / "items")
    topic = f"{cfg.kafka.topic_prefix}.public.items"
    lake = {"public.items": path}
    with running(cfg) as bridge:
        for statement in WORKLOAD:
            pg_conn.execute(statement)
        _delivered(cfg, pg_conn)
        _apply(spark, cfg, topic, path)
        table = target_table(spark, path).sql
        spark.sql(f"UPDATE {table} SET amount = 42 WHERE id = 3")
        spark.sql(f"UPDATE {table} SET _deleted = true WHERE id = 4")
        spark.sql(f"UPDATE {table} SET _deleted = false WHERE id = 7")  # deleted in PostgreSQL
        found = verify(cfg, ["public.items"], timeout=60, delta=lake, spark=spark)
        in_spark = verify(
            cfg,
            ["public.items"],
            timeout=60,
            delta=lake,
            spark=spark,
            distributed=True,
            keys_for_repair=True,
        )
        done = repair(cfg, in_spark, timeout=120)  # what --spark found: the same keys
        _delivered(cfg, pg_conn)
        _apply(spark, cfg, topic, path)  # the apply's next run
        again = verify(cfg, ["public.items"], timeout=60, delta=lake, spark=spark)
        again_in_spark = verify(
            cfg, ["public.items"], timeout=60, delta=lake, spark=spark, distributed=True
        )
        bridge.check()

    def to_fix(result: Verification) -> Any:
        found = _items(result)
        ghosts = {k: (v.partition, v.raw_key) for k, v in found.ghost_keys.items()}
        return sorted(found.reread_keys), ghosts, found.lake_left

    assert to_fix(in_spark) == to_fix(found)
    assert _lake_verdict(in_spark) == _lake_verdict(found)
    assert again_in_spark.ok, as_json(again_in_spark)

    items = _items(found)
    assert (items.equal, items.missing, items.ghosts, items.different) == (29, 0, 0, 0)
    assert items.lake is not None and not items.ok
    assert dict(items.lake.counts) == {"equal": 27, "different": 1, "missing": 1, "ghost": 1}
    assert sorted(items.reread_keys) == [("3",), ("4",)]
    assert [items.decoder.show_key(k) for k in items.ghost_keys] == ['{"id": 7}']
    assert (done.reread, done.deleted, done.skipped, done.lake_left) == (2, 1, 0, 0)
    assert again.ok, as_json(again)
    assert _items(again).lake is not None
    assert dict(_items(again).lake.counts) == {"equal": 29}


def test_a_column_retyped_int_to_text_is_followed_by_verify_and_the_lake(
    stack: Any,
    pg_conn: psycopg.Connection[Any],
    pg_db: str,
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    """Default settings: ALTER COLUMN TYPE int -> text, refused under BACKWARD, moves the
    value subject to `-v2` and the bridge streams on. Verify (by itself and --spark) reads
    both generations; the Spark apply's Delta table (--lake) follows the retype. Rows the
    rewrite did not send differ in the topic (their records hold the int) and equal
    PostgreSQL in the lake (the apply cast them, as PostgreSQL did); once sent again,
    everything is equal."""
    pg_conn.execute(
        "CREATE TABLE retyped (id int PRIMARY KEY, n int);"
        "CREATE TABLE signals (id text PRIMARY KEY, type text NOT NULL, data text)"
    )
    publication = unique("pub")
    pg_conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE retyped, signals")
    cfg = bridge_config(stack, pg_db, publication)
    assert cfg.registry.on_incompatible == "new_subject"
    topic = f"{cfg.kafka.topic_prefix}.public.retyped"
    subject = f"{topic}-value"
    path = str(tmp_path / "retyped")
    lake, tables = {"public.retyped": path}, ["public.retyped"]
    client = SchemaRegistryClient({"url": cfg.registry.url})
    with running(cfg) as bridge:
        pg_conn.execute("INSERT INTO retyped SELECT g, g * 10 FROM generate_series(1, 4) g")
        _delivered(cfg, pg_conn)
        client.set_compatibility(subject_name=subject, level="BACKWARD")
        _apply(spark, cfg, topic, path)
        pg_conn.execute("ALTER TABLE retyped ALTER COLUMN n TYPE text")
        pg_conn.execute("UPDATE retyped SET n = n || ' as text' WHERE id <= 2")
        pg_conn.execute("INSERT INTO retyped VALUES (5, 'five')")
        pg_conn.execute("DELETE FROM retyped WHERE id = 4")
        _delivered(cfg, pg_conn)
        _apply(spark, cfg, topic, path)
        partly = verify(cfg, tables, timeout=60, delta=lake, spark=spark)
        pg_conn.execute("UPDATE retyped SET n = n WHERE id = 3")  # sent again, as text
        _delivered(cfg, pg_conn)
        _apply(spark, cfg, topic, path)
        clean = verify(cfg, tables, timeout=60, delta=lake, spark=spark)
        in_spark = verify(cfg, tables, timeout=60, delta=lake, spark=spark, distributed=True)
        bridge.check()
    assert client.get_versions(subject) == [1]
    assert client.get_versions(f"{subject}-v2") == [1]
    found = _items(partly, "public.retyped")
    assert (found.equal, found.missing, found.ghosts, found.different) == (3, 0, 0, 1)
    assert found.samples == {"different": ['{"id": 3}']}
    assert found.lake is not None and dict(found.lake.counts) == {"equal": 4}
    for result in (clean, in_spark):
        assert result.ok, as_json(result)
        done = _items(result, "public.retyped")
        assert (done.equal, done.missing, done.ghosts, done.different) == (4, 0, 0, 0)
        assert done.lake is not None and dict(done.lake.counts) == {"equal": 4}
