"""The active bridge cut off from PostgreSQL (a partition of its own link) while it can still
reach Kafka: the standby takes over and the old active, still producing what it had read,
is fenced; once the link is back it stops on its lost lease.

The active runs in a network namespace (tests/faults/netns.py) and reaches PostgreSQL and
Kafka over links of their own; the standby runs beside the test, in the root namespace,
which no cut touches. The servers are this module's stack, listening on those links.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from delivery.helpers import BridgeFactory, wait_slot_active
from delivery.ledger import LedgerStreamFactory, stop_bridge
from faults.checker import Fault, assert_clean, check
from faults.harness import drain
from faults.netns import Netns

from .pair import pair_settings, wait_standing_by, wait_taking_over
from .test_standby import _more_records, _no_traceback

pytestmark = pytest.mark.fault


@pytest.fixture(scope="module")
def stack(netns_stack: Any) -> Any:
    return netns_stack


@pytest.fixture(scope="module")
def kafka_bootstrap(stack: Any) -> str:
    return str(stack.kafka_bootstrap)


@pytest.fixture(scope="module")
def registry_url(stack: Any) -> str:
    return str(stack.registry_url)


def test_active_cut_off_from_postgres_is_replaced_and_fenced(
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
    bridge_netns: Netns,
) -> None:
    paired = pair_settings(settings)
    old = bridge_process(paired, bridge_netns.exec_prefix)
    new = bridge_process(paired)
    with ledger_stream(old, rate=200) as stream:
        new.start()
        wait_standing_by(new, 0)
        _more_records(stream, old, 300)
        fault = Fault(time.time() * 1000, stream.monitor.flushed(), "active cut off from PG")
        bridge_netns.cut("postgres")
        try:
            wait_taking_over(new, 0)
            wait_slot_active(pg_conn, slot_name, new)
            _more_records(stream, new, 300)
        finally:
            bridge_netns.restore("postgres")
        code = old.wait(90)
        log = old.log()
        assert code not in (None, 0), f"the old active went on after the partition:\n{log}"
        assert "lost the lease" in log or "fenced" in log.lower(), log
        rows = drain(stream.dsn, stream.reader, stream.writer, new)
        stop_bridge(new, stream.reader)
    _no_traceback(old)
    _no_traceback(new)
    summary = check("standby: active cut off", rows, stream.reader.records, [fault], True)
    assert_clean(summary)
