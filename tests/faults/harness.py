"""What every fault scenario does around its fault: a ledger stream, and the final read."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import psycopg
from delivery.helpers import BridgeProcess, Checkable, SlotMonitor, slot_state, wait_slot_active
from delivery.kafka_io import TopicReader, create_topics
from delivery.ledger import LEDGER_DDL, LedgerWriter, ledger_occurrences

from bridge.lsn import LSN

from .checker import Fault, committed_rows


class LedgerReader(TopicReader):
    """A TopicReader whose end of topic is the consumer position, not the last offset seen:
    exactly-once transactions end in commit markers a consumer never receives."""

    def read_to_end(self, timeout: float = 60.0) -> None:
        consumer = self._consumer
        ends = {
            (tp.topic, tp.partition): consumer.get_watermark_offsets(tp, timeout=30)[1]
            for tp in self._partitions
        }

        def done(records: list[Any]) -> bool:
            positions = consumer.position(self._partitions)
            return all(tp.offset >= ends[(tp.topic, tp.partition)] for tp in positions)

        self.read_until(done, timeout, "the high watermarks")


def ledger_topic(
    conn: psycopg.Connection[Any], bootstrap: str, registry_url: str, prefix: str
) -> LedgerReader:
    """Create the ledger table and its topic (append times on); read the topic."""
    conn.execute(LEDGER_DDL)
    topics = create_topics(bootstrap, [f"{prefix}.public.ledger"])
    return LedgerReader(bootstrap, registry_url, topics)


class LedgerStream(NamedTuple):
    reader: LedgerReader
    monitor: SlotMonitor
    writer: LedgerWriter
    floor: LSN  # confirmed_flush_lsn when the bridge's slot turned active


@contextmanager
def ledger_stream(
    dsn: str,
    slot: str,
    prefix: str,
    bootstrap: str,
    registry_url: str,
    bridge: BridgeProcess,
    *,
    rate: float = 100,
    reconnect: bool = False,
) -> Iterator[LedgerStream]:
    """The ledger topic read, `bridge` started, its slot watched and a writer committing
    3-row transactions at `rate`/s; writer, monitor and reader stopped on exit (what they
    gathered stays readable). Setup uses a connection of its own, closed before yielding,
    so a scenario may restart PostgreSQL."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        reader = ledger_topic(conn, bootstrap, registry_url, prefix)
        try:
            bridge.start()
            floor = wait_slot_active(conn, slot, bridge).confirmed_flush
        except BaseException:
            reader.close()
            raise
    monitor = SlotMonitor(dsn, slot)
    writer = LedgerWriter(dsn, rows_per_txn=3, rate=rate, reconnect=reconnect)
    try:
        yield LedgerStream(reader, monitor, writer, floor)
    finally:
        writer.stop()
        monitor.stop()
        reader.close()


def warm_up(stream: LedgerStream, bridge: BridgeProcess, records: int) -> None:
    """Wait for `records` records and an acknowledgement past the starting point."""
    stream.reader.read_until(
        lambda recs: len(recs) >= records and stream.monitor.flushed() > stream.floor,
        60,
        f"{records} records and an acknowledgement",
        watch=bridge,
    )


def acked(dsn: str, slot: str) -> LSN:
    """confirmed_flush_lsn now: what PostgreSQL would not resend after a fault."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        state = slot_state(conn, slot)
    assert state is not None, f"slot {slot} vanished"
    return state.confirmed_flush


def fault(dsn: str, slot: str, t_ms: float, what: str) -> Fault:
    return Fault(t_ms, acked(dsn, slot), what)


def drain(
    dsn: str, reader: TopicReader, writer: LedgerWriter | None, watch: Checkable
) -> set[tuple[int, int]]:
    """Stop writing, wait until Kafka holds every row PostgreSQL committed; return those rows.

    The rows come from the table, not from the writer's bookkeeping, so a commit
    the writer never heard about (connection lost at COMMIT) is still checked.
    """
    if writer is not None:
        writer.stop()
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = committed_rows(conn)
    reader.read_until(
        lambda recs: rows <= ledger_occurrences(recs).keys(), 180, "every committed row", watch
    )
    return rows


def stop_bridge(bridge: BridgeProcess, reader: TopicReader) -> None:
    bridge.terminate()
    assert bridge.wait(60) == 0, bridge.log()
    reader.read_to_end()


def settings_with(settings: dict[str, Any], **sections: dict[str, Any]) -> dict[str, Any]:
    for name, values in sections.items():
        settings.setdefault(name, {}).update(values)
    return settings
