"""The initial snapshot: a planner thread, N reader processes, and the producing thread.

The planner and every reader import the exported snapshot before any work starts,
so all see one instant of the database; only then may the exporting session move
on (`release`). The planner walks each table's key (`chunks.plan`), stores every
chunk before handing it out; readers (`worker`) read and encode chunks; the calling
thread produces each chunk's records as one tracked unit (a `TxHandle`) and
records the chunk as done once Kafka confirmed all of them. The newest record is
always held back, so the snapshot's very last one goes out as "last".

In exactly-once mode (and so in a standby pair) each chunk's records are one Kafka
transaction of a producer of their own, transactional id `<transactional id>.snapshot`
(`snapshot_producer`), and "confirmed" means committed: a chunk is recorded as done only
after its transaction committed, so a resume re-reads every chunk whose records a
read_committed consumer may not have seen, and none it has (but one committed just before
a crash, read again at the resume's newer snapshot: an older row image before a newer
one, in commit order). Whoever starts a snapshot, or resumes one, initialises that id
first (`fence`), which aborts the open transaction of a paused old active and makes the
broker refuse whatever it still sends: its client's threads and its kernel send what was
queued the moment it runs again, before any of its Python code could look at its lease,
and those old row images would otherwise land after the new active's changes of the
same keys. The readers only read and encode: the producing thread is the snapshot's one
producer.

A resumed snapshot is read while the replication stream waits
(`SnapshotManager.read_pending`): `keep_alive`, called every turn, answers its
keepalives, so PostgreSQL's wal_sender_timeout does not end it meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, NamedTuple

import psycopg

import bridge
from bridge.config import Config
from bridge.encode.copyrows import unpack_records
from bridge.errors import ConfigError, SourceError
from bridge.kafka.acks import AckTracker, TxHandle
from bridge.kafka.eos import TRANSACTION_TIMEOUT_MS
from bridge.kafka.producer import Producer, kafka_client_config, nothing_to_service
from bridge.kafka.registry import KnownSchemas, open_registry
from bridge.record import KafkaRecord
from bridge.snapshot import catalog, chunks
from bridge.snapshot.chunks import Chunk
from bridge.snapshot.progress import ProgressBars, SnapshotProgress
from bridge.snapshot.reader import build_jobs, connect, import_snapshot
from bridge.snapshot.store import INITIAL, ChunkState, ProgressStore, table_topic_filter

log = logging.getLogger("bridge.snapshot")
_TURN_S = 0.1
_AHEAD = 2  # chunks sent to a reader before it answers: it never waits for the next one
_START_TIMEOUT_S = 120.0
_READER_EXIT_S = 10.0  # how long the readers have to exit once told, all together
SNAPSHOT_ID_SUFFIX = ".snapshot"  # the snapshot producer's transactional id: data id + this


def snapshot_producer(cfg: Config, tracker: AckTracker, keep_alive: Callable[[], None]) -> Producer:
    """The initial snapshot's producer; in exactly-once mode transactional (id
    `<transactional id>.snapshot`) and initialised, so any older instance that used the id
    is fenced before this returns. `keep_alive` runs while it waits for Kafka."""
    kafka = cfg.kafka
    client = kafka_client_config(kafka)
    if kafka.exactly_once:
        client["transactional.id"] = cfg.transactional_id() + SNAPSHOT_ID_SUFFIX
        client["transaction.timeout.ms"] = TRANSACTION_TIMEOUT_MS  # as the data producer's
    producer = Producer(
        client,
        tracker,
        overrides=kafka.producer,
        max_in_flight_records=cfg.pipeline.max_in_flight_records,
        max_in_flight_bytes=cfg.pipeline.max_in_flight_mb << 20,
        while_blocked=keep_alive,
    )
    if kafka.exactly_once:
        try:
            producer.init_transactions(kafka.request_timeout_s * 3)
        except BaseException:
            producer.close()
            raise
    return producer


def fence(cfg: Config) -> None:
    """Exactly-once: fence whatever an older instance still has under way with the
    snapshot's transactional id, before this bridge streams ahead of a snapshot it resumes
    (the stream's changes must not be overtaken by an old active's queued row images)."""
    if cfg.kafka.exactly_once:
        snapshot_producer(cfg, AckTracker(), nothing_to_service).close()


class _InFlight(NamedTuple):
    chunk: Chunk
    handle: TxHandle
    rows: int


class _Held(NamedTuple):
    """The newest record, not produced yet: it may turn out to be the snapshot's last."""

    record: KafkaRecord
    last_value: bytes | None  # its value as the snapshot's last record ("last")
    handle: TxHandle

    def last(self) -> KafkaRecord:
        record = self.record
        return KafkaRecord(record.topic, record.key, self.last_value)


