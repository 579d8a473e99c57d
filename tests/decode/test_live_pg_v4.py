"""pgoutput protocol 4 end to end against a real PostgreSQL 16+ (the `pg_modern` cluster).

Drives the real chain: replication connection, slot and START_REPLICATION (bridge.source),
`PgoutputDecoder(4)`, `EventAssembler`. The cluster runs with logical_decoding_work_mem = 64kB, so
a few hundred kB in one transaction make PostgreSQL stream it before it decides it; the spill
budget is as small, so the assembler's disk path runs too. Covers what PostgreSQL 15 cannot send:
streaming=parallel (Stream Abort with abort LSN and time) and the `origin` filter.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from waiting import wait_for

from bridge.decode.messages import (
    PG_EPOCH_OFFSET_US,
    Begin,
    Commit,
    Insert,
    Message,
    Origin,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
)
from bridge.decode.pgoutput import PgoutputDecoder, pgoutput_options
from bridge.events import OP_CREATE, OP_DELETE, OP_UPDATE, Change, Event, EventAssembler
from bridge.events.model import TxBegin, TxCommit
from bridge.lsn import LSN
from bridge.source import libpq, slots
from bridge.source.status import StatusTracker
from bridge.source.stream import ReplicationStream

PROTO = 4
BIG_ROWS = 2000  # x ~250 bytes: several times logical_decoding_work_mem
PAD = 200
TIMEOUT = 60.0
ORIGIN_TIME = "2024-01-02 03:04:05+00"
ORIGIN_TIME_US = 1_704_164_645_000_000  # ORIGIN_TIME in µs since 1970-01-01 UTC


@pytest.fixture
def modern_db(pg_modern: Any) -> Iterator[str]:
    name = f"v4_{uuid.uuid4().hex[:12]}"
    pg_modern.create_database(name)
    try:
        yield name
    finally:
        pg_modern.drop_database(name)


@pytest.fixture
def db(pg_modern: Any, modern_db: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_modern.dsn(modern_db), autocommit=True) as conn:
        conn.execute(f"CREATE TABLE big (id int PRIMARY KEY, pad text DEFAULT repeat('x', {PAD}))")
        yield conn


class Capture:
    """One replication session through the real source, decoder and assembler.

    Records every decoded message and, per event, the index of the message that released it.
    """

    def __init__(self, pg: Any, dbname: str, slot: str, spill_dir: Path, **options: Any) -> None:
        conninfo = {
            "host": pg.host,
            "port": pg.port,
            "dbname": dbname,
            "user": pg.user,
            "password": pg.password,
        }
        self.rc = libpq.ReplicationConnection(libpq.connect(conninfo, replication=True))
        self.server_version = slots.check_prerequisites(self.rc)
        publication = f"pub_{slot}"
        with psycopg.connect(pg.dsn(dbname), autocommit=True) as conn:
            slots.ensure_publication(conn, publication, "all_tables")
        slots.ensure_slot(self.rc, slot, "pgoutput", create=True, two_phase=False)
        slots.start_replication(
            self.rc,
            slot,
            LSN(0),
            pgoutput_options(PROTO, [publication], **options),
            busy_timeout_s=5,
        )
        self.stream = ReplicationStream(self.rc, StatusTracker(1.0))
        self.decoder = PgoutputDecoder(PROTO)
        streamed = PgoutputDecoder(PROTO, in_stream=True)  # replayed records carry the xid
        self.assembler = EventAssembler(
            decode=self.decoder.decode,
            decode_streamed=streamed.decode,
            spill_dir=spill_dir,
            memory_limit_bytes=64 * 1024,
        )
        self.messages: list[Message] = []
        self.events: list[tuple[int, Event]] = []

    def pump(self, until: Callable[[], bool], timeout: float = TIMEOUT) -> None:
        def read_more() -> bool:
            if until():
                return True
            data = self.stream.read(0.2)
            if data is not None:
                raw = data.payload
                msg = self.decoder.decode(raw)
                self.messages.append(msg)
                for event in self.assembler.feed(msg, raw, data.wal_start, data.wal_end):
                    self.events.append((len(self.messages) - 1, event))
            return until()

        def kinds() -> str:
            return f"message kinds: {sorted({type(m).__name__ for m in self.messages})}"

        wait_for(read_more, timeout, "the condition", every=0, detail=kinds)

    def committed(self, count: int) -> Callable[[], bool]:
        return lambda: len(self.transactions()) >= count

    def transactions(self) -> list[tuple[TxBegin, list[Change], TxCommit]]:
        """Completed transactions, each as (begin, changes, commit) in release order."""
        done: list[tuple[TxBegin, list[Change], TxCommit]] = []
        begin: TxBegin | None = None
        changes: list[Change] = []
        for _, event in self.events:
            if isinstance(event, TxBegin):
                assert begin is None, "TxBegin inside a transaction"
                begin, changes = event, []
            elif isinstance(event, Change):
                assert begin is not None, "Change outside a transaction"
                changes.append(event)
            elif isinstance(event, TxCommit):
                assert begin is not None and begin.xid == event.xid
                done.append((begin, changes, event))
                begin = None
        return done

    def of(self, kind: type[Any]) -> list[Any]:
        return [m for m in self.messages if isinstance(m, kind)]

    def close(self) -> None:
        self.stream.close()
        self.assembler.close()


@pytest.fixture
def capture(
    pg_modern: Any, modern_db: str, slot_name: str, tmp_path: Path
) -> Iterator[Callable[..., Capture]]:
    opened: list[Capture] = []

    def open_capture(**options: Any) -> Capture:
        cap = Capture(pg_modern, modern_db, slot_name, tmp_path / "spill", **options)
        opened.append(cap)
        return cap

    yield open_capture
    for cap in opened:
        cap.close()


def ids(changes: list[Change]) -> list[int]:
    out = []
    for change in changes:
        row = change.new if change.new is not None else change.old
        assert row is not None and row.values[0] is not None
        out.append(int(row.values[0]))
    return out


def big_insert(conn: psycopg.Connection[Any], first: int, last: int) -> None:
    conn.execute(
        "INSERT INTO big (id) SELECT g FROM generate_series(%s::int, %s::int) g", (first, last)
    )


def marker(db: psycopg.Connection[Any], row_id: int) -> None:
    """A small committed transaction: its arrival proves everything before it was decoded."""
    db.execute("INSERT INTO big (id, pad) VALUES (%s, 'marker')", (row_id,))


def pg_now_us() -> int:
    return time.time_ns() // 1000 - PG_EPOCH_OFFSET_US


def test_server_is_16_or_newer(pg_modern: Any, capture: Callable[..., Capture]) -> None:
    cap = capture()
    assert cap.server_version >= 160000
    assert cap.server_version // 10000 == pg_modern.major


@pytest.mark.parametrize("streaming", ["off", "parallel"])
def test_plain_insert_update_delete(
    db: psycopg.Connection[Any], capture: Callable[..., Capture], streaming: str
) -> None:
    cap = capture(streaming=streaming)
    db.execute("CREATE TABLE plain (id int PRIMARY KEY, v text, n numeric)")
    db.execute("INSERT INTO plain VALUES (1, 'a', 1.5), (2, 'b', NULL)")
    db.execute("UPDATE plain SET v = 'a2' WHERE id = 1")
    db.execute("DELETE FROM plain WHERE id = 2")
    cap.pump(cap.committed(3))

    assert not cap.of(StreamStart), "small transactions must not be streamed"
    (b1, inserts, c1), (b2, updates, c2), (b3, deletes, c3) = cap.transactions()
    assert [c.op for c in inserts] == [OP_CREATE, OP_CREATE]
    assert [c.new.values for c in inserts if c.new] == [(b"1", b"a", b"1.5"), (b"2", b"b", None)]
    assert [c.ordinal for c in inserts] == [0, 1]
    (update,) = updates
    assert update.op == OP_UPDATE and update.new is not None
    assert update.new.values == (b"1", b"a2", b"1.5") and update.old is None
    (delete,) = deletes
    assert delete.op == OP_DELETE and delete.old_kind == "K" and delete.old is not None
    assert delete.old.values[0] == b"2"
    assert all(c.relation is not None and c.relation.name == "plain" for c in inserts)

    commits = cap.of(Commit)
    assert [c.end_lsn for c in (c1, c2, c3)] == [c.end_lsn for c in commits]
    assert c1.commit_lsn < c2.commit_lsn < c3.commit_lsn
    assert [b.xid for b in (b1, b2, b3)] == [b.xid for b in cap.of(Begin)]
    assert cap.assembler.idle_wal_end() is not None


def test_parallel_streamed_commit_released_once_in_order(
    pg_modern: Any, modern_db: str, db: psycopg.Connection[Any], capture: Callable[..., Capture]
) -> None:
    cap = capture(streaming="parallel")
    with psycopg.connect(pg_modern.dsn(modern_db)) as conn:
        big_insert(conn, 1, BIG_ROWS)
        # Streamed while still undecided: nothing may be released yet.
        cap.pump(lambda: len(cap.of(StreamStop)) >= 2)
        assert not cap.events
        conn.commit()
    cap.pump(cap.committed(1))

    starts = cap.of(StreamStart)
    assert starts[0].first_segment and not any(s.first_segment for s in starts[1:])
    assert len({s.xid for s in starts}) == 1
    (stream_commit,) = cap.of(StreamCommit)
    assert stream_commit.xid == starts[0].xid
    assert not cap.of(Begin), "the big transaction must arrive streamed, not as Begin/Commit"

    ((begin, changes, commit),) = cap.transactions()
    assert begin.xid == commit.xid == stream_commit.xid
    assert (commit.commit_lsn, commit.end_lsn) == (stream_commit.commit_lsn, stream_commit.end_lsn)
    assert ids(changes) == list(range(1, BIG_ROWS + 1))
    assert [c.ordinal for c in changes] == list(range(BIG_ROWS))
    assert commit.event_count_by_table == {"public.big": BIG_ROWS}
    assert cap.assembler.pool.spill_file_count >= 1, "the held rows should have spilled"
    released_at = {index for index, _ in cap.events}
    assert released_at == {cap.messages.index(stream_commit)}


@pytest.mark.parametrize(("streaming", "abort_info"), [("parallel", True), ("on", False)])
def test_streamed_abort_releases_nothing(
    pg_modern: Any,
    modern_db: str,
    db: psycopg.Connection[Any],
    capture: Callable[..., Capture],
    streaming: str,
    abort_info: bool,
) -> None:
    """Only streaming=parallel adds the abort LSN and time (the 25-byte protocol 4 form)."""
    cap = capture(streaming=streaming)
    before = pg_now_us()
    with psycopg.connect(pg_modern.dsn(modern_db)) as conn:
        big_insert(conn, 1, BIG_ROWS)
        cap.pump(lambda: bool(cap.of(StreamStop)))
        conn.rollback()
    cap.pump(lambda: bool(cap.of(StreamAbort)))
    marker(db, BIG_ROWS + 1)
    cap.pump(cap.committed(1))

    (abort,) = cap.of(StreamAbort)
    xid = cap.of(StreamStart)[0].xid
    assert abort.xid == abort.subxid == xid
    if abort_info:
        assert abort.abort_lsn is not None and abort.abort_ts is not None
        assert abort.abort_lsn > 0
        assert before - 1_000_000 <= abort.abort_ts <= pg_now_us() + 1_000_000
        assert abort.abort_lsn < cap.of(Commit)[0].commit_lsn
    else:
        assert (abort.abort_lsn, abort.abort_ts) == (None, None)
    ((begin, changes, _),) = cap.transactions()
    assert begin.xid != xid
    assert ids(changes) == [BIG_ROWS + 1]


def test_rollback_to_savepoint_inside_streamed_transaction(
    pg_modern: Any, modern_db: str, db: psycopg.Connection[Any], capture: Callable[..., Capture]
) -> None:
    cap = capture(streaming="parallel")
    with psycopg.connect(pg_modern.dsn(modern_db)) as conn:
        big_insert(conn, 1, BIG_ROWS)
        conn.execute("SAVEPOINT s1")
        big_insert(conn, BIG_ROWS + 1, 2 * BIG_ROWS)  # streamed under the subtransaction's xid
        conn.execute("ROLLBACK TO SAVEPOINT s1")
        big_insert(conn, 3 * BIG_ROWS + 1, 3 * BIG_ROWS + 100)
        conn.commit()
    cap.pump(cap.committed(1))

    xid = cap.of(StreamStart)[0].xid
    (abort,) = cap.of(StreamAbort)
    assert abort.xid == xid and abort.subxid != xid
    assert abort.abort_lsn is not None and abort.abort_ts is not None
    streamed_xids = {m.xid for m in cap.of(Insert)}
    assert abort.subxid in streamed_xids and xid in streamed_xids
    ((begin, changes, _),) = cap.transactions()
    assert begin.xid == xid
    kept = [*range(1, BIG_ROWS + 1), *range(3 * BIG_ROWS + 1, 3 * BIG_ROWS + 101)]
    assert ids(changes) == kept
    assert [c.ordinal for c in changes] == list(range(len(kept)))


def test_binary_mode_plain_and_streamed(
    pg_modern: Any, modern_db: str, db: psycopg.Connection[Any], capture: Callable[..., Capture]
) -> None:
    cap = capture(streaming="parallel", binary=True)
    db.execute(
        "CREATE TABLE typed (id int PRIMARY KEY, big bigint, flag bool, label text,"
        " blob bytea, at timestamptz, note text)"
    )
    db.execute(
        "INSERT INTO typed VALUES (7, -5000000000, true, 'zürich', '\\x00ff10',"
        " '2000-01-01 00:00:01+00', NULL)"
    )
    with psycopg.connect(pg_modern.dsn(modern_db)) as conn:
        big_insert(conn, 1, BIG_ROWS)
        conn.commit()
    cap.pump(cap.committed(2))

    (_, (typed,), _), (_, changes, _) = cap.transactions()
    assert typed.new is not None
    assert typed.new.kinds == b"bbbbbbn"
    id_, big, flag, label, blob, at, note = typed.new.values
    assert struct.unpack(">i", id_ or b"") == (7,)
    assert struct.unpack(">q", big or b"") == (-5_000_000_000,)
    assert (flag, label, blob, note) == (b"\x01", "zürich".encode(), b"\x00\xff\x10", None)
    assert struct.unpack(">q", at or b"") == (1_000_000,)  # µs since 2000-01-01 UTC

    assert cap.of(StreamCommit), "the big transaction must arrive streamed"
    assert all(c.new is not None and c.new.kinds == b"bb" for c in changes)
    got = [struct.unpack(">i", c.new.values[0] or b"")[0] for c in changes if c.new]
    assert got == list(range(1, BIG_ROWS + 1))


@pytest.mark.parametrize("origin", ["none", "any"])
def test_origin_filter(
    pg_modern: Any,
    modern_db: str,
    db: psycopg.Connection[Any],
    capture: Callable[..., Capture],
    origin: str,
) -> None:
    """Changes applied under a replication origin, as a subscriber applies them, are dropped
    with origin=none; origin=any keeps them, with the origin's name, LSN and commit time."""
    cap = capture(streaming="parallel", origin=origin)
    name = f"upstream_{uuid.uuid4().hex[:8]}"
    db.execute("SELECT pg_replication_origin_create(%s)", (name,))
    try:
        marker(db, 1)
        with psycopg.connect(pg_modern.dsn(modern_db)) as conn:
            conn.execute("SELECT pg_replication_origin_session_setup(%s)", (name,))
            conn.execute("SELECT pg_replication_origin_xact_setup('0/1234', %s)", (ORIGIN_TIME,))
            conn.execute("INSERT INTO big (id) VALUES (2)")
            conn.commit()
            conn.execute("SELECT pg_replication_origin_xact_setup('0/5678', %s)", (ORIGIN_TIME,))
            big_insert(conn, 10, 9 + BIG_ROWS)
            conn.commit()
            conn.execute("SELECT pg_replication_origin_session_reset()")
            conn.commit()
        marker(db, 3)
        cap.pump(cap.committed(4 if origin == "any" else 2))
    finally:
        db.execute("SELECT pg_replication_origin_drop(%s)", (name,))

    txs = [(begin, ids(changes)) for begin, changes, _ in cap.transactions()]
    if origin == "none":
        assert [rows for _, rows in txs] == [[1], [3]]
        assert not cap.of(Origin) and not cap.of(StreamStart)
        assert all(begin.origin is None for begin, _ in txs)
        return
    assert [rows for _, rows in txs] == [[1], [2], list(range(10, 10 + BIG_ROWS)), [3]]
    assert [begin.origin for begin, _ in txs] == [None, name, name, None]
    origin_us = ORIGIN_TIME_US - PG_EPOCH_OFFSET_US
    # The origin's commit time replaces the local one, as a subscriber needs for conflicts.
    assert [begin.commit_ts for begin, _ in txs[1:3]] == [origin_us, origin_us]
    plain_origin, streamed_origin = cap.of(Origin)
    assert plain_origin == Origin(0x1234, name)
    # Sent at the first Stream Start, before the commit record gave the origin LSN.
    assert streamed_origin.name == name
    assert cap.messages[cap.messages.index(streamed_origin) - 1] == cap.of(StreamStart)[0]
    assert cap.of(StreamCommit), "the big replicated transaction must arrive streamed"
