"""kill -9 of the Kafka broker mid-stream, then restart: the bridge rides it out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from delivery.helpers import BridgeProcess
from waiting import wait_for

from .checker import Fault, assert_clean, check
from .harness import drain, ledger_stream, stop_bridge, warm_up


@pytest.mark.fault
def test_broker_kill9_mid_stream(
    stack: Any,
    pg_dsn: str,
    slot_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    settings: dict[str, Any],
    bridge_process: Callable[[dict[str, Any]], BridgeProcess],
) -> None:
    bridge = bridge_process(settings)
    link = (pg_dsn, slot_name, topic_prefix, kafka_bootstrap, registry_url, bridge)
    with ledger_stream(*link) as stream:
        warm_up(stream, bridge, 300)
        fault = Fault(time.time() * 1000, stream.monitor.flushed(), "broker kill -9")
        stack.stop_kafka(graceful=False)
        writer = stream.writer
        goal = len(writer.committed) + 100  # commits while no broker runs
        wait_for(lambda: len(writer.committed) >= goal, 30, "writer progress")
        bridge.check()
        stack.start_kafka()
        rows = drain(pg_dsn, stream.reader, writer, bridge)
        stop_bridge(bridge, stream.reader)
    records = stream.reader.records
    assert_clean(check("broker kill -9", rows, records, [fault], exactly_once=False))
