"""The one module that touches psycopg's low-level (libpq) connection.

psycopg 3 has no replication API, so walsender commands run through `PQexec`
(replication connections accept only the simple query protocol) and the COPY BOTH
stream through `PQgetCopyData`/`PQputCopyData` in non-blocking mode, waiting on the
socket with a timeout so the caller's loop keeps control of its schedule.
"""

from __future__ import annotations

import selectors
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn

import psycopg
from psycopg import pq, sql

from bridge.errors import SourceError

SQLSTATE_OBJECT_IN_USE = "55006"
COPY_BLOCK_BYTES: Final = 64 << 10  # `copy_out`: ~400 rows of ~160 bytes per block

# The text-format value parsers (bridge/encode/textvalues.py) read dates, intervals
# and floats in exactly these formats, and the walsender formats values with its
# own session settings, so they are pinned on every connection rather than trusted
# from the server, database or role defaults. They come after the user's options:
# for `-c`, the last setting wins.
SESSION_OPTIONS: Final = "-c DateStyle=ISO -c IntervalStyle=postgres -c extra_float_digits=3"


class CommandError(SourceError):
    """A walsender or SQL command failed; `sqlstate` lets callers react to specific codes."""

    def __init__(self, command: str, sqlstate: str, detail: str) -> None:
        super().__init__(f"{command} failed: [{sqlstate}] {detail}")
        self.sqlstate = sqlstate


def connect(conninfo: dict[str, Any], *, replication: bool) -> psycopg.Connection[Any]:
    """Open an autocommit connection with `SESSION_OPTIONS` merged into the user's `options`.

    libpq's own error message never contains the password.
    """
    params = dict(conninfo)
    if replication:
        params["replication"] = "database"
    user_options = str(params.get("options") or "").strip()
    params["options"] = f"{user_options} {SESSION_OPTIONS}" if user_options else SESSION_OPTIONS
    try:
        return psycopg.connect(autocommit=True, **params)
    except psycopg.OperationalError as exc:
        where = f"{params.get('host')}:{params.get('port')}/{params.get('dbname')}"
        raise SourceError(
            f"cannot connect to PostgreSQL at {where} as {params.get('user')}: {str(exc).strip()}",
            hint="check source.host/port/dbname/user/password (and sslmode/sslrootcert for a TLS "
            "error) and that the server accepts connections (pg_hba.conf allows 'replication' "
            "for this role)",
        ) from None


def fetch_one(
    conn: psycopg.Connection[Any],
    query: bytes,
    params: Sequence[bytes | None],
    types: Sequence[int],
    formats: Sequence[int],
) -> tuple[bytes | None, ...] | None:
    """The first row of `query` in text format, None without one.

    Parameters go as raw bytes, each with its type oid and format (0 text, 1 binary): a
    value from a replication tuple is passed exactly as the walsender sent it, in either
    format, with no conversion through Python objects. The values come back as the
    server's text output, as a text tuple from the walsender has them (same pinned
    session settings)."""
    try:
        res = conn.pgconn.exec_params(query, params, types, formats, 0)
    except psycopg.OperationalError as exc:
        raise SourceError(
            f"SELECT failed: the connection to PostgreSQL is lost: {str(exc).strip()}",
            hint="the bridge exits; on restart it resumes from the slot's confirmed_flush_lsn",
        ) from None
    ReplicationConnection._check(res, "SELECT", (pq.ExecStatus.TUPLES_OK,))
    if res.ntuples == 0:
        return None
    row: list[bytes | None] = []
    for c in range(res.nfields):
        v = res.get_value(0, c)
        row.append(None if v is None else bytes(v))
    return tuple(row)


def copy_out(
    conn: psycopg.Connection[Any],
    statement: sql.Composed,
    params: Sequence[Any],
    sink: Callable[[bytes], object],
) -> None:
    """Run `statement` (a `COPY … TO STDOUT`) and hand its output to `sink` in blocks of
    whole rows, in order.

    A block goes to `sink` once `COPY_BLOCK_BYTES` have arrived, or as soon as libpq has
    no more rows at hand: the server sends the next rows while `sink` encodes, instead of
    the reader waiting for a whole chunk and then the server for the reader. psycopg
    starts the COPY (it adapts the parameters); the rows are then taken here straight
    from libpq, where psycopg's `Copy.read` runs a generator per row. Waits on the socket
    release the GIL. A failed COPY raises `CommandError`; psycopg cancels and drains one
    left by any other error, `sink`'s included."""
    pg = conn.pgconn
    parts: list[Any] = []  # psycopg's memoryviews over libpq's buffers, joined per block
    size = 0
    with conn.cursor().copy(statement, params), selectors.DefaultSelector() as selector:
        selector.register(pg.socket, selectors.EVENT_READ)
        while True:
            nbytes, data = pg.get_copy_data(1)
            if nbytes > 0:
                parts.append(data)
                size += nbytes
                if size < COPY_BLOCK_BYTES:
                    continue
            if parts:  # a full block, no more rows at hand, or the end
                sink(b"".join(parts))
                parts.clear()
                size = 0
            elif nbytes == 0:
                selector.select()
                pg.consume_input()
            if nbytes < 0:
                break
        while pg.is_busy():
            selector.select()
            pg.consume_input()
        res = pg.get_result()
        if res is None:
            raise SourceError(
                f"COPY ended without a result: {(pg.error_message or b'').decode().strip()}",
                hint="the connection to PostgreSQL was lost; restart the bridge to resume",
            )
        ReplicationConnection._check(res, "COPY", (pq.ExecStatus.COMMAND_OK,))
        while pg.get_result() is not None:
            pass


