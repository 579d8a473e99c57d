"""Kafka down for 30 s in mid-stream while PostgreSQL keeps committing.

The bridge must neither lose nor acknowledge anything it could not deliver, keep
its walsender alive (keepalives answered and status updates sent while the
producer is blocked on its in-flight bound), and carry on once the broker is back.
wal_sender_timeout is lowered to 5 s for the test so that a bridge deaf to
PostgreSQL during the outage would be disconnected six times over.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from .helpers import BridgeFactory
from .kafka_io import Rec
from .ledger import (
    LedgerStreamFactory,
    assert_delivered,
    read_every_row,
    stop_bridge,
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
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
) -> None:
    settings["pipeline"]["max_in_flight_records"] = IN_FLIGHT
    bridge = bridge_process(settings)
    with ledger_stream(bridge, rate=50) as stream:
        reader, writer = stream.reader, stream.writer
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
        committed = read_every_row(stream, bridge)
        stop_bridge(bridge, reader)

    samples, walsender = stream.monitor.samples, stream.started.active_pid
    assert during > 3 * IN_FLIGHT, "the outage did not fill the producer"
    outage = [s for s in samples if down_ms <= s.t_ms <= up_ms]
    assert all(s.state.active and s.state.active_pid == walsender for s in outage), (
        "the walsender went away during the outage (wal_sender_timeout?)"
    )
    settled = {s.state.confirmed_flush for s in outage if s.t_ms >= down_ms + SETTLE_MS}
    assert len(settled) == 1, f"confirmed_flush_lsn moved while Kafka was down: {settled}"

    seen = assert_delivered(stream, committed)
    doubled = [key for key, recs in seen.items() if len(recs) > 1]
    assert not doubled, f"idempotent producer duplicated {len(doubled)} rows, e.g. {doubled[:3]}"
    _assert_partitions_in_commit_order(reader.records)
