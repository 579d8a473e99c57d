"""Shared by the snapshot tests and bench/snapshot.py: configuration, Kafka state, writers.

The final-state check compares the keyed state a compacting consumer would keep
(last record per key wins, a delete or tombstone removes the key) with the table.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from delivery.helpers import bridge_settings
from running import PipelineThread
from waiting import wait_for

from bridge.pipeline import Pipeline
from bridge.snapshot.manager import SnapshotManager
from bridge.snapshot.progress import TableStatus

# What a partition's leader answers before it is elected (a topic just created).
_NO_LEADER_YET = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
}


def settings(
    stack: Any,
    dbname: str,
    slot: str,
    publication: str,
    prefix: str,
    spill_dir: Path,
    **snapshot: Any,
) -> dict[str, Any]:
    """The delivery suite's configuration with the snapshot options under test."""
    config = bridge_settings(stack, dbname, slot, publication, prefix, spill_dir)
    config["snapshot"] = {"progress_bar": "never", **snapshot}
    return config


class RunBridge(Protocol):
    """The `run_bridge` fixture: `run_bridge(mode="initial", chunk_size=...)`."""

    def __call__(self, **snapshot: Any) -> PipelineThread: ...


class Rec(NamedTuple):
    key: dict[str, Any] | None
    value: dict[str, Any] | None  # None: tombstone


class TopicReader:
    """Every record of one topic from the beginning, decoded; `read()` catches up."""

    def __init__(self, bootstrap: str, registry_url: str, topic: str) -> None:
        self.topic = topic
        self.records: list[Rec] = []
        self._decode = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"snapshot-{time.time_ns()}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 50,
                "log.connection.close": False,
            }
        )
        self._assigned = False
        self._partitions: list[TopicPartition] = []

    def close(self) -> None:
        self._consumer.close()

    def read(self, timeout: float = 30.0) -> list[Rec]:
        """Read up to the current end of the topic (all partitions); fails after `timeout`
        seconds without progress.

        The end is the consumer's position, not the last offset seen: exactly-once
        transactions end in commit markers, offsets a consumer never receives.
        """
        if not self._assigned:
            wait_for(self._assign, timeout, f"topic {self.topic}")
        ends = {
            tp.partition: wait_for(functools.partial(self._high, tp), timeout, f"{tp}'s end")[0]
            for tp in self._partitions
        }

        def at_end() -> bool:
            positions = self._consumer.position(self._partitions)  # -1001 before any record
            return all(tp.offset >= ends[tp.partition] for tp in positions if ends[tp.partition])

        while not at_end():
            wait_for(
                lambda: self._read_one() or at_end(),
                timeout,
                f"the next record of {self.topic}",
                every=0,
            )
        return self.records

    def _high(self, tp: TopicPartition) -> tuple[int] | None:
        """(the partition's high watermark,); None while its leader is being elected (a
        topic the bridge has just created), which the broker answers with an error."""
        try:
            return (int(self._consumer.get_watermark_offsets(tp, timeout=10)[1]),)
        except KafkaException as exc:
            if exc.args[0].code() in _NO_LEADER_YET:
                return None
            raise

    def _read_one(self) -> bool:
        msg = self._consumer.poll(0.2)
        if msg is None:
            return False
        if msg.error():
            raise KafkaException(msg.error())
        key = self._field(msg.key(), MessageField.KEY)
        value = self._field(msg.value(), MessageField.VALUE)
        self.records.append(Rec(key, value))
        return True

    def _field(self, raw: bytes | None, field: Any) -> Any:
        if raw is None:
            return None
        return self._decode(raw, SerializationContext(self.topic, field))

    def _assign(self) -> bool:
        metadata = self._consumer.list_topics(self.topic, timeout=10)
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            return False
        if any(p.leader < 0 for p in topic.partitions.values()):
            return False  # just created: its watermarks are not served yet
        self._partitions = [
            TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in sorted(topic.partitions)
        ]
        self._consumer.assign(self._partitions)
        self._assigned = True
        return True


