"""Which tables a snapshot reads, and how pgoutput would describe each of them.

No Relation message has arrived when a snapshot starts, so the `Relation` is built
here from pg_attribute with exactly the columns, type OIDs, typmods and key flags
the output plugin sends: key flags from `bridge.schema.catalog.row_identity` (the stream's
encoders read keys there too), columns outside a publication's column list (or a
replication set's att_list) are left out, and so are generated columns for
pgoutput before PostgreSQL 18 (pglogical_output sends them; from 18 on the publication
says which stored generated columns pgoutput sends, and virtual ones never are). The
chunk key is the primary key, else the replica identity index (key columns only, never an
INCLUDE column, which may be NULL); without either a table is read by ctid ranges (or, for
a partitioned root, in one piece).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from psycopg import sql

from bridge.config import SourceConfig
from bridge.decode.messages import Column, Relation
from bridge.errors import SourceError
from bridge.schema.catalog import row_identity

METHOD_KEY, METHOD_CTID, METHOD_WHOLE = "key", "ctid", "whole"

_PUBLISHED = """
SELECT c.oid, pt.schemaname, pt.tablename, {columns}
FROM pg_catalog.pg_publication_tables pt
JOIN pg_catalog.pg_namespace n ON n.nspname = pt.schemaname
JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
WHERE pt.pubname = %s
ORDER BY pt.schemaname, pt.tablename
"""
# Column lists and row filters exist from PostgreSQL 15 on.
_PUBLISHED_PG15 = _PUBLISHED.format(columns="pt.attnames, pt.rowfilter")
_PUBLISHED_OLD = _PUBLISHED.format(columns="NULL::name[], NULL::text")
_REPLICATION_SETS = """
SELECT DISTINCT ON (c.oid) c.oid, n.nspname, c.relname, t.set_att_list,
       pg_catalog.pg_get_expr(t.set_row_filter, t.set_reloid)
FROM pglogical.replication_set_table t
JOIN pglogical.replication_set s ON s.set_id = t.set_id
JOIN pg_catalog.pg_class c ON c.oid = t.set_reloid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE s.set_name = ANY(%s)
ORDER BY c.oid
"""
_CLASS = """
SELECT n.nspname, c.relname, c.relreplident, c.relkind, c.reltuples, c.relpages
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = %s
"""
_COLUMNS = """
SELECT a.attname, a.atttypid, a.atttypmod, pg_catalog.format_type(a.atttypid, NULL),
       a.attgenerated <> ''
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""


class KeyColumn(NamedTuple):
    name: str
    type_sql: str  # format_type without typmod: the cast for a bound read back as text


class SnapshotTable(NamedTuple):
    relation: Relation  # as the output plugin describes it
    key: tuple[KeyColumn, ...]  # chunk key in index order; () for ctid / whole reads
    method: str  # METHOD_KEY, METHOD_CTID or METHOD_WHOLE
    row_filter: str | None  # the publication's row filter, an SQL expression
    estimated_rows: int  # pg_class.reltuples; 0 when never analyzed
    pages: int  # pg_class.relpages
    # The SELECT an initial snapshot reads the table through (snapshot.select_overrides,
    # snapshot.row_filters); its chunk queries select from it as from the table.
    select_override: str | None = None
    # Read FROM ONLY: a plain table's inheritance children are tables of their own, whose
    # rows PostgreSQL never sends as the parent's (a partitioned root reads its partitions).
    only: bool = False

    @property
    def label(self) -> str:
        return f"{self.relation.namespace}.{self.relation.name}"

    @property
    def ident(self) -> sql.Identifier:
        return sql.Identifier(self.relation.namespace, self.relation.name)

    def select_list(self) -> sql.Composed:
        return sql.SQL(", ").join(sql.Identifier(c.name) for c in self.relation.columns)

    def key_list(self) -> sql.Composed:
        return sql.SQL(", ").join(sql.Identifier(k.name) for k in self.key)

    def key_text_list(self) -> sql.Composed:
        """Key columns as text, aliased so that ORDER BY still means the typed columns."""
        return sql.SQL(", ").join(
            sql.SQL("{}::text AS {}").format(sql.Identifier(k.name), sql.Identifier(f"key {i}"))
            for i, k in enumerate(self.key)
        )


