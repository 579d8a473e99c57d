"""kill -9 of the bridge in mid-stream: at-least-once, duplicates only past the acked LSN.

The writer keeps committing while the bridge dies and restarts, three times, each
kill once the run added a fixed number of records to Kafka and moved the slot.
After the last restart every committed row must be in Kafka; a row may appear
twice only if its transaction committed at or after the confirmed_flush_lsn the
slot held when the process died (PostgreSQL skips transactions whose commit
record starts below it, so anything below was delivered before, or is lost).
Throughout, no acknowledgement may precede the broker's append of what it covers.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from waiting import wait_for

from bridge.lsn import LSN

from .helpers import BridgeFactory, wait_slot_active, wait_slot_released
from .ledger import (
    LedgerStreamFactory,
    assert_delivered,
    assert_resends_after,
    read_every_row,
    stop_bridge,
)

KILLS = 3
PER_RUN = 900  # records a run must add to Kafka (and an acknowledgement) before its kill


def test_kill9_mid_stream_loses_nothing(
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
) -> None:
    bridge = bridge_process(settings)
    run_starts = [time.time() * 1000]  # run r appended records at or after run_starts[r]
    killed_at: list[LSN] = []  # confirmed_flush_lsn once each killed walsender was gone
    with ledger_stream(bridge, rate=150) as stream:
        reader, monitor, writer = stream.reader, stream.monitor, stream.writer
        for _ in range(KILLS):
            # Deterministic kill point: this run added PER_RUN records to Kafka and
            # moved the slot, so the kill lands between acknowledged and in-flight work.
            floor = killed_at[-1] if killed_at else stream.floor
            goal = len(reader.records) + PER_RUN
            reader.read_until(
                lambda recs: len(recs) >= goal and monitor.flushed() > floor,  # noqa: B023
                60,
                f"{PER_RUN} more records and an acknowledgement",
                watch=bridge,
            )
            bridge.kill9()
            killed_at.append(wait_slot_released(pg_conn, slot_name).confirmed_flush)
            target = len(writer.committed) + 100  # commits while no bridge runs
            wait_for(lambda: len(writer.committed) >= target, 30, "writer progress")  # noqa: B023
            run_starts.append(time.time() * 1000)
            bridge.start()
            wait_slot_active(pg_conn, slot_name, bridge)
        goal = len(reader.records) + PER_RUN
        reader.read_until(lambda recs: len(recs) >= goal, 60, "records of the last run", bridge)
        committed = read_every_row(stream, bridge)
        stop_bridge(bridge, reader)

    seen = assert_delivered(stream, committed)
    assert all(f > 0 for f in killed_at), killed_at
    assert_resends_after(seen, run_starts, killed_at)
