"""kill -9 of the bridge at many seeded points of one continuous stream, then restart.

Each kill point is a seeded number of further records visible in Kafka plus an
advance of the slot since the previous restart: deterministic in what has happened,
never a sleep. The writer keeps committing through every kill and restart.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeProcess, wait_slot_active, wait_slot_released

from .checker import Fault, assert_clean, check
from .harness import drain, ledger_stream, stop_bridge

SEED = 20261122


@pytest.mark.fault
@pytest.mark.parametrize(
    ("exactly_once", "kills"), [(False, 20), (True, 8)], ids=["at-least-once", "exactly-once"]
)
def test_kill9_at_seeded_points(
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    slot_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    settings: dict[str, Any],
    bridge_process: Callable[[dict[str, Any]], BridgeProcess],
    exactly_once: bool,
    kills: int,
) -> None:
    rng = random.Random(SEED + exactly_once)
    if exactly_once:
        settings["kafka"].update(exactly_once=True, transaction_max_records=50)
    bridge = bridge_process(settings)
    faults: list[Fault] = []
    link = (pg_dsn, slot_name, topic_prefix, kafka_bootstrap, registry_url, bridge)
    with ledger_stream(*link) as stream:
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
        rows = drain(pg_dsn, reader, stream.writer, bridge)
        stop_bridge(bridge, reader)
    mode = "exactly-once" if exactly_once else "at-least-once"
    assert_clean(check(f"bridge kill -9 ({mode})", rows, reader.records, faults, exactly_once))
