"""Change rows (see `bridge.spark.reader`) applied to a Delta table: an idempotent CDC MERGE.

Every target row keeps the position of the change that wrote it (`_lsn` = commit LSN,
`_offset` = Kafka offset, which orders changes of one transaction: all changes of a key sit
in one partition, in commit order). A change is applied only if it is newer than that
position, so replays, duplicates and overlapping batches change nothing.

Deletes are soft by default: the row stays with `_deleted = true` and the delete's position,
so an older change replayed later cannot resurrect it. With `hard_delete=True` rows are
removed, and a replay of records older than a delete can bring the row back.

A TRUNCATE removes every row older than its LSN, in both modes, and records that LSN as a
table property: a change older than it, arriving later from another partition or a replay,
is dropped. (Soft-deleting instead would leave a different table depending on whether a row's
insert and the TRUNCATE met in one batch.) Changes of the truncating transaction itself are
kept as if they followed it. Tombstones carry no LSN and are ignored: the delete event before
each one already did the delete.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.streaming.query import StreamingQuery

from bridge.errors import ConfigError
from bridge.spark.reader import META_TYPES, ChangeStream

TARGET_META = ("_lsn", "_offset", "_txid", "_commit_ts", "_deleted")
TRUNCATED_PROPERTY = "bridge.truncatedLsn"


def _order() -> Column:
    """A change's position: (commit LSN, offset); a change without an LSN sorts first."""
    return sf.struct(
        sf.coalesce(sf.col("_lsn"), sf.lit(0)).alias("l"), sf.col("_offset").alias("o")
    )


def _is_path(target: str) -> bool:
    return "/" in target or ":" in target


