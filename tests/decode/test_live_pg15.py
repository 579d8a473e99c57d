"""pgoutput on the stack's PostgreSQL 15, plain transactions: source → decoder → assembler.

Every test streams through the production path (`tests/decode/live.py`) for each
protocol version PostgreSQL 15 speaks. Streaming and two-phase are in
test_live_pg15_stream.py, pglogical_output in test_live_pglogical.py.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from bridge.decode.messages import KIND_BINARY, KIND_TEXT, KIND_UNCHANGED, Relation
from bridge.events.model import Change, LogicalMessageEvent, TxBegin, TxCommit
from bridge.source import libpq
from decode.live import Open, changes, one_transaction, table, text

PROTOS = [1, 2, 3]


TYPED_TABLE = """
CREATE TABLE typed (id int PRIMARY KEY, name text, amount numeric(10,2), at timestamptz,
  flag bool, doc jsonb, uid uuid, f float8, d date, iv interval, tags text[])
"""
TYPED_ROW = {
    "id": 1,
    "name": "first",
    "amount": Decimal("12.34"),
    "at": 1714979289123456,  # 2024-05-06 07:08:09.123456+00 in µs since 1970
    "flag": True,
    "doc": '{"k": [1, 2]}',
    "uid": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    "f": 0.30000000000000004,
    "d": 19849,  # 2024-05-06 in days since 1970
    "iv": {"months": 14, "days": 3, "micros": 14706000000},
    "tags": ["a", "b c", None],
}


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("proto", PROTOS)
def test_insert_update_delete(
    open_source: Open, pg_conn: psycopg.Connection[Any], proto: int, binary: bool
) -> None:
    pg_conn.execute(TYPED_TABLE)
    live = open_source(proto_version=proto, binary=binary)
    pg_conn.execute(
        "INSERT INTO typed VALUES (1, 'first', 12.34, '2024-05-06 07:08:09.123456+00', true, "
        """'{"k": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 0.1::float8 + 0.2, """
        "'2024-05-06', '1 year 2 mons 3 days 04:05:06', '{a,\"b c\",NULL}'), (2, 'second', "
        "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
    )
    pg_conn.execute("UPDATE typed SET name = 'renamed', flag = false WHERE id = 1")
    pg_conn.execute("DELETE FROM typed WHERE id = 2")

    inserted = one_transaction(live.collect())
    assert [c.op for c in inserted] == ["c", "c"]
    kind = KIND_BINARY if binary else KIND_TEXT
    assert inserted[0].new is not None and set(inserted[0].new.kinds) == {kind}
    assert live.row(inserted[0]) == TYPED_ROW
    assert live.row(inserted[1]) == {k: None for k in TYPED_ROW} | {"id": 2, "name": "second"}
    relation = inserted[0].relation
    assert relation is not None and relation.namespace == "public" and relation.name == "typed"
    assert [c.type_oid for c in relation.columns] == [
        23, 25, 1700, 1184, 16, 3802, 2950, 701, 1082, 1186, 1009,
    ]  # fmt: skip
    assert relation.columns[2].typmod == (10 << 16 | 2) + 4
    assert [c.is_key for c in relation.columns] == [True] + [False] * 10

    (updated,) = one_transaction(live.collect())
    assert updated.op == "u" and updated.old is None  # key unchanged: no old tuple
    assert live.row(updated) == TYPED_ROW | {"name": "renamed", "flag": False}

    events = live.collect()
    (deleted,) = one_transaction(events)
    assert deleted.op == "d" and deleted.old_kind == "K" and deleted.new is None
    assert live.row(deleted, "old") == {k: None for k in TYPED_ROW} | {"id": 2}
    assert isinstance(events[0], TxBegin) and isinstance(events[-1], TxCommit)
    assert events[-1].event_count_by_table == {"public.typed": 1}


