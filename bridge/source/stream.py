"""The replication stream: XLogData out, keepalives answered, status updates sent.

Loop priority, highest first: (1) answer a keepalive that asks for a reply,
(2) send a due status update, (3) hand out the next XLogData. `service()` does
(1) and (2) without handing out data, for the pipeline to call while it is
blocked (producer queue full): PostgreSQL keeps hearing from us, so
`wal_sender_timeout` never fires because Kafka is slow.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from bridge.source.envelope import Keepalive, XLogData, parse
from bridge.source.status import StatusTracker


class CopyBoth(Protocol):
    """The COPY BOTH side of a connection (`bridge.source.libpq.ReplicationConnection`)."""

    def read_copy(self, timeout: float) -> bytes | None: ...

    def write_copy(self, data: bytes) -> None: ...

    def finish_copy(self) -> None: ...

    def close(self) -> None: ...


class ReplicationStream:
    def __init__(
        self,
        conn: CopyBoth,
        status: StatusTracker,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_us: Callable[[], int] = lambda: time.time_ns() // 1000,
    ) -> None:
        self._conn = conn
        self.status = status
        self._clock = clock
        self._wall_us = wall_us
        self._pending: XLogData | None = None
        self._status_at = 0.0  # clock reading before which no status update can be due
        # From the last keepalive: the walsender's decoding position. Every transaction
        # whose commit record starts below it was sent; one still open may straddle it.
        self.server_wal_end = 0
        self.closed = False

    def read(self, timeout: float) -> XLogData | None:
        """The next XLogData, or None when none arrived within `timeout` seconds."""
        if self._pending is not None:
            data, self._pending = self._pending, None
            return data
        now = self._clock()  # one reading per message under load
        deadline = now + timeout
        while True:
            if now >= self._status_at:
                self._send_status_if_due(now)
            # Buffered data returns at once (the common case under load); otherwise wait
            # until the deadline or the next status update, whichever comes first.
            raw = self._conn.read_copy(max(0.0, min(deadline, self._status_at) - now))
            if raw is None:
                now = self._clock()
                if now >= deadline:
                    return None
                continue
            msg = parse(raw)
            if isinstance(msg, Keepalive):
                self._on_keepalive(msg)
                now = self._clock()
                continue
            self.status.on_received(msg.wal_end)
            return msg

    def service(self) -> None:
        """Answer keepalives and send due status updates without consuming data.

        Reads at most up to the first XLogData, which is kept for the next `read()`.
        """
        while self._pending is None:
            raw = self._conn.read_copy(0)
            if raw is None:
                break
            msg = parse(raw)
            if isinstance(msg, Keepalive):
                self._on_keepalive(msg)
            else:
                self.status.on_received(msg.wal_end)
                self._pending = msg
        self._send_status_if_due(self._clock())

    def confirm(self, lsn: int) -> None:
        """Everything up to `lsn` is durably delivered: report it as flushed."""
        if lsn > self.status.flushed:
            self._status_at = 0.0  # a new flush position may make an update due sooner
        self.status.on_flushed(lsn)

    def send_status(self, reply: bool = False) -> None:
        self._conn.write_copy(self.status.build(self._clock(), self._wall_us(), reply))

    def close(self) -> None:
        """Final status update, CopyDone, close: the clean way out."""
        if self.closed:
            return
        self.closed = True
        try:
            self.send_status()
            self._conn.finish_copy()
        finally:
            self._conn.close()

    def _on_keepalive(self, msg: Keepalive) -> None:
        self.server_wal_end = max(self.server_wal_end, msg.wal_end)
        if msg.reply_requested:
            self.send_status()

    def _send_status_if_due(self, now: float) -> None:
        """Also caches when the next check is worth making: `read` skips it until then."""
        if self.status.due(now):
            self.send_status()
        self._status_at = now + self.status.seconds_until_due(now)
