"""PostgreSQL frozen (SIGSTOP to its process group) while the bridge waits on it: a SIGTERM
still ends the bridge within its stop timeout, with a line that says why, and once
PostgreSQL is thawed a new run resumes with nothing lost.

A frozen server is the case no server-side timeout covers: its kernel takes the query
and acknowledges it, and nothing ever answers (statement_timeout, wal_sender_timeout and
TCP keepalives all need the server or the link to act). The bridge's own deadlines and
its stop (bridge/source/waiting.py) have to end the wait.

Each scenario waits for a condition, never a pause: the bridge's request lies unread in
the frozen server's receive queue (/proc/net/tcp), so the stop is sure to arrive while
the bridge waits for an answer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeFactory, BridgeProcess
from delivery.ledger import LedgerStreamFactory, stop_bridge, warm_up
from waiting import wait_for

from .checker import Fault, assert_clean, check
from .harness import acked, drain

STOP_TIMEOUT_S = 30.0  # pipeline.shutdown_timeout_s, the default, set explicitly below


@contextmanager
def frozen(stack: Any) -> Iterator[None]:
    """SIGSTOP to the postmaster, then to each of its children (every backend calls setsid:
    each is its own process group, so the postmaster's group holds the postmaster alone);
    the postmaster first, so that no new backend starts. SIGCONT to all of them on the way
    out whatever happens: the rest of the session uses this server."""
    postmaster = int((Path(stack.postgres.data_dir) / "postmaster.pid").read_text().split()[0])
    os.kill(postmaster, signal.SIGSTOP)
    children = _children(postmaster)
    try:
        for pid in children:
            os.kill(pid, signal.SIGSTOP)
        yield
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        os.kill(postmaster, signal.SIGCONT)


def _children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[1]) == parent:  # the field after the state: the parent's pid
            found.append(int(stat.parent.name))
    return found


def unread_requests(pg_port: int, client_ports: set[int] | None = None) -> bool:
    """Whether the server side of a connection (from one of `client_ports`, or any) holds
    bytes nobody read: a request the frozen server never saw."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, queues = fields[1], fields[2], fields[4]
        rx_queue = int(queues.split(":")[1], 16)
        if int(local.split(":")[1], 16) != pg_port or rx_queue == 0:
            continue
        if client_ports is None or int(remote.split(":")[1], 16) in client_ports:
            return True
    return False


def bridge_query_ports(conn: psycopg.Connection[Any], slot: str) -> set[int]:
    """Client ports of the bridge's plain (non-replication) connections."""
    rows = conn.execute(
        "SELECT client_port FROM pg_stat_activity "
        "WHERE application_name = %s AND backend_type = 'client backend'",
        (f"bridge:{slot}",),
    ).fetchall()
    return {int(port) for (port,) in rows}


def stopped_in_time(bridge: BridgeProcess) -> str:
    """SIGTERM; the bridge exits 0 within its stop timeout. Its log."""
    bridge.terminate()
    code = bridge.wait(STOP_TIMEOUT_S)
    assert code == 0, f"exit code {code} within {STOP_TIMEOUT_S:.0f}s:\n{bridge.log()}"
    log = bridge.log()
    assert "Traceback" not in log, log
    return log


@pytest.mark.fault
def test_sigterm_while_postgres_is_frozen_mid_stream(
    stack: Any,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
) -> None:
    """The catalog connection's heartbeat query is under way when PostgreSQL freezes: the
    stop cancels it (no answer: the connection is dropped), the bridge drains what Kafka
    has, exits 0; thawed, the next run delivers every committed row."""
    settings["pipeline"].update(heartbeat_interval_s=0.2, shutdown_timeout_s=STOP_TIMEOUT_S)
    bridge = bridge_process(settings)
    with ledger_stream(bridge, reconnect=True) as stream:
        warm_up(stream, bridge, 300)
        ports = bridge_query_ports(pg_conn, slot_name)
        assert ports, "the bridge's catalog connection is not in pg_stat_activity"
        t_ms, before = time.time() * 1000, stream.monitor.flushed()
        with frozen(stack):
            wait_for(
                lambda: unread_requests(stack.pg_port, ports), 30, "a query of the bridge unread"
            )
            log = stopped_in_time(bridge)
        assert "stop requested while the catalog connection waited for PostgreSQL" in log, log
        assert "undelivered work is not acknowledged" in log, log
        fault = Fault(t_ms, min(before, acked(stream.dsn, stream.slot)), "postgres frozen")
        writer = stream.writer
        bridge.start()
        goal = len(writer.committed) + 100
        wait_for(lambda: len(writer.committed) >= goal, 60, "writes after the thaw")
        rows = drain(stream.dsn, stream.reader, writer, bridge)
        stop_bridge(bridge, stream.reader)
    summary = check("postgres frozen", rows, stream.reader.records, [fault], exactly_once=False)
    assert_clean(summary)


@pytest.mark.fault
def test_sigterm_while_connecting_to_a_frozen_postgres(
    stack: Any, settings: dict[str, Any], bridge_process: BridgeFactory
) -> None:
    """Started against a frozen server, the bridge waits for the answer to its start-up
    packet (connect_timeout is long here); a stop ends that wait at once."""
    settings["source"]["connect_timeout_s"] = 3600
    bridge = bridge_process(settings)
    with frozen(stack):
        bridge.start()
        wait_for(
            lambda: unread_requests(stack.pg_port) and bridge.alive(),
            60,
            "the bridge's connection attempt",
        )
        log = stopped_in_time(bridge)
    assert "stop requested while connecting to PostgreSQL at" in log, log
