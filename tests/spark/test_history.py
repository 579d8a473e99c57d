"""SCD type 2 (bridge.spark.history): every version of every row, split across batches and
replayed, with a history-untracked column rewritten in place; in Delta and in Iceberg."""

from __future__ import annotations

import uuid

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from bridge.spark.history import END, START, apply_history
from bridge.spark.reader import read_changes

from .conftest import Lake
from .feed import TableFeed


def _read(spark: SparkSession, feed: TableFeed, bootstrap: str, registry_url: str) -> DataFrame:
    return read_changes(
        spark,
        [feed.topic],
        kafka_options={"kafka.bootstrap.servers": bootstrap},
        registry_url=registry_url,
    )


def test_versions_across_batches_and_replays(
    spark: SparkSession, lake: Lake, kafka_bootstrap: str, registry_url: str
) -> None:
    columns = [("id", "int4", -1), ("a", "int4", -1), ("b", "int4", -1)]
    feed = TableFeed(kafka_bootstrap, registry_url, f"h{uuid.uuid4().hex[:10]}", columns, ["id"])
    l1 = feed.commit(
        feed.insert({"id": "1", "a": "1", "b": "1"}), feed.insert({"id": "2", "a": "5", "b": "5"})
    )
    feed.commit(feed.update({"id": "1", "a": "1", "b": "2"}))  # b untracked: in place
    l3 = feed.commit(feed.update({"id": "1", "a": "2", "b": "2"}))
    l4 = feed.commit(feed.delete({"id": "2"}))
    l5 = feed.commit(feed.insert({"id": "2", "a": "6", "b": "6"}))
    path = lake.target("history")

    def apply(changes: DataFrame) -> None:
        apply_history(changes, path, ["id"], track_history_except_column_list=["b"])

    changes = _read(spark, feed, kafka_bootstrap, registry_url).persist()
    apply(changes.where(sf.col("_lsn") == l1))
    apply(changes.where(sf.col("_lsn") > l1))
    apply(changes)  # a replay of everything
    changes.unpersist()
    ends = (sf.col(f"{START}.commit_lsn"), sf.col(f"{END}.commit_lsn"))
    rows = lake.rows(path).select("id", "a", "b", *ends)
    assert sorted(tuple(r) for r in rows.collect()) == [
        (1, 1, 2, l1, l3),
        (1, 2, 2, l3, None),
        (2, 5, 5, l1, l4),
        (2, 6, 6, l5, None),
    ]
