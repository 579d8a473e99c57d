"""bridge.spark.initial_load: a Spark load inside the snapshot the bridge holds
(snapshot.mode: external), handed over to the streamed changes.

The bridge runs for real (slot, held snapshot, stream into Kafka); Spark's executors read
PostgreSQL in key-range tasks while a writer keeps changing the table; the stream is then
applied over the loaded tables. The target must equal the source, a re-apply must change
nothing, and every loaded value must be exactly what the stream carries for that row. Once
into Delta tables (200,000 rows), once into Iceberg tables of a catalog (fewer rows: the
same tasks and hand-over, a shorter run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf
from running import start
from schema.live import unique
from snapshot.helpers import TopicReader, Writer, keyed_state, make_table, settings, table_state
from waiting import wait_for

from bridge.config import Config
from bridge.errors import SourceError
from bridge.snapshot.external import held_snapshot, open_external_load, read_task
from bridge.snapshot.store import store_of
from bridge.spark.apply import TARGET_META, apply_batch, apply_changes
from bridge.spark.initial_load import LOADED_OFFSET, initial_load
from bridge.spark.reader import read_changes

from .conftest import Lake

ROWS = {"delta": 200_000, "iceberg": 50_000}  # the items table's rows, per format
TASKS = 8  # key ranges of ROWS / TASKS rows, and the open-ended one after the last boundary
KINDS = 300
NOTE = "a long TOASTed note " * 200

KINDS_DDL = """
CREATE TABLE kinds (
    id int PRIMARY KEY, amount numeric(12, 2), n numeric, ts timestamptz, t timestamp,
    tm time, iv interval, d date, u uuid, tags int[], doc jsonb, note text
)"""
KINDS_ROWS = """
INSERT INTO kinds SELECT g, g / 7.0, g * 1.000001, '2024-01-02 03:04:05.123456+00'::timestamptz
    + g * interval '1 day', '2024-02-29 23:59:59.999999'::timestamp - g * interval '1 hour',
    '04:05:06.789'::time + g * interval '1 second', make_interval(0, g, 0, g, 0, 0, 0.5),
    CASE WHEN g %% 50 = 0 THEN 'infinity'::date ELSE '2000-01-01'::date + g END,
    md5(g::text)::uuid, ARRAY[g, NULL, -g], jsonb_build_object('g', g),
    CASE WHEN g %% 3 = 0 THEN NULL ELSE %s::text || g END
FROM generate_series(1, %s) g"""


@pytest.fixture
def cfg(
    stack: Any,
    pg_db: str,
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
    lake: Lake,
) -> Config:
    return Config(
        **settings(
            stack,
            pg_db,
            slot_name,
            publication_name,
            topic_prefix,
            tmp_path / "spill",
            mode="external",
            chunk_size=ROWS[lake.format] // TASKS,
        )
    )


def _data(lake: Lake, target: str) -> list[Any]:
    """The target's rows without the position columns, in key order."""
    df = lake.rows(target).where(~sf.col("_deleted"))
    return df.drop(*TARGET_META).orderBy("id").collect()


def _digest(lake: Lake, target: str) -> tuple[int, int]:
    """(rows, sum of a 40-bit hash of each row's id, v, s) of the target's live rows: the
    table's equality with PostgreSQL without moving 200,000 rows into Python."""
    df = lake.rows(target).where(~sf.col("_deleted"))
    row_hash = sf.conv(
        sf.substring(
            sf.md5(sf.concat_ws("|", *(sf.col(c).cast("string") for c in ("id", "v", "s")))), 1, 10
        ),
        16,
        10,
    )
    found = df.agg(sf.count("*"), sf.sum(row_hash.cast("bigint"))).first()
    assert found is not None
    return int(found[0]), int(found[1] or 0)


PG_DIGEST = (
    "SELECT count(*), coalesce(sum(('x' || substr(md5(concat_ws('|', id, v, s)), 1, 10))"
    "::bit(40)::bigint), 0) FROM items"
)


def _same_as_table(lake: Lake, target: str, conn: psycopg.Connection[Any]) -> None:
    row = conn.execute(PG_DIGEST).fetchone()
    assert row is not None
    if _digest(lake, target) != (row[0], row[1]):  # only then: which rows differ
        rows = {r["id"]: r.asDict() for r in _data(lake, target)}
        table = table_state(conn, "items")
        differ = sorted(k for k in rows.keys() | table.keys() if rows.get(k) != table.get(k))
        raise AssertionError(
            f"{len(differ)} rows differ, e.g. "
            + ", ".join(f"{k}: lake {rows.get(k)} table {table.get(k)}" for k in differ[:5])
        )


