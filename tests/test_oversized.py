"""Rows over the topic's record limit: a clear stop naming table and key, or a dead letter.

Live: the table's topic is created with max.message.bytes=10000 and a 50 kB row of
incompressible text goes through a real Pipeline.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from delivery.helpers import bridge_settings
from running import running
from waiting import wait_for

from bridge.config import Config, PipelineConfig
from bridge.decode.messages import Relation
from bridge.demo import consume
from bridge.encode.records import SourceBlock, TxSource
from bridge.errors import DeliveryError
from bridge.events.model import Change
from bridge.kafka.acks import AckTracker
from bridge.kafka.oversized import RECORD_OVERHEAD, OversizedPolicy, TopicLimits, key_text
from bridge.record import KafkaRecord

KEY_SCHEMA = {
    "type": "record",
    "name": "Key",
    "fields": [{"name": "id", "type": "int"}],
}
BIG_ROW = (
    "INSERT INTO big (id, payload) "
    "SELECT %s, string_agg(md5(random()::text || g::text), '') FROM generate_series(1, 1600) g"
)


# Pure unit tests: how a key is shown in the error.


def test_key_text_decodes_the_avro_key() -> None:
    framed = b"\x00" + struct.pack(">I", 7) + b"\x54"  # zigzag varint of 42
    assert key_text(framed, KEY_SCHEMA) == "{'id': 42}"


def test_key_text_falls_back_to_truncated_hex() -> None:
    assert key_text(b"\x00\x00\x00\x00\x07", None) == "0000000007"
    shown = key_text(b"\xff" * 500, None)
    assert len(shown) == 200 and shown.endswith("...") and shown.startswith("ffff")
    assert key_text(None, KEY_SCHEMA) == "<no key>"


class _Err:
    def str(self) -> str:
        return "Broker: Message size too large"


class _Msg:
    def topic(self) -> str:
        return "p.public.big"

    def partition(self) -> int:
        return 0

    def __len__(self) -> int:
        return 50_000


def test_a_size_failure_in_the_delivery_callback_names_the_table() -> None:
    tracker = AckTracker()
    tracker.tables["p.public.big"] = "public.big"
    handle = tracker.open_tx()
    handle.add_record(50_000)
    handle(_Err(), _Msg())
    assert tracker.error is not None
    assert "table public.big" in tracker.error.message
    assert "too large" in tracker.error.message


class _Limits:
    def get(self, topic: str) -> int:
        return 100


def test_a_dead_letter_keeps_the_key_change_headers_and_counts_them() -> None:
    """A primary-key change's record keeps its `__debezium.oldkey` header on the dead-letter
    topic (as Kafka Connect's dead-letter queue keeps headers); its size includes it. The
    letter has the coordinates every dead letter has (`park`, the one way one is made)."""
    policy = OversizedPolicy("p.dlq", _Limits(), {})  # type: ignore[arg-type]
    relation = Relation(None, 1, "public", "big", "d", ())
    headers = [("__debezium.oldkey", b"\x00\x00\x00\x00\x07\x02")]
    tx = TxSource(SourceBlock("p", "db", "0"), 9, 0x100, 0)
    record = KafkaRecord("p.public.big", b"k", b"x" * 500, headers)
    change = Change("c", relation, "", None, None, 0, (), 0, None, lsn=0xF0)
    error = policy.too_large(record, relation, None, tx)
    assert isinstance(error, DeliveryError)  # a stop is what it always was
    limit = "over the 228-byte record limit of topic 'p.public.big'"
    assert f"is {record.size()} bytes, {limit}" in error.message
    letter = policy.park(relation, change, error, tx, record)
    assert (letter.topic, letter.key, letter.headers) == ("p.dlq", b"k", headers)
    assert letter.value is not None
    fields = json.loads(letter.value)
    assert fields["size"] == 1 + 500 + len("__debezium.oldkey") + 6
    coordinates = (fields["lsn"], fields["commit_lsn"], fields["txId"], fields["op"])
    assert coordinates == (0xF0, 0x100, 9, "c")
    assert fields["error_type"] == "RecordTooLargeError" and fields["error"] == error.message
    assert "after" not in fields  # the row would not fit the dead-letter topic either
    assert policy.diverted == 1


def test_a_tables_on_error_governs_its_oversized_records_over_pipeline_oversized() -> None:
    """dlq and skip tables: their own policy; fail tables: pipeline.oversized (stop is
    fail, dead_letter is dlq)."""
    tables = {r"public\.d": "dlq", r"public\.s": "skip", r"public\.f": "fail"}
    for oversized in ("stop", "dead_letter"):
        cfg = PipelineConfig(oversized=oversized, on_error_tables=tables)
        assert cfg.oversized_for("public", "d") == "dlq"
        assert cfg.oversized_for("public", "s") == "skip"
        failing = "dlq" if oversized == "dead_letter" else "fail"
        assert cfg.oversized_for("public", "f") == failing
        assert cfg.oversized_for("public", "other") == failing


class _SilentAdmin:
    """An admin client whose brokers never answer: every future times out."""

    def describe_configs(self, resources: list[Any], request_timeout: float) -> dict[Any, Any]:
        class _Never:
            def result(self, timeout: float) -> Any:
                raise TimeoutError()

        return {resources[0]: _Never()}


def test_topic_limits_without_an_answer_is_a_delivery_error() -> None:
    """Brokers down while a topic's limit is first read (the soak's broker kill -9): a
    typed error telling the user what to check, not a bare TimeoutError traceback."""
    limits = TopicLimits({}, 1_000_000, 2.5, admin_factory=lambda _conf: _SilentAdmin())
    with pytest.raises(DeliveryError, match=r"did not answer within 2.5 s .*max.message.bytes"):
        limits.get("p.public.t")


# Live tests against the local stack.


def test_topic_limits_come_from_the_topic_or_the_broker_default(
    kafka_bootstrap: str, small_topic: str, topic_prefix: str
) -> None:
    limits = TopicLimits({"bootstrap.servers": kafka_bootstrap}, 1_000_000, 10.0)
    assert limits.get(small_topic) == 10_000 - RECORD_OVERHEAD
    # Not created yet: it will get the broker's message.max.bytes (1048588 by default),
    # so the producer's smaller limit binds.
    assert limits.get(f"{topic_prefix}.not_yet") == 1_000_000 - RECORD_OVERHEAD
    bigger = TopicLimits({"bootstrap.servers": kafka_bootstrap}, 50_000_000, 10.0)
    assert 10_000 < bigger.get(f"{topic_prefix}.not_yet") < 50_000_000 - RECORD_OVERHEAD


def _config(
    stack: Any, db: str, slot: str, publication: str, prefix: str, tmp: Path, mode: str
) -> Config:
    settings = bridge_settings(stack, db, slot, publication, prefix, tmp)
    settings["pipeline"]["oversized"] = mode
    return Config(**settings)


@pytest.fixture
def small_topic(kafka_bootstrap: str, topic_prefix: str) -> Iterator[str]:
    topic = f"{topic_prefix}.public.big"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    new = NewTopic(topic, num_partitions=1, replication_factor=1)
    new.config = {"max.message.bytes": "10000"}
    for future in admin.create_topics([new]).values():
        future.result(timeout=30)
    yield topic


def _write(conn: psycopg.Connection[Any], sql: str, params: tuple[Any, ...] = ()) -> str:
    """Run `sql` in its own transaction; an LSN its commit record ends after."""
    with conn.transaction():
        conn.execute(sql, params)
        row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def _confirmed_at_least(conn: psycopg.Connection[Any], slot: str, lsn: str) -> bool:
    row = conn.execute(
        "SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots WHERE slot_name = %s",
        (lsn, slot),
    ).fetchone()
    return bool(row and row[0])


def _read_json(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"oversized-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            value = msg.value()
            assert value is not None
            out.append((msg.key(), json.loads(value)))
    finally:
        consumer.close()
    return out


def test_stop_mode_names_table_and_key_and_holds_the_slot(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    small_topic: str,
    tmp_path: Path,
) -> None:
    pg_conn.execute("CREATE TABLE big (id int PRIMARY KEY, payload text)")
    cfg = _config(stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path, "stop")
    with running(cfg) as bridge:
        first = _write(pg_conn, "INSERT INTO big VALUES (1, 'small')")
        wait_for(
            lambda: _confirmed_at_least(pg_conn, slot_name, first), 60, f"the slot to pass {first}"
        )
        inside_big = _write(pg_conn, BIG_ROW, (2,))
        error = bridge.join()  # fails unless the pipeline stops on the oversized row
    assert isinstance(error, DeliveryError), error
    assert "public.big" in error.message and "{'id': 2}" in error.message
    assert small_topic in error.message and "10000" in error.message
    assert "dead_letter" in (error.hint or "")
    assert not _confirmed_at_least(pg_conn, slot_name, inside_big)
    assert len(consume(cfg, small_topic, 1)) == 1
    assert _records_in(stack.kafka_bootstrap, small_topic) == 1  # only the small row


def _records_in(bootstrap: str, topic: str) -> int:
    """How many records the one-partition topic holds: its offsets, not a timed read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{time.time_ns()}"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    finally:
        consumer.close()
    return int(high - low)


