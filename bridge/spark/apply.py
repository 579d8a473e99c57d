"""Change rows (see `bridge.spark.reader`) applied to a Delta or an Iceberg table: an
idempotent CDC MERGE, in Spark SQL both formats run (`bridge.spark.formats` holds what
differs between them).

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
version widened (int -> bigint, float -> double, more decimal digits; Iceberg: at the same
scale) is retyped in place (ALTER COLUMN TYPE; Delta with its type widening); one retyped
across the subject's generations (a change the registry refused, `bridge.spark.reader`'s
`RETYPED`) by rewriting the table with the column cast; any other type change stops the
apply with a SchemaError naming the table and the column. A dropped column
stays in the table: rows keep the value it had, rows inserted since have null. Every row keeps
`_seq` (see `bridge.spark.reader.SEQ_TYPE`), the column Databricks' `sequence_by` takes.
In an Iceberg table the soft-delete flag is stored as `__deleted` (Iceberg reads a column
named `_deleted` as its own metadata column).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import DataType, StructField, StructType

from bridge.errors import ConfigError, SchemaError
from bridge.spark.formats import (
    WIDENING_HINT,
    TableFormat,
    Target,
    quote,
    target_table,
    widens,
)
from bridge.spark.reader import (
    DEFAULT_ROW,
    META_TYPES,
    RETYPED,
    ChangeDecoder,
    ChangeStream,
    TopicFacts,
)

TARGET_META = ("_lsn", "_offset", "_seq", "_txid", "_commit_ts", "_deleted")
TRUNCATED_PROPERTY = "bridge.truncatedLsn"
OLD_KEY = "_oldkey"
_RECORD_ID = ("_topic", "_partition", "_offset")


def _order() -> Column:
    """A change's position: (commit LSN, offset); a change without an LSN sorts first."""
    return sf.struct(
        sf.coalesce(sf.col("_lsn"), sf.lit(0)).alias("l"), sf.col("_offset").alias("o")
    )


def latest_per_key(
    changes: DataFrame,
    key_columns: Sequence[str],
    *,
    ignore_null_updates: bool = False,
    floor: int | None = None,
) -> DataFrame:
    """One row per key: the newest change, each non-key column (as struct `v`) from the newest
    change that carried it. Unsent TOAST values and a delete's (key-only) before-image carry
    nothing (nor, with `ignore_null_updates`, an update's null), so a column is a null struct
    only when the target's value must be kept.

    `floor` (not None): only the changes that are not TRUNCATEs and have an LSN at or
    above it count, and keys left without any change are dropped. That is the same as
    filtering the changes first (the newest of a subset is the newest of the whole set
    when it belongs to the subset), but as a condition of the aggregates: a filter on the
    decoded columns would be pushed below the decoding and decode each record once more
    per column it reads."""
    data = [c for c in changes.columns if c not in META_TYPES and c not in key_columns]
    unchanged = sf.coalesce(sf.col("_unchanged"), sf.array().cast("array<string>"))
    kept: Column | None = None
    if floor is not None:
        kept = sf.col("op") != "t"
        if floor > 0:  # a literal of its own: only tables with a floor compile this plan
            kept &= sf.coalesce(sf.col("_lsn"), sf.lit(0)) >= sf.lit(floor)

    def carries(c: str) -> Column:
        found = ~sf.array_contains(unchanged, c) & ~sf.col("_deleted")
        if ignore_null_updates:
            found &= (sf.col("op") != "u") | sf.col(c).isNotNull()
        return found if kept is None else found & kept

    carried = [
        sf.max_by(sf.struct(sf.col(c).alias("v")), sf.when(carries(c), _order())).alias(
            f"__cdc_v{i}"
        )
        for i, c in enumerate(data)
    ]
    position = _order() if kept is None else sf.when(kept, _order())
    latest = sf.max_by(sf.struct(*(sf.col(m) for m in ("op", *TARGET_META))), position)
    grouped = changes.groupBy(*key_columns).agg(latest.alias("__cdc_m"), *carried)
    if kept is not None:
        grouped = grouped.where(sf.col("__cdc_m").isNotNull())
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
    current: DataFrame | None,
    key_columns: Sequence[str],
    floor: int = 0,
    missing: int | None = None,
) -> tuple[DataFrame, list[DataFrame]]:
    """`changes` with each key change's create completed from its old key's row, and the
    intermediate DataFrames it cached (unpersist them once the result is used).

    `current`: the target table's rows (`Target.read`), None before it exists. The create
    of a batch without key changes costs one small aggregation (`_oldkey` is a
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
        changes = _fill(changes, current, key_columns, data, floor).persist()
        cached.append(changes)
        left = _missing(changes)
        if left == missing:
            break
        missing = left
    return changes, cached


def _fill(
    changes: DataFrame,
    current: DataFrame | None,
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
    if current is not None:
        have = set(current.columns)
        sources = sources.unionByName(
            current.where(sf.col("_lsn") >= sf.lit(floor)).select(
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
    table: Target, shape: DataFrame, defaults: dict[str, str], retyped: frozenset[str] = frozenset()
) -> None:
    """Create the table on first use; widen columns (or rewrite `retyped` ones: `_widen`)
    and add the ones a newer schema version brought, and give the rows already there a new
    column's default (`defaults`: column -> row schema)."""
    if not table.exists():
        table.create(shape)
        return
    current = table.read().schema
    _widen(table, current, shape.schema, retyped)
    have = set(current.fieldNames())
    added = StructType([f for f in shape.schema.fields if f.name not in have])
    if not added.fields:
        return
    table.add_columns(added)
    filled = {f.name: defaults[f.name] for f in added.fields if f.name in defaults}
    if filled:
        # One MERGE against a one-row source of the defaults, as SQL both formats run (an
        # UPDATE cannot take from_avro's value; Delta refuses subqueries in UPDATE SET).
        values = table.spark.range(1).select(
            *(default_of(row, c).alias(f"__d{i}") for i, (c, row) in enumerate(filled.items()))
        )
        sets = {c: f"s.__d{i}" for i, c in enumerate(filled)}
        table.merge(values, "true", [f"WHEN MATCHED THEN UPDATE SET {table.assign(sets)}"])


