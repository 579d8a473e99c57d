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

An unfinished snapshot (state pending/running in the progress store) is resumed
whatever the mode, except no_data. A fresh slot's own exported snapshot is the
exact seam: it sees every transaction committed before the slot's consistent point
and the slot streams every one after it. Any other snapshot (a resume, `always` on
an existing slot) is taken from a TEMPORARY slot created for it: its view is
exact at its own consistent point P, which is at or after the main slot's confirmed
position C (never acknowledged past C during a snapshot). Streaming then replays
(C, P] after the snapshot rows: a key changed there gets its streamed events after
its snapshot row, ending at its latest state, and a row deleted there gets its
delete. Skipping (C, P] instead would lose those deletes, so the replay stays: at
least once, converging to the table's state.
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
    imported the snapshot) drops it.
    """

    def __init__(self, conninfo: dict[str, Any], base_name: str) -> None:
        self._rc = libpq.ReplicationConnection(libpq.connect(conninfo, replication=True))
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
