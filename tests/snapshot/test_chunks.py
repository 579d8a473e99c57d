"""Planned chunks cover every row exactly once, by key and by ctid (real server)."""

from __future__ import annotations

import itertools
from typing import Any

import psycopg

from bridge.decode.messages import KIND_TEXT
from bridge.encode.copyrows import read_text_row, text_lines
from bridge.snapshot import catalog, chunks, reader
from bridge.snapshot.catalog import METHOD_CTID, METHOD_KEY
from bridge.snapshot.chunks import Chunk


def _table(conn: psycopg.Connection[Any], name: str) -> catalog.SnapshotTable:
    row = conn.execute("SELECT %s::regclass::oid", (name,)).fetchone()
    assert row is not None
    return catalog.describe_table(conn, row[0])


def _read_all(
    conn: psycopg.Connection[Any], table: catalog.SnapshotTable, planned: list[Chunk]
) -> list[tuple[bytes | None, ...]]:
    """Every planned chunk's rows, read as the snapshot's readers read them (text COPY)."""
    kinds = bytes((KIND_TEXT,)) * len(table.relation.columns)
    rows: list[tuple[bytes | None, ...]] = []
    blocks: list[bytes] = []
    for chunk in planned:
        reader.read_chunk(conn, table, chunk, False, blocks.append)
    for block in blocks:
        rows += [read_text_row(line, 0, kinds).values for line in text_lines(block)]
    return rows


def test_composite_text_key_chunks(pg_conn: psycopg.Connection[Any]) -> None:
    pg_conn.execute("CREATE TABLE c (tenant text, id int, pct text, PRIMARY KEY (tenant, id))")
    pg_conn.execute(
        "INSERT INTO c SELECT 'tenant ' || (g % 7) || ' %', g, g || '%' "
        "FROM generate_series(1, 1000) g"
    )
    table = _table(pg_conn, "c")
    assert table.method == METHOD_KEY
    planned = list(chunks.plan(pg_conn, table, 97, None, 0))
    assert [c.number for c in planned] == list(range(len(planned)))
    assert len(planned) == 11  # 10 full chunks of 97, then the open-ended rest
    assert planned[0].lo is None and planned[-1].hi is None
    assert all(a.hi == b.lo for a, b in itertools.pairwise(planned))
    rows = _read_all(pg_conn, table, planned)
    ids = sorted(int(r[1] or b"") for r in rows)
    assert ids == list(range(1, 1001))
    resumed = list(chunks.plan(pg_conn, table, 97, planned[4].hi, 5))
    assert resumed == planned[5:]


def test_row_filter_and_extra_condition_with_percent(pg_conn: psycopg.Connection[Any]) -> None:
    pg_conn.execute("CREATE TABLE f (id int PRIMARY KEY, s text)")
    pg_conn.execute("INSERT INTO f SELECT g, 'v' || g FROM generate_series(1, 100) g")
    table = _table(pg_conn, "f")._replace(row_filter="s LIKE 'v1%'")
    query, params = chunks.chunk_query(
        table, Chunk("public.f", 0, METHOD_KEY, ("5",), None), condition="id < 15", limit=3
    )
    rows = pg_conn.execute(query, params).fetchall()
    assert [r[0] for r in rows] == [10, 11, 12]
    (top,) = pg_conn.execute(chunks.max_key_query(table, "id < 50"), []).fetchall()
    assert top == ("19",)


def test_ctid_chunks_cover_the_table(pg_conn: psycopg.Connection[Any]) -> None:
    pg_conn.execute("CREATE TABLE nokey (a int, b text)")
    pg_conn.execute("INSERT INTO nokey SELECT g, repeat('x', 50) FROM generate_series(1, 3000) g")
    pg_conn.execute("ANALYZE nokey")
    table = _table(pg_conn, "nokey")
    assert table.method == METHOD_CTID and table.pages > 1
    planned = list(chunks.plan(pg_conn, table, 500, None, 0))
    assert len(planned) >= 5 and planned[-1].hi is None
    rows = _read_all(pg_conn, table, planned)
    assert sorted(int(r[0] or b"") for r in rows) == list(range(1, 3001))


def test_empty_table_is_one_chunk(pg_conn: psycopg.Connection[Any]) -> None:
    pg_conn.execute("CREATE TABLE e (id int PRIMARY KEY)")
    planned = list(chunks.plan(pg_conn, _table(pg_conn, "e"), 10, None, 0))
    assert planned == [Chunk("public.e", 0, METHOD_KEY, None, None)]
