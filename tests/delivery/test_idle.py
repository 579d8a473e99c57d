"""An idle captured database on a busy server must not pin WAL.

The slot of database A decodes all of the server's WAL, while only database B
writes. pgoutput sends A's bridge nothing but keepalives; their WAL position is
everything decoded so far, which the bridge may confirm as soon as nothing it
handed to Kafka is outstanding. Otherwise A's slot holds WAL back for as long
as A stays idle: the disk of a busy server fills up.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from running import running
from waiting import wait_for

from bridge.config import Config

from .helpers import SlotMonitor, insert_lsn, wait_slot_active
from .ledger import LEDGER_DDL, LedgerWriter


@pytest.fixture
def busy_db(stack: Any, pg_db: str) -> Iterator[str]:
    """A second database under a continuous write load (its own ledger writer)."""
    name = f"{pg_db}_busy"
    stack.create_database(name)
    dsn = str(stack.dsn(name))
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(LEDGER_DDL)
        yield dsn
    finally:
        stack.drop_database(name)


@pytest.mark.parametrize(
    ("heartbeat_s", "captured_change"),
    [(0.0, False), (0.0, True), (1.0, False)],
    ids=["never-saw-a-change", "after-one-change", "heartbeats"],
)
def test_idle_slot_follows_the_server(
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    busy_db: str,
    slot_name: str,
    settings: dict[str, Any],
    heartbeat_s: float,
    captured_change: bool,
) -> None:
    pg_conn.execute("CREATE TABLE quiet (id int PRIMARY KEY)")
    settings["pipeline"]["heartbeat_interval_s"] = heartbeat_s
    with running(Config(**settings)) as bridge:
        wait_slot_active(pg_conn, slot_name, bridge)
        if captured_change:
            pg_conn.execute("INSERT INTO quiet VALUES (1)")
        monitor = SlotMonitor(pg_dsn, slot_name, every=0.1)
        writer = LedgerWriter(busy_db, rows_per_txn=5, rate=100)
        try:
            with psycopg.connect(busy_db, autocommit=True) as busy:
                for round_ in range(3):
                    goal = len(writer.committed) + 50
                    wait_for(lambda: len(writer.committed) >= goal, 30, "B's writes")  # noqa: B023
                    target = insert_lsn(busy)  # past B's writes so far

                    def passed(lsn: int = target) -> bool:
                        bridge.check()
                        return monitor.flushed() >= lsn

                    wait_for(passed, 30, f"A's slot to pass B's WAL at {target} (round {round_})")
        finally:
            writer.stop()
            monitor.stop()
        assert all(s.state.active for s in monitor.samples), "A's walsender went away"
