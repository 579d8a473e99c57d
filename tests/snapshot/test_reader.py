"""Snapshot rows carry exactly the bytes pgoutput sends for the same row (real server):
text COPY's values are pgoutput's text values, binary COPY's its binary values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from bridge.decode.messages import KIND_BINARY, KIND_TEXT
from bridge.encode.copyrows import binary_start, read_binary_row, read_text_row, text_lines
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


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_snapshot_values_equal_pgoutput(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    tmp_path: Path,
    binary: bool,
) -> None:
    pg_conn.execute(f"CREATE TABLE typed ({COLUMNS})")
    cfg = source_config(stack, pg_db, slot_name=slot_name, publication_name="pub", binary=binary)
    source = LiveSource(cfg, tmp_path)
    try:
        pg_conn.execute(f"INSERT INTO typed VALUES ({ROW})")
        (change,) = changes(source.collect())
    finally:
        source.close()
    assert change.new is not None and change.relation is not None
    oid = change.relation.oid
    table = catalog.describe_table(pg_conn, oid)
    conn = reader.connect(cfg.source.conninfo())
    try:
        chunk = Chunk(table.label, 0, table.method, None, None)
        data = reader.read_chunk(conn, table, chunk, binary)
    finally:
        conn.close()
    width = len(table.relation.columns)
    if binary:
        row, end = read_binary_row(data, binary_start(data), bytes((KIND_BINARY,)) * width)
        assert read_binary_row(data, end, b"")[0] is None  # then the end-of-data marker
    else:
        [line] = text_lines(data)
        row = read_text_row(line, 0, bytes((KIND_TEXT,)) * width)
    assert row == change.new
    assert row is not None and row.values[-1] is None
