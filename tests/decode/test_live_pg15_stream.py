"""pgoutput on PostgreSQL 15: streamed and two-phase transactions, live.

The stack runs with logical_decoding_work_mem = 64kB, so BIG rows in one
transaction make PostgreSQL stream it before it is decided; the assembler's spill
budget is as small (tests/decode/live.py), so its disk path runs too. What must
not be released is proven by a later marker transaction arriving alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bridge.decode.messages import (
    BeginPrepare,
    CommitPrepared,
    Prepare,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
)
from bridge.events.model import Change, Event
from decode.live import LiveSource, Open, one_transaction, table

BIG = 3000  # rows of ~60 bytes: several times logical_decoding_work_mem
STREAMING_PROTOS = [2, 3]


@pytest.fixture
def db(pg_conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """pg_conn with the tables; prepared transactions a failed test left are rolled back."""
    pg_conn.execute("CREATE TABLE big (id int PRIMARY KEY, pad text)")
    pg_conn.execute("CREATE TABLE marker (id int PRIMARY KEY)")
    yield pg_conn
    pg_conn.execute("ROLLBACK")  # a test that failed inside BEGIN left it open
    for (gid,) in pg_conn.execute(
        "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"
    ).fetchall():
        pg_conn.execute(f"ROLLBACK PREPARED '{gid}'")


def fill(conn: psycopg.Connection[Any], first: int, last: int) -> None:
    conn.execute(
        "INSERT INTO big SELECT g, repeat('p', 40) FROM generate_series(%s::int, %s::int) g",
        (first, last),
    )


def ids(live: LiveSource, changes: list[Change]) -> list[int]:
    return [live.row(c)["id"] for c in changes]


def only_marker(live: LiveSource, conn: psycopg.Connection[Any], marker: int) -> None:
    """Commit a marker row; it must be the next and only thing released."""
    conn.execute("INSERT INTO marker VALUES (%s)", (marker,))
    events: list[Event] = live.collect()
    released = one_transaction(events)
    assert [(table(c), live.row(c)["id"]) for c in released] == [("marker", marker)]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("proto", STREAMING_PROTOS)
def test_streamed_commit_drops_rolled_back_savepoint(
    open_source: Open, db: psycopg.Connection[Any], proto: int, binary: bool
) -> None:
    live = open_source(proto_version=proto, streaming="on", binary=binary)
    db.execute("BEGIN")
    fill(db, 1, BIG)
    db.execute("SAVEPOINT doomed")
    fill(db, 10_001, 10_000 + BIG)
    db.execute("ROLLBACK TO SAVEPOINT doomed")
    fill(db, 20_001, 20_000 + BIG)
    db.execute("COMMIT")

    events = live.collect(timeout=120)
    released = one_transaction(events)
    assert ids(live, released) == [*range(1, BIG + 1), *range(20_001, 20_000 + BIG + 1)]
    assert [c.ordinal for c in released] == list(range(2 * BIG))
    aborts = [m for m in live.messages if isinstance(m, StreamAbort)]
    assert aborts and all(a.subxid != a.xid for a in aborts), "the savepoint was not streamed"
    (commit,) = [m for m in live.messages if isinstance(m, StreamCommit)]
    assert commit.xid == aborts[0].xid
    assert sum(isinstance(m, StreamStart) for m in live.messages) > 1
    assert live.assembler.pool.spill_file_count > 0  # the disk path ran
    assert live.assembler.pool.in_memory_bytes == 0


@pytest.mark.parametrize("proto", STREAMING_PROTOS)
def test_streamed_rollback_releases_nothing(
    open_source: Open, db: psycopg.Connection[Any], proto: int, tmp_path: Path
) -> None:
    live = open_source(proto_version=proto, streaming="on")
    db.execute("BEGIN")
    fill(db, 1, 2 * BIG)
    db.execute("ROLLBACK")
    only_marker(live, db, 1)
    aborts = [m for m in live.messages if isinstance(m, StreamAbort)]
    assert len(aborts) == 1 and aborts[0].subxid == aborts[0].xid
    assert not list((tmp_path / "spill").glob("*.spill"))  # buffered rows dropped from disk


@pytest.mark.parametrize("proto", STREAMING_PROTOS)
def test_relation_change_inside_a_streamed_transaction(
    open_source: Open, db: psycopg.Connection[Any], proto: int
) -> None:
    live = open_source(proto_version=proto, streaming="on")
    db.execute("BEGIN")
    fill(db, 1, BIG)
    db.execute("ALTER TABLE big ADD COLUMN extra int DEFAULT 7")
    fill(db, BIG + 1, 2 * BIG)
    db.execute("COMMIT")

    released = one_transaction(live.collect(timeout=120))
    assert ids(live, released) == list(range(1, 2 * BIG + 1))
    widths = [len(c.relation.columns) if c.relation else 0 for c in released]
    assert widths == [2] * BIG + [3] * BIG
    assert live.row(released[-1]) == {"id": 2 * BIG, "pad": "p" * 40, "extra": 7}


@pytest.mark.parametrize("streaming", ["off", "on"])
def test_commit_prepared_releases_once(
    open_source: Open, db: psycopg.Connection[Any], streaming: str
) -> None:
    live = open_source(proto_version=3, two_phase=True, streaming=streaming)
    rows = BIG if streaming == "on" else 2
    db.execute("BEGIN")
    fill(db, 1, rows)
    db.execute("PREPARE TRANSACTION 'bridge_g1'")
    only_marker(live, db, 1)
    assert live.assembler.hold_lsn() is not None  # prepared, undecided: flush stays below

    db.execute("COMMIT PREPARED 'bridge_g1'")
    released = one_transaction(live.collect(timeout=120))
    assert ids(live, released) == list(range(1, rows + 1))
    assert live.assembler.hold_lsn() is None
    only_marker(live, db, 2)  # released once: nothing of it comes again

    prepared = StreamPrepare if streaming == "on" else Prepare
    kinds = {type(m) for m in live.messages}
    assert {prepared, CommitPrepared} <= kinds
    if streaming == "off":
        assert BeginPrepare in kinds
    (commit,) = [m for m in live.messages if isinstance(m, CommitPrepared)]
    assert commit.gid == "bridge_g1"


@pytest.mark.parametrize("streaming", ["off", "on"])
def test_rollback_prepared_releases_nothing(
    open_source: Open, db: psycopg.Connection[Any], streaming: str, tmp_path: Path
) -> None:
    live = open_source(proto_version=3, two_phase=True, streaming=streaming)
    db.execute("BEGIN")
    fill(db, 1, BIG if streaming == "on" else 2)
    db.execute("PREPARE TRANSACTION 'bridge_g2'")
    db.execute("ROLLBACK PREPARED 'bridge_g2'")
    only_marker(live, db, 1)
    assert any(isinstance(m, RollbackPrepared) for m in live.messages)
    assert live.assembler.hold_lsn() is None
    assert not list((tmp_path / "spill").glob("*.spill"))
