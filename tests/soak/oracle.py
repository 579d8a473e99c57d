"""The soak's verdict: every topic read back, each record named by the change it carries,
checked against soak_log (tests/faults/checker.py: lost, phantom, duplicates, per-key order)
and every table rebuilt by key and compared with PostgreSQL's rows.

A record is reduced to what the verdict needs as it is read (`SoakRec`), so an hour of
changes fits in memory. Its identity is (table, key, v, op): the after-image's `v` for a
create or update, the before-image's for a delete (the tables have REPLICA IDENTITY FULL),
the transaction id for a TRUNCATE (which has no key).

Rebuilding a table by key is what a consumer that keeps state by key does: per key the last
record in its partition wins (a delete or tombstone removes the key). A TRUNCATE record has
no key, so it lands in some partition and orders nothing across the others; the rebuild
applies it by commit LSN instead: a key whose last record committed before the table's
latest TRUNCATE is gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from waiting import wait_for

from bridge.lsn import LSN

from .workload import key_text

Identity = tuple[str, str | None, int, str]


class SoakRec(NamedTuple):
    topic: str
    partition: int
    offset: int
    append_ms: int
    commit_lsn: int
    table: str
    key: str | None  # None: a TRUNCATE
    v: int | None  # None: a tombstone
    op: str  # c u d t, or "" for a tombstone
    ident: Identity | None


def identity(rec: SoakRec) -> Hashable | None:
    return rec.ident


class SoakReader:
    """Every record of the soak's topics from the beginning (read_committed), reduced."""

    def __init__(self, bootstrap: str, registry_url: str, topics: Sequence[str]) -> None:
        self.records: list[SoakRec] = []
        self.seen: set[Identity] = set()  # the identities among them
        self._decode = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"soak-{time.time_ns()}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                "log.connection.close": False,
            }
        )
        self._topics = list(topics)
        self._assigned: list[TopicPartition] = []

    def _assign(self) -> None:
        """Assign every partition once the bridge made the topics (it creates them)."""
        if self._assigned:
            return
        metadata = self._consumer.list_topics(timeout=30).topics
        if not all(t in metadata and metadata[t].partitions for t in self._topics):
            return
        self._assigned = [
            TopicPartition(t, p, OFFSET_BEGINNING)
            for t in self._topics
            for p in metadata[t].partitions
        ]
        self._consumer.assign(self._assigned)

    def poll(self, seconds: float) -> int:
        self._assign()
        if not self._assigned:
            time.sleep(min(seconds, 0.5))
            return 0
        before = len(self.records)
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            for msg in self._consumer.consume(2000, min(left, 0.2)):
                if msg.error() is None:
                    rec = self._reduce(msg)
                    self.records.append(rec)
                    if rec.ident is not None:
                        self.seen.add(rec.ident)
        return len(self.records) - before

    def _reduce(self, msg: Any) -> SoakRec:
        topic = msg.topic()
        table = topic.rsplit(".", 1)[1]
        raw_key, raw_value = msg.key(), msg.value()
        key = (
            None
            if raw_key is None
            else key_text(
                table, self._decode(raw_key, SerializationContext(topic, MessageField.KEY))
            )
        )
        where = (topic, msg.partition(), msg.offset(), msg.timestamp()[1])
        if raw_value is None:
            return SoakRec(*where, 0, table, key, None, "", None)
        value = self._decode(raw_value, SerializationContext(topic, MessageField.VALUE))
        op, source = value["op"], value["source"]
        lsn = int(source["commit_lsn"] or source["lsn"] or 0)
        if op == "t":
            return SoakRec(
                *where, lsn, table, None, None, "t", (table, None, int(source["txId"]), "t")
            )
        image = value["before"] if op == "d" else value["after"]
        v = int(image["v"])
        return SoakRec(*where, lsn, table, key, v, op, (table, key, v, op))

    def read_until(self, done: Any, timeout: float, what: str, watch: Any = None) -> None:
        def more() -> bool:
            if done(self.records):
                return True
            if watch is not None:
                watch()
            self.poll(0.5)
            return bool(done(self.records))

        wait_for(more, timeout, what, every=0, detail=lambda: f"{len(self.records)} records")

    def read_to_end(self, timeout: float = 120.0) -> None:
        ends = {
            (tp.topic, tp.partition): self._consumer.get_watermark_offsets(tp, timeout=30)[1]
            for tp in self._assigned
        }

        def done(_: Any) -> bool:
            positions = self._consumer.position(self._assigned)
            return all(
                tp.offset >= end for tp in positions if (end := ends[(tp.topic, tp.partition)])
            )

        self.read_until(done, timeout, "the high watermarks")

    def close(self) -> None:
        self._consumer.close()


