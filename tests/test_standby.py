"""The standby pair's pieces without servers: the lease's key and clock, the positions it
guards, and what /readyz and /metrics say of a standby and an active bridge."""

from __future__ import annotations

import pytest
from prometheus_client.exposition import generate_latest

from bridge import standby
from bridge.config import Config, SourceConfig
from bridge.errors import BridgeError, FencedError, SourceError, StopRequestedError
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


class SlotServer:
    """The lease's connection, faked: the slot's active_pid answers from `holders`, one per
    look (the last one repeats), and every pg_terminate_backend is recorded; each query
    moves `clock` on by `step`."""

    def __init__(self, holders: list[int | None], clock: Clock, step: float = 0.1) -> None:
        self.holders, self.clock, self.step = holders, clock, step
        self.terminated: list[int] = []
        self._row: tuple[object] | None = None

    def execute(self, query: str, params: tuple[object, ...]) -> SlotServer:
        self.clock.now += self.step
        if "pg_terminate_backend" in query:
            pid = params[0]
            assert isinstance(pid, int)
            self.terminated.append(pid)
            self._row = (True,)
        else:
            holder = self.holders.pop(0) if len(self.holders) > 1 else self.holders[0]
            self._row = None if holder is None else (holder,)
        return self

    def fetchone(self) -> tuple[object] | None:
        return self._row


@pytest.fixture(autouse=True)
def _quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(standby, "POLL_S", 0.001)  # the fake clock moves per query


def _lease_on(server: SlotServer, clock: Clock) -> Lease:
    lease = Lease(SourceConfig(slot_name="s"), timeout_s=3.0, clock=clock)
    lease._conn = server  # type: ignore[assignment]
    return lease


def test_a_walsender_that_outlives_its_termination_is_ended_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Stuck sending its termination error to a client that is gone, the walsender only
    exits at the second signal; the lease holder waits for the slot to be free."""
    clock = Clock()
    server = SlotServer([7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, None], clock)
    lease = _lease_on(server, clock)
    with caplog.at_level("INFO", logger="bridge.standby"):
        lease.evict_stale_walsender(lambda: False, timeout_s=30.0)
    assert server.holders == [None]  # it looked until the slot was free
    assert server.terminated == [7, 7]  # at once, then a second later (12 looks of 0.1s)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "ended walsender 7, left streaming slot s by the previous holder",
        "walsender 7 still holds slot s after it was ended (stuck sending to its unreachable "
        "client): ending it again",
    ]
    assert lease.valid()  # each look renewed the lease


def test_a_free_slot_needs_no_termination() -> None:
    clock = Clock()
    server = SlotServer([None], clock)
    _lease_on(server, clock).evict_stale_walsender(lambda: False, timeout_s=30.0)
    assert server.terminated == []


def test_a_slot_that_stays_active_ends_the_takeover_with_a_clear_error() -> None:
    clock = Clock()
    server = SlotServer([7], clock, step=1.0)
    with pytest.raises(BridgeError, match="stayed active in walsender 7 for 3s after it was"):
        _lease_on(server, clock).evict_stale_walsender(lambda: False, timeout_s=3.0)
    assert server.terminated and set(server.terminated) == {7}


def test_an_error_after_the_lease_ended_is_reported_as_the_lost_lease() -> None:
    """A bridge resumed after the standby took over meets a lost walsender or a refused write
    first; it stops as fenced, naming that error, not as a PostgreSQL or Kafka failure."""
    clock = Clock()
    lease = Lease(SourceConfig(slot_name="s"), timeout_s=5.0, clock=clock)
    lease._renewed = clock.now
    lost = SourceError("the connection to PostgreSQL was lost: terminating connection")
    lease.blame(lost)  # still held: the error stands
    clock.now += 6
    with pytest.raises(LeaseLostError, match=r"is fenced.*stopped on: the connection") as got:
        lease.blame(lost)
    assert got.value.__cause__ is lost
    for fence in (FencedError("refused"), LeaseLostError("lost"), StopRequestedError("stop")):
        lease.blame(fence)  # already what it is


def test_the_slot_moving_on_after_the_lease_ended_is_no_loss() -> None:
    """The new active streams the slot past what the old one recorded: the old one's stream
    error is not reported as the slot being lost (a false alarm naming a gap)."""

    class Moved(Recorder):
        def lost_slot(self) -> BridgeError | None:
            return SourceError("the slot starts after the last position the bridge recorded")

    clock = Clock()
    lease = Lease(SourceConfig(slot_name="s"), timeout_s=5.0, clock=clock)
    lease._renewed = clock.now
    positions = LeasedPositions(Moved(), lease)
    assert positions.lost_slot() is not None  # held: the probe's verdict stands
    clock.now += 6
    assert positions.lost_slot() is None
