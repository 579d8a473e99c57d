"""The two upstream output plugins behind one small contract.

Each plugin knows its START_REPLICATION options, its decoder, and what it needs on
the server (a publication for pgoutput; a pglogical node and replication sets for
pglogical_output).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import psycopg
from psycopg.conninfo import make_conninfo

from bridge.config import Config, SourceConfig
from bridge.decode.messages import Begin, Message, Relation, Startup
from bridge.decode.pglogical import PglogicalDecoder, check_startup, pglogical_options
from bridge.decode.pgoutput import PgoutputDecoder, pgoutput_options
from bridge.errors import ConfigError, ProtocolError, SchemaError, SourceError
from bridge.source import slots

log = logging.getLogger("bridge.plugins")


class Plugin(Protocol):
    @property
    def options(self) -> Sequence[tuple[str, str]]: ...

    @property
    def decode(self) -> Callable[[bytes], Message]:
        """Payload → message (a bound method: called once per message)."""

    @property
    def decode_streamed(self) -> Callable[[bytes], Message]:
        """Decoder for buffered streamed records replayed after their stream block."""

    def describe(self) -> str: ...


def default_proto_version(server_version: int) -> int:
    """The highest pgoutput protocol the server speaks."""
    if server_version >= 160000:
        return 4
    if server_version >= 150000:
        return 3
    if server_version >= 140000:
        return 2
    return 1


class Pgoutput:
    def __init__(self, cfg: Config, server_version: int, conn: Any) -> None:
        src = cfg.source
        self.proto_version = src.proto_version or default_proto_version(server_version)
        root = src.publish_via_partition_root
        slots.ensure_publication(
            conn,
            src.publication_name,
            src.publication_mode,
            via_root=root,
            generated=src.publish_generated_columns,
        )
        self.options = pgoutput_options(
            self.proto_version,
            [src.publication_name],
            binary=src.binary,
            messages=src.messages,
            streaming=src.streaming,
            two_phase=src.two_phase,
            origin=src.origin,
        )
        self.decode = PgoutputDecoder(self.proto_version).decode
        # Buffered stream records are replayed after their S…E block has closed: a
        # decoder that starts inside a stream reads their xid prefix.
        streamed = PgoutputDecoder(self.proto_version, in_stream=self.proto_version >= 2)
        self.decode_streamed = streamed.decode

    def describe(self) -> str:
        return "pgoutput " + ", ".join(f"{k}={v}" for k, v in self.options)


class Pglogical:
    """pglogical_output: server set-up, the startup check, and column types.

    The plugin's Relation messages carry no column types, which the schema layer
    needs, so each Relation gets them from pg_attribute (one query per Relation
    message; pglogical sends one per relation per session and after DDL, never per
    row). The catalog is read as it is *now*, not as it was when the change was
    written: a column dropped or renamed since cannot be typed and stops the
    bridge with a SchemaError, and a column whose type changed since is read with
    its new type (fine for widening in text mode; a binary value of the old type
    fails to convert). A bridge that keeps up has typed each relation version
    before the next DDL commits; prefer text mode where columns change type. The
    replica identity (`relreplident`) is filled the same way.

    Logical messages, TRUNCATE, streaming and two-phase do not exist in this
    plugin; `source.messages` is ignored, streaming and two_phase are refused.
    `source.origin` maps to forwarding: unset or `any` forwards every origin (as
    pgoutput does), `none` only sends local changes.
    """

    def __init__(self, cfg: Config, server_version: int, conn: Any) -> None:
        src = cfg.source
        if src.streaming != "off" or src.two_phase:
            raise ConfigError(
                "pglogical_output supports neither streaming nor two_phase",
                hint="set source.streaming: off and source.two_phase: false, or use pgoutput",
            )
        ensure_pglogical(conn, src)
        self.options = pglogical_options(
            replication_sets=src.replication_sets,
            forward_origins=None if src.origin == "none" else ["all"],
            binary=src.binary,
            server_version_num=server_version,
        )
        self._conn = conn
        self._decode = PglogicalDecoder().decode
        self._started = False
        self.decode = self._checked
        self.decode_streamed = self._checked  # never used: the plugin does not stream

    def _checked(self, data: bytes) -> Message:
        msg = self._decode(data)
        match msg:
            case Relation():
                return with_column_types(self._conn, msg)
            case Startup():
                check_startup(msg, self.options)
                self._started = True
            case Begin() if not self._started:
                raise ProtocolError(
                    "B",
                    0,
                    "transaction before the startup message: the value formats were never "
                    "agreed; is the slot's plugin pglogical_output 2.x?",
                )
        return msg

    def describe(self) -> str:
        wanted = dict(self.options)
        return (
            f"pglogical_output sets={wanted['pglogical.replication_set_names']} "
            f"binary={wanted['binary.want_binary_basetypes']} "
            f"forward_origins={wanted.get('pglogical.forward_origins', '(none)')}"
        )


def open_plugin(cfg: Config, server_version: int, conn: Any) -> Plugin:
    if cfg.source.plugin == "pglogical_output":
        return Pglogical(cfg, server_version, conn)
    return Pgoutput(cfg, server_version, conn)


# -- pglogical_output: column types ---------------------------------------------------

_COLUMNS_SQL = """
SELECT c.relreplident, a.attname, a.atttypid, a.atttypmod
FROM pg_catalog.pg_class c
LEFT JOIN pg_catalog.pg_attribute a
       ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.oid = %s