def values(records: list[Rec]) -> list[dict[str, Any]]:
    """The records' values, for a topic that holds no tombstone (fails on one)."""
    found = [r.value for r in records if r.value is not None]
    assert len(found) == len(records), "a tombstone"
    return found


def keyed_state(records: list[Rec], key_field: str = "id") -> dict[Any, dict[str, Any]]:
    """What log compaction keeps: the last record per key; deletes and tombstones remove it."""
    state: dict[Any, dict[str, Any]] = {}
    for rec in records:
        assert rec.key is not None, "snapshot tests use keyed tables"
        key = rec.key[key_field]
        if rec.value is None or rec.value["op"] == "d":
            state.pop(key, None)
        else:
            state[key] = rec.value["after"]
    return state


def table_state(conn: psycopg.Connection[Any], table: str) -> dict[Any, dict[str, Any]]:
    cur = conn.execute(f"SELECT * FROM {table}")
    names = [d.name for d in cur.description or ()]
    return {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}


def same_state(reader: TopicReader, conn: psycopg.Connection[Any], table: str) -> bool:
    return keyed_state(reader.read()) == table_state(conn, table)


def make_table(conn: psycopg.Connection[Any], table: str, rows: int) -> None:
    """`id int PRIMARY KEY, v int, s text`: values decode to the same Python objects."""
    conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v int, s text)")
    conn.execute(
        f"INSERT INTO {table} SELECT g, g %% 1000, 'row ' || g FROM generate_series(1, %s) g",
        (rows,),
    )


class Writer:
    """Random updates, deletes and inserts in small transactions until `stop()`, at most
    `rate` transactions a second when given."""

    def __init__(
        self, dsn: str, table: str, keys: int, seed: int = 7, rate: float | None = None
    ) -> None:
        self._dsn = dsn
        self._rate = rate
        self._table = table
        self._keys = keys
        self._random = random.Random(seed)
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.transactions = 0
        self._thread = threading.Thread(target=self._run, name="writer", daemon=True)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise self.error

    def wait_transactions(self, count: int, timeout: float = 60.0) -> None:
        target = self.transactions + count
        wait_for(lambda: self.transactions >= target or self.error, timeout, "writes")

    def _run(self) -> None:
        started = time.monotonic()
        try:
            with psycopg.connect(self._dsn, autocommit=True) as conn:
                while not self._stop.is_set():
                    self._transaction(conn)
                    self.transactions += 1
                    if self._rate:  # pacing, not synchronisation
                        ahead = started + self.transactions / self._rate - time.monotonic()
                        if ahead > 0:
                            self._stop.wait(ahead)
        except BaseException as exc:
            self.error = exc

    def _transaction(self, conn: psycopg.Connection[Any]) -> None:
        r, t = self._random, self._table
        with conn.transaction():
            for _ in range(r.randint(1, 5)):
                key = r.randint(1, self._keys + self._keys // 10)
                action = r.random()
                if action < 0.5:
                    conn.execute(f"UPDATE {t} SET v = v + 1, s = s || '+' WHERE id = %s", (key,))
                elif action < 0.75:
                    conn.execute(f"DELETE FROM {t} WHERE id = %s", (key,))
                else:
                    conn.execute(
                        f"INSERT INTO {t} VALUES (%s, %s, %s) ON CONFLICT (id) DO UPDATE "
                        "SET v = EXCLUDED.v, s = EXCLUDED.s",
                        (key, r.randint(0, 999), f"new {key}"),
                    )


def snapshot_tables(pipeline: Pipeline) -> list[TableStatus]:
    """Each table's snapshot progress. The pipeline holds its snapshots by their contract
    (`bridge.pipeline.Snapshots`), which leaves progress out: the pipeline never reads it;
    the one `build_pipeline` builds is a `SnapshotManager`, which keeps it."""
    snapshots = pipeline.snapshots
    assert isinstance(snapshots, SnapshotManager)
    return snapshots.progress.tables()
