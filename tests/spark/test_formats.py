"""bridge.spark.formats: which format a target is, the initial load's one-commit replace,
in Delta and in Iceberg, and an Iceberg target as of its newest commit."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf
from schema.live import unique

from bridge.errors import ConfigError
from bridge.spark.apply import TRUNCATED_PROPERTY, _truncate, _truncated_lsn
from bridge.spark.formats import target_table

from .conftest import Lake


def test_an_iceberg_target_is_a_catalog_table() -> None:
    spark = cast(SparkSession, object())  # refused before the session is asked anything
    with pytest.raises(ConfigError, match="an Iceberg target is a catalog table, not a path"):
        target_table(spark, "/lake/items", "iceberg")
    with pytest.raises(ConfigError, match="unknown table_format 'hudi'"):
        target_table(spark, "db.items", "hudi")  # type: ignore[arg-type]


def test_the_catalog_decides_the_format(spark: SparkSession, iceberg: str) -> None:
    assert target_table(spark, f"{iceberg}.db.items").format == "iceberg"
    assert target_table(spark, "/lake/items").format == "delta"
    assert target_table(spark, "s3a://bucket/lake.items").format == "delta"
    assert target_table(spark, "db.items").format == "delta"  # spark_catalog: Delta's
    assert target_table(spark, f"{iceberg}.db.items", "delta").format == "delta"


def test_replace_writes_one_commit_and_the_floor(spark: SparkSession, lake: Lake) -> None:
    """What the initial load does with a table: all rows and the schema replaced at once
    (a second load replaces the first), then its LSN set as the TRUNCATE floor."""
    table = target_table(spark, lake.named("loaded"), lake.format)
    first = spark.range(5).select(
        sf.col("id").cast("int").alias("id"),
        sf.lit(7).cast("bigint").alias("_lsn"),
        sf.lit(False).alias("_deleted"),
    )
    assert table.replace(first) == 5
    second = first.where("id < 3").withColumn("v", sf.lit("x"))
    assert table.replace(second) == 3
    _truncate(table, 7)
    rows = lake.rows(lake.named("loaded"))
    assert sorted(tuple(r) for r in rows.collect()) == [(i, 7, False, "x") for i in range(3)]
    assert table.properties()[TRUNCATED_PROPERTY] == "7"


def test_pinned_reads_one_version(spark: SparkSession, lake: Lake) -> None:
    """What verify's lake check judges: the newest version, still the same when read after a
    later commit, under the apply's column names (Iceberg stores `_deleted` as `__deleted`);
    the next pin sees the commit."""
    table = target_table(spark, lake.named("pinned"), lake.format)
    table.replace(
        spark.range(3).select(
            sf.col("id").cast("int").alias("id"),
            sf.lit(7).cast("bigint").alias("_lsn"),
            sf.lit(False).alias("_deleted"),
        )
    )
    version, pinned = table.pinned()
    spark.sql(f"UPDATE {table.sql} SET {table.col('_deleted')} = true WHERE id = 1")
    newer, now = table.pinned()
    assert newer != version
    assert sorted(tuple(r) for r in pinned.collect()) == [(i, 7, False) for i in range(3)]
    assert sorted(tuple(r) for r in now.collect()) == [(0, 7, False), (1, 7, True), (2, 7, False)]


def test_an_iceberg_target_is_read_at_its_newest_commit(spark: SparkSession, iceberg: str) -> None:
    """Every streaming query applies in a session of its own, and a session's Iceberg catalog
    keeps the snapshot of a table it loaded first: a session that read the table before
    another session's TRUNCATE must start its next apply from that TRUNCATE (its rows gone,
    its floor set), not from the snapshot it read."""
    lake = Lake(spark, "iceberg", Path(), f"{iceberg}.{unique('fresh')}")
    name = lake.named("items")
    rows = spark.range(5).select(
        sf.col("id").cast("int").alias("id"), sf.lit(7).cast("bigint").alias("_lsn")
    )
    target_table(spark, name).replace(rows)
    assert spark.table(name).count() == 5  # this session's catalog holds that snapshot now
    other = spark.newSession()
    for key, value in lake.conf().items():
        other.conf.set(key, value)
    _truncate(target_table(other, name), 9)
    assert _truncated_lsn(target_table(spark, name)) == 9
    assert spark.table(name).count() == 0
