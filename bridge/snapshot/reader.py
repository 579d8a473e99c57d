"""Reading chunks inside an exported snapshot, and turning their rows into records.

Values are fetched in the text output format and kept as the exact bytes the
server printed (a loader returning raw bytes for every column type), so they go
through the same `TableCodec` text converters as pgoutput's text tuples; COPY's
text format would escape them differently.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, NamedTuple

import psycopg
from psycopg import IsolationLevel, sql
from psycopg.adapt import Buffer, Loader

from bridge import __version__
from bridge.config import Config
from bridge.decode.messages import KIND_NULL, KIND_TEXT, PG_EPOCH_OFFSET_US, TupleData
from bridge.encode.records import ChangeEncoder, Record, SourceBlock, TxSource
from bridge.encoders import encoder_cache
from bridge.events.model import Change
from bridge.registry import open_registry
from bridge.routing import Routing
from bridge.snapshot.catalog import SnapshotTable
from bridge.snapshot.chunks import Chunk, chunk_query
from bridge.source import libpq

OP_READ = "r"  # Debezium's op for rows read by a snapshot
Row = tuple[bytes | None, ...]


class RawText(Loader):
    """The server's text output, untouched: what pgoutput puts in a text tuple."""

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


class TableJob(NamedTuple):
    table: SnapshotTable
    topic: str
    encoder: ChangeEncoder


def build_jobs(cfg: Config, catalog_conn: Any, tables: list[SnapshotTable]) -> dict[str, TableJob]:
    """Encoders built exactly as the pipeline builds them, so schemas and ids match."""
    routing = Routing.from_config(cfg)
    registry = open_registry(cfg)
    # Snapshot values are read in text format.
    encoders = encoder_cache(cfg, catalog_conn, registry, routing.topic, binary=False)
    jobs = {}
    for table in tables:
        topic, encoder = encoders.get(table.relation)
        jobs[table.label] = TableJob(table, topic, encoder)
    return jobs


def connect(conninfo: dict[str, Any], type_oids: Iterable[int] = ()) -> psycopg.Connection[Any]:
    """A session that never times out mid-snapshot and reads `type_oids` as raw text."""
    conn = libpq.connect(conninfo, replication=False)
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


def read_chunk(conn: psycopg.Connection[Any], table: SnapshotTable, chunk: Chunk) -> list[Row]:
    query, params = chunk_query(table, chunk)
    rows: list[Row] = conn.execute(query, params).fetchall()
    return rows


def encode_rows(
    rows: list[Row], job: TableJob, source: TxSource
) -> tuple[list[Record], Change | None]:
    """Records of `rows` (op "r") and the last row's change, to re-encode it as "last"."""
    relation = job.table.relation
    all_text = bytes((KIND_TEXT,)) * len(relation.columns)
    records = job.encoder.records
    out: list[Record] = []
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
    return TxSource(SourceBlock(server, db, __version__, flag), None, lsn, now_us)
