"""When to send standby status updates, and with which positions (pure, clock injected).

The positions only move forward: PostgreSQL ignores a flush position lower than the
slot's confirmed_flush_lsn, but a regressing report would be a bug on our side that
would hide a real one, so it is refused here.
"""

from __future__ import annotations

from typing import Final

from bridge.source.envelope import PG_EPOCH_OFFSET_US, status_update

# A flush position that moved is reported within this many seconds, so the slot's
# confirmed position (what monitoring reads as lag, and what lets the server recycle
# WAL) trails delivery by at most that much. A report is one 34-byte message.
FLUSH_REPORT_S: Final = 0.2


class StatusTracker:
    """Positions to report (`received`, `flushed`) and the update schedule."""

    def __init__(self, interval_s: float, start_lsn: int = 0) -> None:
        self.interval_s = interval_s
        self._flush_gap_s = min(FLUSH_REPORT_S, interval_s)
        self.received = start_lsn
        self.flushed = start_lsn
        self._last_sent: float | None = None
        self._last_flushed_sent = -1

    def on_received(self, wal_end: int) -> None:
        self.received = max(self.received, wal_end)

    def on_flushed(self, lsn: int) -> None:
        """Raise the flush position; a lower value is ignored (monotonic)."""
        self.flushed = max(self.flushed, lsn)

    def due(self, now: float) -> bool:
        """A periodic update is due, or the flush position moved (at most every
        FLUSH_REPORT_S)."""
        if self._last_sent is None:
            return True
        elapsed = now - self._last_sent
        if elapsed >= self.interval_s:
            return True
        return self.flushed != self._last_flushed_sent and elapsed >= self._flush_gap_s

    def seconds_until_due(self, now: float) -> float:
        if self._last_sent is None:
            return 0.0
        gap = self._flush_gap_s if self.flushed != self._last_flushed_sent else self.interval_s
        return max(0.0, self._last_sent + gap - now)

    def build(self, now: float, wall_us: int, reply: bool = False) -> bytes:
        """The `r` message for the current positions; records it as sent.

        `wall_us` is Unix time in µs (converted to the PostgreSQL epoch here).
        """
        self._last_sent = now
        self._last_flushed_sent = self.flushed
        write = max(self.received, self.flushed)
        return status_update(write, self.flushed, self.flushed, wall_us - PG_EPOCH_OFFSET_US, reply)
