"""The initial snapshot's chunks in exactly-once mode (bridge/snapshot/initial.py `_Chunks`):
one Kafka transaction per chunk, and a chunk counts as done (so is recorded in the progress
table) only once its transaction committed. Unit tests with a fake producer; the live test
of the fence is tests/standby/test_standby_partition.py
(`test_snapshot_records_held_up_in_a_frozen_active_never_land_after_the_takeover`)."""

from __future__ import annotations

from bridge.config import Config
from bridge.kafka.acks import AckTracker, TxHandle
from bridge.record import KafkaRecord
from bridge.snapshot.initial import _Chunks


class FakeProducer:
    def __init__(self, tracker: AckTracker) -> None:
        self.tracker = tracker
        self.calls: list[str] = []
        self.handles: list[TxHandle] = []

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(self, record: KafkaRecord, handle: TxHandle) -> None:
        self.calls.append(f"produce {record.key!r}")
        handle.add_record(0)
        self.handles.append(handle)

    def deliver_all(self) -> None:
        """Kafka acknowledges every record produced so far (delivery reports)."""
        for handle in self.handles:
            self.tracker.delivered(handle, 0)
        self.handles.clear()

    def commit_transaction(self, timeout: float) -> None:
        self.deliver_all()  # the real one flushes first
        self.calls.append("commit")


def _config(exactly_once: bool) -> Config:
    return Config(
        source={"dbname": "db", "user": "u", "slot_name": "s"},
        kafka={"bootstrap_servers": "k:9092", "exactly_once": exactly_once},
        registry={"url": "http://r"},
    )


def _chunks(exactly_once: bool) -> tuple[_Chunks, FakeProducer, AckTracker]:
    tracker = AckTracker()
    producer = FakeProducer(tracker)
    chunks = _Chunks(producer, tracker, _config(exactly_once))  # type: ignore[arg-type]
    return chunks, producer, tracker


def _record(key: bytes) -> KafkaRecord:
    return KafkaRecord("t", key, b"v")


def test_each_chunk_is_a_transaction_done_only_once_committed() -> None:
    chunks, producer, tracker = _chunks(exactly_once=True)
    first, second = TxHandle(tracker), TxHandle(tracker)
    chunks.begin()
    producer.produce(_record(b"1"), first)
    producer.deliver_all()  # delivered into the open transaction: not done yet
    assert not first.complete, "a chunk delivered but not committed must not be recorded"
    chunks.end(_record(b"2"), first)  # its held last record, then the commit
    assert first.complete
    chunks.begin()
    producer.produce(_record(b"3"), second)
    chunks.end(_record(b"4"), second)
    assert second.complete
    assert producer.calls == [
        "begin",
        "produce b'1'",
        "produce b'2'",
        "commit",
        "begin",
        "produce b'3'",
        "produce b'4'",
        "commit",
    ]


def test_at_least_once_has_no_transactions() -> None:
    chunks, producer, tracker = _chunks(exactly_once=False)
    handle = TxHandle(tracker)
    chunks.begin()
    producer.produce(_record(b"1"), handle)
    chunks.end(_record(b"2"), handle)
    assert not handle.complete  # closed, waiting for Kafka's acknowledgements
    producer.deliver_all()
    assert handle.complete
    assert producer.calls == ["produce b'1'", "produce b'2'"]

