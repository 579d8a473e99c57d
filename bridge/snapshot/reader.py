"""Reading chunks inside an exported snapshot, and turning their rows into records.

A reader's chunk is one `COPY (SELECT …) TO STDOUT`: its output goes to the table
version's encoder (`bridge.encode.copyrows`) in blocks as it arrives, with no row
fetched into Python values on the way. Text COPY carries each value as its output
function prints it, as pgoutput's text tuples do; binary COPY in its send format, as
pgoutput's binary tuples do. Binary is the default (snapshot.copy_format), where every
column allows it: the encoder writes the common types' send format inline (a float8's
bytes reversed, integers and timestamps read in i64) at the reader's CPU per row of
text, and the server's send functions cost less than its output functions
(bench/README.md, snapshot).

Incremental snapshots and `bridge verify` read with a cursor instead (`encode_rows`):
values fetched in the text output format and kept as the exact bytes the server
printed (a loader returning raw bytes for every column type), the same bytes as
pgoutput's text tuples.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import psycopg
from psycopg import IsolationLevel, sql
from psycopg.adapt import Buffer, Loader

from bridge import __version__
from bridge.config import Config
from bridge.decode.messages import KIND_NULL, KIND_TEXT, PG_EPOCH_OFFSET_US, TupleData
from bridge.encode.copyrows import OP_READ, CopyRows, PackedRecords, SnapshotSource
from bridge.encode.records import ChangeEncoder, SourceBlock, TxSource
from bridge.encoders import encoder_cache
from bridge.errors import SchemaError
from bridge.events.model import Change
from bridge.kafka.registry import Registry, open_registry
from bridge.record import KafkaRecord
from bridge.routing import Routing
from bridge.snapshot.catalog import SnapshotTable
from bridge.snapshot.chunks import Chunk, chunk_query
from bridge.source import libpq

Row = tuple[bytes | None, ...]


class RawText(Loader):
    """The server's text output, untouched: what pgoutput puts in a text tuple."""

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


class TableJob(NamedTuple):
    table: SnapshotTable
    topic: str
    encoder: ChangeEncoder
    binary: bool = False  # chunks read with binary COPY (snapshot.copy_format, `copy_binary`)


# Types among the given oids without a binary output (send) function.
_NO_SEND = "SELECT count(*) FROM pg_catalog.pg_type WHERE oid = ANY(%s) AND typsend = 0"


def build_jobs(
    cfg: Config, catalog_conn: Any, tables: list[SnapshotTable], registry: Registry | None = None
) -> dict[str, TableJob]:
    """Encoders built exactly as the pipeline builds them, so schemas and ids match,
    registered through `registry` (default: a new one, `open_registry`).

    Built for text tuples, as the stream's are by default: an encoder reads binary
    tuples all the same, for the columns `ChangeEncoder.check_binary` accepts."""
    routing = Routing.from_config(cfg)
    registry = open_registry(cfg) if registry is None else registry
    encoders = encoder_cache(cfg, catalog_conn, registry, routing.topic, binary=False)
    jobs = {}
    for table in tables:
        topic, encoder = encoders.get(table.relation)
        binary = cfg.snapshot.copy_format == "binary" and copy_binary(catalog_conn, table, encoder)
        jobs[table.label] = TableJob(table, topic, encoder, binary)
    return jobs


def copy_binary(catalog_conn: Any, table: SnapshotTable, encoder: ChangeEncoder) -> bool:
    """Whether a chunk of `table` can be read with binary COPY: the encoder reads every
    kept column's binary form, and every selected column's type has a send function
    (the server refuses binary COPY of the others, excluded columns included)."""
    try:
        encoder.check_binary(every_column=True)
    except SchemaError:
        return False
    oids = list({c.type_oid for c in table.relation.columns})
    row = catalog_conn.execute(_NO_SEND, (oids,)).fetchone()
    return row is not None and row[0] == 0


