"""Slot, publication and START_REPLICATION against the real PostgreSQL of the local stack."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from waiting import wait_for

from bridge.decode.messages import Begin, Commit, Insert
from bridge.decode.pgoutput import PgoutputDecoder, pgoutput_options
from bridge.errors import SourceError
from bridge.lsn import LSN
from bridge.source import libpq, slots
from bridge.source.status import StatusTracker
from bridge.source.stream import ReplicationStream


@pytest.fixture
def conninfo(stack: Any, pg_db: str) -> dict[str, Any]:
    return {
        "host": stack.pg_host,
        "port": stack.pg_port,
        "dbname": pg_db,
        "user": stack.pg_user,
        "password": stack.pg_password,
    }


@pytest.fixture
def rc(conninfo: dict[str, Any]) -> Iterator[libpq.ReplicationConnection]:
    conn = libpq.ReplicationConnection(libpq.connect(conninfo, replication=True))
    yield conn
    conn.close()


def test_prerequisites_and_identify(rc: libpq.ReplicationConnection, pg_db: str) -> None:
    assert slots.check_prerequisites(rc) >= 150000
    info = slots.identify_system(rc)
    assert info.dbname == pg_db
    assert info.xlogpos > 0


def test_role_without_replication_is_refused(
    conninfo: dict[str, Any], pg_conn: psycopg.Connection[Any]
) -> None:
    pg_conn.execute("DROP ROLE IF EXISTS norepl")
    pg_conn.execute("CREATE ROLE norepl LOGIN PASSWORD 'pw-norepl'")
    try:
        info = dict(conninfo, user="norepl", password="pw-norepl")
        with pytest.raises(SourceError, match="replication"):
            conn = libpq.ReplicationConnection(libpq.connect(info, replication=True))
            try:
                slots.check_prerequisites(conn)
            finally:
                conn.close()
    finally:
        pg_conn.execute("DROP ROLE norepl")


def test_wrong_password_is_clear_and_secret_free(conninfo: dict[str, Any]) -> None:
    with pytest.raises(SourceError) as info:
        libpq.connect(dict(conninfo, password="wrong-pw-123"), replication=True)
    assert "wrong-pw-123" not in str(info.value)
    assert "password" in str(info.value)


def test_slot_created_then_reused_and_plugin_checked(
    rc: libpq.ReplicationConnection, slot_name: str, pg_conn: psycopg.Connection[Any]
) -> None:
    created = slots.ensure_slot(rc, slot_name, "pgoutput", create=True, two_phase=False)
    assert created.created and created.snapshot_name and created.consistent_point
    again = slots.ensure_slot(rc, slot_name, "pgoutput", create=True, two_phase=False)
    assert not again.created
    with pytest.raises(SourceError, match="uses plugin 'pgoutput'"):
        slots.ensure_slot(rc, slot_name, "pglogical_output", create=True, two_phase=False)
    with pytest.raises(SourceError, match="does not exist"):
        slots.ensure_slot(rc, slot_name + "x", "pgoutput", create=False, two_phase=False)
    # the catalog's view of it: usable, at its consistent point; a missing slot is None
    info = slots.slot_info(pg_conn, slot_name)
    assert info == slots.SlotInfo(created.consistent_point, None)
    assert slots.slot_info(pg_conn, slot_name + "x") is None


def test_publication_modes(pg_conn: psycopg.Connection[Any], publication_name: str) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        slots.ensure_publication(pg_conn, publication_name, "disabled")
    slots.ensure_publication(pg_conn, publication_name, "all_tables")
    row = pg_conn.execute(
        "SELECT puballtables FROM pg_publication WHERE pubname = %s", (publication_name,)
    ).fetchone()
    assert row == (True,)
    slots.ensure_publication(pg_conn, publication_name, "disabled")  # exists now: fine


def test_stream_round_trip_confirms_flush(
    rc: libpq.ReplicationConnection,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
) -> None:
    pg_conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    slots.ensure_publication(pg_conn, publication_name, "all_tables")
    slots.ensure_slot(rc, slot_name, "pgoutput", create=True, two_phase=False)
    pg_conn.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    slots.start_replication(
        rc, slot_name, LSN(0), pgoutput_options(1, [publication_name]), busy_timeout_s=5
    )
    stream = ReplicationStream(rc, StatusTracker(1.0))
    decoder = PgoutputDecoder(1)
    seen: list[object] = []

    def commit_seen() -> bool:
        data = stream.read(0.5)
        if data is not None:
            seen.append(decoder.decode(data.payload))
        return any(isinstance(m, Commit) for m in seen)

    wait_for(commit_seen, 30, "a streamed commit", every=0, detail=lambda: f"got {seen}")
    assert isinstance(seen[0], Begin)
    assert sum(isinstance(m, Insert) for m in seen) == 2
    commit = seen[-1]
    assert isinstance(commit, Commit)
    stream.confirm(commit.end_lsn)

    def confirmed() -> bool:
        stream.read(0.1)
        row = pg_conn.execute(
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = %s",
            (slot_name,),
        ).fetchone()
        return row is not None and LSN.parse(str(row[0])) == commit.end_lsn

    wait_for(confirmed, 30, f"the slot to confirm {commit.end_lsn}")
    stream.close()


def test_busy_slot_is_retried_until_free(
    conninfo: dict[str, Any], slot_name: str, pg_conn: psycopg.Connection[Any]
) -> None:
    slots.ensure_publication(pg_conn, "pub_busy", "all_tables")
    first = libpq.ReplicationConnection(libpq.connect(conninfo, replication=True))
    slots.ensure_slot(first, slot_name, "pgoutput", create=True, two_phase=False)
    options = pgoutput_options(1, ["pub_busy"])
    slots.start_replication(first, slot_name, LSN(0), options, busy_timeout_s=5)
    second = libpq.ReplicationConnection(libpq.connect(conninfo, replication=True))
    waits: list[float] = []

    def release_on_first_wait(delay: float) -> None:
        waits.append(delay)
        if len(waits) == 1:
            first.close()  # the other consumer goes away, as an old pod does
        time.sleep(delay)

    slots.start_replication(
        second, slot_name, LSN(0), options, busy_timeout_s=60, sleep=release_on_first_wait
    )
    assert waits, "the busy slot was not retried"
    second.close()

    third = libpq.ReplicationConnection(libpq.connect(conninfo, replication=True))
    fourth = libpq.ReplicationConnection(libpq.connect(conninfo, replication=True))
    slots.start_replication(third, slot_name, LSN(0), options, busy_timeout_s=30)
    with pytest.raises(SourceError, match="stayed active in another process"):
        slots.start_replication(fourth, slot_name, LSN(0), options, busy_timeout_s=0.5)
    third.close()
    fourth.close()
