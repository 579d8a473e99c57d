"""The LSN watermark: what may be reported to PostgreSQL as flushed (pure, no I/O).

The rule: the flush position is the end LSN of the newest transaction such that it
and every earlier one had all their records confirmed by Kafka delivery callbacks.
Records are never acknowledged on receipt. Acknowledging a position tells
PostgreSQL it may drop that WAL and never resend those transactions, so a position
reported too early is silent data loss; one reported late only costs a resend.

Per transaction the tracker keeps a counter, not a list of records: delivery
callbacks arrive in any order across partitions and only the count matters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Protocol

from bridge.errors import DeliveryError


class KafkaCause(Protocol):
    """What a delivery callback's error offers (confluent_kafka.KafkaError)."""

    def str(self) -> str: ...


class DeliveredRecord(Protocol):
    """What a delivery callback's message offers (confluent_kafka.Message)."""

    def topic(self) -> str | None: ...

    def partition(self) -> int | None: ...

    def __len__(self) -> int: ...


def delivery_error(
    topic: str | None, partition: int | None, cause: str, table: str | None = None
) -> DeliveryError:
    """The error for a record Kafka did not take, naming where it was going and why."""
    where = "unassigned" if partition is None or partition < 0 else str(partition)
    of_table = f" (a row of table {table})" if table else ""
    return DeliveryError(
        f"Kafka did not accept a record for topic {topic!r} partition {where}{of_table}: {cause}",
        hint="nothing from its transaction on was acknowledged to PostgreSQL, so it is "
        "resent after a restart; fix the cause (topic, ACLs, broker health, record size "
        "against max.message.bytes) and restart the bridge",
    )


class TxHandle:
    """One transaction's delivery state; also the delivery callback of its records.

    Being callable as `on_delivery(err, msg)` lets every record of a transaction
    share one callback object: the produce hot path allocates nothing per record
    to find its transaction again (confluent-kafka has no per-message opaque).
    Record sizes are value bytes: `len(msg)` on the callback side.
    """

    __slots__ = ("_tracker", "closed", "end_lsn", "failed", "pending")

    def __init__(self, tracker: AckTracker) -> None:
        self._tracker = tracker
        self.pending = 0  # records handed to the producer, not yet reported
        self.closed = False  # commit seen: no more records will come
        self.failed = False
        self.end_lsn = 0

    def add_record(self, nbytes: int) -> None:
        """A record of this transaction was handed to the producer."""
        self.pending += 1
        tracker = self._tracker
        tracker.in_flight_records += 1
        tracker.in_flight_bytes += nbytes

    def __call__(self, err: KafkaCause | None, msg: DeliveredRecord) -> None:
        if err is None:
            self._tracker.delivered(self, len(msg))
        else:
            topic = msg.topic()
            table = self._tracker.tables.get(topic) if topic else None
            error = delivery_error(topic, msg.partition(), err.str(), table)
            self._tracker.delivered(self, len(msg), error)

    @property
    def complete(self) -> bool:
        """Closed, and every record confirmed by Kafka."""
        return self.closed and not self.pending and not self.failed

    def __repr__(self) -> str:
        state = "failed" if self.failed else "closed" if self.closed else "open"
        return f"TxHandle({state}, pending={self.pending}, end_lsn={self.end_lsn})"


class AckTracker:
    """Transactions in commit order, their outstanding records, and the watermark.

    `start_lsn` is the slot's confirmed position: the watermark never reports less.
    """

    def __init__(self, start_lsn: int = 0) -> None:
        self._txs: deque[TxHandle] = deque()  # not yet acknowledgeable, commit order
        self._done = start_lsn  # everything at or below is delivered (holds not applied)
        self._reported = start_lsn
        self.in_flight_records = 0
        self.in_flight_bytes = 0
        self.error: DeliveryError | None = None  # the first failure; the tracker is frozen
        self.tables: dict[str, str] = {}  # topic -> "schema.table", so failures name the table

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def open_transactions(self) -> int:
        """Transactions opened and not yet passed by the watermark (for metrics)."""
        return len(self._txs)

    def open_tx(self) -> TxHandle:
        """Start a transaction (at TxBegin); call in commit order."""
        handle = TxHandle(self)
        self._txs.append(handle)
        return handle

    def close_tx(self, handle: TxHandle, end_lsn: int) -> None:
        """The transaction's commit was seen: it is complete once its records are."""
        handle.end_lsn = end_lsn
        handle.closed = True

    def delivered(self, handle: TxHandle, nbytes: int, error: DeliveryError | None = None) -> None:
        """Kafka reported on one record of `handle`: success, or failure with `error`."""
        handle.pending -= 1
        self.in_flight_records -= 1
        self.in_flight_bytes -= nbytes
        if error is not None:
            self.fail(handle, error)

    def fail(self, handle: TxHandle, error: DeliveryError) -> None:
        """`handle` lost a record: the watermark stays below it for good."""
        handle.failed = True
        if self.error is None:
            self.error = error

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error

    def flush_lsn(
        self,
        *,
        idle_position: int | None = None,
        server_wal_end: int = 0,
        holds: Iterable[int | None] = (),
    ) -> int:
        """The position to report as flushed; never lower than the previous result.

        The whole decision is here. `idle_position` is a position such that every
        transaction whose commit record starts below it has been opened here (the
        assembler's `idle_wal_end()`, None while a transaction or stream block is open);
        `server_wal_end` (the last keepalive's position) raises it while the assembler is
        idle. It is followed only when nothing is open or in flight, so an idle slot does
        not hold WAL back. It may lie inside a transaction not yet sent: on restart
        PostgreSQL skips only transactions whose commit record starts below the confirmed
        position.

        The result stays strictly below every LSN in `holds` (undecided prepared
        transactions, Kafka transactions not yet committed; None holds nothing) unless
        an earlier result already passed it.
        """
        txs = self._txs
        done = self._done
        while txs:
            head = txs[0]
            if not head.closed or head.pending or head.failed:
                break
            done = max(done, head.end_lsn)
            txs.popleft()
        if not txs and idle_position is not None:
            done = max(done, idle_position, server_wal_end)
        self._done = done
        for hold in holds:
            if hold is not None:
                done = min(done, hold - 1)
        self._reported = max(self._reported, done)
        return self._reported


class CommitTimes:
    """Commit times of the transactions not yet confirmed to PostgreSQL, oldest first,
    for the source-lag metric (`bridge.metrics.Metrics.source_lag_seconds`).

    Here, compiled, rather than in the plain-Python metrics module: `committed` runs
    once per transaction, i.e. once per row in single-row transactions. Times stay as
    on the wire (µs since 2000-01-01); the metric converts them when read.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: deque[tuple[int, int]] = deque()  # (end LSN, commit time)

    def committed(self, end_lsn: int, commit_ts: int) -> None:
        """A transaction's commit was seen."""
        self._pending.append((end_lsn, commit_ts))

    def confirmed(self, flush_lsn: int) -> int | None:
        """Forget the transactions ending at or below `flush_lsn`; the commit time of the
        newest of them, None if there was none."""
        pending = self._pending
        last: int | None = None
        while pending and pending[0][0] <= flush_lsn:
            last = pending.popleft()[1]
        return last

    def oldest(self) -> int | None:
        """The commit time of the oldest transaction not yet confirmed (one read of the
        queue, safe from a scrape thread)."""
        pending = self._pending
        return pending[0][1] if pending else None