class _Reader:
    """One reader process, the pipes to and from it, and the chunks it was sent.

    Started before its arguments are known (`start` sends them), so its interpreter
    starts and imports while the parent plans and registers."""

    def __init__(self, index: int) -> None:
        to_child, inbox = os.pipe()
        outbox, from_child = os.pipe()
        root = str(Path(bridge.__file__).resolve().parent.parent)
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        self.name = f"snapshot-reader-{index}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bridge.snapshot.worker", str(to_child), str(from_child)],
            pass_fds=(to_child, from_child),
            env={**os.environ, "PYTHONPATH": path},
        )
        os.close(to_child)
        os.close(from_child)
        self.pipe = Connection(outbox, writable=False)
        self._send = Connection(inbox, readable=False)
        self.sent: deque[Chunk] = deque()

    def start(self, args: tuple[Any, ...]) -> None:
        self._send.send(args)

    def send(self, chunk: Chunk) -> None:
        self._send.send(chunk)
        self.sent.append(chunk)

    def receive(self) -> tuple[Any, ...]:
        try:
            message: tuple[Any, ...] = self.pipe.recv()
        except (EOFError, OSError):
            raise SourceError(
                f"snapshot reader {self.name} exited (code {self.process.poll()})",
                hint="see its log lines above; restart the bridge to resume the snapshot",
            ) from None
        if message[0] == "error":
            raise SourceError(
                f"snapshot reader {self.name} failed: {message[1]}",
                hint="restart the bridge: finished chunks are kept and the snapshot resumes",
            )
        return message

    def stop(self) -> None:
        """No more chunks, and the reader gone (`ask_to_stop`, then `wait`)."""
        self.ask_to_stop()
        self.wait(time.monotonic() + _READER_EXIT_S)

    def ask_to_stop(self) -> None:
        """No more chunks: the reader exits after the one at hand."""
        with contextlib.suppress(OSError):
            self._send.send(None)
        self._send.close()
        self.pipe.close()

    def wait(self, deadline: float) -> None:
        """Until it exited, killed at `deadline` (monotonic): a reader whose COPY a frozen
        server never ends must not hold up the stop."""
        try:
            self.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def snapshot_tables(
    cfg: Config, conn: psycopg.Connection[Any], progress_schema: str
) -> list[catalog.SnapshotTable]:
    """The tables with topics of their own (`table_topic_filter`) the plugin sends (or
    those in snapshot.tables), each read through its snapshot.select_overrides /
    row_filters entry."""
    tables, missing = catalog.captured_tables(
        conn, cfg.source, table_topic_filter(cfg, progress_schema), cfg.snapshot.tables
    )
    if missing:
        raise ConfigError(
            f"snapshot.tables lists table(s) that are not captured: {', '.join(missing)}",
            hint="add them to the publication (or replication set) and to the filters, "
            "or remove them from snapshot.tables",
        )
    snap = cfg.snapshot
    tables, unknown = chunks.with_overrides(conn, tables, snap.select_overrides, snap.row_filters)
    if unknown:
        raise ConfigError(
            "snapshot.select_overrides / row_filters name table(s) this snapshot does "
            f"not read: {', '.join(unknown)}",
            hint='spell them "schema.table" as captured (and in snapshot.tables when it '
            "is set), or remove them",
        )
    return tables


