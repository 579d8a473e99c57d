"""pglogical_output on the stack's PostgreSQL 15 through the `Pglogical` plugin, live.

Server set-up (extension, node, replication sets), the startup check, column types
filled from the catalog, and rows through source → decoder → assembler and
through the whole Pipeline into Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from running import running

from bridge.config import Config
from bridge.decode.messages import KIND_BINARY, KIND_TEXT, Relation, Startup
from bridge.demo import consume
from bridge.errors import SourceError
from bridge.plugins import ensure_pglogical
from bridge.source import libpq
from decode.live import LiveSource, Open, one_transaction, source_config, table

ITEMS = """
CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2), at timestamptz,
  tags int[], doc jsonb)
"""


@pytest.fixture
def open_source(stack: Any, pg_db: str, slot_name: str, tmp_path: Path) -> Iterator[Open]:
    opened: list[LiveSource] = []

    def open_(**source: Any) -> LiveSource:
        cfg = source_config(stack, pg_db, slot_name=slot_name, plugin="pglogical_output", **source)
        live = LiveSource(cfg, tmp_path / "spill")
        opened.append(live)
        return live

    yield open_
    for live in opened:
        live.close()


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_rows_with_types_from_the_catalog(
    open_source: Open,
    pg_conn: psycopg.Connection[Any],
    binary: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    pg_conn.execute(ITEMS)
    pg_conn.execute("CREATE TABLE keyless (v text)")
    with caplog.at_level(logging.WARNING, logger="bridge.plugins"):
        live = open_source(binary=binary)
    assert "keyless" in caplog.text and "PRIMARY KEY" in caplog.text
    pg_conn.execute(
        "INSERT INTO items VALUES (1, 'one', 9.99, '2024-05-06 07:08:09+00', '{1,2}', "
        """'{"a": 1}'), (2, 'two', NULL, NULL, NULL, NULL)"""
    )
    pg_conn.execute("INSERT INTO keyless VALUES ('not in the set')")
    pg_conn.execute("UPDATE items SET name = 'uno' WHERE id = 1")
    pg_conn.execute("UPDATE items SET id = 3 WHERE id = 2")
    pg_conn.execute("DELETE FROM items WHERE id = 3")

    inserted = one_transaction(live.collect())
    assert isinstance(live.messages[0], Startup)  # checked before the first Begin
    assert live.messages[0].params["binary.binary_basetypes"] == ("t" if binary else "f")
    kind = KIND_BINARY if binary else KIND_TEXT
    assert inserted[0].new is not None and inserted[0].new.kinds == bytes([kind]) * 6
    (relation,) = [m for m in live.messages if isinstance(m, Relation)]
    expected_types = pg_conn.execute(
        "SELECT atttypid::int, atttypmod FROM pg_attribute "
        "WHERE attrelid = 'items'::regclass AND attnum > 0 ORDER BY attnum"
    ).fetchall()
    assert [(c.type_oid, c.typmod) for c in relation.columns] == expected_types
    assert relation.replica_identity == "d"
    assert [c.is_key for c in relation.columns] == [True] + [False] * 5
    assert live.row(inserted[0]) == {
        "id": 1,
        "name": "one",
        "price": Decimal("9.99"),
        "at": 1714979289000000,
        "tags": [1, 2],
        "doc": '{"a": 1}',
    }
    assert live.row(inserted[1]) == {
        "id": 2, "name": "two", "price": None, "at": None, "tags": None, "doc": None
    }  # fmt: skip

    # pglogical sends transactions it filtered out as empty Begin/Commit pairs.
    assert one_transaction(live.collect()) == []  # the keyless insert
    (renamed,) = one_transaction(live.collect())
    assert renamed.op == "u" and renamed.old is None and live.row(renamed)["name"] == "uno"
    (rekeyed,) = one_transaction(live.collect())
    assert rekeyed.old_kind == "K" and live.row(rekeyed, "old")["id"] == 2
    assert live.row(rekeyed)["id"] == 3
    (deleted,) = one_transaction(live.collect())
    assert deleted.op == "d" and live.row(deleted, "old")["id"] == 3
    assert {table(c) for c in (renamed, rekeyed, deleted)} == {"items"}
    assert sum(isinstance(m, Startup) for m in live.messages) == 1


def test_relation_after_ddl_gets_the_new_types(
    open_source: Open, pg_conn: psycopg.Connection[Any]
) -> None:
    pg_conn.execute("CREATE TABLE t (id int PRIMARY KEY, v int)")
    live = open_source()
    pg_conn.execute("INSERT INTO t VALUES (1, 1)")
    # Types are read when the Relation arrives (see Pglogical): a bridge that keeps up
    # has typed the old version before the DDL commits.
    (first,) = one_transaction(live.collect())
    pg_conn.execute("ALTER TABLE t ALTER COLUMN v TYPE bigint, ADD COLUMN w varchar(5)")
    pg_conn.execute("INSERT INTO t VALUES (2, 2, 'x')")
    assert one_transaction(live.collect()) == []  # the ALTER TABLE
    (second,) = one_transaction(live.collect())
    assert first.relation is not None and second.relation is not None
    assert [(c.name, c.type_oid) for c in first.relation.columns] == [("id", 23), ("v", 23)]
    assert [(c.name, c.type_oid, c.typmod) for c in second.relation.columns] == [
        ("id", 23, -1), ("v", 20, -1), ("w", 1043, 9)
    ]  # fmt: skip
    assert live.row(second) == {"id": 2, "v": 2, "w": "x"}


def _source(stack: Any, dbname: str, **overrides: Any) -> Any:
    return source_config(stack, dbname, plugin="pglogical_output", **overrides).source


def test_setup_requires_everything_when_disabled(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any]
) -> None:
    src = _source(stack, pg_db, publication_mode="disabled", replication_sets=("default", "x"))
    conn = libpq.connect(src.conninfo(), replication=False)
    try:
        with pytest.raises(SourceError, match="extension pglogical is not installed"):
            ensure_pglogical(conn, src)
        pg_conn.execute("CREATE EXTENSION pglogical")
        with pytest.raises(SourceError, match="not a pglogical node"):
            ensure_pglogical(conn, src)
        pg_conn.execute("SELECT pglogical.create_node('mine', 'dbname=x')")
        with pytest.raises(SourceError, match=r"set\(s\) \['x'\] do not exist"):
            ensure_pglogical(conn, src)
        pg_conn.execute("SELECT pglogical.create_replication_set('x')")
        ensure_pglogical(conn, src)
        tables = pg_conn.execute("SELECT count(*) FROM pglogical.replication_set_table")
        assert tables.fetchone() == (0,)  # disabled: the sets are the operator's business
    finally:
        conn.close()


def test_setup_creates_node_sets_and_adds_new_tables(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], slot_name: str
) -> None:
    pg_conn.execute("CREATE SCHEMA app")
    pg_conn.execute("CREATE TABLE app.a (id int PRIMARY KEY)")
    pg_conn.execute("CREATE UNLOGGED TABLE app.scratch (id int PRIMARY KEY)")
    src = _source(stack, pg_db, slot_name=slot_name, replication_sets=("default", "bridge_set"))
    conn = libpq.connect(src.conninfo(), replication=False)
    try:
        ensure_pglogical(conn, src)
        pg_conn.execute("CREATE TABLE public.b (id int PRIMARY KEY)")
        ensure_pglogical(conn, src)  # a restart: idempotent, picks up the new table
    finally:
        conn.close()
    node = pg_conn.execute(
        "SELECT n.node_name, i.if_dsn FROM pglogical.local_node l "
        "JOIN pglogical.node n USING (node_id) JOIN pglogical.node_interface i "
        "ON i.if_id = l.node_local_interface"
    ).fetchone()
    assert node is not None and node[0] == f"bridge_{slot_name}"
    assert stack.pg_password not in node[1] and "password" not in node[1]
    assert f"dbname={pg_db}" in node[1] and f"port={stack.pg_port}" in node[1]
    members = pg_conn.execute(
        "SELECT s.set_name, t.set_reloid::text FROM pglogical.replication_set_table t "
        "JOIN pglogical.replication_set s USING (set_id) ORDER BY 1, 2"
    ).fetchall()
    assert members == [
        ("bridge_set", "app.a"), ("bridge_set", "b"), ("default", "app.a"), ("default", "b")
    ]  # fmt: skip


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_pipeline_to_kafka(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    topic_prefix: str,
    binary: bool,
    tmp_path: Path,
) -> None:
    pg_conn.execute(ITEMS)
    source = source_config(
        stack, pg_db, slot_name=slot_name, plugin="pglogical_output", binary=binary
    ).source
    cfg = Config(
        source=source.model_dump(),
        kafka={"bootstrap_servers": stack.kafka_bootstrap, "topic_prefix": topic_prefix},
        registry={"url": stack.registry_url},
        pipeline={"spill_dir": tmp_path},
        http={"port": 0},
    )
    with running(cfg):
        pg_conn.execute(
            "INSERT INTO items VALUES (1, 'one', 1.50, '2024-05-06 07:08:09+00', '{7}', '[]'), "
            "(2, 'two', NULL, NULL, NULL, NULL)"
        )
        pg_conn.execute("UPDATE items SET price = 2.25 WHERE id = 1")
        pg_conn.execute("DELETE FROM items WHERE id = 2")
        records = consume(cfg, f"{topic_prefix}.public.items", 5)
    summary = [(key["id"], value and value["op"]) for key, value in records]
    assert summary == [(1, "c"), (2, "c"), (1, "u"), (2, "d"), (2, None)]
    after = records[2][1]["after"]
    assert after == {
        "id": 1,
        "name": "one",
        "price": Decimal("2.25"),
        "at": datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC),
        "tags": [7],
        "doc": "[]",
    }
    assert records[3][1]["before"]["id"] == 2
