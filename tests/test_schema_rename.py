"""ALTER SCHEMA ... RENAME and a new table under the old name, on PostgreSQL 15 and 18: each
row in the topic of the name its table had when the row was written, never in another
table's topic (bridge.events.relations, bridge.renames).

PostgreSQL 15's pgoutput sends no new description of a table after its schema's rename
(upstream commit cd4b2334db49 added it in 16): the transaction of 100_bugs.pl sends
Relation(A, sch1.t1), row 1, Relation(B, sch1.t1), row 2, then A's row 3 with no new
Relation message. Before the fix row 3 went to sch1.t1's topic, B's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from delivery.helpers import bridge_settings
from running import running, start
from schema.live import Decoders, read_topic, records_in, unique, wait_delivered
from servers import Servers
from waiting import wait_for

from bridge.config import Config
from bridge.errors import RenamedRelationError

# 100_bugs.pl's transaction (postgres/postgres src/test/subscription/t/100_bugs.pl)
RENAME_TRANSACTION = [
    "insert into sch1.t1 values(1)",
    "alter schema sch1 rename to sch2",
    "create schema sch1",
    "create table sch1.t1(c1 int)",
    "insert into sch1.t1 values(2)",
    "insert into sch2.t1 values(3)",
]


@pytest.fixture
def cfg(servers: Servers, server_db: str, tmp_path: Path) -> Config:
    settings = bridge_settings(
        servers, server_db, unique("slot"), unique("pub"), unique("t"), tmp_path / "spill"
    )
    return Config(**settings)


@pytest.fixture
def conn(servers: Servers, server_db: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(servers.dsn(server_db), autocommit=True) as conn:
        conn.execute("CREATE SCHEMA sch1")
        conn.execute("CREATE TABLE sch1.t1 (c1 int)")
        yield conn


def transaction(conn: psycopg.Connection[Any], statements: list[str]) -> None:
    with conn.transaction():
        for statement in statements:
            conn.execute(statement)


def values(cfg: Config, table: str, count: int) -> list[int]:
    """c1 of the first `count` records of `table`'s topic, and that it has no more."""
    topic = f"{cfg.kafka.topic_prefix}.{table}"
    decoders = Decoders(cfg)
    received = read_topic(cfg, topic, count, timeout=60)
    assert records_in(cfg, topic) == count, (table, records_in(cfg, topic))
    return [decoders.value(topic, r.value)["after"]["c1"] for r in received]


def test_rows_after_a_schema_rename_go_to_the_renamed_tables_topic(
    cfg: Config, conn: psycopg.Connection[Any]
) -> None:
    """The TAP's transaction, then a later row of the renamed table: sch1.t1's topic holds
    row 1 (written while the renamed table was sch1.t1) and the new table's row 2, sch2.t1's
    rows 3 and 4."""
    with running(cfg) as bridge:
        transaction(conn, RENAME_TRANSACTION)
        conn.execute("insert into sch2.t1 values(4)")
        wait_delivered(bridge, conn, cfg)
    assert values(cfg, "sch1.t1", 2) == [1, 2]
    assert values(cfg, "sch2.t1", 2) == [3, 4]


def test_a_rename_committed_before_the_slots_catalog_xmin(
    servers: Servers, cfg: Config, conn: psycopg.Connection[Any]
) -> None:
    """The rename in a transaction of its own, the new table and the renamed table's row in
    a later one, once the slot's catalog_xmin has passed the rename (15: the catalog proves
    the name; 18: PostgreSQL sends it)."""
    with running(cfg) as bridge:
        conn.execute("insert into sch1.t1 values(1)")
        conn.execute("alter schema sch1 rename to sch2")
        row = conn.execute(
            "select xmin::text::bigint from pg_namespace where nspname = 'sch2'"
        ).fetchone()
        assert row is not None
        rename_xid = int(row[0])
        conn.execute("create table later (c1 int)")

        def passed() -> bool:
            # a running-xacts record for the slot to advance on, and a delivered change after
            conn.execute("checkpoint")
            conn.execute("insert into later values (0)")
            wait_delivered(bridge, conn, cfg)
            found = conn.execute(
                "select catalog_xmin::text::bigint from pg_replication_slots where slot_name = %s",
                (cfg.source.slot_name,),
            ).fetchone()
            return found is not None and int(found[0]) > rename_xid

        wait_for(passed, 60, "the slot's catalog_xmin to pass the rename", every=0.5)
        transaction(
            conn,
            [
                "create schema sch1",
                "create table sch1.t1(c1 int)",
                "insert into sch1.t1 values(2)",
                "insert into sch2.t1 values(3)",
            ],
        )
        wait_delivered(bridge, conn, cfg)
    assert values(cfg, "sch1.t1", 2) == [1, 2]
    assert values(cfg, "sch2.t1", 1) == [3]


def test_a_name_the_catalog_cannot_place_stops_the_bridge(
    servers: Servers, cfg: Config, conn: psycopg.Connection[Any]
) -> None:
    """The bridge behind: the TAP's transaction, then the schema renamed again, before the
    bridge streams them. On 15 the catalog's name (sch3) was written after the change, so the
    bridge stops before row 3 reaches any topic; 18 sends the name the table had (sch2)."""
    bridge = start(cfg)  # creates the slot: what follows waits in it
    bridge.stop()
    transaction(conn, RENAME_TRANSACTION)
    conn.execute("alter schema sch2 rename to sch3")
    if servers.major >= 16:
        with running(cfg) as bridge:
            wait_delivered(bridge, conn, cfg)
        assert values(cfg, "sch1.t1", 2) == [1, 2]
        assert values(cfg, "sch2.t1", 1) == [3]
        return
    bridge = start(cfg)
    error = bridge.join()
    assert isinstance(error, RenamedRelationError), error
    assert "the catalog names it sch3.t1 now" in str(error), error
    assert "cd4b2334db49" in str(error)
    assert records_in(cfg, f"{cfg.kafka.topic_prefix}.sch3.t1") == 0
    assert records_in(cfg, f"{cfg.kafka.topic_prefix}.sch2.t1") == 0
    # rows 1 and 2 may have been produced before the stop (the transaction is not
    # acknowledged, so PostgreSQL sends it again); row 3 is in no topic
    topic = f"{cfg.kafka.topic_prefix}.sch1.t1"
    count = records_in(cfg, topic)
    decoders = Decoders(cfg)
    found = [decoders.value(topic, r.value)["after"]["c1"] for r in read_topic(cfg, topic, count)]
    assert found == [1, 2][:count], found
