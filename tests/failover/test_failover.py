"""Promote the standby mid-workload: with a failover slot nothing committed is lost; without
one the bridge refuses to go on from a new slot.

The old primary never comes back (no split brain). The writer follows the primary through
a multi-host DSN (target_session_attrs=read-write), so it keeps committing to the promoted
server; the bridge exits when its connection drops and is started again, as a supervisor
would, with every server in source.host.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeProcess, slot_state, wait_slot_active
from delivery.ledger import open_ledger_stream, stop_bridge, warm_up
from faults.checker import Fault, assert_clean, check
from faults.harness import acked, drain
from waiting import wait_for

from bridge.check import run_checks
from bridge.config import Config
from bridge.lsn import LSN

from .pair import Pair, pair_settings

pytestmark = [pytest.mark.failover, pytest.mark.live]


def _database(pair: Pair, name: str) -> None:
    pair.primary.create_database(name)  # replicated to the standby


def _failover_check(settings: dict[str, Any]) -> str:
    """`bridge check`'s failover line (it must not FAIL: a warning is not a failure)."""
    (result,) = [r for r in run_checks(Config(**settings)) if r.name == "failover slot"]
    assert result.ok, result
    return result.detail


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_failover_slot_survives_promotion(
    stack: Any,
    pair: Pair,
    slot_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    tmp_path: Path,
    bridge_process: Callable[[dict[str, Any]], BridgeProcess],
    mode: str,
) -> None:
    _database(pair, "ledger")
    settings = pair_settings(
        stack, pair, "ledger", slot_name, topic_prefix, tmp_path / "spill", failover_slot=True
    )
    bridge = bridge_process(settings)
    dsn = pair.multi_dsn("ledger")
    link = (dsn, slot_name, topic_prefix, kafka_bootstrap, registry_url, bridge)
    with open_ledger_stream(*link, reconnect=True) as stream:
        warm_up(stream, bridge, 300)
        # the standby's copy is synchronised and has followed some acknowledgement
        wait_for(
            lambda: (
                (copy := pair.synced_slot(slot_name)) is not None
                and copy[0]
                and LSN.parse(copy[1]) > stream.floor
            ),
            120,
            "the standby's synchronised copy of the slot",
            every=0.2,
        )
        detail = _failover_check(settings)
        assert "WARNING" not in detail and "synced at" in detail, detail
        t_ms, before = time.time() * 1000, stream.monitor.flushed()
        pair.stop_primary(mode)
        code = bridge.wait(60)
        assert code == 1, f"exit code {code} after the primary went away:\n{bridge.log()}"
        pair.promote()
        standby_dsn = pair.standby.dsn("ledger")
        # what the promoted server will resend from: at or before what Kafka has
        fault = Fault(t_ms, min(before, acked(standby_dsn, slot_name)), f"failover ({mode})")
        bridge.start()
        with psycopg.connect(standby_dsn, autocommit=True) as conn:
            wait_slot_active(conn, slot_name, bridge)
        writer = stream.writer
        goal = len(writer.committed) + 100
        wait_for(lambda: len(writer.committed) >= goal, 60, "writes on the new primary")
        rows = drain(dsn, stream.reader, writer, bridge)
        stop_bridge(bridge, stream.reader)
    assert "Traceback" not in bridge.log(), bridge.log()
    summary = check(
        f"failover slot, primary -m {mode}",
        rows,
        stream.reader.records,
        [fault],
        exactly_once=False,
    )
    assert_clean(summary)


def test_without_failover_slot_the_bridge_stops_loudly(
    stack: Any,
    pair: Pair,
    slot_name: str,
    topic_prefix: str,
    kafka_bootstrap: str,
    registry_url: str,
    tmp_path: Path,
    bridge_process: Callable[[dict[str, Any]], BridgeProcess],
) -> None:
    _database(pair, "ledger")
    settings = pair_settings(stack, pair, "ledger", slot_name, topic_prefix, tmp_path / "spill")
    bridge = bridge_process(settings)
    dsn = pair.multi_dsn("ledger")
    link = (dsn, slot_name, topic_prefix, kafka_bootstrap, registry_url, bridge)
    with open_ledger_stream(*link, reconnect=True) as stream:
        warm_up(stream, bridge, 300)
        detail = _failover_check(settings)
        assert "WARNING: source.failover_slot is false" in detail, detail
        pair.stop_primary("fast")
        assert bridge.wait(60) == 1, bridge.log()
        pair.promote()
        bridge.start()
        code = bridge.wait(120)
    log = bridge.log().split("--- run 1 ---")[1]
    assert code == 1, log
    assert "Traceback" not in log, log
    assert "does not exist on this server" in log, log
    assert "source.failover_slot" in log and "on_slot_lost" in log, log
    with psycopg.connect(pair.standby.dsn("ledger"), autocommit=True) as conn:
        assert slot_state(conn, slot_name) is None, "a new slot was created on the new primary"
