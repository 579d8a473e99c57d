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

A primary-key change arrives as a delete of the old key and a create of the new one, linked
by the create's `_oldkey` (its `__debezium.oldkey` header). Without REPLICA IDENTITY FULL the
create lacks the unchanged TOASTed values (`_unchanged`); they are carried over from the old
key's newest row before its delete, found in the same batch or in the target table (a soft
delete keeps a row's values). Chains (1 -> 2 -> 3) are followed, one step per pass. The old
key's row cannot be found when a hard delete removed it in an earlier batch, or when a
micro-batch holds the create but not yet the old key's earlier changes (they sit in another
partition and a rate limit such as maxOffsetsPerTrigger cut it short): the values then stay
null, as before this existed.

A column that arrives with a newer schema version is added to the table; when its field has
a default (a column added with a constant default in PostgreSQL, see `bridge.spark.reader`),
the rows already in the table get that default, as PostgreSQL reads them. A column a newer
version widened (int -> bigint, float -> double, more decimal digits) is retyped in place
with Delta's type widening; any other type change stops the apply with a SchemaError naming
the table and the column. A dropped column stays in the table: rows keep the value it
had, rows inserted since have null. Every row keeps `_seq` (see
`bridge.spark.reader.SEQ_TYPE`), the column Databricks' `sequence_by` takes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import (
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StructField,
    StructType,
)

from bridge.errors import ConfigError, SchemaError
from bridge.spark.reader import DEFAULT_ROW, META_TYPES, ChangeStream

TARGET_META = ("_lsn", "_offset", "_seq", "_txid", "_commit_ts", "_deleted")
TRUNCATED_PROPERTY = "bridge.truncatedLsn"
OLD_KEY = "_oldkey"
_RECORD_ID = ("_topic", "_partition", "_offset")


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


