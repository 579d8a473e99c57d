"""snapshot.mode external: the bridge streams at once, and a load job of your own (the Spark
initial load, `bridge.spark.initial_load`) reads the tables inside the slot's snapshot.

The bridge's side (`hold_snapshot`). A fresh slot's exported snapshot is the exact seam:
it sees every transaction whose commit record starts before the slot's consistent point L,
and the slot streams every other one (each with commit LSN >= L). But it lives only until
the next command on the replication connection, and START_REPLICATION is one. So a plain
session imports it and exports it again: `pg_export_snapshot()` in a transaction that
imported a snapshot exports that same view, under a new id that stays importable while this
session's transaction is open, whatever the replication connection does next. The bridge
records the new id and L in its progress store (run `initial`, state running, detail
{"mode": "external", "snapshot": id, "visible": the snapshot's `txid_current_snapshot()`,
which tells `bridge verify` the row versions the load read: `loaded_condition`}), logs
both, starts streaming, and keeps the session open until the load marks the run done
(`bridge external-load --done`, or `ExternalLoad.finish`). Meanwhile PostgreSQL keeps
every row version that snapshot sees (the session holds back the xmin horizon, as any long
transaction does): VACUUM cannot clean up behind it, so a load that runs for hours leaves
that much bloat to clean up.

A restart of the bridge before the load is done loses the held snapshot (it dies with its
session). The next start then exports a new one from a temporary slot, at its own
consistent point L' at or after the slot's confirmed position, and records it: the load has
to run again (tasks of the old one fail with "snapshot ... is no longer held"). The stream
then also carries changes committed before L', which the view already holds; the load's
target tables record L' as their floor and the apply drops every change older than it.

The load's side (`open_external_load`): the held snapshot, each captured table planned in
chunks inside it (primary-key ranges, or ctid block ranges for a table without a key, as
the bridge's own snapshot plans them), and `read_task`, which one load task runs anywhere
(a Spark executor): import the snapshot, read its chunk in PostgreSQL's text format, encode
the rows with the bridge's own encoders into exactly the records the bridge's snapshot would
produce (op "r", source.commit_lsn L). A consumer decodes them as it decodes the topics, so
loaded and streamed rows have the same types and values.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, NamedTuple

import psycopg

from bridge.config import Config
from bridge.encode.copyrows import unpack_records
from bridge.errors import SourceError
from bridge.lsn import LSN
from bridge.record import KafkaRecord
from bridge.snapshot import chunks
from bridge.snapshot.catalog import SnapshotTable
from bridge.snapshot.chunks import Chunk
from bridge.snapshot.initial import snapshot_tables
from bridge.snapshot.reader import (
    TableJob,
    build_jobs,
    connect,
    encode_rows,
    export_again,
    import_snapshot,
    read_records,
    snapshot_source,
)
from bridge.snapshot.store import DONE, EXTERNAL, INITIAL, RUNNING, ProgressStore, store_of
from bridge.source import libpq

log = logging.getLogger("bridge.snapshot")

_POLL_S: Final = 1.0
KeyedRecord = tuple[KafkaRecord, str]  # a record and its key's text, as JSON


class SnapshotHold:
    """A session holding the re-exported snapshot open until the load is recorded as done;
    a thread watches the progress store for that. Built by `hold_snapshot`."""

    def __init__(
        self, conn: psycopg.Connection[Any], snapshot_name: str, lsn: LSN, watch: ProgressStore
    ) -> None:
        self.snapshot_name = snapshot_name
        self.lsn = lsn
        self._conn = conn
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, args=(watch,), name="snapshot-hold", daemon=True
        )
        self._thread.start()

    def _watch(self, store: ProgressStore) -> None:
        try:
            while not self._stop.wait(_POLL_S):
                run = store.run(INITIAL)
                if run is None or run.state == DONE:
                    log.info(
                        "the external load is done: snapshot %s (%s) released",
                        self.snapshot_name,
                        self.lsn,
                    )
                    return
        except psycopg.Error as exc:
            log.error(
                "cannot read the snapshot's progress (%s): releasing snapshot %s; run the "
                "load again after the bridge restarts",
                str(exc).strip(),
                self.snapshot_name,
            )
        finally:
            store.close()
            self._release()

    def _release(self) -> None:
        with self._lock:
            self._conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def hold_snapshot(cfg: Config, store: ProgressStore, exported: str, lsn: LSN) -> SnapshotHold:
    """Import `exported` (a slot's snapshot at `lsn`) into a session of its own, export it
    again, record that id and `lsn` for the load, and hold it (see the module docstring)."""
    conn = connect(cfg.source.conninfo())
    try:
        import_snapshot(conn, exported)
        name = export_again(conn)
        visible = _one(conn, "SELECT pg_catalog.txid_current_snapshot()::text")
        store.set_detail(INITIAL, {"mode": EXTERNAL, "snapshot": name, "visible": visible})
        store.set_state(INITIAL, RUNNING, lsn)
    except BaseException:
        conn.close()
        raise
    log.warning(
        "snapshot.mode external: snapshot %s at hand-over LSN %s is held open for the "
        "initial load (bridge.spark.initial_load, or `bridge external-load`); streaming "
        "starts now, and the snapshot is released once the load is marked done",
        name,
        lsn,
    )
    return SnapshotHold(conn, name, lsn, store_of(cfg))


class LoadTask(NamedTuple):
    """One chunk of one table: what one task of the load reads."""

    table: SnapshotTable
    chunk: Chunk


class LoadTable(NamedTuple):
    topic: str  # the table's topic: the records are decoded with its subjects
    value_schema_id: int  # the registered envelope schema the records are written with
    tasks: tuple[LoadTask, ...]


class ExternalLoad:
    """The held snapshot's tables in chunks, and the function each task runs: what
    `bridge.spark.initial_load` consumes. Built by `open_external_load`."""

    def __init__(
        self,
        cfg: Config,
        store: ProgressStore,
        snapshot_name: str,
        lsn: LSN,
        tables: list[LoadTable],
    ) -> None:
        self.snapshot_name = snapshot_name
        self.lsn = lsn
        self._cfg = cfg
        self._store = store
        self._tables = tables

    def tables(self) -> list[LoadTable]:
        return list(self._tables)

    def reader(self) -> Callable[[LoadTask], list[KafkaRecord]]:
        """`read_task` bound to this snapshot: a picklable function of one task."""
        return functools.partial(read_task, self._cfg, self.snapshot_name, self.lsn)

    def finish(self) -> None:
        """Record the load as done: the bridge releases the snapshot."""
        self._store.set_state(INITIAL, DONE)
        self.close()

    def close(self) -> None:
        self._store.close()


def held_snapshot(store: ProgressStore) -> tuple[str, LSN]:
    """The snapshot id and hand-over LSN the bridge recorded; a clear error without one."""
    run = store.run(INITIAL)
    detail = {} if run is None else run.detail
    if run is None or detail.get("mode") != EXTERNAL or run.lsn is None:
        raise SourceError(
            "no snapshot is held for an external load of this slot",
            hint="run the bridge with snapshot.mode: external (it creates the slot, holds its "
            "snapshot and records it), then start the load",
        )
    if run.state == DONE:
        raise SourceError(
            f"the external load at {run.lsn} is already recorded as done",
            hint="to load again, drop the slot (SELECT pg_drop_replication_slot(...)) and the "
            "bridge's progress, and restart the bridge with snapshot.mode: external",
        )
    return str(detail["snapshot"]), run.lsn


def open_external_load(cfg: Config, *, chunk_size: int | None = None) -> ExternalLoad:
    """The load of the snapshot the bridge holds, every captured table planned in chunks of
    `chunk_size` rows (default snapshot.chunk_size) inside that snapshot."""
    store = store_of(cfg)
    try:
        name, lsn = held_snapshot(store)
        conn = connect(cfg.source.conninfo())
        try:
            _import(conn, name)
            found = snapshot_tables(cfg, conn, store.schema)
            jobs = build_jobs(cfg, conn, found)
            size = chunk_size or cfg.snapshot.chunk_size
            tables = [
                LoadTable(
                    jobs[t.label].topic,
                    jobs[t.label].encoder.value_id,
                    tuple(LoadTask(t, c) for c in chunks.plan(conn, t, size, None, 0)),
                )
                for t in found
            ]
        finally:
            conn.close()
    except BaseException:
        store.close()
        raise
    return ExternalLoad(cfg, store, name, lsn, tables)


@contextmanager
def _task_job(cfg: Config, snapshot_name: str, task: LoadTask) -> Iterator[tuple[Any, TableJob]]:
    """A connection inside the held snapshot (raw text loaders for the task's columns) and
    the task table's job."""
    conninfo = cfg.source.conninfo()
    conn = connect(conninfo, {c.type_oid for c in task.table.relation.columns})
    try:
        _import(conn, snapshot_name)
        catalog_conn = libpq.connect(conninfo, replication=False)
        try:
            job = build_jobs(cfg, catalog_conn, [task.table])[task.table.label]
        finally:
            catalog_conn.close()
        yield conn, job
    finally:
        conn.close()


def read_task(cfg: Config, snapshot_name: str, lsn: int, task: LoadTask) -> list[KafkaRecord]:
    """The records of one chunk read inside the held snapshot: runs on a load worker."""
    source = snapshot_source(cfg.kafka.topic_prefix, cfg.source.dbname, lsn, "true")
    with _task_job(cfg, snapshot_name, task) as (conn, job):
        packed, _ = read_records(conn, job, task.chunk, source)  # as the readers do
    return unpack_records(packed, job.topic)


def read_keyed_task(cfg: Config, snapshot_name: str, lsn: int, task: LoadTask) -> list[KeyedRecord]:
    """`read_task`'s records, each with its key columns' text as a JSON array (what an
    incremental snapshot's condition selects a row by: `bridge verify --spark --repair`).
    The chunk is read as an incremental snapshot reads one, the key text in front; a key
    chunk (ordered by the key) only."""
    width = len(task.table.key)
    source = snapshot_source(cfg.kafka.topic_prefix, cfg.source.dbname, lsn, "true")
    with _task_job(cfg, snapshot_name, task) as (conn, job):
        query, params = chunks.chunk_query(task.table, task.chunk, key_text=True)
        rows = conn.execute(query, params).fetchall()
        records, _ = encode_rows([r[width:] for r in rows], job, source)
    return [
        (record, json.dumps([_text(v) for v in row[:width]]))
        for record, row in zip(records, rows, strict=True)
    ]


def _one(conn: psycopg.Connection[Any], query: str) -> str:
    """A one-value query's result as text (`conn` may read text as raw bytes)."""
    row = conn.execute(query).fetchone()
    assert row is not None
    return _text(row[0])


def _text(value: Any) -> str:
    """A key column's `::text`: a str, or bytes when its type is one of the table's."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _import(conn: psycopg.Connection[Any], snapshot_name: str) -> None:
    try:
        import_snapshot(conn, snapshot_name)
    except psycopg.errors.InvalidParameterValue as exc:
        raise SourceError(
            f"snapshot {snapshot_name} is no longer held ({str(exc).strip()})",
            hint="the bridge holding it stopped before the load was done; once it runs "
            "again it holds a new snapshot: run the load again",
        ) from None
