"""Record keys exactly as PostgreSQL defines a row's identity, on PostgreSQL 15 and 18.

`bridge.schema.catalog.row_identity` is the one reading of key columns (the stream's
encoders, the snapshot's Relation and chunk key, verify): only the first `indnkeyatts`
entries of `pg_index.indkey` are key columns, never an INCLUDE column; under REPLICA
IDENTITY USING INDEX that index is the key, also where the table has a primary key.

Each end-to-end test starts the bridge with an initial snapshot of rows written before it,
streams changes, and checks the records as a consumer reads them (confluent-kafka and the
registry, raw key bytes), then `bridge verify` compares every topic with its table value by
value. On today's code before the fix, the INCLUDE column was a key field: the first row
with it NULL stopped the bridge, and an UPDATE of it changed the Kafka key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from decode.live import LiveSource, changes, source_config
from delivery.helpers import bridge_settings
from running import running
from schema.live import Decoders, Received, read_topic, unique, wait_delivered
from servers import Servers

from bridge.config import Config
from bridge.decode.messages import Relation
from bridge.encoders import load_table_details
from bridge.schema.catalog import row_identity
from bridge.snapshot import catalog
from bridge.verify.run import verify

IDENTITY_TABLES = {
    # the primary key of 001_rep_changes.pl: b is stored in the index, not part of the key
    "tab_include": [
        "CREATE TABLE tab_include (a int, b text, CONSTRAINT covering PRIMARY KEY(a) INCLUDE(b))"
    ],
    # a replica identity index with an INCLUDE column, which may be NULL
    "ri_include": [
        "CREATE TABLE ri_include (a int NOT NULL, b text, v int)",
        "CREATE UNIQUE INDEX ri_include_a ON ri_include (a) INCLUDE (b)",
        "ALTER TABLE ri_include REPLICA IDENTITY USING INDEX ri_include_a",
    ],
    # a primary key and another index as the replica identity: the identity is the key
    "pk_and_ri": [
        "CREATE TABLE pk_and_ri (id int PRIMARY KEY, code text NOT NULL, v int)",
        "CREATE UNIQUE INDEX pk_and_ri_code ON pk_and_ri (code)",
        "ALTER TABLE pk_and_ri REPLICA IDENTITY USING INDEX pk_and_ri_code",
    ],
    # the primary key (with an INCLUDE column) named as the replica identity index
    "ri_is_pk": [
        "CREATE TABLE ri_is_pk (id int, v int, CONSTRAINT ri_is_pk_key PRIMARY KEY (id) "
        "INCLUDE (v))",
        "ALTER TABLE ri_is_pk REPLICA IDENTITY USING INDEX ri_is_pk_key",
    ],
    # a two-column identity index in another order than the columns
    "ri_order": [
        "CREATE TABLE ri_order (a int NOT NULL, b int NOT NULL, c text)",
        "CREATE UNIQUE INDEX ri_order_ba ON ri_order (b, a) INCLUDE (c)",
        "ALTER TABLE ri_order REPLICA IDENTITY USING INDEX ri_order_ba",
    ],
    # unique only through an expression or a predicate: no identity (PostgreSQL refuses
    # both as REPLICA IDENTITY), so no key
    "expr_only": [
        "CREATE TABLE expr_only (email text NOT NULL, v int)",
        "CREATE UNIQUE INDEX expr_only_lower ON expr_only (lower(email))",
        "CREATE UNIQUE INDEX expr_only_partial ON expr_only (v) WHERE v > 0",
    ],
    # FULL sends whole old rows; the primary key (not its INCLUDE column) stays the key
    "full_pk": [
        "CREATE TABLE full_pk (a int, b text, CONSTRAINT full_pk_key PRIMARY KEY (a) INCLUDE (b))",
        "ALTER TABLE full_pk REPLICA IDENTITY FULL",
    ],
}


def _ddl(*tables: str) -> list[str]:
    return [statement for table in tables for statement in IDENTITY_TABLES[table]]


# table -> (record key, chunk key, Relation key flags by column)
EXPECTED = {
    "tab_include": (("a",), ("a",), {"a"}),
    "ri_include": (("a",), ("a",), {"a"}),
    "pk_and_ri": (("code",), ("id",), {"code"}),
    "ri_is_pk": (("id",), ("id",), {"id"}),
    "ri_order": (("a", "b"), ("b", "a"), {"a", "b"}),
    "expr_only": ((), (), set()),
    "full_pk": (("a",), ("a",), {"a", "b"}),
}


def _oid(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute("SELECT %s::regclass::oid", (table,)).fetchone()
    assert row is not None
    return int(row[0])


def test_postgresql_refuses_expression_and_partial_indexes_as_identity(
    server_conn: psycopg.Connection[Any],
) -> None:
    """What docs/concepts/records.md says of such tables rests on this: no such index can be
    a table's replica identity, so PostgreSQL itself identifies their rows by nothing
    (or the whole row, under FULL)."""
    for statement in _ddl("expr_only"):
        server_conn.execute(statement)
    for index in ("expr_only_lower", "expr_only_partial"):
        with pytest.raises(psycopg.errors.Error, match=r"cannot use (expression|partial) index"):
            server_conn.execute(f"ALTER TABLE expr_only REPLICA IDENTITY USING INDEX {index}")


def test_catalog_keys_are_the_plugins_key_columns(
    servers: Servers, server_db: str, server_conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """The Relation the snapshot builds (key flags included) equals the one pgoutput sends,
    and the record key and chunk key leave INCLUDE columns out."""
    for statement in _ddl(*IDENTITY_TABLES):
        server_conn.execute(statement)
    server_conn.execute("CREATE PUBLICATION pub FOR ALL TABLES WITH (publish = 'insert')")
    cfg = source_config(servers, server_db, slot_name=unique("slot"), publication_name="pub")
    source = LiveSource(cfg, tmp_path)
    streamed: dict[str, Relation] = {}
    try:
        server_conn.execute(
            "INSERT INTO tab_include VALUES (1, NULL); INSERT INTO ri_include VALUES (1, NULL, 1);"
            "INSERT INTO pk_and_ri VALUES (1, 'x', 1); INSERT INTO ri_is_pk VALUES (1, NULL);"
            "INSERT INTO ri_order VALUES (1, 2, NULL); INSERT INTO expr_only VALUES ('a', 1);"
            "INSERT INTO full_pk VALUES (1, NULL)"
        )
        while len(streamed) < len(EXPECTED):
            for change in changes(source.collect()):
                assert change.relation is not None
                streamed[change.relation.name] = change.relation
    finally:
        source.close()
    for name, (record_key, chunk_key, flagged) in EXPECTED.items():
        oid = _oid(server_conn, name)
        identity = row_identity(server_conn, oid)
        assert identity.record_key == record_key, name
        assert identity.unique_key == chunk_key, name
        described = catalog.describe_table(server_conn, oid)
        assert described.relation == streamed[name], name
        assert {c.name for c in streamed[name].columns if c.is_key} == flagged, name
        assert tuple(k.name for k in described.key) == chunk_key, name
        assert load_table_details(server_conn, oid).primary_key == record_key, name


def _settings(servers: Servers, dbname: str, tmp_path: Path, **extra: Any) -> Config:
    settings = bridge_settings(
        servers, dbname, unique("slot"), unique("pub"), unique("t"), tmp_path / "spill"
    )
    settings["snapshot"] = {"mode": "initial", "progress_bar": "never"}
    settings["source"].update(extra)
    return Config(**settings)


class Topic:
    """A one-partition topic's records: raw key bytes and the decoded key and value."""

    def __init__(self, cfg: Config, decoders: Decoders, table: str, received: list[Received]):
        self.topic = f"{cfg.kafka.topic_prefix}.public.{table}"
        self.raw = [r.key for r in received]
        self.keys = [decoders.key(self.topic, r.key) for r in received]
        self.values = [None if r.value is None else decoders.value(self.topic, r.value)
                       for r in received]  # fmt: skip

    def ops(self) -> list[tuple[str | None, Any]]:
        """(op, key) per record; op None for a tombstone."""
        return [
            (None if v is None else v["op"], k) for k, v in zip(self.keys, self.values, strict=True)
        ]

    def raw_key(self, op: str, key: Any) -> bytes | None:
        """The key bytes of the first `op` record under `key`."""
        for raw, (found_op, found_key) in zip(self.raw, self.ops(), strict=True):
            if (found_op, found_key) == (op, key):
                return raw
        raise AssertionError(f"no {op} record for {key} in {self.ops()}")

    def where(self, op: str, column: str, value: Any) -> int:
        """The index of the first `op` record whose after-image has `column` = `value`."""
        for i, v in enumerate(self.values):
            if v is not None and v["op"] == op and v["after"][column] == value:
                return i
        raise AssertionError(f"no {op} record with {column} = {value!r} in {self.ops()}")