@pytest.mark.parametrize("proto", PROTOS)
def test_logical_messages(open_source: Open, pg_conn: psycopg.Connection[Any], proto: int) -> None:
    pg_conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    live = open_source(proto_version=proto, messages=True)
    pg_conn.execute("BEGIN")
    pg_conn.execute("INSERT INTO t VALUES (1)")
    pg_conn.execute("SELECT pg_logical_emit_message(true, 'audit', 'in the transaction')")
    pg_conn.execute("COMMIT")
    pg_conn.execute("SELECT pg_logical_emit_message(false, 'beat', '\\x00ff'::bytea)")
    pg_conn.execute("INSERT INTO t VALUES (2)")

    first = one_transaction(live.collect())
    assert [c.op for c in first] == ["c", "m"]
    message = first[1].message
    assert message is not None and message.transactional
    assert (message.prefix, message.content) == ("audit", b"in the transaction")
    assert first[1].relation is None and first[1].ordinal == 1

    events = live.collect()
    beat = events[0]
    assert isinstance(beat, LogicalMessageEvent)
    assert (beat.prefix, beat.content) == ("beat", b"\x00\xff")
    assert [text(c.new) for c in one_transaction(events[1:])] == [["2"]]


@pytest.mark.parametrize("proto", PROTOS)
def test_truncate(open_source: Open, pg_conn: psycopg.Connection[Any], proto: int) -> None:
    pg_conn.execute("CREATE TABLE a (id serial PRIMARY KEY)")
    pg_conn.execute("CREATE TABLE b (id int PRIMARY KEY, a_id int REFERENCES a)")
    live = open_source(proto_version=proto)
    pg_conn.execute("INSERT INTO a DEFAULT VALUES")
    pg_conn.execute("TRUNCATE a, b RESTART IDENTITY")
    pg_conn.execute("TRUNCATE a CASCADE")

    assert [c.op for c in one_transaction(live.collect())] == ["c"]
    truncated = one_transaction(live.collect())
    assert [(c.op, table(c)) for c in truncated] == [("t", "a"), ("t", "b")]
    assert all(c.truncate_options == 2 for c in truncated)  # RESTART IDENTITY
    assert [r.name for r in truncated[0].relations] == ["a", "b"]
    cascaded = one_transaction(live.collect())
    assert sorted(table(c) for c in cascaded) == ["a", "b"]
    assert all(c.truncate_options == 1 for c in cascaded)  # CASCADE


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("proto", PROTOS)
def test_replica_identity_full_sends_whole_old_rows(
    open_source: Open, pg_conn: psycopg.Connection[Any], proto: int, binary: bool
) -> None:
    pg_conn.execute("CREATE TABLE full_id (id int, v text, n int)")
    pg_conn.execute("ALTER TABLE full_id REPLICA IDENTITY FULL")
    pg_conn.execute("INSERT INTO full_id VALUES (1, 'one', 10), (2, 'two', 20)")
    live = open_source(proto_version=proto, binary=binary)
    pg_conn.execute("UPDATE full_id SET n = 11 WHERE id = 1")
    pg_conn.execute("DELETE FROM full_id WHERE id = 2")

    (updated,) = one_transaction(live.collect())
    assert updated.relation is not None and updated.relation.replica_identity == "f"
    assert all(c.is_key for c in updated.relation.columns)  # FULL: every column is "key"
    assert updated.old_kind == "O"
    assert live.row(updated, "old") == {"id": 1, "v": "one", "n": 10}
    assert live.row(updated) == {"id": 1, "v": "one", "n": 11}
    (deleted,) = one_transaction(live.collect())
    assert deleted.old_kind == "O"
    assert live.row(deleted, "old") == {"id": 2, "v": "two", "n": 20}


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("proto", PROTOS)
def test_unchanged_toast_is_marked_not_sent(
    open_source: Open, pg_conn: psycopg.Connection[Any], proto: int, binary: bool
) -> None:
    pg_conn.execute("CREATE TABLE doc (id int PRIMARY KEY, body text, n int)")
    pg_conn.execute("ALTER TABLE doc ALTER COLUMN body SET STORAGE EXTERNAL")  # no compression
    live = open_source(proto_version=proto, binary=binary)
    pg_conn.execute("INSERT INTO doc VALUES (1, repeat('0123456789', 1000), 0)")
    pg_conn.execute("UPDATE doc SET n = 1 WHERE id = 1")
    pg_conn.execute("UPDATE doc SET body = 'short' WHERE id = 1")

    (inserted,) = one_transaction(live.collect())
    assert live.row(inserted)["body"] == "0123456789" * 1000
    (untouched,) = one_transaction(live.collect())
    assert untouched.new is not None and untouched.new.kinds[1] == KIND_UNCHANGED
    assert untouched.new.values[1] is None
    unchanged: list[str] = []
    assert untouched.relation is not None
    row = live.row(untouched, unchanged=unchanged)
    assert row == {"id": 1, "body": None, "n": 1} and unchanged == ["body"]
    (rewritten,) = one_transaction(live.collect())
    assert live.row(rewritten) == {"id": 1, "body": "short", "n": 1}


