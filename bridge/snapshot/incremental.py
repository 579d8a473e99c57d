"""Incremental snapshots while streaming continues: DBLog's watermarks, as Debezium does them.

Triggered by a row in the signal table (Debezium's layout: `id text PRIMARY KEY,
type text, data text`), for example

    INSERT INTO public.debezium_signal VALUES ('snap-1', 'execute-snapshot',
      '{"data-collections": ["public.t"], "type": "incremental",
        "additional-conditions": [{"data-collection": "public.t", "filter": "id > 10"}]}');

Per chunk: insert a low watermark row (`snapshot-window-open`), read the next key
range (`key > last AND key <= max ORDER BY key LIMIT n`, `max` fixed when the table
starts so the snapshot ends), insert a high watermark row (`snapshot-window-close`).
In the stream, between the two watermarks, a change to a key of the chunk drops the
key from the buffer: the read may have seen that change or not, but the streamed
event itself (emitted in order, and followed by any later ones) carries the key's
state, so the row read is redundant or stale. At the high
watermark the rest of the buffer is emitted as op "r" (`source.snapshot =
"incremental"`) inside the watermark's transaction, so that LSN is acknowledged
only once they are delivered, and the next chunk starts. A chunk's position is
stored once the flush position passes its high watermark: after a crash the run
resumes from the store and re-reads only chunks whose delivery was not confirmed.

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

import json
import logging
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

import psycopg
from psycopg import IsolationLevel

from bridge.config import Config
from bridge.decode.messages import KIND_BINARY, KIND_TEXT, Relation
from bridge.encode.records import TxSource
from bridge.encoders import EncoderCache
from bridge.errors import SourceError
from bridge.events.model import OP_CREATE, OP_TRUNCATE, Change
from bridge.record import KafkaRecord
from bridge.routing import Routing
from bridge.snapshot import catalog, notify
from bridge.snapshot.catalog import METHOD_KEY, SnapshotTable
from bridge.snapshot.chunks import Bound, Chunk, chunk_query, max_key_query
from bridge.snapshot.notify import Notifier
from bridge.snapshot.progress import SnapshotProgress
from bridge.snapshot.reader import RawText, TableJob, connect, encode_rows, snapshot_source
from bridge.snapshot.signals import KafkaSignals
from bridge.snapshot.store import DONE, RUNNING, RunStore
from bridge.snapshot.watermarks import QUERY, Streamed, Watermark

log = logging.getLogger("bridge.snapshot")

KIND = "incremental"
Delivered = Callable[[], bool]  # whether records sent between transactions are confirmed
_NOTHING: list[KafkaRecord] = []
# Streamed keys remembered for the read-only check: settled against a fresh snapshot
# when no chunk read did it for this many.
_STREAMED_MAX: Final = 100_000


class _Run:
    """One execute-snapshot signal: its tables and how far it got."""

    __slots__ = ("conditions", "index", "last_key", "max_key", "names", "rows", "run_id")

    def __init__(self, run_id: str, names: Sequence[str], conditions: dict[str, str]) -> None:
        self.run_id = run_id
        self.names = list(names)
        self.conditions = conditions
        self.index = 0  # table being read
        self.last_key: Bound | None = None  # last key emitted in that table
        self.max_key: Bound | None = None  # fixed when the table starts
        self.rows = 0  # rows emitted from that table

    def detail(self) -> dict[str, Any]:
        return {
            "data-collections": self.names,
            "conditions": self.conditions,
            "index": self.index,
            "last_key": self.last_key,
            "max_key": self.max_key,
            "rows": self.rows,
        }

    @classmethod
    def restore(cls, run_id: str, detail: dict[str, Any]) -> _Run:
        run = cls(run_id, detail.get("data-collections", []), detail.get("conditions", {}))
        run.index = int(detail.get("index", 0))
        run.last_key = _bound(detail.get("last_key"))
        run.max_key = _bound(detail.get("max_key"))
        run.rows = int(detail.get("rows", 0))
        return run

    def next_table(self) -> None:
        self.index += 1
        self.last_key = self.max_key = None
        self.rows = 0


class _Mark(NamedTuple):
    """A run's position, stored once its chunk is delivered: the flush position passed
    `lsn` (rows sent inside a transaction), or `delivered()` (rows sent between them)."""

    lsn: int
    run_id: str
    detail: dict[str, Any]
    done: bool
    delivered: Delivered | None = None

    def ready(self, flushed: int) -> bool:
        return self.lsn < flushed if self.delivered is None else self.delivered()


class _Window:
    """One chunk between its watermarks: key bytes -> the "r" record's value. A read-only
    window is open from the read and closes once the stream passes `until`."""

    __slots__ = (
        "buffer",
        "close_id",
        "label",
        "last_key",
        "oid",
        "open_id",
        "opened",
        "topic",
        "until",
    )

    def __init__(self, label: str, oid: int, topic: str, last_key: Bound) -> None:
        token = uuid.uuid4().hex
        self.open_id = f"{token}-open"
        self.close_id = f"{token}-close"
        self.label = label
        self.oid = oid
        self.topic = topic
        self.last_key = last_key
        self.opened = False
        self.until: int | None = None  # read-only: the position that closes the window
        self.buffer: dict[bytes | None, bytes | None] = {}


_LATER: Final = _Window("", 0, "", ())  # a read-only chunk to read again later


class IncrementalSnapshotter:
    """Hooks for the pipeline loop: `on_change` for every change, `on_acknowledged` per ack."""

    def __init__(
        self,
        cfg: Config,
        store: RunStore,
        progress: SnapshotProgress,
        encoders: EncoderCache,
        relation_of: Callable[[int], Relation | None],
        signals: KafkaSignals | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        signal = cfg.snapshot.signal_table
        self._signal = None if signal is None else tuple(signal.split(".", 1))
        self._read_only = cfg.snapshot.read_only
        self._store = store
        self._progress = progress
        self._encoders = encoders
        self._relation_of = relation_of
        self._chunk_size = cfg.snapshot.incremental_chunk_size
        self._server = cfg.kafka.topic_prefix
        self._db = cfg.source.dbname
        self._source_cfg = cfg.source
        self._routing = Routing.from_config(cfg)
        self._outbox = cfg.outbox
        self._conn = connect(cfg.source.conninfo())
        self._wal_block_size = 0
        self._streamed = Streamed()  # read-only: keys streamed since the last snapshot
        if self._read_only:
            self._check_read_only()
            # Each chunk in a transaction of its own that sees one snapshot (`watermarks`).
            self._conn.isolation_level = IsolationLevel.REPEATABLE_READ
            self._conn.read_only = True
        else:
            # A watermark is seen in the stream only once its WAL is flushed: flush at commit
            # even where synchronous_commit is off, or every chunk waits for the WAL writer.
            self._conn.execute("SET synchronous_commit = on")
        if signal is not None:
            self._check_signal_table(signal)
        self._queue: deque[_Run] = deque(
            _Run.restore(r.run_id, r.detail) for r in store.runs(KIND, RUNNING)
        )
        self._active: _Run | None = None
        self._window: _Window | None = None
        self._unacked: deque[_Mark] = deque()  # positions to store once acknowledged
        self._last_lsn = 0  # commit LSN of the newest window close
        self._tables: dict[str, SnapshotTable | str] = {}  # str: why it is skipped
        self._tracked: set[str] = set()  # tables with progress counters in this process
        self._signals = signals  # snapshot.signal_kafka_topic
        self._paused = False  # pause-snapshot: no new chunk until resume-snapshot
        self._stops: list[list[str] | None] = []  # stop-snapshot: applied between chunks
        self._notifier = notifier  # snapshot.notification_topic

    def close(self) -> None:
        if self._signals is not None:
            self._signals.close()
        self._conn.close()

    # -- stream side ----------------------------------------------------------

    def on_change(
        self, change: Change, records: list[KafkaRecord], tx: TxSource
    ) -> list[KafkaRecord]:
        """A streamed change and its records; returns records to produce right after them."""
        relation = change.relation
        assert relation is not None
        if self._read_only and tx.xid is not None:
            keys = (record.key for record in records)
            self._streamed.add(tx.xid, relation.oid, keys, change.op == OP_TRUNCATE)
        window = self._window
        if window is not None and window.opened and relation.oid == window.oid:
            _drop_changed(window, change.op, records)
            if window.until is None:
                return _NOTHING
        if window is not None and window.until is not None and tx.commit_lsn >= window.until:
            return self._close_window(window, tx.commit_lsn)  # after this change's records
        if change.op != OP_CREATE or (relation.namespace, relation.name) != self._signal:
            return _NOTHING
        row = _signal_row(change)
        return _NOTHING if row is None else self._on_signal_row(window, *row, tx.commit_lsn)

    def _on_signal_row(
        self,
        window: _Window | None,
        signal_id: str,
        signal_type: str,
        data: str | None,
        commit_lsn: int,
    ) -> list[KafkaRecord]:
        """A signal table row: the open window's watermarks, or a signal."""
        if window is not None and signal_id == window.open_id:
            window.opened = True
        elif window is not None and signal_id == window.close_id:
            return self._close_window(window, commit_lsn)
        else:
            self._on_signal(signal_id, signal_type, data)
        return _NOTHING

    def on_acknowledged(self, lsn: int) -> None:
        """Everything up to `lsn` is delivered: store the positions it covers, take the
        Kafka topic's signals, start work."""
        while self._unacked and self._unacked[0].ready(lsn):
            mark = self._unacked.popleft()
            self._store.set_detail(mark.run_id, mark.detail)
            if mark.done:
                self._store.set_state(mark.run_id, DONE)
                log.info("incremental snapshot %s done", mark.run_id)
        if self._signals is not None:
            for signal in self._signals.poll():
                self._on_signal(signal.id, signal.type, signal.data)
        if self._streamed.size > _STREAMED_MAX:
            self._streamed.settle(self._watermark_now())
        if self._window is None and (self._active is not None or self._queue or self._stops):
            self._advance(lsn)

    def on_idle(self, position: int, emit: Callable[[list[KafkaRecord]], Delivered]) -> bool:
        """The stream is idle at `position` (every transaction whose commit record starts
        below it was handed to `on_change`): a read-only window it passes closes, its rows
        sent between transactions by `emit`. True while a window waits for the stream to
        reach its position (the caller asks the server how far it is)."""
        window = self._window
        if window is None or window.until is None:
            return False
        if position < window.until:
            return True
        out, run = self._take(window)
        delivered = emit(out) if out else _confirmed
        self._unacked.append(_Mark(position, run.run_id, run.detail(), False, delivered))
        self._advance(position)
        return False

    def _on_signal(self, signal_id: str, signal_type: str, data: str | None) -> None:
        """One signal from the table or the Kafka topic (Debezium's signal types)."""
        if signal_type == "execute-snapshot":
            self._request(signal_id, data)
        elif signal_type == "stop-snapshot":
            names = _names(data)
            self._stops.append(names)
            log.info("signal %s: stop incremental snapshot of %s", signal_id, names or "all")
        elif signal_type in ("pause-snapshot", "resume-snapshot"):
            self._paused = signal_type == "pause-snapshot"
            state = "paused" if self._paused else "resumed"
            log.info("signal %s: incremental snapshots %s", signal_id, state)
            self._notify_pause(signal_id)
        else:
            log.warning("signal %s of type %r ignored", signal_id, signal_type)

    def _notify_pause(self, signal_id: str) -> None:
        """One PAUSED or RESUMED, named after the run it holds up (or the signal)."""
        if self._notifier is None:
            return
        runs = ([self._active] if self._active is not None else []) + list(self._queue)
        remaining = notify.collections([n for r in runs for n in r.names[r.index :]])
        self._notifier.send(
            notify.INCREMENTAL,
            notify.PAUSED if self._paused else notify.RESUMED,
            {"data_collections": remaining},
            runs[0].run_id if runs else signal_id,
        )

    # -- runs and windows -----------------------------------------------------

    def _request(self, signal_id: str, data: str | None) -> None:
        if self._store.run(signal_id) is not None:
            return  # replayed after a restart: already queued from the store, or done
        try:
            spec = json.loads(data or "{}")
            names = [str(n) for n in spec["data-collections"]]
            kind = str(spec.get("type", KIND)).lower()
            conditions = {
                str(c["data-collection"]): str(c["filter"])
                for c in spec.get("additional-conditions", [])
            }
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("signal %s ignored: malformed execute-snapshot data (%s)", signal_id, exc)
            return
        if kind != KIND:
            log.error("signal %s ignored: only incremental snapshots can be signalled", signal_id)
            return
        run = _Run(signal_id, names, conditions)
        self._store.begin(signal_id, KIND, RUNNING, run.detail())
        self._queue.append(run)
        log.info("incremental snapshot %s requested for %s", signal_id, ", ".join(names))
        self._notify(run, notify.STARTED, {"data_collections": notify.collections(names)})

    def _stop(self) -> None:
        """Apply the stop-snapshot signals: the named tables (or whole runs) leave the queue
        and the active run; a run left without tables is done."""
        stops, self._stops = self._stops, []
        for names in stops:
            runs = ([self._active] if self._active is not None else []) + list(self._queue)
            for run in runs:
                finished, rest = run.names[: run.index], run.names[run.index :]
                kept = [] if names is None else [n for n in rest if n not in names]
                if not kept or kept[0] != rest[0]:
                    run.last_key = run.max_key = None  # the table being read was stopped
                    run.rows = 0
                run.names = finished + kept
                self._store.set_detail(run.run_id, run.detail())
                stopped = [n for n in rest if n not in kept]
                if stopped:
                    data = {"data_collections": notify.collections(stopped)}
                    self._notify(run, notify.ABORTED, data)

    def _advance(self, lsn: int) -> None:
        if self._stops:
            self._stop()
        if self._paused:
            return
        while True:
            run = self._active
            if run is None:
                if not self._queue:
                    return
                run = self._active = self._queue.popleft()
                self._tables.clear()  # described afresh for each run
            if run.index >= len(run.names):
                self._unacked.append(_Mark(self._last_lsn, run.run_id, run.detail(), True))
                self._active = None
                self._notify(run, notify.COMPLETED, {})
                continue
            window = self._open_window(run, lsn)
            if window is _LATER:
                return  # read again at the next acknowledgement
            if window is not None:
                self._window = window
                return

    def _open_window(self, run: _Run, lsn: int) -> _Window | None:
        """Watermarks around the next chunk of the run's current table; None if it is done."""
        name = run.names[run.index]
        table = self._table(name)
        if isinstance(table, str):
            self._table_done(run, name, table)
            return None
        condition = run.conditions.get(name)
        if run.max_key is None or table.label not in self._tracked:
            self._tracked.add(table.label)
            self._progress.start_table(table.label, KIND, table.estimated_rows)
        if run.max_key is None:
            run.max_key = self._max_key(table, condition)
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
        window = _Window(table.label, relation.oid, topic, ())
        type_oids = {c.type_oid for c in relation.columns}
        stale: set[bytes | None] = set()
        if self._read_only:
            read = self._read_consistent(query, params, type_oids, relation.oid)
            if read is None:
                return _LATER
            rows, window.until, stale = read
            window.opened = True
        else:
            self._watermark(window.open_id, "snapshot-window-open")
            rows = self._read(query, params, type_oids)
            self._watermark(window.close_id, "snapshot-window-close")
        if not rows:
            self._progress.finish(table.label)
            self._table_done(run, table.label, notify.SUCCEEDED)
            return None
        width = len(table.key)
        source = snapshot_source(self._server, self._db, lsn, KIND)
        records, _ = encode_rows([r[width:] for r in rows], TableJob(table, topic, encoder), source)
        window.buffer.update((r.key, r.value) for r in records)  # reads: no headers
        for key in stale:  # changed by a transaction streamed already, not in the snapshot
            window.buffer.pop(key, None)
        window.last_key = tuple(_text(v) for v in rows[-1][:width])
        if len(rows) < self._chunk_size:
            window.last_key = run.max_key  # nothing left below max: the table ends here
        return window

    def _close_window(self, window: _Window, commit_lsn: int) -> list[KafkaRecord]:
        """The window closes inside the transaction committed at `commit_lsn`: its rows
        go out right after the change at hand, as that transaction's records."""
        out, run = self._take(window)
        # The next chunk starts now; this one's position is stored once it is acknowledged.
        self._last_lsn = commit_lsn
        self._unacked.append(_Mark(self._last_lsn, run.run_id, run.detail(), False))
        self._advance(self._last_lsn)
        return out

    def _take(self, window: _Window) -> tuple[list[KafkaRecord], _Run]:
        """Close `window`: its remaining rows, and the run moved past them."""
        self._window = None
        run = self._active
        assert run is not None
        out = [KafkaRecord(window.topic, key, value) for key, value in window.buffer.items()]
        self._progress.add_rows(window.label, len(out))
        run.rows += len(out)
        self._notify(
            run,
            notify.IN_PROGRESS,
            {
                "data_collections": notify.collections(run.names),
                "current_collection_in_progress": window.label,
                "maximum_key": ",".join(run.max_key or ()),
                "last_processed_key": ",".join(window.last_key),
            },
        )
        if window.last_key == run.max_key:
            self._progress.finish(window.label)
            self._table_done(run, window.label, notify.SUCCEEDED)
        else:
            run.last_key = window.last_key
        return out, run

    def _table_done(self, run: _Run, label: str, status: str) -> None:
        """The run's current table is finished (or skipped, `status` says why)."""
        data = {
            "data_collections": notify.collections(run.names),
            "scanned_collection": label,
            "total_rows_scanned": str(run.rows),
            "status": status,
        }
        self._notify(run, notify.TABLE_SCAN_COMPLETED, data)
        run.next_table()

    def _notify(self, run: _Run, kind: str, data: dict[str, str]) -> None:
        if self._notifier is not None:
            self._notifier.send(notify.INCREMENTAL, kind, data, run.run_id)

    def _table(self, name: str) -> SnapshotTable | str:
        """The table to read, or (logged) why it cannot be snapshotted: Debezium's table
        scan status for it."""
        if name in self._tables:
            return self._tables[name]
        table: SnapshotTable | str = notify.UNKNOWN_SCHEMA
        oid = catalog.resolve(self._conn, [name]).get(name)
        published = {p.oid: p for p in self._published_tables()}
        if oid is None or oid not in published:
            log.error("incremental snapshot: table %s does not exist or is not published", name)
        else:
            entry = published[oid]
            table = catalog.describe_table(
                self._conn, oid, entry.columns, entry.row_filter, entry.generated
            )
            relation = table.relation
            if not self._routing.matches(relation.namespace, relation.name):
                log.error("incremental snapshot: table %s is excluded by the filters", name)
                table = notify.SKIPPED
            elif self._outbox.holds(relation.namespace, relation.name):
                log.error("incremental snapshot: %s is an outbox table, skipped", name)
                table = notify.SKIPPED
            elif table.method != METHOD_KEY:
                log.error("incremental snapshot: table %s has no primary key, skipped", name)
                table = notify.NO_PRIMARY_KEY
        self._tables[name] = table
        return table

    def _max_key(self, table: SnapshotTable, condition: str | None) -> Bound | None:
        row = self._execute(max_key_query(table, condition), []).fetchone()
        return None if row is None else tuple(_text(v) for v in row)

    def _watermark(self, signal_id: str, kind: str) -> None:
        assert self._signal is not None
        table = psycopg.sql.Identifier(*self._signal).as_string(self._conn)
        self._execute(
            f"INSERT INTO {table} (id, type, data) VALUES (%s, %s, NULL)", [signal_id, kind]
        )

    def _read(self, query: Any, params: list[str], type_oids: set[int]) -> list[tuple[Any, ...]]:
        """Rows with every value as the server's text output (see `reader.RawText`)."""
        cursor = self._conn.cursor()
        for oid in type_oids:
            cursor.adapters.register_loader(oid, RawText)
        return self._execute(query, params, cursor).fetchall()

    def _read_consistent(
        self, query: Any, params: list[str], type_oids: set[int], oid: int
    ) -> tuple[list[tuple[Any, ...]], int, set[bytes | None]] | None:
        """Read-only: the chunk's rows, the position that closes its window and the keys
        whose rows are stale, read in one snapshot (`watermarks`); None when a transaction
        the stream already delivered is still in progress in that snapshot and its keys
        are not known: the chunk is read again later."""
        try:
            with self._conn.transaction():
                watermark = self._watermark_now()
                rows = self._read(query, params, type_oids)
        except psycopg.Error as exc:
            raise _read_error(exc) from None
        stale = self._streamed.stale(watermark, oid)
        if stale is None:
            log.debug("incremental snapshot: a streamed transaction is still in progress")
            return None
        if stale:
            log.debug(
                "incremental snapshot: %d key(s) changed by streamed transactions", len(stale)
            )
        return rows, watermark.until, stale

    def _watermark_now(self) -> Watermark:
        """The current (in a transaction: the transaction's) snapshot and WAL position."""
        row = self._execute(QUERY, []).fetchone()
        assert row is not None
        return Watermark.parse(row[0], row[1], self._wal_block_size)

    def _execute(
        self, query: Any, params: list[str], cursor: psycopg.Cursor[Any] | None = None
    ) -> psycopg.Cursor[Any]:
        try:
            return (cursor or self._conn.cursor()).execute(query, params)
        except psycopg.Error as exc:
            raise _read_error(exc) from None

    def _published_tables(self) -> list[catalog.Published]:
        src = self._source_cfg
        return catalog.published_tables(
            self._conn,
            plugin=src.plugin,
            publication=src.publication_name,
            replication_sets=src.replication_sets,
        )

    def _check_signal_table(self, name: str) -> None:
        oid = catalog.resolve(self._conn, [name]).get(name)
        if oid is None:
            raise SourceError(
                f"signal table {name} does not exist",
                hint=f"CREATE TABLE {name} (id text PRIMARY KEY, type text NOT NULL, "
                "data text), or unset snapshot.signal_table",
            )
        if oid not in {p.oid for p in self._published_tables()}:
            raise SourceError(
                f"signal table {name} is not sent by the output plugin",
                hint="add it to the publication (or replication set): the bridge reads "
                "signals and watermarks from the stream",
            )

    def _check_read_only(self) -> None:
        """snapshot.read_only reads the primary's transaction snapshots (PostgreSQL 13+):
        a standby's list no in-progress transactions."""
        row = self._execute(
            "SELECT current_setting('server_version_num')::int, pg_is_in_recovery(), "
            "current_setting('wal_block_size')::int",
            [],
        ).fetchone()
        assert row is not None
        version, standby, self._wal_block_size = row
        if version < 130000 or standby:
            raise SourceError(
                "snapshot.read_only needs a PostgreSQL 13+ primary (pg_current_snapshot(), "
                "pg_current_wal_insert_lsn()): "
                + ("this server is a standby" if standby else f"this server is {version}"),
                hint="point the bridge at the primary, or unset snapshot.read_only and give it "
                "a signal table to write its watermarks to",
            )