def _table(spark: SparkSession, target: str) -> DeltaTable | None:
    if _is_path(target):
        return DeltaTable.forPath(spark, target) if DeltaTable.isDeltaTable(spark, target) else None
    return DeltaTable.forName(spark, target) if spark.catalog.tableExists(target) else None


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def latest_per_key(changes: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """One row per key: the newest change, each non-key column (as struct `v`) from the newest
    change that carried it. Unsent TOAST values and a delete's (key-only) before-image carry
    nothing, so a column is a null struct only when the target's value must be kept."""
    data = [c for c in changes.columns if c not in META_TYPES and c not in key_columns]
    unchanged = sf.coalesce(sf.col("_unchanged"), sf.array().cast("array<string>"))
    carried = [
        sf.max_by(
            sf.struct(sf.col(c).alias("v")),
            sf.when(~sf.array_contains(unchanged, c) & ~sf.col("_deleted"), _order()),
        ).alias(f"__cdc_v{i}")
        for i, c in enumerate(data)
    ]
    latest = sf.max_by(sf.struct(*(sf.col(m) for m in ("op", *TARGET_META))), _order())
    grouped = changes.groupBy(*key_columns).agg(latest.alias("__cdc_m"), *carried)
    return grouped.select(
        *key_columns,
        *(sf.col(f"__cdc_v{i}").alias(c) for i, c in enumerate(data)),
        sf.col("__cdc_m.op").alias("op"),
        sf.coalesce(sf.col("__cdc_m._lsn"), sf.lit(0)).alias("_lsn"),
        *(sf.col(f"__cdc_m.{m}").alias(m) for m in TARGET_META[1:]),
    )


def _ensure_table(spark: SparkSession, target: str, shape: DataFrame) -> DeltaTable:
    """Create the table on first use; add columns a newer schema version brought."""
    empty = shape.limit(0)
    table = _table(spark, target)
    if table is not None:
        have = set(table.toDF().columns)
        if set(empty.columns) <= have:
            return table
    writer = empty.write.format("delta").mode("append").option("mergeSchema", "true")
    if _is_path(target):
        writer.save(target)
        return DeltaTable.forPath(spark, target)
    writer.saveAsTable(target)
    return DeltaTable.forName(spark, target)


def _truncated_lsn(table: DeltaTable | None) -> int:
    """The newest TRUNCATE applied so far: older changes must never land again."""
    if table is None:
        return 0
    detail = table.detail().select("properties").first()
    props = detail[0] if detail is not None and detail[0] else {}
    return int(props.get(TRUNCATED_PROPERTY, 0))


def _truncate(spark: SparkSession, target: str, table: DeltaTable, lsn: int) -> None:
    table.delete(sf.col("_lsn") < sf.lit(lsn))
    name = f"delta.{_q(target)}" if _is_path(target) else target
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('{TRUNCATED_PROPERTY}' = '{lsn}')")


def apply_batch(
    changes: DataFrame,
    target: str,
    key_columns: Sequence[str],
    *,
    hard_delete: bool = False,
) -> None:
    """MERGE one static DataFrame of change rows into the Delta table `target` (a path if it
    contains '/' or ':', else a table name), creating or widening the table as needed."""
    if not key_columns:
        raise ConfigError("apply needs key_columns", hint="pass the table's primary key columns")
    if all(c in META_TYPES for c in changes.columns):
        return  # nothing but tombstones (or nothing at all): no row to change
    missing = [k for k in key_columns if k not in changes.columns]
    if missing:
        raise ConfigError(
            f"key column(s) {', '.join(missing)} are not in the changes",
            hint=f"the changes have {', '.join(changes.columns)}",
        )
    spark = changes.sparkSession
    if "_tombstone" in changes.columns:
        changes = changes.where(~sf.col("_tombstone"))
    floor = _truncated_lsn(_table(spark, target))
    found = changes.where(sf.col("op") == "t").agg(sf.max("_lsn")).first()
    truncate = found[0] if found is not None and (found[0] or 0) > floor else None
    kept = changes.where(
        (sf.col("op") != "t")
        & (sf.coalesce(sf.col("_lsn"), sf.lit(0)) >= max(floor, truncate or 0))
    )
    latest = latest_per_key(kept, key_columns).persist()
    try:
        data = [c for c in latest.columns if c != "op" and c not in TARGET_META]
        shape = latest.select(
            *key_columns,
            *(sf.col(c)["v"].alias(c) for c in data if c not in key_columns),
            *TARGET_META,
        )
        table = _ensure_table(spark, target, shape)
        if truncate is not None:
            _truncate(spark, target, table, truncate)
        _merge(table, latest, key_columns, data, hard_delete)
    finally:
        latest.unpersist()


def _merge(
    table: DeltaTable,
    latest: DataFrame,
    key_columns: Sequence[str],
    data: list[str],
    hard: bool,
) -> None:
    on = " AND ".join(f"t.{_q(k)} = s.{_q(k)}" for k in key_columns)
    newer = "s._lsn > t._lsn OR (s._lsn = t._lsn AND s._offset > t._offset)"
    meta: dict[str, str | Column] = {m: f"s.{m}" for m in TARGET_META}
    values: dict[str, str | Column] = {_q(k): f"s.{_q(k)}" for k in key_columns}
    for c in data:
        if c not in key_columns:
            values[_q(c)] = f"s.{_q(c)}.v"
    update = dict(values)
    for c in data:
        if c not in key_columns:
            update[_q(c)] = f"CASE WHEN s.{_q(c)} IS NULL THEN t.{_q(c)} ELSE s.{_q(c)}.v END"
    merge = table.alias("t").merge(latest.alias("s"), on)
    if hard:
        merge = merge.whenMatchedDelete(f"({newer}) AND s._deleted")
    else:
        merge = merge.whenMatchedUpdate(f"({newer}) AND s._deleted", meta)
    merge = merge.whenMatchedUpdate(newer, {**update, **meta})
    insert = {**values, **meta}
    merge = (
        merge.whenNotMatchedInsert("NOT s._deleted", insert)
        if hard
        else (merge.whenNotMatchedInsert(values=insert))
    )
    merge.execute()


def apply_changes(
    changes: DataFrame | ChangeStream,
    target: str,
    key_columns: Sequence[str],
    *,
    hard_delete: bool = False,
    checkpoint: str | None = None,
    trigger: dict[str, Any] | None = None,
) -> StreamingQuery | None:
    """Apply a batch DataFrame now (returns None) or start a stream (returns the query).

    A stream is a `ChangeStream` from `read_changes(..., streaming=True)` (decoded per
    micro-batch) or an already-decoded streaming DataFrame; it needs `checkpoint`, and
    `trigger` takes DataStreamWriter.trigger's keywords, e.g. {"availableNow": True}. A
    micro-batch that Spark re-runs after a failure finds its changes applied and does nothing.
    """
    if isinstance(changes, DataFrame) and not changes.isStreaming:
        apply_batch(changes, target, key_columns, hard_delete=hard_delete)
        return None
    if checkpoint is None:
        raise ConfigError("a streaming apply needs checkpoint=", hint="pass a checkpoint dir")
    if isinstance(changes, ChangeStream):
        stream, decode = changes.raw, changes.decode
    else:
        stream, decode = changes, _identity

    def run(batch: DataFrame, _batch_id: int) -> None:
        batch.persist()  # decoding reads the batch twice: ids first, then the rows
        try:
            apply_batch(decode(batch), target, key_columns, hard_delete=hard_delete)
        finally:
            batch.unpersist()

    writer = stream.writeStream.foreachBatch(run).option("checkpointLocation", checkpoint)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


def _identity(batch: DataFrame) -> DataFrame:
    return batch
