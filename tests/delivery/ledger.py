"""An append-only workload whose every row names its transaction, and its checks.

`ledger(id, txn, row, pad)`: transaction `txn` inserts rows 1..n. Each row maps to
exactly one Kafka record, so presence, duplicates and per-transaction completeness
can be read straight off the topic.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, NamedTuple

import psycopg

from bridge.lsn import LSN

from .helpers import BridgeProcess, SlotMonitor, SlotState, insert_lsn, wait_slot_active
from .kafka_io import Rec, TopicReader, assert_acks_follow_appends, create_topics

LEDGER_DDL = (
    "CREATE TABLE ledger (id bigserial PRIMARY KEY, txn int NOT NULL, row int NOT NULL, "
    "pad text NOT NULL)"
)


def ledger_reader(
    conn: psycopg.Connection[Any], bootstrap: str, registry_url: str, prefix: str
) -> TopicReader:
    """Create the ledger table and its topic (append times on); read the topic."""
    conn.execute(LEDGER_DDL)
    topics = create_topics(bootstrap, [f"{prefix}.public.ledger"])
    return TopicReader(bootstrap, registry_url, topics)


class Committed(NamedTuple):
    txn: int
    rows: int
    upper_lsn: LSN  # insert position right after COMMIT: at or past the commit's end


class LedgerWriter:
    """Commits ledger transactions on a thread, one connection, so commit order = `txn`.

    Commits are synchronous (the stack defaults to synchronous_commit = off, which
    may lose acknowledged commits in a server crash). With `reconnect`, a lost
    connection is reopened and an in-doubt transaction looked up, not guessed.
    """

    def __init__(
        self,
        dsn: str,
        rows_per_txn: int = 3,
        rate: float | None = None,
        limit: int | None = None,
        reconnect: bool = False,
    ) -> None:
        self.committed: list[Committed] = []
        self.error: BaseException | None = None
        self._dsn, self._rows, self._rate, self._limit = dsn, rows_per_txn, rate, limit
        self._reconnect = reconnect
        self._stop = threading.Event()
        self._go = threading.Event()  # cleared by `pause`
        self._go.set()
        self._parked = threading.Event()  # set while paused between transactions
        self._paused_s = 0.0  # pacing resumes where it paused, without a burst
        self._thread = threading.Thread(target=self._run, name="ledger-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        try:
            while not self._stop.is_set() and len(self.committed) != self._limit:
                try:
                    self._write(started)
                except psycopg.OperationalError:
                    if not self._reconnect:
                        raise
                    self._stop.wait(0.2)  # the server is restarting: retry shortly
        except BaseException as exc:
            self.error = exc

    def _write(self, started: float) -> None:
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            conn.execute("SET synchronous_commit = on")
            txn = len(self.committed) + 1
            found = conn.execute("SELECT count(*) FROM ledger WHERE txn = %s", (txn,)).fetchone()
            if found and found[0]:  # committed just before the connection was lost
                self.committed.append(Committed(txn, self._rows, insert_lsn(conn)))
            while not self._stop.is_set() and len(self.committed) != self._limit:
                if not self._go.is_set():
                    self._park()
                    continue
                txn = len(self.committed) + 1
                with conn.transaction():
                    conn.execute(
                        "INSERT INTO ledger (txn, row, pad) "
                        "SELECT %s, g, repeat('x', 100) FROM generate_series(1, %s) g",
                        (txn, self._rows),
                    )
                self.committed.append(Committed(txn, self._rows, insert_lsn(conn)))
                if self._rate:  # pacing, not synchronisation
                    due = started + self._paused_s + len(self.committed) / self._rate
                    ahead = due - time.monotonic()
                    if ahead > 0:
                        self._stop.wait(ahead)

    def _park(self) -> None:
        parked = time.monotonic()
        self._parked.set()
        while not self._go.wait(0.05) and not self._stop.is_set():
            pass
        self._parked.clear()
        self._paused_s += time.monotonic() - parked

    def pause(self) -> None:
        """Commit nothing more until `resume`; returns once the writer is between
        transactions (everything it committed is in `committed`)."""
        self._go.clear()
        assert self._parked.wait(30), "ledger writer did not pause"

    def resume(self) -> None:
        self._go.set()

    def finished(self) -> bool:
        return not self._thread.is_alive()

    def stop(self) -> list[Committed]:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "ledger writer did not stop"
        if self.error is not None:
            raise self.error
        return self.committed


def ledger_occurrences(records: list[Rec]) -> dict[tuple[int, int], list[Rec]]:
    """(txn, row) -> every record carrying it, in read order."""
    seen: dict[tuple[int, int], list[Rec]] = defaultdict(list)
    for rec in records:
        if rec.value is None or rec.value["after"] is None:
            continue
        after = rec.value["after"]
        seen[(after["txn"], after["row"])].append(rec)
    return seen


def assert_complete(committed: list[Committed], seen: dict[tuple[int, int], Any]) -> None:
    missing = [
        (c.txn, row) for c in committed for row in range(1, c.rows + 1) if (c.txn, row) not in seen
    ]
    assert not missing, f"{len(missing)} committed rows never reached Kafka, first {missing[:5]}"


def completion_times(
    committed: list[Committed], seen: dict[tuple[int, int], list[Rec]]
) -> dict[int, float]:
    """Commit LSN -> append time of the transaction's last first-arriving record."""
    out: dict[int, float] = {}
    for c in committed:
        firsts = [min(r.append_ms for r in seen[(c.txn, row)]) for row in range(1, c.rows + 1)]
        lsn = seen[(c.txn, 1)][0].commit_lsn
        out[lsn] = float(max(firsts))
    return out


