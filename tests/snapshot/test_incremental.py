"""Incremental snapshots while streaming continues (real stack)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import psycopg
from delivery.helpers import wait_slot_active
from waiting import wait_for

from .helpers import RunBridge, TopicReader, Writer, make_table, same_state, snapshot_tables

SIGNAL = "public.debezium_signal"
SIGNALLED = {"mode": "no_data", "signal_table": SIGNAL}  # streaming, snapshots on a signal


def _signal(conn: psycopg.Connection[Any], signal_id: str, data: dict[str, Any]) -> None:
    conn.execute(
        f"INSERT INTO {SIGNAL} VALUES (%s, 'execute-snapshot', %s)", (signal_id, json.dumps(data))
    )


def _run(conn: psycopg.Connection[Any], signal_id: str) -> tuple[str, dict[str, Any]] | None:
    try:
        row = conn.execute(
            "SELECT state, detail FROM bridge.snapshot_run WHERE run_id = %s", (signal_id,)
        ).fetchone()
    except psycopg.errors.UndefinedTable:
        return None
    return None if row is None else (row[0], row[1])


def _done(conn: psycopg.Connection[Any], signal_id: str) -> bool:
    run = _run(conn, signal_id)
    return run is not None and run[0] == "done"


def _reads(reader: TopicReader) -> Counter[int]:
    return Counter(r.key["id"] for r in reader.read() if r.key and r.value and r.value["op"] == "r")


def _prepare(conn: psycopg.Connection[Any], rows: int) -> None:
    make_table(conn, "t", rows)
    conn.execute(f"CREATE TABLE {SIGNAL} (id text PRIMARY KEY, type text NOT NULL, data text)")


def test_incremental_snapshot_during_updates_and_deletes(
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    run_bridge: RunBridge,
    topic: Any,
    slot_name: str,
) -> None:
    rows = 5_000
    _prepare(pg_conn, rows)
    bridge = run_bridge(**SIGNALLED, incremental_chunk_size=250)
    wait_slot_active(pg_conn, slot_name, bridge)
    writer = Writer(pg_dsn, "t", rows).start()
    writer.wait_transactions(20)
    _signal(pg_conn, "snap-1", {"data-collections": ["public.t"], "type": "incremental"})
    wait_for(lambda: _done(pg_conn, "snap-1"), 120, "the incremental snapshot to finish")
    writer.wait_transactions(20)
    writer.stop()
    reader = topic("public.t")
    wait_for(lambda: same_state(reader, pg_conn, "t"), 60, "Kafka to hold the table's state")
    records = reader.read()
    reads = [r for r in records if r.value and r.value["op"] == "r"]
    assert reads and all(r.value and r.value["source"]["snapshot"] == "incremental" for r in reads)
    assert max(_reads(reader).values()) == 1
    windows = Counter(
        r.value["after"]["type"] for r in topic("public.debezium_signal").read() if r.value
    )
    assert windows["snapshot-window-open"] == windows["snapshot-window-close"] > rows // 500
    statuses = {s.table: s for s in snapshot_tables(bridge.pipeline)}
    assert statuses["public.t"].kind == "incremental" and statuses["public.t"].done
    bridge.stop()


def test_additional_condition_limits_the_rows(
    pg_conn: psycopg.Connection[Any],
    run_bridge: RunBridge,
    topic: Any,
    slot_name: str,
) -> None:
    _prepare(pg_conn, 50)
    bridge = run_bridge(**SIGNALLED, incremental_chunk_size=7)
    wait_slot_active(pg_conn, slot_name, bridge)
    condition = {"data-collection": "public.t", "filter": "id > 10 AND s LIKE 'row %'"}
    _signal(
        pg_conn,
        "snap-filtered",
        {"data-collections": ["public.t", "public.missing"], "additional-conditions": [condition]},
    )
    _signal(pg_conn, "snap-bad", {"no": "collections"})  # logged and ignored
    wait_for(lambda: _done(pg_conn, "snap-filtered"), 60, "the incremental snapshot to finish")
    bridge.stop()
    assert sorted(_reads(topic("public.t"))) == list(range(11, 51))
    assert _run(pg_conn, "snap-bad") is None


def test_incremental_snapshot_resumes_after_a_restart(
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    run_bridge: RunBridge,
    topic: Any,
    slot_name: str,
) -> None:
    rows = 3_000
    _prepare(pg_conn, rows)
    make_table(pg_conn, "a", 250)
    first = run_bridge(**SIGNALLED, incremental_chunk_size=100)
    wait_slot_active(pg_conn, slot_name, first)
    # A lock on t holds the snapshot at its second table: a deterministic stop point.
    with psycopg.connect(pg_dsn) as locker:
        locker.execute("LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
        _signal(pg_conn, "snap-2", {"data-collections": ["public.a", "public.t"]})
        wait_for(lambda: _waiting_for_a_lock(pg_conn), 60, "the snapshot to reach table t")
        first.pipeline.stop()
        locker.rollback()
    first.stop()
    run = _run(pg_conn, "snap-2")
    assert run is not None and run[0] == "running", run
    # Stored: the position after the last chunk whose delivery was acknowledged. (The
    # chunk emitted just before the stop was not: its transaction's commit was never
    # processed, so PostgreSQL sends it again and that chunk is read again.)
    detail = run[1]
    acknowledged = 250 if detail["index"] >= 1 else int((detail["last_key"] or ["0"])[0])
    assert acknowledged >= 100
    second = run_bridge(**SIGNALLED, incremental_chunk_size=100)
    wait_for(lambda: _done(pg_conn, "snap-2"), 120, "the resumed snapshot to finish")
    second.stop()
    reads_a = _reads(topic("public.a"))
    assert sorted(reads_a) == list(range(1, 251))
    assert all(reads_a[k] == 1 for k in range(1, acknowledged + 1)), "acknowledged chunk re-read"
    assert set(_reads(topic("public.t"))) == set(range(1, rows + 1))


def _waiting_for_a_lock(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock' AND datname = current_database()"
    ).fetchone()
    return bool(row and row[0])
