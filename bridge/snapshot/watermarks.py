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
  standby's wait, which lasts until the bridge confirms it, or plain scheduling) would
  make the rows of the keys it changed older than changes already sent. The snapshotter
  remembers the keys each xid changed since the last snapshot (`Streamed`); the rows of
  the keys changed by an xid S does not see (in progress, or at or past its xmax) are
  dropped (the chunk is read again later when those keys are not known: a TRUNCATE, or
  more than `_KEYS_PER_XID`).

Debezium's PostgreSQL read-only snapshot orders by xid alone (its window closes at the
first event whose xid is past both watermarks' xmax, or on a heartbeat); the WAL position
bound also closes the window on an idle stream, and the streamed keys cover the last
case.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, NamedTuple

from bridge.errors import SourceError
from bridge.lsn import LSN

QUERY: Final = "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text"
_XID32: Final = 0xFFFFFFFF
_KEYS_PER_XID: Final = 10_000  # keys remembered of one transaction; more: "many"
Key = tuple[int, bytes | None]  # (relation oid, record key)
# Page headers: a short one on each WAL page, a long one at the start of a segment.
_SHORT_HEADER: Final = 24
_LONG_HEADER: Final = 40


class Watermark(NamedTuple):
    """What a chunk read saw: S's xmax and in-progress xids (64-bit, as
    `pg_current_snapshot()` prints them), and the position below which every commit
    record of a transaction S sees starts."""

    xmax: int
    in_progress: frozenset[int]
    until: int

    @classmethod
    def parse(cls, snapshot: str, insert_lsn: str, wal_block_size: int) -> Watermark:
        """From `pg_current_snapshot()::text` ("xmin:xmax:xip,...") and the insert LSN."""
        try:
            _, xmax, xip = snapshot.split(":")
            in_progress = frozenset(int(x) for x in xip.split(",") if x)
            bound = record_bound(int(LSN.parse(insert_lsn)), wal_block_size)
            return cls(int(xmax), in_progress, bound)
        except ValueError:
            raise SourceError(
                f"unexpected pg_current_snapshot() output {snapshot!r}",
                hint="snapshot.read_only needs PostgreSQL 13 or later",
            ) from None

    def sees(self, xid: int) -> bool:
        """Whether S sees the committed transaction `xid` (32 bits, as the stream's BEGIN
        has it). Not when S lists it in progress, nor at or past S's xmax: xmax is the
        newest *completed* xid + 1, so a transaction whose commit record is written but
        that is still in the proc array (waiting for a synchronous standby) can be there."""
        diff = (xid - self.xmax) & _XID32  # its full xid: the one within 2^31 of xmax
        full = self.xmax + (diff - (1 << 32) if diff >= 1 << 31 else diff)
        return full < self.xmax and full not in self.in_progress


class Streamed:
    """The keys each transaction changed, per xid, as the stream delivered them since the
    last snapshot; `settle` keeps those of the xids a snapshot still shows in progress
    (every other one has left the proc array: every later snapshot sees it)."""

    def __init__(self) -> None:
        self._keys: dict[int, set[Key] | None] = {}  # None: not known (TRUNCATE, too many)
        self._xid: int | None = None
        self._current: set[Key] | None = None
        self.size = 0  # xids and keys held: `settle` against a fresh snapshot when it grows

    def add(self, xid: int, oid: int, keys: Iterable[bytes | None], whole: bool) -> None:
        """Keys of relation `oid` changed by `xid` (`whole`: all of them, a TRUNCATE)."""
        if xid != self._xid:
            self._xid = xid
            if xid not in self._keys:
                self.size += 1
            self._current = self._keys.setdefault(xid, set())
        current = self._current
        if current is None:
            return
        before = len(current)
        current.update((oid, key) for key in keys)
        self.size += len(current) - before
        if whole or len(current) > _KEYS_PER_XID:
            self._keys[xid] = self._current = None

    def settle(self, mark: Watermark) -> dict[int, set[Key] | None]:
        """Forget the xids `mark`'s snapshot sees (every later snapshot sees them too);
        the others, with their keys."""
        self._keys = {x: k for x, k in self._keys.items() if not mark.sees(x)}
        if self._xid is not None and self._xid not in self._keys:
            self._current = None  # the transaction at hand is seen: nothing more to keep
        self.size = len(self._keys) + sum(len(k) for k in self._keys.values() if k is not None)
        return self._keys

    def stale(self, mark: Watermark, oid: int) -> set[bytes | None] | None:
        """The keys of `oid` whose rows read in `mark`'s snapshot are older than changes
        already streamed; None when not all of them are known (read again later)."""
        stale: set[bytes | None] = set()
        for keys in self.settle(mark).values():
            if keys is None:
                return None
            stale.update(key for key_oid, key in keys if key_oid == oid)
        return stale


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
