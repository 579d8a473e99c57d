"""Durable snapshot progress: two small tables in the bridge's own schema.

`snapshot_run` holds one row per snapshot of a slot: the initial snapshot (run id
"initial") and each incremental one (run id = the signal's id). `snapshot_chunk`
holds every planned chunk of the initial snapshot; `rows` is set only once all of
the chunk's records were confirmed delivered by Kafka, so a restart re-reads
exactly the chunks whose delivery was not confirmed. The tables are created on
first write (a mode that never snapshots needs no CREATE privilege), and the
pipeline does not publish their changes (`is_private`).

Safe to share between threads: every call takes the store's lock.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any, Final, NamedTuple, Protocol

import psycopg
from psycopg import sql

from bridge.config import Config
from bridge.errors import SourceError
from bridge.lsn import LSN
from bridge.routing import Routing
from bridge.snapshot.catalog import Published
from bridge.snapshot.chunks import Bound, Chunk
from bridge.source import libpq

INITIAL = "initial"
RUN_TABLE, CHUNK_TABLE = "snapshot_run", "snapshot_chunk"
PENDING, RUNNING, DONE = "pending", "running", "done"

_DDL = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.snapshot_run (
    slot_name   text NOT NULL,
    run_id      text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('initial', 'incremental')),
    state       text NOT NULL CHECK (state IN ('pending', 'running', 'done')),
    lsn         pg_lsn,
    detail      jsonb NOT NULL DEFAULT '{{}}',
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    PRIMARY KEY (slot_name, run_id)
);
CREATE TABLE IF NOT EXISTS {schema}.snapshot_chunk (
    slot_name  text NOT NULL,
    run_id     text NOT NULL,
    table_name text NOT NULL,
    chunk_no   integer NOT NULL,
    method     text NOT NULL,
    lo         text[],
    hi         text[],
    rows       bigint,
    done_at    timestamptz,
    PRIMARY KEY (slot_name, run_id, table_name, chunk_no),
    FOREIGN KEY (slot_name, run_id) REFERENCES {schema}.snapshot_run ON DELETE CASCADE
);
"""


def is_private(schema: str, namespace: str, name: str) -> bool:
    """One of the store's own tables, in the store's schema `schema`."""
    return namespace == schema and name in (RUN_TABLE, CHUNK_TABLE)


def table_topic_filter(cfg: Config, progress_schema: str) -> Callable[[Published], bool]:
    """Whether a published table's rows go to a topic of its own: the filters take it, it
    is not one of the progress store's tables, and it is not an outbox table (its changes
    become routed events, and its snapshot rows are not routed:
    docs/concepts/filters-and-routing.md). What the snapshots read and what `bridge verify`
    compares (here, beside `is_private`, not in `bridge.snapshot.initial`, which verify
    does not load)."""
    routing = Routing.from_config(cfg)
    return lambda p: (
        routing.matches(p.namespace, p.name)
        and not is_private(progress_schema, p.namespace, p.name)
        and not cfg.outbox.holds(p.namespace, p.name)
    )


class Run(NamedTuple):
    run_id: str
    kind: str
    state: str
    lsn: LSN | None
    detail: dict[str, Any]


class ChunkState(NamedTuple):
    chunk: Chunk
    rows: int | None  # None: not (confirmed) done


class RunStore(Protocol):
    """Where incremental snapshot runs are kept: `ProgressStore` (tables in the source), or
    `bridge.snapshot.runstate.KafkaRunStore` (the state topic, snapshot.read_only)."""

    def run(self, run_id: str) -> Run | None: ...

    def runs(self, kind: str, state: str) -> list[Run]: ...

    def begin(self, run_id: str, kind: str, state: str, detail: dict[str, Any]) -> None: ...

    def set_state(self, run_id: str, state: str, lsn: LSN | None = None) -> None: ...

    def set_detail(self, run_id: str, detail: dict[str, Any]) -> None: ...


