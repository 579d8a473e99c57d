"""Chunk boundaries and the queries that read one chunk.

A key chunk is the half-open key range (lo, hi]: `lo` None means the start of the
table, `hi` None its end. Ranges are planned by walking the key index
(`ORDER BY key OFFSET chunk_size-1 LIMIT 1` from the previous boundary), so workers
can read any planned range concurrently, and a range means the same rows at any
later snapshot: a resume re-reads an unfinished range by its stored bounds. A ctid
chunk is a block range [lo, hi), valid only for the snapshot it was planned in
(see the package docstring on resumes). Bounds travel as text and are cast back to
the key column's type, so any orderable key type works.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import psycopg
from psycopg import sql

from bridge.errors import ConfigError
from bridge.snapshot import catalog
from bridge.snapshot.catalog import METHOD_CTID, METHOD_KEY, METHOD_WHOLE, SnapshotTable

Bound = tuple[str, ...]

_BLOCKS = "SELECT pg_catalog.pg_relation_size(%s) / current_setting('block_size')::bigint"
_DEFAULT_ROWS_PER_BLOCK = 100


class Chunk(NamedTuple):
    table: str  # SnapshotTable.label
    number: int
    method: str
    lo: Bound | None
    hi: Bound | None


def raw(text: str) -> sql.SQL:
    """A trusted SQL fragment (catalog text, operator input) in a query run with parameters
    (a list, empty or not: psycopg reads `%%` as `%` only then)."""
    return sql.SQL(text.replace("%", "%%"))


def from_item(table: SnapshotTable) -> sql.Composable:
    """What every chunk query reads from: the table, or its select override as a subquery
    named like the table, so key ranges, ORDER BY and the column list read the same.

    The one place a snapshot's SQL names its source (COPY or SELECT alike wrap the query
    built on it)."""
    if table.select_override is None:
        return sql.SQL("ONLY {}").format(table.ident) if table.only else table.ident
    return sql.SQL("({}) AS {}").format(
        raw(table.select_override), sql.Identifier(table.relation.name)
    )


def with_overrides(
    conn: Any,
    tables: list[SnapshotTable],
    select_overrides: Mapping[str, str],
    row_filters: Mapping[str, str],
) -> tuple[list[SnapshotTable], list[str]]:
    """`tables` with their select overrides (a row filter becomes `SELECT * ... WHERE`), and
    the configured names that are none of them, for the caller to refuse.

    A subquery has no ctid: an overridden table without a key is read in one chunk. Each
    override is tried once (LIMIT 0, in a savepoint of `conn`'s snapshot transaction), so a
    SELECT lacking a published column stops the bridge before any row is read."""
    texts = dict(select_overrides)
    for name, condition in row_filters.items():
        schema, _, relname = name.rpartition(".")
        ident = sql.Identifier(schema or "public", relname).as_string(conn)
        texts[name] = f"SELECT * FROM {ident} WHERE ({condition})"
    oids = catalog.resolve(conn, list(texts))
    by_oid = {table.relation.oid: table for table in tables}
    unknown = [name for name in texts if oids.get(name) not in by_oid]
    for name, text in texts.items():
        if name in unknown:
            continue
        table = by_oid[oids[name]]
        method = METHOD_WHOLE if table.method == METHOD_CTID else table.method
        table = by_oid[oids[name]] = table._replace(select_override=text, method=method)
        probe = sql.SQL("SELECT {} FROM {} LIMIT 0").format(table.select_list(), from_item(table))
        try:
            with conn.transaction():
                conn.execute(probe, [])  # [] not None: raw()'s %% read as %
        except psycopg.Error as exc:
            setting = "row_filters" if name in row_filters else "select_overrides"
            raise ConfigError(
                f"snapshot.{setting} of {name} cannot be read: {str(exc).strip()}",
                hint="it must be a valid query that returns every published column of the "
                "table under its own name",
            ) from None
    return [by_oid[table.relation.oid] for table in tables], unknown


def _compare(table: SnapshotTable, op: str) -> sql.Composed:
    """`(k1, k2) > (%s::t1, %s::t2)`: a row comparison follows the index order."""
    casts = sql.SQL(", ").join(sql.SQL("%s::{}").format(raw(k.type_sql)) for k in table.key)
    return sql.SQL("({}) " + op + " ({})").format(table.key_list(), casts)


def key_conditions(
    table: SnapshotTable, lo: Bound | None, hi: Bound | None
) -> tuple[list[sql.Composable], list[str]]:
    """Conditions and parameters selecting the key range (lo, hi]."""
    conds: list[sql.Composable] = []
    params: list[str] = []
    if lo is not None:
        conds.append(_compare(table, ">"))
        params.extend(lo)
    if hi is not None:
        conds.append(_compare(table, "<="))
        params.extend(hi)
    return conds, params


def _range_conditions(table: SnapshotTable, chunk: Chunk) -> tuple[list[sql.Composable], list[str]]:
    """The WHERE terms that bound one chunk: key ranges or ctid page ranges."""
    conds: list[sql.Composable] = []
    params: list[str] = []
    if chunk.method == METHOD_KEY:
        return key_conditions(table, chunk.lo, chunk.hi)
    if chunk.method == METHOD_CTID:
        if chunk.lo is not None:
            conds.append(sql.SQL("ctid >= %s::tid"))
            params.append(f"({chunk.lo[0]},0)")
        if chunk.hi is not None:
            conds.append(sql.SQL("ctid < %s::tid"))
            params.append(f"({chunk.hi[0]},0)")
    return conds, params


def chunk_query(
    table: SnapshotTable,
    chunk: Chunk,
    *,
    condition: str | None = None,
    limit: int | None = None,
    key_text: bool = False,
) -> tuple[sql.Composed, list[str]]:
    """SELECT of the published columns of one chunk, in the output plugin's column order.

    `condition` is an extra filter (an incremental snapshot's additional condition);
    `key_text` puts the key columns as text in front (to continue after the last row).
    """
    conds, params = _range_conditions(table, chunk)
    for extra in (table.row_filter, condition):
        if extra:
            conds.append(sql.SQL("({})").format(raw(extra)))
    columns = table.select_list()
    if key_text:
        columns = sql.SQL("{}, {}").format(table.key_text_list(), columns)
    query = sql.SQL("SELECT {} FROM {}").format(columns, from_item(table))
    if conds:
        query += sql.SQL(" WHERE ") + sql.SQL(" AND ").join(conds)
    if chunk.method == METHOD_KEY:
        query += sql.SQL(" ORDER BY {}").format(table.key_list())
    if limit is not None:
        query += sql.SQL(" LIMIT {}").format(sql.Literal(limit))
    return query, params


def max_key_query(table: SnapshotTable, condition: str | None) -> sql.Composed:
    """The highest key (as text) of the rows an incremental snapshot reads."""
    conds = [sql.SQL("({})").format(raw(c)) for c in (table.row_filter, condition) if c]
    query = sql.SQL("SELECT {} FROM {}").format(table.key_text_list(), from_item(table))
    if conds:
        query += sql.SQL(" WHERE ") + sql.SQL(" AND ").join(conds)
    order = sql.SQL(", ").join(sql.SQL("{} DESC").format(sql.Identifier(k.name)) for k in table.key)
    return query + sql.SQL(" ORDER BY {} LIMIT 1").format(order)


def plan(
    conn: Any, table: SnapshotTable, chunk_size: int, start: Bound | None, first: int
) -> Iterator[Chunk]:
    """Chunks from `start` (exclusive; None = table start) to the end, numbered from `first`.

    `conn` reads inside the snapshot, so boundaries describe the rows being read.
    """
    if table.method == METHOD_WHOLE:
        yield Chunk(table.label, first, METHOD_WHOLE, None, None)
    elif table.method == METHOD_KEY:
        yield from _plan_keys(conn, table, chunk_size, start, first)
    else:
        yield from _plan_blocks(conn, table, chunk_size, start, first)


def _plan_keys(
    conn: Any, table: SnapshotTable, chunk_size: int, lo: Bound | None, number: int
) -> Iterator[Chunk]:
    while True:
        conds, params = key_conditions(table, lo, None)
        query = sql.SQL("SELECT {} FROM {}").format(table.key_text_list(), from_item(table))
        if conds:
            query += sql.SQL(" WHERE ") + sql.SQL(" AND ").join(conds)
        query += sql.SQL(" ORDER BY {} OFFSET {} LIMIT 1").format(
            table.key_list(), sql.Literal(chunk_size - 1)
        )
        row = conn.execute(query, params).fetchone()
        hi = None if row is None else tuple(row)
        yield Chunk(table.label, number, METHOD_KEY, lo, hi)
        if hi is None:
            return
        lo, number = hi, number + 1


def _plan_blocks(
    conn: Any, table: SnapshotTable, chunk_size: int, lo: Bound | None, number: int
) -> Iterator[Chunk]:
    (blocks,) = conn.execute(_BLOCKS, (table.relation.oid,)).fetchone()
    per_block = (
        table.estimated_rows / table.pages
        if table.estimated_rows and table.pages
        else _DEFAULT_ROWS_PER_BLOCK
    )
    step = max(1, int(chunk_size / max(per_block, 1.0)))
    block = int(lo[0]) if lo is not None else 0
    while True:
        end = block + step
        if end >= blocks:  # the last chunk is open-ended: it also takes blocks added since
            yield Chunk(table.label, number, METHOD_CTID, _block(block), None)
            return
        yield Chunk(table.label, number, METHOD_CTID, _block(block), (str(end),))
        block, number = end, number + 1


def _block(block: int) -> Bound | None:
    return None if block == 0 else (str(block),)
