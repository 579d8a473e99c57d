"""The per-message half of `bridge.source.libpq`: the read of one CopyData message.

`ReplicationStream.read` asks for one message per row under load, and the interpreted
method that did this read (libpq.py is not compiled: its psycopg subclass cannot be)
cost ~524 instructions per row of frame evaluation. This class is libpq.py's
`ReplicationConnection.read_copy`, compiled: the same two calls into psycopg's C code
(`get_copy_data`, `consume_input`) and the same bounded wait (`Waiter.ready`, at most
`timeout` seconds, cut short by a stop). Everything else about the connection (its
commands, its errors, the end of the stream) stays in libpq.py, which builds this
reader and hands it the callbacks for the rare cases.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from bridge.source.waiting import READ, Waiter


class CopyReader:
    """Reads the COPY BOTH stream of one `replication=database` connection."""

    def __init__(
        self,
        pgconn: Any,
        waiter: Waiter,
        consume: Callable[[], None],
        end_of_copy: Callable[[], NoReturn],
    ) -> None:
        # Bound once, not looked up on every message.
        self._get_copy_data = pgconn.get_copy_data
        self._waiter = waiter
        self._consume = consume  # libpq's consume_input, its error as the bridge's
        self._end_of_copy = end_of_copy  # the stream ended: the server's error, raised

    def read(self, timeout: float) -> bytes | None:
        """Next CopyData message (copied out of libpq's buffer), or None if none arrived
        within `timeout` seconds (or a stop came first)."""
        # Typed as the (int, memoryview) tuple psycopg returns: unpacked by index and the
        # count compared natively, where an untyped result was unpacked through an
        # iterator and compared generically (~500 instructions a message).
        got: tuple[int, Any] = self._get_copy_data(1)
        nbytes = got[0]
        if nbytes == 0:
            if timeout > 0 and not self._waiter.ready(READ, timeout):
                return None
            self._consume()
            got = self._get_copy_data(1)
            nbytes = got[0]
            if nbytes == 0:
                return None
        if nbytes > 0:
            # Copied out of psycopg's memoryview over libpq's buffer: `tobytes()` copies
            # straight away, where `bytes(view)` first looks for `__bytes__` and goes
            # through the buffer protocol (~900 instructions more for 300 bytes).
            data: bytes = got[1].tobytes()
            return data
        self._end_of_copy()
