"""The bridge's topics as a DataFrame of flat change rows.

Records are Confluent-framed Avro (magic byte 0, 4-byte big-endian schema id, Avro body), so
one topic holds several writer schemas after an ALTER TABLE. Each writer id is decoded with
`from_avro(body, writer, {"avroSchema": reader})`, the reader being the latest version of the
topic's value subject, so every version lands in one column layout.

An ALTER the registry refuses (int -> text) is registered by the bridge under the subject's
next generation (`<topic>-value-v2`: `bridge.spark.registry`). Each writer id is then read
with the latest version of the generation that holds it, and the older generations' columns
are cast to the newest's types (`try_cast`: a value the new type cannot hold reads as
null; PostgreSQL rewrote such rows with its own USING, which no record carries). A column
so retyped carries `RETYPED` in its metadata, and `bridge.spark.apply` rewrites a table's
column to the new type rather than stopping, as PostgreSQL rewrote the table.

Batch reads pin the offset range first: the pass that finds the writer ids also records each
partition's first and last offset, and the returned DataFrame reads exactly that range, so a
record produced meanwhile can neither be half-seen nor carry an undecodable new id.

Streaming reads cannot know future ids when the query is planned, so `read_changes(...,
streaming=True)` returns a `ChangeStream`: the raw Kafka stream plus `decode`, applied to each
micro-batch inside `foreachBatch` (where the batch is static and its ids can be collected).
New writer ids, and the newer reader schema they imply, are fetched as they appear.

The create of a primary-key change carries Debezium's `__debezium.oldkey` header (the old
key's framed Avro bytes): it is decoded with the key schema into `_oldkey`, the old key as a
JSON object (one string type whatever the table, so topics still union), which
`bridge.spark.apply` uses to carry unchanged TOASTed values over to the new key.

A column added with a constant default (`ADD COLUMN ... DEFAULT`) has that default as its
Avro field default: Avro schema resolution gives it to records written before the column
existed, and the column carries the row schema in its metadata (`DEFAULT_ROW`) so that
`bridge.spark.apply` fills it into the rows a table already holds when the column arrives.
"""

from __future__ import annotations

import json
import re
import struct
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, NamedTuple, overload

from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.types import DataType, StructType

from bridge.errors import ConfigError, SchemaError
from bridge.spark.registry import (
    SchemaSource,
    changed_fields,
    defaulted_row,
    row_fields,
    source_fields,
)

Tombstones = Literal["drop", "keep"]
Mode = Literal["FAILFAST", "PERMISSIVE"]
# (topic, value schema id, tombstone key schema id, schema id of a create's old key header)
Group = tuple[str, int | None, int | None, int | None]
OLD_KEY_HEADER = "__debezium.oldkey"  # bridge.encode.records' name (spark imports no bridge layer)
# Column metadata of a column whose field has a non-null default: the row record's schema,
# from which `bridge.spark.apply` computes the default when the column reaches a table.
DEFAULT_ROW = "bridge.avro.row"
# Column metadata of a column whose type differs between the subject's generations.
RETYPED = "bridge.avro.retyped"

# `_seq`: one orderable column per change (struct comparison is field by field): the commit
# LSN, then the change's own LSN (its position in the transaction), then the Kafka offset
# (ties only between changes of records written before `source.commit_lsn` existed).
SEQ_TYPE = "struct<commit_lsn:bigint,lsn:bigint,offset:bigint>"

META_TYPES = {
    "op": "string",
    "_lsn": "bigint",
    "_seq": SEQ_TYPE,
    "_txid": "bigint",
    "_commit_ts": "timestamp",
    "_deleted": "boolean",
    "_unchanged": "array<string>",
    "_oldkey": "string",
    "_topic": "string",
    "_partition": "int",
    "_offset": "bigint",
    "_tombstone": "boolean",
    "_schema_id": "bigint",
    "_error": "string",
}
_KAFKA_POSITION = ("_topic", "_partition", "_offset")
_NOT_FRAMED = "is not Confluent-framed Avro (magic byte 0)"
_HEADER = struct.Struct(">bI")  # the framing: magic byte 0, the writer schema id
_OFFSET_OPTIONS = {
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
}


def _schema_id(header: Column) -> Column:
    """The writer schema id of a framing (`_header`), null for null: only PERMISSIVE's error
    rows read it as a number."""
    return sf.conv(sf.hex(sf.substring(header, 2, 4)), 16, 10).cast("bigint")


