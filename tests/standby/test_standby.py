"""An active bridge and a hot standby on one slot: the standby takes over when the active is
killed or frozen, and a frozen active that resumes is fenced (ha.enabled, exactly-once).

The ledger writer commits throughout. At the end every committed row is in Kafka exactly
once for a read_committed consumer (what the old active sent and did not commit was aborted
by the new active's init_transactions, and anything it sent or committed after that would
be a duplicate here) and per partition in commit order.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeFactory, BridgeProcess, wait_slot_active
from delivery.ledger import LedgerStream, LedgerStreamFactory, stop_bridge
from faults.checker import Fault, assert_clean, check
from faults.harness import drain

from .pair import pair_settings, standbys, takeovers, wait_standing_by, wait_taking_over

pytestmark = pytest.mark.fault


def _more_records(stream: LedgerStream, bridge: BridgeProcess, count: int) -> None:
    """`count` more records in Kafka and the slot moved: the active streams."""
    reader, floor = stream.reader, stream.monitor.flushed()
    goal = len(reader.records) + count
    reader.read_until(
        lambda recs: len(recs) >= goal and stream.monitor.flushed() > floor,
        90,
        f"{count} more records and an acknowledgement",
        watch=bridge,
    )


def _no_traceback(bridge: BridgeProcess) -> None:
    log = bridge.log()
    assert "Traceback" not in log, f"an untyped error escaped:\n{log}"


def test_kill9_of_the_active_hands_over_and_back(
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
) -> None:
    paired = pair_settings(settings)
    active, standby = bridge_process(paired), bridge_process(paired)
    faults: list[Fault] = []
    with ledger_stream(active, rate=150) as stream:
        standby.start()
        wait_standing_by(standby, 0)
        for _ in range(2):  # there and back: the restarted one is the next standby
            _more_records(stream, active, 300)
            before, waiting = takeovers(standby), standbys(active)
            faults.append(Fault(time.time() * 1000, stream.monitor.flushed(), "kill -9 active"))
            active.kill9()
            wait_taking_over(standby, before)
            wait_slot_active(pg_conn, slot_name, standby)
            active.start()
            wait_standing_by(active, waiting)
            active, standby = standby, active
        _more_records(stream, active, 300)
        rows = drain(stream.dsn, stream.reader, stream.writer, active)
        stop_bridge(active, stream.reader)
        standby.terminate()
        assert standby.wait(30) == 0, standby.log()
    for bridge in (active, standby):
        _no_traceback(bridge)
    summary = check("standby: kill -9 of the active", rows, stream.reader.records, faults, True)
    assert_clean(summary)


def test_frozen_active_is_fenced_when_it_resumes(
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
) -> None:
    paired = pair_settings(settings)
    old, new = bridge_process(paired), bridge_process(paired)
    with ledger_stream(old, rate=200) as stream:
        new.start()
        wait_standing_by(new, 0)
        _more_records(stream, old, 300)
        fault = Fault(time.time() * 1000, stream.monitor.flushed(), "SIGSTOP of the active")
        old.freeze()  # mid-stream: records queued in its producer, a Kafka transaction open
        try:
            wait_taking_over(new, 0)
            wait_slot_active(pg_conn, slot_name, new)
            _more_records(stream, new, 300)  # the new active produced past the freeze
        finally:
            old.thaw()
        code = old.wait(60)
        log = old.log()
        assert code not in (None, 0), f"the resumed old active went on (exit {code}):\n{log}"
        assert "lost the lease" in log or "fenced" in log.lower(), log
        rows = drain(stream.dsn, stream.reader, stream.writer, new)
        stop_bridge(new, stream.reader)
    _no_traceback(old)
    _no_traceback(new)
    assert "ended walsender" in new.log(), new.log()
    summary = check("standby: frozen active resumed", rows, stream.reader.records, [fault], True)
    assert_clean(summary)
