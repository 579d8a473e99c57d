"""The slot-loss verdict (pure): what the record in Kafka and the slot's state say."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from confluent_kafka import KafkaError, KafkaException
from pydantic import ValidationError

from bridge.config import Config
from bridge.errors import FencedError, SlotLostError
from bridge.lsn import LSN
from bridge.slotstate import (
    RECORD_EVERY_S,
    PositionRecorder,
    Record,
    Server,
    StateTopic,
    carried_over,
    judge,
)
from bridge.source.slots import SlotInfo

SYSTEM = "7400000000000000001"
RECORD = Record(SYSTEM, 1, 1000, (1.5,))


def test_record_round_trips() -> None:
    assert Record.decode(RECORD.encode()) == RECORD


def test_first_start_and_healthy_slots_pass() -> None:
    assert judge(None, SYSTEM, None) is None
    assert judge(None, SYSTEM, SlotInfo(LSN(500), None)) is None
    assert judge(RECORD, SYSTEM, SlotInfo(LSN(1000), None)) is None
    # a synchronised copy on a promoted standby may lag the record: resent, not lost
    assert judge(RECORD, SYSTEM, SlotInfo(LSN(900), None)) is None


def test_a_missing_slot_after_delivery_is_a_loss() -> None:
    loss = judge(RECORD, SYSTEM, None)
    assert loss is not None and loss.lost_from == 1000 and loss.lost_to is None
    assert "does not exist" in loss.what and "promoted" in loss.what


def test_a_slot_ahead_of_the_record_was_recreated() -> None:
    loss = judge(RECORD, SYSTEM, SlotInfo(LSN(5000), None))
    assert loss is not None and (loss.lost_from, loss.lost_to) == (1000, 5000)
    assert "0/3E8" in loss.describe() and "0/1388" in loss.describe()


def test_an_invalidated_slot_is_a_loss_even_without_a_record() -> None:
    loss = judge(None, SYSTEM, SlotInfo(LSN(700), "wal_removed"))
    assert loss is not None and loss.lost_from == 700 and "wal_removed" in loss.what
    loss = judge(RECORD, SYSTEM, SlotInfo(LSN(700), "wal_removed"))
    assert loss is not None and loss.lost_from == 1000


def test_another_cluster_is_a_loss() -> None:
    loss = judge(RECORD, "7400000000000000002", SlotInfo(LSN(1000), None))
    assert loss is not None and SYSTEM in loss.what


def test_resnapshot_needs_a_snapshot_mode_that_reads_tables() -> None:
    with pytest.raises(ValidationError, match="no_data"):
        Config(source={"on_slot_lost": "resnapshot"}, snapshot={"mode": "no_data"})
    Config(source={"on_slot_lost": "resnapshot"}, snapshot={"mode": "initial"})


class _FakeProducer:
    """Holds delivery callbacks until `deliver()`: Kafka's acknowledgement, by hand."""

    def __init__(self) -> None:
        self.pending: list[tuple[Record, Any]] = []
        self.written: list[int] = []

    def deliver(self) -> None:
        pending, self.pending = self.pending, []
        for record, callback in pending:
            self.written.append(record.lsn)
            callback(None)


class _FakeState:
    topic = "p.bridge_state"
    timeout = 1.0

    def __init__(self) -> None:
        self.producer = _FakeProducer()

    def write(self, record: Record, on_done: Any) -> None:
        self.producer.pending.append((record, on_done))

    def poll(self) -> None:
        pass

    def flush(self, timeout: float) -> None:
        self.producer.deliver()


def test_positions_are_recorded_before_postgresql_hears_of_them() -> None:
    state = _FakeState()
    now = [0.0]
    recorder = PositionRecorder(state, RECORD, lambda: None, clock=lambda: now[0])  # type: ignore[arg-type]
    recorder.write_now(1000)
    assert recorder.admit(1500) == 1000  # asked for, not yet in Kafka: capped
    assert recorder.admit(1600) == 1000  # one write in flight at a time
    state.producer.deliver()
    assert recorder.admit(1600) == 1500  # the recorded one; 1600 waits a second
    now[0] += RECORD_EVERY_S
    recorder.admit(1600)
    state.producer.deliver()
    assert recorder.admit(1600) == 1600
    assert state.producer.written == [1000, 1500, 1600]


