"""Snapshot rows carry exactly the bytes pgoutput sends for the same row (real server):
text COPY's values are pgoutput's text values, binary COPY's its binary values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from decode.live import LiveSource, changes, source_config

from bridge.decode.messages import KIND_BINARY, KIND_TEXT
from bridge.encode.copyrows import binary_start, read_binary_row, read_text_row, text_lines
from bridge.snapshot import catalog, reader
from bridge.snapshot.chunks import Chunk
from bridge.source import libpq

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
        data = chunk_output(conn, table, chunk, binary)
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


def chunk_output(
    conn: psycopg.Connection[Any], table: catalog.SnapshotTable, chunk: Chunk, binary: bool
) -> bytes:
    """A chunk's whole COPY output, its blocks joined."""
    blocks: list[bytes] = []
    reader.read_chunk(conn, table, chunk, binary, blocks.append)
    return b"".join(blocks)


def test_a_copy_failing_midway_is_a_typed_error(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any]
) -> None:
    """A chunk whose COPY the server ends with an error after sending rows (here a
    division by zero in the 30,000th row's filter) raises CommandError with the
    server's SQLSTATE after the rows before it; a chunk that succeeds reads every row,
    in blocks of whole rows; a reader failing on a block cancels the COPY, and the
    connection serves the next one."""
    pg_conn.execute("CREATE TABLE big (id int PRIMARY KEY, v text)")
    pg_conn.execute("INSERT INTO big SELECT g, repeat('x', 100) FROM generate_series(1, 40000) g")
    oid = pg_conn.execute("SELECT 'big'::regclass::oid").fetchone()[0]  # type: ignore[index]
    good = catalog.describe_table(pg_conn, oid)
    failing = catalog.describe_table(pg_conn, oid, row_filter="1 / (30000 - id) IS NOT NULL")
    conn = reader.connect(source_config(stack, pg_db).source.conninfo())
    try:
        chunk = Chunk(good.label, 0, good.method, None, None)
        blocks: list[bytes] = []
        reader.read_chunk(conn, good, chunk, False, blocks.append)
        assert len(blocks) > 1 and all(block.endswith(b"\n") for block in blocks)
        assert sum(len(text_lines(block)) for block in blocks) == 40000

        def refuse(block: bytes) -> None:
            raise ValueError("the reader failed")

        with pytest.raises(ValueError, match="the reader failed"):
            reader.read_chunk(conn, good, chunk, False, refuse)
        assert len(chunk_output(conn, good, chunk, False).splitlines()) == 40000
        with pytest.raises(libpq.CommandError, match=r"COPY failed: \[22012\] division by zero"):
            reader.read_chunk(conn, failing, chunk, False, blocks.append)
    finally:
        conn.close()