def rebuild(records: Sequence[SoakRec]) -> dict[str, dict[str, int]]:
    """{table: {key: v}}: the tables as a consumer that keeps state by key rebuilds them."""
    last: dict[tuple[str, str], SoakRec] = {}
    truncated: dict[str, int] = {}
    for rec in sorted(records, key=lambda r: (r.topic, r.partition, r.offset)):
        if rec.op == "t":
            truncated[rec.table] = max(truncated.get(rec.table, 0), rec.commit_lsn)
        elif rec.key is not None and rec.op:  # a tombstone only follows its delete
            last[(rec.table, rec.key)] = rec
    state: dict[str, dict[str, int]] = {}
    for (table, key), rec in last.items():
        if rec.op == "d" or rec.commit_lsn < truncated.get(table, 0):
            continue
        assert rec.v is not None
        state.setdefault(table, {})[key] = rec.v
    return state


class Mismatch(NamedTuple):
    """A key whose rebuilt version differs from PostgreSQL's (None: the key is absent)."""

    table: str
    key: str
    kafka: int | None
    postgres: int | None


def state_mismatches(
    kafka: dict[str, dict[str, int]], postgres: dict[str, dict[str, int]]
) -> list[Mismatch]:
    """Keys whose rebuilt version differs from PostgreSQL's (missing, extra or older)."""
    bad: list[Mismatch] = []
    for table in sorted(postgres.keys() | kafka.keys()):
        mine, theirs = kafka.get(table, {}), postgres.get(table, {})
        for k in sorted(mine.keys() | theirs.keys()):
            if mine.get(k) != theirs.get(k):
                bad.append(Mismatch(table, k, mine.get(k), theirs.get(k)))
    return bad


def print_mismatches(
    mismatches: Sequence[Mismatch],
    records: Sequence[SoakRec],
    history: Callable[[str, str], Sequence[tuple[int, str, int]]],
    t0_ms: float,
    limit: int = 5,
) -> None:
    """What a mismatch is diagnosed from, in the log alone: per key (the first `limit`)
    PostgreSQL's history of it (soak_log's v, op and xid in the order logged: one writer
    per key), then every Kafka record of it and its table's TRUNCATEs in partition order,
    with offset, append time (seconds on the fault timeline's clock), commit LSN and
    whether it repeats an earlier record's change."""
    for m in mismatches[:limit]:
        print(
            f"\nrebuilt-state mismatch {m.table} key {m.key}: "
            f"Kafka rebuilds v={m.kafka}, PostgreSQL has v={m.postgres}"
        )
        print(
            "  PostgreSQL (soak_log, as logged): "
            + ", ".join(f"{op}{v} (xid {xid})" for v, op, xid in history(m.table, m.key))
        )
        seen: set[Identity] = set()
        mine = [
            r
            for r in sorted(records, key=lambda r: (r.topic, r.partition, r.offset))
            if r.table == m.table and (r.key == m.key or r.op == "t")
        ]
        for r in mine:
            again = r.ident is not None and r.ident in seen
            if r.ident is not None:
                seen.add(r.ident)
            what = "tombstone" if not r.op else f"{r.op} v={r.v}" if r.op != "t" else "TRUNCATE"
            print(
                f"  {r.topic}[{r.partition}]@{r.offset:<8} t={(r.append_ms - t0_ms) / 1000:7.2f}s "
                f"commit {LSN(r.commit_lsn)!s:>12} {what}{'  (repeat)' if again else ''}"
            )
    if len(mismatches) > limit:
        print(f"\n... and {len(mismatches) - limit} more mismatched keys")