class ReplicationConnection:
    """Walsender commands and the COPY BOTH stream over one `replication=database` link."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._pg = conn.pgconn
        self._selector: selectors.DefaultSelector | None = None

    def quote(self, part: sql.Composable) -> str:
        return part.as_string(self.conn)

    def command(self, text: str) -> list[tuple[str | None, ...]]:
        """Run one command with the simple query protocol; rows come back as text."""
        res = self._pg.exec_(text.encode())
        self._check(res, text, (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK))
        rows = []
        for r in range(res.ntuples):
            row = []
            for c in range(res.nfields):
                v = res.get_value(r, c)
                row.append(None if v is None else bytes(v).decode())
            rows.append(tuple(row))
        return rows

    def start_copy_both(self, text: str) -> None:
        """Send START_REPLICATION and enter COPY BOTH mode."""
        res = self._pg.exec_(text.encode())
        self._check(res, text.split("(", maxsplit=1)[0].strip(), (pq.ExecStatus.COPY_BOTH,))
        self._pg.nonblocking = 1
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._pg.socket, selectors.EVENT_READ)

    def read_copy(self, timeout: float) -> bytes | None:
        """Next CopyData message (copied out of libpq's buffer), or None if none arrived
        within `timeout` seconds."""
        assert self._selector is not None, "read_copy before start_copy_both"
        nbytes, data = self._pg.get_copy_data(1)
        if nbytes == 0:
            if timeout > 0 and not self._selector.select(timeout):
                return None
            self._consume()
            nbytes, data = self._pg.get_copy_data(1)
            if nbytes == 0:
                return None
        if nbytes > 0:
            return bytes(data)  # from psycopg's memoryview over libpq's buffer
        self._end_of_copy()

    def write_copy(self, data: bytes) -> None:
        """Queue one CopyData message and push it to the socket."""
        try:
            if self._pg.put_copy_data(data) != 1:
                self._raise_connection("sending a status update")
            self._flush()
        except psycopg.OperationalError:
            self._raise_connection("sending a status update")

    def finish_copy(self, timeout: float = 5.0) -> None:
        """CopyDone, then drain until the server ends the stream (clean shutdown).

        Data the server still sends is dropped: we asked to stop, and whatever was
        not acknowledged will be sent again on the next start.
        """
        if self._selector is None:
            return
        self._pg.put_copy_end()
        self._flush()
        deadline = time.monotonic() + timeout
        while True:
            nbytes, _ = self._pg.get_copy_data(1)
            if nbytes < 0:
                break
            if nbytes == 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._selector.select(remaining):
                    return  # the server did not answer in time; close() ends the link
                self._consume()
        while not self._pg.is_busy() or self._selector.select(
            max(0.0, deadline - time.monotonic())
        ):
            self._consume()
            if self._pg.is_busy():
                continue
            if self._pg.get_result() is None:
                break
        self._selector.close()
        self._selector = None

    def close(self) -> None:
        self.conn.close()

    def _consume(self) -> None:
        try:
            self._pg.consume_input()
        except psycopg.OperationalError:
            self._raise_connection("reading the replication stream")

    def _flush(self) -> None:
        while self._pg.flush() == 1:
            sel = selectors.DefaultSelector()
            sel.register(self._pg.socket, selectors.EVENT_WRITE | selectors.EVENT_READ)
            sel.select(1.0)
            sel.close()
            self._consume()

    def _end_of_copy(self) -> NoReturn:
        res = self._pg.get_result()
        if res is not None and res.status == pq.ExecStatus.FATAL_ERROR:
            self._check(res, "START_REPLICATION", ())
        self._raise_connection("streaming")

    def _raise_connection(self, doing: str) -> NoReturn:
        msg = (self._pg.error_message or b"connection closed").decode(errors="replace").strip()
        raise SourceError(
            f"replication connection lost while {doing}: {msg}",
            hint="the bridge exits; on restart it resumes from the slot's confirmed_flush_lsn",
        )

    @staticmethod
    def _check(res: pq.abc.PGresult, command: str, ok: tuple[pq.ExecStatus, ...]) -> None:
        if res.status in ok:
            return
        sqlstate = (res.error_field(pq.DiagnosticField.SQLSTATE) or b"?????").decode()
        primary = res.error_field(pq.DiagnosticField.MESSAGE_PRIMARY)
        detail = (primary or res.error_message or b"unknown error").decode(errors="replace")
        raise CommandError(command, sqlstate, detail.strip())
