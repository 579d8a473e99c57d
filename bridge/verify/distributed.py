"""`bridge verify --spark`: one table compared by a Spark job, for tables beyond one machine.

The same comparison as `compare`, at the same point L (`run` takes it and keeps the
snapshot's transaction open meanwhile), with the work spread over Spark's executors:

- PostgreSQL: the table is planned in primary-key ranges (`snapshot.chunk_size` rows, as
  the bridge's snapshot plans them) and each range is one Spark task that imports the
  point's snapshot (exported again by verify's session, `export_again`), reads its range
  and encodes the rows with the bridge's own encoder: the task of the Spark initial load
  (`bridge.snapshot.external.read_task`, `bridge.spark.initial_load.loaded_rows`), so the
  rows are the records the bridge's snapshot would write (op "r" at L).
- Kafka: the topic is read by the Spark apply's reader (`bridge.spark.reader`, committed
  records only, the offsets present now), the records committed at or after L left out
  (snapshot reads by their snapshot's LSN), and folded per key by the apply's own rules
  (`bridge.spark.apply.fold`: TRUNCATE, key changes' carried TOAST values, newest change
  per key): the state a key-based consumer holds at L.
- Both sides are PostgreSQL's encoder's Avro decoded by the same reader schema with
  `from_avro`, so every documented conversion (numeric modes, infinity sentinels, TOAST
  placeholders, timestamps) lands in the same Spark value on both sides. Spark's JDBC
  source is not used: its type mapping is another conversion of every type, to be kept
  equal to the bridge's by hand.
- Each row becomes its key, one 8-byte hash (xxhash64) per column, a hash of the whole row
  and a bucket (a hash of the key modulo the number of key ranges, so a bucket holds about
  `snapshot.chunk_size` keys, on both sides alike). First each bucket is summed up on each
  side, order-independently (its row count and the XOR of its row hashes): a bucket equal
  on both sides holds equal rows, settled without a per-key shuffle (`decoded` counts the
  PostgreSQL rows that were not). Only the other buckets' keys go through a full outer
  join on the key: equal, missing (PostgreSQL only), ghost (Kafka only) or different (with
  the columns whose hashes differ), as `compare` reports them. Only keys and hashes are
  shuffled, whatever the row width. Equal hashes of different values (2^-64) would count
  as equal.
- For `--repair` (`keys_for_repair`), the driver gets the keys to fix in the form
  `bridge.verify.repair` takes from the single-machine comparison, so one repair serves
  both: each PostgreSQL task also returns its rows' key text (`read_keyed_task`, the chunk
  read as an incremental snapshot reads one), carried through the decoding beside the
  row's hashes, and the missing and different keys' texts are collected; each ghost's
  newest record (partition, offset) is found in the topic, and the driver fetches those
  records' key bytes from Kafka (the delete must carry the very bytes compaction keys
  on). Mismatches are few by construction; beyond `REPAIR_KEY_LIMIT` keys of one table
  the driver collects nothing and says so.
- With `--lake` (`lake`), the same bucketed comparison has the lake table as its other
  side (`_lake`): the lake's live rows hashed and bucketed like PostgreSQL's; the keys of
  the buckets that differ (from the lake, or between PostgreSQL and Kafka) meet the
  lake's rows and the topic's newest position per key, judged by `bridge.verify.lake`'s
  rules (`lake_kind`). Its keys to fix are collected as `bridge.verify.lake.LakeFix`
  sorts them.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, NamedTuple

import psycopg
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import DataType

from bridge.config import Config, KafkaConfig
from bridge.errors import VerifyError
from bridge.snapshot import chunks
from bridge.snapshot.catalog import SnapshotTable
from bridge.snapshot.external import LoadTable, LoadTask, read_keyed_task, read_task
from bridge.snapshot.reader import TableJob
from bridge.spark.apply import TARGET_META, fold
from bridge.spark.formats import target_table
from bridge.spark.initial_load import loaded_rows
from bridge.spark.reader import ChangeDecoder, read_changes
from bridge.spark.registry import SchemaSource
from bridge.verify.compare import REPAIR_KEY_LIMIT, LakeResult, Loaded, TableResult, restricted
from bridge.verify.lake import (
    FIX_KINDS,
    POLL_S,
    _auth,
    _latest,
    _summarise,
    check_meta,
    lake_kind,
    tally,
)
from bridge.verify.store import Kept
from bridge.verify.topic import topic_offsets

KINDS: Final = ("equal", "missing", "ghost", "different")
_PG_KEY: Final = "__pgkey"  # PostgreSQL's key text (JSON array), carried for --repair
_JAAS: Final = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def kafka_options(kafka: KafkaConfig) -> dict[str, str]:
    """Spark's Kafka source options for the brokers the bridge writes to: the Java client's
    names for `KafkaConfig.client_config`'s connection settings, and committed records
    only (as `run` reads them)."""
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "kafka.security.protocol": kafka.security_protocol,
        "kafka.isolation.level": "read_committed",
    }
    if kafka.sasl_mechanism is not None:
        password = kafka.sasl_password
        credentials = {
            "username": kafka.sasl_username or "",
            "password": "" if password is None else password.get_secret_value(),
        }
        # JAAS quotes like JSON; Spark redacts an option whose value names a password
        quoted = " ".join(
            f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in credentials.items()
        )
        options["kafka.sasl.mechanism"] = kafka.sasl_mechanism
        options["kafka.sasl.jaas.config"] = f"{_JAAS[kafka.sasl_mechanism]} required {quoted};"
    if kafka.ssl_ca_location is not None:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = str(kafka.ssl_ca_location)
    return options


def compare_in_spark(
    spark: SparkSession,
    cfg: Config,
    catalog_conn: psycopg.Connection[Any],
    snapshot_name: str,
    point: int,
    job: TableJob,
    result: TableResult,
    keys_for_repair: bool = False,
    lake: tuple[str, float] | None = None,
    loaded: Loaded | None = None,
) -> None:
    """Fill `result` for `job`'s table (a keyed one) from a Spark job (module docstring):
    PostgreSQL read in key ranges inside `snapshot_name`, the topic folded up to `point`.
    `catalog_conn` plans the ranges (any boundaries cover the table: the first range is
    open below, the last above). `keys_for_repair`: also `result.reread_keys` and
    `result.ghost_keys` (`result.decoder` set). `lake`: (the Delta table, --timeout) also
    compared, into `result.lake` (`_lake`). `loaded`: the table came with an external
    load, whose rows join the topic's side where the topic has no record of their key
    (`_with_load`)."""
    key_schema = job.encoder.table.key_schema
    assert key_schema is not None  # `run` skips keyless tables
    keys = [str(f["name"]) for f in key_schema["fields"]]
    carry = (_PG_KEY,) if keys_for_repair else ()
    cached: list[DataFrame] = []
    task = read_keyed_task if keys_for_repair else read_task
    read = functools.partial(task, cfg, snapshot_name, point)
    plan = list(chunks.plan(catalog_conn, job.table, cfg.snapshot.chunk_size, None, 0))
    rows, from_load = _pg_rows(spark, cfg, job, plan, read, carry, loaded)
    if from_load is not None:
        cached.append(from_load)
    data = [c for c in rows.columns if c not in TARGET_META and c not in keys and c not in carry]
    try:
        topic = _topic_state(spark, cfg, job.topic, point, rows, data, keys, result, cached)
        state, changes = topic.state, topic.changes
        if from_load is not None and loaded is not None and topic.truncated < loaded.lsn:
            state = _with_load(state, from_load, changes, keys, data, result)
        buckets = max(1, len(plan))
        pg = _hashed(rows, keys, data, buckets, carry).persist()
        kafka = _hashed(state, keys, data, buckets).persist()
        sums = _bucket_sums(pg, kafka).persist()
        cached += [pg, kafka, sums]
        found = sums.agg(sf.sum(sf.when(sf.col("__same"), sf.col("__n")))).first()
        settled = 0 if found is None or found[0] is None else int(found[0])
        unsettled = sf.broadcast(sums.where(~sf.col("__same")).select("__b"))
        judged = _judge(
            pg.join(unsettled, "__b", "left_semi"),
            kafka.join(unsettled, "__b", "left_semi"),
            keys,
            data,
        ).persist()
        cached.append(judged)
        counts, columns, samples = tally(judged, KINDS, KINDS[1:], keys, data)
        fix = None
        if keys_for_repair:
            kind = sf.col("__kind")
            reread = judged.where(kind.isin("missing", "different"))
            differing = sum(counts.get(k, 0) for k in KINDS[1:])
            ghosts = judged.where(kind == "ghost")
            _keys_to_fix(cfg, reread, ghosts, changes, keys, differing, result)
            fix = functools.partial(_lake_keys_to_fix, cfg, changes, keys, result)
        if lake is not None:
            differ = sums.where(~sf.col("__same")).select("__b")
            types = {f.name: f.dataType for f in rows.schema.fields}
            at = (point, buckets)
            result.lake = _lake(spark, lake, pg, differ, topic, keys, data, types, at, fix)
    finally:
        for df in cached:
            df.unpersist()
    _fill(result, settled, counts, columns, samples)


def _pg_rows(
    spark: SparkSession,
    cfg: Config,
    job: TableJob,
    plan: Sequence[chunks.Chunk],
    read: Callable[[LoadTask], Any],
    carry: tuple[str, ...],
    loaded: Loaded | None,
) -> tuple[DataFrame, DataFrame | None]:
    """PostgreSQL's rows, one task per chunk of `plan` (`read` runs it), and with `loaded`
    those of them the external load read (persisted: both sides take them), which the
    rows are then read apart from (`bridge.verify.compare.Loaded`)."""
    schemas = SchemaSource(cfg.registry.url, _auth(cfg))

    def rows_of(table: SnapshotTable) -> DataFrame:
        tasks = tuple(LoadTask(table, c) for c in plan)
        load = LoadTable(job.topic, job.encoder.value_id, tasks)
        return loaded_rows(spark, ChangeDecoder(schemas, carry=carry), load, read)

    try:  # from_avro gets the schemas as text: none is fetched once the plan is made
        if loaded is None:
            return rows_of(job.table), None
        from_load = rows_of(restricted(job.table, loaded.condition)).persist()
        changed = rows_of(restricted(job.table, f"NOT {loaded.condition}"))
        return changed.unionByName(from_load), from_load
    finally:
        schemas.close()


def _with_load(
    state: DataFrame,
    from_load: DataFrame,
    changes: DataFrame | None,
    keys: list[str],
    data: list[str],
    result: TableResult,
) -> DataFrame:
    """The topic's `state` and the rows the external load read (`from_load`, unchanged
    since) whose key has no record in the topic before the point (`changes`): what a
    consumer of the load and the topic holds (`bridge.verify.compare.Loaded`). Counts
    them into `result.loaded`."""
    kept = from_load.select(*keys, *data)
    if changes is not None and all(k in changes.columns for k in keys):
        kept = kept.join(changes.select(*keys), keys, "left_anti")
    result.loaded = kept.count()
    return state.unionByName(kept)


def _fill(
    result: TableResult,
    settled: int,
    counts: dict[str, int],
    columns: dict[str, int],
    samples: dict[str, list[str]],
) -> None:
    """`result`'s counts from the rows of the equal buckets (`settled`) and `tally`'s."""
    result.equal, result.missing = settled + counts.get("equal", 0), counts.get("missing", 0)
    result.ghosts, result.different = counts.get("ghost", 0), counts.get("different", 0)
    result.rows = result.equal + result.missing + result.different
    result.decoded = result.rows - settled
    result.live_keys = result.equal - result.loaded + result.ghosts + result.different
    result.columns.update(columns)
    result.samples = samples


class _Topic(NamedTuple):
    """The topic at the point: `state` (keys alive, shaped like PostgreSQL's rows), the
    records before the point (None without any), and for the lake: each key's newest
    change before the point (`__t_lsn`, `__t_deleted`) or change at or after it
    (`__later`), and the newest TRUNCATE's LSN."""

    state: DataFrame
    changes: DataFrame | None
    positions: DataFrame | None
    truncated: int


def _topic_state(
    spark: SparkSession,
    cfg: Config,
    topic: str,
    point: int,
    rows: DataFrame,
    data: list[str],
    keys: list[str],
    result: TableResult,
    cached: list[DataFrame],
) -> _Topic:
    """The topic folded at `point` (`_Topic`); counts the records read and left out into
    `result`, and adds what it caches to `cached`. The end offsets are probed first, into
    `result.ends` (where `--repair` reads on from): a topic never produced to does not
    exist, and Spark's Kafka source fails on it. The reader pins its own ends a moment
    later, at or past these."""
    types = {f.name: f.dataType for f in rows.schema.fields}
    nothing = rows.select(*keys, *data).where(sf.lit(False))
    result.ends = {p: high for p, (_, high) in topic_offsets(cfg, topic).items()}
    if not result.ends:
        return _Topic(nothing, None, None, 0)
    changes = read_changes(
        spark,
        [topic],
        kafka_options=kafka_options(cfg.kafka),
        registry_url=cfg.registry.url,
        registry_auth=_auth(cfg),
        tombstones="keep",
    ).persist()
    cached.append(changes)
    op, lsn = sf.col("op"), sf.col("_lsn")
    later = ~sf.col("_tombstone") & sf.when(op == "r", lsn > point).otherwise(lsn >= point)
    counted = changes.agg(sf.count(sf.lit(1)), sf.count_if(later)).first()
    assert counted is not None  # a global aggregate has one row
    result.records, result.after_point = int(counted[0]), int(counted[1])
    if not all(k in changes.columns for k in keys):  # tombstones only: no key is alive
        return _Topic(nothing, changes, None, 0)
    before = changes.where(~later)
    latest, truncated, folded = fold(before, keys)
    cached += folded
    state = latest.where(~sf.col("_deleted")).select(
        *keys,
        *(
            (sf.col(c)["v"] if c in latest.columns else sf.lit(None).cast(types[c])).alias(c)
            for c in data
        ),
    )
    newest = latest.select(
        *keys, sf.col("_lsn").alias("__t_lsn"), sf.col("_deleted").alias("__t_deleted")
    )
    changed = changes.where(later & (op != "t")).select(*keys).distinct()
    positions = newest.join(changed.withColumn("__later", sf.lit(True)), keys, "full_outer")
    return _Topic(state, before, positions, truncated or 0)


def _lake(
    spark: SparkSession,
    lake: tuple[str, float],
    pg: DataFrame,
    kafka_differs: DataFrame,
    topic: _Topic,
    keys: list[str],
    data: list[str],
    types: dict[str, DataType],
    at: tuple[int, int],
    fix: Callable[[DataFrame, LakeResult], None] | None = None,
) -> LakeResult:
    """The lake table's verdict (`bridge.verify.lake`'s kinds and rules), by the bucketed
    comparison: the lake's live rows hashed and bucketed like PostgreSQL's (`pg`); a bucket
    equal on both sides, and equal between PostgreSQL and Kafka, is settled; the keys of
    the others meet in a full outer join of PostgreSQL, the lake (soft-deleted rows too)
    and the topic's positions, judged by `lake_kind`. Re-read while keys are behind, up to
    the timeout, as `bridge.verify.lake` does. `fix` gets the last judgement's keys and
    verdict (`_lake_keys_to_fix`)."""
    target, timeout = lake
    point, buckets = at  # the verification point, the number of buckets
    lake_table = target_table(spark, target)  # the format as the apply decides it
    deadline = time.monotonic() + timeout
    while True:
        version, table = _latest(lake_table)
        check_meta(table)
        theirs = table.select(
            *(sf.col(k).cast(types[k]).alias(k) for k in keys),
            *(
                (sf.col(c) if c in table.columns else sf.lit(None)).cast(types[c]).alias(c)
                for c in data
            ),
            sf.col("_lsn").alias("__d_lsn"),
            sf.coalesce(sf.col("_deleted"), sf.lit(False)).alias("__d_deleted"),
        )
        hashed = _hashed(theirs, keys, data, buckets, ("__d_lsn", "__d_deleted")).persist()
        try:
            sums = _bucket_sums(pg, hashed.where(~sf.col("__d_deleted"))).persist()
            try:
                differ = sums.where(~sf.col("__same")).select("__b").union(kafka_differs)
                unsettled = sf.broadcast(differ.distinct())
                settled = (
                    sums.join(unsettled, "__b", "left_anti")
                    .agg(sf.sum(sf.when(sf.col("__same"), sf.col("__n"))))
                    .first()
                )
                judged = _judge_lake(
                    pg.join(unsettled, "__b", "left_semi"),
                    hashed.join(unsettled, "__b", "left_semi"),
                    topic,
                    unsettled,
                    keys,
                    data,
                    point,
                    buckets,
                ).persist()
                try:
                    result = _summarise(judged, lake_table, version, keys, data)
                    final = not result.counts["behind"] or time.monotonic() > deadline
                    if final and fix is not None and not result.ok:
                        fix(judged, result)
                finally:
                    judged.unpersist()
            finally:
                sums.unpersist()
        finally:
            hashed.unpersist()
        result.counts["equal"] += 0 if settled is None or settled[0] is None else int(settled[0])
        if final:
            return result
        time.sleep(POLL_S)


def _lake_keys_to_fix(
    cfg: Config,
    changes: DataFrame | None,
    keys: list[str],
    result: TableResult,
    judged: DataFrame,
    verdict: LakeResult,
) -> None:
    """The lake's keys to fix through the topic, as `bridge.verify.lake.LakeFix` sorts
    them: PostgreSQL's re-read, the others deleted when the topic knows them, else left."""
    wanted = judged.where(sf.col("__kind").isin(*FIX_KINDS))
    pg = sf.coalesce(sf.col("__pg"), sf.lit(False))
    known = sf.col("__t_lsn").isNotNull()
    found = sum(verdict.counts[k] for k in FIX_KINDS)
    result.lake_left = wanted.where(~pg & ~known).count()
    _keys_to_fix(cfg, wanted.where(pg), wanted.where(~pg & known), changes, keys, found, result)


def _judge_lake(
    pg: DataFrame,
    lake: DataFrame,
    topic: _Topic,
    unsettled: DataFrame,
    keys: list[str],
    data: list[str],
    point: int,
    buckets: int,
) -> DataFrame:
    """Each key of the `unsettled` buckets with its lake kind and the columns whose hashes
    differ."""
    carry = [c for c in pg.columns if c == _PG_KEY]
    pg = pg.select(*keys, sf.col("__h").alias("__p"), sf.lit(True).alias("__pg"), *carry)
    both = pg.join(
        lake.select(
            *keys, sf.col("__h").alias("__dh"), "__d_lsn", "__d_deleted", sf.lit(True).alias("__d")
        ),
        keys,
        "full_outer",
    )
    if topic.positions is not None:
        bucket = sf.pmod(sf.xxhash64(*keys), sf.lit(buckets)).alias("__b")
        where = topic.positions.select("*", bucket).join(unsettled, "__b", "left_semi")
        both = both.join(where.drop("__b"), keys, "full_outer")
    else:
        both = both.select(
            "*",
            sf.lit(None).cast("bigint").alias("__t_lsn"),
            sf.lit(None).cast("boolean").alias("__t_deleted"),
            sf.lit(None).cast("boolean").alias("__later"),
        )
    columns = _differing(sf.col("__p"), sf.col("__dh"), data)
    kind = lake_kind(columns, point, topic.truncated)
    return both.select(
        *keys, kind.alias("__kind"), columns.alias("__columns"), "__pg", "__t_lsn", *carry
    )


def _hash(value: Column, kind: DataType) -> Column:
    """8 bytes standing for a value; Spark hashes no map (nor a value holding one): as JSON."""
    if "map<" in kind.simpleString():
        value = sf.to_json(sf.struct(value.alias("v")))
    return sf.xxhash64(value)


def _hashed(
    rows: DataFrame, keys: list[str], data: list[str], buckets: int, carry: Sequence[str] = ()
) -> DataFrame:
    """The key columns, `__h` (the data columns' hashes), `__r` (the row's hash, key
    included), `__b` (the key's bucket) and the `carry` columns."""
    types = {f.name: f.dataType for f in rows.schema.fields}
    hashes = sf.array(*(_hash(sf.col(c), types[c]) for c in data)) if data else sf.array()
    hashed = rows.select(*keys, hashes.cast("array<bigint>").alias("__h"), *carry)
    return hashed.select(
        *keys,
        *carry,
        "__h",
        sf.xxhash64(*keys, "__h").alias("__r"),
        sf.pmod(sf.xxhash64(*keys), sf.lit(buckets)).alias("__b"),
    )


def _bucket_sums(pg: DataFrame, kafka: DataFrame) -> DataFrame:
    """Per bucket: `__same` (the same row count and XOR of row hashes on both sides) and
    `__n`, its PostgreSQL rows."""

    def summed(side: DataFrame, name: str) -> DataFrame:
        return side.groupBy("__b").agg(
            sf.count(sf.lit(1)).alias(f"__n{name}"), sf.bit_xor("__r").alias(f"__x{name}")
        )

    both = summed(pg, "p").join(summed(kafka, "t"), "__b", "full_outer")
    same = sf.col("__np").eqNullSafe(sf.col("__nt")) & sf.col("__xp").eqNullSafe(sf.col("__xt"))
    return both.select("__b", same.alias("__same"), sf.col("__np").alias("__n"))


def _judge(pg: DataFrame, kafka: DataFrame, keys: list[str], data: list[str]) -> DataFrame:
    """Each key of either side with its kind (`KINDS`) and the columns whose hashes differ
    (and PostgreSQL's key text when `pg` carries it)."""
    carry = [c for c in pg.columns if c == _PG_KEY]
    both = pg.select(*keys, sf.col("__h").alias("__p"), *carry).join(
        kafka.select(*keys, sf.col("__h").alias("__t")), keys, "full_outer"
    )
    p, t = sf.col("__p"), sf.col("__t")
    columns = _differing(p, t, data)
    kind = (
        sf.when(t.isNull(), "missing")
        .when(p.isNull(), "ghost")
        .when(sf.size(columns) == 0, "equal")
        .otherwise("different")
    )
    return both.select(*keys, kind.alias("__kind"), columns.alias("__columns"), *carry)


def _differing(ours: Column, theirs: Column, data: list[str]) -> Column:
    """The names of the `data` columns whose hashes differ between two `__h` arrays."""
    if not data:
        return sf.array().cast("array<string>")
    differ = [sf.when(ours[i] != theirs[i], sf.lit(c)) for i, c in enumerate(data)]
    return sf.filter(sf.array(*differ), lambda x: x.isNotNull())


def _keys_to_fix(
    cfg: Config,
    reread: DataFrame,
    ghosts: DataFrame,
    changes: DataFrame | None,
    keys: list[str],
    found: int,
    result: TableResult,
) -> None:
    """Adds to `result.reread_keys` PostgreSQL's key text of the `reread` rows and to
    `result.ghost_keys` the `ghosts` keys' framed key and partition from their newest
    record before the point (fetched from Kafka), as the single-machine comparison fills
    them; `found`: how many keys differ, at most `REPAIR_KEY_LIMIT`."""
    assert result.decoder is not None
    if found > REPAIR_KEY_LIMIT:
        raise VerifyError(
            f"{result.table}: {found} keys differ, more than the {REPAIR_KEY_LIMIT} that "
            "verify --spark --repair brings to the driver",
            hint="re-snapshot the table instead (an execute-snapshot signal without a "
            "condition), then verify again",
        )
    texts = reread.orderBy(*keys).select(_PG_KEY).collect()
    known = set(result.reread_keys)
    result.reread_keys += [k for k in (tuple(json.loads(r[0])) for r in texts) if k not in known]
    if changes is None:  # no record: no key the topic knows
        return
    newest = sf.max_by(
        sf.struct("_partition", "_offset"), sf.struct(sf.coalesce("_lsn", sf.lit(0)), "_offset")
    )
    where = changes.join(ghosts.select(*keys), keys, "left_semi").groupBy(*keys)
    at = where.agg(newest.alias("__at")).select("__at").collect()
    positions = sorted((r[0]["_partition"], r[0]["_offset"]) for r in at)
    decoder = result.decoder
    for partition, raw_key in _record_keys(cfg, result.topic, positions):
        name = decoder.key(raw_key, f"topic {result.topic} partition {partition}")
        result.ghost_keys.setdefault(name, Kept(0, False, b"", partition, raw_key))


def _record_keys(
    cfg: Config, topic: str, positions: list[tuple[int, int]]
) -> Iterator[tuple[int, bytes]]:
    """(partition, key bytes) of the records at `positions` (partition, offset), read with
    one consumer assigned to each in turn."""
    consumer = Consumer(
        {
            **cfg.kafka.client_config(),
            "group.id": f"bridge-verify-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        for partition, offset in positions:
            consumer.assign([TopicPartition(topic, partition, offset)])
            msg = consumer.poll(30)
            if msg is None or msg.error() is not None or msg.offset() != offset:
                raise VerifyError(
                    f"cannot read {topic} partition {partition} offset {offset} "
                    f"({'nothing' if msg is None else msg.error() or msg.offset()})",
                    hint="check Kafka, then verify again",
                )
            key = msg.key()
            assert key is not None  # a record of a live key has one
            yield partition, key
    finally:
        consumer.close()
