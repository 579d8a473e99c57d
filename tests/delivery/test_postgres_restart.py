"""PostgreSQL restarted under the bridge: a clean, typed exit, then resume without loss.

The bridge does not reconnect by itself (the orchestrator restarts it); what it
owes the operator is one readable error line, not a traceback, and a restart
that resumes from the slot with nothing lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from waiting import wait_for

from .helpers import BridgeProcess, SlotMonitor, slot_state, wait_slot_active
from .kafka_io import assert_acks_follow_appends
from .ledger import (
    LedgerWriter,
    assert_complete,
    assert_resends_after,
    completion_times,
    ledger_occurrences,
    ledger_reader,
)


@pytest.mark.fault
@pytest.mark.parametrize("graceful", [True, False], ids=["fast-shutdown", "crash"])
def test_postgres_restart_mid_stream(
    stack: Any,
    pg_dsn: str,
    slot_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    settings: dict[str, Any],
    bridge_process: Callable[[dict[str, Any]], BridgeProcess],
    graceful: bool,
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        reader = ledger_reader(conn, kafka_bootstrap, registry_url, topic_prefix)
        bridge = bridge_process(settings)
        run_starts = [time.time() * 1000]
        bridge.start()
        wait_slot_active(conn, slot_name, bridge)
    monitor = SlotMonitor(pg_dsn, slot_name)
    writer = LedgerWriter(pg_dsn, rows_per_txn=3, rate=100, reconnect=True)
    try:
        reader.read_until(lambda recs: len(recs) >= 600, 60, "600 records", watch=bridge)
        stack.restart_postgres(graceful=graceful)
        code = bridge.wait(30)
        assert code == 1, f"exit code {code} after PostgreSQL went away:\n{bridge.log()}"
        log = bridge.log()
        assert "replication connection lost" in log, log
        assert "Traceback" not in log, f"an untyped error escaped:\n{log}"
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            state = slot_state(conn, slot_name)
            assert state is not None
            stopped = state.confirmed_flush
            run_starts.append(time.time() * 1000)
            bridge.start()
            wait_slot_active(conn, slot_name, bridge)
        goal = len(writer.committed) + 100
        wait_for(lambda: len(writer.committed) >= goal, 60, "writes after the restart")
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
    assert_resends_after(seen, run_starts, [stopped])
    assert_acks_follow_appends(samples, completion_times(committed, seen))
