"""The standby pair's pieces without servers: the lease's key and clock, the positions it
guards, and what /readyz and /metrics say of a standby and an active bridge."""

from __future__ import annotations

import pytest
from prometheus_client.exposition import generate_latest

from bridge.config import Config, SourceConfig
from bridge.errors import BridgeError
from bridge.metrics import Metrics, collector_registry
from bridge.standby import Lease, LeasedPositions, LeaseLostError, lease_key


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    def __init__(self) -> None:
        self.admitted: list[int] = []
        self.settled = 0

    def admit(self, lsn: int, quiet: bool = False) -> int:
        self.admitted.append(lsn)
        return lsn

    def settle(self, timeout: float) -> None:
        self.settled += 1

    def lost_slot(self) -> BridgeError | None:
        return None


def test_lease_key_is_a_stable_bigint_per_slot() -> None:
    assert lease_key("bridge") == lease_key("bridge")
    assert lease_key("bridge") != lease_key("bridge2")
    for slot in ("a", "bridge", "x" * 63):
        assert -(2**63) <= lease_key(slot) < 2**63


def test_lease_is_valid_only_within_the_timeout_of_the_last_renewal_sent() -> None:
    clock = Clock()
    lease = Lease(SourceConfig(slot_name="s"), timeout_s=5.0, clock=clock)
    assert not lease.valid()  # never held
    lease._renewed = clock.now
    clock.now += 4.9
    assert lease.valid()
    clock.now += 0.2
    assert not lease.valid()
    with pytest.raises(LeaseLostError, match="lost the lease of slot 's'"):
        lease.check()


def test_leased_positions_stop_admitting_once_the_lease_may_have_ended() -> None:
    clock = Clock()
    lease = Lease(SourceConfig(slot_name="s"), timeout_s=5.0, clock=clock)
    lease._renewed = clock.now
    inner = Recorder()
    positions = LeasedPositions(inner, lease)
    assert positions.admit(10) == 10
    positions.settle(1.0)
    clock.now += 6
    with pytest.raises(LeaseLostError):
        positions.admit(20)
    positions.settle(1.0)  # a graceful stop without the lease records nothing more
    assert inner.admitted == [10] and inner.settled == 1


def test_standby_needs_exactly_once() -> None:
    with pytest.raises(ValueError, match=r"ha\.enabled needs kafka\.exactly_once"):
        Config(ha={"enabled": True})
    assert Config(ha={"enabled": True}, kafka={"exactly_once": True}).ha.lease_timeout_s == 5.0


def test_readiness_and_metrics_tell_standby_from_active() -> None:
    m = Metrics()
    m.tick()
    for dependency in ("postgres", "kafka", "registry"):
        m.set_connected(dependency, True)
    assert m.ready() == (True, "ok")  # a single bridge says nothing of a role
    assert "\nbridge_active " not in generate_latest(collector_registry(m)).decode()
    m.role = "standby"
    assert m.ready() == (True, "standby: ok, waiting for the lease")
    text = generate_latest(collector_registry(m)).decode()
    assert "bridge_active 0.0" in text and "bridge_takeovers_total 0.0" in text
    m.set_connected("kafka", False)
    assert m.ready() == (False, "standby: kafka not connected")
    m.set_connected("kafka", True)
    m.role, m.takeovers = "active", 1
    assert m.ready() == (True, "active: ok")
    text = generate_latest(collector_registry(m)).decode()
    assert "bridge_active 1.0" in text and "bridge_takeovers_total 1.0" in text
