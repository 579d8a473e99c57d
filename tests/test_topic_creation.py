"""`kafka.topic_creation` (Debezium's `topic.creation.*`): the bridge creates each table
topic by the first rule matching its name, before the topic's first record; a topic that
exists already is left as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from delivery.helpers import bridge_settings
from running import running
from waiting import wait_for

from bridge.config import Config


def _topic(admin: AdminClient, name: str) -> tuple[int, dict[str, str]]:
    """Partition count and the topic's own (non-default) settings."""
    partitions = len(admin.list_topics(name, timeout=10).topics[name].partitions)
    resource = ConfigResource(ResourceType.TOPIC, name)
    entries = admin.describe_configs([resource], request_timeout=10)[resource].result(10)
    own = {k: e.value for k, e in entries.items() if not e.is_default}
    return partitions, own


def test_topics_are_created_by_rule(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    for table in ("accounts", "events", "legacy"):
        pg_conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
    admin = AdminClient(stack.kafka_client_config())
    legacy = f"{topic_prefix}.public.legacy"
    admin.create_topics([NewTopic(legacy, num_partitions=1)])[legacy].result(30)
    settings = bridge_settings(
        stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path / "spill"
    )
    settings["kafka"]["topic_creation"] = [
        {
            "match": rf"{topic_prefix}\.public\.accounts",
            "partitions": 3,
            "config": {"cleanup.policy": "compact", "retention.ms": "3600000"},
        },
        {"partitions": 2, "replication_factor": 1},  # every other topic
    ]
    with running(Config(**settings)) as bridge:
        for table in ("accounts", "events", "legacy"):
            pg_conn.execute(f"INSERT INTO {table} VALUES (1, 'x')")
        topics = [f"{topic_prefix}.public.{t}" for t in ("accounts", "events", "legacy")]

        def produced() -> bool:
            bridge.check()
            metadata = admin.list_topics(timeout=10).topics
            return all(t in metadata and _has_records(stack, t) for t in topics)

        wait_for(produced, 60, "a record in each table topic", every=0.2)
    accounts = _topic(admin, topics[0])
    assert accounts[0] == 3
    assert accounts[1]["cleanup.policy"] == "compact"
    assert accounts[1]["retention.ms"] == "3600000"
    events = _topic(admin, topics[1])
    assert events[0] == 2
    assert "cleanup.policy" not in events[1]
    assert _topic(admin, legacy)[0] == 1  # existed before: left as it is


def _has_records(stack: Any, topic: str) -> bool:
    consumer = Consumer({**stack.kafka_client_config(), "group.id": "topic-creation-test"})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return any(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] > 0
            for p in parts
        )
    finally:
        consumer.close()
