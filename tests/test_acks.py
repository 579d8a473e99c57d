"""The LSN watermark: pure unit tests plus a model-based check of random interleavings."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bridge.errors import DeliveryError
from bridge.kafka.acks import AckTracker, TxHandle

START = 5


class _Err:
    def __init__(self, text: str) -> None:
        self._text = text

    def str(self) -> str:
        return self._text


class _Msg:
    def __init__(self, topic: str, partition: int | None, size: int) -> None:
        self._topic = topic
        self._partition = partition
        self._size = size

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def __len__(self) -> int:
        return self._size


def _tx(tracker: AckTracker, end_lsn: int, sizes: list[int]) -> TxHandle:
    handle = tracker.open_tx()
    for size in sizes:
        handle.add_record(size)
    tracker.close_tx(handle, end_lsn)
    return handle


def test_nothing_acknowledged_on_receipt() -> None:
    tracker = AckTracker(start_lsn=50)
    handle = _tx(tracker, 100, [10, 20])
    assert tracker.flush_lsn() == 50
    tracker.delivered(handle, 10)
    assert tracker.flush_lsn() == 50
    tracker.delivered(handle, 20)
    assert tracker.flush_lsn() == 100


def test_open_transaction_is_not_complete_even_with_all_records_delivered() -> None:
    tracker = AckTracker()
    handle = tracker.open_tx()
    handle.add_record(5)
    tracker.delivered(handle, 5)
    assert tracker.flush_lsn(idle_position=500) == 0
    tracker.close_tx(handle, 300)
    assert tracker.flush_lsn(idle_position=500) == 500


def test_later_transaction_waits_for_earlier_one() -> None:
    tracker = AckTracker()
    first = _tx(tracker, 100, [1])
    second = _tx(tracker, 200, [1])
    tracker.delivered(second, 1)
    assert tracker.flush_lsn() == 0
    tracker.delivered(first, 1)
    assert tracker.flush_lsn() == 200


def test_empty_transactions_advance_in_order() -> None:
    tracker = AckTracker()
    _tx(tracker, 100, [])
    blocked = _tx(tracker, 200, [7])
    _tx(tracker, 300, [])
    assert tracker.flush_lsn() == 100
    tracker.delivered(blocked, 7)
    assert tracker.flush_lsn() == 300


def test_idle_position_followed_only_when_nothing_outstanding() -> None:
    tracker = AckTracker()
    handle = _tx(tracker, 100, [1])
    assert tracker.flush_lsn(idle_position=1000) == 0
    tracker.delivered(handle, 1)
    assert tracker.flush_lsn(idle_position=1000) == 1000
    assert tracker.flush_lsn(idle_position=None) == 1000
    assert tracker.flush_lsn(idle_position=2000) == 2000


def test_hold_caps_strictly_below_and_releases() -> None:
    tracker = AckTracker()
    handle = _tx(tracker, 100, [1])
    tracker.delivered(handle, 1)
    assert tracker.flush_lsn(idle_position=500, holds=(80,)) == 79
    assert tracker.flush_lsn(idle_position=500, holds=(300,)) == 299
    assert tracker.flush_lsn(idle_position=500) == 500


def test_idle_follows_the_server_position_and_the_lowest_hold() -> None:
    tracker = AckTracker()
    handle = _tx(tracker, 100, [1])
    tracker.delivered(handle, 1)
    # Between transactions the keepalive's position counts too; inside one, neither.
    assert tracker.flush_lsn(idle_position=None, server_wal_end=700) == 100
    assert tracker.flush_lsn(idle_position=500, server_wal_end=700, holds=(None,)) == 700
    assert tracker.flush_lsn(idle_position=990, holds=(None, 950, 920)) == 919


def test_never_regresses() -> None:
    tracker = AckTracker()
    assert tracker.flush_lsn(idle_position=500) == 500
    assert tracker.flush_lsn(idle_position=400) == 500
    assert tracker.flush_lsn(idle_position=600, holds=(100,)) == 500
    _tx(tracker, 650, [1])
    assert tracker.flush_lsn(idle_position=900) == 600


def test_in_flight_accounting() -> None:
    tracker = AckTracker()
    first = _tx(tracker, 100, [10, 20])
    second = _tx(tracker, 200, [30])
    assert (tracker.in_flight_records, tracker.in_flight_bytes) == (3, 60)
    tracker.delivered(second, 30)
    tracker.delivered(first, 10, DeliveryError("boom"))
    assert (tracker.in_flight_records, tracker.in_flight_bytes) == (1, 20)
    assert tracker.open_transactions == 2


def test_failure_freezes_watermark_before_failed_transaction() -> None:
    tracker = AckTracker()
    ok = _tx(tracker, 100, [1])
    bad = _tx(tracker, 200, [1, 1])
    later = _tx(tracker, 300, [1])
    tracker.delivered(bad, 1, DeliveryError("first"))
    tracker.delivered(bad, 1, DeliveryError("second"))
    tracker.delivered(later, 1)
    assert tracker.failed
    assert tracker.flush_lsn(idle_position=1000) == 0
    tracker.delivered(ok, 1)
    assert tracker.flush_lsn(idle_position=1000) == 100
    assert tracker.flush_lsn(idle_position=1000) == 100
    with pytest.raises(DeliveryError, match="first"):
        tracker.raise_if_failed()


def test_raise_if_failed_is_quiet_when_healthy() -> None:
    tracker = AckTracker()
    tracker.raise_if_failed()
    assert not tracker.failed


def test_handle_is_a_delivery_callback() -> None:
    tracker = AckTracker()
    handle = _tx(tracker, 100, [3, 4])
    handle(None, _Msg("db.public.t", 2, 3))
    assert (tracker.in_flight_records, tracker.in_flight_bytes) == (1, 4)
    handle(_Err("Broker: Message size too large"), _Msg("db.public.t", 5, 4))
    assert (tracker.in_flight_records, tracker.in_flight_bytes) == (0, 0)
    with pytest.raises(DeliveryError) as info:
        tracker.raise_if_failed()
    text = str(info.value)
    assert "'db.public.t'" in text
    assert "partition 5" in text
    assert "Message size too large" in text
    assert info.value.hint
    assert tracker.flush_lsn() == 0
    assert "failed" in repr(handle)


def test_unassigned_partition_is_named() -> None:
    tracker = AckTracker()
    handle = _tx(tracker, 100, [1])
    handle(_Err("Local: Unknown topic"), _Msg("x", -1, 1))
    assert tracker.error is not None
    assert "partition unassigned" in str(tracker.error)


@given(
    sizes=st.lists(st.lists(st.integers(0, 1000), max_size=6), min_size=1, max_size=12),
    data=st.data(),
)
def test_all_delivered_in_any_order_reaches_last_end_lsn(
    sizes: list[list[int]], data: st.DataObject
) -> None:
    tracker = AckTracker()
    records = []
    for i, tx_sizes in enumerate(sizes):
        handle = _tx(tracker, (i + 1) * 10, tx_sizes)
        records += [(handle, size) for size in tx_sizes]
    for handle, size in data.draw(st.permutations(records)):
        tracker.delivered(handle, size)
    assert tracker.flush_lsn() == len(sizes) * 10
    assert (tracker.in_flight_records, tracker.in_flight_bytes) == (0, 0)
    assert tracker.open_transactions == 0


class WatermarkMachine(RuleBasedStateMachine):
    """Random open/add/close/deliver/flush sequences against a reference model.

    The model recomputes from scratch what the tracker keeps incrementally: per
    transaction its end LSN and outstanding records, deliveries in any order.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tracker = AckTracker(start_lsn=START)
        self.handles: list[TxHandle] = []
        self.outstanding: list[list[int]] = []  # per transaction: sizes not yet reported
        self.ends: list[int | None] = []
        self.floors: list[int] = []  # position reached before each transaction began
        self.failed: set[int] = set()
        self.current: int | None = None  # index of the transaction being produced
        self.position = START  # highest end LSN or idle position handed out so far
        self.idle_done = START  # highest idle position the tracker was entitled to follow
        self.last_result = START

    def _pairs(self) -> list[tuple[int, int]]:
        return [(i, j) for i, sizes in enumerate(self.outstanding) for j in range(len(sizes))]

    def _complete_prefix(self) -> int:
        for i, end in enumerate(self.ends):
            if end is None or self.outstanding[i] or i in self.failed:
                return i
        return len(self.ends)

    @precondition(lambda self: self.current is None)
    @rule()
    def open_tx(self) -> None:
        self.handles.append(self.tracker.open_tx())
        self.outstanding.append([])
        self.ends.append(None)
        self.floors.append(self.position)
        self.current = len(self.handles) - 1

    @precondition(lambda self: self.current is not None)
    @rule(size=st.integers(0, 500))
    def add_record(self, size: int) -> None:
        assert self.current is not None
        self.handles[self.current].add_record(size)
        self.outstanding[self.current].append(size)

    @precondition(lambda self: self.current is not None)
    @rule(gap=st.integers(1, 100))
    def close_tx(self, gap: int) -> None:
        assert self.current is not None
        self.position += gap
        self.tracker.close_tx(self.handles[self.current], self.position)
        self.ends[self.current] = self.position
        self.current = None

    @precondition(lambda self: bool(self._pairs()))
    @rule(data=st.data(), fail=st.integers(0, 19))
    def deliver(self, data: st.DataObject, fail: int) -> None:
        i, j = data.draw(st.sampled_from(self._pairs()))
        size = self.outstanding[i].pop(j)
        error = None
        if fail == 0:
            self.failed.add(i)
            error = DeliveryError(f"tx {i}")
        self.tracker.delivered(self.handles[i], size, error)

    @rule(idle_gap=st.none() | st.integers(0, 50), hold_gap=st.none() | st.integers(-30, 60))
    def flush(self, idle_gap: int | None, hold_gap: int | None) -> None:
        idle = None
        if idle_gap is not None and self.current is None:
            # The pipeline reports an idle position only between transactions.
            idle = self.position + idle_gap
        hold = None if hold_gap is None else self.position + hold_gap
        result = self.tracker.flush_lsn(idle_position=idle, holds=(hold,))

        complete = self._complete_prefix()
        if idle is not None:
            self.position = idle  # later transactions end beyond it
            if complete == len(self.ends) and not self.failed:
                self.idle_done = idle
        safe = max([self.idle_done, *(e for e in self.ends[:complete] if e is not None)])
        capped = safe if hold is None else min(safe, hold - 1)
        assert result == max(self.last_result, capped)
        assert result >= self.last_result
        if complete < len(self.ends):
            # The rule itself: not past anything before the oldest incomplete transaction.
            assert result <= max(self.last_result, self.floors[complete])
        if hold is not None and result > self.last_result:
            assert result < hold
        self.last_result = result

    @invariant()
    def in_flight_matches(self) -> None:
        sizes = [size for outstanding in self.outstanding for size in outstanding]
        assert self.tracker.in_flight_records == len(sizes)
        assert self.tracker.in_flight_bytes == sum(sizes)

    @invariant()
    def failure_is_remembered(self) -> None:
        assert self.tracker.failed == bool(self.failed)


WatermarkMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=60)
test_watermark_machine = WatermarkMachine.TestCase
