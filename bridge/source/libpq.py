"""The one module that touches libpq, through psycopg's low-level connection (`pgconn`).

psycopg 3 has no replication API, so walsender commands, the COPY BOTH stream and the
snapshot's COPY TO run on libpq directly. Each exchange is a protocol step: a small
generator (`*_step` below) that calls libpq's non-blocking functions and yields the
socket events it would block on; `bridge.source.waiting.Waiter` does all the waiting,
with a deadline and the process's stop. psycopg's own queries on these connections go
through the same waiter (`Connection.wait`), so no call to PostgreSQL blocks past
`QUERY_TIMEOUT_S` nor past a stop: a query overdue or stopped is cancelled
(`abandon`), and the connection dropped when the server does not answer the cancel.

One libpq call sequence lives beside it: the read of one CopyData message, run once per
message, is `bridge.source.copyboth.CopyReader` (compiled; this module cannot be, for
its psycopg subclass), which `ReplicationConnection` builds and hands its error paths.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn, TypeVar

import psycopg
from psycopg import pq, sql
from psycopg.rows import tuple_row

from bridge.errors import SourceError, SourceTimeoutError, StopRequestedError
from bridge.source.copyboth import CopyReader
from bridge.source.waiting import READ, STOP, WRITE, Expired, Step, Stopped, Waiter

T = TypeVar("T")

SQLSTATE_OBJECT_IN_USE = "55006"
COPY_BLOCK_BYTES: Final = 64 << 10  # `copy_out`: ~400 rows of ~160 bytes per block

# How long one exchange may wait for the server: a query and its rows, a walsender
# command, one block of a COPY, a status update to be sent. Debezium's query timeout
# (database.query.timeout.ms) has the same default. A slot created while a transaction
# stays open for longer than this fails with this error, naming the wait.
QUERY_TIMEOUT_S: Final = 600.0
# A query given up on is cancelled; a server that does not take the cancel request, or
# does not answer the cancelled query, within these has its connection dropped.
CANCEL_TIMEOUT_S: Final = 2.0
CANCELLED_ANSWER_S: Final = 2.0
# libpq's smallest connect_timeout, for a connection opened once a stop is requested.
_STOPPING_CONNECT_S: Final = 2
# The clean end of the replication stream (CopyDone, and the server's own) at most.
FINISH_COPY_S: Final = 5.0

# The text-format value parsers (bridge/encode/textvalues.py) read dates, intervals
# and floats in exactly these formats, and the walsender formats values with its
# own session settings, so they are pinned on every connection rather than trusted
# from the server, database or role defaults. They come after the user's options:
# for `-c`, the last setting wins.
SESSION_OPTIONS: Final = "-c DateStyle=ISO -c IntervalStyle=postgres -c extra_float_digits=3"

_COPY_STATES: Final = (pq.ExecStatus.COPY_OUT, pq.ExecStatus.COPY_IN, pq.ExecStatus.COPY_BOTH)
_LOST_HINT: Final = "the bridge exits; on restart it resumes from the slot's confirmed_flush_lsn"


class CommandError(SourceError):
    """A walsender or SQL command failed; `sqlstate` lets callers react to specific codes."""

    def __init__(self, command: str, sqlstate: str, detail: str) -> None:
        super().__init__(f"{command} failed: [{sqlstate}] {detail}")
        self.sqlstate = sqlstate


class Link:
    """What the bridge's waits need of one connection: the waiter of its socket, the
    deadlines, and how errors name it (`purpose`, "catalog", "replication", ...; `where`,
    kept because psycopg's `info` is gone once the connection is closed)."""

    def __init__(self, conn: psycopg.Connection[Any], purpose: str = "connection") -> None:
        self.conn = conn
        self.pgconn = conn.pgconn
        self.waiter = Waiter(conn.pgconn.socket, STOP)
        self.timeout_s = QUERY_TIMEOUT_S
        self.cancel_timeout_s = CANCEL_TIMEOUT_S
        self.cancelled_answer_s = CANCELLED_ANSWER_S
        self.purpose = purpose
        self.where = f"{conn.info.host}:{conn.info.port}"


class Connection(psycopg.Connection[Any]):
    """A psycopg connection whose every wait is the bridge's (`link`): at most `timeout_s`
    per query, cut short by a stop; an overdue or stopped query is cancelled."""

    def __init__(self, pgconn: Any, row_factory: Any = tuple_row) -> None:
        super().__init__(pgconn, row_factory)
        self.link = Link(self)

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        if timeout is not None:  # a wait psycopg bounds itself (notifies): its own rules
            return super().wait(gen, interval, timeout)
        return run(self.link, gen, "a query")


def link_of(conn: psycopg.Connection[Any]) -> Link:
    """The link of a connection `connect` opened; for any other psycopg connection (a
    test's, a tool's), one with the default deadlines."""
    return conn.link if isinstance(conn, Connection) else Link(conn)


def connect(
    conninfo: dict[str, Any], *, replication: bool, purpose: str | None = None
) -> Connection:
    """Open an autocommit connection with `SESSION_OPTIONS` merged into the user's `options`.

    Connecting is bounded by libpq's `connect_timeout` (per host); a stop ends it at once
    in the main thread (`StopRequestedError`), and once stopping a connection is given
    `_STOPPING_CONNECT_S` at most. libpq's own error message never contains the password."""
    params = dict(conninfo)
    if replication:
        params["replication"] = "database"
    user_options = str(params.get("options") or "").strip()
    params["options"] = f"{user_options} {SESSION_OPTIONS}" if user_options else SESSION_OPTIONS
    where = f"{params.get('host')}:{params.get('port')}/{params.get('dbname')}"
    if STOP.requested:  # stopping: a server that does not answer at once is not waited for
        params["connect_timeout"] = _STOPPING_CONNECT_S
    try:
        with STOP.interruptible():
            conn = Connection.connect(autocommit=True, **params)
    except Stopped:
        raise StopRequestedError(
            f"stop requested while connecting to PostgreSQL at {where}"
        ) from None
    except psycopg.OperationalError as exc:
        if STOP.requested:
            raise StopRequestedError(
                f"stop requested; PostgreSQL at {where} did not accept a connection in time"
            ) from None
        raise SourceError(
            f"cannot connect to PostgreSQL at {where} as {params.get('user')}: {str(exc).strip()}",
            hint="check source.host/port/dbname/user/password (and sslmode/sslrootcert for a TLS "
            "error) and that pg_hba.conf has a line for this database and role from the bridge's "
            "address (a logical replication connection matches by database name; the "
            "'replication' keyword is for physical replication only)",
        ) from None
    conn.link.purpose = purpose or ("replication" if replication else "connection")
    return conn


def run(
    link: Link,
    step: Step[T],
    doing: str,
    rest: Callable[[], Step[Any]] | None = None,
) -> T:
    """Drive one protocol step on `link`'s connection through its waiter. Overdue or
    stopped, the query is cancelled and `rest()` (by default what is left of `step`)
    finished (`abandon`), and the error says what the connection was doing."""
    try:
        return link.waiter.run(step, link.timeout_s)
    except Stopped:
        outcome = abandon(link, step if rest is None else rest())
        raise StopRequestedError(
            f"stop requested while the {link.purpose} connection waited for PostgreSQL at "
            f"{link.where} ({doing}): {outcome}"
        ) from None
    except Expired:
        outcome = abandon(link, step if rest is None else rest())
        raise SourceTimeoutError(
            f"PostgreSQL at {link.where} did not answer the {link.purpose} connection "
            f"within {link.timeout_s:g}s ({doing}): {outcome}",
            hint="check that the server is running and not overloaded (pg_stat_activity "
            "shows what a query waits for); the bridge exits, and resumes from the slot's "
            "confirmed position on restart",
        ) from None
    except OSError as exc:  # the socket itself is gone
        raise psycopg.OperationalError(str(exc)) from None
    except BaseException:  # Ctrl-C in a command: leave the server idle, as psycopg does
        abandon(link, step if rest is None else rest())
        raise


def abandon(link: Link, step: Step[Any]) -> str:
    """Cancel the query `step` waits for and let it finish (`CANCEL_TIMEOUT_S` for the
    request, `CANCELLED_ANSWER_S` for the answer); close the connection when the server
    takes neither. Says which happened."""
    if _cancelled(link, step):
        return "the query was cancelled"
    link.pgconn.finish()  # the server is not answering: drop the link, its socket with it
    return "PostgreSQL did not answer the cancel request; the connection was closed"


def _cancelled(link: Link, step: Step[Any]) -> bool:
    try:
        link.conn.cancel_safe(timeout=link.cancel_timeout_s)
    except psycopg.Error:
        return False  # the request went unanswered (CancellationTimeout) or was refused
    try:
        link.waiter.run(step, link.cancelled_answer_s)
    except (Expired, Stopped, OSError):
        return False
    except psycopg.Error:  # psycopg's steps raise the cancelled query's error: answered
        return bool(link.pgconn.status == pq.ConnStatus.OK)
    return True


# -- protocol steps -----------------------------------------------------------------------


def wait_step(events: int) -> Step[int]:
    """Wait for `events`: the ready ones. Sent nothing (a step resumed after a cancel, by
    `next`), it asks again."""
    ready = 0
    while not ready:
        ready = yield events
    return ready


def flush_step(pg: Any) -> Step[None]:
    """Send what libpq has queued (reading meanwhile, so the server never blocks on us)."""
    while pg.flush() == 1:
        if (yield from wait_step(READ | WRITE)) & READ:
            pg.consume_input()


def result_step(pg: Any) -> Step[Any]:
    """The next result of the command sent; None once there is none left."""
    pg.consume_input()
    while pg.is_busy():
        yield from wait_step(READ)
        pg.consume_input()
    return pg.get_result()


def command_step(pg: Any) -> Step[Any]:
    """The result of the one command just sent (the last one, as `PQexec` has it): all of
    them read, up to the end or to the start of a COPY."""
    yield from flush_step(pg)
    last = None
    while True:
        res = yield from result_step(pg)
        if res is None:
            break
        last = res
        if res.status in _COPY_STATES:
            break
    if last is None:
        _lost(pg, "running a command")
    return last


def copy_block_step(pg: Any, limit: int) -> Step[tuple[bytes, bool]]:
    """The next COPY OUT data in whole rows: at least `limit` bytes, or whatever libpq has
    at hand once that is some; True when the COPY's data ended with it."""
    parts: list[Any] = []  # psycopg's memoryviews over libpq's buffers, joined once
    size = 0
    while True:
        nbytes, data = pg.get_copy_data(1)
        if nbytes > 0:
            parts.append(data)
            size += nbytes
            if size >= limit:
                return b"".join(parts), False
        elif nbytes < 0:
            return b"".join(parts), True
        elif parts:
            return b"".join(parts), False
        else:
            yield from wait_step(READ)
            pg.consume_input()


def finish_step(pg: Any) -> Step[Any]:
    """After a COPY's data: its result (the last), every result read."""
    last = None
    while True:
        res = yield from result_step(pg)
        if res is None:
            return last
        last = res


def put_copy_step(pg: Any, data: bytes) -> Step[None]:
    """Queue one CopyData message (waiting while libpq's buffer is full) and send it."""
    while pg.put_copy_data(data) == 0:
        yield from wait_step(WRITE)
        pg.flush()
    yield from flush_step(pg)


def end_copy_both_step(pg: Any) -> Step[None]:
    """CopyDone, then what the server still sends until it ends the stream too (dropped:
    whatever was not acknowledged is sent again on the next start), then its results."""
    while pg.put_copy_end() == 0:
        yield from wait_step(WRITE)
        pg.flush()
    yield from flush_step(pg)
    while True:
        nbytes, _ = pg.get_copy_data(1)
        if nbytes < 0:
            break
        if nbytes == 0:
            yield from wait_step(READ)
            pg.consume_input()
    yield from finish_step(pg)


# -- plain connections --------------------------------------------------------------------


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
    pg = conn.pgconn
    try:
        pg.send_query_params(query, params, types, formats, 0)
        res = run(link_of(conn), command_step(pg), "SELECT")
    except psycopg.OperationalError as exc:
        raise SourceError(
            f"SELECT failed: the connection to PostgreSQL is lost: {str(exc).strip()}",
            hint=_LOST_HINT,
        ) from None
    check(res, "SELECT", (pq.ExecStatus.TUPLES_OK,))
    if res.ntuples == 0:
        return None
    row: list[bytes | None] = []
    for c in range(res.nfields):
        v = res.get_value(0, c)
        row.append(None if v is None else bytes(v))
    return tuple(row)


def copy_out(
    conn: psycopg.Connection[Any],
    statement: sql.SQL | sql.Composed,
    params: Sequence[Any],
    sink: Callable[[bytes], object],
) -> None:
    """Run `statement` (a `COPY … TO STDOUT`) and hand its output to `sink` in blocks of
    whole rows, in order.

    A block goes to `sink` once `COPY_BLOCK_BYTES` have arrived, or as soon as libpq has
    no more rows at hand: the server sends the next rows while `sink` encodes, instead of
    the reader waiting for a whole chunk and then the server for the reader. The
    parameters are bound client-side (psycopg's `mogrify`), the rows taken straight from
    libpq, where psycopg's `Copy.read` runs a generator per row. Each block may take
    `QUERY_TIMEOUT_S`. A failed COPY raises `CommandError`; one left by any other error
    (`sink`'s included) is cancelled and drained, or its connection closed."""
    pg, waits = conn.pgconn, link_of(conn)
    text = psycopg.ClientCursor(conn).mogrify(statement, params)
    pg.send_query(text.encode())
    check(run(waits, command_step(pg), "COPY"), "COPY", (pq.ExecStatus.COPY_OUT,))
    ended = False

    def rest() -> Step[Any]:
        return finish_step(pg) if ended else drain_copy_step(pg)

    try:
        while not ended:
            block, ended = run(waits, copy_block_step(pg, COPY_BLOCK_BYTES), "COPY", rest)
            if block:
                sink(block)
    except (StopRequestedError, SourceTimeoutError):
        raise  # `run` abandoned the rest already
    except BaseException:
        if pg.status != pq.ConnStatus.BAD:
            abandon(waits, rest())
        raise
    res = run(waits, finish_step(pg), "COPY")
    if res is None:
        raise SourceError(
            f"COPY ended without a result: {(pg.error_message or b'').decode().strip()}",
            hint="the connection to PostgreSQL was lost; restart the bridge to resume",
        )
    check(res, "COPY", (pq.ExecStatus.COMMAND_OK,))


def drain_copy_step(pg: Any) -> Step[None]:
    """What is left of a COPY OUT being cancelled: its rows dropped, its results read."""
    while True:
        _, ended = yield from copy_block_step(pg, COPY_BLOCK_BYTES)
        if ended:
            break
    yield from finish_step(pg)


# -- the replication connection -----------------------------------------------------------


class ReplicationConnection:
    """Walsender commands and the COPY BOTH stream over one `replication=database` link."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._pg = conn.pgconn
        self._pg.nonblocking = 1
        self._link = link_of(conn)
        self._waiter = self._link.waiter
        self._streaming = False
        # Next CopyData message (copied out of libpq's buffer), or None if none arrived
        # within the timeout given, in seconds (or a stop came first): compiled, it is
        # called once per message (bridge/source/copyboth.py).
        self.read_copy: Callable[[float], bytes | None] = CopyReader(
            self._pg, self._waiter, self._consume, self._end_of_copy
        ).read

    def quote(self, part: sql.Composable) -> str:
        return part.as_string(self.conn)

    def command(self, text: str) -> list[tuple[str | None, ...]]:
        """Run one command with the simple query protocol; rows come back as text."""
        res = self._exec(text, _name(text))
        check(res, _name(text), (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK))
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
        res = self._exec(text, _name(text))
        check(res, _name(text), (pq.ExecStatus.COPY_BOTH,))
        self._streaming = True

    def write_copy(self, data: bytes) -> None:
        """Queue one CopyData message and push it to the socket, within the connection's
        timeout (nothing to cancel: a server that reads nothing is given up on)."""
        doing = "sending a status update"
        try:
            self._waiter.run(put_copy_step(self._pg, data), self._link.timeout_s)
        except (psycopg.OperationalError, OSError):
            self._raise_connection(doing)
        except Stopped:
            raise StopRequestedError(
                f"stop requested while {doing} to PostgreSQL at {self._link.where}: it read nothing"
            ) from None
        except Expired:
            raise SourceTimeoutError(
                f"PostgreSQL at {self._link.where} read nothing of the replication stream "
                f"for {self._link.timeout_s:g}s ({doing})",
                hint=_LOST_HINT,
            ) from None

    def finish_copy(self, timeout: float = FINISH_COPY_S) -> None:
        """CopyDone, then drain until the server ends the stream (clean shutdown), for at
        most `timeout` seconds: a server that does not answer has its link closed by
        `close()`."""
        if not self._streaming:
            return
        self._streaming = False
        # A server that does not answer in time, or is gone: close() ends the link.
        with contextlib.suppress(Expired, Stopped, OSError, psycopg.OperationalError):
            self._waiter.run(end_copy_both_step(self._pg), timeout)

    def close(self) -> None:
        self.conn.close()

    def _exec(self, text: str, name: str) -> Any:
        try:
            self._pg.send_query(text.encode())
            return run(self._link, command_step(self._pg), name)
        except psycopg.OperationalError:
            self._raise_connection(f"running {name}")

    def _consume(self) -> None:
        try:
            self._pg.consume_input()
        except psycopg.OperationalError:
            self._raise_connection("reading the replication stream")

    def _end_of_copy(self) -> NoReturn:
        res = self._pg.get_result()
        if res is not None and res.status == pq.ExecStatus.FATAL_ERROR:
            check(res, "START_REPLICATION", ())
        self._raise_connection("streaming")

    def _raise_connection(self, doing: str) -> NoReturn:
        _lost(self._pg, doing)


def check(res: Any, command: str, ok: tuple[pq.ExecStatus, ...]) -> None:
    """A result of one of the `ok` statuses, or its error as `CommandError`."""
    if res.status in ok:
        return
    sqlstate = (res.error_field(pq.DiagnosticField.SQLSTATE) or b"?????").decode()
    primary = res.error_field(pq.DiagnosticField.MESSAGE_PRIMARY)
    detail = (primary or res.error_message or b"unknown error").decode(errors="replace")
    raise CommandError(command, sqlstate, detail.strip())


def _name(text: str) -> str:
    """A command as errors name it: without its options (START_REPLICATION's list)."""
    return text.split("(", maxsplit=1)[0].strip()


def _lost(pg: Any, doing: str) -> NoReturn:
    msg = (pg.error_message or b"connection closed").decode(errors="replace").strip()
    raise SourceError(f"replication connection lost while {doing}: {msg}", hint=_LOST_HINT)