def _body(data: Column) -> Column:
    return data.substr(sf.lit(6), sf.length(data) - 5)


def _old_key(raw: DataFrame) -> Column:
    """The `__debezium.oldkey` header's bytes, null without one (or without headers)."""
    if "headers" not in raw.columns:
        return sf.lit(None).cast("binary")
    found = sf.filter(sf.col("headers"), lambda h: h["key"] == sf.lit(OLD_KEY_HEADER))
    return sf.when(sf.size(found) > 0, found.getItem(0)["value"])


def _header(data: Column, strict: bool) -> Column:
    """The 5-byte framing (magic byte 0, writer schema id) of framed bytes, null for null
    bytes; bytes without the framing fail the query, or (not `strict`) read as null.

    The decode compares these bytes with binary literals, never the id as a number:
    Spark's generated code writes a number literal into its source and shares a
    compiled class only between plans that are the same text, so tables that differ
    only in their schema ids would each compile their own."""
    framed = (sf.substring(data, 1, 1) == sf.lit(bytearray(1))) & (sf.length(data) >= 5)
    found = sf.when(data.isNull(), sf.lit(None).cast("binary")).when(
        framed, sf.substring(data, 1, 5)
    )
    if not strict:
        return found
    return found.otherwise(sf.raise_error(_not_framed()))


def _not_framed() -> Column:
    return sf.format_string(
        "topic %s partition %d offset %d " + _NOT_FRAMED,
        sf.col("topic"),
        sf.col("partition"),
        sf.col("offset"),
    )


def header_of(schema_id: int) -> Column:
    """The framing of records written with `schema_id`, as a binary literal."""
    return sf.lit(bytearray(_HEADER.pack(0, schema_id)))


def schema_id_of(header: bytes | bytearray | None) -> int | None:
    return None if header is None else int(_HEADER.unpack(bytes(header))[1])


def frame(raw: DataFrame, *, strict: bool = True, carry: Sequence[str] = ()) -> DataFrame:
    """Kafka rows -> position columns, key/value bytes, the old key header's bytes, their
    framings (`_vh`, `_kh` for a tombstone's key, `_okh`: `_header`) and writer schema ids
    (`_vid`, `_kid`, `_okid`; null for unframed bytes unless `strict`), and the `carry`
    columns. The ids cost a conversion per row: only PERMISSIVE's error rows use them."""
    value, key, old_key = sf.col("value"), sf.col("key"), _old_key(raw)
    return raw.select(
        sf.col("topic").alias("_topic"),
        sf.col("partition").alias("_partition"),
        sf.col("offset").alias("_offset"),
        key,
        value,
        old_key.alias("_okey"),
        _header(value, strict).alias("_vh"),
        sf.when(value.isNull(), _header(key, strict)).alias("_kh"),
        _header(old_key, strict).alias("_okh"),
        _schema_id(_header(value, strict)).alias("_vid"),
        sf.when(value.isNull(), _schema_id(_header(key, strict))).alias("_kid"),
        _schema_id(_header(old_key, strict)).alias("_okid"),
        *carry,
    )


class TopicFacts(NamedTuple):
    """What one pass over a batch's raw records tells of a topic, without decoding them."""

    groups: frozenset[Group]  # the (topic, value id, tombstone key id, old key id) present
    records: int
    keyless: int  # records with a value and no key: TRUNCATEs (every change of a keyless table)
    moved: int  # records with an old key header: the creates of primary-key changes


def batch_facts(framed: DataFrame) -> dict[str, TopicFacts]:
    """`TopicFacts` per topic of a framed batch, in one aggregation of raw columns (with a
    strict framing, the records that are not the bridge's fail it, as `collect` says)."""
    rows = collect(
        framed.groupBy("_topic", "_vh", "_kh", "_okh").agg(
            sf.count(sf.lit(1)).alias("n"),
            sf.count_if(sf.col("key").isNull() & sf.col("value").isNotNull()).alias("keyless"),
        )
    )
    groups: dict[str, set[Group]] = defaultdict(set)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in rows:
        topic, okid = r["_topic"], schema_id_of(r["_okh"])
        groups[topic].add((topic, schema_id_of(r["_vh"]), schema_id_of(r["_kh"]), okid))
        tally = counts[topic]
        tally[0] += r["n"]
        tally[1] += r["keyless"]
        tally[2] += r["n"] if okid is not None else 0
    return {t: TopicFacts(frozenset(groups[t]), *counts[t]) for t in sorted(groups)}