class ProgressStore:
    def __init__(self, conninfo: dict[str, Any], schema: str, slot: str) -> None:
        self._conninfo = conninfo
        self.schema = schema
        self._slot = slot
        self._s = sql.Identifier(schema)
        self._conn: psycopg.Connection[Any] | None = None
        self._ready = False
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- runs -----------------------------------------------------------------

    def run(self, run_id: str) -> Run | None:
        with self._lock:
            if not self._exists():
                return None
            row = self._q(
                "SELECT run_id, kind, state, lsn::text, detail FROM {s}.snapshot_run "
                "WHERE slot_name = %s AND run_id = %s",
                (self._slot, run_id),
            ).fetchone()
        return None if row is None else _run(row)

    def runs(self, kind: str, state: str) -> list[Run]:
        with self._lock:
            if not self._exists():
                return []
            rows = self._q(
                "SELECT run_id, kind, state, lsn::text, detail FROM {s}.snapshot_run "
                "WHERE slot_name = %s AND kind = %s AND state = %s ORDER BY started_at",
                (self._slot, kind, state),
            ).fetchall()
        return [_run(r) for r in rows]

    def begin(self, run_id: str, kind: str, state: str, detail: dict[str, Any]) -> None:
        """Start `run_id` afresh: an earlier run of that id and its chunks are dropped."""
        with self._lock:
            self._ensure()
            with self._connection().transaction():
                self._q(
                    "DELETE FROM {s}.snapshot_run WHERE slot_name = %s AND run_id = %s",
                    (self._slot, run_id),
                )
                self._q(
                    "INSERT INTO {s}.snapshot_run (slot_name, run_id, kind, state, detail) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    (self._slot, run_id, kind, state, json.dumps(detail)),
                )

    def set_state(self, run_id: str, state: str, lsn: LSN | None = None) -> None:
        with self._lock:
            self._q(
                "UPDATE {s}.snapshot_run SET state = %s, lsn = COALESCE(%s::pg_lsn, lsn), "
                "finished_at = CASE WHEN %s = 'done' THEN now() END "
                "WHERE slot_name = %s AND run_id = %s",
                (state, None if lsn is None else str(lsn), state, self._slot, run_id),
            )

    def set_detail(self, run_id: str, detail: dict[str, Any]) -> None:
        with self._lock:
            self._q(
                "UPDATE {s}.snapshot_run SET detail = %s WHERE slot_name = %s AND run_id = %s",
                (json.dumps(detail), self._slot, run_id),
            )

    # -- chunks ---------------------------------------------------------------

    def chunks(self, run_id: str, table: str) -> list[ChunkState]:
        with self._lock:
            rows = self._q(
                "SELECT chunk_no, method, lo, hi, rows FROM {s}.snapshot_chunk "
                "WHERE slot_name = %s AND run_id = %s AND table_name = %s ORDER BY chunk_no",
                (self._slot, run_id, table),
            ).fetchall()
        return [
            ChunkState(Chunk(table, no, method, _bound(lo), _bound(hi)), rows)
            for no, method, lo, hi, rows in rows
        ]

    def add_chunk(self, run_id: str, chunk: Chunk) -> None:
        with self._lock:
            self._q(
                "INSERT INTO {s}.snapshot_chunk "
                "(slot_name, run_id, table_name, chunk_no, method, lo, hi) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    self._slot,
                    run_id,
                    chunk.table,
                    chunk.number,
                    chunk.method,
                    None if chunk.lo is None else list(chunk.lo),
                    None if chunk.hi is None else list(chunk.hi),
                ),
            )

    def finish_chunk(self, run_id: str, chunk: Chunk, rows: int) -> None:
        with self._lock:
            self._q(
                "UPDATE {s}.snapshot_chunk SET rows = %s, done_at = now() "
                "WHERE slot_name = %s AND run_id = %s AND table_name = %s AND chunk_no = %s",
                (rows, self._slot, run_id, chunk.table, chunk.number),
            )

    def drop_chunks(self, run_id: str, table: str) -> None:
        with self._lock:
            self._q(
                "DELETE FROM {s}.snapshot_chunk "
                "WHERE slot_name = %s AND run_id = %s AND table_name = %s",
                (self._slot, run_id, table),
            )

    # -- plumbing -------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = libpq.connect(self._conninfo, replication=False)
        return self._conn

    def _sql(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(s=self._s)

    def _q(self, text: str, params: tuple[Any, ...]) -> psycopg.Cursor[Any]:
        try:
            return self._connection().execute(self._sql(text), params)
        except psycopg.Error as exc:
            raise _store_error(self.schema, exc) from None

    def _exists(self) -> bool:
        if self._ready:
            return True
        row = self._connection().execute(
            "SELECT to_regclass(%s) IS NOT NULL",
            (sql.Identifier(self.schema, RUN_TABLE).as_string(self._connection()),),
        )
        found = row.fetchone()
        self._ready = bool(found and found[0])
        return self._ready

    def _ensure(self) -> None:
        if self._exists():
            return
        conn = self._connection()
        try:
            with conn.transaction():
                # Two bridges of one database may start together: serialize the DDL.
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('bridge.snapshot.ddl'))")
                conn.execute(sql.SQL(_DDL).format(schema=self._s))
        except psycopg.Error as exc:
            raise _store_error(self.schema, exc) from None
        self._ready = True


