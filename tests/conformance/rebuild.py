"""One check of a case: each topic rebuilt as a key-based consumer must, against PostgreSQL.

Keyed tables are compared with `bridge verify`'s own pieces: its fold of a topic by key
(`bridge.verify.state.TopicState`: deletes, tombstones, TRUNCATE, unchanged TOASTed values
carried over, key changes followed by their headers) and its comparison of a table's rows,
encoded by the bridge's encoder, with the folded states column by column
(`bridge.verify.compare.compare_table`). The suite adds what verify leaves out:

- **Tables without a key** (REPLICA IDENTITY FULL or NOTHING, no primary key), which verify
  skips: the topic folded as a multiset of rows (an insert adds its row, a delete removes
  the before-image's row, an update both, a TRUNCATE empties it) with verify's decoder and
  column digests, against the table's rows read and encoded as verify reads them.
- **`expect`** (the TAP's own query, where PostgreSQL by design does not send everything,
  `--! diverges`): the topic's rows as a plain consumer decodes them (confluent-kafka's
  AvroDeserializer; a column a record lacks: the current schema's default) are loaded
  into a table of the same name and column types in a database of its own, and the
  TAP's query runs there, its rows printed as psql -At prints them.

What differs from `bridge verify` is only how the point is found and the topics read, for
speed over the many checks of a case: the point is `pg_current_wal_insert_lsn()` read as
the first statement of a REPEATABLE READ transaction (exact here, where the case is paused
and nothing commits meanwhile; verify's temporary slot would also wait for a prepared
transaction to end), "delivered" is asked of the running pipeline (it has seen the WAL up
to the point and has nothing open or in flight: the slot's confirmed position stays below
an undecided PREPARE), and each topic is read once, on from where the last check stopped,
by one consumer per bridge.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import psycopg
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from psycopg import sql
from psycopg.pq import TransactionStatus
from waiting import wait_for

from bridge.config import Config
from bridge.decode.messages import Relation
from bridge.kafka.registry import open_registry
from bridge.schema.table import unique_names
from bridge.snapshot.catalog import METHOD_KEY, SnapshotTable
from bridge.snapshot.chunks import Chunk, chunk_query
from bridge.snapshot.reader import (
    RawText,
    TableJob,
    build_jobs,
    connect,
    encode_rows,
    snapshot_source,
)
from bridge.verify.compare import TableResult, compare_table
from bridge.verify.run import captured_tables
from bridge.verify.state import Decoder, Entry, TopicState, row_record
from bridge.verify.topic import record_keys
from conformance.cases import Check, Expect, Messages

OLD_KEY: Final = "__debezium.oldkey"


@dataclass
class Found:
    tables: int = 0
    values: int = 0
    problems: list[str] = field(default_factory=list)


class Topics:
    """Every record of the bridge's topics read so far, by topic and partition, in offset
    order; `read(topic)` reads on to the partitions' current ends."""

    def __init__(self, cfg: Config) -> None:
        self._cfg = cfg
        self._consumer = Consumer(
            {
                **cfg.kafka.client_config(),
                "group.id": "conformance",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        self._records: dict[tuple[str, int], list[Any]] = {}

    def close(self) -> None:
        self._consumer.close()

    def read(self, topic: str, timeout: float) -> dict[int, list[Any]]:
        ends = self._ends(topic)
        new = [TopicPartition(topic, p) for p in ends if (topic, p) not in self._records]
        if new:
            for tp in new:
                tp.offset = 0
                self._records[(topic, tp.partition)] = []
            self._consumer.incremental_assign(new)
        behind = {p for p, end in ends.items() if self._next(topic, p) < end}
        deadline = time.monotonic() + timeout
        while behind:
            for msg in self._consumer.consume(500, 0.1):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                name, partition = msg.topic(), msg.partition()
                assert name is not None and partition is not None
                self._records[(name, partition)].append(msg)
            behind = {p for p in behind if self._next(topic, p) < ends[p]}
            assert time.monotonic() < deadline, f"{topic} not read to its end {ends}"
        return {p: self._records[(topic, p)] for p in ends}

    def _next(self, topic: str, partition: int) -> int:
        got = self._records[(topic, partition)]
        return int(got[-1].offset()) + 1 if got else 0

    def _ends(self, topic: str) -> dict[int, int]:
        meta = self._consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return {}
        return {
            p: int(self._consumer.get_watermark_offsets(TopicPartition(topic, p), 10, False)[1])
            for p in sorted(meta.partitions)
        }


# Every read of a check waits for a lock with a deadline: a table a prepared transaction
# holds (test_decoding/twophase's CLUSTER) fails the check instead of hanging it; a case
# marks such a table `locked` at that check.
_LOCK_TIMEOUT: Final = "SET lock_timeout = '30s'"


class Checker:
    """One bridge's checks over a case: `delivered(point)` says whether the bridge has
    delivered everything committed before the WAL position `point`."""

    def __init__(self, cfg: Config, delivered: Callable[[int], bool]) -> None:
        self.cfg = cfg
        self._delivered = delivered
        self.topics = Topics(cfg)
        registry = SchemaRegistryClient(cfg.registry.client_config())
        self._writers: dict[int, str] = {}
        self._registry = registry
        self._jobs: dict[Relation, TableJob] = {}
        self._tables: list[SnapshotTable] | None = None  # the last check's
        self._schemas = open_registry(cfg)  # the encoders' registrations, one client

    def close(self) -> None:
        self.topics.close()

    def writer(self, schema_id: int) -> str:
        if schema_id not in self._writers:
            self._writers[schema_id] = str(self._registry.get_schema(schema_id).schema_str)
        return self._writers[schema_id]

    def check(
        self, check: Check, name: str, rebuild: psycopg.Connection[Any], timeout: float
    ) -> Found:
        """The tables of the bridge's publication compared at `check` (`name`: the bridge's,
        for the check's `diverges` and `expect` that name it)."""
        found = Found()
        publication = name
        conninfo = self.cfg.source.conninfo()
        if check.locked and self._tables is not None:
            # PostgreSQL 18's pg_publication_tables opens every table it lists, so it waits
            # for the lock too: the tables are the previous check's (the locked one is not
            # compared, and the others are not changed by the transaction holding it)
            tables = self._tables
        else:
            with contextlib.closing(psycopg.connect(**conninfo, autocommit=True)) as catalog:
                catalog.execute(_LOCK_TIMEOUT)
                tables = captured_tables(self.cfg, catalog, ())
                fresh = [t for t in tables if t.relation not in self._jobs]
                if fresh:
                    jobs = build_jobs(self.cfg, catalog, fresh, self._schemas)
                    for table in fresh:
                        self._jobs[table.relation] = jobs[table.label]
            self._tables = tables
        reader = connect(conninfo, {c.type_oid for t in tables for c in t.relation.columns})
        with contextlib.closing(reader):
            reader.autocommit = False
            reader.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            reader.read_only = True
            reader.execute(_LOCK_TIMEOUT)  # takes no snapshot: the LSN query below does
            row = reader.execute("SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint").fetchone()
            assert row is not None and reader.info.transaction_status == TransactionStatus.INTRANS
            point = int(row[0])
            wait_for(lambda: self._delivered(point), timeout, f"delivery up to {point}")
            for table in tables:
                if check.diverges(table.label, publication):
                    continue
                found.tables += 1
                job = self._jobs[table.relation]
                problem = self._compare(reader, table, job, point, timeout, found)
                if problem is not None:
                    found.problems.append(problem)
            for messages in check.messages:
                found.tables += 1
                problem = self._messages(messages, timeout)
                if problem is not None:
                    found.problems.append(f"line {messages.line}: {problem}")
            captured = {t.label: t for t in tables}
            for label, expect in check.expectations(publication):
                if label in captured:
                    found.tables += 1
                    job = self._jobs[captured[label].relation]
                    try:
                        problem = self._expectation(captured[label], job, expect, rebuild, timeout)
                    except psycopg.Error as exc:
                        problem = f"{expect.query!r} failed: {exc}"
                    if problem is not None:
                        found.problems.append(f"line {expect.line}: {problem}")
        return found

    def _compare(
        self,
        reader: psycopg.Connection[Any],
        table: SnapshotTable,
        job: TableJob,
        point: int,
        timeout: float,
        found: Found,
    ) -> str | None:
        key_schema = job.encoder.table.key_schema
        decoder = Decoder(key_schema, job.encoder.table.envelope_schema, self.writer)
        partitions = self.topics.read(job.topic, timeout)
        if table.method != METHOD_KEY or key_schema is None:
            return self._keyless(reader, table, job, decoder, partitions, point, found)
        with contextlib.closing(TopicState(decoder, point, topic=job.topic)) as state:
            self._fold(state, partitions)
            result = TableResult(table.label, job.topic)
            keys = functools.partial(record_keys, self.cfg, job.topic)
            compare_table(reader, table, job, state, result, keys)
        if result.ok:
            found.values += result.rows * len(decoder.fields)
            return None
        return (
            f"{table.label}: {result.rows} rows, {result.live_keys} keys in Kafka: "
            f"{result.missing} missing, {result.ghosts} ghosts, {result.different} "
            f"different (columns {dict(result.columns)}), samples {result.samples}"
        )

    def _keyless(
        self,
        reader: psycopg.Connection[Any],
        table: SnapshotTable,
        job: TableJob,
        decoder: Decoder,
        partitions: Mapping[int, list[Any]],
        point: int,
        found: Found,
    ) -> str | None:
        state = Multiset(decoder, point)
        state.fold_topic(job.topic, partitions)
        expected: Counter[bytes] = Counter()
        query, params = chunk_query(table, Chunk(table.label, 0, table.method, None, None))
        rows = reader.execute(query, params).fetchall()
        records, _ = encode_rows(rows, job, snapshot_source("", "", point, "true"))
        for record in records:
            assert record.value is not None
            after = decoder.current(record.value, f"{table.label} row").get("after") or {}
            expected[_row(after)] += 1
        if state.rows == expected and not state.unmatched:
            found.values += len(rows) * len(decoder.fields)
            return None
        missing = sum((expected - state.rows).values())
        extra = sum((state.rows - expected).values())
        return (
            f"{table.label} (no key, compared as a multiset): {len(rows)} rows, "
            f"{sum(state.rows.values())} in Kafka: {missing} missing, {extra} extra"
            + (f"; {state.unmatched[:3]}" if state.unmatched else "")
        )

    def _expectation(
        self,
        table: SnapshotTable,
        job: TableJob,
        expect: Expect,
        rebuild: psycopg.Connection[Any],
        timeout: float,
    ) -> str | None:
        """The TAP's query over a TEMPORARY table of the table's name (found before it:
        pg_temp comes first in the search path) holding what a consumer of the topic holds.
        `rebuild` is a session of its own on the publisher's database, so the columns keep
        their types (a domain its base type: its CHECK may read the real table); temporary
        tables are never published."""
        columns = [c.name for c in table.relation.columns]
        types = dict(
            rebuild.execute(
                "SELECT a.attname, pg_catalog.format_type(CASE t.typtype WHEN 'd' "
                "THEN t.typbasetype ELSE a.atttypid END, CASE t.typtype WHEN 'd' "
                "THEN t.typtypmod ELSE a.atttypmod END) "
                "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
                "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped",
                (table.relation.oid,),
            ).fetchall()
        )
        fields = unique_names(columns)
        ident = sql.Identifier(table.relation.name)
        rebuild.execute(sql.SQL("DROP TABLE IF EXISTS pg_temp.{}").format(ident))
        rebuild.execute(
            sql.SQL("CREATE TEMPORARY TABLE {} ({})").format(
                ident,
                sql.SQL(", ").join(
                    sql.SQL("{} ").format(sql.Identifier(c)) + sql.SQL(types[c]) for c in columns
                ),
            )
        )
        rows = self.consumer_rows(job, timeout)
        with rebuild.cursor() as cur:
            if columns:
                copy = sql.SQL("COPY pg_temp.{} FROM STDIN").format(ident)
                with cur.copy(copy) as load:
                    for row in rows:
                        load.write_row([row.get(f) for f in fields])
            else:
                insert = sql.SQL("INSERT INTO pg_temp.{} DEFAULT VALUES").format(ident)
                for _ in rows:
                    cur.execute(insert)
        with rebuild.cursor() as cur:
            cur.execute(expect.query)
            for column in cur.description or ():
                cur.adapters.register_loader(column.type_code, RawText)
            cur.execute(expect.query)
            got = tuple(
                "|".join("" if v is None else bytes(v).decode() for v in r) for r in cur.fetchall()
            )
        if got == expect.rows:
            return None
        seen = Counter(json.dumps(r, sort_keys=True, default=str) for r in rows)
        twice = [r for r, n in seen.items() if n > 1][:5]
        return (
            f"{expect.query!r} gave {list(got)}, the TAP expects {list(expect.rows)} "
            f"({len(rows)} rows rebuilt from {job.topic}; rows held more than once: {twice})"
        )

    def _messages(self, expect: Messages, timeout: float) -> str | None:
        """The contents of the message topic's records of `expect.prefix`, in order."""
        topic = f"{self.cfg.kafka.topic_prefix}.message"
        deserialize = AvroDeserializer(self._registry)
        got = []
        for messages in self.topics.read(topic, timeout).values():
            for msg in messages:
                value = deserialize(msg.value(), SerializationContext(topic, MessageField.VALUE))
                if value["message"]["prefix"] == expect.prefix:
                    got.append(bytes(value["message"]["content"]).decode())
        if tuple(got) == expect.contents:
            return None
        return (
            f"messages of prefix {expect.prefix!r}: {got}, the TAP expects {list(expect.contents)}"
        )

    def consumer_rows(self, job: TableJob, timeout: float) -> list[dict[str, Any]]:
        """The rows a consumer of the job's topic holds after reading it all, each record
        decoded by confluent-kafka's AvroDeserializer with its own writer schema, its
        columns taken by name (a column it lacks reads as the current schema's default, as
        a consumer reading with the table's newest schema gets it, and verify's fold reads
        it: subscription/006_rewrite's ADD COLUMN ... NOT NULL DEFAULT, whose older rows
        read the default): keyed records folded by key
        (unchanged TOASTed fields keep the key's or the old key's previous value), keyless
        ones as a multiset; a TRUNCATE empties both. A key of other columns than the
        records before it (the primary key or replica identity moved) re-keys every row
        held by its values in those columns, as a consumer keyed by the table's key
        columns must."""
        topic = job.topic
        deserialize = AvroDeserializer(self._registry)
        current = row_record(job.encoder.table.envelope_schema)
        defaults = {f["name"]: f.get("default") for f in current["fields"]}
        records = []
        for messages in self.topics.read(topic, timeout).values():
            for msg in messages:
                value = msg.value()
                if value is None:
                    continue
                env = deserialize(value, SerializationContext(topic, MessageField.VALUE))
                for image in ("before", "after"):
                    if isinstance(env.get(image), dict):
                        env[image] = {**defaults, **env[image]}
                key = msg.key()
                fields = None if key is None else _key_fields(deserialize, topic, key)
                moved = dict(msg.headers() or ()).get(OLD_KEY)
                old = None if moved is None else _key_fields(deserialize, topic, moved)
                records.append((commit_lsn(env), msg.offset(), fields, old, env))
        keyed: dict[str, dict[str, Any]] = {}
        gone: dict[str, dict[str, Any]] = {}
        shape: tuple[str, ...] = ()
        bag: list[dict[str, Any]] = []
        for _, _, fields, old, env in sorted(records, key=lambda r: (r[0], r[1])):
            op, before, after = env["op"], env.get("before"), env.get("after")
            if fields is not None and tuple(fields) != shape:
                shape = tuple(fields)
                keyed = {_named(row, shape): row for row in keyed.values()}
                gone = {_named(row, shape): row for row in gone.values()}
            if op == "t":
                keyed.clear()
                bag.clear()
            elif fields is None:
                if op in ("u", "d") and before in bag:
                    bag.remove(before)
                if op in ("c", "r", "u"):
                    bag.append(after)
            elif op == "d":
                row = keyed.pop(_named(fields, shape), None)
                if row is not None:
                    gone[_named(fields, shape)] = row
            else:
                row = dict(after)
                name = _named(fields, shape)
                base = keyed.get(name) or (gone.get(_named(old, shape)) if old else None) or {}
                for column in env.get("unchanged_fields") or ():
                    row[column] = base.get(column)
                keyed[name] = row
        return [*keyed.values(), *bag]

    @staticmethod
    def _fold(state: TopicState, partitions: Mapping[int, list[Any]]) -> None:
        """Fold the records in commit-LSN order across partitions, as verify reads them
        (`bridge.verify.topic.read_topic`)."""

        def entries(partition: int, records: list[Any]) -> Iterator[Entry]:
            for msg in records:
                found = state.entry(partition, msg.offset(), msg.key(), msg.value(), msg.headers)
                if found is not None:
                    yield found

        streams = [entries(p, records) for p, records in partitions.items()]
        for entry in heapq.merge(*streams, key=lambda e: e.lsn):
            state.put(entry)


# -- tables without a key ----------------------------------------------------------------


class Multiset:
    """A keyless topic folded as a multiset of rows, in commit-LSN order across partitions:
    an insert adds its row, a delete removes its before-image's row, an update both, a
    TRUNCATE empties it. Rows are compared as their decoded wire values (`_row`)."""

    def __init__(self, decoder: Decoder, point: int) -> None:
        self.decoder = decoder
        self.point = point
        self.rows: Counter[bytes] = Counter()
        self.unmatched: list[str] = []  # deletes and updates of rows the fold does not hold

    def fold_topic(self, topic: str, partitions: Mapping[int, list[Any]]) -> None:
        def decoded(records: list[Any]) -> Iterator[tuple[int, str, dict[str, Any]]]:
            for msg in records:
                value = msg.value()
                if value is None:
                    continue
                where = f"topic {topic} partition {msg.partition()} offset {msg.offset()}"
                env = self.decoder.current(value, where)
                yield commit_lsn(env), where, env

        streams = [decoded(records) for records in partitions.values()]
        for lsn, where, env in heapq.merge(*streams, key=lambda t: t[0]):
            self.fold(lsn, where, env)

    def fold(self, lsn: int, where: str, env: Mapping[str, Any]) -> None:
        op = env.get("op")
        if (lsn > self.point) if op == "r" else (lsn >= self.point):
            return
        if op == "t":
            self.rows.clear()
            return
        if op in ("u", "d"):
            before = env.get("before")
            gone = None if before is None else _row(before)
            if gone is None or self.rows[gone] == 0:
                self.unmatched.append(f"{where}: {op} of a row the topic does not hold")
            else:
                self.rows[gone] -= 1
        if op in ("c", "r", "u"):
            self.rows[_row(env.get("after") or {})] += 1


def _key_fields(deserialize: AvroDeserializer, topic: str, key: bytes) -> dict[str, Any]:
    found = deserialize(key, SerializationContext(topic, MessageField.KEY))
    assert isinstance(found, dict)
    return found


def _named(values: Mapping[str, Any], shape: tuple[str, ...]) -> str:
    """A key by its columns' values (`shape`: the key's column names), whatever its
    schema: how `consumer_rows` holds rows."""
    return json.dumps([values.get(c) for c in shape], default=repr)


def _row(row: Mapping[str, Any]) -> bytes:
    """A decoded row (wire values, `Decoder.envelope`) as comparable bytes."""
    return json.dumps(row, sort_keys=True, default=repr).encode()


def commit_lsn(envelope: Mapping[str, Any]) -> int:
    """A record's commit LSN (`source.commit_lsn`, or `source.lsn` where the source block
    has none), as verify orders records (`bridge.verify.state`)."""
    source = envelope.get("source") or {}
    for name in ("commit_lsn", "lsn"):
        found = source.get(name)
        if found is not None:
            return int(found)
    return 0
