"""kill -9 of the Kafka broker mid-stream, then restart: the bridge rides it out."""

from __future__ import annotations

import time
from typing import Any

import pytest
from delivery.helpers import BridgeFactory
from delivery.ledger import LedgerStreamFactory, stop_bridge, warm_up
from waiting import wait_for

from .checker import Fault, assert_clean, check
from .harness import drain


@pytest.mark.fault
def test_broker_kill9_mid_stream(
    stack: Any,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
) -> None:
    bridge = bridge_process(settings)
    with ledger_stream(bridge) as stream:
        warm_up(stream, bridge, 300)
        fault = Fault(time.time() * 1000, stream.monitor.flushed(), "broker kill -9")
        stack.stop_kafka(graceful=False)
        writer = stream.writer
        goal = len(writer.committed) + 100  # commits while no broker runs
        wait_for(lambda: len(writer.committed) >= goal, 30, "writer progress")
        bridge.check()
        stack.start_kafka()
        rows = drain(stream.dsn, stream.reader, writer, bridge)
        stop_bridge(bridge, stream.reader)
    records = stream.reader.records
    assert_clean(check("broker kill -9", rows, records, [fault], exactly_once=False))