"""


def with_column_types(conn: Any, relation: Relation) -> Relation:
    """`relation` with the type OIDs, typmods and replica identity the plugin left out."""
    if all(c.type_oid for c in relation.columns) and relation.replica_identity:
        return relation
    label = f"{relation.namespace}.{relation.name}"
    try:
        rows = conn.execute(_COLUMNS_SQL, (relation.oid,)).fetchall()
    except psycopg.Error as exc:
        raise SourceError(
            f"cannot read the column types of {label} from pg_attribute: {exc}",
            hint="the catalog connection must stay open and may read pg_catalog",
        ) from None
    if not rows:
        raise SchemaError(
            f"relation {label} (oid {relation.oid}) no longer exists, so the types of its "
            "changes cannot be known (pglogical_output does not send column types)",
            hint="skip these changes by advancing the slot past them "
            "(pg_replication_slot_advance), or use pgoutput, which sends types",
        )
    types = {name: (oid, typmod) for _, name, oid, typmod in rows if name is not None}
    columns = []
    for column in relation.columns:
        found = types.get(column.name)
        if found is None:
            raise SchemaError(
                f"column {column.name!r} of {label} is no longer in pg_attribute (dropped or "
                "renamed since the change was written), so its type cannot be known",
                hint="restore the column, advance the slot past these changes, or use "
                "pgoutput, which sends column types",
            )
        columns.append(
            column if column.type_oid else column._replace(type_oid=found[0], typmod=found[1])
        )
    identity = relation.replica_identity or str(rows[0][0])
    return relation._replace(replica_identity=identity, columns=tuple(columns))


# -- pglogical_output: server set-up --------------------------------------------------

_SYSTEM_SCHEMAS = ["information_schema", "pglogical"]  # and every pg_* schema
_LOCAL_NODE_SQL = (
    "SELECT n.node_name FROM pglogical.local_node l JOIN pglogical.node n USING (node_id)"
)
_SETS_SQL = (
    "SELECT s.set_name FROM pglogical.replication_set s "
    "JOIN pglogical.local_node l ON s.set_nodeid = l.node_id WHERE s.set_name = ANY(%s)"
)
_MISSING_TABLES_SQL = """
SELECT c.oid, c.oid::regclass::text
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND c.relpersistence = 'p'
  AND n.nspname <> ALL(%s) AND n.nspname NOT LIKE 'pg\\_%%'
  AND NOT EXISTS (
      SELECT 1 FROM pglogical.replication_set_table t
      JOIN pglogical.replication_set s ON s.set_id = t.set_id
      WHERE t.set_reloid = c.oid AND s.set_name = %s)