def latest_per_key(
    changes: DataFrame, key_columns: Sequence[str], *, ignore_null_updates: bool = False
) -> DataFrame:
    """One row per key: the newest change, each non-key column (as struct `v`) from the newest
    change that carried it. Unsent TOAST values and a delete's (key-only) before-image carry
    nothing (nor, with `ignore_null_updates`, an update's null), so a column is a null struct
    only when the target's value must be kept."""
    data = [c for c in changes.columns if c not in META_TYPES and c not in key_columns]
    unchanged = sf.coalesce(sf.col("_unchanged"), sf.array().cast("array<string>"))

    def carries(c: str) -> Column:
        found = ~sf.array_contains(unchanged, c) & ~sf.col("_deleted")
        if ignore_null_updates:
            found &= (sf.col("op") != "u") | sf.col(c).isNotNull()
        return found

    carried = [
        sf.max_by(sf.struct(sf.col(c).alias("v")), sf.when(carries(c), _order())).alias(
            f"__cdc_v{i}"
        )
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


def _unchanged_list() -> Column:
    return sf.coalesce(sf.col("_unchanged"), sf.array().cast("array<string>"))


def _moved() -> Column:
    """The create of a primary-key change that still lacks unchanged TOASTed values."""
    moved = (sf.col("op") == "c") & sf.col(OLD_KEY).isNotNull() & (sf.size(_unchanged_list()) > 0)
    return sf.coalesce(moved, sf.lit(False))


def _missing(changes: DataFrame) -> int:
    """How many (create, column) values the key changes of `changes` still lack."""
    found = changes.where(_moved()).agg(sf.sum(sf.size("_unchanged"))).first()
    return 0 if found is None or found[0] is None else int(found[0])


def carry_over(
    changes: DataFrame,
    table: DeltaTable | None,
    key_columns: Sequence[str],
    floor: int = 0,
    missing: int | None = None,
) -> tuple[DataFrame, list[DataFrame]]:
    """`changes` with each key change's create completed from its old key's row, and the
    intermediate DataFrames it cached (unpersist them once the result is used).

    The create of a batch without key changes costs one small aggregation (`_oldkey` is a
    null literal there, which Spark folds away). Each pass fills what the previous one
    made available, so a chain of key changes in one batch takes one pass per link; it
    stops when a pass fills nothing more. Target rows older than `floor` (a TRUNCATE) are
    not used. `missing`: `_missing(changes)` when the caller counted it already (an upper
    bound does: a pass that fills nothing ends the loop)."""
    if OLD_KEY not in changes.columns:
        return changes, []
    data = [c for c in changes.columns if c not in META_TYPES and c not in key_columns]
    cached: list[DataFrame] = []
    if not data:
        missing = 0
    elif missing is None:
        missing = _missing(changes)
    while missing:
        changes = _fill(changes, table, key_columns, data, floor).persist()
        cached.append(changes)
        left = _missing(changes)
        if left == missing:
            break
        missing = left
    return changes, cached


def _fill(
    changes: DataFrame,
    table: DeltaTable | None,
    key_columns: Sequence[str],
    data: list[str],
    floor: int,
) -> DataFrame:
    """One pass of `carry_over`: each missing value from the old key's newest row that
    carried it and came before the key change (position order, as in `latest_per_key`)."""
    schema = changes.schema
    keys = [f"__k{i}" for i in range(len(key_columns))]
    old = sf.from_json(sf.col(OLD_KEY), StructType([schema[k] for k in key_columns]))
    moves = changes.where(_moved()).withColumn("__id", sf.struct(*_RECORD_ID))
    wanted = moves.select(
        "__id",
        sf.col("_lsn").alias("__lsn"),
        *(old[k].alias(n) for k, n in zip(key_columns, keys, strict=True)),
    )
    # The old key's delete at the change's commit LSN: what follows it in the batch (the
    # key re-used later in the same transaction) is not the moved row.
    deletes = (
        changes.where(sf.col("op") == "d")
        .select(
            *(sf.col(k).alias(n) for k, n in zip(key_columns, keys, strict=True)),
            sf.col("_lsn").alias("__lsn"),
            "_offset",
        )
        .groupBy(*keys, "__lsn")
        .agg(sf.min("_offset").alias("__d"))
    )
    wanted = wanted.join(deletes, [*keys, "__lsn"], "left")
    unchanged = _unchanged_list()
    batch = changes.where(~sf.col("_deleted")).select(
        *(sf.col(k).alias(n) for k, n in zip(key_columns, keys, strict=True)),
        sf.coalesce(sf.col("_lsn"), sf.lit(0)).alias("__slsn"),
        sf.col("_offset").alias("__soff"),
        *(
            sf.when(~sf.array_contains(unchanged, c), sf.struct(sf.col(c).alias("v"))).alias(
                f"__v{j}"
            )
            for j, c in enumerate(data)
        ),
        sf.lit(False).alias("__target"),
    )
    sources = batch
    if table is not None:
        target = table.toDF()
        have = set(target.columns)
        sources = sources.unionByName(
            target.where(sf.col("_lsn") >= sf.lit(floor)).select(
                *(sf.col(k).alias(n) for k, n in zip(key_columns, keys, strict=True)),
                sf.col("_lsn").alias("__slsn"),
                sf.col("_offset").alias("__soff"),
                *(
                    (
                        sf.struct(sf.col(c).cast(schema[c].dataType).alias("v"))
                        if c in have
                        else sf.lit(None).cast(StructType([StructField("v", schema[c].dataType)]))
                    ).alias(f"__v{j}")
                    for j, c in enumerate(data)
                ),
                sf.lit(True).alias("__target"),
            )
        )
    renamed = sources.select(
        *(sf.col(n).alias(f"__s{n}") for n in keys), *(c for c in sources.columns if c not in keys)
    )
    before_change = sf.when(sf.col("__target"), sf.col("__slsn") <= sf.col("__lsn")).otherwise(
        (sf.col("__slsn") < sf.col("__lsn"))
        | ((sf.col("__slsn") == sf.col("__lsn")) & (sf.col("__soff") < sf.col("__d")))
    )
    on = [sf.col(n) == sf.col(f"__s{n}") for n in keys]
    position = sf.struct(sf.col("__slsn"), sf.col("__soff"))
    found = (
        wanted.join(renamed, on)
        .where(sf.coalesce(before_change, sf.lit(False)))
        .groupBy("__id")
        .agg(
            *(
                sf.max_by(
                    sf.col(f"__v{j}"), sf.when(sf.col(f"__v{j}").isNotNull(), position)
                ).alias(f"__f{j}")
                for j in range(len(data))
            )
        )
    )
    moved = moves.join(found, "__id", "left")
    filled = {
        c: sf.when(
            sf.array_contains(unchanged, c) & sf.col(f"__f{j}").isNotNull(), sf.col(f"__f{j}")["v"]
        ).otherwise(sf.col(c))
        for j, c in enumerate(data)
    }
    got = sf.array(*(sf.when(sf.col(f"__f{j}").isNotNull(), sf.lit(c)) for j, c in enumerate(data)))
    filled["_unchanged"] = sf.array_except(unchanged, got)
    completed = moved.select(*(filled.get(c, sf.col(c)).alias(c) for c in changes.columns))
    return changes.where(~_moved()).unionByName(completed)


def _ensure_table(
    spark: SparkSession, target: str, shape: DataFrame, defaults: dict[str, str]
) -> DeltaTable:
    """Create the table on first use; add columns a newer schema version brought, and give
    the rows already there a new column's default (`defaults`: column -> row schema)."""
    empty = shape.limit(0)
    table = _table(spark, target)
    have: set[str] | None = None
    if table is not None:
        current = table.toDF().schema
        have = set(current.fieldNames())
        _widen(spark, target, current, shape.schema)
        if set(empty.columns) <= have:
            return table
    writer = empty.write.format("delta").mode("append").option("mergeSchema", "true")
    if _is_path(target):
        writer.save(target)
        table = DeltaTable.forPath(spark, target)
    else:
        writer.saveAsTable(target)
        table = DeltaTable.forName(spark, target)
    added = {c: row for c, row in defaults.items() if have is not None and c not in have}
    if added:
        table.update(set={_q(c): default_of(row, c) for c, row in added.items()})
    return table


_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


def _widens(old: DataType, new: DataType) -> bool:
    """Whether `new` holds every value of `old`: the changes Delta's type widening makes in
    place (a narrower integer, float -> double, a decimal with no fewer digits either side
    of the point)."""
    if isinstance(old, _INTEGRAL) and isinstance(new, _INTEGRAL):
        return _INTEGRAL.index(type(old)) <= _INTEGRAL.index(type(new))
    if isinstance(old, FloatType) and isinstance(new, DoubleType):
        return True
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        integral = new.precision - new.scale >= old.precision - old.scale
        return integral and new.scale >= old.scale
    return False


def _widen(spark: SparkSession, target: str, current: StructType, incoming: StructType) -> None:
    """Retype the table's columns a newer schema version widened (ALTER COLUMN TYPE with
    Delta's type widening enabled on the table); stop on any other type change. A column
    the changes carry narrower than the table (an older layout) is cast up by the MERGE."""
    have = {f.name: f.dataType for f in current.fields}
    wider: dict[str, DataType] = {}
    for f in incoming.fields:
        old = have.get(f.name)
        if old is None or old.simpleString() == f.dataType.simpleString():
            continue
        if _widens(old, f.dataType):
            wider[f.name] = f.dataType
        elif not _widens(f.dataType, old):
            raise SchemaError(
                f"table {target} column {f.name}: type {old.simpleString()} cannot change "
                f"to {f.dataType.simpleString()}",
                hint="Delta widens integers, float -> double and decimal precision in place "
                "only; rewrite the column (or apply into a new table) and restart the query",
            )
    if wider:
        name = _sql_name(target)
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
        for column, kind in wider.items():
            spark.sql(f"ALTER TABLE {name} ALTER COLUMN {_q(column)} TYPE {kind.simpleString()}")


def _sql_name(target: str) -> str:
    return f"delta.{_q(target)}" if _is_path(target) else target


def default_of(row_schema: str, column: str) -> Column:
    """The Avro default of `column` in the row record `row_schema`, as Spark reads it: an
    empty record (zero bytes) read with the row as reader schema is all defaults, so the value
    is converted exactly as from_avro converts a record's (dates, decimals, timestamps)."""
    row = json.loads(row_schema)
    empty = {"type": "record", "name": row["name"], "fields": []}
    if "namespace" in row:
        empty["namespace"] = row["namespace"]
    defaults = from_avro(sf.lit(bytearray()), json.dumps(empty), {"avroSchema": row_schema})
    return defaults[column]


def _truncated_lsn(table: DeltaTable | None) -> int:
    """The newest TRUNCATE applied so far: older changes must never land again."""
    if table is None:
        return 0
    detail = table.detail().select("properties").first()
    props = detail[0] if detail is not None and detail[0] else {}
    return int(props.get(TRUNCATED_PROPERTY, 0))


def _truncate(spark: SparkSession, target: str, table: DeltaTable, lsn: int) -> None:
    table.delete(sf.col("_lsn") < sf.lit(lsn))
    _mark_truncated(spark, target, lsn)


def _mark_truncated(spark: SparkSession, target: str, lsn: int) -> None:
    spark.sql(
        f"ALTER TABLE {_sql_name(target)} SET TBLPROPERTIES ('{TRUNCATED_PROPERTY}' = '{lsn}')"
    )


def fold(
    changes: DataFrame,
    table: DeltaTable | None,
    key_columns: Sequence[str],
    *,
    ignore_null_updates: bool = False,
) -> tuple[DataFrame, int | None, list[DataFrame]]:
    """The state per key that `changes` leave on top of `table` (None: on nothing): tombstones
    and TRUNCATEs dropped with every change older than the newest TRUNCATE (or the table's
    floor), key changes' creates completed (`carry_over`), then `latest_per_key`. Returns it,
    the TRUNCATE LSN still to apply to `table` (None: none newer than its floor), and the
    DataFrames cached on the way (unpersist them once the state is used).

    The apply MERGEs this state; `bridge verify --spark` compares it with PostgreSQL, so
    both follow one set of rules."""
    if "_tombstone" in changes.columns:
        changes = changes.where(~sf.col("_tombstone"))
    floor = _truncated_lsn(table)
    # One pass over the changes for the newest TRUNCATE and the values key changes lack.
    moved = sf.sum(sf.when(_moved(), sf.size("_unchanged"))) if OLD_KEY in changes.columns else None
    found = changes.agg(
        sf.max(sf.when(sf.col("op") == "t", sf.col("_lsn"))),
        sf.lit(0) if moved is None else moved,
    ).first()
    truncate = found[0] if found is not None and (found[0] or 0) > floor else None
    lacking = int(found[1] or 0) if found is not None else 0
    kept = changes.where(
        (sf.col("op") != "t")
        & (sf.coalesce(sf.col("_lsn"), sf.lit(0)) >= max(floor, truncate or 0))
    )
    kept, cached = carry_over(kept, table, key_columns, max(floor, truncate or 0), lacking)
    latest = latest_per_key(kept, key_columns, ignore_null_updates=ignore_null_updates)
    return latest, truncate, cached


def apply_batch(
    changes: DataFrame,
    target: str,
    key_columns: Sequence[str],
    *,
    hard_delete: bool = False,
    column_list: Sequence[str] | None = None,
    except_column_list: Sequence[str] = (),
    ignore_null_updates: bool = False,
    quarantine: str | None = None,
) -> None:
    """MERGE one static DataFrame of change rows into the Delta table `target` (a path if it
    contains '/' or ':', else a table name), creating or widening the table as needed.

    `column_list` keeps only those data columns (key columns always stay), and
    `except_column_list` leaves those out; a listed column the changes do not have yet is
    taken when a newer schema version brings it. `ignore_null_updates`: a null in an update
    keeps the target's value (Databricks' option of that name; unchanged TOASTed values are
    kept without it). `quarantine`: the table for the records changes read with
    mode="PERMISSIVE" could not decode (see `quarantine_failed`)."""
    if not key_columns:
        raise ConfigError("apply needs key_columns", hint="pass the table's primary key columns")
    changes = quarantine_failed(changes, quarantine)
    if all(c in META_TYPES for c in changes.columns):
        return  # nothing but tombstones (or nothing at all): no row to change
    missing = [k for k in key_columns if k not in changes.columns]
    if missing:
        raise ConfigError(
            f"key column(s) {', '.join(missing)} are not in the changes",
            hint=f"the changes have {', '.join(changes.columns)}",
        )
    changes = _selected(changes, key_columns, column_list, except_column_list)
    spark = changes.sparkSession
    defaults = {
        f.name: f.metadata[DEFAULT_ROW] for f in changes.schema.fields if DEFAULT_ROW in f.metadata
    }
    table = _table(spark, target)
    latest, truncate, cached = fold(
        changes, table, key_columns, ignore_null_updates=ignore_null_updates
    )
    latest = latest.persist()
    try:
        data = [c for c in latest.columns if c != "op" and c not in TARGET_META]
        shape = latest.select(
            *key_columns,
            *(sf.col(c)["v"].alias(c) for c in data if c not in key_columns),
            *TARGET_META,
        )
        table = _ensure_table(spark, target, shape, defaults)
        if truncate is not None:
            _truncate(spark, target, table, truncate)
        _merge(table, latest, key_columns, data, hard_delete)
    finally:
        latest.unpersist()
        for df in cached:
            df.unpersist()


QUARANTINE_COLUMNS = ("_topic", "_partition", "_offset", "_schema_id", "_error")


def quarantine_failed(changes: DataFrame, quarantine: str | None) -> DataFrame:
    """`changes` without the records that failed to decode (rows with `_error`, read with
    mode="PERMISSIVE"), which go to the Delta table `quarantine` first: their coordinates,
    writer schema id, error and `_quarantined_at`, each record once however often a batch
    is replayed (a MERGE on the coordinates). The quarantined record's change is not
    applied: the target misses it until it is fixed and replayed by hand."""
    if "_error" not in changes.columns:
        return changes
    if quarantine is None:
        raise ConfigError(
            'changes read with mode="PERMISSIVE" need a quarantine table',
            hint="pass quarantine='/lake/_quarantine' (a path or a table name)",
        )
    failed = changes.where(sf.col("_error").isNotNull()).select(
        *QUARANTINE_COLUMNS, sf.current_timestamp().alias("_quarantined_at")
    )
    if failed.limit(1).count():
        table = _ensure_table(changes.sparkSession, quarantine, failed, {})
        on = " AND ".join(f"t.{c} = s.{c}" for c in QUARANTINE_COLUMNS[:3])
        table.alias("t").merge(failed.alias("s"), on).whenNotMatchedInsertAll().execute()
    return changes.where(sf.col("_error").isNull()).drop("_schema_id", "_error")


def _selected(
    changes: DataFrame,
    key_columns: Sequence[str],
    column_list: Sequence[str] | None,
    except_column_list: Sequence[str],
) -> DataFrame:
    """The key, metadata and chosen data columns of `changes`."""
    dropped = sorted(set(key_columns) & set(except_column_list))
    if dropped:
        raise ConfigError(
            f"except_column_list names key column(s) {', '.join(dropped)}",
            hint="a MERGE needs every key column; leave them out of except_column_list",
        )
    wanted = None if column_list is None else set(column_list)
    keep = [
        c
        for c in changes.columns
        if c in META_TYPES
        or c in key_columns
        or ((wanted is None or c in wanted) and c not in except_column_list)
    ]
    return changes if len(keep) == len(changes.columns) else changes.select(*keep)


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
    quarantine: str | None = None,
) -> StreamingQuery | None:
    """Apply a batch DataFrame now (returns None) or start a stream (returns the query).

    A stream is a `ChangeStream` from `read_changes(..., streaming=True)` (decoded per
    micro-batch) or an already-decoded streaming DataFrame; it needs `checkpoint`, and
    `trigger` takes DataStreamWriter.trigger's keywords, e.g. {"availableNow": True}. A
    micro-batch that Spark re-runs after a failure finds its changes applied and does nothing.
    `quarantine`: see `apply_batch`. Many tables in one query: `bridge.spark.tables`.
    """
    if isinstance(changes, DataFrame) and not changes.isStreaming:
        apply_batch(changes, target, key_columns, hard_delete=hard_delete, quarantine=quarantine)
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
            apply_batch(
                decode(batch), target, key_columns, hard_delete=hard_delete, quarantine=quarantine
            )
        finally:
            batch.unpersist()

    writer = stream.writeStream.foreachBatch(run).option("checkpointLocation", checkpoint)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


def _identity(batch: DataFrame) -> DataFrame:
    return batch