@pytest.fixture
def stream(
    servers: Servers, server_db: str, tmp_path: Path
) -> Iterator[Callable[..., dict[str, Topic]]]:
    """`stream(before, changes, counts, **source)`: `before` run, the bridge started with an
    initial snapshot, `changes` streamed and delivered, `bridge verify` passed; returns the
    topics read back (`counts`: table -> records expected)."""

    def run(
        before: list[str], after: list[str], counts: dict[str, int], **source: Any
    ) -> dict[str, Topic]:
        cfg = _settings(servers, server_db, tmp_path, **source)
        decoders = Decoders(cfg)
        with psycopg.connect(servers.dsn(server_db), autocommit=True) as conn:
            for statement in before:
                conn.execute(statement)
            with running(cfg) as bridge:
                for statement in after:
                    conn.execute(statement)
                wait_delivered(bridge, conn, cfg)
                result = verify(cfg, timeout=60)
        assert result.ok, [(t.table, t.status) for t in result.tables]
        assert all(t.skipped is None for t in result.tables), result.tables
        topics = {}
        for table, count in counts.items():
            topic = f"{cfg.kafka.topic_prefix}.public.{table}"
            received = read_topic(cfg, topic, count, timeout=60)
            assert len(received) == count, (table, len(received))
            topics[table] = Topic(cfg, decoders, table, received)
        return topics

    yield run


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_include_columns_are_never_key_fields(
    stream: Callable[..., dict[str, Topic]], binary: bool
) -> None:
    """NULL in an INCLUDE column, an UPDATE of it, a key change and a delete, under a covering
    primary key and a covering replica identity index; snapshot and stream key alike."""
    before = [
        *_ddl("tab_include", "ri_include", "pk_and_ri"),
        "INSERT INTO tab_include VALUES (1, NULL), (2, 'two')",
        "INSERT INTO ri_include VALUES (1, NULL, 10), (2, 'two', 20)",
        "INSERT INTO pk_and_ri VALUES (1, 'one', 10), (2, 'two', 20)",
    ]
    after = [
        "INSERT INTO tab_include VALUES (3, NULL)",
        "UPDATE tab_include SET b = 'changed' WHERE a = 1",
        "UPDATE tab_include SET b = NULL WHERE a = 2",
        "UPDATE tab_include SET a = -a WHERE a = 3",
        "DELETE FROM tab_include WHERE a = 2",
        "INSERT INTO ri_include VALUES (3, NULL, 30)",
        "UPDATE ri_include SET b = 'changed', v = 11 WHERE a = 1",
        "UPDATE ri_include SET a = -a WHERE a = 3",
        "DELETE FROM ri_include WHERE a = 2",
        # the primary key changes, the identity (code) does not: the same Kafka key
        "UPDATE pk_and_ri SET id = id + 100 WHERE code = 'one'",
        "DELETE FROM pk_and_ri WHERE code = 'two'",
    ]
    topics = stream(before, after, {"tab_include": 9, "ri_include": 9, "pk_and_ri": 4},
                    binary=binary)  # fmt: skip
    a = [{"a": n} for n in (1, 2, 3, -3)]
    expected = [
        ("r", a[0]), ("r", a[1]), ("c", a[2]), ("u", a[0]), ("u", a[1]),
        ("d", a[2]), (None, a[2]), ("c", a[3]), ("d", a[1]),
    ]  # fmt: skip
    assert topics["tab_include"].ops() == expected
    del expected[4]  # ri_include's row 2 is not updated
    assert topics["ri_include"].ops() == [*expected, (None, a[1])]
    for name in ("tab_include", "ri_include"):
        topic = topics[name]
        assert topic.raw_key("r", a[0]) == topic.raw_key("u", a[0])  # snapshot == stream
        changed = topic.values[3]
        assert changed is not None and changed["after"]["b"] == "changed"
    assert topics["pk_and_ri"].ops() == [
        ("r", {"code": "one"}), ("r", {"code": "two"}), ("u", {"code": "one"}),
        ("d", {"code": "two"}),
    ]  # fmt: skip
    moved = topics["pk_and_ri"].values[2]
    assert moved is not None and moved["after"]["id"] == 101


