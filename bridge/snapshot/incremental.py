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

The additional condition and the publication's row filter are SQL pasted into the
chunk query: whoever can write the signal table can run SELECTs as the bridge.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import psycopg

from bridge.config import Config
from bridge.decode.messages import KIND_BINARY, KIND_TEXT, Relation
from bridge.encode.records import Record, TxSource
from bridge.encoders import EncoderCache
from bridge.errors import SourceError
from bridge.events.model import OP_CREATE, OP_TRUNCATE, Change
from bridge.routing import Routing
from bridge.snapshot import catalog
from bridge.snapshot.catalog import METHOD_KEY, SnapshotTable
from bridge.snapshot.chunks import Bound, Chunk, chunk_query, max_key_query
from bridge.snapshot.progress import SnapshotProgress
from bridge.snapshot.reader import RawText, TableJob, connect, encode_rows, snapshot_source
from bridge.snapshot.signals import KafkaSignals
from bridge.snapshot.store import DONE, RUNNING, ProgressStore

log = logging.getLogger("bridge.snapshot")

KIND = "incremental"
Emit = tuple[str, bytes | None, bytes | None]  # (topic, key, value)
_NOTHING: list[Emit] = []


class _Run:
    """One execute-snapshot signal: its tables and how far it got."""

    __slots__ = ("conditions", "index", "last_key", "max_key", "names", "run_id")

    def __init__(self, run_id: str, names: Sequence[str], conditions: dict[str, str]) -> None:
        self.run_id = run_id
        self.names = list(names)
        self.conditions = conditions
        self.index = 0  # table being read
        self.last_key: Bound | None = None  # last key emitted in that table
        self.max_key: Bound | None = None  # fixed when the table starts

    def detail(self) -> dict[str, Any]:
        return {
            "data-collections": self.names,
            "conditions": self.conditions,
            "index": self.index,
            "last_key": self.last_key,
            "max_key": self.max_key,
        }

    @classmethod
    def restore(cls, run_id: str, detail: dict[str, Any]) -> _Run:
        run = cls(run_id, detail.get("data-collections", []), detail.get("conditions", {}))
        run.index = int(detail.get("index", 0))
        run.last_key = _bound(detail.get("last_key"))
        run.max_key = _bound(detail.get("max_key"))
        return run

    def next_table(self) -> None:
        self.index += 1
        self.last_key = self.max_key = None


class _Mark(NamedTuple):
    """A run's position, stored once the flush position passes `lsn` (its chunk delivered)."""

    lsn: int
    run_id: str
    detail: dict[str, Any]
    done: bool


class _Window:
    """One chunk between its watermarks: key bytes -> the "r" record's value."""

    __slots__ = ("buffer", "close_id", "label", "last_key", "oid", "open_id", "opened", "topic")

    def __init__(self, label: str, oid: int, topic: str, last_key: Bound) -> None:
        token = uuid.uuid4().hex
        self.open_id = f"{token}-open"
        self.close_id = f"{token}-close"
        self.label = label
        self.oid = oid
        self.topic = topic
        self.last_key = last_key
        self.opened = False
        self.buffer: dict[bytes | None, bytes | None] = {}


