"""`bridge.source.libpq` against a stand-in server (tests/source/fakepg.py): real libpq,
and a server that answers, goes silent the way a frozen one does, or takes a cancel.

Every wait of a query has a deadline (`timeout_s`, made short here) and ends at a stop;
an overdue or stopped query is cancelled, and a server that takes no cancel either loses
its connection. Nothing asserts a time: a wait that never ended would hang the test
(pytest-timeout fails it), one that ended the wrong way fails the assertion.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from waiting import wait_for

from bridge.errors import SourceError, SourceTimeoutError, StopRequestedError
from bridge.lsn import LSN
from bridge.source import libpq, slots
from bridge.source.waiting import Stop, Waiter

from .fakepg import FakeServer, copy_out, message, rows

SHORT_S = 0.2
REPO = Path(__file__).resolve().parents[2]


def silent(query: bytes) -> bytes | None:
    return None


def answering(query: bytes) -> bytes | None:
    if query.startswith(b"COPY"):
        return copy_out(b"1\n", b"2\n", b"3\n")
    return rows("one")


@pytest.fixture
def stop() -> Iterator[Stop]:
    made = Stop()
    yield made
    made.close()


def opened(server: FakeServer, stop: Stop | None = None) -> libpq.Connection:
    conn = libpq.connect(server.params(), replication=False, purpose="catalog")
    conn.link.timeout_s = SHORT_S
    conn.link.cancel_timeout_s = conn.link.cancelled_answer_s = SHORT_S
    if stop is not None:
        conn.link.waiter = Waiter(conn.pgconn.socket, stop, grace_s=SHORT_S)
    return conn


def test_queries_wait_for_their_answer_through_the_bridges_waiter() -> None:
    server = FakeServer(answering)
    try:
        with opened(server) as conn:
            assert isinstance(conn, libpq.Connection)
            assert conn.execute("SELECT 'one'").fetchone() == ("one",)
            assert conn.execute("SELECT %s", ("x",)).fetchone() == ("one",)
    finally:
        server.close()


def test_a_query_a_frozen_server_never_answers_expires_and_loses_its_connection() -> None:
    server = FakeServer(silent)
    try:
        conn = opened(server)
        with pytest.raises(SourceTimeoutError) as caught:
            conn.execute("SELECT 1")
        assert "did not answer the catalog connection within 0.2s" in str(caught.value)
        assert "the connection was closed" in str(caught.value)
        assert server.cancels == 1  # asked, never answered
        assert conn.closed
    finally:
        server.close()


def test_a_query_the_server_cancels_keeps_its_connection() -> None:
    server = FakeServer(silent, takes_cancel=True)
    try:
        conn = opened(server)
        with pytest.raises(SourceTimeoutError, match="the query was cancelled"):
            conn.execute("SELECT pg_sleep(3600)")
        assert not conn.closed
        conn.close()
    finally:
        server.close()


def test_a_stop_during_a_query_cancels_it(stop: Stop) -> None:
    server = FakeServer(silent, takes_cancel=True)
    try:
        conn = opened(server, stop)
        conn.link.timeout_s = 3600.0  # only the stop ends this wait
        threading.Timer(0.05, stop.set).start()
        with pytest.raises(StopRequestedError) as caught:
            conn.execute("SELECT 1")
        assert str(caught.value) == (
            "stop requested while the catalog connection waited for PostgreSQL at "
            f"127.0.0.1:{server.port} (a query): the query was cancelled"
        )
        assert StopRequestedError.exit_code == 0
    finally:
        server.close()


def test_walsender_commands_have_the_deadline_too() -> None:
    server = FakeServer(silent)
    try:
        rc = libpq.ReplicationConnection(opened(server))
        with pytest.raises(SourceTimeoutError, match=r"\(IDENTIFY_SYSTEM\)"):
            rc.command("IDENTIFY_SYSTEM")
        rc.close()
    finally:
        server.close()


def test_a_command_answered_comes_back_as_text_rows() -> None:
    server = FakeServer(answering)
    try:
        rc = libpq.ReplicationConnection(opened(server))
        assert rc.command("SHOW wal_level") == [("one",)]
        rc.close()
    finally:
        server.close()


def test_copy_out_hands_over_whole_rows_and_checks_the_end() -> None:
    server = FakeServer(answering)
    try:
        conn = opened(server)
        blocks: list[bytes] = []
        statement = sql.SQL("COPY (SELECT {} WHERE %s) TO STDOUT").format(sql.Literal(1))
        libpq.copy_out(conn, statement, [True], blocks.append)
        assert b"".join(blocks) == b"1\n2\n3\n"
        assert server.queries == [b"COPY (SELECT 1 WHERE true) TO STDOUT"]  # bound client-side
        conn.close()
    finally:
        server.close()


def test_copy_out_stalling_mid_copy_expires_per_block() -> None:
    stalled = message(b"H", b"\0\0\x01\0\0") + message(b"d", b"1\n") + message(b"d", b"2\n")

    def answer(query: bytes) -> bytes | None:
        return stalled

    server = FakeServer(answer)
    try:
        conn = opened(server)
        blocks: list[bytes] = []
        with pytest.raises(SourceTimeoutError, match=r"\(COPY\)"):
            libpq.copy_out(conn, sql.SQL("COPY t TO STDOUT"), [], blocks.append)
        assert b"".join(blocks) == b"1\n2\n"  # what came before the stall was handed over
    finally:
        server.close()


def test_a_failed_connection_names_the_server() -> None:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(SourceError, match=f"cannot connect to PostgreSQL at 127.0.0.1:{port}") as e:
        libpq.connect({"host": "127.0.0.1", "port": port, "sslmode": "disable"}, replication=True)
    # a replication=database connection matches pg_hba.conf lines by database name
    assert e.value.hint is not None and "matches by database name" in e.value.hint


_CONNECTING = """
import signal, sys
from bridge import build
from bridge.errors import StopRequestedError
from bridge.source import libpq, waiting

