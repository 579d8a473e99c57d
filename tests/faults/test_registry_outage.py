"""The schema registry down for 30 s while ALTER TABLE ADD COLUMN needs a new registration.

The bridge may wait for the registry or stop with a clear, typed error; if it
stops it is restarted once the registry is back. Either way nothing is lost.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeFactory
from delivery.ledger import LedgerStreamFactory, stop_bridge, warm_up

from .checker import Fault, assert_clean, check
from .harness import drain

OUTAGE_S = 30.0


@pytest.mark.fault
def test_registry_down_during_schema_change(
    stack: Any,
    pg_conn: psycopg.Connection[Any],
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
) -> None:
    bridge = bridge_process(settings)
    with ledger_stream(bridge, rate=50) as stream:
        warm_up(stream, bridge, 150)
        monitor = stream.monitor
        fault = Fault(time.time() * 1000, monitor.flushed(), "registry down 30 s")
        stack.stop_registry()
        pg_conn.execute("ALTER TABLE ledger ADD COLUMN note text NOT NULL DEFAULT 'added'")
        deadline = time.monotonic() + OUTAGE_S
        while time.monotonic() < deadline:  # the outage itself, whatever the bridge does
            time.sleep(0.5)
        acked_while_down = monitor.flushed()
        stack.start_registry()
        if not bridge.alive():
            log = bridge.log()
            assert "Traceback" not in log, f"an untyped error escaped:\n{log}"
            assert "registry" in log.lower(), f"the error does not name the registry:\n{log}"
            print(f"\nbridge stopped during the registry outage:\n{log.splitlines()[-1]}")
            bridge.start()
        rows = drain(stream.dsn, stream.reader, stream.writer, bridge)
        stop_bridge(bridge, stream.reader)
    reader = stream.reader
    assert acked_while_down >= fault.acked
    added = [r for r in reader.records if r.value and r.value["after"].get("note") == "added"]
    assert added, "no record carries the added column"
    assert_clean(check("registry down 30 s", rows, reader.records, [fault], exactly_once=False))
