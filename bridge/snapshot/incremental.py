"""Incremental snapshots while streaming continues: DBLog's watermarks, as Debezium does them.

Triggered by a row in the signal table (Debezium's layout: `id text PRIMARY KEY,
type text, data text`), for example

    INSERT INTO public.debezium_signal VALUES ('snap-1', 'execute-snapshot',
      '{"data-collections": ["public.t"], "type": "incremental",
        "additional-conditions": [{"data-collection": "public.t", "filter": "id > 10"}]}');

Per chunk: insert a low watermark row (`snapshot-window-open`), read the next key
range (`key > last AND key <= max ORDER BY key LIMIT n`, `max` fixed when the table
starts so the snapshot ends), insert a high watermark row (`snapshot-window-close`).
What the stream does in between, which rows go out and when a position is stored, is
the state machine of bridge/snapshot/windows.py; this module is its I/O: the chunk
queries (`ChunkSource`, on a connection of its own that bridge/build.py opens), the run
store, progress, notifications, encoders, and the records handed to the pipeline.

Signals come from the signal table's inserts and, with `snapshot.signal_kafka_topic`, from
a Kafka topic (`bridge.snapshot.signals`): `execute-snapshot`, `stop-snapshot` (tables
leave their runs between chunks, stored), `pause-snapshot` / `resume-snapshot` (no new
chunk while paused; held in memory only).

With `snapshot.read_only` nothing is written to the source: each chunk is placed in the
stream by its transaction snapshot and a WAL position (`bridge.snapshot.watermarks`), the
window open from the read until the stream passes that position, and the runs are kept in
the state topic (`bridge.snapshot.runstate`). A window that closes while the stream is
idle has its rows sent between transactions (`on_idle`); its position is stored once Kafka
confirmed them.

With `snapshot.notification_topic`, each run reports its progress there
(`bridge.snapshot.notify`): STARTED, IN_PROGRESS per chunk, TABLE_SCAN_COMPLETED per
table, PAUSED, RESUMED, ABORTED, COMPLETED, with the signal's id as their id.

The additional condition and the publication's row filter are SQL pasted into the
chunk query: whoever can write the signal table can run SELECTs as the bridge.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

import psycopg
from psycopg import IsolationLevel, sql

from bridge.config import Config, OutboxConfig, SourceConfig
from bridge.decode.messages import Relation
from bridge.encode.records import TxSource
from bridge.encoders import EncoderCache
from bridge.errors import SourceError
from bridge.events.model import OP_CREATE, OP_TRUNCATE, Change
from bridge.record import KafkaRecord
from bridge.snapshot import catalog, notify
from bridge.snapshot.catalog import METHOD_KEY, SnapshotTable
from bridge.snapshot.chunks import Bound, Chunk, chunk_query, max_key_query
from bridge.snapshot.notify import Notifier
from bridge.snapshot.progress import SnapshotProgress
from bridge.snapshot.reader import RawText, TableJob, connect, encode_rows, snapshot_source
from bridge.snapshot.signals import KafkaSignals
from bridge.snapshot.store import DONE, RUNNING, RunStore
from bridge.snapshot.watermarks import QUERY, Streamed, Watermark
from bridge.snapshot.windows import (
    KIND,
    Closed,
    Completed,
    Delivered,
    Run,
    Window,
    Windows,
    requested_run,
    signal_row,
    stop_names,
    text,
)

log = logging.getLogger("bridge.snapshot")

_NOTHING: list[KafkaRecord] = []
# Streamed keys remembered for the read-only check: settled against a fresh snapshot
# when no chunk read did it for this many.
_STREAMED_MAX: Final = 100_000


class Routes(Protocol):
    """Which tables the bridge captures (`bridge.routing.Routing`)."""

    def matches(self, schema: str, table: str) -> bool: ...


class Chunks(Protocol):
    """The incremental snapshot's queries (`ChunkSource`, on a connection of its own).

    Each call blocks on PostgreSQL, within the connection's deadlines, on the pipeline's
    thread; a failed query raises `SourceError` (the run resumes from its last stored
    position on restart). `signal` is the signal table (schema, name), None read-only."""

    signal: tuple[str, str] | None

    def describe(self, name: str) -> SnapshotTable | None:
        """The published table `name`; None when it does not exist or is not published."""
        ...

    def max_key(self, table: SnapshotTable, condition: str | None) -> Bound | None:
        """The table's greatest key (under the run's condition); None when it is empty."""
        ...

    def watermarked(
        self, query: Any, params: list[str], type_oids: set[int], ids: tuple[str, str]
    ) -> list[tuple[Any, ...]]:
        """The chunk's rows (key as text, then every column as the server's text output),
        read between the low and the high watermark rows `ids`, each committed first."""
        ...

    def consistent(
        self, query: Any, params: list[str], type_oids: set[int]
    ) -> tuple[list[tuple[Any, ...]], Watermark]:
        """Read-only: the chunk's rows and the watermark of the snapshot they were read in."""
        ...

    def watermark_now(self) -> Watermark:
        """The current snapshot and WAL position."""
        ...

    def close(self) -> None: ...


