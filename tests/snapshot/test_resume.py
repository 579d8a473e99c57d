"""kill -9 in the middle of an initial snapshot, restart: finished chunks are not read again,
and with writes going on, every key's records stay in commit order (issue 19, part 6)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeProcess
from waiting import wait_for

from bridge.lsn import LSN

from .helpers import Rec, Writer, make_table, same_state

# 400 chunks: the kill, made once 6 are recorded, cannot miss the middle of the snapshot even
# when the test process loses the CPU for a while (20,000 rows in 50 chunks once could).
ROWS = 40_000
CHUNK = 100
# The same 400 chunks, smaller (the order test runs three snapshots' worth of restarts).
ORDER_ROWS = 20_000
ORDER_CHUNK = 50


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


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_kills_during_the_snapshot_keep_commit_order_per_key(
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    make_settings: Any,
    topic: Any,
    slot_name: str,
    tmp_path: Path,
    exactly_once: bool,
) -> None:
    """Updates, deletes and upserts run throughout; the bridge is killed in its initial
    snapshot and again in the resumed one. Each resume reads its chunks at a newer LSN
    than the slot's position, yet no key's records may go back in time: a consumer
    applying the topic in order sees every key's states in commit order, and ends with
    the table (nothing lost, no deleted row left behind). Exactly-once: the changes
    streamed before a resumed snapshot's rows are in committed Kafka transactions, not
    in one a kill aborts and the next run sends again after those rows."""
    make_table(pg_conn, "t", ORDER_ROWS)
    writer = Writer(pg_dsn, "t", ORDER_ROWS, rate=200).start()
    settings = make_settings(mode="initial", workers=2, chunk_size=ORDER_CHUNK)
    settings["kafka"].update(exactly_once=exactly_once, transaction_max_records=50)
    bridge = BridgeProcess(settings, tmp_path)
    try:
        bridge.start()
        _kill_during_snapshot(bridge, pg_conn, slot_name, 6)  # in the initial snapshot
        bridge.start()
        _kill_during_snapshot(bridge, pg_conn, slot_name, _done_chunks(pg_conn) + 6)  # resumed
        bridge.start()
        wait_for(lambda: _run_state(pg_conn) == "done", 120, "the resumed snapshot to finish")
        writer.wait_transactions(50)  # streamed after the snapshot as well
        writer.stop()
        reader = topic("public.t")
        wait_for(lambda: same_state(reader, pg_conn, "t"), 90, "Kafka to hold the table's state")
        bridge.terminate()
        assert bridge.wait(60) == 0, bridge.log()
    finally:
        writer.stop()
        bridge.cleanup()

    records = reader.read()
    assert any(r.value and r.value["op"] != "r" for r in records)
    backwards = _back_in_time(records)
    assert not backwards, (
        f"{len(backwards)} records older than one before them of the same key, e.g. "
        + "; ".join(backwards[:5])
    )
    assert bridge.log().count("resuming snapshot") == 2


def _kill_during_snapshot(
    bridge: BridgeProcess, conn: psycopg.Connection[Any], slot: str, chunks: int
) -> None:
    """kill -9 once `chunks` chunks are recorded done, the snapshot still running."""
    wait_for(lambda: _done_chunks(conn) >= chunks, 120, f"{chunks} chunks recorded", every=0.01)
    bridge.kill9()
    assert _run_state(conn) == "running", "the kill must land in the middle of the snapshot"
    wait_for(lambda: not _sessions(conn, slot), 30, "the killed bridge's sessions to end")


def _back_in_time(records: list[Rec]) -> list[str]:
    """Each record whose commit LSN (`source.lsn`; a snapshot row's is its snapshot's) is
    below that of an earlier record of its key. Every record counts, resent copies too:
    the kills land while chunks are read, when nothing streamed is unacknowledged."""
    newest: dict[int, int] = {}
    found = []
    for rec in records:
        if rec.key is None or rec.value is None:  # a tombstone follows its delete
            continue
        key, op, lsn = rec.key["id"], rec.value["op"], rec.value["source"]["commit_lsn"]
        before = newest.get(key, 0)
        if lsn < before:
            found.append(f"key {key}: {op} at {LSN(lsn)} after {LSN(before)}")
        newest[key] = max(before, lsn)
    return found


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
