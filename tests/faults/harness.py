"""What a fault scenario checks after its fault, beyond the delivery suite's ledger stream
(delivery.ledger: open_ledger_stream, warm_up, stop_bridge): the slot's position, and the
final read against the rows the table holds."""

from __future__ import annotations

import psycopg
from delivery.helpers import Checkable, slot_state
from delivery.kafka_io import TopicReader
from delivery.ledger import LedgerWriter, ledger_occurrences

from bridge.lsn import LSN

from .checker import committed_rows


def acked(dsn: str, slot: str) -> LSN:
    """confirmed_flush_lsn now: what PostgreSQL would not resend after a fault."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        state = slot_state(conn, slot)
    assert state is not None, f"slot {slot} vanished"
    return state.confirmed_flush


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