class ChunkSource:
    """`Chunks` on a connection of its own (`open_source`).

    Watermarked: each watermark row is committed on its own (autocommit) and flushed at
    commit, so the stream sees it promptly. Read-only: each chunk is read in a REPEATABLE
    READ READ ONLY transaction whose first statement takes its watermark."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        source: SourceConfig,
        signal: tuple[str, str] | None,
        wal_block_size: int,
    ) -> None:
        self.conn = conn
        self.signal = signal
        self._source = source
        self._wal_block_size = wal_block_size

    def close(self) -> None:
        self.conn.close()

    def describe(self, name: str) -> SnapshotTable | None:
        """The published table `name` as the snapshot reads it; None when it does not
        exist or is not published."""
        oid = catalog.resolve(self.conn, [name]).get(name)
        published = {p.oid: p for p in self.published()}
        if oid is None or oid not in published:
            return None
        entry = published[oid]
        return catalog.describe_table(
            self.conn, oid, entry.columns, entry.row_filter, entry.generated
        )

    def published(self) -> list[catalog.Published]:
        src = self._source
        return catalog.published_tables(
            self.conn,
            plugin=src.plugin,
            publication=src.publication_name,
            replication_sets=src.replication_sets,
        )

    def max_key(self, table: SnapshotTable, condition: str | None) -> Bound | None:
        row = self._execute(max_key_query(table, condition), []).fetchone()
        return None if row is None else tuple(text(v) for v in row)

    def watermarked(
        self, query: Any, params: list[str], type_oids: set[int], ids: tuple[str, str]
    ) -> list[tuple[Any, ...]]:
        """Low watermark, the chunk's rows, high watermark."""
        self._watermark(ids[0], "snapshot-window-open")
        rows = self._read(query, params, type_oids)
        self._watermark(ids[1], "snapshot-window-close")
        return rows

    def consistent(
        self, query: Any, params: list[str], type_oids: set[int]
    ) -> tuple[list[tuple[Any, ...]], Watermark]:
        """Read-only: the chunk's rows and the watermark of the snapshot they were read in."""
        try:
            with self.conn.transaction():
                watermark = self.watermark_now()
                rows = self._read(query, params, type_oids)
        except psycopg.Error as exc:
            raise _read_error(exc) from None
        return rows, watermark

    def watermark_now(self) -> Watermark:
        """The current (in a transaction: the transaction's) snapshot and WAL position."""
        row = self._execute(QUERY, []).fetchone()
        assert row is not None
        return Watermark.parse(row[0], row[1], self._wal_block_size)

    def _watermark(self, signal_id: str, kind: str) -> None:
        assert self.signal is not None
        table = sql.Identifier(*self.signal).as_string(self.conn)
        self._execute(
            f"INSERT INTO {table} (id, type, data) VALUES (%s, %s, NULL)", [signal_id, kind]
        )

    def _read(self, query: Any, params: list[str], type_oids: set[int]) -> list[tuple[Any, ...]]:
        """Rows with every value as the server's text output (see `reader.RawText`)."""
        cursor = self.conn.cursor()
        for oid in type_oids:
            cursor.adapters.register_loader(oid, RawText)
        return self._execute(query, params, cursor).fetchall()

    def _execute(
        self, query: Any, params: list[str], cursor: psycopg.Cursor[Any] | None = None
    ) -> psycopg.Cursor[Any]:
        try:
            return (cursor or self.conn.cursor()).execute(query, params)
        except psycopg.Error as exc:
            raise _read_error(exc) from None