class InitialSnapshot:
    def __init__(
        self,
        cfg: Config,
        store: ProgressStore,
        progress: SnapshotProgress,
        *,
        snapshot_name: str,
        lsn: int,
        release: Callable[[], None],
        should_stop: Callable[[], bool],
        keep_alive: Callable[[], None],
    ) -> None:
        self._cfg = cfg
        self._store = store
        self._progress = progress
        self._snapshot_name = snapshot_name
        self._lsn = lsn
        self._release = release
        self._should_stop = should_stop
        self._keep_alive = keep_alive
        self._halt = threading.Event()
        self._error: BaseException | None = None
        self._work: queue.Queue[Chunk | None] = queue.Queue(maxsize=2 * cfg.snapshot.workers)
        self._topics: dict[str, str] = {}
        self._readers: list[_Reader] = []
        self._planner: threading.Thread | None = None

    def run(self) -> bool:
        """True once every chunk was delivered and recorded; False if stopped first."""
        conn = connect(self._cfg.source.conninfo())
        try:
            for index in range(self._cfg.snapshot.workers):
                self._readers.append(_Reader(index))
            import_snapshot(conn, self._snapshot_name)
            tables = snapshot_tables(self._cfg, conn, self._store.schema)
            # Registered here, once: readers build their encoders from these ids.
            registry = open_registry(self._cfg)
            for label, job in build_jobs(self._cfg, conn, tables, registry).items():
                self._topics[label] = job.topic
            known = self._start_readers(tables, registry.known())
            self._planner = threading.Thread(
                target=self._plan, args=(conn, tables, known), name="snapshot-planner", daemon=True
            )
            self._planner.start()
            return self._produce_all()
        finally:
            self._halt.set()
            if self._planner is not None:
                self._planner.join()
            for reader in self._readers:
                reader.ask_to_stop()
            deadline = time.monotonic() + _READER_EXIT_S  # one for all of them
            for reader in self._readers:
                reader.wait(deadline)
            conn.close()

    # -- set-up ---------------------------------------------------------------

    def _start_readers(
        self, tables: list[catalog.SnapshotTable], schemas: KnownSchemas
    ) -> dict[str, list[ChunkState]]:
        """Readers up with the snapshot imported, then `release`; returns the stored chunks."""
        for reader in self._readers:
            reader.start((self._cfg, self._snapshot_name, tables, self._lsn, schemas))
        known: dict[str, list[ChunkState]] = {}
        for table in tables:
            known[table.label] = self._store.chunks(INITIAL, table.label)
            done = sum(s.rows or 0 for s in known[table.label])
            self._progress.start_table(table.label, INITIAL, table.estimated_rows, done)
        deadline = time.monotonic() + _START_TIMEOUT_S
        for reader in self._readers:
            while not reader.pipe.poll(_TURN_S):
                self._keep_alive()
                if time.monotonic() > deadline:
                    raise SourceError(
                        f"snapshot reader {reader.name} did not start in time",
                        hint="check that PostgreSQL and the schema registry are reachable",
                    )
            reader.receive()  # "ready": it holds the snapshot now
        self._release()
        log.info(
            "snapshot of %d table(s) with %d reader(s), %d rows per chunk",
            len(tables),
            len(self._readers),
            self._cfg.snapshot.chunk_size,
        )
        return known

    # -- planner (its own thread) ---------------------------------------------

    def _plan(
        self,
        conn: psycopg.Connection[Any],
        tables: list[catalog.SnapshotTable],
        known: dict[str, list[ChunkState]],
    ) -> None:
        try:
            for table in tables:
                if not self._plan_table(conn, table, known[table.label]):
                    return
            self._put(None)
        except BaseException as exc:
            self._error = exc
            self._halt.set()

    def _plan_table(
        self, conn: psycopg.Connection[Any], table: catalog.SnapshotTable, states: list[ChunkState]
    ) -> bool:
        """Hand out the table's unfinished chunks, then plan the rest; False when halted."""
        label, chunk_size = table.label, self._cfg.snapshot.chunk_size
        if states and states[0].chunk.method != table.method:
            self._store.drop_chunks(INITIAL, label)  # the table gained or lost its key
            states = []
        for state in states:
            if state.rows is None:
                self._progress.planned(label)
                if not self._put(state.chunk):
                    return False
        last = states[-1].chunk if states else None
        if last is None or last.hi is not None:
            start = None if last is None else last.hi
            first = 0 if last is None else last.number + 1
            for chunk in chunks.plan(conn, table, chunk_size, start, first):
                self._store.add_chunk(INITIAL, chunk)
                self._progress.planned(label)
                if not self._put(chunk):
                    return False
        self._progress.planning_done(label)
        return True

    def _put(self, chunk: Chunk | None) -> bool:
        while not self._halt.is_set():
            try:
                self._work.put(chunk, timeout=_TURN_S)
                return True
            except queue.Full:
                continue
        return False

    # -- producing (the calling thread) ---------------------------------------

    def _produce_all(self) -> bool:
        cfg = self._cfg
        tracker = AckTracker()
        producer = snapshot_producer(cfg, tracker, self._keep_alive)
        chunks = _Chunks(producer, tracker, cfg)
        in_flight: list[_InFlight] = []
        held: _Held | None = None
        planned_all = False
        bars = ProgressBars(self._progress, ProgressBars.wanted(cfg.snapshot.progress_bar))
        try:
            with bars:
                while not self._should_stop():
                    self._keep_alive()
                    self._raise_failure()
                    planned_all = self._dispatch(planned_all)
                    if planned_all and not any(r.sent for r in self._readers):
                        break
                    for pipe in wait([r.pipe for r in self._readers if r.sent], _TURN_S):
                        held = self._produce(chunks, pipe, held, in_flight)
                    producer.poll()
                    self._record(in_flight)
                    bars.refresh()
                complete = not self._should_stop()
                if held is not None:  # stopped: the chunk ends all the same, not as "last"
                    chunks.end(held.last() if complete else held.record, held.handle)
                self._halt.set()
                self._flush(producer, in_flight, bars, complete)
            return complete and not in_flight
        finally:
            producer.close()

    def _dispatch(self, planned_all: bool) -> bool:
        """Keep every reader `_AHEAD` chunks busy; True once the planner has finished."""
        for reader in self._readers:
            while not planned_all and len(reader.sent) < _AHEAD:
                try:
                    chunk = self._work.get_nowait()
                except queue.Empty:
                    break
                if chunk is None:
                    planned_all = True
                    break
                reader.send(chunk)
        return planned_all

    def _produce(
        self, chunks: _Chunks, pipe: Any, held: _Held | None, in_flight: list[_InFlight]
    ) -> _Held | None:
        reader = next(r for r in self._readers if r.pipe is pipe)
        _, chunk, packed, last_value = reader.receive()
        records = unpack_records(packed, self._topics[chunk.table])
        reader.sent.popleft()
        handle = TxHandle(chunks.tracker)
        in_flight.append(_InFlight(chunk, handle, len(records)))
        if not records:
            chunks.tracker.close_tx(handle, 0)
            return held
        if held is not None:
            chunks.end(held.record, held.handle)
        chunks.begin()
        produce = chunks.producer.produce
        for index in range(len(records) - 1):
            produce(records[index], handle)
        return _Held(records[-1], last_value, handle)

    def _flush(
        self, producer: Producer, in_flight: list[_InFlight], bars: ProgressBars, complete: bool
    ) -> None:
        """Wait for Kafka's confirmations; when stopping, at most the shutdown timeout."""
        deadline: float | None = None
        while not producer.flush(_TURN_S):
            self._keep_alive()
            self._record(in_flight)
            bars.refresh()
            if not complete or self._should_stop():
                if deadline is None:
                    deadline = time.monotonic() + self._cfg.pipeline.shutdown_timeout_s
                if time.monotonic() >= deadline:
                    break
        self._record(in_flight)

    def _record(self, in_flight: list[_InFlight]) -> None:
        """Store every chunk whose records Kafka has all confirmed."""
        still: list[_InFlight] = []
        for entry in in_flight:
            if entry.handle.complete:
                self._store.finish_chunk(INITIAL, entry.chunk, entry.rows)
                self._progress.add_rows(entry.chunk.table, entry.rows, chunks=1)
            else:
                still.append(entry)
        in_flight[:] = still

    def _raise_failure(self) -> None:
        error = self._error
        if error is None:
            return
        if isinstance(error, psycopg.Error):
            raise SourceError(
                f"planning the snapshot failed: {str(error).strip()}",
                hint="restart the bridge: finished chunks are kept and the snapshot resumes",
            ) from error
        raise error