def collect(df: DataFrame) -> list[Row]:
    """`df.collect()`, with a record that is not the bridge's framing reported as such."""
    try:
        return df.collect()
    except CapturedException as exc:
        text = str(exc)
        if _NOT_FRAMED not in text:
            raise
        found = re.search(r"topic \S+ partition \d+ offset \d+ " + re.escape(_NOT_FRAMED), text)
        raise SchemaError(
            found.group(0) if found else _NOT_FRAMED,
            hint="read only topics the bridge writes, or skip the record with startingOffsets",
        ) from None


class ChangeDecoder:
    """Turns static DataFrames of raw Kafka rows into flat change rows."""

    def __init__(
        self,
        schemas: SchemaSource,
        tombstones: Tombstones = "drop",
        mode: Mode = "FAILFAST",
        carry: Sequence[str] = (),
    ) -> None:
        """`carry`: columns of the raw rows beside Kafka's that the decoded rows keep
        (`bridge.verify.distributed`'s PostgreSQL key text)."""
        self.schemas = schemas
        self.tombstones = tombstones
        self.permissive = mode == "PERMISSIVE"
        self.carry = tuple(carry)
        self._known: set[tuple[str, int]] = set()
        self._grouped: set[tuple[str, int]] = set()  # (subject, id) placed in a generation

    def cache(self, batch: DataFrame) -> DataFrame:
        """A micro-batch's raw records read from Kafka once, kept (memory, then disk) for the
        passes over it: its columns the decoding reads, in as many partitions as the
        session has cores. Kafka gives one partition per topic partition, and every job
        over the batch runs a task per partition: per table, tasks would grow with the
        number of tables; coalesced, the partitions keep each topic's records together,
        so a table's read skips the other topics' cached blocks by their statistics."""
        wanted = ("topic", "partition", "offset", "key", "value", "headers", *self.carry)
        parallelism = batch.sparkSession.sparkContext.defaultParallelism
        kept = batch.select(*(c for c in wanted if c in batch.columns))
        return kept.coalesce(max(1, parallelism)).persist()

    def facts(self, raw: DataFrame) -> dict[str, TopicFacts]:
        """`batch_facts` of a static Kafka DataFrame."""
        return batch_facts(frame(raw, strict=not self.permissive))

    def keyless(self, raw: DataFrame, groups: Iterable[Group]) -> DataFrame:
        """The decoded records of `raw` that have a value and no key (TRUNCATEs among them),
        only those decoded."""
        return self.decode(raw.where(sf.col("key").isNull() & sf.col("value").isNotNull()), groups)

    def groups(self, framed: DataFrame) -> set[Group]:
        return {g for facts in batch_facts(framed).values() for g in facts.groups}

    def decode(self, raw: DataFrame, groups: Iterable[Group] | None = None) -> DataFrame:
        """Flat change rows of a static Kafka DataFrame (a batch read or a micro-batch)."""
        framed = frame(raw, strict=not self.permissive, carry=self.carry)
        found = self.groups(framed) if groups is None else set(groups)
        values: dict[str, set[int]] = defaultdict(set)
        keys: dict[str, set[int]] = defaultdict(set)
        old_keys: dict[str, set[int]] = defaultdict(set)
        failed: set[tuple[str, int | None]] = set()
        for topic, vid, kid, okid in found:
            if self.permissive and ((vid is None and kid is None) or not self._readable(vid)):
                failed.add((topic, vid))
            elif vid is not None:
                values[topic].add(vid)
                if okid is not None:
                    old_keys[topic].add(okid)
            elif kid is not None and self.tombstones == "keep":
                keys[topic].add(kid)
        parts = [
            self._decoded(framed, topic, sorted(ids), f"{topic}-value", sorted(old_keys[topic]))
            for topic, ids in sorted(values.items())
        ]
        parts += [
            self._decoded(framed, topic, sorted(ids), f"{topic}-key")
            for topic, ids in sorted(keys.items())
        ]
        flat = [p for part in parts for p in part]
        flat += [self._failed(framed, topic, vid) for topic, vid in sorted(failed, key=str)]
        if not flat:
            return framed.where(sf.lit(False)).select(*self._meta_columns(tombstone=False))
        out = flat[0]
        for other in flat[1:]:
            out = out.unionByName(other, allowMissingColumns=True)
        return out

    def _readable(self, schema_id: int | None) -> bool:
        """Whether the registry has the writer schema `schema_id` (None: nothing to read)."""
        try:
            return schema_id is None or bool(self.schemas.writer(schema_id))
        except SchemaError:
            return False

    def _failed(self, framed: DataFrame, topic: str, schema_id: int | None) -> DataFrame:
        """PERMISSIVE: the records of `topic` that cannot be decoded at all, with `_error`:
        value bytes without the framing (`schema_id` None), or a writer id the registry
        does not know. A tombstone with an unframed key is among them only when tombstones
        are kept."""
        if schema_id is None:
            unframed = sf.col("value").isNotNull() & sf.col("_vid").isNull()
            if self.tombstones == "keep":
                unframed |= sf.col("value").isNull() & sf.col("_kid").isNull()
            rows, error = framed.where(unframed), sf.lit("the record " + _NOT_FRAMED)
        else:
            rows = framed.where(sf.col("_vh") == header_of(schema_id))
            error = sf.lit(f"schema id {schema_id} is not in the registry")
        return rows.where(sf.col("_topic") == topic).select(
            *_KAFKA_POSITION,
            sf.coalesce(sf.col("_vid"), sf.col("_kid")).alias("_schema_id"),
            error.alias("_error"),
        )

    def _generations(self, subject: str, ids: list[int]) -> list[tuple[str, list[int]]]:
        """`ids` by the generation of `subject` that holds each, newest first; the
        generations read again when an id is new to this decoder."""
        fresh = any((subject, i) not in self._grouped for i in ids)
        self._grouped.update((subject, i) for i in ids)
        found = self.schemas.generations(subject, refresh=fresh)
        if len(found) <= 1:
            return [(subject, ids)]
        held: dict[str, list[int]] = defaultdict(list)
        for i in ids:
            held[self.schemas.holder(found, i)].append(i)
        return [(g, held[g]) for g in reversed(found) if g in held]

    def _reader(self, subject: str, ids: list[int]) -> str | None:
        """Latest schema of the subject, re-read when a writer id is new to this decoder."""
        fresh = any((subject, i) not in self._known for i in ids)
        reader = self.schemas.latest(subject, refresh=fresh)
        self._known.update((subject, i) for i in ids)
        return reader

    def _decoded(
        self,
        framed: DataFrame,
        topic: str,
        ids: list[int],
        subject: str,
        old_key_ids: list[int] | None = None,
    ) -> list[DataFrame]:
        old_key = self._old_key(topic, old_key_ids or [])
        parts = []
        for generation, held in self._generations(subject, ids):
            reader = self._reader(generation, held)
            if reader is None:  # no subject to read with: each writer schema is its own layout
                parts += [
                    self._select(framed, topic, [i], self.schemas.writer(i), subject, old_key)
                    for i in held
                ]
            else:
                parts.append(self._select(framed, topic, held, reader, subject, old_key))
        generations = self.schemas.generations(subject)
        return self._as_newest(framed, parts, generations) if len(generations) > 1 else parts

    def _as_newest(
        self, framed: DataFrame, parts: list[DataFrame], generations: list[str]
    ) -> list[DataFrame]:
        """The parts of a subject with several generations in the newest one's column
        types (older ones cast, `try_cast`), the columns whose type differs between
        generations marked `RETYPED` in every part (a batch of old records only too)."""
        newest = self.schemas.latest(generations[-1])
        assert newest is not None  # `generations` lists subjects that exist
        types = _row_types(framed, newest)
        retyped: set[str] = set()
        for older in generations[:-1]:
            schema = self.schemas.latest(older)
            retyped |= changed_fields(schema, newest) if schema is not None else set()
        out = []
        for part in parts:
            fields = {f.name: f for f in part.schema.fields}
            cast = {
                c: sf.col(c).try_cast(t)
                for c, t in types.items()
                if c in fields and fields[c].dataType != t
            }
            newest_types = part.withColumns(cast) if cast else part
            for c in sorted(retyped & fields.keys()):
                metadata = {**fields[c].metadata, RETYPED: "true"}
                newest_types = newest_types.withMetadata(c, metadata)
            out.append(newest_types)
        return out

    def _from_avro(self, data: Column, framing: Column, ids: list[int], reader: str) -> Column:
        """`data` (framed) decoded by its writer id, read as `reader`."""
        options = {"avroSchema": reader, "mode": "PERMISSIVE" if self.permissive else "FAILFAST"}
        decoded: Column | None = None
        for schema_id in ids:
            parsed = from_avro(_body(data), self.schemas.writer(schema_id), options)
            cond = framing == header_of(schema_id)
            decoded = sf.when(cond, parsed) if decoded is None else decoded.when(cond, parsed)
        assert decoded is not None
        return decoded

    def _old_key(self, topic: str, ids: list[int]) -> Column:
        """`_oldkey`: the old key header decoded with the key subject's latest schema (or,
        without a subject, the newest writer's), as JSON; null on every other record."""
        if not ids:
            return sf.lit(None).cast("string")
        subject = f"{topic}-key"
        found = [
            sf.to_json(
                self._from_avro(
                    sf.col("_okey"),
                    sf.col("_okh"),
                    held,
                    self._reader(generation, held) or self.schemas.writer(max(held)),
                )
            )
            for generation, held in self._generations(subject, ids)
        ]
        return found[0] if len(found) == 1 else sf.coalesce(*found)

    def _select(
        self,
        framed: DataFrame,
        topic: str,
        ids: list[int],
        reader: str,
        subject: str,
        old_key: Column | None = None,
    ) -> DataFrame:
        is_key = subject.endswith("-key")
        framing, id_col, data = (
            (sf.col("_kh"), sf.col("_kid"), sf.col("key"))
            if is_key
            else (sf.col("_vh"), sf.col("_vid"), sf.col("value"))
        )
        decoded = self._from_avro(data, framing, ids, reader)
        fields = row_fields(reader)
        clash = sorted(set(fields) & set(META_TYPES))
        if clash:
            raise SchemaError(
                f"topic {topic}: column(s) {', '.join(clash)} collide with the reader's "
                "metadata columns",
                hint="rename the column(s) in PostgreSQL or read the topic with from_avro",
            )
        wanted = framing.isin(*(header_of(i) for i in ids))
        rows = framed.where((sf.col("_topic") == topic) & wanted).select(
            decoded.alias("_e"),
            id_col.alias("_schema_id"),
            (sf.lit(None).cast("string") if old_key is None else old_key).alias("_oldkey"),
            *_KAFKA_POSITION,
            *self.carry,
        )
        e = sf.col("_e")
        if is_key:
            # a key's fields are the primary key's columns: never all null in a good record
            undecoded = sf.coalesce(*(e[f] for f in fields)).isNull()
            errors = self._errors(undecoded, subject) if self.permissive else []
            return rows.select(
                *(e[f].alias(f) for f in fields),
                *self._meta_columns(tombstone=True),
                *errors,
                *self.carry,
            )
        row = sf.when(e["op"] == "d", e["before"]).otherwise(e["after"])
        source = e["source"]
        defaulted = defaulted_row(reader)
        filled = set(defaulted[1]) if defaulted else set()
        columns: list[Column] = [
            e["op"].alias("op"),
            *(
                row[f].alias(f, metadata={DEFAULT_ROW: defaulted[0]})
                if defaulted and f in filled
                else row[f].alias(f)
                for f in fields
            ),
            _commit_lsn(source, reader).alias("_lsn"),
            _sequence(source, reader).alias("_seq"),
            source["txId"].alias("_txid"),
            sf.timestamp_millis(source["ts_ms"]).alias("_commit_ts"),
            (e["op"] == "d").alias("_deleted"),
            e["unchanged_fields"].alias("_unchanged"),
            sf.col("_oldkey"),
            *(sf.col(c) for c in _KAFKA_POSITION),
            *(sf.col(c) for c in self.carry),
        ]
        if self.tombstones == "keep":
            columns.append(sf.lit(False).alias("_tombstone"))
        if self.permissive:
            columns += self._errors(e["op"].isNull(), subject)  # op: never null when read
        return rows.select(*columns)

    def _errors(self, undecoded: Column, subject: str) -> list[Column]:
        """PERMISSIVE: `_schema_id` and `_error` (null on a record that decoded). from_avro
        gives a record it cannot read as a struct of nulls (not a null struct), which
        `undecoded` recognises."""
        error = sf.format_string(
            f"from_avro could not read the record (writer schema id %d) with the latest schema "
            f"of {subject}",
            sf.col("_schema_id"),
        )
        return [sf.col("_schema_id"), sf.when(undecoded, error).alias("_error")]

    def _meta_columns(self, *, tombstone: bool) -> list[Column]:
        """Typed metadata columns for rows that have no envelope (tombstones, empty reads)."""
        out: list[Column] = []
        for name, kind in META_TYPES.items():
            if name in _KAFKA_POSITION:
                out.append(sf.col(name))
            elif name == "_tombstone":
                if self.tombstones == "keep":
                    out.append(sf.lit(tombstone).alias(name))
            elif name == "_deleted":
                out.append(sf.lit(tombstone).alias(name))
            elif name in ("_schema_id", "_error"):
                continue  # PERMISSIVE's, added by `_errors` / `_failed`
            else:
                out.append(sf.lit(None).cast(kind).alias(name))
        return out


