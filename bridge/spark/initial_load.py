"""The initial load of the target tables, read straight from PostgreSQL by Spark's executors
in parallel, inside the snapshot the bridge holds (snapshot.mode: external).

    load = open_external_load(cfg)                          # bridge.snapshot.external
    initial_load(spark, load, {"srv.public.items": "/lake/items"}, registry_url=url)
    apply_changes(read_changes(..., streaming=True), "/lake/items", ["id"], checkpoint=...)

Each load task is one chunk (a primary-key range, or a ctid block range without a key): a
Spark task imports the held snapshot with psycopg, reads its chunk in PostgreSQL's text
format and encodes the rows with the bridge's own encoders, into the very records the
bridge's snapshot would put in Kafka (op "r", commit LSN = the hand-over LSN L). They are
decoded like the topics (`ChangeDecoder`), so a loaded row has the types and values a
streamed one has. Spark's JDBC source can import a snapshot too (`sessionInitStatement`),
but its type mapping is not the topics' (interval, time, uuid, arrays, numeric without a
scale, out-of-range dates, unchanged-TOAST handling...): a second conversion of every type,
and one table written by two of them.

Each table is written in one Spark job (overwrite, so a failed load is simply run again):
its rows with position (L, -1), below every streamed change, and L recorded as the table's
floor (`bridge.truncatedLsn`, the property a TRUNCATE sets): the apply drops every change
older than L (the snapshot holds its effect already) and applies the others over the loaded
rows by its (LSN, offset) guard. The stream holds every change from L on, so nothing is
missing and, since a re-applied change is a no-op, nothing is doubled. Start the streaming
apply once the load has returned (from the topics' earliest offsets, with a new checkpoint).

When every table is written, the load is recorded as done and the bridge releases the
snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from bridge.record import KafkaRecord
from bridge.spark.apply import TARGET_META, _truncate
from bridge.spark.formats import TableFormat, target_table
from bridge.spark.reader import META_TYPES, ChangeDecoder
from bridge.spark.registry import SchemaSource

# a record and the string of the decoder's `carry` column
CarryingRecord = tuple[KafkaRecord, str]
LOADED_OFFSET = -1  # a loaded row's `_offset`: below any Kafka offset at the same LSN
_RAW = StructType(
    [
        StructField("topic", StringType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
    ]
)


class LoadTable(Protocol):
    """One table of the load: its topic, the schema id of its records, its tasks."""

    @property
    def topic(self) -> str: ...

    @property
    def value_schema_id(self) -> int: ...

    @property
    def tasks(self) -> Sequence[Any]: ...


class SnapshotLoad(Protocol):
    """What the load reads (`bridge.snapshot.external.ExternalLoad`)."""

    @property
    def lsn(self) -> int: ...

    def tables(self) -> Sequence[LoadTable]: ...

    def reader(self) -> Callable[[Any], Iterable[KafkaRecord]]: ...

    def finish(self) -> None: ...


def initial_load(
    spark: SparkSession,
    load: SnapshotLoad,
    targets: Mapping[str, str] | Callable[[str], str],
    *,
    registry_url: str,
    registry_auth: tuple[str, str] | None = None,
    table_format: TableFormat | None = None,
) -> dict[str, int]:
    """Write every table of `load` to its target, then mark the load done.

    `targets` maps a topic to its target (Delta: a path if it contains '/' or ':', else a
    table name; Iceberg: a catalog table, see `bridge.spark.formats` and `table_format`), as
    a mapping or a function; a topic a mapping lacks is not loaded. Returns the rows written
    per target."""
    read = load.reader()
    written: dict[str, int] = {}
    schemas = SchemaSource(registry_url, registry_auth)
    try:
        for table in load.tables():
            target = (
                targets.get(table.topic) if isinstance(targets, Mapping) else targets(table.topic)
            )
            if target is None:
                continue
            rows = loaded_rows(spark, ChangeDecoder(schemas), table, read)
            lake = target_table(spark, target, table_format)
            written[target] = lake.replace(rows)  # one commit: a failed load is run again
            _truncate(lake, int(load.lsn))  # removes nothing (every row is at L): the floor
    finally:
        schemas.close()
    load.finish()
    return written


def loaded_rows(
    spark: SparkSession,
    decoder: ChangeDecoder,
    table: LoadTable,
    read: Callable[[Any], Iterable[KafkaRecord]] | Callable[[Any], Iterable[CarryingRecord]],
) -> DataFrame:
    """The table's rows as target rows: one Spark partition per task, decoded as the topic;
    the columns the decoder carries come after each record's value, as strings."""
    tasks = list(table.tasks)
    records = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).flatMap(read).map(_row)
    carried = [StructField(c, StringType()) for c in decoder.carry]
    raw = spark.createDataFrame(records, StructType([*_RAW.fields, *carried])).select(
        "topic",
        sf.lit(-1).cast("int").alias("partition"),
        sf.lit(LOADED_OFFSET).cast("bigint").alias("offset"),
        "key",
        "value",
        *decoder.carry,
    )
    changes = decoder.decode(raw, [(table.topic, table.value_schema_id, None, None)])
    data = [c for c in changes.columns if c not in META_TYPES]
    return changes.select(*data, *TARGET_META)


def _row(item: Any) -> tuple[Any, ...]:
    """A record as a row of `_RAW` (topic, key, value), then the carried string if any."""
    if isinstance(item, KafkaRecord):
        return item.topic, item.key, item.value
    record, carried = item
    return record.topic, record.key, record.value, carried
