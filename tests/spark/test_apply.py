"""bridge.spark.apply: the bridge's records, read back by Spark, MERGEd into Delta and Iceberg
tables (the `lake` fixture runs the tests built on `applied` once per format).

One scenario covers the hard cases: a TRUNCATE, an unchanged-TOAST update, a delete and
re-insert, a primary-key change, two changes of one key in one transaction, and a second
schema version (added column). Every way of applying it must end in the same table.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from bridge.spark.apply import apply_batch, apply_changes
from bridge.spark.reader import ChangeStream, read_changes

from .conftest import Lake
from .feed import UNCHANGED, TableFeed, numeric_typmod

COLUMNS = [
    ("id", "int4", -1),
    ("name", "text", -1),
    ("amount", "numeric", numeric_typmod(10, 2)),
    ("ts", "timestamptz", -1),
    ("u", "uuid", -1),
    ("tags", "int4[]", -1),
    ("doc", "jsonb", -1),
    ("note", "text", -1),
    ("d", "date", -1),
    ("iv", "interval", -1),
    ("tm", "time", -1),
]
NOTE = "a long TOASTed text " * 200
UUID = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
FULL = {
    "id": "1",
    "name": "one-0",
    "amount": "12.34",
    "ts": "2024-01-02 03:04:05.123456+00",
    "u": UUID,
    "tags": "{1,NULL,3}",
    "doc": '{"k": [1, 2]}',
    "note": NOTE,
    "d": "2024-02-29",
    "iv": "1 year 2 mons 3 days 04:05:06.5",
    "tm": "04:05:06.789",
}
TYPES = {
    "id": "int",
    "amount": "decimal(10,2)",
    "ts": "timestamp",
    "u": "string",
    "tags": "array<int>",
    "doc": "string",
    "d": "date",
    "iv": "struct<months:int,days:int,micros:bigint>",
    "tm": "bigint",
    "extra": "bigint",
    "_lsn": "bigint",
    "_deleted": "boolean",
}


def _row(**values: Any) -> dict[str, Any]:
    names = [c for c, _, _ in COLUMNS if c != "id"] + ["extra"]
    return {name: values.get(name) for name in names}


EXPECTED_LIVE = {
    1: _row(
        name="one",
        amount=Decimal("12.34"),
        ts=1_704_164_645_123_456,
        u=UUID,
        tags=[1, None, 3],
        doc='{"k": 2}',
        note=NOTE,
        d=dt.date(2024, 2, 29),
        iv={"months": 14, "days": 3, "micros": 14_706_500_000},
        tm=14_706_789_000,
        extra=7,
    ),
    2: _row(name="two-again"),
    30: _row(name="three", note="n3"),
    4: _row(name="d3", note="n4"),
    5: _row(name="five", extra=42),
    101: _row(name="new"),
}
EXPECTED_SOFT_DELETED = {3}  # 100 went with the TRUNCATE: truncated rows are removed


def scenario(feed: TableFeed) -> list[Callable[[], object]]:
    """The transactions, one callable each (so a test can replay part of them)."""
    return [
        lambda: feed.commit(feed.insert({"id": "100"}), feed.insert({"id": "101", "name": "x"})),
        lambda: feed.commit(feed.truncate()),
        lambda: feed.commit(
            feed.insert(FULL),
            feed.insert({"id": "2", "name": "two"}),
            feed.insert({"id": "3", "name": "three", "note": "n3"}),
        ),
        lambda: feed.commit(feed.update({**FULL, "name": "one", "note": UNCHANGED})),
        lambda: feed.commit(feed.delete({"id": "2"})),
        lambda: feed.commit(
            feed.update({"id": "30", "name": "three", "note": "n3"}, old_key={"id": "3"})
        ),
        lambda: feed.commit(
            feed.insert({"id": "4", "name": "d1", "note": "n4"}),
            feed.update({"id": "4", "name": "d2", "note": "n4"}),
        ),
        lambda: feed.commit(feed.insert({"id": "101", "name": "new"})),
        lambda: feed.add_column("extra", "int8"),
        lambda: feed.commit(
            feed.insert({"id": "5", "name": "five-0"}),
            feed.update(
                {**FULL, "name": "one", "doc": '{"k": 2}', "note": UNCHANGED, "extra": "7"}
            ),
            feed.update({"id": "5", "name": "five", "extra": "42"}),
        ),
        lambda: feed.commit(feed.insert({"id": "2", "name": "two-again"})),
        lambda: feed.commit(feed.update({"id": "4", "name": "d3", "note": UNCHANGED})),
    ]


def _feed(bootstrap: str, registry_url: str) -> TableFeed:
    return TableFeed(bootstrap, registry_url, f"a{uuid.uuid4().hex[:10]}", COLUMNS, ["id"])


def _read(spark: SparkSession, feed: TableFeed, bootstrap: str, registry_url: str) -> DataFrame:
    return read_changes(
        spark,
        [feed.topic],
        kafka_options={"kafka.bootstrap.servers": bootstrap},
        registry_url=registry_url,
    )


def _state(table: DataFrame) -> tuple[dict[int, dict[str, Any]], set[int]]:
    rows = table.withColumn("ts", sf.unix_micros("ts")).collect()
    live = {
        r["id"]: {k: v for k, v in r.asDict(recursive=True).items() if k[0] != "_" and k != "id"}
        for r in rows
        if not r["_deleted"]
    }
    return live, {r["id"] for r in rows if r["_deleted"]}


@pytest.fixture(scope="module")
def applied(
    spark: SparkSession, lake: Lake, kafka_bootstrap: str, registry_url: str
) -> tuple[TableFeed, str]:
    """The scenario produced once and applied with one batch MERGE, in the lake's format."""
    feed = _feed(kafka_bootstrap, registry_url)
    for step in scenario(feed):
        step()
    target = lake.target("batch")
    apply_batch(_read(spark, feed, kafka_bootstrap, registry_url), target, ["id"])
    return feed, target


