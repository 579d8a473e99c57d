"""The Relation a snapshot builds from the catalog equals the one pgoutput sends (real server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from decode.live import LiveSource, changes, source_config

from bridge.snapshot import catalog
from bridge.snapshot.catalog import METHOD_CTID, METHOD_KEY, KeyColumn

TABLES = [
    "CREATE TABLE plain (id int PRIMARY KEY, arr text[], total numeric(10,2), "
    "doubled int GENERATED ALWAYS AS (id * 2) STORED, note varchar(20))",
    "CREATE TABLE full_ident (a int, b text)",
    "ALTER TABLE full_ident REPLICA IDENTITY FULL",
    "CREATE TABLE by_index (a int NOT NULL, b int NOT NULL, c text)",
    "CREATE UNIQUE INDEX by_index_ab ON by_index (b, a)",
    "ALTER TABLE by_index REPLICA IDENTITY USING INDEX by_index_ab",
    "CREATE TABLE composite (tenant text, id bigint, v int, PRIMARY KEY (tenant, id))",
    "CREATE TABLE narrowed (id int PRIMARY KEY, secret text, shown text, n int)",
]
INSERTS = [
    "INSERT INTO plain (id, arr, total, note) VALUES (1, '{a}', 1.5, 'x')",
    "INSERT INTO full_ident VALUES (1, 'x')",
    "INSERT INTO by_index VALUES (1, 2, 'x')",
    "INSERT INTO composite VALUES ('t', 1, 1)",
    "INSERT INTO narrowed VALUES (1, 's', 'x', 5)",
]


def test_relations_match_pgoutput(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], slot_name: str, tmp_path: Path
) -> None:
    for statement in TABLES:
        pg_conn.execute(statement)
    pg_conn.execute(
        "CREATE PUBLICATION pub FOR TABLE plain, full_ident, by_index, composite, "
        "narrowed (id, shown, n) WHERE (n > 0)"
    )
    source = LiveSource(
        source_config(stack, pg_db, slot_name=slot_name, publication_name="pub"), tmp_path
    )
    try:
        streamed = {}
        for statement in INSERTS:
            pg_conn.execute(statement)
            for change in changes(source.collect()):
                assert change.relation is not None
                streamed[change.relation.name] = change.relation
    finally:
        source.close()
    published = catalog.published_tables(
        pg_conn, plugin="pgoutput", publication="pub", replication_sets=()
    )
    assert {p.name for p in published} == set(streamed)
    for entry in published:
        table = catalog.describe_table(
            pg_conn, entry.oid, entry.columns, entry.row_filter, entry.generated
        )
        assert table.relation == streamed[entry.name], entry.name
    described = {
        p.name: catalog.describe_table(pg_conn, p.oid, p.columns, p.row_filter) for p in published
    }
    assert described["plain"].key == (KeyColumn("id", "integer"),)
    assert described["composite"].key == (KeyColumn("tenant", "text"), KeyColumn("id", "bigint"))
    assert [k.name for k in described["by_index"].key] == ["b", "a"]  # index order
    assert described["full_ident"].method == METHOD_CTID
    assert described["narrowed"].method == METHOD_KEY
    assert described["narrowed"].row_filter == "(n > 0)"


def test_resolve_names(pg_conn: psycopg.Connection[Any]) -> None:
    pg_conn.execute("CREATE SCHEMA other")
    pg_conn.execute('CREATE TABLE other."Mixed Case" (id int PRIMARY KEY)')
    pg_conn.execute("CREATE TABLE public.t (id int PRIMARY KEY)")
    found = catalog.resolve(pg_conn, ["other.Mixed Case", "t", "public.missing"])
    assert set(found) == {"other.Mixed Case", "t"}


def test_relations_match_pglogical_output(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], slot_name: str, tmp_path: Path
) -> None:
    pg_conn.execute(TABLES[0])  # plain: with a generated column
    pg_conn.execute(TABLES[-2])  # composite key
    pg_conn.execute("CREATE TABLE unsent (id int PRIMARY KEY)")
    cfg = source_config(stack, pg_db, slot_name=slot_name, plugin="pglogical_output")
    source = LiveSource(cfg, tmp_path)  # puts every table into the 'default' set
    try:
        pg_conn.execute(
            "SELECT pglogical.replication_set_remove_table('default', 'unsent'::regclass)"
        )
        pg_conn.execute(INSERTS[0])
        pg_conn.execute(INSERTS[3])
        streamed: dict[str, Any] = {}
        while len(streamed) < 2:  # the set change above is a transaction of its own
            for change in changes(source.collect()):
                assert change.relation is not None
                streamed[change.relation.name] = change.relation
    finally:
        source.close()
    published = catalog.published_tables(
        pg_conn, plugin="pglogical_output", publication="", replication_sets=("default",)
    )
    assert {p.name for p in published} == {"plain", "composite"}
    for entry in published:
        table = catalog.describe_table(
            pg_conn, entry.oid, entry.columns, entry.row_filter, entry.generated
        )
        assert table.relation == streamed[entry.name], entry.name
