"""SCD type 2: change rows applied to a table (Delta or Iceberg, `bridge.spark.formats`) that
keeps every version of every row.

Each version is one row: the key, the data columns, `__START_AT` (the `_seq` of the change
that began it) and `__END_AT` (the `_seq` of the change that ended it: the next version's
start, a delete or a TRUNCATE; null while current), as Databricks' AUTO CDC writes
`STORED AS SCD TYPE 2` with `sequence_by = _seq`. A change begins a new version when it
creates the row or changes a tracked column (`track_history_column_list` /
`track_history_except_column_list`, default all); a change of untracked columns only
rewrites the current version in place.

Replays change nothing: a key's changes at or before the newest position its versions
record (a start or an end) are skipped, and versions are MERGEd on (key, `__START_AT`).
Unchanged TOASTed values are taken from the key's previous version.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf

from bridge.spark.apply import (
    TARGET_META,
    _ensure_table,
    _mark_truncated,
    _selected,
    _truncated_lsn,
    quarantine_failed,
)
from bridge.spark.formats import TableFormat, Target, quote, target_table
from bridge.spark.reader import META_TYPES

START, END = "__START_AT", "__END_AT"
_CLOSE = "__close"


def apply_history(
    changes: DataFrame,
    target: str,
    key_columns: Sequence[str],
    *,
    track_history_column_list: Sequence[str] | None = None,
    track_history_except_column_list: Sequence[str] = (),
    column_list: Sequence[str] | None = None,
    except_column_list: Sequence[str] = (),
    quarantine: str | None = None,
    table_format: TableFormat | None = None,
) -> None:
    """MERGE one static DataFrame of change rows into the SCD type 2 table `target`
    (`table_format` and the other options: see `bridge.spark.apply.apply_batch`)."""
    changes = quarantine_failed(changes, quarantine, table_format)
    if all(c in META_TYPES for c in changes.columns):
        return
    changes = _selected(changes, key_columns, column_list, except_column_list)
    if "_tombstone" in changes.columns:
        changes = changes.where(~sf.col("_tombstone"))
    spark = changes.sparkSession
    keys = list(key_columns)
    data = [c for c in changes.columns if c not in META_TYPES and c not in keys]
    tracked = [
        c
        for c in data
        if (track_history_column_list is None or c in track_history_column_list)
        and c not in track_history_except_column_list
    ]
    table = target_table(spark, target, table_format)
    floor = _truncated_lsn(table) if table.exists() else 0
    rows = changes.where(sf.coalesce(sf.col("_lsn"), sf.lit(0)) >= floor).select(
        *keys, *data, "op", "_unchanged", *TARGET_META
    )
    shape = rows.select(
        *keys,
        *data,
        *TARGET_META,
        sf.col("_seq").alias(START),
        sf.col("_seq").alias(END),
    )
    _ensure_table(table, shape, {})
    current = table.read()
    done = current.groupBy(*keys).agg(
        sf.max(sf.greatest(sf.col(START), sf.coalesce(sf.col(END), sf.col(START)))).alias("__done")
    )
    rows = (
        rows.join(done, keys, "left")
        .where(sf.col("__done").isNull() | (sf.col("_seq") > sf.col("__done")))
        .drop("__done")
    )
    truncates = rows.where(sf.col("op") == "t").select("_seq", "_lsn").collect()
    rows = rows.where(sf.col("op") != "t")
    now = current.where(sf.col(END).isNull()).select(
        *keys,
        sf.col(START).alias("__cur_start"),
        *(sf.struct(sf.col(c).alias("v")).alias(f"__cur_{i}") for i, c in enumerate(data)),
    )
    versions = _versions(rows.join(now, keys, "left"), keys, data, tracked).persist()
    try:
        versions.count()  # computed from the table as it is before the MERGE changes it
        _merge_versions(table, versions, keys, data)
    finally:
        versions.unpersist()
    for truncate in sorted(truncates, key=lambda r: r["_seq"]):
        seq = _struct_sql(truncate["_seq"].asDict())
        end, start = table.col(END), table.col(START)
        spark.sql(f"UPDATE {table.sql} SET {end} = {seq} WHERE {end} IS NULL AND {start} < {seq}")
        _mark_truncated(table, truncate["_lsn"])


def _struct_sql(fields: dict[str, Any]) -> str:
    """A `_seq` value (bigint fields) as a SQL struct literal."""
    values = ", ".join(
        f"'{k}', CAST({'NULL' if v is None else int(v)} AS BIGINT)" for k, v in fields.items()
    )
    return f"named_struct({values})"


def _versions(rows: DataFrame, keys: list[str], data: list[str], tracked: list[str]) -> DataFrame:
    """The MERGE source: one row per version the batch begins (or continues: the key's
    current version rewritten in place), plus a `__close` row ending the current version
    when the batch begins a new one or deletes the key."""
    order = Window.partitionBy(*keys).orderBy("_seq")
    upto = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    unchanged = sf.coalesce(sf.col("_unchanged"), sf.array().cast("array<string>"))
    live = sf.col("op") != "d"
    filled: dict[str, Column] = {}
    for i, c in enumerate(data):
        sent = sf.when(live & ~sf.array_contains(unchanged, c), sf.struct(sf.col(c).alias("v")))
        latest = sf.last(sent, ignorenulls=True).over(upto)
        filled[c] = sf.coalesce(latest, sf.col(f"__cur_{i}"))["v"]
    rows = rows.select("*", *(filled[c].alias(f"__f_{c}") for c in data))

    def tracked_struct(value: Callable[[str], Column]) -> Column:
        return sf.struct(*(value(c).alias(f"t{j}") for j, c in enumerate(tracked)))

    mine = tracked_struct(lambda c: sf.col(f"__f_{c}"))
    previous = tracked_struct(lambda c: sf.lag(f"__f_{c}").over(order))
    version = tracked_struct(lambda c: sf.col(f"__cur_{data.index(c)}")["v"])
    first = sf.row_number().over(order) == 1
    same = sf.when(first, sf.col("__cur_start").isNotNull() & mine.eqNullSafe(version)).otherwise(
        sf.lag("op").over(order).isin("c", "u", "r") & mine.eqNullSafe(previous)
    )
    begins = ~(sf.col("op").isin("u") & same)
    rows = rows.withColumn("__begins", begins).withColumn(
        "__run", sf.sum(sf.col("__begins").cast("int")).over(upto)
    )
    after = order.rowsBetween(1, Window.unboundedFollowing)
    rows = rows.withColumn(
        "__next", sf.min(sf.when(sf.col("__begins"), sf.col("_seq"))).over(after)
    )
    last_of_run = Window.partitionBy(*keys, "__run").orderBy(sf.col("_seq").desc())
    runs = (
        rows.withColumn("__first_op", sf.first("op").over(last_of_run.orderBy("_seq")))
        .withColumn("__run_start", sf.min("_seq").over(Window.partitionBy(*keys, "__run")))
        .withColumn("__rank", sf.row_number().over(last_of_run))
        .where(sf.col("__rank") == 1)
    )
    kept = runs.where(sf.col("__first_op") != "d")
    start = sf.when(sf.col("__run") == 0, sf.col("__cur_start")).otherwise(sf.col("__run_start"))
    out = kept.select(
        *keys,
        *(sf.col(f"__f_{c}").alias(c) for c in data),
        *TARGET_META,
        start.alias(START),
        sf.col("__next").alias(END),
        sf.lit(False).alias(_CLOSE),
    )
    # The key's current version ends at the batch's first beginning (a new version or a
    # delete), unless run 0 continues it (then it is in `out` with its new end).
    firsts = (
        rows.where(sf.col("__cur_start").isNotNull())
        .groupBy(*keys)
        .agg(
            sf.min(sf.when(sf.col("__begins"), sf.col("_seq"))).alias(END),
            sf.min("__run").alias("__min_run"),
            sf.first("__cur_start").alias(START),
        )
    )
    closes = firsts.where((sf.col("__min_run") > 0) & sf.col(END).isNotNull()).select(
        *keys,
        *(sf.lit(None).cast(out.schema[c].dataType).alias(c) for c in data),
        *(sf.lit(None).cast(out.schema[m].dataType).alias(m) for m in TARGET_META),
        sf.col(START),
        sf.col(END),
        sf.lit(True).alias(_CLOSE),
    )
    return out.unionByName(closes)


def _merge_versions(table: Target, versions: DataFrame, keys: list[str], data: list[str]) -> None:
    t = table.col
    on = " AND ".join([*(f"t.{t(k)} = s.{quote(k)}" for k in keys), f"t.{t(START)} = s.{START}"])
    values = {c: f"s.{quote(c)}" for c in [*keys, *data, *TARGET_META, START, END]}
    table.merge(
        versions,
        on,
        [
            f"WHEN MATCHED AND s.{_CLOSE} THEN UPDATE SET {table.assign({END: f's.{END}'})}",
            f"WHEN MATCHED THEN UPDATE SET {table.assign(values)}",
            f"WHEN NOT MATCHED AND NOT s.{_CLOSE} THEN {table.insert(values)}",
        ],
    )
