"""bridge.spark.reader on real Kafka + registry records made by the bridge's own serializer."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from bridge.errors import ConfigError, SchemaError
from bridge.spark.apply import apply_batch
from bridge.spark.reader import read_changes

from .feed import UNCHANGED, TableFeed

COLUMNS = [("id", "int4", -1), ("name", "text", -1), ("note", "text", -1)]


def _read(
    spark: SparkSession, feed: TableFeed, registry_url: str, bootstrap: str, **kw: Any
) -> Any:
    return read_changes(
        spark,
        kafka_options={"kafka.bootstrap.servers": bootstrap},
        registry_url=registry_url,
        **({"topics": [feed.topic]} | kw),
    )


@pytest.fixture(scope="module")
def feed(kafka_bootstrap: str, registry_url: str) -> TableFeed:
    feed = TableFeed(
        kafka_bootstrap, registry_url, f"r{uuid.uuid4().hex[:10]}", COLUMNS, ["id"], partitions=1
    )
    feed.commit(feed.insert({"id": "1", "name": "a", "note": "n"}), feed.insert({"id": "2"}))
    feed.commit(feed.update({"id": "1", "name": "b", "note": UNCHANGED}))
    feed.commit(feed.delete({"id": "2"}))
    feed.add_column("extra", "int8")
    feed.commit(feed.insert({"id": "3", "name": "c", "extra": "9"}))
    return feed


def test_batch_read_flattens_envelopes(
    spark: SparkSession, feed: TableFeed, kafka_bootstrap: str, registry_url: str
) -> None:
    df = _read(spark, feed, registry_url, kafka_bootstrap, tombstones="keep")
    types = dict(df.dtypes)
    assert types["id"] == "int" and types["extra"] == "bigint"
    assert types["_lsn"] == "bigint" and types["_commit_ts"] == "timestamp"
    rows = [r.asDict() for r in df.orderBy("_offset").collect()]
    first_lsn = 0x1_0000_0000 + 0x100
    fields = ["op", "id", "name", "note", "extra", "_lsn", "_txid"]
    fields += ["_deleted", "_unchanged", "_tombstone", "_offset"]
    got = [tuple(r[f] for f in fields) for r in rows]
    assert got == [
        ("c", 1, "a", "n", None, first_lsn, 701, False, None, False, 0),
        ("c", 2, None, None, None, first_lsn, 701, False, None, False, 1),
        ("u", 1, "b", None, None, first_lsn + 0x100, 702, False, ["note"], False, 2),
        ("d", 2, None, None, None, first_lsn + 0x200, 703, True, None, False, 3),
        (None, 2, None, None, None, None, None, True, None, True, 4),  # the tombstone
        ("c", 3, "c", None, 9, first_lsn + 0x300, 704, False, None, False, 5),
    ]
    commit_ms = (800_000_000_000_000 + first_lsn + 946_684_800_000_000) // 1000
    local = dt.datetime.fromtimestamp(commit_ms // 1000)  # pyspark hands out local time
    assert rows[0]["_commit_ts"] == local.replace(microsecond=commit_ms % 1000 * 1000)
    assert {r["_topic"] for r in rows} == {feed.topic} and {r["_partition"] for r in rows} == {0}


def test_tombstones_dropped_by_default_and_pattern_subscription(
    spark: SparkSession, feed: TableFeed, kafka_bootstrap: str, registry_url: str
) -> None:
    pattern = feed.topic.replace(".", r"\.").replace(r"\.items", r"\..*")
    df = _read(spark, feed, registry_url, kafka_bootstrap, topics=None, pattern=pattern)
    assert "_tombstone" not in df.columns
    assert sorted(r["_offset"] for r in df.select("_offset").collect()) == [0, 1, 2, 3, 5]


def test_record_not_in_wire_format_is_a_schema_error(
    spark: SparkSession, kafka_bootstrap: str, registry_url: str
) -> None:
    topic = f"r{uuid.uuid4().hex[:10]}.public.raw"
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, key=b"k", value=b"not avro")
    assert producer.flush(30) == 0
    with pytest.raises(SchemaError, match=r"offset 0 is not Confluent-framed"):
        read_changes(
            spark,
            [topic],
            kafka_options={"kafka.bootstrap.servers": kafka_bootstrap},
            registry_url=registry_url,
        )


def test_empty_topic_reads_as_no_rows(
    spark: SparkSession, kafka_bootstrap: str, registry_url: str
) -> None:
    topic = f"r{uuid.uuid4().hex[:10]}.public.empty"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    df = read_changes(
        spark,
        [topic],
        kafka_options={"kafka.bootstrap.servers": kafka_bootstrap},
        registry_url=registry_url,
    )
    assert df.count() == 0 and {"op", "_lsn", "_offset"} <= set(df.columns)
    apply_batch(df, "never_created", ["id"])  # nothing to apply: no table either
    assert not spark.catalog.tableExists("never_created")


def test_arguments_are_checked(spark: SparkSession) -> None:
    with pytest.raises(ConfigError, match="exactly one of topics= and pattern="):
        read_changes(spark, kafka_options={"kafka.bootstrap.servers": "x"}, registry_url="http://x")
    with pytest.raises(ConfigError, match=r"kafka\.bootstrap\.servers"):
        read_changes(spark, ["t"], kafka_options={}, registry_url="http://x")