signal.signal(signal.SIGTERM, build._Stopper(waiting.STOP))
try:
    libpq.connect(dict(host="127.0.0.1", port=int(sys.argv[1]), user="t", dbname="d",
                       sslmode="disable", gssencmode="disable", connect_timeout=3600),
                  replication=False)
except StopRequestedError as exc:
    print(exc)
"""


@pytest.mark.timeout(120)
def test_sigterm_ends_a_connection_attempt_the_server_never_answers() -> None:
    """The process's stop, set by `bridge run`'s handler, interrupts psycopg's connect (a
    wait that is not the bridge's own) instead of leaving it to connect_timeout."""
    server = FakeServer(silent, mute=True)
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        child = subprocess.Popen(
            [sys.executable, "-c", _CONNECTING, str(server.port)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        wait_for(lambda: server.startups == 1, 60, "the connection attempt")
        child.send_signal(signal.SIGTERM)
        out, _ = child.communicate(timeout=60)
        assert (
            out.strip()
            == f"stop requested while connecting to PostgreSQL at 127.0.0.1:{server.port}/d"
        )
        assert child.returncode == 0
    finally:
        server.close()


def test_the_psycopg_module_is_what_it_subclasses() -> None:
    assert issubclass(libpq.Connection, psycopg.Connection)


class BusySlot:
    """A replication connection whose slot is always active in another process."""

    def __init__(self) -> None:
        self.tries = 0

    def quote(self, part: sql.Composable) -> str:
        return part.as_string()

    def start_copy_both(self, text: str) -> None:
        self.tries += 1
        raise libpq.CommandError("START_REPLICATION", libpq.SQLSTATE_OBJECT_IN_USE, "active")


def test_a_stop_ends_the_wait_for_a_busy_slot(stop: Stop) -> None:
    busy = BusySlot()
    threading.Timer(0.05, stop.set).start()
    with pytest.raises(StopRequestedError, match="'s1' was active in another process"):
        slots.start_replication(
            busy,  # type: ignore[arg-type]
            "s1",
            LSN(0),
            [],
            busy_timeout_s=3600,
            stop=stop,
        )
    assert busy.tries >= 1
