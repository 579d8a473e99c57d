"""The producer against a real broker: delivery reports drive the watermark."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bridge.errors import ConfigError, DeliveryError
from bridge.kafka.acks import AckTracker
from bridge.kafka.producer import PRODUCER_DEFAULTS, UNSAFE_OVERRIDES, Producer, producer_config
from bridge.record import KafkaRecord

UNREACHABLE = {"bootstrap.servers": "127.0.0.1:1"}


def _create_topic(
    bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})
    admin.create_topics([new])[topic].result(timeout=30)


def _record_count(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-count"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        )
    finally:
        consumer.close()


@pytest.fixture
def tracker() -> AckTracker:
    return AckTracker()


@pytest.fixture
def make_producer(kafka_bootstrap: str, tracker: AckTracker) -> Iterator[Any]:
    made: list[Producer] = []

    def make(**kwargs: Any) -> Producer:
        producer = Producer({"bootstrap.servers": kafka_bootstrap}, tracker, **kwargs)
        made.append(producer)
        return producer

    yield make
    for producer in made:
        producer.close()


# -- configuration (no broker needed) ----------------------------------------------


def test_defaults_keep_the_delivery_guarantees() -> None:
    conf = producer_config(UNREACHABLE, {})
    assert conf["enable.idempotence"] is True
    assert conf["acks"] == "all"
    assert int(conf["max.in.flight.requests.per.connection"]) <= 5
    assert conf["bootstrap.servers"] == "127.0.0.1:1"


def test_overrides_win_over_defaults() -> None:
    conf = producer_config(UNREACHABLE, {"linger.ms": 50, "compression.type": "zstd"})
    assert conf["linger.ms"] == 50
    assert conf["compression.type"] == "zstd"
    assert set(PRODUCER_DEFAULTS) <= set(conf)


@pytest.mark.parametrize("key", sorted(UNSAFE_OVERRIDES))
def test_unsafe_override_is_rejected(key: str) -> None:
    with pytest.raises(ConfigError, match=f"'{key}' cannot be overridden") as info:
        producer_config(UNREACHABLE, {key: "x"})
    assert info.value.hint


def test_override_of_kafka_section_setting_is_rejected() -> None:
    with pytest.raises(ConfigError, match="already set by the kafka section"):
        producer_config(UNREACHABLE, {"bootstrap.servers": "elsewhere:9092"})


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"no.such.property": 1}, "kafka.producer.no.such.property"),
        ({"linger.ms": "soon"}, "kafka.producer.linger.ms"),  # librdkafka names its alias
        ({"compression.type": "brotli"}, "kafka.producer.compression.type"),
        ({"max.in.flight": 6}, "kafka.producer.max.in.flight"),
    ],
)
def test_librdkafka_refusal_is_config_error_naming_the_key(
    overrides: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        Producer(UNREACHABLE, AckTracker(), overrides=overrides)


def test_bounds_must_be_positive() -> None:
    with pytest.raises(ConfigError):
        Producer(UNREACHABLE, AckTracker(), max_in_flight_records=0)


# -- real broker ---------------------------------------------------------------------


def test_many_records_across_partitions_reach_last_end_lsn(
    kafka_bootstrap: str, topic_prefix: str, tracker: AckTracker, make_producer: Any
) -> None:
    topic = f"{topic_prefix}.rows"
    _create_topic(kafka_bootstrap, topic, partitions=6)
    producer = make_producer()
    value = os.urandom(200)
    end_lsn = 1000
    produced = 0
    for tx in range(210):
        handle = tracker.open_tx()
        for i in range(0 if tx % 21 == 0 else 50):  # some transactions are empty
            producer.produce(KafkaRecord(topic, f"{tx}-{i}".encode(), value), handle)
            produced += 1
        end_lsn += 64
        tracker.close_tx(handle, end_lsn)
    assert produced == 10_000
    assert producer.flush(60)
    assert tracker.flush_lsn() == end_lsn
    assert (tracker.in_flight_records, tracker.in_flight_bytes) == (0, 0)
    assert _record_count(kafka_bootstrap, topic, 6) == produced


def test_record_the_broker_refuses_is_delivery_error(
    kafka_bootstrap: str, topic_prefix: str, tracker: AckTracker, make_producer: Any
) -> None:
    topic = f"{topic_prefix}.small"
    _create_topic(kafka_bootstrap, topic, partitions=3, config={"max.message.bytes": "2000"})
    producer = make_producer()
    first = tracker.open_tx()
    producer.produce(KafkaRecord(topic, b"k", b"fits"), first)
    tracker.close_tx(first, 100)
    assert producer.flush(30)
    assert tracker.flush_lsn() == 100

    second = tracker.open_tx()
    producer.produce(KafkaRecord(topic, b"k", os.urandom(10_000)), second)  # incompressible
    tracker.close_tx(second, 200)
    with pytest.raises(DeliveryError) as info:
        producer.flush(30)
    text = str(info.value)
    assert repr(topic) in text
    assert any(f"partition {p}:" in text for p in range(3))
    assert "too large" in text
    assert tracker.flush_lsn(idle_position=500) == 100
    with pytest.raises(DeliveryError):
        producer.poll()


def test_record_the_client_refuses_fails_its_transaction(
    kafka_bootstrap: str, topic_prefix: str, tracker: AckTracker, make_producer: Any
) -> None:
    producer = make_producer(overrides={"message.max.bytes": 10_000})
    handle = tracker.open_tx()
    with pytest.raises(DeliveryError, match="partition unassigned"):
        producer.produce(KafkaRecord(f"{topic_prefix}.x", None, os.urandom(20_000)), handle)
    tracker.close_tx(handle, 100)
    assert tracker.failed
    assert tracker.flush_lsn(idle_position=500) == 0


def test_in_flight_bounds_block_and_service_the_source(
    kafka_bootstrap: str, topic_prefix: str, tracker: AckTracker, make_producer: Any
) -> None:
    topic = f"{topic_prefix}.bounded"
    _create_topic(kafka_bootstrap, topic, partitions=3)
    turns: list[tuple[int, int]] = []
    producer = make_producer(
        max_in_flight_records=10,
        max_in_flight_bytes=4_000,
        while_blocked=lambda: turns.append((tracker.in_flight_records, tracker.in_flight_bytes)),
    )
    handle = tracker.open_tx()
    for i in range(500):
        producer.produce(KafkaRecord(topic, str(i).encode(), os.urandom(1_000)), handle)
        assert tracker.in_flight_records <= 10
        assert tracker.in_flight_bytes <= 4_000
    tracker.close_tx(handle, 42)
    assert producer.flush(30)
    assert turns, "while_blocked was never called"
    assert producer.blocked_turns >= len(turns)
    assert tracker.flush_lsn() == 42
    assert _record_count(kafka_bootstrap, topic, 3) == 500


def test_record_larger_than_byte_bound_goes_alone(
    kafka_bootstrap: str, topic_prefix: str, tracker: AckTracker, make_producer: Any
) -> None:
    producer = make_producer(max_in_flight_bytes=100)
    handle = tracker.open_tx()
    for _ in range(3):
        producer.produce(KafkaRecord(f"{topic_prefix}.big", None, os.urandom(1_000)), handle)
        assert tracker.in_flight_records == 1
    tracker.close_tx(handle, 7)
    assert producer.flush(30)
    assert tracker.flush_lsn() == 7


def test_full_client_queue_blocks_instead_of_failing(
    kafka_bootstrap: str, topic_prefix: str, tracker: AckTracker, make_producer: Any
) -> None:
    calls: list[None] = []
    producer = make_producer(
        overrides={"queue.buffering.max.messages": 5},
        while_blocked=lambda: calls.append(None),
    )
    handle = tracker.open_tx()
    for i in range(200):
        producer.produce(KafkaRecord(f"{topic_prefix}.q", str(i).encode(), b"v" * 100), handle)
    tracker.close_tx(handle, 9)
    assert producer.flush(30)
    assert calls
    assert tracker.flush_lsn() == 9


@pytest.mark.fault
def test_broker_outage_acknowledges_nothing_until_delivered(
    stack: Any, kafka_bootstrap: str, topic_prefix: str, tracker: AckTracker, make_producer: Any
) -> None:
    topic = f"{topic_prefix}.outage"
    _create_topic(kafka_bootstrap, topic, partitions=1)
    calls: list[None] = []
    producer = make_producer(while_blocked=lambda: calls.append(None))
    stack.stop_kafka()
    handle = tracker.open_tx()
    producer.produce(KafkaRecord(topic, b"k", b"v"), handle)
    tracker.close_tx(handle, 300)
    assert not producer.flush(1.0)
    assert calls, "flush did not service the source while waiting"
    assert tracker.flush_lsn(idle_position=900) == 0
    stack.start_kafka()
    assert producer.flush(60)
    assert tracker.flush_lsn(idle_position=900) == 900


def test_close_drops_undelivered_records_unacknowledged(
    tracker: AckTracker,
) -> None:
    producer = Producer(UNREACHABLE, tracker)
    handle = tracker.open_tx()
    producer.produce(KafkaRecord("nowhere", None, b"v"), handle)
    tracker.close_tx(handle, 100)
    producer.close()
    producer.close()
    assert tracker.failed
    assert tracker.flush_lsn(idle_position=500) == 0
