"""The local stack is real and wired the way the bridge needs it."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from waiting import wait_for

pytestmark = pytest.mark.live

ROW_SCHEMA = {
    "type": "record",
    "name": "Row",
    "namespace": "smoke",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
    ],
}


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    futures[topic].result(timeout=30)


def _produce(bootstrap: str, topic: str, key: bytes, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    errors: list[Any] = []
    producer.produce(topic, key=key, value=value, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    assert errors == [None]


def _consume_one(bootstrap: str, topic: str, timeout: float = 30.0) -> Any:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    received: list[Any] = []

    def one() -> bool:
        msg = consumer.poll(1.0)
        if msg is None:
            return False
        if msg.error():
            raise KafkaException(msg.error())
        received.append(msg)
        return True

    try:
        wait_for(one, timeout, f"a record on {topic}", every=0)
    finally:
        consumer.close()
    return received[0]


def test_kafka_round_trip(kafka_bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}.plain"
    _create_topic(kafka_bootstrap, topic)
    _produce(kafka_bootstrap, topic, b"k1", b"hello")
    msg = _consume_one(kafka_bootstrap, topic)
    assert (msg.key(), msg.value()) == (b"k1", b"hello")


def test_registry_register_and_read_back(registry_url: str, topic_prefix: str) -> None:
    client = SchemaRegistryClient({"url": registry_url})
    subject = f"{topic_prefix}-value"
    schema_id = client.register_schema(subject, Schema(json.dumps(ROW_SCHEMA), "AVRO"))
    fetched = client.get_schema(schema_id)
    assert fetched.schema_type == "AVRO"
    assert fetched.schema_str is not None
    assert json.loads(fetched.schema_str) == ROW_SCHEMA
    assert client.get_versions(subject) == [1]
    assert client.get_compatibility() == "BACKWARD"

    evolved = {**ROW_SCHEMA, "fields": [*ROW_SCHEMA["fields"], {"name": "n", "type": "int"}]}
    assert not client.test_compatibility(subject, Schema(json.dumps(evolved), "AVRO"))
    widened = {
        **ROW_SCHEMA,
        "fields": [*ROW_SCHEMA["fields"], {"name": "n", "type": "int", "default": 0}],
    }
    assert client.test_compatibility(subject, Schema(json.dumps(widened), "AVRO"))


def test_avro_round_trip_through_broker(
    kafka_bootstrap: str, registry_url: str, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}.avro"
    client = SchemaRegistryClient({"url": registry_url})
    serializer = AvroSerializer(client, json.dumps(ROW_SCHEMA))
    deserializer = AvroDeserializer(client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    record = {"id": 42, "name": "answer"}

    payload = serializer(record, ctx)
    assert payload[0] == 0  # Confluent wire format: magic byte, then the schema id
    _produce(kafka_bootstrap, topic, b"42", payload)
    msg = _consume_one(kafka_bootstrap, topic)
    assert deserializer(msg.value(), ctx) == record
    assert client.get_latest_version(f"{topic}-value").schema_id == int.from_bytes(
        payload[1:5], "big"
    )


def test_replication_connection(stack: Any, pg_db: str) -> None:
    dsn = stack.dsn(pg_db, replication="database")
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("IDENTIFY_SYSTEM").fetchone()
    assert row is not None
    systemid, timeline, xlogpos, dbname = row
    assert int(systemid) > 0 and int(timeline) >= 1 and "/" in xlogpos
    assert dbname == pg_db


def test_server_settings_and_pglogical(pg_conn: psycopg.Connection[Any]) -> None:
    settings = dict(
        pg_conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN "
            "('wal_level', 'max_prepared_transactions', 'track_commit_timestamp', "
            "'logical_decoding_work_mem', 'listen_addresses')"
        ).fetchall()
    )
    assert settings == {
        "wal_level": "logical",
        "max_prepared_transactions": "64",
        "track_commit_timestamp": "on",
        "logical_decoding_work_mem": "64",
        "listen_addresses": "127.0.0.1",
    }
    pg_conn.execute("CREATE EXTENSION pglogical")
    row = pg_conn.execute(
        "SELECT extversion FROM pg_extension WHERE extname = 'pglogical'"
    ).fetchone()
    assert row is not None and row[0]


def test_tcp_requires_password(stack: Any, pg_db: str) -> None:
    dsn = psycopg.conninfo.make_conninfo(
        host=stack.pg_host,
        port=stack.pg_port,
        user=stack.pg_user,
        dbname=pg_db,
        password="wrong",
    )
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dsn, connect_timeout=5)
