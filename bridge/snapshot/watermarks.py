"""Read-only watermarks (`snapshot.read_only`): a chunk read is placed in the stream by its
own transaction snapshot and a WAL position, not by rows written around it.

The chunk is read in a REPEATABLE READ transaction whose first statement takes
`pg_current_snapshot()` (the transaction's snapshot S: xmin, xmax and the in-progress
xids) and `pg_current_wal_insert_lsn()` (H) together; the chunk's SELECT then sees S.

- Every transaction S sees had left the proc array before S was taken, and had inserted
  its commit record before that: its commit record starts below H. So once the stream
  has passed every transaction whose commit record starts below H, it has passed every
  change the rows contain; the rows go out there (at the first change of a transaction
  committed at or past H, or when the stream is idle at or past H).
- Between the read and that point, a streamed change to a key of the chunk drops the key
  from the chunk: the streamed event (and any later one) carries the key's state.
- A transaction the stream had already delivered before the read but that S does not see
  (its commit record is written, it has not yet left the proc array: a synchronous
  standby's wait, or plain scheduling) would make a row older than a change already sent.
  The snapshotter remembers the xids it has streamed since the last snapshot; one of them
  among S's in-progress xids means the chunk is read again later (`stuck`).

Debezium's PostgreSQL read-only snapshot orders by xid alone (its window closes at the
first event whose xid is past both watermarks' xmax, or on a heartbeat); the WAL position
bound also closes the window on an idle stream, and the streamed-xid check covers the
last case.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from bridge.errors import SourceError
from bridge.lsn import LSN

QUERY: Final = "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text"
_XID32: Final = 0xFFFFFFFF
# Page headers: a short one on each WAL page, a long one at the start of a segment.
_SHORT_HEADER: Final = 24
_LONG_HEADER: Final = 40


class Watermark(NamedTuple):
    """What a chunk read saw: S's in-progress xids (low 32 bits, as the stream's xids are)
    and the position below which every commit record of a transaction S sees starts."""

    in_progress: frozenset[int]
    until: int

    @classmethod
    def parse(cls, snapshot: str, insert_lsn: str, wal_block_size: int) -> Watermark:
        """From `pg_current_snapshot()::text` ("xmin:xmax:xip,...") and the insert LSN."""
        try:
            _, _, xip = snapshot.split(":")
            in_progress = frozenset(int(x) & _XID32 for x in xip.split(",") if x)
        except ValueError:
            raise SourceError(
                f"unexpected pg_current_snapshot() output {snapshot!r}",
                hint="snapshot.read_only needs PostgreSQL 13 or later",
            ) from None
        return cls(in_progress, record_bound(int(LSN.parse(insert_lsn)), wal_block_size))

    def stuck(self, streamed: set[int]) -> set[int]:
        """The streamed xids S still shows in progress (the read is then redone)."""
        return streamed & self.in_progress


def record_bound(insert_lsn: int, wal_block_size: int) -> int:
    """The insert position with a page header just written taken back off it.

    At a page boundary the insert position points past the new page's header, where the
    stream's position (the end of the last record) stays at the boundary; no record
    starts inside a header, so the boundary bounds the commit records just as well and is
    reached by an idle stream. 40 bytes into a page is either past a long header or
    inside a record begun on the previous page: in both cases none starts in between."""
    offset = insert_lsn % wal_block_size
    if offset in (_SHORT_HEADER, _LONG_HEADER):
        return insert_lsn - offset
    return insert_lsn
