"""Catalog facts behind the key schema (live: pg_index/pg_attribute of real tables)."""

from __future__ import annotations

from bridge.encoders import load_table_details
from bridge.schema.table import ColumnDetails, TableDetails

from .helpers import Conn


def _relid(conn: Conn, table: str) -> int:
    row = conn.execute("SELECT %s::regclass::oid", (table,)).fetchone()
    assert row is not None
    return int(row[0])


def test_primary_key_columns_in_index_order(pg_conn: Conn) -> None:
    """indkey is 0-based: the first key column must not be lost."""
    pg_conn.execute(
        "CREATE TABLE pk_order (a int, b text, c int, grid int[][], PRIMARY KEY (c, a))"
    )
    assert load_table_details(pg_conn, _relid(pg_conn, "pk_order")) == TableDetails(
        ("c", "a"),
        {
            "a": ColumnDetails(1),
            "b": ColumnDetails(1),
            "c": ColumnDetails(1),
            "grid": ColumnDetails(2),
        },
    )


def test_single_column_key_under_replica_identity_full(pg_conn: Conn) -> None:
    pg_conn.execute("CREATE TABLE pk_full (id int PRIMARY KEY, v text)")
    pg_conn.execute("ALTER TABLE pk_full REPLICA IDENTITY FULL")
    assert load_table_details(pg_conn, _relid(pg_conn, "pk_full")).primary_key == ("id",)


def test_no_primary_key_and_dropped_columns(pg_conn: Conn) -> None:
    pg_conn.execute("CREATE TABLE no_pk (x int, gone int, y text UNIQUE)")
    pg_conn.execute("ALTER TABLE no_pk DROP COLUMN gone")
    details = load_table_details(pg_conn, _relid(pg_conn, "no_pk"))
    assert details == TableDetails((), {"x": ColumnDetails(1), "y": ColumnDetails(1)})