def _row_types(framed: DataFrame, reader: str) -> dict[str, DataType]:
    """The Spark types of the row columns `reader` (an envelope or a key record) decodes
    to, from the plan alone (nothing is read)."""
    decoded = framed.select(from_avro(sf.lit(None).cast("binary"), reader).alias("e"))
    record = decoded.schema["e"].dataType
    assert isinstance(record, StructType)
    if "after" in record.fieldNames():
        row = record["after"].dataType
        assert isinstance(row, StructType)
        record = row
    return {f.name: f.dataType for f in record.fields}


class ChangeStream:
    """A streaming read: the raw Kafka stream, decoded per micro-batch by `decode`."""

    def __init__(self, raw: DataFrame, decoder: ChangeDecoder) -> None:
        self.raw = raw
        self.decoder = decoder

    def decode(self, batch: DataFrame) -> DataFrame:
        return self.decoder.decode(batch)


def _source_options(
    topics: Iterable[str] | str | None, pattern: str | None, kafka_options: Mapping[str, str]
) -> dict[str, str]:
    if (topics is None) == (pattern is None):
        raise ConfigError(
            "read_changes needs exactly one of topics= and pattern=",
            hint="topics=['prefix.schema.table'] or pattern=r'prefix\\..*'",
        )
    if "kafka.bootstrap.servers" not in kafka_options:
        raise ConfigError(
            "kafka_options lacks 'kafka.bootstrap.servers'",
            hint="pass kafka_options={'kafka.bootstrap.servers': 'host:port', ...}",
        )
    # Headers link the two sides of a primary-key change (`_oldkey`): always read.
    options = {"startingOffsets": "earliest", **kafka_options, "includeHeaders": "true"}
    if topics is not None:
        names = [topics] if isinstance(topics, str) else list(topics)
        options["subscribe"] = ",".join(names)
    else:
        assert pattern is not None
        options["subscribePattern"] = pattern
    return options