def _run(row: tuple[Any, ...]) -> Run:
    run_id, kind, state, lsn, detail = row
    return Run(run_id, kind, state, LSN.parse(lsn) if lsn else None, detail or {})


def _bound(value: list[str] | None) -> Bound | None:
    return None if value is None else tuple(value)


def _store_error(schema: str, exc: psycopg.Error) -> SourceError:
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return SourceError(
            f"not allowed to keep snapshot progress in schema {schema!r}: {exc}".strip(),
            hint=f"GRANT CREATE ON DATABASE to the bridge's role (or create schema {schema} "
            "owned by it), or set snapshot.mode: no_data",
        )
    return SourceError(
        f"snapshot progress table in schema {schema!r}: {str(exc).strip()}",
        hint="check that PostgreSQL is reachable; the bridge resumes the snapshot on restart",
    )


EXTERNAL: Final = "external"  # snapshot.mode external: the initial run a load job does


def store_of(cfg: Config) -> ProgressStore:
    src = cfg.source
    return ProgressStore(src.conninfo(), cfg.snapshot.progress_schema, src.slot_name)


class LoadPoint(NamedTuple):
    """The snapshot an external load read: its LSN L and its `txid_current_snapshot()`."""

    lsn: LSN
    visible: str


def load_point(store: ProgressStore) -> LoadPoint | None:
    """The snapshot of the slot's external load, held or done; None when the slot's initial
    run was not an external one (or recorded before the bridge kept its visibility)."""
    run = store.run(INITIAL)
    if run is None or run.detail.get("mode") != EXTERNAL or run.lsn is None:
        return None
    visible = run.detail.get("visible")
    return None if visible is None else LoadPoint(run.lsn, str(visible))


def loaded_condition(visible: str, reference: int) -> str:
    """An SQL condition true for the row versions a snapshot whose `txid_current_snapshot()`
    is `visible` sees: the rows an external load read that nothing changed since. Read in a
    later snapshot whose xmax (a 64-bit txid) is `reference`: the row's 32-bit xmin is
    widened to the epoch that puts it at most 2^32 before `reference` (every row version
    that snapshot sees is younger than that, unless frozen 2^31 transactions ago: then it
    counts as changed since, which is a difference reported, never one hidden); xmin 1 and
    2 (bootstrap, frozen) are older than any snapshot."""
    if not re.fullmatch(r"\d+:\d+:[\d,]*", visible):
        raise SourceError(
            f"the external load's recorded snapshot {visible!r} is not a txid snapshot",
            hint="the progress store was edited: run the load again",
        )
    xmin = "pg_catalog.int8(xmin::text)"
    full = f"({reference} - ({reference} - {xmin}) % 4294967296)"
    return (
        f"({xmin} < 3 OR pg_catalog.txid_visible_in_snapshot({full}, "
        f"'{visible}'::pg_catalog.txid_snapshot))"
    )