class Published(NamedTuple):
    """A table the output plugin sends, with the publication's column list and row filter."""

    oid: int
    namespace: str
    name: str
    columns: tuple[str, ...] | None
    row_filter: str | None
    generated: bool  # the plugin sends the generated columns among `columns` (pglogical;
    # pgoutput from PostgreSQL 18 on, whose `columns` then lists exactly what it sends)


def published_tables(
    conn: Any, *, plugin: str, publication: str, replication_sets: Sequence[str]
) -> list[Published]:
    pglogical = plugin == "pglogical_output"
    if pglogical:
        rows = conn.execute(_REPLICATION_SETS, (list(replication_sets),)).fetchall()
    else:
        query = _PUBLISHED_PG15 if conn.info.server_version >= 150000 else _PUBLISHED_OLD
        rows = conn.execute(query, (publication,)).fetchall()
    # From PostgreSQL 18 on, attnames lists exactly the columns pgoutput sends: stored
    # generated ones when the publication publishes them (publish_generated_columns = stored,
    # or named in its column list), never virtual ones. Before 18 it lists every column and
    # pgoutput sends no generated column.
    exact = not pglogical and conn.info.server_version >= 180000
    return [
        Published(oid, nsp, name, tuple(cols) if cols else None, rowfilter, pglogical or exact)
        for oid, nsp, name, cols, rowfilter in rows
    ]


def captured_tables(
    conn: Any,
    source: SourceConfig,
    captures: Callable[[Published], bool],
    wanted: Sequence[str],
) -> tuple[list[SnapshotTable], list[str]]:
    """The tables the plugin sends that `captures` keeps (the filters, less the bridge's
    own tables), or those of them named in `wanted`, described; and the names in `wanted`
    that are not captured, for the caller to refuse in terms of its own setting."""
    published = published_tables(
        conn,
        plugin=source.plugin,
        publication=source.publication_name,
        replication_sets=source.replication_sets,
    )
    kept = {p.oid: p for p in published if captures(p)}
    if wanted:
        oids = resolve(conn, wanted)
        missing = [name for name in wanted if oids.get(name) not in kept]
        chosen = [kept[oids[name]] for name in wanted if name not in missing]
    else:
        missing, chosen = [], list(kept.values())
    tables = [describe_table(conn, p.oid, p.columns, p.row_filter, p.generated) for p in chosen]
    return tables, missing


def resolve(conn: Any, names: Sequence[str]) -> dict[str, int]:
    """ "schema.table" (or "table", meaning public) -> oid, for the names that exist."""
    found: dict[str, int] = {}
    for name in names:
        schema, _, table = name.rpartition(".")
        ident = sql.Identifier(schema or "public", table).as_string(conn)
        (oid,) = conn.execute("SELECT to_regclass(%s)::oid", (ident,)).fetchone()
        if oid is not None:
            found[name] = oid
    return found


def describe_table(
    conn: Any,
    oid: int,
    columns: tuple[str, ...] | None = None,
    row_filter: str | None = None,
    generated: bool = False,
) -> SnapshotTable:
    """The table as the output plugin would describe it, plus its chunking method."""
    row = conn.execute(_CLASS, (oid,)).fetchone()
    if row is None:
        raise SourceError(
            f"table with oid {oid} vanished while planning the snapshot",
            hint="restart the bridge; it plans the snapshot again from the catalog",
        )
    namespace, name, replident, relkind, reltuples, relpages = row
    attrs = conn.execute(_COLUMNS, (oid,)).fetchall()
    identity = row_identity(conn, oid)
    sent = [a for a in attrs if (generated or not a[4]) and (columns is None or a[0] in columns)]
    cols = tuple(
        Column(1 if identity.is_identity(attname) else 0, attname, typid, typmod)
        for attname, typid, typmod, _, _ in sent
    )
    relation = Relation(None, oid, namespace, name, replident, cols)
    types = {a[0]: a[3] for a in attrs}
    key = tuple(KeyColumn(column, types[column]) for column in identity.unique_key)
    if key:
        method = METHOD_KEY
    elif relkind == "p":
        method = METHOD_WHOLE  # a partitioned root has no ctid of its own
    else:
        method = METHOD_CTID
    return SnapshotTable(
        relation,
        key,
        method,
        row_filter,
        max(int(reltuples), 0),
        max(int(relpages), 0),
        only=relkind != "p",
    )
