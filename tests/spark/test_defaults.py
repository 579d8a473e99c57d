"""A column added with a constant default, in the apply: rows the table already holds (in
Delta or Iceberg) get the default when the column arrives, and records of an older schema
version read in a later batch decode to it (Avro schema resolution in from_avro), as
PostgreSQL reads those rows.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from bridge.spark.apply import apply_batch
from bridge.spark.reader import read_changes

from .conftest import Lake
from .feed import TableFeed, numeric_typmod

ADDED = [  # (column, type, typmod, missing value text)
    ("w", "text", -1, "dflt"),
    ("n", "numeric", numeric_typmod(6, 2), "12.50"),
    ("d", "date", -1, "2024-02-29"),
    ("plain", "int8", -1, None),
]
DEFAULTS = {"w": "dflt", "n": Decimal("12.50"), "d": dt.date(2024, 2, 29), "plain": None}


def _feed(bootstrap: str, registry_url: str) -> TableFeed:
    columns = [("id", "int4", -1), ("name", "text", -1)]
    return TableFeed(bootstrap, registry_url, f"f{uuid.uuid4().hex[:10]}", columns, ["id"])


def _read(spark: SparkSession, feed: TableFeed, bootstrap: str, registry_url: str) -> DataFrame:
    return read_changes(
        spark,
        [feed.topic],
        kafka_options={"kafka.bootstrap.servers": bootstrap},
        registry_url=registry_url,
    )


def _rows(table: DataFrame) -> dict[int, dict[str, Any]]:
    rows = table.collect()
    return {
        r["id"]: {k: v for k, v in r.asDict().items() if k[0] != "_" and k != "id"} for r in rows
    }


def _alter_and_write(feed: TableFeed) -> None:
    for name, kind, typmod, missing in ADDED:
        feed.add_column(name, kind, typmod, missing)
    feed.commit(
        feed.insert({"id": "3", "name": "three", "w": "own", "n": "1.25", "d": "2000-01-01"}),
        # an update after the ALTER carries the value PostgreSQL reads for the row
        feed.update({"id": "2", "name": "two-b", "w": "dflt", "n": "12.50", "d": "2024-02-29"}),
    )


EXPECTED = {
    1: {"name": "one", **DEFAULTS},
    2: {"name": "two-b", **DEFAULTS},
    3: {"name": "three", "w": "own", "n": Decimal("1.25"), "d": dt.date(2000, 1, 1), "plain": None},
}


def test_rows_in_the_table_get_the_default_when_the_column_arrives(
    spark: SparkSession, lake: Lake, kafka_bootstrap: str, registry_url: str
) -> None:
    feed = _feed(kafka_bootstrap, registry_url)
    feed.commit(feed.insert({"id": "1", "name": "one"}), feed.insert({"id": "2", "name": "two"}))
    path = lake.target("defaults_arrive")
    first = _read(spark, feed, kafka_bootstrap, registry_url)
    last = first.agg(sf.max("_offset")).first()
    assert last is not None
    apply_batch(first, path, ["id"])
    assert set(_rows(lake.rows(path))[1]) == {"name"}  # the column does not exist yet
    _alter_and_write(feed)
    later = _read(spark, feed, kafka_bootstrap, registry_url)
    apply_batch(later.where(sf.col("_offset") > last[0]), path, ["id"])  # new records only
    assert _rows(lake.rows(path)) == EXPECTED


def test_older_records_read_the_default_in_one_batch(
    spark: SparkSession, spark_dir: Path, kafka_bootstrap: str, registry_url: str
) -> None:
    feed = _feed(kafka_bootstrap, registry_url)
    feed.commit(feed.insert({"id": "1", "name": "one"}), feed.insert({"id": "2", "name": "two"}))
    _alter_and_write(feed)
    changes = _read(spark, feed, kafka_bootstrap, registry_url)
    old = changes.where(sf.col("id") == 1).select("w", "n", "d", "plain").collect()
    assert [r.asDict() for r in old] == [DEFAULTS]
    path = str(spark_dir / "defaults_batch")
    apply_batch(changes, path, ["id"])
    assert _rows(spark.read.format("delta").load(path)) == EXPECTED