def test_batch_apply_reaches_the_final_state(lake: Lake, applied: tuple[TableFeed, str]) -> None:
    _, target = applied
    assert _state(lake.rows(target)) == (EXPECTED_LIVE, EXPECTED_SOFT_DELETED)
    types = dict(lake.rows(target).dtypes)
    assert {name: types[name] for name in TYPES} == TYPES


def test_reapplying_the_whole_topic_changes_nothing(
    spark: SparkSession,
    lake: Lake,
    applied: tuple[TableFeed, str],
    kafka_bootstrap: str,
    registry_url: str,
) -> None:
    feed, target = applied
    before = sorted(lake.rows(target).collect(), key=lambda r: r["id"])
    apply_batch(_read(spark, feed, kafka_bootstrap, registry_url), target, ["id"])
    # every row as it was, positions (`_lsn`, `_offset`, `_seq`) and soft deletes included
    assert sorted(lake.rows(target).collect(), key=lambda r: r["id"]) == before
    assert _state(lake.rows(target)) == (EXPECTED_LIVE, EXPECTED_SOFT_DELETED)
    if lake.format == "iceberg":
        return  # a copy-on-write MERGE rewrites the files it matched: no metrics to compare
    last = DeltaTable.forPath(spark, target).history(1).collect()[0]
    assert last["operation"] == "MERGE"
    changed = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
    assert {m: last["operationMetrics"][m] for m in changed} == dict.fromkeys(changed, "0")


def test_changes_split_across_applies(
    spark: SparkSession,
    lake: Lake,
    applied: tuple[TableFeed, str],
    kafka_bootstrap: str,
    registry_url: str,
) -> None:
    """Batch boundaries right after key 5's insert (its update shares the commit LSN) and
    key 1's insert (its updates leave the TOASTed note unsent) give the same table."""
    feed, _ = applied
    changes = _read(spark, feed, kafka_bootstrap, registry_url).persist()
    firsts = changes.where(sf.col("op") == "c").groupBy("id").agg(sf.min("_offset").alias("o"))
    cuts = sorted({r["o"] for r in firsts.where(sf.col("id").isin(1, 5)).collect()})
    target = lake.target("split")
    offset, low = sf.col("_offset"), -1
    for cut in [*cuts, 1 << 62]:
        apply_batch(changes.where((offset > low) & (offset <= cut)), target, ["id"])
        low = cut
    changes.unpersist()
    assert _state(lake.rows(target)) == (EXPECTED_LIVE, EXPECTED_SOFT_DELETED)


def test_hard_delete_removes_rows_of_a_named_table(
    spark: SparkSession,
    lake: Lake,
    applied: tuple[TableFeed, str],
    kafka_bootstrap: str,
    registry_url: str,
) -> None:
    feed, _ = applied
    changes = _read(spark, feed, kafka_bootstrap, registry_url)
    name = lake.named("items_hard")
    apply_batch(changes, name, ["id"], hard_delete=True, table_format=lake.format)
    assert _state(lake.rows(name)) == (EXPECTED_LIVE, set())


def test_duplicated_records_change_nothing(
    spark: SparkSession, spark_dir: Path, kafka_bootstrap: str, registry_url: str
) -> None:
    """A restart from an older acknowledged LSN re-produces transactions the topic has."""
    feed = _feed(kafka_bootstrap, registry_url)
    steps = scenario(feed)
    for step in steps[:10]:
        step()
    feed.send(feed.produced[2:])  # everything after the first two transactions, again
    feed.flush()
    for step in steps[10:]:
        step()
    path = str(spark_dir / "duplicates")
    apply_batch(_read(spark, feed, kafka_bootstrap, registry_url), path, ["id"])
    assert _state(spark.read.format("delta").load(path)) == (EXPECTED_LIVE, EXPECTED_SOFT_DELETED)


def test_streaming_apply_with_small_micro_batches(
    spark: SparkSession,
    lake: Lake,
    applied: tuple[TableFeed, str],
    spark_dir: Path,
    kafka_bootstrap: str,
    registry_url: str,
) -> None:
    """Transactions split across micro-batches and partitions still end in the same table;
    a restart from the checkpoint finds nothing new."""
    feed, _ = applied
    target, checkpoint = lake.target("stream"), str(spark_dir / f"checkpoint-{lake.format}")

    def run() -> list[int]:
        stream = read_changes(
            spark,
            [feed.topic],
            kafka_options={
                "kafka.bootstrap.servers": kafka_bootstrap,
                "maxOffsetsPerTrigger": "8",
            },
            registry_url=registry_url,
            tombstones="keep",
            streaming=True,
        )
        assert isinstance(stream, ChangeStream)
        query = apply_changes(
            stream, target, ["id"], checkpoint=checkpoint, trigger={"availableNow": True}
        )
        assert query is not None
        assert query.awaitTermination(180)
        assert query.exception() is None
        return [p["numInputRows"] for p in query.recentProgress]

    first = run()
    assert len([n for n in first if n]) >= 3 and sum(first) == len(feed.produced)
    assert _state(lake.rows(target)) == (EXPECTED_LIVE, EXPECTED_SOFT_DELETED)
    assert sum(run()) == 0
    assert _state(lake.rows(target)) == (EXPECTED_LIVE, EXPECTED_SOFT_DELETED)
