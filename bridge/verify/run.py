"""`bridge verify`: the point, the topics read up to it, each table compared at it.

The point: a TEMPORARY logical slot created with an exported snapshot (the same
`TemporaryExport` a resumed snapshot uses). PostgreSQL guarantees that the snapshot sees
exactly the transactions whose commit record lies before the slot's consistent point L,
the ones a slot created at L does not decode. A REPEATABLE READ snapshot next to
`pg_current_wal_lsn()` has no such guarantee: a transaction can be committed in the WAL
before the LSN yet still be invisible to the snapshot (or the reverse).

The topics: verify waits until the bridge's slot shows a confirmed position at or past L
(every transaction before L delivered to Kafka), then reads each partition from its start
to the end offset it has at that moment (`topic`), leaving out the records of transactions
committed at or after L (`state`).

`--spark` compares each table in a Spark job instead (`distributed`), at the same point:
this process holds the snapshot's transaction open while Spark's tasks read inside it.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg

from bridge.config import Config
from bridge.errors import ConfigError, VerifyError
from bridge.lsn import LSN
from bridge.snapshot import catalog
from bridge.snapshot.catalog import METHOD_KEY, SnapshotTable
from bridge.snapshot.modes import TemporaryExport
from bridge.snapshot.reader import (
    TableJob,
    build_jobs,
    connect,
    export_again,
    import_snapshot,
)
from bridge.snapshot.store import load_point, loaded_condition, store_of, table_topic_filter
from bridge.source import libpq, slots
from bridge.verify.compare import Loaded, TableResult, compare_table
from bridge.verify.deadletters import DeadLetter, Explained, read_letters
from bridge.verify.schemas import is_local, lookup_registry
from bridge.verify.state import Decoder, TopicState
from bridge.verify.store import DEFAULT_MEMORY_LIMIT
from bridge.verify.topic import read_topic, record_keys

log = logging.getLogger("bridge.verify")

_POLL_S = 0.2


@dataclass
class Verification:
    point: int
    tables: list[TableResult]
    dead_letter_topic: str = ""  # where the differences `dead_lettered` counts were sent

    @property
    def ok(self) -> bool:
        return all(t.ok or t.skipped is not None for t in self.tables)


def captured_tables(
    cfg: Config, conn: psycopg.Connection[Any], wanted: Sequence[str]
) -> list[SnapshotTable]:
    """The tables the bridge streams (publication or replication sets, then the filters),
    or those of them named in `wanted`."""
    tables, missing = catalog.captured_tables(
        conn, cfg.source, table_topic_filter(cfg, cfg.snapshot.progress_schema), wanted
    )
    if missing:
        raise ConfigError(
            f"--tables names table(s) the bridge does not capture: {', '.join(missing)}",
            hint="name them as schema.table; they must be in the publication and filters",
        )
    return tables


def await_delivered(cfg: Config, conn: psycopg.Connection[Any], point: int, timeout: float) -> None:
    """Return once the bridge's slot is confirmed at or past `point`."""
    name = cfg.source.slot_name
    deadline = time.monotonic() + timeout
    while True:
        info = slots.slot_info(conn, name)
        if info is None:
            raise VerifyError(
                f"the bridge's slot {name} does not exist",
                hint="verify compares what a running bridge delivered: start it first",
            )
        confirmed = info.confirmed_flush
        if confirmed >= point:
            return
        if time.monotonic() > deadline:
            raise VerifyError(
                f"the bridge's slot {name} is confirmed at {confirmed}, still before the "
                f"verification point {LSN(point)}, after {timeout:.0f}s",
                hint="the bridge is not running or lags behind; start it or raise --timeout",
            )
        time.sleep(_POLL_S)


