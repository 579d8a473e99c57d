"""Many tables, one streaming query: every topic of a list or pattern MERGEd into its own table.

`apply_tables` runs one Structured Streaming query over the raw Kafka stream of a
`ChangeStream`. Each micro-batch (inside `foreachBatch`, where it is a static DataFrame) is
split by topic, each topic decoded with its own reader schema and applied with
`bridge.spark.apply.apply_batch` into the table its topic names through `target` (a template
or a function), keyed by the fields of the topic's key schema in the registry. Tables are
created on first sight.

Exactly-once into the targets across restarts: the checkpoint makes Spark re-run an
interrupted micro-batch with the same offsets, and the apply's (commit LSN, offset) guard
makes every table that batch already reached ignore its changes the second time. Each step
of a table's apply (create, add or widen columns, TRUNCATE, MERGE) is one atomic commit (a
Delta commit, an Iceberg snapshot or schema change) that a re-run repeats without effect,
with one gap: a column added with a default is added in one commit and filled into existing
rows in the next, and a kill between them leaves those rows null (a re-run finds the column
there and fills nothing).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pyspark.sql import DataFrame
from pyspark.sql.streaming.query import StreamingQuery

from bridge.errors import ConfigError, SchemaError
from bridge.spark.apply import apply_batch, known_facts
from bridge.spark.formats import TableFormat
from bridge.spark.history import apply_history
from bridge.spark.reader import ChangeDecoder, ChangeStream
from bridge.spark.registry import row_fields

Target = str | Callable[[str], str]
_NOT_WORD = re.compile(r"[^0-9A-Za-z_]")


@dataclass(frozen=True)
class TableOptions:
    """How one table is applied: `keys` (None = the fields of the topic's key schema) and
    `apply_batch`'s options."""

    keys: Sequence[str] | None = None
    hard_delete: bool = False
    column_list: Sequence[str] | None = None
    except_column_list: Sequence[str] = field(default_factory=tuple)
    ignore_null_updates: bool = False
    scd_type: Literal[1, 2] = 1  # 2: keep every version (`bridge.spark.history`)
    track_history_column_list: Sequence[str] | None = None
    track_history_except_column_list: Sequence[str] = field(default_factory=tuple)


def target_of(target: Target, topic: str) -> str:
    """The table of `topic`: `target(topic)`, or the template `target` filled with `{topic}`,
    `{prefix}`, `{schema}` and `{table}` (the bridge's topics are prefix.schema.table). A
    template without '/' or ':' names a catalog table: each value's characters other than
    letters, digits and '_' become '_' there, so a topic always gives a valid name."""
    if callable(target):
        return target(topic)
    parts = topic.split(".")
    values = {"topic": topic}
    if len(parts) >= 3:
        values |= {"prefix": ".".join(parts[:-2]), "schema": parts[-2], "table": parts[-1]}
    if "/" not in target and ":" not in target:
        values = {k: _NOT_WORD.sub("_", v) for k, v in values.items()}
    try:
        return target.format_map(values)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"target template {target!r} cannot be filled for topic {topic}: {exc!r}",
            hint="use {topic}, {prefix}, {schema}, {table}, or pass a function",
        ) from None


def key_columns(decoder: ChangeDecoder, topic: str, options: TableOptions) -> list[str]:
    """`options.keys`, else the fields of the topic's key schema: the table's primary key
    (or replica identity) as the bridge writes it."""
    if options.keys is not None:
        return list(options.keys)
    schema = decoder.schemas.newest(f"{topic}-key")
    if schema is None:
        raise SchemaError(
            f"topic {topic} has no key schema: its table has no primary key or replica "
            "identity index to MERGE by",
            hint=f"give its key columns: tables={{{topic!r}: TableOptions(keys=[...])}}",
        )
    return row_fields(schema)


def apply_tables_batch(
    decoder: ChangeDecoder,
    batch: DataFrame,
    target: Target,
    tables: Mapping[str, TableOptions],
    default: TableOptions,
    quarantine: str | None = None,
    table_format: TableFormat | None = None,
) -> None:
    """Apply one static DataFrame of raw Kafka rows (a micro-batch; read once when cached,
    `ChangeDecoder.cache`) to every table it touches, one topic after the other in name
    order. One pass over the raw records finds each topic's writer schemas and whether
    it holds TRUNCATEs or key changes (`batch_facts`); then each topic's records are
    decoded once, into its table's MERGE."""
    for topic, found in decoder.facts(batch).items():
        options = tables.get(topic, default)
        changes = decoder.decode(batch, found.groups)
        name, keys = target_of(target, topic), key_columns(decoder, topic, options)
        if options.scd_type == 2:
            apply_history(
                changes,
                name,
                keys,
                track_history_column_list=options.track_history_column_list,
                track_history_except_column_list=options.track_history_except_column_list,
                column_list=options.column_list,
                except_column_list=options.except_column_list,
                quarantine=quarantine,
                table_format=table_format,
            )
            continue
        apply_batch(
            changes,
            name,
            keys,
            hard_delete=options.hard_delete,
            column_list=options.column_list,
            except_column_list=options.except_column_list,
            ignore_null_updates=options.ignore_null_updates,
            quarantine=quarantine,
            table_format=table_format,
            facts=known_facts(decoder, batch, [found]),
        )


def apply_tables(
    stream: ChangeStream,
    target: Target,
    *,
    checkpoint: str,
    tables: Mapping[str, TableOptions] | None = None,
    default: TableOptions | None = None,
    trigger: dict[str, Any] | None = None,
    quarantine: str | None = None,
    table_format: TableFormat | None = None,
) -> StreamingQuery:
    """Start one streaming query applying every topic of `stream` (`read_changes(...,
    topics=[...] or pattern=..., streaming=True)`) to its own table.

    `target`: a template such as "/lake/{schema}/{table}" or "lake.{schema}_{table}" (an
    Iceberg catalog's "ice.{schema}.{table}"), or a function of the topic. `table_format`:
    "delta" or "iceberg" for every table; by default each target's catalog decides
    (`bridge.spark.apply.apply_batch`). `tables`: per-topic `TableOptions` (keys for a table without
    a key schema, column lists, ...); `default` for every other topic. `trigger` takes
    DataStreamWriter.trigger's keywords, e.g. {"availableNow": True}. `quarantine`: the
    table for undecodable records, needed when the stream was read with mode="PERMISSIVE"
    (`bridge.spark.apply.quarantine_failed`)."""
    if stream.decoder.permissive and quarantine is None:
        raise ConfigError(
            'a stream read with mode="PERMISSIVE" needs quarantine=',
            hint="pass quarantine='/lake/_quarantine' (a path or a table name)",
        )
    chosen = dict(tables or {})
    fallback = default or TableOptions()
    decoder = stream.decoder

    def run(batch: DataFrame, _batch_id: int) -> None:
        cached = decoder.cache(batch)
        try:
            apply_tables_batch(decoder, cached, target, chosen, fallback, quarantine, table_format)
        finally:
            cached.unpersist()

    writer = stream.raw.writeStream.foreachBatch(run).option("checkpointLocation", checkpoint)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()