class _Chunks:
    """Where a chunk's records go: each chunk its own Kafka transaction in exactly-once
    mode (`snapshot_producer`), else straight to the producer.

    A chunk's handle is closed only once its last record is produced and, exactly-once,
    its transaction committed: `TxHandle.complete`, which records the chunk as done, then
    means committed, never just delivered into a transaction a fence may still abort. A
    graceful stop ends the chunk at hand (commits it); a failure leaves its transaction
    open, aborted by the next start, which fences the id before it resumes the snapshot (or
    by the broker after `transaction.timeout.ms`, as the data producer's): until then
    read_committed consumers of its partitions wait."""

    def __init__(self, producer: Producer, tracker: AckTracker, cfg: Config) -> None:
        self.producer = producer
        self.tracker = tracker
        self._transactional = cfg.kafka.exactly_once
        self._timeout = cfg.pipeline.shutdown_timeout_s
        self._open = False

    def begin(self) -> None:
        """Before a chunk's first record."""
        if self._transactional:
            self.producer.begin_transaction()
            self._open = True

    def end(self, record: KafkaRecord, handle: TxHandle) -> None:
        """A chunk's last record: the chunk is complete once Kafka confirmed it all
        (exactly-once: once its transaction committed)."""
        self.producer.produce(record, handle)
        if self._open:
            self._open = False
            self.producer.commit_transaction(self._timeout)
        self.tracker.close_tx(handle, 0)
