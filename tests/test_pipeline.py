"""Pipeline with fakes: the run, the flush position and closing, without any server.

Real: the replication stream (over a fake COPY BOTH connection), the event assembler,
the ack tracker, the producer (over a fake librdkafka client) and metrics. Fake: the
decoder (a table from payload to message), encoders, snapshots and the oversized
policy. build_pipeline's clean-up is checked with fake connections.
"""

from __future__ import annotations

import signal
import struct
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from bridge import build
from bridge.config import Config
from bridge.decode.messages import (
    Begin,
    Column,
    Commit,
    Insert,
    Message,
    Relation,
    StreamCommit,
    StreamStart,
    StreamStop,
    TupleData,
)
from bridge.encode.records import TxSource
from bridge.errors import (
    BridgeError,
    DeliveryError,
    RecordTooLargeError,
    SlotLostError,
    SourceError,
)
from bridge.events.assembler import EventAssembler
from bridge.events.model import Change
from bridge.kafka.acks import AckTracker
from bridge.kafka.producer import Producer
from bridge.kafka.sidetopics import Heartbeat, MessageTopic, TransactionTopic
from bridge.lsn import LSN
from bridge.metrics import Metrics
from bridge.pipeline import Parts, Pipeline
from bridge.record import KafkaRecord
from bridge.routing import Routing
from bridge.source import libpq, slots
from bridge.source.status import StatusTracker
from bridge.source.stream import ReplicationStream

RELATION = Relation(None, 16385, "public", "t", "d", (Column(1, "id", 23, -1),))