def open_source(cfg: Config) -> ChunkSource:
    """The incremental snapshot's connection, checked and set up: read-only needs a
    PostgreSQL 13+ primary; otherwise the signal table must exist and be published, and
    watermarks are flushed at commit (even where synchronous_commit is off, or every
    chunk would wait for the WAL writer)."""
    snap = cfg.snapshot
    signal = None if snap.signal_table is None else _split(snap.signal_table)
    conn = connect(cfg.source.conninfo(), purpose="incremental snapshot")
    try:
        wal_block_size = 0
        if snap.read_only:
            wal_block_size = _check_read_only(conn)
            # Each chunk in a transaction of its own that sees one snapshot (`watermarks`).
            conn.isolation_level = IsolationLevel.REPEATABLE_READ
            conn.read_only = True
        else:
            conn.execute("SET synchronous_commit = on")
        chunks = ChunkSource(conn, cfg.source, signal, wal_block_size)
        if snap.signal_table is not None:
            _check_signal_table(chunks, snap.signal_table)
        return chunks
    except BaseException:
        conn.close()
        raise


class IncrementalSnapshotter:
    """Hooks for the pipeline loop: `on_change` for every change, `on_acknowledged` per
    acknowledgement, `on_idle` when the stream is idle. The I/O around `Windows`: every
    collaborator comes ready (bridge/build.py, bridge/snapshot/manager.py)."""

    def __init__(
        self,
        cfg: Config,
        chunks: Chunks,
        routes: Routes,
        store: RunStore,
        progress: SnapshotProgress,
        encoders: EncoderCache,
        relation_of: Callable[[int], Relation | None],
        signals: KafkaSignals | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self._chunks = chunks
        self._signal = chunks.signal
        self._routes = routes
        self._outbox: OutboxConfig = cfg.outbox
        self._read_only = cfg.snapshot.read_only
        self._chunk_size = cfg.snapshot.incremental_chunk_size
        self._server = cfg.kafka.topic_prefix
        self._db = cfg.source.dbname
        self._store = store
        self._progress = progress
        self._encoders = encoders
        self._relation_of = relation_of
        self._signals = signals  # snapshot.signal_kafka_topic
        self._notifier = notifier  # snapshot.notification_topic
        self._windows = Windows(Run.restore(r.run_id, r.detail) for r in store.runs(KIND, RUNNING))
        self._streamed = Streamed()  # read-only: keys streamed since the last snapshot
        self._tables: dict[str, SnapshotTable | str] = {}  # str: why it is skipped
        self._tables_of: str | None = None  # the run `_tables` describes
        self._tracked: set[str] = set()  # tables with progress counters in this process

    def close(self) -> None:
        if self._signals is not None:
            self._signals.close()
        self._chunks.close()

    # -- stream side ----------------------------------------------------------

    def on_change(
        self, change: Change, records: list[KafkaRecord], tx: TxSource
    ) -> list[KafkaRecord]:
        """A streamed change and its records; returns records to produce right after them."""
        relation = change.relation
        assert relation is not None
        keys = [record.key for record in records]
        if self._read_only and tx.xid is not None:
            self._streamed.add(tx.xid, relation.oid, keys, change.op == OP_TRUNCATE)
        out = _NOTHING
        closed = self._windows.on_change(relation.oid, change.op, keys, tx.commit_lsn)
        if closed is not None:  # after this change's records
            out = self._closed_in(closed, tx.commit_lsn)
        if change.op != OP_CREATE or (relation.namespace, relation.name) != self._signal:
            return out
        row = signal_row(change)
        if row is None:
            return out
        signal_id, signal_type, data = row
        if self._windows.is_watermark(signal_id):
            closed = self._windows.on_watermark(signal_id, tx.commit_lsn)
            return out if closed is None else out + self._closed_in(closed, tx.commit_lsn)
        self._on_signal(signal_id, signal_type, data)
        return out

    def on_acknowledged(self, lsn: int) -> None:
        """Everything up to `lsn` is delivered: store the positions it covers, take the
        Kafka topic's signals, start work."""
        for mark in self._windows.acknowledged(lsn):
            self._store.set_detail(mark.run_id, mark.detail)
            if mark.done:
                self._store.set_state(mark.run_id, DONE)
                log.info("incremental snapshot %s done", mark.run_id)
        if self._signals is not None:
            for signal in self._signals.poll():
                self._on_signal(signal.id, signal.type, signal.data)
        if self._streamed.size > _STREAMED_MAX:
            self._streamed.settle(self._chunks.watermark_now())
        if self._windows.wants_work():
            self._advance(lsn)

    def on_idle(self, position: int, emit: Callable[[list[KafkaRecord]], Delivered]) -> bool:
        """The stream is idle at `position` (every transaction whose commit record starts
        below it was handed to `on_change`): a read-only window it passes closes, its rows
        sent between transactions by `emit`. True while a window waits for the stream to
        reach its position (the caller asks the server how far it is)."""
        waits = self._windows.waits_at(position)
        if waits is None or waits:
            return bool(waits)
        closed = self._windows.take_idle()
        self._report(closed)
        self._windows.close_between(position, emit(closed.rows) if closed.rows else _confirmed)
        self._advance(position)
        return False

    def _closed_in(self, closed: Closed, commit_lsn: int) -> list[KafkaRecord]:
        """A window closed inside the transaction committed at `commit_lsn`: its rows go
        out as that transaction's records; the next chunk starts now."""
        self._report(closed)
        self._advance(commit_lsn)
        return closed.rows

    def _report(self, closed: Closed) -> None:
        run = closed.run
        self._progress.add_rows(closed.label, len(closed.rows))
        self._notify(
            run,
            notify.IN_PROGRESS,
            {
                "data_collections": notify.collections(run.names),
                "current_collection_in_progress": closed.label,
                "maximum_key": ",".join(closed.max_key or ()),
                "last_processed_key": ",".join(closed.last_key),
            },
        )
        if closed.table_done:
            self._progress.finish(closed.label)
            self._notify_table(run, closed.label, notify.SUCCEEDED, closed.table_rows)

    # -- signals ----------------------------------------------------------------

    def _on_signal(self, signal_id: str, signal_type: str, data: str | None) -> None:
        """One signal from the table or the Kafka topic (Debezium's signal types)."""
        windows = self._windows
        if signal_type == "execute-snapshot":
            self._request(signal_id, data)
        elif signal_type == "stop-snapshot":
            names = stop_names(data)
            windows.stops.append(names)
            log.info("signal %s: stop incremental snapshot of %s", signal_id, names or "all")
        elif signal_type in ("pause-snapshot", "resume-snapshot"):
            windows.paused = signal_type == "pause-snapshot"
            state = "paused" if windows.paused else "resumed"
            log.info("signal %s: incremental snapshots %s", signal_id, state)
            self._notify_pause(signal_id)
        else:
            log.warning("signal %s of type %r ignored", signal_id, signal_type)

    def _request(self, signal_id: str, data: str | None) -> None:
        if self._store.run(signal_id) is not None:
            return  # replayed after a restart: already queued from the store, or done
        run = requested_run(signal_id, data)
        if isinstance(run, str):
            log.error("signal %s ignored: %s", signal_id, run)
            return
        self._store.begin(signal_id, KIND, RUNNING, run.detail())
        self._windows.request(run)
        log.info("incremental snapshot %s requested for %s", signal_id, ", ".join(run.names))
        self._notify(run, notify.STARTED, {"data_collections": notify.collections(run.names)})

    def _notify_pause(self, signal_id: str) -> None:
        """One PAUSED or RESUMED, named after the run it holds up (or the signal)."""
        if self._notifier is None:
            return
        runs = self._windows.runs()
        remaining = notify.collections([n for r in runs for n in r.remaining()])
        self._notifier.send(
            notify.INCREMENTAL,
            notify.PAUSED if self._windows.paused else notify.RESUMED,
            {"data_collections": remaining},
            runs[0].run_id if runs else signal_id,
        )

    # -- runs and windows -----------------------------------------------------

    def _advance(self, lsn: int) -> None:
        """Stops applied, then the next chunk read (or the next run announced done)."""
        for run, stopped in self._windows.apply_stops():
            self._store.set_detail(run.run_id, run.detail())
            if stopped:
                self._notify(run, notify.ABORTED, {"data_collections": notify.collections(stopped)})
        while True:
            step = self._windows.next_step()
            if step is None:
                return
            if isinstance(step, Completed):
                self._notify(step.run, notify.COMPLETED, {})
                continue
            if step.run_id != self._tables_of:
                self._tables.clear()  # described afresh for each run
                self._tables_of = step.run_id
            window = self._open_window(step, lsn)
            if window is _LATER:
                return  # read again at the next acknowledgement
            if window is not None:
                self._windows.open(window)
                return

    def _open_window(self, run: Run, lsn: int) -> Window | None:
        """The next chunk of the run's current table, read between its watermarks; None
        when the table is done (or skipped)."""
        name = run.table
        table = self._table(name)
        if isinstance(table, str):
            self._table_done(run, name, table)
            return None
        condition = run.conditions.get(name)
        if run.max_key is None or table.label not in self._tracked:
            self._tracked.add(table.label)
            self._progress.start_table(table.label, KIND, table.estimated_rows)
        if run.max_key is None:
            run.max_key = self._chunks.max_key(table, condition)
            if run.max_key is None:
                self._progress.finish(table.label)
                self._table_done(run, table.label, notify.EMPTY)
                return None
        relation = self._relation_of(table.relation.oid) or table.relation
        table = table._replace(relation=relation)
        topic, encoder = self._encoders.get(relation)
        chunk = Chunk(table.label, 0, METHOD_KEY, run.last_key, run.max_key)
        query, params = chunk_query(
            table, chunk, condition=condition, limit=self._chunk_size, key_text=True
        )
        type_oids = {c.type_oid for c in relation.columns}
        until: int | None = None
        stale: Iterable[bytes | None] = ()
        ids: tuple[str, str] | None = None
        if self._read_only:
            rows, watermark = self._chunks.consistent(query, params, type_oids)
            found = self._streamed.stale(watermark, relation.oid)
            if found is None:
                log.debug("incremental snapshot: a streamed transaction is still in progress")
                return _LATER
            if found:
                log.debug(
                    "incremental snapshot: %d key(s) changed by streamed transactions",
                    len(found),
                )
            until, stale = watermark.until, found
        else:
            token = uuid.uuid4().hex
            ids = (f"{token}-open", f"{token}-close")
            rows = self._chunks.watermarked(query, params, type_oids, ids)
        if not rows:
            self._progress.finish(table.label)
            self._table_done(run, table.label, notify.SUCCEEDED)
            return None
        width = len(table.key)
        source = snapshot_source(self._server, self._db, lsn, KIND)
        records, _ = encode_rows([r[width:] for r in rows], TableJob(table, topic, encoder), source)
        last_key: Bound = tuple(text(v) for v in rows[-1][:width])
        if len(rows) < self._chunk_size:
            last_key = run.max_key  # nothing left below max: the table ends here
        window = Window(
            table.label,
            relation.oid,
            topic,
            ((r.key, r.value) for r in records),  # reads: no headers
            last_key,
            watermarks=ids,
            until=until,
        )
        window.drop(stale)  # changed by a transaction streamed already, not in the snapshot
        return window

    def _table_done(self, run: Run, label: str, status: str) -> None:
        """The run's current table is finished (or skipped, `status` says why)."""
        self._notify_table(run, label, status, run.rows)
        self._windows.table_done(run)

    def _notify_table(self, run: Run, label: str, status: str, rows: int) -> None:
        data = {
            "data_collections": notify.collections(run.names),
            "scanned_collection": label,
            "total_rows_scanned": str(rows),
            "status": status,
        }
        self._notify(run, notify.TABLE_SCAN_COMPLETED, data)

    def _notify(self, run: Run, kind: str, data: dict[str, str]) -> None:
        if self._notifier is not None:
            self._notifier.send(notify.INCREMENTAL, kind, data, run.run_id)

    def _table(self, name: str) -> SnapshotTable | str:
        """The table to read, or (logged) why it cannot be snapshotted: Debezium's table
        scan status for it."""
        if name in self._tables:
            return self._tables[name]
        found: SnapshotTable | str = notify.UNKNOWN_SCHEMA
        table = self._chunks.describe(name)
        if table is None:
            log.error("incremental snapshot: table %s does not exist or is not published", name)
        else:
            relation = table.relation
            found = table
            if not self._routes.matches(relation.namespace, relation.name):
                log.error("incremental snapshot: table %s is excluded by the filters", name)
                found = notify.SKIPPED
            elif self._outbox.holds(relation.namespace, relation.name):
                log.error("incremental snapshot: %s is an outbox table, skipped", name)
                found = notify.SKIPPED
            elif table.method != METHOD_KEY:
                log.error("incremental snapshot: table %s has no primary key, skipped", name)
                found = notify.NO_PRIMARY_KEY
        self._tables[name] = found
        return found


_LATER: Final = Window("", 0, "", (), (), until=0)  # a read-only chunk to read again later


def _confirmed() -> bool:
    """An empty chunk: nothing to wait for."""
    return True


def _read_error(exc: psycopg.Error) -> SourceError:
    return SourceError(
        f"incremental snapshot: {str(exc).strip()}",
        hint="fix the cause (signal table permissions, the additional condition); "
        "the snapshot resumes from its last acknowledged chunk on restart",
    )


def _split(name: str) -> tuple[str, str]:
    schema, _, table = name.partition(".")
    return schema, table


def _check_signal_table(chunks: ChunkSource, name: str) -> None:
    oid = catalog.resolve(chunks.conn, [name]).get(name)
    if oid is None:
        raise SourceError(
            f"signal table {name} does not exist",
            hint=f"CREATE TABLE {name} (id text PRIMARY KEY, type text NOT NULL, "
            "data text), or unset snapshot.signal_table",
        )
    if oid not in {p.oid for p in chunks.published()}:
        raise SourceError(
            f"signal table {name} is not sent by the output plugin",
            hint="add it to the publication (or replication set): the bridge reads "
            "signals and watermarks from the stream",
        )


def _check_read_only(conn: psycopg.Connection[Any]) -> int:
    """snapshot.read_only reads the primary's transaction snapshots (PostgreSQL 13+):
    a standby's list no in-progress transactions. Returns wal_block_size."""
    try:
        row = conn.execute(
            "SELECT current_setting('server_version_num')::int, pg_is_in_recovery(), "
            "current_setting('wal_block_size')::int"
        ).fetchone()
    except psycopg.Error as exc:
        raise _read_error(exc) from None
    assert row is not None
    version, standby, wal_block_size = row
    if version < 130000 or standby:
        raise SourceError(
            "snapshot.read_only needs a PostgreSQL 13+ primary (pg_current_snapshot(), "
            "pg_current_wal_insert_lsn()): "
            + ("this server is a standby" if standby else f"this server is {version}"),
            hint="point the bridge at the primary, or unset snapshot.read_only and give it "
            "a signal table to write its watermarks to",
        )
    return int(wal_block_size)
