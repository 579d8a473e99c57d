"""Fast and immediate restarts of PostgreSQL mid-stream; the bridge is restarted after each.

After an immediate shutdown PostgreSQL resumes the slot from its last checkpointed
state, which may be older than what the walsender had confirmed in memory: the
fault's acknowledged LSN is therefore the slot's position as PostgreSQL came back.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
from delivery.helpers import BridgeFactory
from delivery.ledger import LedgerStreamFactory, stop_bridge, warm_up
from waiting import wait_for

from .checker import Fault, assert_clean, check
from .harness import acked, drain


def _restart(stack: Any, mode: str) -> None:
    if mode == "fast":
        stack.restart_postgres(graceful=True)
        return
    pid_file = stack.postgres.data_dir / "postmaster.pid"
    os.kill(int(pid_file.read_text().split()[0]), signal.SIGQUIT)  # pg_ctl -m immediate
    wait_for(lambda: not stack.postgres.running(), 30, "the postmaster to exit")
    stack.start_postgres()


@pytest.mark.fault
@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgres_restart_mid_stream(
    stack: Any,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
    mode: str,
) -> None:
    bridge = bridge_process(settings)
    with ledger_stream(bridge, reconnect=True) as stream:
        warm_up(stream, bridge, 300)
        writer = stream.writer
        t_ms, before = time.time() * 1000, stream.monitor.flushed()
        _restart(stack, mode)
        code = bridge.wait(30)
        assert code == 1, f"exit code {code} after PostgreSQL went away:\n{bridge.log()}"
        assert "Traceback" not in bridge.log(), bridge.log()
        fault = Fault(t_ms, min(before, acked(stream.dsn, stream.slot)), f"postgres {mode} restart")
        bridge.start()
        goal = len(writer.committed) + 100
        wait_for(lambda: len(writer.committed) >= goal, 60, "writes after the restart")
        rows = drain(stream.dsn, stream.reader, writer, bridge)
        stop_bridge(bridge, stream.reader)
    records = stream.reader.records
    summary = check(f"postgres {mode} restart", rows, records, [fault], exactly_once=False)
    assert_clean(summary)
