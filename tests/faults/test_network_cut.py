"""The bridge's link to PostgreSQL, or to Kafka and the registry, cut mid-stream.

The bridge runs in a network namespace and reaches each server over a veth link of its
own (`netns.Netns`), so a cut is the kernel's: a partition drops every packet on one link
both ways, a reset aborts every connection on it with a RST. The servers are a stack of
this module's own listening on those links (`netns_stack`); the ledger writer, the slot
monitor and the checker work from the root namespace, which no cut touches.

A partition may be ridden out or end the bridge with a typed error; a reset of the
PostgreSQL link must end it with one. If it stopped it is restarted. Either way nothing is
lost, the slot never acknowledges a transaction before Kafka has all of it, and nothing
crossed a link while it was down.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import pytest
from delivery.helpers import BridgeFactory
from delivery.kafka_io import Rec, assert_acks_follow_appends
from delivery.ledger import (
    LedgerStreamFactory,
    completion_times,
    ledger_occurrences,
    stop_bridge,
    warm_up,
)
from waiting import wait_for

from .checker import Fault, assert_clean, check
from .harness import acked, drain
from .netns import Netns

# The partition lasts while PostgreSQL commits this many transactions (100/s): on the
# Kafka link longer than the bridge's request timeout (10 s), so requests time out.
PARTITION_TXNS = {"postgres": 1000, "kafka": 1500}
APPEND_GRACE_MS = 1000  # bytes the broker had before a cut are appended within this


@pytest.fixture(scope="module")
def stack(netns_stack: Any) -> Any:
    """Every stack fixture of this module (pg_db, settings, ...) on the stack behind the links."""
    return netns_stack


@pytest.fixture(scope="module")
def kafka_bootstrap(stack: Any) -> str:
    return str(stack.kafka_bootstrap)


@pytest.fixture(scope="module")
def registry_url(stack: Any) -> str:
    return str(stack.registry_url)


class Down(NamedTuple):
    link: str
    cut_ms: float  # just before the link went down
    up_ms: float  # just before it came up
    txn: int  # the last transaction that may have committed before the link was down


def _crossed(down: Down, records: Sequence[Rec]) -> int:
    """Records appended while the link was down that could only have crossed it.

    Over the PostgreSQL link: a transaction committed after the cut. Over the Kafka
    link: any record appended after the grace period that follows the cut.
    """
    if down.link == "postgres":
        late = [r for r in records if r.value and (r.value["after"] or {}).get("txn", 0) > down.txn]
    else:
        late = [r for r in records if r.append_ms > down.cut_ms + APPEND_GRACE_MS]
    return sum(r.append_ms < down.up_ms for r in late)


@pytest.fixture
def cut_mid_stream(
    settings: dict[str, Any],
    bridge_process: BridgeFactory,
    ledger_stream: LedgerStreamFactory,
    bridge_netns: Netns,
) -> Callable[[str, str], None]:
    def run(link: str, cut: str) -> None:
        bridge = bridge_process(settings, bridge_netns.exec_prefix)
        with ledger_stream(bridge) as stream:
            reader, writer = stream.reader, stream.writer
            warm_up(stream, bridge, 300)
            t_ms = time.time() * 1000
            down: Down | None = None  # set for a partition
            if cut == "partition":
                bridge_netns.cut(link)
                goal = len(writer.committed) + PARTITION_TXNS[link]
                try:  # the partition itself, whatever the bridge does meanwhile
                    wait_for(lambda: len(writer.committed) >= goal, 120, "writes while cut")
                    down = Down(link, t_ms, time.time() * 1000, goal - PARTITION_TXNS[link] + 1)
                finally:
                    bridge_netns.restore(link)
            else:
                assert bridge_netns.reset(link) > 0, f"no connection on the {link} link to reset"
                if link == "postgres":
                    code = bridge.wait(30)
                    assert code not in (None, 0), (
                        f"exit code {code} after the reset:\n{bridge.log()}"
                    )
            fault = Fault(t_ms, acked(stream.dsn, stream.slot), f"{link} link {cut}")
            if not bridge.alive():
                log = bridge.log()
                assert "Traceback" not in log, f"an untyped error escaped:\n{log}"
                print(f"\nbridge stopped after the {cut}:\n{log.strip().splitlines()[-1]}")
                bridge.start()
            rows = drain(stream.dsn, reader, writer, bridge)
            stop_bridge(bridge, reader)
        samples = stream.monitor.samples
        summary = check(fault.what, rows, reader.records, [fault], exactly_once=False)
        assert_clean(summary)
        seen = ledger_occurrences(reader.records)
        assert_acks_follow_appends(samples, completion_times(writer.committed, seen))
        if down is not None:
            crossed = _crossed(down, reader.records)
            assert crossed == 0, f"{crossed} records crossed the {link} link while it was down"

    return run


@pytest.mark.fault
@pytest.mark.parametrize("cut", ["partition", "reset"])
def test_link_to_postgres_cut(cut_mid_stream: Callable[[str, str], None], cut: str) -> None:
    cut_mid_stream("postgres", cut)


@pytest.mark.fault
@pytest.mark.parametrize("cut", ["partition", "reset"])
def test_link_to_kafka_cut(cut_mid_stream: Callable[[str, str], None], cut: str) -> None:
    cut_mid_stream("kafka", cut)
