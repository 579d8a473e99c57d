"""`bridge verify --repair`: make every key-based consumer converge to PostgreSQL.

Rows missing from Kafka or different there are re-read and emitted again as snapshot
reads (op "r"), and keys alive in Kafka but not in PostgreSQL (ghosts) get a delete. Both
must not land after a newer live change of the key, and there are two ways to keep that:

- With `snapshot.signal_table` set, the running bridge re-reads the rows itself: verify
  inserts `execute-snapshot` signals whose additional condition selects exactly those
  keys, and the bridge's incremental snapshot emits them between its DBLog watermarks. A
  change streamed while a chunk is open drops the chunk's row for that key, so a
  re-emitted row never overtakes a newer live change: per-key order holds as for any
  incremental snapshot. The role needs INSERT on the signal table.
- Without one (the bridge's default: no setting the user did not choose), verify
  re-reads them itself, under the table lock the ghosts' deletes take (below): with no
  write to the table in progress or possible, and everything committed before delivered
  to Kafka, the rows it reads are the newest, and the records it produces precede every
  later change of their keys. Each is encoded by the bridge's own encoder (op "r",
  `source.snapshot` "incremental", `source.lsn` the WAL position under the lock) and
  produced with the bridge's producer settings (its partitioner: a key goes where the
  bridge puts it).

Keys alive in Kafka but not in PostgreSQL (ghosts) get a delete and a tombstone, produced
by verify into the partition that holds the key, with the key's own bytes and the table's
registered envelope schema (`before` = the key, `source.lsn` = the verification point).
Such a delete must not land after a newer live change of that key, so each table's ghosts
are deleted under `LOCK TABLE ... IN SHARE MODE` (reads go on; writes wait a few
seconds): once granted, no write to the table is in progress or can start; verify waits
until the bridge has delivered everything up to `pg_current_wal_insert_lsn()`, reads the topic
from where verification stopped, drops from the ghosts any key that got a record since
(it is no longer known to be a ghost: the next verify judges it), produces the deletes
and waits for Kafka's confirmation, and only then releases the lock. Every later change
of a key is committed after the lock, so it follows the delete in the partition. The
role needs UPDATE, DELETE or TRUNCATE on the table for that lock mode, and Kafka WRITE on
the topic.

The lake is repaired the same way, through the topic (never written here): `--delta`
adds the keys that differ in the lake to those two lists (`bridge.verify.lake.LakeFix`),
and the apply's next run brings the lake to PostgreSQL. `--spark` fills them from its
Spark job (`bridge.verify.distributed`): one repair for every comparison.
"""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import fastavro
import psycopg
from confluent_kafka import KafkaException, Producer
from psycopg import sql

from bridge import __version__
from bridge.config import Config
from bridge.errors import VerifyError
from bridge.kafka.producer import producer_config
from bridge.kafka.registry import open_registry, subject_name
from bridge.record import KafkaRecord
from bridge.snapshot.catalog import SnapshotTable
from bridge.snapshot.chunks import Chunk, chunk_query
from bridge.snapshot.reader import RawText, encode_rows, snapshot_source
from bridge.snapshot.store import DONE, ProgressStore
from bridge.source import libpq
from bridge.verify.compare import TableResult
from bridge.verify.run import Verification, await_delivered
from bridge.verify.schemas import is_local
from bridge.verify.state import Decoder, TopicState, raw_schema
from bridge.verify.store import Kept
from bridge.verify.topic import read_topic

log = logging.getLogger("bridge.verify")

KEYS_PER_SIGNAL = 500  # keys in one signal's additional condition
_POLL_S = 0.2


@dataclass
class Repaired:
    reread: int = 0  # keys re-emitted by incremental snapshots
    deleted: int = 0  # ghost keys given a delete and a tombstone
    skipped: int = 0  # ghost keys changed since verification: left to the next verify
    lake_left: int = 0  # lake keys it cannot fix (`bridge.verify.lake.LakeFix.left`)


def repair(
    cfg: Config,
    found: Verification,
    *,
    timeout: float = 300.0,
    progress: Callable[[str], None] = log.info,
) -> Repaired:
    """Fix what `found` reports; returns once every re-read row is delivered."""
    out = Repaired()
    todo = [t for t in found.tables if t.skipped is None and not t.ok]
    out.lake_left = sum(t.lake_left for t in todo)
    signalled = cfg.snapshot.signal_table is not None  # else re-read here (module docstring)
    conn = libpq.connect(cfg.source.conninfo(), replication=False)
    try:
        signals = []
        for result in todo:
            rereads = [] if signalled else result.reread_keys
            if result.ghost_keys or rereads:
                _under_lock(cfg, conn, result, found.point, timeout, out, rereads)
            if not signalled:
                continue
            for at in range(0, len(result.reread_keys), KEYS_PER_SIGNAL):
                keys = result.reread_keys[at : at + KEYS_PER_SIGNAL]
                signals.append(_signal(cfg, conn, result, keys))
                out.reread += len(keys)
        if signals:
            progress(f"{len(signals)} incremental snapshot(s) signalled, waiting for them")
            _await_runs(cfg, signals, timeout)
    finally:
        conn.close()
    return out