ORDER BY 2
"""


def node_dsn(src: SourceConfig) -> str:
    """The dsn recorded for the pglogical node, deliberately without the password.

    pglogical stores it in pglogical.node_interface, a table every role can read,
    and only pglogical *subscribers* ever connect with it; the bridge reads through
    its own slot and never uses it. A subscriber would authenticate with a
    ~/.pgpass entry or a certificate instead.
    """
    return make_conninfo(
        host=src.host, port=str(src.port), dbname=src.dbname, user=src.user, sslmode=src.sslmode
    )


def ensure_pglogical(conn: Any, src: SourceConfig) -> None:
    """Extension, node and replication sets: created (`all_tables`) or required (`disabled`).

    In `all_tables` mode every permanent table of every non-system schema that is not
    yet in a configured set is added, one by one: tables pglogical refuses (a set
    that replicates UPDATE/DELETE needs a primary key) are skipped with a warning
    instead of failing the others. Tables created later are added on the next start.
    """
    create = src.publication_mode == "all_tables"
    sets = list(src.replication_sets)
    installed = _query(conn, "SELECT 1 FROM pg_extension WHERE extname = 'pglogical'")
    if not installed:
        if not create:
            raise SourceError(
                "extension pglogical is not installed in this database",
                hint="run CREATE EXTENSION pglogical, or set source.publication_mode: "
                "all_tables to let the bridge do it",
            )
        _run(conn, "CREATE EXTENSION IF NOT EXISTS pglogical", None, "creating extension pglogical")
    node = _query(conn, _LOCAL_NODE_SQL)
    if not node:
        if not create:
            raise SourceError(
                "this database is not a pglogical node",
                hint="run SELECT pglogical.create_node(node_name := 'bridge', dsn := '...'), "
                "or set source.publication_mode: all_tables",
            )
        name = f"bridge_{src.slot_name}"[:63]
        _run(
            conn,
            "SELECT pglogical.create_node(node_name := %s, dsn := %s)",
            (name, node_dsn(src)),
            f"creating pglogical node {name!r}",
        )
    have = {row[0] for row in _query(conn, _SETS_SQL, (sets,))}
    missing = [s for s in sets if s not in have]
    if missing and not create:
        raise SourceError(
            f"pglogical replication set(s) {missing} do not exist",
            hint="create them with pglogical.create_replication_set() and add tables, or set "
            "source.publication_mode: all_tables",
        )
    if not create:
        return
    for name in missing:
        _run(
            conn,
            "SELECT pglogical.create_replication_set(%s)",
            (name,),
            f"creating pglogical replication set {name!r}",
        )
    for name in sets:
        _add_tables(conn, name)


def _add_tables(conn: Any, set_name: str) -> None:
    skipped = []
    for relid, label in _query(conn, _MISSING_TABLES_SQL, (_SYSTEM_SCHEMAS, set_name)):
        try:
            conn.execute(
                "SELECT pglogical.replication_set_add_table(%s, %s::oid::regclass)",
                (set_name, relid),
            )
        except psycopg.Error as exc:
            skipped.append(f"{label} ({_reason(exc)})")
    if skipped:
        log.warning(
            "pglogical: not added to replication set %r, their changes are not streamed: %s",
            set_name,
            "; ".join(skipped),
        )


def _reason(exc: psycopg.Error) -> str:
    """The server's message and detail (they say why), never the statement's parameters."""
    parts = [p.strip() for p in (exc.diag.message_primary, exc.diag.message_detail) if p]
    return ": ".join(parts) or str(exc).strip()


def _query(conn: Any, query: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
    try:
        return list(conn.execute(query, params).fetchall())
    except psycopg.Error as exc:
        raise SourceError(
            f"reading the pglogical configuration failed: {_reason(exc)}",
            hint="the source role needs read access to pg_catalog and schema pglogical",
        ) from None


def _run(conn: Any, query: str, params: Sequence[Any] | None, doing: str) -> None:
    try:
        conn.execute(query, params)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise SourceError(
            f"{doing}: not allowed ({_reason(exc)})",
            hint="a superuser must set up pglogical (extension, node, replication sets), or "
            "set up by hand and use source.publication_mode: disabled",
        ) from None
    except psycopg.Error as exc:
        raise SourceError(
            f"{doing} failed: {_reason(exc)}",
            hint="install pglogical 2.x on the server (shared_preload_libraries = 'pglogical') "
            "and check the PostgreSQL log",
        ) from None
