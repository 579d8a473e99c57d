"""Kafka down for 30 s in mid-stream while PostgreSQL keeps committing.

The bridge must neither lose nor acknowledge anything it could not deliver, keep
its walsender alive (keepalives answered and status updates sent while the
producer is blocked on its in-flight bound), and carry on once the broker is back.
wal_sender_timeout is lowered to 5 s for the test so that a bridge deaf to
PostgreSQL during the outage would be disconnected six times over.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from .helpers import BridgeProcess, SlotMonitor, wait_slot_active
from .kafka_io import Rec, assert_acks_follow_appends
from .ledger import (
    LedgerWriter,
    assert_complete,
    completion_times,
    ledger_occurrences,
    ledger_reader,
)

OUTAGE_S = 30.0
IN_FLIGHT = 200  # the producer's bound: the outage fills it many times over
SETTLE_MS = 5000  # delivery reports of records the broker took just before it stopped


@pytest.fixture
def short_wal_sender_timeout(pg_conn: psycopg.Connection[Any]) -> Iterator[None]:
    pg_conn.execute("ALTER SYSTEM SET wal_sender_timeout = '5s'")
    pg_conn.execute("SELECT pg_reload_conf()")
    try:
        yield
    finally:
        pg_conn.execute("ALTER SYSTEM RESET wal_sender_timeout")
        pg_conn.execute("SELECT pg_reload_conf()")


def _assert_partitions_in_commit_order(records: list[Rec]) -> None:
    last: dict[int, int] = {}
    for rec in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert rec.commit_lsn >= last.get(rec.partition, 0), f"reordered at {rec}"
        last[rec.partition] = rec.commit_lsn


@pytest.mark.fault
@pytest.mark.usefixtures("short_wal_sender_timeout")
def test_broker_outage_loses_and_acknowledges_nothing(
    stack: Any,
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    slot_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    settings: dict[str, Any],
    bridge_process: Callable[[dict[str, Any]], BridgeProcess],
) -> None:
    settings["pipeline"]["max_in_flight_records"] = IN_FLIGHT
    reader = ledger_reader(pg_conn, kafka_bootstrap, registry_url, topic_prefix)
    bridge = bridge_process(settings)
    bridge.start()
    walsender = wait_slot_active(pg_conn, slot_name, bridge).active_pid
    monitor = SlotMonitor(pg_dsn, slot_name)
    writer = LedgerWriter(pg_dsn, rows_per_txn=3, rate=50)
    try:
        reader.read_until(lambda recs: len(recs) >= 300, 60, "300 records", watch=bridge)
        stack.stop_kafka()
        down_ms = time.time() * 1000
        during = len(writer.committed)
        deadline = time.monotonic() + OUTAGE_S
        while time.monotonic() < deadline:  # the outage itself; the bridge must stay up
            bridge.check()
            time.sleep(0.5)
        during = (len(writer.committed) - during) * 3
        up_ms = time.time() * 1000
        stack.start_kafka()
        goal = len(reader.records) + during + 300
        reader.read_until(lambda recs: len(recs) >= goal, 120, "records after the outage", bridge)
        committed = writer.stop()
        expected = {(c.txn, row) for c in committed for row in range(1, c.rows + 1)}
        reader.read_until(
            lambda recs: expected <= ledger_occurrences(recs).keys(), 120, "every row", bridge
        )
        bridge.terminate()
        assert bridge.wait(60) == 0, bridge.log()
        reader.read_to_end()
    finally:
        writer.stop()
        samples = monitor.stop()
        reader.close()

    assert during > 3 * IN_FLIGHT, "the outage did not fill the producer"
    outage = [s for s in samples if down_ms <= s.t_ms <= up_ms]
    assert all(s.state.active and s.state.active_pid == walsender for s in outage), (
        "the walsender went away during the outage (wal_sender_timeout?)"
    )
    settled = {s.state.confirmed_flush for s in outage if s.t_ms >= down_ms + SETTLE_MS}
    assert len(settled) == 1, f"confirmed_flush_lsn moved while Kafka was down: {settled}"

    seen = ledger_occurrences(reader.records)
    assert_complete(committed, seen)
    assert_acks_follow_appends(samples, completion_times(committed, seen))
    doubled = [key for key, recs in seen.items() if len(recs) > 1]
    assert not doubled, f"idempotent producer duplicated {len(doubled)} rows, e.g. {doubled[:3]}"
    _assert_partitions_in_commit_order(reader.records)
