"""Snapshot rows carry exactly the bytes pgoutput sends for the same row (real server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from bridge.snapshot import catalog, reader
from bridge.snapshot.chunks import Chunk
from tests.decode.live import LiveSource, changes, source_config

COLUMNS = (
    "id int PRIMARY KEY, b bool, i8 bigint, f8 float8, f4 real, n numeric(12,3), "
    "t text, bin bytea, d date, ts timestamp, tstz timestamptz, iv interval, u uuid, "
    "j jsonb, arr int[], tarr text[], r int4range, inet_ inet, money_ money, nothing text"
)
ROW = (
    "1, true, -9007199254740993, 0.1, 1.1, 12345.678, 'ä \"q\" \\ tab\t', '\\x00ff'::bytea, "
    "'2024-02-29', '2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.5+02', "
    "'1 year 2 mons 3 days 04:05:06.7', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
    "'{\"k\": [1, 2.5, null]}', '{1,NULL,3}', '{\"a b\",\"c,d\"}', '[1,10)', '10.0.0.1/8', "
    "12.34, NULL"
)


def test_snapshot_values_equal_pgoutput_text(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], slot_name: str, tmp_path: Path
) -> None:
    pg_conn.execute(f"CREATE TABLE typed ({COLUMNS})")
    cfg = source_config(stack, pg_db, slot_name=slot_name, publication_name="pub")
    source = LiveSource(cfg, tmp_path)
    try:
        pg_conn.execute(f"INSERT INTO typed VALUES ({ROW})")
        (change,) = changes(source.collect())
    finally:
        source.close()
    assert change.new is not None and change.relation is not None
    oid = change.relation.oid
    table = catalog.describe_table(pg_conn, oid)
    conn = reader.connect(cfg.source.conninfo(), {c.type_oid for c in table.relation.columns})
    try:
        (row,) = reader.read_chunk(conn, table, Chunk(table.label, 0, table.method, None, None))
    finally:
        conn.close()
    assert row == change.new.values
    assert row[-1] is None