def test_dead_letter_mode_diverts_the_row_and_keeps_flowing(
    stack: Any,
    pg_db: str,
    pg_conn: psycopg.Connection[Any],
    slot_name: str,
    publication_name: str,
    topic_prefix: str,
    small_topic: str,
    tmp_path: Path,
) -> None:
    pg_conn.execute("CREATE TABLE big (id int PRIMARY KEY, payload text)")
    cfg = _config(stack, pg_db, slot_name, publication_name, topic_prefix, tmp_path, "dead_letter")
    with running(cfg) as bridge:  # re-raises whatever the pipeline dies of
        _write(pg_conn, BIG_ROW, (1,))
        last = _write(pg_conn, "INSERT INTO big VALUES (2, 'small')")
        dead = _read_json(stack.kafka_bootstrap, f"{topic_prefix}.dlq", 1)
        rows = consume(cfg, small_topic, 1)
        wait_for(
            lambda: _confirmed_at_least(pg_conn, slot_name, last), 60, f"the slot to pass {last}"
        )
        assert bridge.error is None and bridge.alive()
    assert bridge.error is None
    assert len(dead) == 1
    _, record = dead[0]
    assert record["table"] == "public.big" and record["topic"] == small_topic
    assert record["key_text"] == "{'id': 1}" and record["size"] > 50_000
    assert record["limit"] == 10_000 and record["partition"] is None
    assert record["key"] and record["lsn"] > 0 and record["reason"]
    assert record["commit_lsn"] >= record["lsn"] and record["error_type"] == "RecordTooLargeError"
    assert [(key["id"], value["after"]["payload"]) for key, value in rows] == [(2, "small")]
    assert len(_read_json(stack.kafka_bootstrap, f"{topic_prefix}.dlq", 2, timeout=5)) == 1
    # one path for every dead letter: the table is degraded as a dlq table's would be
    assert bridge.pipeline.metrics.dead_lettered == {"public.big": 1}
