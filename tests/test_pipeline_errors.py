"""Bad bytes on the stream stop the bridge without acknowledging past the last good
transaction (a decoder wrapped to fail on one message, against the real stack)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from delivery.helpers import bridge_settings
from running import running
from waiting import wait_for

from bridge.build import build_pipeline
from bridge.config import Config
from bridge.errors import ProtocolError
from bridge.lsn import LSN


def slot_position(conn: psycopg.Connection[Any], slot: str) -> LSN:
    row = conn.execute(
        "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = %s", (slot,)
    ).fetchone()
    assert row is not None
    return LSN.parse(str(row[0])) if row[0] is not None else LSN(0)


def test_protocol_error_stops_without_acknowledging_past_the_last_good_tx(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    pg_conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    settings = bridge_settings(
        stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path / "spill"
    )
    settings["source"]["status_interval_s"] = 0.2
    cfg = Config(**settings)
    pipeline = build_pipeline(cfg)
    decode = pipeline.decode

    def poisoned(raw: bytes) -> Any:
        if b"POISON" in raw:
            raise ProtocolError("I", 7, "test: poisoned message")
        return decode(raw)

    pipeline.decode = poisoned
    with running(pipeline) as bridge:
        pg_conn.execute("INSERT INTO t VALUES (1, 'good')")
        row = pg_conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
        assert row is not None
        good_end = LSN.parse(row[0])
        wait_for(  # idle follows keepalives
            lambda: slot_position(pg_conn, slot_name) >= good_end, 60, "the good transaction's ack"
        )
        with pg_conn.transaction():
            pg_conn.execute("INSERT INTO t VALUES (2, 'POISON')")
            # the poisoned transaction's commit record starts here or later
            lsn = "SELECT pg_current_wal_insert_lsn()"
            before_poison_commit = LSN.parse(str(pg_conn.execute(lsn).fetchone()[0]))  # type: ignore[index]
        pg_conn.execute("INSERT INTO t VALUES (3, 'after')")
        error = bridge.join()
    assert isinstance(error, ProtocolError)
    assert "poisoned" in str(error)
    # Idle, the bridge may confirm a keepalive's position, the walsender's decoding
    # position: possibly inside the poisoned transaction, never past its commit record,
    # so PostgreSQL still sends it again on restart.
    assert slot_position(pg_conn, slot_name) <= before_poison_commit