@pytest.mark.parametrize("proto", PROTOS)
def test_new_relation_precedes_the_first_row_that_needs_it(
    open_source: Open, pg_conn: psycopg.Connection[Any], proto: int
) -> None:
    pg_conn.execute("CREATE TABLE evolving (id int PRIMARY KEY, a text)")
    live = open_source(proto_version=proto)
    pg_conn.execute("BEGIN")
    pg_conn.execute("INSERT INTO evolving VALUES (1, 'x')")
    pg_conn.execute("ALTER TABLE evolving ADD COLUMN b int")
    pg_conn.execute("INSERT INTO evolving VALUES (2, 'y', 7)")
    pg_conn.execute("COMMIT")
    pg_conn.execute("INSERT INTO evolving VALUES (3, 'z', 8)")

    first, second = one_transaction(live.collect())
    assert first.relation is not None and second.relation is not None
    assert [c.name for c in first.relation.columns] == ["id", "a"]
    assert [c.name for c in second.relation.columns] == ["id", "a", "b"]
    assert live.row(first) == {"id": 1, "a": "x"}
    assert live.row(second) == {"id": 2, "a": "y", "b": 7}
    kinds = [type(m).__name__ for m in live.messages]
    assert kinds == ["Begin", "Relation", "Insert", "Relation", "Insert", "Commit"]
    (third,) = one_transaction(live.collect())
    assert third.relation == second.relation
    assert text(third.new) == ["3", "z", "8"]


def test_session_settings_override_database_defaults(
    open_source: Open, pg_conn: psycopg.Connection[Any], pg_db: str, stack: Any
) -> None:
    """The walsender formats text values with the session's settings, whatever the defaults."""
    for setting, value in [
        ("DateStyle", "SQL, DMY"),
        ("IntervalStyle", "sql_standard"),
        ("extra_float_digits", "0"),
    ]:
        pg_conn.execute(f"ALTER DATABASE \"{pg_db}\" SET {setting} = '{value}'")
    pg_conn.execute(
        "CREATE TABLE s (id int PRIMARY KEY, d date, t timestamptz, iv interval, f float8)"
    )
    live = open_source(proto_version=1)
    pg_conn.execute(
        "INSERT INTO s VALUES (1, '2024-05-06', '2024-05-06 07:08:09+00', "
        "'1 year 2 mons -3 days 04:05:06.5', 0.1::float8 + 0.2)"
    )
    (change,) = one_transaction(live.collect())
    assert text(change.new)[1] == "2024-05-06"
    assert re.fullmatch(r"2024-05-0[56] \d\d:\d8:09[+-]\d\d(:\d\d)?", text(change.new)[2] or "")
    assert text(change.new)[3:] == ["1 year 2 mons -3 days +04:05:06.5", "0.30000000000000004"]

    conninfo = dict(live.cfg.source.conninfo(), options="-c DateStyle=German -c work_mem=1234kB")
    for replication in (False, True):
        conn = libpq.connect(conninfo, replication=replication)
        try:
            shown = [
                conn.execute(f"SHOW {name}").fetchone()
                for name in ("DateStyle", "IntervalStyle", "extra_float_digits", "work_mem")
            ]
        finally:
            conn.close()
        assert shown == [("ISO, DMY",), ("postgres",), ("3",), ("1234kB",)]


def test_changes_outside_the_publication_are_not_sent(
    open_source: Open, pg_conn: psycopg.Connection[Any], publication_name: str
) -> None:
    pg_conn.execute("CREATE TABLE inside (id int PRIMARY KEY)")
    pg_conn.execute("CREATE TABLE outside (id int PRIMARY KEY)")
    pg_conn.execute(f'CREATE PUBLICATION "{publication_name}" FOR TABLE inside')
    live = open_source(publication_mode="disabled")
    pg_conn.execute("INSERT INTO outside VALUES (1)")
    pg_conn.execute("INSERT INTO inside VALUES (2)")
    events = live.collect()
    assert [table(c) for c in changes(events)] == ["inside"]
    assert not any(isinstance(m, Relation) and m.name == "outside" for m in live.messages)
    assert all(type(e) in (TxBegin, Change, TxCommit) for e in events)