def _widen(
    table: Target, current: StructType, incoming: StructType, retyped: frozenset[str]
) -> None:
    """Retype the table's columns a newer schema version widened (ALTER COLUMN TYPE; Delta
    with its type widening enabled on the table), and rewrite those of `retyped` (a
    retype the registry refused, read across subject generations: `bridge.spark.reader`)
    that no widening follows; stop on any other type change. A column the changes carry
    narrower than the table (an older layout) is cast up by the MERGE."""
    have = {f.name: f.dataType for f in current.fields}
    wider: dict[str, DataType] = {}
    rewritten: dict[str, DataType] = {}
    for f in incoming.fields:
        old = have.get(f.name)
        if old is None or old.simpleString() == f.dataType.simpleString():
            continue
        if widens(old, f.dataType, table.format):
            wider[f.name] = f.dataType
        elif f.name in retyped and not widens(f.dataType, old, table.format):
            rewritten[f.name] = f.dataType
        elif not widens(f.dataType, old, table.format):
            raise SchemaError(
                f"table {table.name} column {f.name}: type {old.simpleString()} cannot change "
                f"to {f.dataType.simpleString()}",
                hint=f"{WIDENING_HINT[table.format]}; rewrite the column (or apply into a new "
                "table) and restart the query",
            )
    if wider:
        table.retype(wider)
    if rewritten:
        table.rewrite(rewritten)


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


def _truncated_lsn(table: Target) -> int:
    """The newest TRUNCATE applied to the (existing) table so far: older changes must never
    land again."""
    return int(table.properties().get(TRUNCATED_PROPERTY, 0))


def _truncate(table: Target, lsn: int) -> None:
    table.spark.sql(f"DELETE FROM {table.sql} WHERE {table.col('_lsn')} < {int(lsn)}")
    _mark_truncated(table, lsn)


def _mark_truncated(table: Target, lsn: int) -> None:
    table.set_property(TRUNCATED_PROPERTY, str(int(lsn)))


class BatchFacts(NamedTuple):
    """What a caller knows of a batch of changes before it is decoded (`apply_tables`, from
    its one pass over the raw records), so that `fold` needs no pass of its own."""

    truncate: int | None  # the newest TRUNCATE's LSN; None: the batch holds none
    moved: int  # primary-key changes' creates (an upper bound of those lacking values)


def decoded_facts(changes: DataFrame) -> BatchFacts:
    """`BatchFacts` of decoded changes, in one aggregation (it decodes every record); a
    caller holding the raw batch's `reader.batch_facts` uses `known_facts` instead."""
    moved = sf.count_if(_moved()) if OLD_KEY in changes.columns else sf.lit(0)
    found = changes.agg(_newest_truncate(), moved).first()
    if found is None:
        return BatchFacts(None, 0)
    return BatchFacts(None if found[0] is None else int(found[0]), int(found[1] or 0))


def known_facts(decoder: ChangeDecoder, raw: DataFrame, topics: Sequence[TopicFacts]) -> BatchFacts:
    """`BatchFacts` of the changes of `topics` in a raw batch, from their `TopicFacts`: the
    newest TRUNCATE needs only the records without a key decoded."""
    truncate = None
    keyless = [g for t in topics if t.keyless for g in t.groups]
    if keyless:
        truncate = newest_truncate(decoder.keyless(raw, keyless))
    return BatchFacts(truncate, sum(t.moved for t in topics))