def test_a_quiet_stream_records_a_newer_position_at_once() -> None:
    """The once-a-second limit holds while changes stream in; on the loop's idle turn the
    newest delivered position is recorded without waiting for it, one write in flight."""
    state = _FakeState()
    recorder = PositionRecorder(state, RECORD, lambda: None, clock=lambda: 0.0)  # type: ignore[arg-type]
    recorder.write_now(1000)
    assert recorder.admit(1500) == 1000  # written at once: the second had passed at start
    state.producer.deliver()
    assert recorder.admit(1600) == 1500  # streaming: 1600 waits a second
    assert recorder.admit(1600, quiet=True) == 1500  # quiet: written now, not yet acked
    assert recorder.admit(1700, quiet=True) == 1500  # one write in flight at a time
    state.producer.deliver()
    assert recorder.admit(1700, quiet=True) == 1600
    state.producer.deliver()
    assert recorder.admit(1700, quiet=True) == 1700
    assert state.producer.written == [1000, 1500, 1600, 1700]


def test_a_graceful_stop_records_the_last_position() -> None:
    state = _FakeState()
    recorder = PositionRecorder(state, RECORD, lambda: None, clock=lambda: 0.0)  # type: ignore[arg-type]
    recorder.write_now(1000)
    recorder.admit(2000)
    recorder.admit(3000)  # rate-limited and one in flight: not written yet
    recorder.settle(1.0)
    recorder.settle(1.0)
    assert recorder.admit(3000) == 3000
    assert state.producer.written == [1000, 2000, 3000]


def _probe_failing() -> SlotInfo | None:
    raise psycopg.OperationalError("test: server gone too")


@pytest.mark.parametrize(
    ("probe", "on_lost", "expected"),
    [
        (lambda: SlotInfo(LSN(1000), None), "fail", None),  # a healthy slot: the stream's error
        (_probe_failing, "fail", None),  # PostgreSQL gone as well: the stream's error
        (lambda: SlotInfo(LSN(0), "wal_removed"), "fail", "delete key 's1'"),
        (lambda: SlotInfo(LSN(0), "wal_removed"), "resnapshot", "re-reads the captured tables"),
        (lambda: None, "fail", "does not exist"),
    ],
)
def test_a_stream_that_ended_with_its_slot_lost_says_so(
    probe: Any, on_lost: str, expected: str | None
) -> None:
    state = _FakeState()
    state.key = b"s1"  # type: ignore[attr-defined]
    recorder = PositionRecorder(state, RECORD, probe, on_lost)  # type: ignore[arg-type]
    lost = recorder.lost_slot()
    if expected is None:
        assert lost is None
    else:
        assert isinstance(lost, SlotLostError)
        text = f"{lost} {lost.hint}"
        assert "while streaming" in text and expected in text, text


UPGRADED = "7500000000000000009"  # pg_upgrade made the new cluster with initdb: a new id
BEFORE = Record(SYSTEM, 1, 1000, (), major=17, dboid=16384)


def test_a_slot_carried_over_by_pg_upgrade_is_no_loss() -> None:
    assert Record.decode(BEFORE.encode()) == BEFORE
    after = Server(18, 16384)
    assert carried_over(BEFORE, UPGRADED, after, SlotInfo(LSN(5000), None))
    assert judge(BEFORE, UPGRADED, SlotInfo(LSN(5000), None), after) is None


@pytest.mark.parametrize(
    ("record", "server", "slot"),
    [
        (BEFORE, Server(17, 16384), SlotInfo(LSN(5000), None)),  # same major: another cluster
        (BEFORE, Server(18, 16999), SlotInfo(LSN(5000), None)),  # another database (a dump)
        (BEFORE, Server(18, 16384), None),  # no slot: 16 and older drop them
        (BEFORE, Server(18, 16384), SlotInfo(LSN(900), None)),  # behind what was delivered
        (BEFORE, Server(18, 16384), SlotInfo(LSN(5000), "wal_removed")),
        (Record(SYSTEM, 1, 1000), Server(18, 16384), SlotInfo(LSN(5000), None)),  # an older record
    ],
)
def test_anything_less_than_a_pg_upgrade_is_still_a_loss(
    record: Record, server: Server, slot: SlotInfo | None
) -> None:
    assert not carried_over(record, UPGRADED, server, slot)
    assert judge(record, UPGRADED, slot, server) is not None