def test_nondeterministic_collation_keys_are_the_stored_bytes(
    stream: Callable[..., dict[str, Topic]],
) -> None:
    """Under a case-insensitive collation 'abc' and 'ABC' are one key to PostgreSQL. The
    Kafka key holds the value as stored: an UPDATE to a byte-different but equal value is
    sent with the old key (PostgreSQL compares key images by bytes) and becomes a key change,
    delete + tombstone + create; a change that addresses the row by an equal spelling keeps
    the stored spelling's key. So a consumer keyed by bytes holds exactly one row."""
    before = [
        "CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
        "CREATE TABLE ci_key (k text COLLATE ci PRIMARY KEY, v int)",
        "INSERT INTO ci_key VALUES ('abc', 1)",
    ]
    after = [
        "UPDATE ci_key SET k = 'ABC' WHERE k = 'abc'",
        "INSERT INTO ci_key VALUES ('x', 2)",
        "UPDATE ci_key SET v = 3 WHERE k = 'X'",
        "DELETE FROM ci_key WHERE k = 'X'",
    ]
    topic = stream(before, after, {"ci_key": 8})["ci_key"]
    assert topic.ops() == [
        ("r", {"k": "abc"}), ("d", {"k": "abc"}), (None, {"k": "abc"}), ("c", {"k": "ABC"}),
        ("c", {"k": "x"}), ("u", {"k": "x"}), ("d", {"k": "x"}), (None, {"k": "x"}),
    ]  # fmt: skip