def newest_truncate(changes: DataFrame) -> int | None:
    """The newest TRUNCATE's LSN among `changes`, None without one."""
    found = changes.agg(_newest_truncate()).first()
    return None if found is None or found[0] is None else int(found[0])


def _newest_truncate() -> Column:
    return sf.max(sf.when(sf.col("op") == "t", sf.col("_lsn")))


def fold(
    changes: DataFrame,
    key_columns: Sequence[str],
    *,
    floor: int = 0,
    current: Callable[[DataFrame], DataFrame | None] = lambda _kept: None,
    ignore_null_updates: bool = False,
    facts: BatchFacts | None = None,
) -> tuple[DataFrame, int | None, list[DataFrame]]:
    """The state per key that `changes` leave on top of a table: tombstones and TRUNCATEs
    dropped with every change older than the newest TRUNCATE (or the table's `floor`), key
    changes' creates completed (`carry_over`) from `current`'s answer, then
    `latest_per_key`. Returns it, the TRUNCATE LSN still to apply (None: none newer than
    the floor), and the DataFrames cached on the way (unpersist them once the state is
    used).

    `current` is called once with the kept changes (their columns are the batch's layout)
    and returns the table's rows, None when there is none: the apply first gives the table
    the batch's columns there, so the rows carried over have its new schema. `facts`: the
    batch's `BatchFacts` when the caller knows them; else one aggregation finds them.

    Without key changes the state is one aggregation of the changes, each decoded once;
    key changes take the carry-over's passes first.

    The apply MERGEs this state; `bridge verify --spark` compares it with PostgreSQL, so
    both follow one set of rules."""
    if "_tombstone" in changes.columns:
        changes = changes.where(~sf.col("_tombstone"))
    if facts is None:
        facts = decoded_facts(changes)
    truncate = facts.truncate if (facts.truncate or 0) > floor else None
    low = max(floor, truncate or 0)
    if not facts.moved or OLD_KEY not in changes.columns:
        current(changes)
        latest = latest_per_key(
            changes, key_columns, ignore_null_updates=ignore_null_updates, floor=low
        )
        return latest, truncate, []
    kept = changes.where(
        (sf.col("op") != "t") & (sf.coalesce(sf.col("_lsn"), sf.lit(0)) >= sf.lit(low))
    )
    kept, cached = carry_over(kept, current(kept), key_columns, low)
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
    table_format: TableFormat | None = None,
    facts: BatchFacts | None = None,
) -> None:
    """MERGE one static DataFrame of change rows into the table `target`, creating or
    widening the table as needed: a Delta table (a path if it contains '/' or ':', else a
    table name) or an Iceberg table (a catalog table), see `bridge.spark.formats`.

    `column_list` keeps only those data columns (key columns always stay), and
    `except_column_list` leaves those out; a listed column the changes do not have yet is
    taken when a newer schema version brings it. `ignore_null_updates`: a null in an update
    keeps the target's value (Databricks' option of that name; unchanged TOASTed values are
    kept without it). `quarantine`: the table for the records changes read with
    mode="PERMISSIVE" could not decode (see `quarantine_failed`). `table_format`: "delta" or
    "iceberg" for `target` and `quarantine`; by default Iceberg for a table of an Iceberg
    catalog (`lake.db.items` with `spark.sql.catalog.lake` one), else Delta. `facts`: the
    changes' `BatchFacts` when the caller knows them (`fold`)."""
    if not key_columns:
        raise ConfigError("apply needs key_columns", hint="pass the table's primary key columns")
    changes = quarantine_failed(changes, quarantine, table_format)
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
    retyped = frozenset(f.name for f in changes.schema.fields if RETYPED in f.metadata)
    table = target_table(spark, target, table_format)
    existed = table.exists()
    layout: list[str] = []

    def current(kept: DataFrame) -> DataFrame | None:
        # The table takes the batch's columns and types first, so the rows the key changes
        # read from it (and any re-read after a write invalidates Spark's cache) have its
        # new schema.
        shape_of = latest_per_key(kept, key_columns)  # for its columns: nothing is computed
        layout.extend(c for c in shape_of.columns if c != "op" and c not in TARGET_META)
        shape = shape_of.select(
            *key_columns,
            *(sf.col(c)["v"].alias(c) for c in layout if c not in key_columns),
            *TARGET_META,
        )
        _ensure_table(table, shape, defaults, retyped)
        return table.read() if existed else None

    latest, truncate, cached = fold(
        changes,
        key_columns,
        floor=_truncated_lsn(table) if existed else 0,
        current=current,
        ignore_null_updates=ignore_null_updates,
        facts=facts,
    )
    latest = latest.persist()
    data = layout
    try:
        if truncate is not None:
            _truncate(table, truncate)
        _merge(table, latest, key_columns, data, hard_delete)
    finally:
        latest.unpersist()
        for df in cached:
            df.unpersist()


