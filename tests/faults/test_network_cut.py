"""The bridge's link to PostgreSQL cut mid-stream: a silent partition, and a reset.

The bridge reaches PostgreSQL through a relay (`proxy.Relay`). A partition may be
ridden out or end the bridge with a typed error; a reset must end it with one.
Either way it is restarted if it stopped, and nothing is lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeProcess, SlotMonitor, wait_slot_active
from delivery.ledger import LedgerWriter

from .checker import Fault, assert_clean, check
from .harness import acked, drain, ledger_topic, stop_bridge
from .proxy import Relay

PARTITION_S = 10.0


@pytest.fixture
def relay(stack: Any) -> Iterator[Relay]:
    link = Relay(stack.pg_host, stack.pg_port)
    yield link
    link.close()


@pytest.mark.fault
@pytest.mark.parametrize("cut", ["partition", "reset"])
def test_link_to_postgres_cut(
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    slot_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    settings: dict[str, Any],
    bridge_process: Callable[[dict[str, Any]], BridgeProcess],
    relay: Relay,
    cut: str,
) -> None:
    settings["source"].update(host="127.0.0.1", port=relay.port)
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
        t_ms = time.time() * 1000
        if cut == "partition":
            relay.blackhole()
            deadline = time.monotonic() + PARTITION_S
            while time.monotonic() < deadline:  # the partition itself
                time.sleep(0.5)
            relay.heal()
        else:
            relay.reset()
            code = bridge.wait(30)
            assert code not in (None, 0), f"exit code {code} after the reset:\n{bridge.log()}"
        fault = Fault(t_ms, acked(pg_dsn, slot_name), f"postgres link {cut}")
        if not bridge.alive():
            log = bridge.log()
            assert "Traceback" not in log, f"an untyped error escaped:\n{log}"
            print(f"\nbridge stopped after the {cut}:\n{log.strip().splitlines()[-1]}")
            bridge.start()
        rows = drain(pg_dsn, reader, writer, bridge)
        stop_bridge(bridge, reader)
    finally:
        writer.stop()
        monitor.stop()
        reader.close()
    summary = check(f"postgres link {cut}", rows, reader.records, [fault], exactly_once=False)
    assert_clean(summary)