def verify(
    cfg: Config,
    tables: Sequence[str] = (),
    *,
    timeout: float = 300.0,
    progress: Callable[[str], None] = log.info,
    delta: Mapping[str, str] | None = None,
    spark: Any = None,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    distributed: bool = False,
    spark_master: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    keys_for_repair: bool = False,
) -> Verification:
    """Compare every captured table (or `tables`) with its topic at one point, and the
    tables named in `delta` (table -> lake table: `--lake`) with that lake table too, read
    by `spark` (a SparkSession; when None, one is started with `spark_master`, default
    `bridge.spark.jars.spark_session`'s, and the settings `spark_conf`). A table's topic
    state beyond `memory_limit` bytes goes to disk (`bridge.verify.store`). `distributed`:
    each table is compared by a Spark job instead (`bridge.verify.distributed`), read there
    inside the point's snapshot, which this process holds open meanwhile; it brings the keys
    to fix to this process only when asked (`keys_for_repair`: a verification `--repair`
    acts on), the single-machine comparison always."""
    with ExitStack() as opened:
        catalog_conn = libpq.connect(cfg.source.conninfo(), replication=False)
        opened.callback(catalog_conn.close)
        chosen = captured_tables(cfg, catalog_conn, tables)
        _check_delta(chosen, delta or {})
        reader, point = _at_point(cfg, chosen, opened)
        load = _external_load(cfg, reader, point)
        progress(f"verification point {LSN(point)}; waiting for the bridge to deliver up to it")
        await_delivered(cfg, catalog_conn, point, timeout)
        registry, lookups = lookup_registry(cfg)  # reads only (`bridge.verify.schemas`)
        jobs = build_jobs(cfg, catalog_conn, chosen, registry)
        letters = read_letters(cfg, {t.label for t in chosen}, point, timeout)

        results = []
        for table in chosen:
            job = jobs[table.label]
            result = TableResult(table.label, job.topic)
            results.append(result)
            key_schema = job.encoder.table.key_schema
            if table.method != METHOD_KEY or key_schema is None:
                result.skipped = "no primary key or replica identity index: rows have no key"
                continue
            decoder = Decoder(key_schema, job.encoder.table.envelope_schema, lookups.text)
            result.decoder, result.job, result.snapshot_table = decoder, job, table
            explained = _explained(cfg, table, decoder, letters.get(table.label, []), result)
            target = (delta or {}).get(table.label)
            loaded = _loaded(cfg, table, load)
            if distributed:
                spark = spark or opened.enter_context(_session(spark_master, spark_conf))
                lake = None if target is None else (target, timeout)
                how = (keys_for_repair, lake, loaded)
                _in_spark(spark, cfg, catalog_conn, reader, point, result, progress, how)
                continue
            state = TopicState(
                decoder,
                point,
                track_later=target is not None,
                memory_limit=memory_limit,
                topic=job.topic,
            )
            with closing(state):
                _read_topic(cfg, state, result, timeout, progress)
                if target is None:
                    keys = functools.partial(record_keys, cfg, job.topic)
                    compare_table(reader, table, job, state, result, keys, None, explained, loaded)
                else:
                    spark = spark or opened.enter_context(_session(spark_master, spark_conf))
                    progress(f"{table.label}: comparing the topic, then the lake table {target}")
                    found = (explained, loaded)
                    _with_lake(cfg, reader, spark, target, state, result, timeout, found)
            progress(f"{table.label}: {result.status}")
        return Verification(point, results, cfg.dead_letter_topic())


def _at_point(
    cfg: Config, chosen: Sequence[SnapshotTable], opened: ExitStack
) -> tuple[psycopg.Connection[Any], int]:
    """A session reading inside the point's snapshot (closed with `opened`), and the point:
    the consistent point of a temporary slot whose exported snapshot it imported."""
    reader = connect(
        cfg.source.conninfo(), {c.type_oid for t in chosen for c in t.relation.columns}
    )
    opened.callback(reader.close)
    export = TemporaryExport(cfg.source.conninfo(), f"verify_{cfg.source.slot_name}")
    try:
        import_snapshot(reader, export.snapshot_name)
    finally:
        export.close()  # the imported snapshot lives on in `reader`'s transaction
    return reader, int(export.lsn)


def _read_topic(
    cfg: Config,
    state: TopicState,
    result: TableResult,
    timeout: float,
    progress: Callable[[str], None],
) -> None:
    """`result.topic` read into `state`, to the ends it had (into `result.ends`)."""
    result.ends = read_topic(cfg, result.topic, state, timeout)
    progress(
        f"{result.table}: topic read, {state.records:,} records"
        + " (key states on disk)" * state.keys.on_disk
        + "; comparing with PostgreSQL"
    )


def _external_load(cfg: Config, reader: psycopg.Connection[Any], point: int) -> Loaded | None:
    """The external load of the bridge's slot (snapshot.mode external) at or before
    `point`, if its tables came with one, its condition for `reader`, which holds the
    point's snapshot."""
    store = store_of(cfg)
    try:
        load = load_point(store)
    finally:
        store.close()
    if load is None or int(load.lsn) > point:
        return None
    row = reader.execute(
        "SELECT pg_catalog.txid_snapshot_xmax(pg_catalog.txid_current_snapshot())::text"
    ).fetchone()
    assert row is not None
    reference = row[0].decode() if isinstance(row[0], bytes) else row[0]
    return Loaded(int(load.lsn), loaded_condition(load.visible, int(reference)))