class FakeConnection:
    """COPY BOTH: serves XLogData frames, then ends the run by stopping the pipeline."""

    def __init__(self, payloads: list[tuple[int, bytes]]) -> None:
        self.frames = deque(
            b"w" + struct.pack(">QQQ", lsn, lsn, 0) + payload for lsn, payload in payloads
        )
        self.written: list[bytes] = []
        self.on_empty: Callable[[], None] = lambda: None
        self.closed = False

    def read_copy(self, timeout: float) -> bytes | None:
        if self.frames:
            return self.frames.popleft()
        self.on_empty()
        return None

    def write_copy(self, data: bytes) -> None:
        self.written.append(data)

    def finish_copy(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    def flushed(self) -> int:
        """The flush position of the last standby status update written."""
        last: int = struct.unpack(">cQQQQB", self.written[-1])[2]
        return last


class FakeClient:
    """librdkafka's Producer: records wait for `poll`, which reports them delivered; those
    of `fail_topic` or with the value `fail_value` failed. The record with the value
    `held` gets no report until `held` is set to None."""

    def __init__(self, config: dict[str, Any], fail_topic: str | None = None) -> None:
        self.queued: list[tuple[str, bytes | None, bytes | None, Any]] = []
        self.delivered: list[tuple[str, bytes | None, bytes | None]] = []
        self.fail_topic = fail_topic
        self.fail_value: bytes | None = None
        self.held: bytes | None = None

    def produce(self, topic: str, value: bytes, key: bytes, partition: int, cb: Any) -> None:
        self.queued.append((topic, key, value, cb))

    def poll(self, timeout: float = 0.0) -> int:
        queued, self.queued = self.queued, []
        for topic, key, value, callback in queued:
            if value is not None and value == self.held:
                self.queued.append((topic, key, value, callback))
                continue
            failed = topic == self.fail_topic or (value is not None and value == self.fail_value)
            error = FakeError() if failed else None
            callback(error, FakeRecord(topic, value))
            if error is None:
                self.delivered.append((topic, key, value))
        return len(queued) - len(self.queued)

    def flush(self, timeout: float) -> int:
        self.poll()
        return len(self.queued)

    def purge(self) -> None:
        self.queued.clear()

    def close(self) -> None:
        return None


class FakeError:
    def str(self) -> str:
        return "test: refused"


class FakeRecord:
    def __init__(self, topic: str, value: bytes | None) -> None:
        self._topic, self._value = topic, value

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return 0

    def __len__(self) -> int:
        return len(self._value or b"")


class FakeTable:
    key_schema = None


class FakeEncoder:
    table = FakeTable()

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def records(self, change: Change, tx: TxSource) -> list[KafkaRecord]:
        new = change.new
        assert new is not None
        return [KafkaRecord(self.topic, b"key", b"row " + (new.values[0] or b""))]


class FakeEncoders:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def get(self, relation: Relation) -> tuple[str, FakeEncoder]:
        self.asked.append(relation.name)
        topic = f"p.{relation.namespace}.{relation.name}"
        return topic, FakeEncoder(topic)


class RecordedAtOnce:
    """Positions recorded as soon as asked (the state topic's write-ahead is
    tests/test_slotstate.py's business)."""

    def admit(self, lsn: int, quiet: bool = False) -> int:
        return lsn

    def settle(self, timeout: float) -> None:
        pass

    def __init__(self, lost: BridgeError | None = None) -> None:
        self.lost = lost

    def lost_slot(self) -> BridgeError | None:
        return self.lost


class FakeSnapshots:
    """`pending`: the LSN of a snapshot to read once the stream is there; `read_pending`
    records what Kafka and PostgreSQL had been told at that moment (`seen`)."""

    def __init__(self, stream_after: bool = True, pending: int | None = None) -> None:
        self.stream_after = stream_after
        self.pending = pending
        self.completes = True
        self.seen: Callable[[int], object] = lambda flushed: flushed
        self.reads: list[object] = []

    def run_initial(self, should_stop: Callable[[], bool]) -> bool:
        return self.stream_after

    def pending_lsn(self) -> int | None:
        return self.pending

    def read_pending(
        self, flushed: int, should_stop: Callable[[], bool], keep_alive: Callable[[], None]
    ) -> bool:
        keep_alive()
        self.reads.append(self.seen(flushed))
        return self.completes

    def is_private(self, relation: Relation) -> bool:
        return False


class NoLimit:
    def limit(self, topic: str, relation: Relation) -> int:
        return 1 << 30

    def too_large(self, *args: Any) -> RecordTooLargeError:
        raise AssertionError("nothing is oversized here")

    dead_letter_topic = "p.dlq"

    def park(self, *args: Any) -> KafkaRecord:
        raise AssertionError("no table here tolerates errors")


class FakeIncremental:
    """A read-only snapshot window that closes once the idle stream passes `until`: its
    rows go out from `on_idle`, between transactions."""

    def __init__(self, until: int) -> None:
        self.until = until
        self.positions: list[int] = []
        self.delivered: list[Callable[[], bool]] = []

    def on_change(
        self, change: Change, records: list[KafkaRecord], tx: TxSource
    ) -> list[KafkaRecord]:
        return []

    def on_acknowledged(self, lsn: int) -> None:
        pass

    def on_idle(
        self, position: int, emit: Callable[[list[KafkaRecord]], Callable[[], bool]]
    ) -> bool:
        self.positions.append(position)
        if position < self.until:
            return True
        if not self.delivered:
            self.delivered.append(emit([KafkaRecord("p.public.t", b"chunk key", b"chunk row")]))
        return False


def transaction(xid: int, end_lsn: int, *ids: int) -> list[tuple[int, Message]]:
    """pgoutput's messages of one committed insert-only transaction, with their wal_end."""
    commit_lsn = end_lsn - 8
    rows: list[tuple[int, Message]] = [(commit_lsn - 16, RELATION)]
    rows += [
        (commit_lsn - 8, Insert(None, RELATION.oid, TupleData(b"t", (b"%d" % i,)))) for i in ids
    ]
    return [
        (commit_lsn - 24, Begin(commit_lsn, 1_000, xid)),
        *rows,
        (end_lsn, Commit(0, commit_lsn, end_lsn, 1_000)),
    ]


class Harness:
    """A Pipeline over fakes; `run()` streams the given messages, then stops."""

    def __init__(
        self,
        tmp_path: Path,
        messages: list[tuple[int, Message]],
        *,
        stream_after: bool = True,
        fail_topic: str | None = None,
        lost: BridgeError | None = None,
        snapshots: FakeSnapshots | None = None,
        incremental: FakeIncremental | None = None,
    ) -> None:
        cfg = Config(
            source={"slot_name": "s", "dbname": "db"},
            kafka={"topic_prefix": "p"},
            snapshot={"mode": "no_data"},
        )
        by_payload = {b"%d" % i: msg for i, (_, msg) in enumerate(messages)}
        self.conn = FakeConnection([(lsn, b"%d" % i) for i, (lsn, _) in enumerate(messages)])
        self.closed: list[str] = []
        self.started = 0
        self.client: FakeClient | None = None
        resources = ExitStack()
        resources.callback(self.closed.append, "resources")

        def decode(raw: bytes) -> Message:
            return by_payload[raw]

        def client(config: dict[str, Any]) -> FakeClient:
            self.client = FakeClient(config, fail_topic)
            return self.client

        metrics = Metrics()
        stream = ReplicationStream(self.conn, StatusTracker(10.0))
        tracker = AckTracker()
        self.encoders = FakeEncoders()
        self.pipeline = Pipeline(
            cfg,
            Parts(
                metrics=metrics,
                routing=Routing.from_config(cfg),
                snapshots=snapshots or FakeSnapshots(stream_after),
                incremental=incremental,
                encoders=self.encoders,
                decode=decode,
                start_streaming=self._start,
                start_lsn=LSN(0),
                describe="fake plugin",
                stream=stream,
                assembler=EventAssembler(
                    decode=decode,
                    decode_streamed=decode,
                    spill_dir=tmp_path / "spill",
                    memory_limit_bytes=1 << 20,
                ),
                tracker=tracker,
                producer=Producer({}, tracker, client=client),
                oversized=NoLimit(),
                eos=None,
                txmeta=TransactionTopic(None, "p"),  # type: ignore[arg-type]
                messages=MessageTopic(None, "p"),  # type: ignore[arg-type]
                heartbeat=Heartbeat(None, "__bridge-heartbeat.p", "p", 0, lambda: None),  # type: ignore[arg-type]
                positions=RecordedAtOnce(lost),
                resources=resources,
            ),
        )
        self.conn.on_empty = self.pipeline.stop

    def _start(self) -> None:
        self.started += 1


def test_rows_reach_kafka_and_the_flush_position_follows_delivery(tmp_path: Path) -> None:
    run = Harness(tmp_path, transaction(7, 0x200, 1, 2) + transaction(8, 0x300, 3))
    run.pipeline.run()
    assert run.started == 1
    assert run.client is not None
    assert run.client.delivered == [
        ("p.public.t", b"key", b"row 1"),
        ("p.public.t", b"key", b"row 2"),
        ("p.public.t", b"key", b"row 3"),
    ]
    assert run.encoders.asked == ["t"]  # one encoder per relation version, not per row
    assert run.conn.flushed() == 0x300  # the last transaction's end, once delivered
    assert run.closed == ["resources"]
    assert run.pipeline.metrics.events[("public", "t", "c")] == [3]


def test_a_failed_delivery_stops_without_acknowledging_its_transaction(tmp_path: Path) -> None:
    run = Harness(tmp_path, transaction(7, 0x200, 1), fail_topic="p.public.t")
    with pytest.raises(DeliveryError, match="test: refused"):
        run.pipeline.run()
    assert all(struct.unpack(">cQQQQB", w)[2] < 0x200 for w in run.conn.written)
    assert run.closed == ["resources"]


def test_a_record_failing_mid_transaction_stops_below_its_transaction(tmp_path: Path) -> None:
    """One failed report among a transaction's 100 records, the records before and after
    it delivered: the flush position never reaches that transaction, whatever the order
    in which reports come (a batched produce path must keep this)."""
    messages = transaction(7, 0x200, 1) + transaction(8, 0x300, *range(2, 102))
    messages += transaction(9, 0x400, 102)
    run = Harness(tmp_path, messages)
    assert run.client is not None
    run.client.fail_value = b"row 51"
    with pytest.raises(DeliveryError, match="test: refused"):
        run.pipeline.run()
    assert run.pipeline.stream.status.flushed <= 0x200
    assert all(struct.unpack(">cQQQQB", w)[2] <= 0x200 for w in run.conn.written)
    assert (b"row 52" in _delivered_rows(run)) or (b"row 50" in _delivered_rows(run))


def test_a_transaction_with_one_record_undelivered_is_not_acknowledged(tmp_path: Path) -> None:
    """Every report of transaction 8 but one arrived, and all of transaction 9's: the
    position stays at transaction 7 until the last report of 8 comes, then passes both."""
    messages = transaction(7, 0x200, 1) + transaction(8, 0x300, *range(2, 102))
    messages += transaction(9, 0x400, 102)
    run = Harness(tmp_path, messages)
    client = run.client
    assert client is not None
    client.held = b"row 60"
    seen: list[int] = []  # the position while 8 lacked a report, once 9 was delivered

    def on_empty() -> None:  # the stream is idle: the pipeline polls and acknowledges
        flushed = run.pipeline.stream.status.flushed
        if client.held is not None:
            if b"row 102" in _delivered_rows(run):  # acknowledged in the poll's turn
                seen.append(flushed)
                client.held = None
        elif flushed == 0x400:
            run.pipeline.stop()

    run.conn.on_empty = on_empty
    run.pipeline.run()
    assert seen == [0x200]
    assert run.conn.flushed() == 0x400


class _Dropped(FakeConnection):
    def read_copy(self, timeout: float) -> bytes | None:
        if not self.frames:
            raise SourceError("test: replication connection lost while streaming")
        return super().read_copy(timeout)


@pytest.mark.parametrize("lost", [None, SlotLostError("test: the slot was invalidated")])
def test_a_lost_stream_is_reported_as_the_slots_loss_when_that_is_why(
    tmp_path: Path, lost: BridgeError | None
) -> None:
    """The server ends the walsender of a slot it invalidates: the user must read that
    the slot is lost (and what to do), not a bare 'connection lost'."""
    run = Harness(tmp_path, transaction(7, 0x200, 1), lost=lost)
    run.conn.__class__ = _Dropped
    with pytest.raises(SourceError) as raised:
        run.pipeline.run()
    if lost is None:
        assert "connection lost" in str(raised.value)
    else:
        assert raised.value is lost
    assert run.closed == ["resources"]


def test_no_streaming_after_an_initial_only_snapshot(tmp_path: Path) -> None:
    run = Harness(tmp_path, transaction(7, 0x200, 1), stream_after=False)
    run.pipeline.run()
    assert run.started == 0
    assert run.conn.written == []  # replication never started: no status update
    assert run.closed == ["resources"]


def _delivered_rows(run: Harness) -> list[bytes | None]:
    assert run.client is not None
    return [value for _, _, value in run.client.delivered]


def test_a_pending_snapshot_is_read_after_the_transactions_it_sees(tmp_path: Path) -> None:
    """Resumed snapshot at 0x2f8, the commit LSN of transaction 8: transaction 7 (commit
    0x1f8) is in its view and goes first, delivered and confirmed; 8 and 9 come after."""
    snapshots = FakeSnapshots(pending=0x2F8)
    messages = transaction(7, 0x200, 1) + transaction(8, 0x300, 2) + transaction(9, 0x400, 3)
    run = Harness(tmp_path, messages, snapshots=snapshots)
    snapshots.seen = lambda flushed: (flushed, run.conn.flushed(), _delivered_rows(run))
    run.pipeline.run()
    assert snapshots.reads == [(0x200, 0x200, [b"row 1"])]
    assert _delivered_rows(run) == [b"row 1", b"row 2", b"row 3"]
    assert run.conn.flushed() == 0x400


def test_a_streamed_transaction_after_the_pending_snapshot_is_not_confirmed_before_it(
    tmp_path: Path,
) -> None:
    """Its replay starts with the assembler idle (the Stream Commit was its last message):
    the position confirmed before the snapshot must still stop below it."""
    snapshots = FakeSnapshots(pending=0x2F0)
    streamed: list[tuple[int, Message]] = [
        (0x250, StreamStart(9, True)),
        (0x258, RELATION._replace(xid=9)),
        (0x260, Insert(9, RELATION.oid, TupleData(b"t", (b"2",)))),
        (0x268, StreamStop()),
        (0x300, StreamCommit(9, 0, 0x2F8, 0x300, 1_000)),
    ]
    run = Harness(tmp_path, transaction(7, 0x200, 1) + streamed, snapshots=snapshots)
    snapshots.seen = lambda flushed: (flushed, _delivered_rows(run))
    run.pipeline.run()
    assert snapshots.reads == [(0x200, [b"row 1"])]
    assert _delivered_rows(run) == [b"row 1", b"row 2"]
    assert run.conn.flushed() == 0x300


def test_a_stop_during_the_pending_snapshot_delivers_nothing_after_it(tmp_path: Path) -> None:
    snapshots = FakeSnapshots(pending=0x2F8)
    snapshots.completes = False
    messages = transaction(7, 0x200, 1) + transaction(8, 0x300, 2)
    run = Harness(tmp_path, messages, snapshots=snapshots)
    run.pipeline.run()
    assert len(snapshots.reads) == 1
    assert _delivered_rows(run) == [b"row 1"]
    assert run.conn.flushed() == 0x200  # transaction 8 is sent again after a restart
    assert run.closed == ["resources"]


def test_a_quiet_stream_reads_the_pending_snapshot_once_decoding_passed_it(
    tmp_path: Path,
) -> None:
    """No transaction at or after the snapshot's LSN comes: a keepalive past it says that
    every transaction before it was sent."""
    snapshots = FakeSnapshots(pending=0x2F8)
    run = Harness(tmp_path, transaction(7, 0x200, 1), snapshots=snapshots)
    snapshots.seen = lambda flushed: (flushed, _delivered_rows(run))
    run.conn.frames.append(b"k" + struct.pack(">QQB", 0x280, 0, 0))  # not there yet
    run.pipeline.run()
    assert snapshots.reads == []
    assert any(w[-1] == 1 for w in run.conn.written)  # asked for a keepalive meanwhile

    run = Harness(tmp_path, transaction(7, 0x200, 1), snapshots=snapshots)
    run.conn.frames.append(b"k" + struct.pack(">QQB", 0x500, 0, 0))
    run.pipeline.run()
    assert snapshots.reads == [(0x200, [b"row 1"])]


def test_everything_is_closed_when_streaming_cannot_start(tmp_path: Path) -> None:
    run = Harness(tmp_path, [])

    def refuse() -> None:
        raise SourceError("test: slot busy")

    run.pipeline._start_streaming = refuse
    with pytest.raises(SourceError):
        run.pipeline.run()
    assert run.closed == ["resources"]


class FakePg:
    """A psycopg connection that only knows it was closed."""

    def __init__(self, opened: list[FakePg]) -> None:
        opened.append(self)
        self.closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake_connections(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakePg]]:
    opened: list[FakePg] = []
    monkeypatch.setattr(libpq, "connect", lambda *a, **k: FakePg(opened))
    monkeypatch.setattr(libpq, "ReplicationConnection", lambda conn: conn)
    yield opened


