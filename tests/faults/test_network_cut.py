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

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from delivery.helpers import BridgeFactory
from delivery.kafka_io import Rec, assert_acks_follow_appends, create_topics
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


# A producer killed (kill -9) while its requests for the broker sit in the kernel (the link
# to Kafka cut), then a successor that writes newer versions of the same keys before the
# link comes back. UNFIXED=1 in the environment turns the fix off (to see this test fail).
_DYING_PRODUCER = r"""
import os, sys
from bridge.kafka.acks import AckTracker
from bridge.kafka.producer import Producer
from bridge.kafka.sockets import BrokerSockets
from bridge.record import KafkaRecord
bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
if os.environ.get("UNFIXED"):
    BrokerSockets.arm = lambda self: 0
reports = []
config = {"bootstrap.servers": bootstrap, "statistics.interval.ms": 100, "stats_cb": reports.append}
producer = Producer(config, AckTracker())
producer.produce_untracked(KafkaRecord(topic, b"first", b"first"))
assert producer.flush(60)
seen = len(reports)
while len(reports) < seen + 2:  # a statistics report since the connections are up: armed
    producer.poll(0.05)
print("connected", flush=True)
sys.stdin.readline()  # the link is cut now
for i in range(count):
    producer.produce_untracked(KafkaRecord(topic, f"k{i}".encode(), b"old"))
while True:  # until killed
    producer.poll(0.1)
"""


def _broker_connections(ns: Netns, host: str) -> list[tuple[str, int]]:
    """(state, bytes unsent or unacknowledged) of the namespace's TCP connections to `host`."""
    listed = subprocess.run(
        ["ss", "-N", ns.name, "-H", "-t", "-n", "-a", "dst", host],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [(f[0], int(f[2])) for f in (line.split() for line in listed) if len(f) > 2]


def test_requests_in_the_kernel_at_kill_do_not_land_after_a_successor(
    bridge_netns: Netns, kafka_bootstrap: str
) -> None:
    """A producer's unsent requests must die with it (bridge/kafka/sockets.py): otherwise
    the kernel retransmits them once the link is back and Kafka appends them after the
    records a successor has written meanwhile: an at-least-once resend's stale copy of a
    key lands after its newer version and a consumer keeping state by key keeps the stale
    one (the nemesis soak's rebuilt-state mismatches)."""
    keys = 100
    topic = f"unsent{time.time_ns()}"
    create_topics(kafka_bootstrap, [topic], partitions=1)
    host = kafka_bootstrap.rsplit(":", 1)[0]
    script = [sys.executable, "-c", _DYING_PRODUCER, kafka_bootstrap, topic, str(keys)]
    old = subprocess.Popen(
        [*bridge_netns.exec_prefix, *script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert old.stdin is not None and old.stdout is not None
        assert old.stdout.readline().strip() == "connected"
        bridge_netns.cut("kafka")
        try:
            old.stdin.write("go\n")
            old.stdin.flush()
            wait_for(
                lambda: any(unsent for _, unsent in _broker_connections(bridge_netns, host)),
                30,
                "the old producer's requests to be in its kernel send queue",
            )
            os.killpg(old.pid, signal.SIGKILL)
            old.wait(30)
            # The successor writes from the root namespace, which reaches the broker while
            # the link is down: its records are appended before anything the link carries.
            successor = Producer({"bootstrap.servers": kafka_bootstrap, "acks": "all"})
            for i in range(keys):
                successor.produce(topic, b"new", f"k{i}".encode())
            assert successor.flush(30) == 0
        finally:
            bridge_netns.restore("kafka")
    finally:
        if old.poll() is None:
            os.killpg(old.pid, signal.SIGKILL)
            old.wait(30)
    # What the kernel still held for the broker is through once no connection is left
    # with bytes unacknowledged (an orphaned socket retransmits until then).
    wait_for(
        lambda: not any(unsent for _, unsent in _broker_connections(bridge_netns, host)),
        120,
        "the namespace's broker connections to have nothing unsent",
    )
    wait_for(
        lambda: all(state == "TIME-WAIT" for state, _ in _broker_connections(bridge_netns, host)),
        120,
        "the namespace's broker connections to end",
    )
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": topic, "enable.auto.commit": False}
    )
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        records: list[tuple[bytes, bytes]] = []

        def read() -> bool:
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    records.append((m.key() or b"", m.value() or b""))
            return len(records) >= end

        wait_for(read, 60, "the topic to its end")
    finally:
        consumer.close()
    last = {key: value for key, value in records}
    assert sum(value == b"new" for _, value in records) == keys
    stale = sorted(k.decode() for k, v in last.items() if k != b"first" and v != b"new")
    old_count = sum(value == b"old" for _, value in records)
    assert not stale, (
        f"{len(stale)} of {keys} keys end with the killed producer's older version "
        f"({old_count} of its records appended after its successor's): {stale[:5]}"
    )