def _drop_changed(window: _Window, op: str, records: list[KafkaRecord]) -> None:
    """A streamed change to the window's table: its keys' rows are redundant or stale."""
    if op == OP_TRUNCATE:
        window.buffer.clear()
    else:
        for record in records:
            window.buffer.pop(record.key, None)


def _confirmed() -> bool:
    """An empty chunk: nothing to wait for."""
    return True


def _read_error(exc: psycopg.Error) -> SourceError:
    return SourceError(
        f"incremental snapshot: {str(exc).strip()}",
        hint="fix the cause (signal table permissions, the additional condition); "
        "the snapshot resumes from its last acknowledged chunk on restart",
    )


def _signal_row(change: Change) -> tuple[str, str, str | None] | None:
    """(id, type, data) of a signal-table insert; None if it lacks them."""
    relation, new = change.relation, change.new
    if relation is None or new is None:
        return None
    found: dict[str, str | None] = {}
    for column, kind, value in zip(relation.columns, new.kinds, new.values, strict=False):
        if column.name in ("id", "type", "data"):
            usable = value is not None and kind in (KIND_TEXT, KIND_BINARY)
            found[column.name] = (
                value.decode(errors="replace") if usable and value is not None else None
            )
    signal_id, signal_type = found.get("id"), found.get("type")
    if signal_id is None or signal_type is None:
        return None
    return signal_id, signal_type, found.get("data")


def _names(data: str | None) -> list[str] | None:
    """A stop-snapshot's `data-collections`; None (every table) when it names none."""
    try:
        names = json.loads(data or "{}").get("data-collections")
    except (ValueError, AttributeError):
        return None
    return [str(n) for n in names] if isinstance(names, list) and names else None


def _bound(value: Any) -> Bound | None:
    return None if value is None else tuple(str(v) for v in value)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
