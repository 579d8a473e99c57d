"""Each snapshot mode against the real stack: what is read, what is streamed, where."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from delivery.helpers import slot_state, wait_slot_active
from running import PipelineThread
from waiting import wait_for

from bridge.lsn import LSN

from .helpers import RunBridge, TopicReader, make_table, same_state

ROWS = 10


def _ops(reader: TopicReader) -> list[str]:
    return [r.value["op"] for r in reader.read() if r.value is not None]


def _initial_run(conn: psycopg.Connection[Any]) -> tuple[str, LSN] | None:
    try:
        row = conn.execute(
            "SELECT state, lsn::text FROM bridge.snapshot_run WHERE run_id = 'initial'"
        ).fetchone()
    except psycopg.errors.UndefinedTable:
        return None
    return None if row is None else (row[0], LSN.parse(row[1]))


@pytest.fixture
def reader(pg_conn: psycopg.Connection[Any], topic: Callable[[str], TopicReader]) -> TopicReader:
    """Table t of ROWS rows, and a reader of its topic."""
    make_table(pg_conn, "t", ROWS)
    return topic("public.t")


def _stream_one(
    conn: psycopg.Connection[Any], reader: TopicReader, bridge: PipelineThread, key: int, slot: str
) -> None:
    """Insert a row once the slot streams, and wait for its record."""
    wait_slot_active(conn, slot, bridge)
    conn.execute("INSERT INTO t VALUES (%s, 0, 'streamed')", (key,))
    wait_for(lambda: same_state(reader, conn, "t"), 60, "the streamed insert")


def _run_streaming_one(
    run_bridge: RunBridge,
    conn: psycopg.Connection[Any],
    reader: TopicReader,
    slot: str,
    mode: str,
    key: int,
) -> None:
    """One run of the bridge in `mode` that streams one insert, then a graceful stop."""
    bridge = run_bridge(mode=mode)
    _stream_one(conn, reader, bridge, key, slot)
    bridge.stop()


def test_initial_reads_once_then_streams(
    pg_conn: psycopg.Connection[Any], run_bridge: RunBridge, reader: TopicReader, slot_name: str
) -> None:
    _run_streaming_one(run_bridge, pg_conn, reader, slot_name, "initial", 100)
    _run_streaming_one(run_bridge, pg_conn, reader, slot_name, "initial", 101)
    assert _ops(reader) == ["r"] * ROWS + ["c", "c"]
    flags = [r.value["source"]["snapshot"] for r in reader.read() if r.value]
    assert flags == ["true"] * (ROWS - 1) + ["last", "false", "false"]


def test_initial_only_stops_at_the_seam_and_streaming_continues_from_it(
    pg_conn: psycopg.Connection[Any], run_bridge: RunBridge, reader: TopicReader, slot_name: str
) -> None:
    only = run_bridge(mode="initial_only")
    wait_for(lambda: not only.alive(), 120, "initial_only to end by itself")
    only.stop()
    pg_conn.execute("INSERT INTO t VALUES (100, 0, 'after the snapshot')")
    run = _initial_run(pg_conn)
    slot = slot_state(pg_conn, slot_name)
    assert run is not None and run[0] == "done"
    # nothing confirmed past the seam
    assert slot is not None and (slot.active, slot.confirmed_flush) == (False, run[1])
    assert _ops(reader) == ["r"] * ROWS
    later = run_bridge(mode="initial")
    wait_for(lambda: same_state(reader, pg_conn, "t"), 60, "the insert made in between")
    later.stop()
    assert _ops(reader) == ["r"] * ROWS + ["c"]


def test_no_data_streams_only_and_needs_no_progress_schema(
    pg_conn: psycopg.Connection[Any], run_bridge: RunBridge, reader: TopicReader, slot_name: str
) -> None:
    bridge = run_bridge(mode="no_data")
    wait_slot_active(pg_conn, slot_name, bridge)
    pg_conn.execute("DELETE FROM t WHERE id > 1")  # streamed deletes; row 1 never appears
    pg_conn.execute("INSERT INTO t VALUES (100, 0, 'streamed')")
    wait_for(lambda: _ops(reader).count("c") == 1, 60, "the streamed insert")
    bridge.stop()
    assert sorted(_ops(reader)) == sorted(["d"] * (ROWS - 1) + ["c"])
    (schema,) = pg_conn.execute("SELECT to_regnamespace('bridge')").fetchone() or (None,)
    assert schema is None


def test_always_snapshots_again_on_an_existing_slot(
    pg_conn: psycopg.Connection[Any], run_bridge: RunBridge, reader: TopicReader, slot_name: str
) -> None:
    _run_streaming_one(run_bridge, pg_conn, reader, slot_name, "always", 100)
    # While the bridge is down: changes both the next snapshot and the stream carry.
    pg_conn.execute("UPDATE t SET v = -1 WHERE id = 1")
    pg_conn.execute("DELETE FROM t WHERE id = 2")
    pg_conn.execute("INSERT INTO t VALUES (101, 0, 'while down')")
    (first_point,) = pg_conn.execute("SELECT lsn FROM bridge.snapshot_run").fetchone() or (None,)
    second = run_bridge(mode="always")
    wait_for(lambda: _ops(reader).count("r") == 2 * ROWS + 1, 120, "the second snapshot")
    wait_for(lambda: same_state(reader, pg_conn, "t"), 60, "the table's state")
    second.stop()
    ops = _ops(reader)
    assert ops[: ROWS + 1] == ["r"] * ROWS + ["c"]
    # Older than the new snapshot, so streamed before it: per-key order is commit order.
    assert sorted(ops[ROWS + 1 : ROWS + 4]) == ["c", "d", "u"]
    assert ops[ROWS + 4 :] == ["r"] * (ROWS + 1)  # the table as it is now
    run = _initial_run(pg_conn)
    assert run is not None and run[0] == "done" and run[1] != first_point


def test_when_needed_replaces_a_slot_whose_wal_is_gone(
    pg_conn: psycopg.Connection[Any], run_bridge: RunBridge, reader: TopicReader, slot_name: str
) -> None:
    _run_streaming_one(run_bridge, pg_conn, reader, slot_name, "when_needed", 100)
    _run_streaming_one(run_bridge, pg_conn, reader, slot_name, "when_needed", 101)
    assert _ops(reader).count("r") == ROWS  # a healthy slot is not snapshotted again
    _lose_wal(pg_conn, slot_name)
    # Lost with the WAL, so only a snapshot can show it. (A delete lost this way cannot be
    # shown at all: a snapshot emits the rows that exist; see bridge/snapshot/modes.py.)
    pg_conn.execute("UPDATE t SET s = 'changed while the WAL was lost' WHERE id = 3")
    again = run_bridge(mode="when_needed")
    wait_for(lambda: _ops(reader).count("r") == 2 * ROWS + 2, 120, "the new snapshot")
    _stream_one(pg_conn, reader, again, 102, slot_name)
    again.stop()
    assert _ops(reader)[-1] == "c"  # streaming from the new slot


def _lose_wal(conn: psycopg.Connection[Any], slot: str) -> None:
    """Make PostgreSQL invalidate the slot (wal_status 'lost') by capping its WAL."""
    conn.execute("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'")
    conn.execute("SELECT pg_reload_conf()")
    try:
        conn.execute("CREATE TABLE filler (x text)")

        def lost() -> bool:
            conn.execute(
                "INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 2000)"
            )
            conn.execute("SELECT pg_switch_wal()")
            conn.execute("CHECKPOINT")
            row = conn.execute(
                "SELECT wal_status FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
            return row is not None and row[0] == "lost"

        wait_for(lost, 60, "the slot to lose its WAL")
    finally:
        conn.execute("ALTER SYSTEM RESET max_slot_wal_keep_size")
        conn.execute("SELECT pg_reload_conf()")