class IncrementalSnapshotter:
    """Hooks for the pipeline loop: `on_change` for every change, `on_acknowledged` per ack."""

    def __init__(
        self,
        cfg: Config,
        store: ProgressStore,
        progress: SnapshotProgress,
        encoders: EncoderCache,
        relation_of: Callable[[int], Relation | None],
        signals: KafkaSignals | None = None,
    ) -> None:
        signal = cfg.snapshot.signal_table
        assert signal is not None
        self._signal_name = signal
        self._signal = tuple(signal.split(".", 1))
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
        # A watermark is seen in the stream only once its WAL is flushed: flush at commit
        # even where synchronous_commit is off, or every chunk waits for the WAL writer.
        self._conn.execute("SET synchronous_commit = on")
        self._check_signal_table()
        self._queue: deque[_Run] = deque(
            _Run.restore(r.run_id, r.detail) for r in store.runs(KIND, RUNNING)
        )
        self._active: _Run | None = None
        self._window: _Window | None = None
        self._unacked: deque[_Mark] = deque()  # positions to store once acknowledged
        self._last_lsn = 0  # commit LSN of the newest window close
        self._tables: dict[str, SnapshotTable | None] = {}
        self._tracked: set[str] = set()  # tables with progress counters in this process
        self._signals = signals  # snapshot.signal_kafka_topic
        self._paused = False  # pause-snapshot: no new chunk until resume-snapshot
        self._stops: list[list[str] | None] = []  # stop-snapshot: applied between chunks

    def close(self) -> None:
        if self._signals is not None:
            self._signals.close()
        self._conn.close()

    # -- stream side ----------------------------------------------------------

    def on_change(self, change: Change, records: list[Record], tx: TxSource) -> list[Emit]:
        """A streamed change and its records; returns records to produce right after them."""
        relation = change.relation
        assert relation is not None
        window = self._window
        if window is not None and window.opened and relation.oid == window.oid:
            if change.op == OP_TRUNCATE:
                window.buffer.clear()
            else:
                for key, _, _ in records:
                    window.buffer.pop(key, None)
            return _NOTHING
        if change.op != OP_CREATE or (relation.namespace, relation.name) != self._signal:
            return _NOTHING
        row = _signal_row(change)
        if row is None:
            return _NOTHING
        signal_id, signal_type, data = row
        if window is not None and signal_id == window.open_id:
            window.opened = True
        elif window is not None and signal_id == window.close_id:
            return self._close_window(window, tx)
        else:
            self._on_signal(signal_id, signal_type, data)
        return _NOTHING

    def on_acknowledged(self, lsn: int) -> None:
        """Everything up to `lsn` is delivered: store the positions it covers, take the
        Kafka topic's signals, start work."""
        while self._unacked and self._unacked[0].lsn < lsn:
            mark = self._unacked.popleft()
            self._store.set_detail(mark.run_id, mark.detail)
            if mark.done:
                self._store.set_state(mark.run_id, DONE)
                log.info("incremental snapshot %s done", mark.run_id)
        if self._signals is not None:
            for signal in self._signals.poll():
                self._on_signal(signal.id, signal.type, signal.data)
        if self._window is None and (self._active is not None or self._queue or self._stops):
            self._advance(lsn)

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
        else:
            log.warning("signal %s of type %r ignored", signal_id, signal_type)

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
                run.names = finished + kept
                self._store.set_detail(run.run_id, run.detail())

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
                continue
            window = self._open_window(run, lsn)
            if window is not None:
                self._window = window
                return

    def _open_window(self, run: _Run, lsn: int) -> _Window | None:
        """Watermarks around the next chunk of the run's current table; None if it is done."""
        name = run.names[run.index]
        table = self._table(name)
        if table is None:
            run.next_table()
            return None
        condition = run.conditions.get(name)
        if run.max_key is None or table.label not in self._tracked:
            self._tracked.add(table.label)
            self._progress.start_table(table.label, KIND, table.estimated_rows)
        if run.max_key is None:
            run.max_key = self._max_key(table, condition)
            if run.max_key is None:
                self._progress.finish(table.label)
                run.next_table()
                return None
        relation = self._relation_of(table.relation.oid) or table.relation
        table = table._replace(relation=relation)
        topic, encoder = self._encoders.get(relation)
        chunk = Chunk(table.label, 0, METHOD_KEY, run.last_key, run.max_key)
        query, params = chunk_query(
            table, chunk, condition=condition, limit=self._chunk_size, key_text=True
        )
        window = _Window(table.label, relation.oid, topic, ())
        self._watermark(window.open_id, "snapshot-window-open")
        rows = self._read(query, params, {c.type_oid for c in relation.columns})
        self._watermark(window.close_id, "snapshot-window-close")
        if not rows:
            self._progress.finish(table.label)
            run.next_table()
            return None
        width = len(table.key)
        source = snapshot_source(self._server, self._db, lsn, KIND)
        records, _ = encode_rows([r[width:] for r in rows], TableJob(table, topic, encoder), source)
        window.buffer.update((key, value) for key, value, _ in records)  # reads: no headers
        window.last_key = tuple(_text(v) for v in rows[-1][:width])
        if len(rows) < self._chunk_size:
            window.last_key = run.max_key  # nothing left below max: the table ends here
        return window

    def _close_window(self, window: _Window, tx: TxSource) -> list[Emit]:
        self._window = None
        run = self._active
        assert run is not None
        out = [(window.topic, key, value) for key, value in window.buffer.items()]
        self._progress.add_rows(window.label, len(out))
        if window.last_key == run.max_key:
            self._progress.finish(window.label)
            run.next_table()
        else:
            run.last_key = window.last_key
        # The next chunk starts now; this one's position is stored once it is acknowledged.
        self._last_lsn = int(tx.base["commit_lsn"])
        self._unacked.append(_Mark(self._last_lsn, run.run_id, run.detail(), False))
        self._advance(self._last_lsn)
        return out

    def _table(self, name: str) -> SnapshotTable | None:
        """The table to read, or None (logged) when it cannot be snapshotted."""
        if name in self._tables:
            return self._tables[name]
        table: SnapshotTable | None = None
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
                table = None
            elif self._outbox.holds(relation.namespace, relation.name):
                log.error("incremental snapshot: %s is an outbox table, skipped", name)
                table = None
            elif table.method != METHOD_KEY:
                log.error("incremental snapshot: table %s has no primary key, skipped", name)
                table = None
        self._tables[name] = table
        return table

    def _max_key(self, table: SnapshotTable, condition: str | None) -> Bound | None:
        row = self._execute(max_key_query(table, condition), []).fetchone()
        return None if row is None else tuple(_text(v) for v in row)

    def _watermark(self, signal_id: str, kind: str) -> None:
        self._execute(
            f"INSERT INTO {self._quoted_signal()} (id, type, data) VALUES (%s, %s, NULL)",
            [signal_id, kind],
        )

    def _quoted_signal(self) -> str:
        return psycopg.sql.Identifier(*self._signal).as_string(self._conn)

    def _read(self, query: Any, params: list[str], type_oids: set[int]) -> list[tuple[Any, ...]]:
        """Rows with every value as the server's text output (see `reader.RawText`)."""
        cursor = self._conn.cursor()
        for oid in type_oids:
            cursor.adapters.register_loader(oid, RawText)
        return self._execute(query, params, cursor).fetchall()

    def _execute(
        self, query: Any, params: list[str], cursor: psycopg.Cursor[Any] | None = None
    ) -> psycopg.Cursor[Any]:
        try:
            return (cursor or self._conn.cursor()).execute(query, params)
        except psycopg.Error as exc:
            raise SourceError(
                f"incremental snapshot: {str(exc).strip()}",
                hint="fix the cause (signal table permissions, the additional condition); "
                "the snapshot resumes from its last acknowledged chunk on restart",
            ) from None

    def _published_tables(self) -> list[catalog.Published]:
        src = self._source_cfg
        return catalog.published_tables(
            self._conn,
            plugin=src.plugin,
            publication=src.publication_name,
            replication_sets=src.replication_sets,
        )

    def _check_signal_table(self) -> None:
        oid = catalog.resolve(self._conn, [self._signal_name]).get(self._signal_name)
        if oid is None:
            raise SourceError(
                f"signal table {self._signal_name} does not exist",
                hint=f"CREATE TABLE {self._signal_name} (id text PRIMARY KEY, type text NOT NULL, "
                "data text), or unset snapshot.signal_table",
            )
        if oid not in {p.oid for p in self._published_tables()}:
            raise SourceError(
                f"signal table {self._signal_name} is not sent by the output plugin",
                hint="add it to the publication (or replication set): the bridge reads "
                "signals and watermarks from the stream",
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