class _TransactionalClient:
    """A transactional librdkafka producer by hand: what was called, in order, and the error
    `fail_on` (a call's name) raises."""

    def __init__(self, fail_on: str | None = None, error: KafkaError | None = None) -> None:
        self.calls: list[str] = []
        self.fail_on, self.error = fail_on, error
        self.unflushed = 0

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name == self.fail_on:
            raise KafkaException(self.error)

    def init_transactions(self, timeout: float) -> None:
        self._call("init")

    def begin_transaction(self) -> None:
        self._call("begin")

    def produce(self, topic: str, value: bytes, key: bytes) -> None:
        self._call("produce")

    def flush(self, timeout: float) -> int:
        self._call("flush")
        return self.unflushed

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit")

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort")

    def poll(self, timeout: float) -> int:
        return 0


def _transactional(client: _TransactionalClient) -> StateTopic:
    state = StateTopic("p.bridge_state", b"s1", {}, client, timeout=0.2)
    state.transactional = True
    return state


def test_a_transactional_position_counts_as_recorded_once_committed() -> None:
    client = _TransactionalClient()
    state = _transactional(client)
    done: list[tuple[str | None, list[str]]] = []
    state.write(RECORD, lambda failure: done.append((failure, list(client.calls))))
    assert done == [(None, ["begin", "produce", "flush", "commit"])]
    recorder = PositionRecorder(state, RECORD, lambda: None, clock=lambda: 0.0)
    recorder.write_now(1000)
    assert recorder.admit(1500) == 1500  # the write returned committed


def test_a_fenced_state_write_stops_and_is_never_retried() -> None:
    """Another instance initialised `<transactional id>.state`: the resumed old bridge's
    commit is refused; it raises FencedError, records nothing and writes nothing more."""
    fenced = KafkaError(KafkaError._FENCED, "the producer was fenced", fatal=True)
    client = _TransactionalClient("commit", fenced)
    recorder = PositionRecorder(_transactional(client), RECORD, lambda: None, clock=lambda: 0.0)
    with pytest.raises(FencedError, match="fenced") as raised:
        recorder.admit(1500, quiet=True)
    assert "took over" in str(raised.value.hint)
    assert recorder.recorded == 0
    assert client.calls == ["begin", "produce", "flush", "commit"]  # no abort, no retry


@pytest.mark.parametrize("code", [KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH])
def test_the_brokers_fencing_codes_are_fenced_too(code: int) -> None:
    client = _TransactionalClient("begin", KafkaError(code))
    with pytest.raises(FencedError):
        _transactional(client).store(b"s1.incremental-snapshots", b"{}")


def test_a_failed_state_transaction_is_aborted_and_reported() -> None:
    """Not fenced (the record refused, the coordinator busy): aborted, the position stays
    unrecorded and is written again later, as after a failed delivery."""
    refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, txn_requires_abort=True)
    client = _TransactionalClient("commit", refused)
    recorder = PositionRecorder(_transactional(client), RECORD, lambda: None, clock=lambda: 0.0)
    assert recorder.admit(1500, quiet=True) == 0
    assert client.calls == ["begin", "produce", "flush", "commit", "abort"]
    client.fail_on = None
    assert recorder.admit(1500, quiet=True) == 1500


def test_an_unacknowledged_state_transaction_is_aborted_and_serves_the_stream() -> None:
    client = _TransactionalClient()
    client.unflushed = 1
    state = _transactional(client)
    served: list[int] = []
    state.while_blocked = lambda: served.append(1)
    assert state.store(b"k", b"v") == "no acknowledgement in 0s"
    assert client.calls[-1] == "abort" and "commit" not in client.calls and served
