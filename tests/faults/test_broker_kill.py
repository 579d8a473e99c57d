"""kill -9 of the Kafka broker mid-stream, then restart: the bridge rides it out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeProcess, SlotMonitor, wait_for, wait_slot_active
from delivery.ledger import LedgerWriter

from .checker import Fault, assert_clean, check
from .harness import drain, ledger_topic, stop_bridge


@pytest.mark.fault
def test_broker_kill9_mid_stream(
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
    reader = ledger_topic(pg_conn, kafka_bootstrap, registry_url, topic_prefix)
    bridge = bridge_process(settings)
    bridge.start()
    floor = wait_slot_active(pg_conn, slot_name, bridge).confirmed_flush
    monitor = SlotMonitor(pg_dsn, slot_name)
    writer = LedgerWriter(pg_dsn, rows_per_txn=3, rate=100)
    try:
        reader.read_until(
            lambda recs: len(recs) >= 300 and monitor.flushed() > floor,
            60,
            "300 records and an acknowledgement",
            watch=bridge,
        )
        fault = Fault(time.time() * 1000, monitor.flushed(), "broker kill -9")
        stack.stop_kafka(graceful=False)
        goal = len(writer.committed) + 100  # commits while no broker runs
        wait_for(lambda: len(writer.committed) >= goal, 30, "writer progress")
        bridge.check()
        stack.start_kafka()
        rows = drain(pg_dsn, reader, writer, bridge)
        stop_bridge(bridge, reader)
    finally:
        writer.stop()
        monitor.stop()
        reader.close()
    assert_clean(check("broker kill -9", rows, reader.records, [fault], exactly_once=False))