# 200,000 rows (Delta) through Python encoding, a streaming apply and a re-apply on two
# shared cores: minutes, beyond the suite's default limit when the machine is busy.
@pytest.mark.timeout(1500)
def test_load_hands_over_to_the_stream(
    spark: SparkSession,
    stack: Any,
    cfg: Config,
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    topic_prefix: str,
    tmp_path: Path,
    lake: Lake,
) -> None:
    rows = ROWS[lake.format]
    make_table(pg_conn, "items", rows)
    pg_conn.execute(KINDS_DDL)
    pg_conn.execute(KINDS_ROWS, (NOTE, KINDS))
    items, kinds = f"{topic_prefix}.public.items", f"{topic_prefix}.public.kinds"
    items_path, kinds_path = lake.target(unique("items")), lake.target(unique("kinds"))
    kafka = {"kafka.bootstrap.servers": stack.kafka_bootstrap}
    bridge = start(cfg)  # creates the slot, holds its snapshot, streams
    writer = Writer(pg_dsn, "items", rows, rate=100).start()
    try:
        writer.wait_transactions(10)  # changes after the hand-over LSN, before the load
        wait_for(lambda: _held(cfg), 120, "the bridge to record the snapshot it holds")
        load = open_external_load(cfg)
        assert len(load.tables()) == 2
        assert sum(len(t.tasks) for t in load.tables() if t.topic == items) == TASKS + 1
        before = writer.transactions
        written = initial_load(
            spark,
            load,
            {items: items_path, kinds: kinds_path},
            registry_url=stack.registry_url,
        )
        during = writer.transactions - before
    finally:
        writer.stop()
    assert written == {items_path: rows, kinds_path: KINDS}  # the rows at the hand-over LSN
    assert during > 0, "the writer must keep writing while the load runs"
    loaded = lake.rows(items_path)
    positions = loaded.select("_lsn", "_offset").distinct().collect()
    assert [(r["_lsn"], r["_offset"]) for r in positions] == [(load.lsn, LOADED_OFFSET)]
    kinds_loaded = _data(lake, kinds_path)

    # Every kinds row once more through the stream: its values must equal the loaded ones
    # (the note column is an unchanged TOASTed value there: kept from the load).
    pg_conn.execute("UPDATE kinds SET id = id")
    pg_conn.execute("INSERT INTO items VALUES (-1, 0, 'last')")  # the last change
    items_reader = TopicReader(stack.kafka_bootstrap, stack.registry_url, items)
    kinds_reader = TopicReader(stack.kafka_bootstrap, stack.registry_url, kinds)
    try:
        wait_for(lambda: -1 in keyed_state(items_reader.read()), 120, "the last change")
        wait_for(lambda: len(kinds_reader.read()) >= KINDS, 60, "the kinds updates")
    finally:
        items_reader.close()
        kinds_reader.close()
    # The snapshot is released once the load is recorded as done.
    with pytest.raises(SourceError, match="already recorded as done"):
        open_external_load(cfg)
    task = next(t for t in load.tables() if t.topic == kinds).tasks[0]
    wait_for(
        lambda: _released(read_task, cfg, load.snapshot_name, task), 30, "the release", every=0.5
    )
    bridge.stop()

    stream = read_changes(
        spark, [items], kafka_options=kafka, registry_url=stack.registry_url, streaming=True
    )
    query = apply_changes(
        stream,
        items_path,
        ["id"],
        checkpoint=str(tmp_path / "chk"),
        trigger={"availableNow": True},
    )
    assert query is not None
    query.awaitTermination()
    _same_as_table(lake, items_path, pg_conn)
    lsns = lake.rows(items_path).agg(sf.max("_lsn")).first()
    assert lsns is not None and lsns[0] > load.lsn

    # Applying the whole topic again changes nothing: every change is at or below a row's
    # position already.
    commits = lake.commits(items_path)
    apply_batch(
        read_changes(spark, [items], kafka_options=kafka, registry_url=stack.registry_url),
        items_path,
        ["id"],
    )
    lake.unchanged_since(items_path, commits)
    _same_as_table(lake, items_path, pg_conn)

    apply_batch(
        read_changes(spark, [kinds], kafka_options=kafka, registry_url=stack.registry_url),
        kinds_path,
        ["id"],
    )
    streamed = lake.rows(kinds_path)
    assert streamed.where(sf.col("_lsn") <= int(load.lsn)).count() == 0  # every row came again
    assert _data(lake, kinds_path) == kinds_loaded


def _held(cfg: Config) -> bool:
    """Whether the bridge has recorded its held snapshot (its thread does it after the slot
    exists)."""
    store = store_of(cfg)
    try:
        held_snapshot(store)
    except SourceError as exc:
        if "no snapshot is held" not in str(exc):
            raise
        return False
    finally:
        store.close()
    return True


def _released(read: Any, cfg: Config, name: str, task: Any) -> bool:
    try:
        read(cfg, name, 0, task)
    except SourceError as exc:
        assert "no longer held" in str(exc)
        return True
    return False