def _loaded(cfg: Config, table: SnapshotTable, load: Loaded | None) -> Loaded | None:
    """`table`'s rows from the external load (`Loaded`), unless the load read it through a
    row filter or a select override (rows it left out would pass for loaded ones)."""
    snap = cfg.snapshot
    if load is None or table.label in snap.row_filters or table.label in snap.select_overrides:
        return None
    return load


def _explained(
    cfg: Config,
    table: SnapshotTable,
    decoder: Decoder,
    letters: Sequence[DeadLetter],
    result: TableResult,
) -> Explained | None:
    """The table's dead letters by key (their number in `result`), for a table that has
    some or whose policy lets a change pass (`pipeline.on_error`): its rows the encoder
    cannot encode are then differences, not the end of verify. None for the others,
    which stop at such a row."""
    result.dead_letters = len(letters)
    relation = table.relation
    if not letters and cfg.pipeline.on_error_for(relation.namespace, relation.name) == "fail":
        return None
    return Explained(letters, decoder, [k.name for k in table.key])


def _check_delta(chosen: Sequence[SnapshotTable], delta: Mapping[str, str]) -> None:
    unknown = sorted(set(delta) - {t.label for t in chosen})
    if unknown:
        raise ConfigError(
            f"--delta names table(s) not verified: {', '.join(unknown)}",
            hint="name captured tables as schema.table (and list them in --tables if given)",
        )


def _with_lake(
    cfg: Config,
    reader: psycopg.Connection[Any],
    spark: Any,
    target: str,
    state: TopicState,
    result: TableResult,
    timeout: float,
    found: tuple[Explained | None, Loaded | None],
) -> None:
    """`compare_table` (`found`: its letters and loaded rows), with PostgreSQL's rows also
    handed to the lake comparison; the
    keys that differ in the lake join those `--repair` fixes through the topic (so a row
    changed behind the apply's back is re-emitted though Kafka holds it right)."""
    from bridge.verify.lake import LakeFix, LakeSide  # noqa: PLC0415 (pyspark: slow import)

    assert result.snapshot_table is not None and result.job is not None
    _registered(result.job)
    key_schema = result.job.encoder.table.key_schema
    assert key_schema is not None
    side = LakeSide(result.topic, state)
    fetch = functools.partial(record_keys, cfg, result.topic)
    table, job = result.snapshot_table, result.job
    compare_table(reader, table, job, state, result, fetch, side, *found)
    keys = [f["name"] for f in key_schema["fields"]]
    fix = LakeFix()
    result.lake = side.compare(spark, cfg, target, keys, timeout, fix)
    known = set(result.reread_keys)
    result.reread_keys += [k for k in fix.reread if k not in known]
    for name, kept in fix.delete.items():
        result.ghost_keys.setdefault(name, kept)
    result.lake_left = fix.left


def _in_spark(
    spark: Any,
    cfg: Config,
    catalog_conn: psycopg.Connection[Any],
    reader: psycopg.Connection[Any],
    point: int,
    result: TableResult,
    progress: Callable[[str], None],
    how: tuple[bool, tuple[str, float] | None, Loaded | None],
) -> None:
    """`bridge.verify.distributed.compare_in_spark` (`how`: its keys_for_repair, lake and
    loaded), its tasks reading inside `reader`'s snapshot (exported again for them: valid
    while `reader`'s transaction is open)."""
    from bridge.verify.distributed import compare_in_spark  # noqa: PLC0415 (pyspark: slow)

    job = result.job
    assert job is not None
    _registered(job)
    progress(f"{job.table.label}: comparing in Spark")
    snapshot = export_again(reader)
    compare_in_spark(spark, cfg, catalog_conn, snapshot, point, job, result, *how)
    progress(f"{job.table.label}: {result.status}")


def _registered(job: TableJob) -> None:
    """Refuse a Spark comparison of a table whose current schema the registry lacks: its
    tasks decode PostgreSQL's rows by the schema's id, fetched from the registry."""
    if is_local(job.encoder.value_id):
        raise VerifyError(
            f"{job.table.label}: its current schema is not in the registry yet (altered, "
            "and no change streamed since), and a Spark comparison reads it from there",
            hint="verify again once the bridge streamed a change of the table, or verify "
            "it without --spark and --lake",
        )


@contextmanager
def _session(master: str | None, conf: Mapping[str, str] | None) -> Iterator[Any]:
    """A SparkSession with the Kafka, Avro and Delta jars, stopped afterwards."""
    from bridge.spark.jars import spark_session  # noqa: PLC0415 (pyspark: slow import)

    session = (
        spark_session("bridge-verify", extra_conf=conf)
        if master is None
        else spark_session("bridge-verify", master, conf)
    )
    try:
        yield session
    finally:
        session.stop()