def _pinned(
    spark: SparkSession, options: dict[str, str], *, strict: bool
) -> tuple[DataFrame, set[Group]]:
    """The exact offset range present now, and the writer ids found in it."""
    framed = frame(spark.read.format("kafka").options(**options).load(), strict=strict)
    stats = collect(
        framed.groupBy("_topic", "_partition", "_vh", "_kh", "_okh").agg(
            sf.min("_offset").alias("lo"), sf.max("_offset").alias("hi")
        )
    )
    keep = {k: v for k, v in options.items() if k.lower() not in _OFFSET_OPTIONS}
    if not stats:
        raw = spark.read.format("kafka").options(**options).load().where(sf.lit(False))
        return raw, set()
    low: dict[str, dict[str, int]] = defaultdict(dict)
    high: dict[str, dict[str, int]] = defaultdict(dict)
    for r in stats:
        part = str(r["_partition"])
        low[r["_topic"]][part] = min(r["lo"], low[r["_topic"]].get(part, r["lo"]))
        high[r["_topic"]][part] = max(r["hi"] + 1, high[r["_topic"]].get(part, 0))
    raw = (
        spark.read.format("kafka")
        .options(**keep)
        .option("assign", json.dumps({t: sorted(int(p) for p in ps) for t, ps in low.items()}))
        .option("startingOffsets", json.dumps(low))
        .option("endingOffsets", json.dumps(high))
        .load()
    )
    return raw, {
        (r["_topic"], schema_id_of(r["_vh"]), schema_id_of(r["_kh"]), schema_id_of(r["_okh"]))
        for r in stats
    }


