"""A table's content as two numbers, on both sides: (rows, sum of a 40-bit hash of each
live row's columns joined by `|`), computed inside PostgreSQL and inside Spark, so a lake
table of millions of rows is compared with its source without collecting either (the
cluster tests, bench/spark_load.py)."""

from __future__ import annotations

from typing import Any

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

PG_DIGEST = (
    "SELECT count(*), coalesce(sum(('x' || substr(md5(concat_ws('|', {columns})), 1, 10))"
    "::bit(40)::bigint), 0) FROM {table}"
)


def lake_digest(spark: SparkSession, path: str, columns: list[str]) -> tuple[int, int]:
    """The digest of a Delta table's live rows (soft-deleted ones left out)."""
    df = spark.read.format("delta").load(path).where(~sf.col("_deleted"))
    text = sf.concat_ws("|", *(sf.col(c).cast("string") for c in columns))
    row_hash = sf.conv(sf.substring(sf.md5(text), 1, 10), 16, 10).cast("bigint")
    found = df.agg(sf.count("*"), sf.sum(row_hash)).first()
    assert found is not None
    return int(found[0]), int(found[1] or 0)


def pg_digest(conn: psycopg.Connection[Any], table: str, columns: list[str]) -> tuple[int, int]:
    """The digest of a PostgreSQL table (its name and columns trusted: the caller's)."""
    query = PG_DIGEST.format(columns=", ".join(columns), table=table)
    row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])
