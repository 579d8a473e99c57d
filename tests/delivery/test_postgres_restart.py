"""PostgreSQL restarted under the bridge: a clean, typed exit, then resume without loss.

The bridge does not reconnect by itself (the orchestrator restarts it); what it
owes the operator is one readable error line, not a traceback, and a restart
that resumes from the slot with nothing lost.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from waiting import wait_for

from .helpers import BridgeFactory, slot_state, wait_slot_active
from .ledger import (
    LedgerStreamFactory,
    assert_delivered,
    assert_resends_after,
    read_every_row,
    stop_bridge,
)


@pytest.mark.fault
@pytest.mark.parametrize("graceful", [True, False], ids=["fast-shutdown", "crash"])
def test_postgres_restart_mid_stream(
    stack: Any,
    pg_dsn: str,
    slot_name: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
    graceful: bool,
) -> None:
    bridge = bridge_process(settings)
    run_starts = [time.time() * 1000]
    with ledger_stream(bridge, reconnect=True) as stream:
        reader, writer = stream.reader, stream.writer
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
        committed = read_every_row(stream, bridge)
        stop_bridge(bridge, reader)
    seen = assert_delivered(stream, committed)
    assert_resends_after(seen, run_starts, [stopped])
