"""Exactly-once mode: Kafka transactions that also record the LSN they end at.

Each Kafka transaction holds whole PostgreSQL transactions (never a part of one)
plus one record in a compacted offsets topic: key = slot name, value = the end LSN
of its last PostgreSQL transaction. Both commit atomically, so on start the last
committed value says exactly what a `read_committed` consumer has already seen;
everything at or below it is skipped. `init_transactions` fences an older
instance with the same transactional id and aborts its open transaction.

PostgreSQL is told a flush position only up to the last committed Kafka
transaction (`hold_lsn`), never a delivered-but-uncommitted one.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Final

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bridge.errors import DeliveryError
from bridge.kafka.producer import Producer
from bridge.lsn import LSN
from bridge.record import KafkaRecord

log = logging.getLogger("bridge.eos")

# A PostgreSQL transaction is never split across Kafka transactions, so a large one must
# fit: the broker's default transaction.max.timeout.ms. (librdkafka also wants it at or
# above message.timeout.ms, the producer's 5 minutes.)
TRANSACTION_TIMEOUT_MS: Final = 900_000


def ensure_offsets_topic(
    client_config: dict[str, Any], topic: str, timeout: float, what: str = "offsets topic"
) -> None:
    """Create the compacted single-partition topic (`what` names it in the error)."""
    admin = AdminClient(client_config)
    if _has_leader(admin, topic, timeout, what):
        return
    spec = NewTopic(topic, num_partitions=1, config={"cleanup.policy": "compact"})
    for future in admin.create_topics([spec], request_timeout=timeout).values():
        try:
            future.result(timeout)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise DeliveryError(
                    f"cannot create {what} {topic!r}: {exc.args[0].str()}",
                    hint="create it (1 partition, cleanup.policy=compact) or grant CreateTopics",
                ) from None
    # A topic just created may not have a leader yet: reading it would fail with
    # "Unknown partition".
    deadline = time.monotonic() + timeout
    while not _has_leader(admin, topic, timeout, what):
        if time.monotonic() > deadline:
            raise DeliveryError(
                f"{what} {topic!r} has no partition leader {timeout:.0f}s after its creation",
                hint="check the broker's health",
            )
        time.sleep(0.1)


def _has_leader(admin: AdminClient, topic: str, timeout: float, what: str) -> bool:
    """Whether the broker's metadata lists `topic` with a leader for partition 0.

    A refused login (SASL, TLS) is raised by the client's error callback
    (`produce.RaiseOnRefusal`), served here, rather than as the bare transport failure
    the metadata request reports."""
    try:
        topics = admin.list_topics(timeout=timeout).topics
    except KafkaException as exc:
        admin.poll(0)
        raise DeliveryError(
            f"cannot look up {what} {topic!r}: {exc.args[0].str()}",
            hint="check kafka.bootstrap_servers and that the broker is up",
        ) from None
    found = topics.get(topic)
    return found is not None and 0 in found.partitions and found.partitions[0].leader >= 0


def read_committed_lsn(
    client_config: dict[str, Any], topic: str, key: bytes, timeout: float
) -> LSN | None:
    """The last committed end LSN recorded for `key`, read with `read_committed`."""
    value = read_last_value(client_config, topic, key, timeout)
    return LSN(json.loads(value)["lsn"]) if value else None


def read_last_value(
    client_config: dict[str, Any], topic: str, key: bytes, timeout: float
) -> bytes | None:
    """The newest committed value of `key` in a single-partition compacted topic
    (None when the key is absent or its newest record is a tombstone)."""
    consumer = Consumer(
        {
            **client_config,
            "group.id": f"bridge-offsets-reader-{time.time_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        tp = TopicPartition(topic, 0)
        deadline = time.monotonic() + timeout
        high = _high_watermark(consumer, tp, deadline)
        found: bytes | None = None
        if high <= 0:
            return None
        consumer.assign([TopicPartition(topic, 0, 0)])
        while True:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None and msg.key() == key:
                found = msg.value() or None
            position = consumer.position([tp])[0].offset
            if position >= high:
                return found
            if time.monotonic() > deadline:
                raise DeliveryError(
                    f"could not read topic {topic!r} to its end within {timeout:.0f}s",
                    hint="check the broker; the bridge cannot start without it",
                )
    finally:
        consumer.close()


# A partition's leadership is still settling just after the topic was created (or
# after a broker restart): asking again soon succeeds.
_SETTLING: Final = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._TIMED_OUT,
    }
)


def _high_watermark(consumer: Consumer, tp: TopicPartition, deadline: float) -> int:
    while True:
        try:
            _, high = consumer.get_watermark_offsets(
                tp, timeout=max(1.0, deadline - time.monotonic()), cached=False
            )
            return int(high)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() not in _SETTLING or time.monotonic() > deadline:
                consumer.poll(0)  # a refused login raises here, from the error callback
                raise DeliveryError(
                    f"cannot read the end offset of topic {tp.topic!r}: {error.str()}",
                    hint="check kafka.bootstrap_servers and that the broker is up",
                ) from None
            time.sleep(0.2)  # leadership moves within a broker round trip or two


class KafkaTransactions:
    """Groups PostgreSQL transactions into Kafka transactions."""

    def __init__(
        self,
        producer: Producer,
        topic: str,
        slot: str,
        *,
        max_records: int,
        max_interval_s: float,
        commit_timeout_s: float,
    ) -> None:
        self._producer = producer
        self._topic = topic
        self._key = slot.encode()
        self._max_records = max_records
        self._max_interval_s = max_interval_s
        self._timeout = commit_timeout_s
        self._open = False
        self._records = 0
        self._started = 0.0
        self._end_lsn = 0
        self.committed_lsn = 0

    def start(self, committed: LSN | None) -> None:
        self.committed_lsn = committed or 0

    def skip(self, commit_lsn: int) -> bool:
        """Already in Kafka: its end LSN is at or below the last committed one."""
        return commit_lsn < self.committed_lsn

    def before_records(self) -> None:
        if not self._open:
            self._producer.begin_transaction()
            self._open = True
            self._records = 0
            self._started = time.monotonic()

    def after_tx(self, end_lsn: int, records: int) -> None:
        """A PostgreSQL transaction is complete; commit the group when it is big or old."""
        if not self._open:
            return
        self._end_lsn = end_lsn
        self._records += records
        if (
            self._records >= self._max_records
            or time.monotonic() - self._started >= self._max_interval_s
        ):
            self.commit()

    def commit(self) -> None:
        if not self._open:
            return
        value = json.dumps({"lsn": self._end_lsn, "lsn_text": str(LSN(self._end_lsn))})
        self._producer.produce_untracked(KafkaRecord(self._topic, self._key, value.encode()))
        self._producer.commit_transaction(self._timeout)
        self._open = False
        self.committed_lsn = self._end_lsn

    def hold_lsn(self) -> int | None:
        """While a Kafka transaction is open, PostgreSQL may hear of nothing past the last
        committed one."""
        return self.committed_lsn + 1 if self._open else None
