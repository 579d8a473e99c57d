"""kill -9 in the middle of an initial snapshot, restart: finished chunks are not read again."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
from delivery.helpers import BridgeProcess
from waiting import wait_for

from .helpers import make_table, same_state

# 400 chunks: the kill, made once 6 are recorded, cannot miss the middle of the snapshot even
# when the test process loses the CPU for a while (20,000 rows in 50 chunks once could).
ROWS = 40_000
CHUNK = 100


def test_kill9_mid_snapshot_resumes_at_the_last_finished_chunk(
    pg_conn: psycopg.Connection[Any],
    make_settings: Any,
    topic: Any,
    slot_name: str,
    tmp_path: Path,
) -> None:
    make_table(pg_conn, "t", ROWS)
    bridge = BridgeProcess(make_settings(mode="initial", workers=2, chunk_size=CHUNK), tmp_path)
    try:
        bridge.start()
        wait_for(lambda: _done_chunks(pg_conn) >= 6, 120, "six chunks recorded", every=0.01)
        bridge.kill9()

        done_at_kill = pg_conn.execute(
            "SELECT lo[1]::int, hi[1]::int, rows FROM bridge.snapshot_chunk "
            "WHERE rows IS NOT NULL ORDER BY chunk_no"
        ).fetchall()
        state = pg_conn.execute("SELECT state FROM bridge.snapshot_run").fetchone()
        assert state == ("running",), "the kill must land in the middle of the snapshot"
        assert sum(rows for _, _, rows in done_at_kill) < ROWS
        # The readers died with their parent: no session of the bridge is left.
        wait_for(
            lambda: not _sessions(pg_conn, slot_name), 30, "the killed bridge's sessions to end"
        )

        bridge.start()
        wait_for(lambda: _run_state(pg_conn) == "done", 120, "the resumed snapshot to finish")
        pg_conn.execute("INSERT INTO t VALUES (0, 0, 'streamed after the snapshot')")
        reader = topic("public.t")
        wait_for(lambda: same_state(reader, pg_conn, "t"), 60, "Kafka to hold the table's state")
        bridge.terminate()
        assert bridge.wait(60) == 0, bridge.log()
    finally:
        bridge.cleanup()

    reads = Counter(
        r.key["id"] for r in reader.read() if r.key and r.value and r.value["op"] == "r"
    )
    assert set(reads) == set(range(1, ROWS + 1))
    for lo, hi, rows in done_at_kill:
        keys = range((lo or 0) + 1, (hi if hi is not None else ROWS) + 1)
        assert rows == len(keys)
        assert all(reads[k] == 1 for k in keys), f"chunk ({lo}, {hi}] was read again"
    assert "resuming snapshot" in bridge.log()


def _done_chunks(conn: psycopg.Connection[Any]) -> int:
    try:
        row = conn.execute("SELECT count(rows) FROM bridge.snapshot_chunk").fetchone()
    except psycopg.errors.UndefinedTable:
        return 0
    return int(row[0]) if row else 0


def _run_state(conn: psycopg.Connection[Any]) -> str | None:
    row = conn.execute("SELECT state FROM bridge.snapshot_run").fetchone()
    return None if row is None else str(row[0])


def _sessions(conn: psycopg.Connection[Any], slot: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (f"bridge:{slot}",)
    ).fetchone()
    return int(row[0]) if row else 0