@overload
def read_changes(
    spark: SparkSession,
    topics: Iterable[str] | str | None = ...,
    pattern: str | None = ...,
    *,
    kafka_options: Mapping[str, str],
    registry_url: str,
    registry_auth: tuple[str, str] | None = ...,
    tombstones: Tombstones = ...,
    mode: Mode = ...,
    streaming: Literal[False] = ...,
) -> DataFrame: ...


@overload
def read_changes(
    spark: SparkSession,
    topics: Iterable[str] | str | None = ...,
    pattern: str | None = ...,
    *,
    kafka_options: Mapping[str, str],
    registry_url: str,
    registry_auth: tuple[str, str] | None = ...,
    tombstones: Tombstones = ...,
    mode: Mode = ...,
    streaming: Literal[True],
) -> ChangeStream: ...


@overload
def read_changes(
    spark: SparkSession,
    topics: Iterable[str] | str | None = ...,
    pattern: str | None = ...,
    *,
    kafka_options: Mapping[str, str],
    registry_url: str,
    registry_auth: tuple[str, str] | None = ...,
    tombstones: Tombstones = ...,
    mode: Mode = ...,
    streaming: bool,
) -> DataFrame | ChangeStream: ...


def read_changes(
    spark: SparkSession,
    topics: Iterable[str] | str | None = None,
    pattern: str | None = None,
    *,
    kafka_options: Mapping[str, str],
    registry_url: str,
    registry_auth: tuple[str, str] | None = None,
    tombstones: Tombstones = "drop",
    mode: Mode = "FAILFAST",
    streaming: bool = False,
) -> DataFrame | ChangeStream:
    """Change rows of the bridge's topics: `op`, the row's columns (the after-image, the
    before-image for deletes), `_lsn` (commit LSN: `source.commit_lsn`, or `source.lsn` in
    records written before that field existed, when `lsn` was the commit LSN), `_seq` (one
    orderable struct: commit LSN, the change's own LSN, offset; see SEQ_TYPE), `_txid`,
    `_commit_ts`, `_deleted`,
    `_unchanged` (unsent TOASTed columns), `_oldkey` (on the create of a primary-key change:
    the old key as JSON, from its `__debezium.oldkey` header), `_topic`, `_partition`,
    `_offset`, and with tombstones="keep" `_tombstone` (tombstone rows carry the key columns
    only).

    `kafka_options` are Spark Kafka source options ("kafka.bootstrap.servers" is required;
    startingOffsets defaults to "earliest").

    mode="PERMISSIVE": a record that cannot be decoded (bytes without the framing, a schema
    id the registry lacks, a body from_avro cannot read) does not fail the read; it comes
    as a row with `_error` set (and `_schema_id`, the Kafka coordinates, nothing else), for
    `bridge.spark.apply` to put in a quarantine table. Every row then has both columns.
    """
    if tombstones not in ("drop", "keep"):
        raise ConfigError(f"tombstones={tombstones!r}", hint='use "drop" or "keep"')
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise ConfigError(f"mode={mode!r}", hint='use "FAILFAST" or "PERMISSIVE"')
    options = _source_options(topics, pattern, kafka_options)
    schemas = SchemaSource(registry_url, registry_auth)
    decoder = ChangeDecoder(schemas, tombstones, mode)
    if streaming:
        raw = spark.readStream.format("kafka").options(**options).load()
        return ChangeStream(raw, decoder)
    try:  # from_avro gets the schemas as text: none is fetched after decode()
        raw, groups = _pinned(spark, options, strict=mode == "FAILFAST")
        return decoder.decode(raw, groups)
    finally:
        schemas.close()


def _commit_lsn(source: Column, reader: str) -> Column:
    """The transaction's commit LSN, the position changes are ordered by.

    `source.lsn` is the change's own LSN (Debezium's meaning), which does not follow
    commit order across transactions; `source.commit_lsn` does. Records from bridges
    before that field existed carried the commit LSN in `lsn`, and read as null
    `commit_lsn` through the reader schema, so the coalesce keeps them ordered too."""
    if "commit_lsn" not in source_fields(reader):
        return source["lsn"]
    return sf.coalesce(source["commit_lsn"], source["lsn"])


def _sequence(source: Column, reader: str) -> Column:
    """`_seq` (see SEQ_TYPE): what Databricks' `sequence_by` or a plain MERGE orders by."""
    return sf.struct(
        _commit_lsn(source, reader).alias("commit_lsn"),
        source["lsn"].alias("lsn"),
        sf.col("_offset").alias("offset"),
    )