def _signal(
    cfg: Config, conn: psycopg.Connection[Any], result: TableResult, keys: list[tuple[str, ...]]
) -> str:
    """An execute-snapshot signal for `keys` of the table; returns its id."""
    table = result.snapshot_table
    assert table is not None and cfg.snapshot.signal_table is not None
    condition = _condition(conn, table, keys)
    signal_id = f"verify-{uuid.uuid4().hex}"
    data = {
        "data-collections": [result.table],
        "type": "incremental",
        "additional-conditions": [{"data-collection": result.table, "filter": condition}],
    }
    target = sql.Identifier(*cfg.snapshot.signal_table.split(".", 1))
    try:
        conn.execute(
            sql.SQL("INSERT INTO {} (id, type, data) VALUES (%s, 'execute-snapshot', %s)").format(
                target
            ),
            (signal_id, json.dumps(data)),
        )
    except psycopg.Error as exc:
        raise VerifyError(
            f"cannot write the signal table {cfg.snapshot.signal_table}: {str(exc).strip()}",
            hint="grant INSERT on it to the role verify runs as",
        ) from None
    return signal_id


def _condition(
    conn: psycopg.Connection[Any], table: SnapshotTable, keys: list[tuple[str, ...]]
) -> str:
    """An SQL condition selecting the rows of `keys` (PostgreSQL's key texts)."""
    row = sql.SQL("({})")
    casts = [sql.SQL("{}::" + k.type_sql) for k in table.key]
    rows = sql.SQL(", ").join(
        row.format(
            sql.SQL(", ").join(c.format(sql.Literal(v)) for c, v in zip(casts, k, strict=True))
        )
        for k in keys
    )
    return sql.SQL("({}) IN ({})").format(table.key_list(), rows).as_string(conn)


def _await_runs(cfg: Config, signals: list[str], timeout: float) -> None:
    store = ProgressStore(cfg.source.conninfo(), cfg.snapshot.progress_schema, cfg.source.slot_name)
    try:
        deadline = time.monotonic() + timeout
        for signal_id in signals:
            while True:
                run = store.run(signal_id)
                if run is not None and run.state == DONE:
                    break
                if time.monotonic() > deadline:
                    raise VerifyError(
                        f"the incremental snapshot {signal_id} is "
                        f"{'not started' if run is None else run.state} after {timeout:.0f}s",
                        hint="the bridge must run with this snapshot.signal_table; check its "
                        "log, then verify again",
                    )
                time.sleep(_POLL_S)
    finally:
        store.close()


def _under_lock(
    cfg: Config,
    conn: psycopg.Connection[Any],
    result: TableResult,
    point: int,
    timeout: float,
    out: Repaired,
    rereads: list[tuple[str, ...]],
) -> None:
    """Deletes and tombstones for the table's ghosts, and the rows of `rereads` emitted
    again, under the lock (module docstring)."""
    table, decoder, job = result.snapshot_table, result.decoder, result.job
    assert table is not None and decoder is not None and job is not None
    with conn.transaction():
        try:
            conn.execute(sql.SQL("LOCK TABLE {} IN SHARE MODE").format(table.ident))
        except psycopg.Error as exc:
            raise VerifyError(
                f"cannot lock {result.table} against writes: {str(exc).strip()}",
                hint="repairing a table takes SHARE MODE: grant the role UPDATE, DELETE or "
                "TRUNCATE on it (or set snapshot.signal_table, for rows the bridge re-reads)",
            ) from None
        (now,) = conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'").fetchone() or (0,)
        await_delivered(cfg, conn, int(now), timeout)
        ghosts: dict[bytes, Kept] = {}
        if result.ghost_keys:
            # every record since verification: few, and looked up by key
            since = TopicState(decoder, 2**63, in_memory=True, topic=result.topic)
            try:
                read_topic(cfg, result.topic, since, timeout, start=result.ends)
                ghosts = {k: v for k, v in result.ghost_keys.items() if since.get(k) is None}
            finally:
                since.close()
            out.skipped += len(result.ghost_keys) - len(ghosts)
        deletes = _deletes(cfg, result, decoder, ghosts.values(), point)
        rows = _rows(cfg, conn, result, rereads, int(now))
        _send(cfg, deletes + rows, timeout)
        out.deleted += len(ghosts)
        out.reread += len(rows)