def assert_resends_after(
    seen: dict[tuple[int, int], list[Rec]], run_starts: list[float], stopped_at: list[LSN]
) -> int:
    """Run r (records appended from `run_starts[r]` on) resent a row only if its
    transaction committed at or after `stopped_at[r - 1]`, the slot's position when
    run r - 1 ended; no run delivered a row twice. Returns the number of resends."""
    resent = 0
    for (txn, row), recs in seen.items():
        runs = [bisect.bisect_right(run_starts, r.append_ms) - 1 for r in recs]
        assert len(set(runs)) == len(runs), f"row {txn}/{row} delivered twice by one run"
        for rec, run in zip(recs[1:], runs[1:], strict=True):
            resent += 1
            assert rec.commit_lsn >= stopped_at[run - 1], (
                f"row {txn}/{row} (commit {LSN(rec.commit_lsn)}) resent although the slot "
                f"had confirmed {stopped_at[run - 1]} when run {run - 1} ended"
            )
    return resent


class LedgerStream(NamedTuple):
    """A ledger scenario in flight: what `open_ledger_stream` started."""

    dsn: str
    slot: str
    reader: TopicReader
    monitor: SlotMonitor
    writer: LedgerWriter
    started: SlotState  # the slot when the bridge began streaming from it

    @property
    def floor(self) -> LSN:
        """confirmed_flush_lsn when the bridge's slot turned active."""
        return self.started.confirmed_flush


LedgerStreamFactory = Callable[..., AbstractContextManager[LedgerStream]]
"""The `ledger_stream` fixture: open_ledger_stream bound to the test's database, slot and topics."""


@contextmanager
def open_ledger_stream(
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
    so a scenario may restart PostgreSQL. Tests get it bound to their database, slot and
    topics as the `ledger_stream` fixture."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        reader = ledger_reader(conn, bootstrap, registry_url, prefix)
        try:
            bridge.start()
            started = wait_slot_active(conn, slot, bridge)
        except BaseException:
            reader.close()
            raise
    monitor = SlotMonitor(dsn, slot)
    writer = LedgerWriter(dsn, rows_per_txn=3, rate=rate, reconnect=reconnect)
    try:
        yield LedgerStream(dsn, slot, reader, monitor, writer, started)
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


def read_every_row(stream: LedgerStream, bridge: BridgeProcess) -> list[Committed]:
    """Stop the writer; read until Kafka holds every row it committed, and return those."""
    committed = stream.writer.stop()
    expected = {(c.txn, row) for c in committed for row in range(1, c.rows + 1)}
    stream.reader.read_until(
        lambda recs: expected <= ledger_occurrences(recs).keys(), 120, "every row", bridge
    )
    return committed


def stop_bridge(bridge: BridgeProcess, reader: TopicReader, timeout: float = 60) -> None:
    """SIGTERM: the bridge exits 0 within `timeout` s; then read the topic to its end."""
    bridge.terminate()
    assert bridge.wait(timeout) == 0, bridge.log()
    reader.read_to_end()


def assert_delivered(
    stream: LedgerStream, committed: list[Committed]
) -> dict[tuple[int, int], list[Rec]]:
    """Every committed row is in Kafka, and no acknowledgement the slot monitor saw came
    before the broker appended what it covered. Returns the rows' records."""
    seen = ledger_occurrences(stream.reader.records)
    assert_complete(committed, seen)
    assert_acks_follow_appends(stream.monitor.samples, completion_times(committed, seen))
    return seen