KEY_TYPES = [
    "CREATE TYPE pair AS (a int, b text)",
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
    "CREATE DOMAIN posint AS int CHECK (VALUE > 0)",
    "CREATE TABLE k_array (k int[] PRIMARY KEY, v text)",
    "CREATE TABLE k_range (k int4range PRIMARY KEY, v text)",
    "CREATE TABLE k_domain (k posint PRIMARY KEY, v text)",
    "CREATE TABLE k_enum (k mood PRIMARY KEY, v text)",
    "CREATE TABLE k_mixed (t text, r numrange, e mood, v int, PRIMARY KEY (e, r, t))",
]
KEY_VALUES = {
    "k_composite": ("'(1,one)'::pair", "'(2,\"two, too\")'::pair", "'(3,)'::pair"),
    "k_array": ("'{1,2}'", "'{3,NULL}'", "'{}'"),
    "k_range": ("'[1,5)'", "'empty'", "'(,10]'"),
    "k_domain": ("1", "2", "3"),
    "k_enum": ("'sad'", "'ok'", "'happy'"),
}


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_keys_of_composite_array_range_domain_and_enum_types(
    stream: Callable[..., dict[str, Topic]], binary: bool
) -> None:
    """Each table: two rows read by the snapshot, a third streamed; an update of a non-key
    column (same key bytes as the snapshot's record), a key change and a delete."""
    before = [*KEY_TYPES, "CREATE TABLE k_composite (k pair PRIMARY KEY, v text)"]
    after = []
    values = KEY_VALUES
    for table, (one, two, three) in values.items():
        before.append(f"INSERT INTO {table} VALUES ({one}, 'a'), ({two}, 'b')")
        after += [
            f"INSERT INTO {table} VALUES ({three}, 'c')",
            f"UPDATE {table} SET v = 'a2' WHERE k = {one}",
            f"DELETE FROM {table} WHERE k = {two}",
        ]
    after.append("UPDATE k_domain SET k = 4 WHERE k = 3")
    after.append("UPDATE k_array SET k = '{4}' WHERE k = '{}'")
    before.append("INSERT INTO k_mixed VALUES ('a', '[1,2)', 'ok', 1), ('b', 'empty', 'sad', 2)")
    after += [
        "UPDATE k_mixed SET v = 10 WHERE t = 'a'",
        "UPDATE k_mixed SET r = '[0,1)' WHERE t = 'b'",
    ]
    counts = {table: 6 for table in values}
    counts["k_domain"] = counts["k_array"] = 9
    counts["k_mixed"] = 6
    topics = stream(before, after, counts, binary=binary)
    for table in values:
        topic = topics[table]
        ops = [op or "-" for op, _ in topic.ops()]
        assert sorted(ops[:6]) == ["-", "c", "d", "r", "r", "u"], table
        read, updated = topic.where("r", "v", "a"), topic.where("u", "v", "a2")
        assert topic.keys[read] == topic.keys[updated], table
        assert topic.raw[read] == topic.raw[updated], table  # snapshot's key == stream's
        deleted = ops.index("d")  # its old row carries the key alone
        assert topic.keys[deleted] == topic.keys[topic.where("r", "v", "b")], table
    assert [op for op, _ in topics["k_domain"].ops()[6:]] == ["d", None, "c"]
    assert topics["k_domain"].keys[8] == {"k": 4}
    mixed = topics["k_mixed"]
    assert list(mixed.keys[0]) == ["e", "r", "t"]  # the primary key's index order
    read, updated = mixed.where("r", "t", "a"), mixed.where("u", "t", "a")
    assert mixed.raw[read] == mixed.raw[updated]
    assert [op for op, _ in mixed.ops()[3:]] == ["d", None, "c"]
