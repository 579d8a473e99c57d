"""The initial snapshot of a table that keeps changing: the seam loses and doubles nothing."""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg
import pytest
from waiting import wait_for

from bridge.lsn import LSN

from .helpers import (
    RunBridge,
    Writer,
    keyed_state,
    make_table,
    same_state,
    snapshot_tables,
    table_state,
)

ROWS = 20_000
MILLION = 1_000_000


@pytest.mark.parametrize("copy_format", ["text", "binary"])
def test_snapshot_while_writes_continue(
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    run_bridge: RunBridge,
    topic: Any,
    copy_format: str,
) -> None:
    """Chunks read with text or binary COPY (snapshot.copy_format)."""
    snapshot_while_writing(pg_conn, pg_dsn, run_bridge, topic, ROWS, 1500, copy_format)


def test_million_row_snapshot_while_writes_continue(
    pg_conn: psycopg.Connection[Any], pg_dsn: str, run_bridge: RunBridge, topic: Any
) -> None:
    """The issue's size: 1,000,000 rows, final keyed state in Kafka equals the table."""
    snapshot_while_writing(pg_conn, pg_dsn, run_bridge, topic, MILLION, 25_000)


def snapshot_while_writing(
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    run_bridge: RunBridge,
    topic: Any,
    rows: int,
    chunk_size: int,
    copy_format: str = "text",
) -> None:
    patience = 120 + rows / 2_000  # seconds; 1M rows on a loaded 2-core machine
    make_table(pg_conn, "t", rows)
    pg_conn.execute("CREATE TABLE nokey (a int, b text)")  # read by ctid ranges
    pg_conn.execute("INSERT INTO nokey SELECT g, 'n' || g FROM generate_series(1, 2500) g")
    writer = Writer(pg_dsn, "t", rows).start()
    writer.wait_transactions(20)
    bridge = run_bridge(mode="initial", workers=3, chunk_size=chunk_size, copy_format=copy_format)
    reader = topic("public.t")
    wait_for(lambda: _run_state(pg_conn) == "done", patience, "the snapshot to finish")
    writer.wait_transactions(50)  # and the stream carries changes after the seam
    writer.stop()
    wait_for(lambda: same_state(reader, pg_conn, "t"), patience, "Kafka to hold the table's state")

    records = reader.read()
    snapshot = [r for r in records if r.value is not None and r.value["op"] == "r"]
    streamed = [r for r in records if r.value is not None and r.value["op"] != "r"]
    assert snapshot and streamed
    assert all(
        r.value is not None and r.value["source"]["snapshot"] in ("true", "last") for r in snapshot
    )
    flags = Counter(r.value["source"]["snapshot"] for r in records if r.value is not None)
    assert flags["last"] <= 1  # the very last snapshot record may be in the other topic
    # Nothing doubled: each key read once. Nothing lost: the state matches (above).
    keys = Counter(r.key["id"] for r in snapshot if r.key is not None)
    assert max(keys.values()) == 1
    # The seam: every streamed transaction commits at or after the consistent point.
    row = pg_conn.execute(
        "SELECT lsn::text FROM bridge.snapshot_run WHERE run_id = 'initial'"
    ).fetchone()
    assert row is not None
    point = LSN.parse(row[0])
    assert all(r.value is not None and r.value["source"]["commit_lsn"] >= point for r in streamed)
    nokey = topic("public.nokey").read()
    assert sorted(r.value["after"]["a"] for r in nokey if r.value) == list(range(1, 2501))
    last = [
        r
        for r in nokey + records
        if r.value is not None and r.value["source"]["snapshot"] == "last"
    ]
    assert len(last) == 1
    done = pg_conn.execute("SELECT count(*), count(rows) FROM bridge.snapshot_chunk").fetchone()
    assert done is not None and done[0] == done[1]
    statuses = {s.table: s for s in snapshot_tables(bridge.pipeline)}
    assert statuses["public.t"].done and statuses["public.t"].rows_done == len(snapshot)
    bridge.stop()
    assert keyed_state(reader.read()) == table_state(pg_conn, "t")


def _run_state(conn: psycopg.Connection[Any]) -> str | None:
    try:
        row = conn.execute(
            "SELECT state FROM bridge.snapshot_run WHERE run_id = 'initial'"
        ).fetchone()
    except psycopg.errors.UndefinedTable:
        return None
    return None if row is None else str(row[0])
