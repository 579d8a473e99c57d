"""kill -9 of the bridge at many seeded points of one continuous stream, then restart.

Each kill point is a seeded number of further records visible in Kafka plus an
advance of the slot since the previous restart: deterministic in what has happened,
never a sleep. The writer keeps committing through every kill and restart.
"""

from __future__ import annotations

import random
import time
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeFactory, wait_slot_active, wait_slot_released
from delivery.ledger import LedgerStreamFactory, stop_bridge

from .checker import Fault, assert_clean, check
from .harness import drain

SEED = 20261122


@pytest.mark.fault
@pytest.mark.parametrize(
    ("exactly_once", "kills"), [(False, 20), (True, 8)], ids=["at-least-once", "exactly-once"]
)
def test_kill9_at_seeded_points(
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
    exactly_once: bool,
    kills: int,
) -> None:
    rng = random.Random(SEED + exactly_once)
    if exactly_once:
        settings["kafka"].update(exactly_once=True, transaction_max_records=50)
    bridge = bridge_process(settings)
    faults: list[Fault] = []
    with ledger_stream(bridge) as stream:
        reader, monitor, floor = stream.reader, stream.monitor, stream.floor
        for _ in range(kills):
            goal = len(reader.records) + rng.randrange(30, 300)
            start_floor = floor
            reader.read_until(
                lambda recs: len(recs) >= goal and monitor.flushed() > start_floor,  # noqa: B023
                60,
                "records and an acknowledgement before the kill",
                watch=bridge,
            )
            t_ms = time.time() * 1000
            bridge.kill9()
            floor = wait_slot_released(pg_conn, slot_name).confirmed_flush
            faults.append(Fault(t_ms, floor, "bridge kill -9"))
            bridge.start()
            wait_slot_active(pg_conn, slot_name, bridge)
        rows = drain(stream.dsn, reader, stream.writer, bridge)
        stop_bridge(bridge, reader)
    mode = "exactly-once" if exactly_once else "at-least-once"
    assert_clean(check(f"bridge kill -9 ({mode})", rows, reader.records, faults, exactly_once))
