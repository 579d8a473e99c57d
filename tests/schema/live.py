"""Configuration for the whole Pipeline on the shared stack (run with tests/running.py),
and a plain consumer for its topics (live e2e tests).

Used by tests/test_types_e2e.py, test_evolution.py and test_toast.py. Records are read
back with confluent-kafka and the registry, never with bridge code, so the tests see
exactly what any other consumer would.
"""

from __future__ import annotations

import io
import json
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import fastavro
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from waiting import wait_for

from bridge.config import Config

# Logical types whose Python form cannot hold every value the bridge writes (±infinity
# sentinels, 24:00:00): the raw reader leaves these as the plain int/long on the wire.
TEMPORAL_LOGICAL_TYPES = frozenset(
    {
        "date",
        "time-micros",
        "time-millis",
        "timestamp-micros",
        "timestamp-millis",
        "local-timestamp-micros",
        "local-timestamp-millis",
    }
)
_HEADER = struct.Struct(">bI")


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def bridge_config(
    stack: Any,
    dbname: str,
    *,
    prefix: str,
    binary: bool = False,
    avro: dict[str, Any] | None = None,
    kafka: dict[str, Any] | None = None,
) -> Config:
    """A Config for one test database, with its own slot, publication and topic prefix;
    `kafka` adds settings to the kafka section (e.g. exactly_once)."""
    return Config(
        source={
            "host": stack.pg_host,
            "port": stack.pg_port,
            "dbname": dbname,
            "user": stack.pg_user,
            "password": stack.pg_password,
            "slot_name": unique("slot"),
            "publication_name": unique("pub"),
            "status_interval_s": 1.0,
            "binary": binary,
        },
        kafka={"bootstrap_servers": stack.kafka_bootstrap, "topic_prefix": prefix, **(kafka or {})},
        registry={"url": stack.registry_url},
        avro=avro or {},
        snapshot={"mode": "no_data"},  # tests stream changes made after the start
        http={"port": 0},
    )


class Received(NamedTuple):
    key: bytes | None
    value: bytes | None


def schema_id(payload: bytes) -> int:
    magic, found = _HEADER.unpack_from(payload)
    assert magic == 0, f"not Confluent framing: magic byte {magic}"
    return int(found)


def read_topic(
    cfg: Config,
    topic: str,
    count: int,
    *,
    alive: Callable[[], bool] = lambda: True,
    timeout: float = 90.0,
) -> list[Received]:
    """The first `count` records of a one-partition topic, tombstones included.

    Stops early once `alive()` is false and nothing more arrives, so a dead pipeline
    fails the test quickly instead of at the timeout.
    """
    consumer = Consumer(
        {
            **cfg.kafka.client_config(),
            "group.id": unique("test"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    consumer.subscribe([topic])
    out: list[Received] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if not alive():
                    break
                continue
            if msg.error():
                continue
            out.append(Received(msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def topic_size(cfg: Config, topic: str) -> int:
    """Records in partition 0 (high watermark): what was produced, read or not."""
    consumer = Consumer({**cfg.kafka.client_config(), "group.id": unique("size")})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return int(high) - int(low)


def records_in(cfg: Config, topic: str) -> int:
    """`topic_size`, or 0 while the broker does not know the topic."""
    try:
        return topic_size(cfg, topic)
    except KafkaException:
        return 0


def topics_named(cfg: Config, prefix: str) -> str:
    """The broker's topics that start with `prefix`, for a failure message."""
    admin = AdminClient(cfg.kafka.client_config())
    names = sorted(t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix))
    return f"topics starting with {prefix!r}: {names}"


def wait_delivered(bridge: Any, conn: Any, cfg: Config, timeout: float = 120.0) -> None:
    """Wait until the running `bridge` (tests/running.py) confirmed every transaction
    committed so far: its slot's confirmed position reaches the WAL insert position.
    Not `pg_current_wal_lsn()`: that is the write position, which lags the last commits
    under asynchronous commit (the stack's default), so the wait could end at once."""
    row = conn.execute("SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint").fetchone()
    assert row is not None
    wait_for(
        lambda: bridge.check() or confirmed_flush(conn, cfg.source.slot_name) >= row[0],
        timeout,
        "the bridge to deliver the workload",
        every=0.2,
    )


def confirmed_flush(conn: Any, slot: str) -> int:
    """The slot's confirmed_flush_lsn as an integer."""
    row = conn.execute(
        "SELECT (confirmed_flush_lsn - '0/0')::bigint FROM pg_replication_slots "
        "WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    assert row is not None, f"no slot {slot}"
    return int(row[0])


def _strip_temporal(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_strip_temporal(s) for s in schema]
    if isinstance(schema, dict):
        if schema.get("logicalType") in TEMPORAL_LOGICAL_TYPES:
            return {k: v for k, v in schema.items() if k != "logicalType"}
        return {k: _strip_temporal(v) for k, v in schema.items()}
    return schema


class Decoders:
    """Both ways of reading a record: confluent-kafka's AvroDeserializer, and a raw read
    (writer schema fetched by id, temporal logical types left as numbers)."""

    def __init__(self, cfg: Config) -> None:
        self.client = SchemaRegistryClient(cfg.registry.client_config())
        self.plain = AvroDeserializer(self.client)
        self._raw: dict[int, Any] = {}

    def writer_schema(self, payload: bytes) -> dict[str, Any]:
        text = self.client.get_schema(schema_id(payload)).schema_str
        assert text is not None
        found: dict[str, Any] = json.loads(text)
        return found

    def raw(self, payload: bytes) -> Any:
        sid = schema_id(payload)
        parsed = self._raw.get(sid)
        if parsed is None:
            parsed = fastavro.parse_schema(_strip_temporal(self.writer_schema(payload)))
            self._raw[sid] = parsed
        return fastavro.schemaless_reader(io.BytesIO(payload[_HEADER.size :]), parsed)

    def value(self, topic: str, payload: bytes | None) -> Any:
        return self.plain(payload, SerializationContext(topic, MessageField.VALUE))

    def key(self, topic: str, payload: bytes | None) -> Any:
        return self.plain(payload, SerializationContext(topic, MessageField.KEY))
