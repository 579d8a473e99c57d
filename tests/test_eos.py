"""Exactly-once mode against the real stack: no duplicates across kill -9, and fencing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from running import running
from waiting import wait_for

from bridge.build import build_pipeline
from bridge.config import Config
from bridge.errors import DeliveryError
from bridge.kafka.eos import KafkaTransactions
from bridge.record import KafkaRecord

REPO = Path(__file__).resolve().parents[1]


def settings(stack: Any, db: str, slot: str, pub: str, prefix: str) -> dict[str, Any]:
    return {
        "source": {
            "host": stack.pg_host,
            "port": stack.pg_port,
            "dbname": db,
            "user": stack.pg_user,
            "password": stack.pg_password,
            "slot_name": slot,
            "publication_name": pub,
            "status_interval_s": 1.0,
        },
        "kafka": {
            "bootstrap_servers": stack.kafka_bootstrap,
            "topic_prefix": prefix,
            "exactly_once": True,
            "transaction_max_records": 20,
        },
        "registry": {"url": stack.registry_url},
        "http": {"port": 0},
    }


def wait_for_slot(conn: psycopg.Connection[Any], slot: str, timeout: float = 60.0) -> None:
    query = "SELECT active FROM pg_replication_slots WHERE slot_name = %s"
    wait_for(
        lambda: conn.execute(query, (slot,)).fetchone() == (True,),
        timeout,
        f"slot {slot} to become active",
    )


class Reader:
    """A read_committed consumer that keeps every key it has seen, with counts."""

    def __init__(self, stack: Any, topic: str) -> None:
        self.topic = topic
        self.decode = AvroDeserializer(SchemaRegistryClient({"url": stack.registry_url}))
        self.consumer = Consumer(
            {
                "bootstrap.servers": stack.kafka_bootstrap,
                "group.id": f"eos-test-{time.time_ns()}",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe([topic])
        self.counts: Counter[int] = Counter()

    def read_until(self, predicate: Any, timeout: float = 90.0) -> None:
        def read_more() -> bool:
            if predicate():
                return True
            msg = self.consumer.poll(0.2)
            if msg is not None and not msg.error() and msg.value() is not None:
                ctx = SerializationContext(self.topic, MessageField.KEY)
                self.counts[self.decode(msg.key(), ctx)["id"]] += 1
            return bool(predicate())

        wait_for(
            read_more, timeout, "the keys", every=0, detail=lambda: f"{len(self.counts)} keys read"
        )

    def close(self) -> None:
        self.consumer.close()


def test_no_duplicates_across_kill_9(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    pg_conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    config = tmp_path / "bridge.yaml"
    config.write_text(
        yaml.safe_dump(settings(stack, pg_db, slot_name, publication_name, topic_prefix))
    )
    reader = Reader(stack, f"{topic_prefix}.public.t")
    total = 400

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "bridge", "run", "--config", str(config)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    bridge = start()
    try:
        wait_for_slot(pg_conn, slot_name)  # rows committed before the slot exists are not streamed
        for i in range(total // 2):
            pg_conn.execute("INSERT INTO t VALUES (%s, 'x')", (i,))
        reader.read_until(lambda: len(reader.counts) >= 50)
        os.kill(bridge.pid, signal.SIGKILL)  # mid-stream: more is committed than delivered
        bridge.wait(30)
        for i in range(total // 2, total):
            pg_conn.execute("INSERT INTO t VALUES (%s, 'x')", (i,))
        bridge = start()
        reader.read_until(lambda: len(reader.counts) >= total)
        reader.consumer.poll(2.0)  # one more look for stragglers that would be duplicates
        reader.read_until(lambda: True)
        assert set(reader.counts) == set(range(total))
        duplicated = {k: n for k, n in reader.counts.items() if n > 1}
        assert duplicated == {}
        bridge.send_signal(signal.SIGTERM)
        assert bridge.wait(60) == 0, bridge.stderr.read().decode() if bridge.stderr else ""
    finally:
        if bridge.poll() is None:
            bridge.kill()
            bridge.wait(30)
        reader.close()


def test_second_instance_fences_the_first(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
) -> None:
    pg_conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    cfg = Config(**settings(stack, pg_db, slot_name, publication_name, topic_prefix))
    with running(cfg) as first:
        pg_conn.execute("INSERT INTO t VALUES (1)")
        reader = Reader(stack, f"{topic_prefix}.public.t")
        try:
            reader.read_until(lambda: 1 in reader.counts)
            # Same slot name → same transactional id: constructing it fences the first.
            second = build_pipeline(cfg)
            pg_conn.execute("INSERT INTO t VALUES (2)")
            failure = first.join()
            assert isinstance(failure, DeliveryError)
            assert "fenced" in str(failure)
            second.stop()
            second.producer.close()
        finally:
            reader.close()


@pytest.mark.parametrize("records", [1])
def test_offsets_topic_records_the_last_lsn(records: int) -> None:
    class FakeProducer:
        def __init__(self) -> None:
            self.calls: list[tuple[str, Any]] = []

        def begin_transaction(self) -> None:
            self.calls.append(("begin", None))

        def produce_untracked(self, record: KafkaRecord) -> None:
            self.calls.append(("offset", record.value))

        def commit_transaction(self, timeout: float) -> None:
            self.calls.append(("commit", None))

    producer = FakeProducer()
    eos = KafkaTransactions(
        producer,  # type: ignore[arg-type]
        "offsets",
        "slot",
        max_records=records,
        max_interval_s=60,
        commit_timeout_s=5,
    )
    eos.start(None)
    assert eos.hold_lsn() is None
    eos.before_records()
    assert eos.hold_lsn() == 1  # nothing committed yet: PostgreSQL hears of nothing
    eos.after_tx(500, 1)
    assert [c[0] for c in producer.calls] == ["begin", "offset", "commit"]
    assert b'"lsn": 500' in producer.calls[1][1]
    assert eos.committed_lsn == 500 and eos.hold_lsn() is None
    assert eos.skip(499) and not eos.skip(500)
