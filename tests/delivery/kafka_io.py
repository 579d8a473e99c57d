"""Reading back what the bridge wrote, with the broker's own append times.

Topics are created by the tests, before the bridge produces, with
`message.timestamp.type=LogAppendTime`: every record then carries the wall-clock
millisecond at which the broker appended it, which is what the acknowledgement
invariant (`assert_acks_follow_appends`) is checked against.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from waiting import wait_for

from bridge.lsn import LSN

from .helpers import Checkable, Sample


class Rec(NamedTuple):
    topic: str
    partition: int
    offset: int
    append_ms: int
    key: dict[str, Any] | None
    value: dict[str, Any] | None  # None: tombstone

    @property
    def commit_lsn(self) -> int:
        assert self.value is not None
        return int(self.value["source"]["commit_lsn"])


def create_topics(bootstrap: str, topics: Iterable[str], partitions: int = 3) -> list[str]:
    names = list(topics)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"message.timestamp.type": "LogAppendTime"}
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=partitions, replication_factor=1, config=config) for t in names]
    )
    for future in futures.values():
        future.result(timeout=30)
    return names


class TopicReader:
    """Every record of `topics` from the beginning, decoded, in arrival order per partition.

    `isolation` is the consumer's isolation.level: read_committed (librdkafka's default)
    hides aborted exactly-once transactions; read_uncommitted sees every record as it is
    appended."""

    def __init__(
        self,
        bootstrap: str,
        registry_url: str,
        topics: Sequence[str],
        isolation: str = "read_committed",
    ) -> None:
        self.records: list[Rec] = []
        self._decode = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"delivery-{time.time_ns()}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 50,
                "log.connection.close": False,
                "isolation.level": isolation,
            }
        )
        self._partitions = [
            TopicPartition(t, p, OFFSET_BEGINNING)
            for t, partitions in self._metadata(topics).items()
            for p in partitions
        ]
        self._consumer.assign(self._partitions)

    def _metadata(self, topics: Sequence[str]) -> dict[str, list[int]]:
        """Each topic's partitions, once the broker's metadata lists them all: a topic
        just created (create_topics) can be missing from the first answer."""

        def listed() -> dict[str, list[int]] | None:
            metadata = self._consumer.list_topics(timeout=30).topics
            known = {t: sorted(metadata[t].partitions) for t in topics if t in metadata}
            return known if len(known) == len(topics) and all(known.values()) else None

        return wait_for(listed, 60, f"the broker's metadata to list {list(topics)}", every=0.2)

    def poll(self, seconds: float) -> int:
        """Read for about `seconds`; returns how many records arrived."""
        before = len(self.records)
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for msg in self._consumer.consume(1000, min(left, 0.1)):
                if msg.error():
                    continue
                self.records.append(self._rec(msg))
        return len(self.records) - before

    def _rec(self, msg: Any) -> Rec:
        topic = msg.topic()
        raw_key, raw_value = msg.key(), msg.value()
        key = self._decode(raw_key, SerializationContext(topic, MessageField.KEY))
        value = (
            None
            if raw_value is None
            else self._decode(raw_value, SerializationContext(topic, MessageField.VALUE))
        )
        return Rec(topic, msg.partition(), msg.offset(), msg.timestamp()[1], key, value)

    def read_until(
        self,
        done: Callable[[list[Rec]], bool],
        timeout: float,
        what: str,
        watch: Checkable | None = None,
    ) -> None:
        """Read until `done(records)`; fail at once if `watch` (the bridge) died."""

        def read_more() -> bool:
            if done(self.records):
                return True
            if watch is not None:
                watch.check()
            self.poll(0.2)
            return done(self.records)

        wait_for(
            read_more, timeout, what, every=0, detail=lambda: f"{len(self.records)} records read"
        )

    def read_to_end(self, timeout: float = 60.0) -> None:
        """Read up to the high watermarks as they are now.

        The end is the consumer's position, not the last offset seen: exactly-once
        transactions end in commit markers, offsets a consumer never receives.
        """
        consumer = self._consumer
        ends = {
            (tp.topic, tp.partition): consumer.get_watermark_offsets(tp, timeout=30)[1]
            for tp in self._partitions
        }

        def done(records: list[Rec]) -> bool:
            positions = consumer.position(self._partitions)  # offset -1001 before any record
            return all(
                tp.offset >= end for tp in positions if (end := ends[(tp.topic, tp.partition)])
            )

        self.read_until(done, timeout, "the high watermarks")

    def close(self) -> None:
        self._consumer.close()


def assert_acks_follow_appends(
    samples: Sequence[Sample], complete_at: dict[int, float], what: str = "transaction"
) -> None:
    """Every transaction PostgreSQL would skip had all its records in Kafka by then.

    `complete_at` maps each transaction's commit LSN to the append time (ms) of its
    last record to reach Kafka (inf if some never did). PostgreSQL skips, after a
    restart, every transaction whose commit record starts below confirmed_flush_lsn,
    so a sample (t, F) requires every transaction with commit LSN < F complete by t.
    """
    lsns = sorted(complete_at)
    latest: list[float] = []  # running max of completion time, in commit order
    for lsn in lsns:
        latest.append(max(complete_at[lsn], latest[-1] if latest else 0.0))
    for sample in samples:
        n = bisect.bisect_left(lsns, sample.state.confirmed_flush)
        if n and latest[n - 1] > sample.t_ms:
            late = next(lsn for lsn in lsns[:n] if complete_at[lsn] > sample.t_ms)
            raise AssertionError(
                f"confirmed_flush_lsn {sample.state.confirmed_flush} at t={sample.t_ms:.0f} ms "
                f"acknowledged the {what} committed at {LSN(late)} whose records were not all in "
                f"Kafka yet (complete at {complete_at[late]} ms)"
            )
