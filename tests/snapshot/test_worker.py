"""A reader process's loop (`bridge.snapshot.worker`) against a real server: each answer
holds the rows of the chunk it names, in the order sent, whether the chunks were all sent
ahead (as the parent keeps two in flight) or one at a time; its encoders come from the ids
the parent registered, with no registry round trip; a reader started and stopped before
it had anything to do exits cleanly."""

from __future__ import annotations

import threading
from collections.abc import Callable
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any

import psycopg
import pytest

from bridge.config import Config
from bridge.encode.copyrows import unpack_records
from bridge.kafka import registry as registry_module
from bridge.kafka.registry import KnownSchemas, open_registry
from bridge.snapshot import catalog, chunks, reader, worker
from bridge.snapshot.initial import _Reader
from bridge.source import libpq

ROWS = 47
CHUNK = 10


@pytest.mark.parametrize("ahead", [True, False], ids=["sent-ahead", "one-at-a-time"])
def test_each_answer_holds_its_chunks_rows(
    make_settings: Callable[..., dict[str, Any]],
    pg_conn: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
    ahead: bool,
) -> None:
    pg_conn.execute("CREATE TABLE w (id int PRIMARY KEY, t text, f float8)")
    pg_conn.execute(
        f"INSERT INTO w SELECT g, 'row ' || g, g / 3.0 FROM generate_series(1, {ROWS}) g"
    )
    oid = pg_conn.execute("SELECT 'w'::regclass::oid").fetchone()[0]  # type: ignore[index]
    table = catalog.describe_table(pg_conn, oid)
    cfg = Config(**make_settings(mode="initial"))
    with psycopg.connect(**cfg.source.conninfo()) as exporter:  # the snapshot, held open
        exporter.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        name = exporter.execute("SELECT pg_export_snapshot()").fetchone()[0]  # type: ignore[index]
        planned = list(chunks.plan(exporter, table, CHUNK, None, 0))
        assert len(planned) == -(-ROWS // CHUNK)
        expected, known = _keys_by_chunk(cfg, name, table, planned)
        monkeypatch.setattr(registry_module.ConfluentClient, "_get", _no_round_trip)
        answers = _serve(cfg, name, table, planned, ahead, known)
    assert [chunk for chunk, _ in answers] == planned
    for (chunk, keys), want in zip(answers, expected, strict=True):
        assert keys == want, chunk
    assert sum(len(keys) for _, keys in answers) == ROWS


def test_a_reader_stopped_before_its_start_exits_cleanly() -> None:
    started = _Reader(0)
    started.stop()
    assert started.process.returncode == 0


def _no_round_trip(self: object) -> None:
    raise AssertionError("the reader asked the schema registry")


def _serve(
    cfg: Config,
    name: str,
    table: catalog.SnapshotTable,
    planned: list[chunks.Chunk],
    ahead: bool,
    known: KnownSchemas,
) -> list[tuple[chunks.Chunk, list[bytes | None]]]:
    """The worker's `_serve` on a thread, fed through pipes as the parent feeds it."""
    to_worker: tuple[Connection, Connection] = Pipe(duplex=False)
    from_worker: tuple[Connection, Connection] = Pipe(duplex=False)
    inbox, feed = to_worker
    answers_in, outbox = from_worker
    thread = threading.Thread(
        target=worker._serve, args=(cfg, name, [table], 0, known, inbox, outbox), daemon=True
    )
    thread.start()
    assert answers_in.recv() == ("ready",)
    answers = []
    if ahead:
        for chunk in planned:
            feed.send(chunk)
        feed.send(None)
    for chunk in planned:
        if not ahead:
            feed.send(chunk)
        kind, answered, packed, _last = answers_in.recv()
        assert kind == "chunk"
        answers.append((answered, [r.key for r in unpack_records(packed, "t")]))
    if not ahead:
        feed.send(None)
    thread.join(30)
    assert not thread.is_alive()
    return answers


def _keys_by_chunk(
    cfg: Config, name: str, table: catalog.SnapshotTable, planned: list[chunks.Chunk]
) -> tuple[list[list[bytes | None]], KnownSchemas]:
    """Each chunk's record keys, read and encoded on their own as the parent would, and
    the schemas the parent registered."""
    conn = reader.connect(cfg.source.conninfo())
    catalog_conn = libpq.connect(cfg.source.conninfo(), replication=False)
    try:
        reader.import_snapshot(conn, name)
        registry = open_registry(cfg)
        job = reader.build_jobs(cfg, catalog_conn, [table], registry)[table.label]
        source = reader.snapshot_source("p", "db", 0, "true")
        keys = []
        for chunk in planned:
            packed, _ = reader.read_records(conn, job, chunk, source)
            keys.append([r.key for r in unpack_records(packed, "t")])
        return keys, registry.known()
    finally:
        conn.close()
        catalog_conn.close()
