"""Snapshot modes (Debezium's names and meaning) and where each snapshot's view comes from.

initial       snapshot when the slot is created, then stream.
initial_only  the same snapshot, then stop without streaming.
no_data       never snapshot; stream only.
when_needed   like initial, and also when the slot's confirmed position is no longer
              available (wal_status "lost": its WAL was removed): the slot is then
              dropped and created again. Rows are brought back to their current
              state, but a row deleted in the lost stretch of WAL stays in Kafka: a
              snapshot can only emit rows that exist.
always        snapshot on every start, then stream.
external      like initial, but the rows are read by a load job of your own (the Spark
              initial load): the slot's snapshot is held open for it while streaming
              starts at once, until the load is recorded as done (`external`).

An unfinished snapshot (state pending/running in the progress store) is resumed
whatever the mode, except no_data. A fresh slot's own exported snapshot is the exact
seam: it sees every transaction committed before the slot's consistent point and the
slot streams every one after it. Any other snapshot (a resume, `always` on an
existing slot) is taken from a TEMPORARY slot created for it: its view is exact at
its own consistent point L, which is at or after the main slot's confirmed position
C. The changes committed between C and L are then both in the view and in the
stream, and they are older than the view, so per-key order wants the stream first.
The pipeline streams from C, delivers exactly the transactions whose commit record
starts below L (those a slot created at L would not decode, i.e. those the view
sees), waits until the slot shows them confirmed, and only then are the remaining
chunks read at L while the stream pauses (keepalives still answered); then it goes
on with the transactions from L. For every key the topic holds its older states, its
row at L, then its newer states, in commit order, across any number of kills: a kill
while the stream catches up resends only what followed the slot's position (at least
once, as any kill while streaming), and a kill while chunks are read at L restarts
the stream past L's transactions, so the next resume's catch-up brings only changes
newer than the rows already read at L. initial_only reads a resumed snapshot at
once: no stream follows it.

Designs considered: DBLog's key filter (emit the chunk rows first, then drop the
streamed changes at or below L for the keys they held) keeps memory per key, and
would have to store it durably to survive a second kill; this order needs no state
beyond the slot's position.
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

from psycopg import sql

from bridge.lsn import LSN
from bridge.snapshot.store import DONE
from bridge.source import libpq

FRESH, RESUME, AGAIN = "fresh", "resume", "again"


class SlotStatus(NamedTuple):
    exists: bool
    lost: bool  # wal_status 'lost': START_REPLICATION can no longer serve it


def slot_status(rc: libpq.ReplicationConnection, name: str) -> SlotStatus:
    rows = rc.command(
        "SELECT wal_status = 'lost' FROM pg_replication_slots "
        f"WHERE slot_name = {rc.quote(sql.Literal(name))}"
    )
    return SlotStatus(bool(rows), bool(rows) and rows[0][0] == "t")


def needs_new_slot(mode: str, status: SlotStatus) -> bool:
    """when_needed replaces a slot whose WAL is gone; other modes leave that to the stream."""
    return mode == "when_needed" and status.exists and status.lost


def wants_snapshot(mode: str) -> bool:
    return mode != "no_data"


def decide(mode: str, created: bool, run_state: str | None) -> str | None:
    """FRESH (read the new slot's export), RESUME, AGAIN (a new snapshot), or None."""
    if mode == "no_data":
        return None
    if created:
        return FRESH
    if run_state is not None and run_state != DONE:
        return RESUME
    if mode == "always":
        return AGAIN
    return None


def streams_after(mode: str) -> bool:
    return mode != "initial_only"


class TemporaryExport:
    """A TEMPORARY slot made only for its exported snapshot (resume and `always`).

    It lives as long as its replication connection: `close()` (once every reader has
    imported the snapshot) drops it. Until then the connection sits idle in the
    exporting transaction while the stream catches up, so a server-wide
    idle_in_transaction_session_timeout is switched off for it.
    """

    def __init__(self, conninfo: dict[str, Any], base_name: str) -> None:
        options = f"{conninfo.get('options') or ''} -c idle_in_transaction_session_timeout=0"
        conn = libpq.connect({**conninfo, "options": options.strip()}, replication=True)
        self._rc = libpq.ReplicationConnection(conn)
        name = f"{base_name[:40]}_snap_{uuid.uuid4().hex[:8]}"
        try:
            row = self._rc.command(
                f"CREATE_REPLICATION_SLOT {self._rc.quote(sql.Identifier(name))} TEMPORARY "
                "LOGICAL pgoutput (SNAPSHOT 'export')"
            )[0]
        except BaseException:
            self._rc.close()
            raise
        _, consistent, snapshot, _ = row
        self.snapshot_name = snapshot or ""
        self.lsn = LSN.parse(consistent or "0/0")

    def close(self) -> None:
        self._rc.close()
