"""Two bridge processes on one slot (`ha.enabled`, exactly-once): the active one and its standby.

Who holds the lease is read from each bridge's own log: a standby logs "standing by" when it
starts waiting and "taking over" when it got the lease (bridge/standby.py).
"""

from __future__ import annotations

import copy
import subprocess
import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from delivery.helpers import BridgeProcess
from faults.netns import Netns
from waiting import checked, wait_for

from bridge.slotstate import Record

LEASE_TIMEOUT_S = 3.0  # short, so a frozen or cut-off active loses its lease quickly


def pair_settings(
    settings: dict[str, Any], lease_timeout_s: float = LEASE_TIMEOUT_S
) -> dict[str, Any]:
    """The delivery suite's settings for a bridge of a standby pair."""
    paired = copy.deepcopy(settings)
    paired["kafka"].update(exactly_once=True, transaction_max_records=50)
    paired["ha"] = {"enabled": True, "lease_timeout_s": lease_timeout_s}
    return paired


def takeovers(bridge: BridgeProcess) -> int:
    """How many times this bridge (over all its runs) got the lease."""
    return bridge.log().count("taking over")


def standbys(bridge: BridgeProcess) -> int:
    return bridge.log().count("standing by for slot")


def wait_standing_by(bridge: BridgeProcess, before: int, timeout: float = 60.0) -> None:
    """Wait until `bridge` (started) stands by for the `before + 1`-th time."""
    wait_for(
        checked(bridge.check, lambda: standbys(bridge) > before),
        timeout,
        "the bridge to stand by",
        detail=bridge.log,
    )


def wait_taking_over(bridge: BridgeProcess, before: int, timeout: float = 60.0) -> None:
    """Wait until `bridge` got the lease once more than `before` times."""
    wait_for(
        checked(bridge.check, lambda: takeovers(bridge) > before),
        timeout,
        "the standby to take over",
        detail=lambda: bridge.log()[-2000:],
    )


def state_topic_of(paired: dict[str, Any]) -> str:
    kafka = paired["kafka"]
    return str(kafka.get("state_topic") or f"{kafka['topic_prefix']}.bridge_state")


def slot_records(bootstrap: str, topic: str, slot: str, timeout: float = 60.0) -> list[Record]:
    """Every record of `slot`'s position in the state topic, in log order, as a
    read_committed consumer sees them (what a starting bridge would believe)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"standby-state-{time.time_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout, cached=False)
        consumer.assign([TopicPartition(topic, 0, 0)])
        found: list[Record] = []

        def at_end() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None and msg.key() == slot.encode():
                value = msg.value()
                assert value is not None, "the slot's record was deleted"
                found.append(Record.decode(value))
            return bool(consumer.position([TopicPartition(topic, 0)])[0].offset >= high)

        wait_for(at_end, timeout, f"the end of {topic}")
        return found
    finally:
        consumer.close()


def unacked_bytes(ns: Netns, link: str) -> int:
    """Bytes the namespace's sockets sent over `link` that its server has not acknowledged
    (Send-Q, summed): what the kernel still retransmits, frozen process or not."""
    out = subprocess.run(
        [*ns.exec_prefix, "ss", "-tnH", "dst", ns.links[link].server],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sum(int(line.split()[2]) for line in out.splitlines() if line.strip())