def connect(
    conninfo: dict[str, Any], type_oids: Iterable[int] = (), *, purpose: str = "snapshot"
) -> psycopg.Connection[Any]:
    """A session that never times out mid-snapshot (server-side: the bridge's own
    deadlines still bound every wait, bridge.source.libpq) and reads `type_oids` as raw
    text. `purpose` names the connection in errors."""
    conn = libpq.connect(conninfo, replication=False, purpose=purpose)
    conn.execute("SET statement_timeout = 0")
    conn.execute("SET idle_in_transaction_session_timeout = 0")
    for oid in type_oids:
        conn.adapters.register_loader(oid, RawText)
    return conn


def import_snapshot(conn: psycopg.Connection[Any], snapshot_name: str) -> None:
    """Open a read-only REPEATABLE READ transaction that sees exactly `snapshot_name`.

    The transaction keeps that view after the exporting session moves on, until it ends.
    """
    conn.autocommit = False
    conn.isolation_level = IsolationLevel.REPEATABLE_READ
    conn.read_only = True
    conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)))


def export_again(conn: psycopg.Connection[Any]) -> str:
    """A new id of the snapshot `conn`'s transaction imported, importable by other sessions
    until that transaction ends (a slot's exported snapshot lasts only until its replication
    connection's next command). `conn` may read text as raw bytes (`connect`)."""
    row = conn.execute("SELECT pg_catalog.pg_export_snapshot()").fetchone()
    assert row is not None
    found = row[0]
    return found.decode() if isinstance(found, bytes) else str(found)


def read_chunk(
    conn: psycopg.Connection[Any],
    table: SnapshotTable,
    chunk: Chunk,
    binary: bool,
    sink: Callable[[bytes], object],
) -> None:
    """The COPY output of one chunk, binary or text, handed to `sink` in blocks of whole
    rows as it arrives (`libpq.copy_out`): what `bridge.encode.copyrows.CopyRows.feed`
    reads."""
    query, params = chunk_query(table, chunk)
    form = sql.SQL("binary" if binary else "text")
    statement = sql.SQL("COPY ({}) TO STDOUT (FORMAT {})").format(query, form)
    libpq.copy_out(conn, statement, params, sink)


def read_records(
    conn: psycopg.Connection[Any], job: TableJob, chunk: Chunk, source: TxSource
) -> tuple[PackedRecords, Change | None]:
    """A chunk's records (op "r"), packed, and its last row's change (to encode it again
    as the snapshot's "last" record), encoded block by block as its COPY output arrives."""
    rows = CopyRows(job.binary, job.encoder, source)
    read_chunk(conn, job.table, chunk, job.binary, rows.feed)
    return rows.finish()


def encode_rows(
    rows: list[Row], job: TableJob, source: TxSource
) -> tuple[list[KafkaRecord], Change | None]:
    """Records of `rows` (op "r") and the last row's change, to re-encode it as "last"."""
    relation = job.table.relation
    all_text = bytes((KIND_TEXT,)) * len(relation.columns)
    records = job.encoder.records
    out: list[KafkaRecord] = []
    change: Change | None = None
    for row in rows:
        new = TupleData(row_kinds(row, all_text), row)
        change = Change(OP_READ, relation, "", None, new, 0, (), 0, None, source.commit_lsn)
        out += records(change, source)
    return out, change


def row_kinds(row: Row, all_text: bytes) -> bytes:
    """The tuple kinds of a row read as raw text (`all_text`: as many KIND_TEXT bytes as
    the row has columns)."""
    return all_text if None not in row else bytes(_kind(v) for v in row)


def _kind(value: bytes | None) -> int:
    return KIND_NULL if value is None else KIND_TEXT


def snapshot_source(server: str, db: str, lsn: int, flag: str) -> TxSource:
    """The source block of snapshot records: `snapshot` is "true", "last" or "incremental"."""
    now_us = time.time_ns() // 1000 - PG_EPOCH_OFFSET_US
    return SnapshotSource(SourceBlock(server, db, __version__, flag), lsn, now_us)
