"""Signals through a Kafka topic (`snapshot.signal_kafka_topic`, Debezium's Kafka signal
channel): execute-snapshot with an additional condition, pause/resume, stop-snapshot, and
records with another key ignored."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import psycopg
from confluent_kafka import Producer
from delivery.helpers import wait_slot_active
from waiting import wait_for

from .helpers import RunBridge, TopicReader, make_table

SIGNAL = "public.debezium_signal"


def _send(stack: Any, topic: str, key: str, *signals: tuple[str, str, dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    for signal_id, kind, data in signals:
        value = json.dumps({"id": signal_id, "type": kind, "data": data})
        producer.produce(topic, key=key.encode(), value=value.encode())
    assert producer.flush(30) == 0


def _state(conn: psycopg.Connection[Any], run_id: str) -> str | None:
    try:
        row = conn.execute(
            "SELECT state FROM bridge.snapshot_run WHERE run_id = %s", (run_id,)
        ).fetchone()
    except psycopg.errors.UndefinedTable:
        conn.rollback()
        return None
    return None if row is None else str(row[0])


def _reads(reader: TopicReader) -> Counter[int]:
    return Counter(r.key["id"] for r in reader.read() if r.key and r.value and r.value["op"] == "r")


def test_signals_from_a_kafka_topic(
    stack: Any,
    pg_conn: psycopg.Connection[Any],
    run_bridge: RunBridge,
    topic: Any,
    slot_name: str,
    topic_prefix: str,
) -> None:
    make_table(pg_conn, "t", 40)
    pg_conn.execute(f"CREATE TABLE {SIGNAL} (id text PRIMARY KEY, type text NOT NULL, data text)")
    signals = f"{topic_prefix}.signals"
    table = {"data-collections": ["public.t"], "type": "incremental"}
    # another connector's signal, which also makes the topic before the bridge subscribes
    _send(stack, signals, "someone-else", ("x-1", "execute-snapshot", table))
    bridge = run_bridge(
        mode="no_data",
        signal_table=SIGNAL,
        signal_kafka_topic=signals,
        signal_kafka_group=f"{topic_prefix}-signals",
        incremental_chunk_size=5,
    )
    wait_slot_active(pg_conn, slot_name, bridge)
    condition = {
        **table,
        "additional-conditions": [{"data-collection": "public.t", "filter": "id <= 30"}],
    }
    _send(
        stack,
        signals,
        topic_prefix,
        ("p-1", "pause-snapshot", {}),
        ("s-1", "execute-snapshot", condition),
    )
    wait_for(lambda: _state(pg_conn, "s-1") == "running", 60, "s-1 requested")
    pg_conn.execute("INSERT INTO t VALUES (100, 1, 'streamed')")  # the stream goes on
    reader = topic("public.t")
    wait_for(lambda: any(r.key == {"id": 100} for r in reader.read()), 60, "the streamed row")
    assert not _reads(reader)  # paused: no chunk was read
    _send(stack, signals, topic_prefix, ("r-1", "resume-snapshot", {}))
    wait_for(lambda: _state(pg_conn, "s-1") == "done", 60, "s-1 done")
    assert _reads(reader) == Counter(range(1, 31))
    assert _state(pg_conn, "x-1") is None
    # stop right after the request: at most the chunk opened meanwhile is read
    _send(
        stack,
        signals,
        topic_prefix,
        ("s-2", "execute-snapshot", table),
        ("st-2", "stop-snapshot", table),
    )
    wait_for(lambda: _state(pg_conn, "s-2") == "done", 60, "s-2 stopped")
    again = _reads(reader) - Counter(range(1, 31))
    assert sum(again.values()) <= 5
    bridge.check()