QUARANTINE_COLUMNS = ("_topic", "_partition", "_offset", "_schema_id", "_error")


def quarantine_failed(
    changes: DataFrame, quarantine: str | None, table_format: TableFormat | None = None
) -> DataFrame:
    """`changes` without the records that failed to decode (rows with `_error`, read with
    mode="PERMISSIVE"), which go to the table `quarantine` first: their coordinates,
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
        table = target_table(changes.sparkSession, quarantine, table_format)
        _ensure_table(table, failed, {})
        on = " AND ".join(f"t.{table.col(c)} = s.{c}" for c in QUARANTINE_COLUMNS[:3])
        insert = table.insert({c: f"s.{c}" for c in failed.columns})
        table.merge(failed, on, [f"WHEN NOT MATCHED THEN {insert}"])
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
    table: Target,
    latest: DataFrame,
    key_columns: Sequence[str],
    data: list[str],
    hard: bool,
) -> None:
    t = table.col
    on = " AND ".join(f"t.{t(k)} = s.{quote(k)}" for k in key_columns)
    lsn, offset = f"t.{t('_lsn')}", f"t.{t('_offset')}"
    newer = f"(s._lsn > {lsn} OR (s._lsn = {lsn} AND s._offset > {offset}))"
    meta = {m: f"s.{m}" for m in TARGET_META}
    values = {k: f"s.{quote(k)}" for k in key_columns}
    update = dict(values)
    for c in data:
        if c not in key_columns:
            values[c] = f"s.{quote(c)}.v"
            update[c] = f"CASE WHEN s.{quote(c)} IS NULL THEN t.{t(c)} ELSE s.{quote(c)}.v END"
    deleted = f"WHEN MATCHED AND {newer} AND s._deleted THEN"
    insert = table.insert({**values, **meta})
    table.merge(
        latest,
        on,
        [
            f"{deleted} DELETE" if hard else f"{deleted} UPDATE SET {table.assign(meta)}",
            f"WHEN MATCHED AND {newer} THEN UPDATE SET {table.assign({**update, **meta})}",
            f"WHEN NOT MATCHED AND NOT s._deleted THEN {insert}"
            if hard
            else f"WHEN NOT MATCHED THEN {insert}",
        ],
    )


def apply_changes(
    changes: DataFrame | ChangeStream,
    target: str,
    key_columns: Sequence[str],
    *,
    hard_delete: bool = False,
    checkpoint: str | None = None,
    trigger: dict[str, Any] | None = None,
    quarantine: str | None = None,
    table_format: TableFormat | None = None,
) -> StreamingQuery | None:
    """Apply a batch DataFrame now (returns None) or start a stream (returns the query).

    A stream is a `ChangeStream` from `read_changes(..., streaming=True)` (decoded per
    micro-batch) or an already-decoded streaming DataFrame; it needs `checkpoint`, and
    `trigger` takes DataStreamWriter.trigger's keywords, e.g. {"availableNow": True}. A
    micro-batch that Spark re-runs after a failure finds its changes applied and does nothing.
    `quarantine`, `table_format`: see `apply_batch`. Many tables in one query:
    `bridge.spark.tables`.
    """
    options: dict[str, Any] = {
        "hard_delete": hard_delete,
        "quarantine": quarantine,
        "table_format": table_format,
    }
    if isinstance(changes, DataFrame) and not changes.isStreaming:
        apply_batch(changes, target, key_columns, **options)
        return None
    if checkpoint is None:
        raise ConfigError("a streaming apply needs checkpoint=", hint="pass a checkpoint dir")
    if isinstance(changes, ChangeStream):
        stream, decoder = changes.raw, changes.decoder

        def run(batch: DataFrame, _batch_id: int) -> None:
            cached = decoder.cache(batch)
            try:
                found = decoder.facts(cached)
                groups = [g for t in found.values() for g in t.groups]
                facts = known_facts(decoder, cached, list(found.values()))
                decoded = decoder.decode(cached, groups)
                apply_batch(decoded, target, key_columns, **options, facts=facts)
            finally:
                cached.unpersist()

    else:
        stream = changes

        def run(batch: DataFrame, _batch_id: int) -> None:
            batch.persist()  # read twice: the batch's facts, then the MERGE
            try:
                apply_batch(batch, target, key_columns, **options)
            finally:
                batch.unpersist()

    writer = stream.writeStream.foreachBatch(run).option("checkpointLocation", checkpoint)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()