def _rows(
    cfg: Config,
    conn: psycopg.Connection[Any],
    result: TableResult,
    keys: list[tuple[str, ...]],
    lsn: int,
) -> list[KafkaRecord]:
    """The rows of `keys` as they are now, as the bridge's snapshot records them (op "r" at
    `lsn`); a key whose row is gone meanwhile has none (its delete was streamed)."""
    table, job = result.snapshot_table, result.job
    assert table is not None and job is not None
    source = snapshot_source(cfg.kafka.topic_prefix, cfg.source.dbname, lsn, "incremental")
    codec = job.encoder.table
    value_id = job.encoder.value_id
    found = _registered_id(cfg, result, codec.namespace, value_id, codec.envelope_schema)
    header = b"\0" + found.to_bytes(4, "big")  # the encoder's, or once registered here
    out: list[KafkaRecord] = []
    for at in range(0, len(keys), KEYS_PER_SIGNAL):
        condition = _condition(conn, table, keys[at : at + KEYS_PER_SIGNAL])
        query, params = chunk_query(
            table, Chunk(table.label, 0, table.method, None, None), condition=condition
        )
        with conn.cursor() as cursor:
            for column in table.relation.columns:  # rows as raw text, for the encoder
                cursor.adapters.register_loader(column.type_oid, RawText)
            rows = cursor.execute(query, params).fetchall()
        records, _ = encode_rows(rows, job, source)
        for r in records:
            assert r.value is not None  # an "r" record
            out.append(KafkaRecord(r.topic, r.key, header + r.value[5:], r.headers, r.partition))
    return out


def _deletes(
    cfg: Config, result: TableResult, decoder: Decoder, ghosts: Iterable[Kept], point: int
) -> list[KafkaRecord]:
    """A delete (and a tombstone) of each ghost, into the partition that holds it."""
    job = result.job
    assert job is not None
    codec = job.encoder.table
    envelope = codec.envelope_schema
    ghosts = list(ghosts)
    if not ghosts:
        return []
    value_id = _registered_id(cfg, result, codec.namespace, job.encoder.value_id, envelope)
    writer = fastavro.parse_schema(raw_schema(envelope))
    namespace, name = result.table.split(".", 1)
    now_ms = time.time_ns() // 1_000_000
    source = {
        "version": __version__,
        "connector": "postgresql",
        "name": cfg.kafka.topic_prefix,
        "ts_ms": now_ms,
        "snapshot": "false",
        "db": cfg.source.dbname,
        "schema": namespace,
        "table": name,
        "lsn": point,
    }
    out: list[KafkaRecord] = []
    for kept in ghosts:
        before = dict.fromkeys(decoder.fields)
        before.update(decoder.read(kept.raw_key, f"{result.table} ghost key"))
        env = _filled(
            envelope,
            {
                "before": before,
                "after": None,
                "source": _filled(_record(envelope, "source"), source),
                "op": "d",
                "ts_ms": now_ms,
            },
        )
        body = io.BytesIO()
        body.write(b"\0" + value_id.to_bytes(4, "big"))
        fastavro.schemaless_writer(body, writer, env)
        out.append(KafkaRecord(result.topic, kept.raw_key, body.getvalue(), None, kept.partition))
        if job.encoder.tombstones:
            out.append(KafkaRecord(result.topic, kept.raw_key, None, None, kept.partition))
    return out


def _send(cfg: Config, records: list[KafkaRecord], timeout: float) -> None:
    """Produce `records` with the bridge's producer settings (its partitioner: a key goes
    where the bridge puts it) and wait for Kafka's confirmation of every one."""
    if not records:
        return
    topic = records[0].topic
    producer = Producer(producer_config(cfg.kafka.client_config(), cfg.kafka.producer))
    failed: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    try:
        produce: Any = producer.produce  # its stubs want headers of str | bytes values
        for r in records:
            produce(r.topic, r.value, r.key, r.partition, delivered, headers=r.headers)
            producer.poll(0)
        left = producer.flush(timeout)
    except (KafkaException, BufferError, ValueError, TypeError) as exc:
        raise VerifyError(f"producing repairs to {topic}: {exc}", hint="retry") from None
    if left or failed:
        raise VerifyError(
            f"{left} repair record(s) to {topic} unconfirmed: {'; '.join(failed[:3])}",
            hint="check Kafka and the role's WRITE permission on the topic, then verify again",
        )


def _registered_id(
    cfg: Config, result: TableResult, namespace: str, found: int, envelope: dict[str, Any]
) -> int:
    """The envelope's id as verify looked it up (`found`), or, for a schema the registry
    does not hold yet (a local id, `bridge.verify.schemas`), its id once registered: a
    record produced here must carry a registered one."""
    if not is_local(found):
        return found
    registry = open_registry(cfg)
    subject = subject_name(registry.strategy, result.topic, f"{namespace}.Envelope", False)
    return registry.register(subject, envelope, table=result.table)


def _record(schema: dict[str, Any], field: str) -> dict[str, Any]:
    for f in schema["fields"]:
        if f["name"] == field:
            kind = f["type"]
            for branch in kind if isinstance(kind, list) else [kind]:
                if isinstance(branch, dict) and branch.get("type") == "record":
                    return branch
    raise VerifyError(f"envelope schema has no {field} record", hint="not a bridge topic?")


def _filled(schema: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """A record's fields from `known`, the rest at their schema default (null if none)."""
    return {f["name"]: known.get(f["name"], f.get("default")) for f in schema["fields"]}