def test_build_closes_what_it_opened_when_a_later_step_fails(
    fake_connections: list[FakePg], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_prerequisites(rc: Any) -> int:
        raise SourceError("test: wal_level is not logical")

    monkeypatch.setattr(slots, "check_prerequisites", no_prerequisites)
    with pytest.raises(SourceError, match="wal_level"):
        build.build_pipeline(Config(source={"slot_name": "s"}))
    assert len(fake_connections) == 2  # catalog and replication
    assert all(conn.closed for conn in fake_connections)


class _Stoppable:
    def __init__(self) -> None:
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


def test_a_signal_during_the_build_stops_the_pipeline_once_it_is_built() -> None:
    """SIGTERM while `build_pipeline` runs (a slot being created) must not kill the
    process half-built: the request is kept and the built pipeline stops at once."""
    stopper = build._Stopper()
    stopper(signal.SIGTERM, None)
    pipeline = _Stoppable()
    stopper.attach(pipeline)  # type: ignore[arg-type]
    assert pipeline.stopped == 1
    stopper(signal.SIGINT, None)
    assert pipeline.stopped == 2


def test_a_signal_after_the_build_stops_the_pipeline() -> None:
    stopper = build._Stopper()
    pipeline = _Stoppable()
    stopper.attach(pipeline)  # type: ignore[arg-type]
    assert pipeline.stopped == 0
    stopper(signal.SIGTERM, None)
    assert pipeline.stopped == 1


def test_a_window_passed_by_the_idle_stream_sends_its_rows_between_transactions(
    tmp_path: Path,
) -> None:
    waiting = FakeIncremental(until=0x280)
    run = Harness(tmp_path, transaction(7, 0x200, 1), incremental=waiting)
    run.pipeline.run()
    assert waiting.positions and not waiting.delivered
    assert any(w[-1] == 1 for w in run.conn.written)  # asked how far decoding is

    passed = FakeIncremental(until=0x200)
    run = Harness(tmp_path, transaction(7, 0x200, 1), incremental=passed)
    run.pipeline.run()
    assert _delivered_rows(run) == [b"row 1", b"chunk row"]
    assert [delivered() for delivered in passed.delivered] == [True]
    assert run.conn.flushed() == 0x200  # nothing past the transactions it has seen
