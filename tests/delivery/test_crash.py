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
from collections.abc import Callable
from typing import Any

import psycopg
from waiting import wait_for

from bridge.lsn import LSN

from .helpers import (
    BridgeProcess,
    SlotMonitor,
    wait_slot_active,
    wait_slot_released,
)
from .kafka_io import TopicReader, assert_acks_follow_appends, create_topics
from .ledger import (
    LEDGER_DDL,
    LedgerWriter,
    assert_complete,
    assert_resends_after,
    completion_times,
    ledger_occurrences,
)

KILLS = 3
PER_RUN = 900  # records a run must add to Kafka (and an acknowledgement) before its kill


def test_kill9_mid_stream_loses_nothing(
    pg_conn: psycopg.Connection[Any],
    pg_dsn: str,
    slot_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    settings: dict[str, Any],
    bridge_process: Callable[[dict[str, Any]], BridgeProcess],
) -> None:
    pg_conn.execute(LEDGER_DDL)
    topics = create_topics(kafka_bootstrap, [f"{topic_prefix}.public.ledger"])
    reader = TopicReader(kafka_bootstrap, registry_url, topics)
    bridge = bridge_process(settings)
    run_starts = [time.time() * 1000]  # run r appended records at or after run_starts[r]
    bridge.start()
    started = wait_slot_active(pg_conn, slot_name, bridge).confirmed_flush
    monitor = SlotMonitor(pg_dsn, slot_name)
    writer = LedgerWriter(pg_dsn, rows_per_txn=3, rate=150)
    killed_at: list[LSN] = []  # confirmed_flush_lsn once each killed walsender was gone
    try:
        for _ in range(KILLS):
            # Deterministic kill point: this run added PER_RUN records to Kafka and
            # moved the slot, so the kill lands between acknowledged and in-flight work.
            floor = killed_at[-1] if killed_at else started
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

    seen = ledger_occurrences(reader.records)
    assert_complete(committed, seen)
    assert_acks_follow_appends(samples, completion_times(committed, seen))
    assert all(f > 0 for f in killed_at), killed_at
    assert_resends_after(seen, run_starts, killed_at)
