"""The apply follows the table's schema without a restart by hand (in Delta and Iceberg),
applies the options Databricks' AUTO CDC users expect, and quarantines undecodable records in
PERMISSIVE mode.

Records are the bridge's own bytes (tests/spark/feed.py) in the real Kafka and registry.
"""

from __future__ import annotations

import re
import uuid
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from bridge.errors import SchemaError
from bridge.record import KafkaRecord
from bridge.spark.apply import apply_batch
from bridge.spark.reader import Mode, read_changes

from .conftest import Lake
from .feed import TableFeed, numeric_typmod


def _feed(bootstrap: str, registry_url: str, columns: list[tuple[str, str, int]]) -> TableFeed:
    return TableFeed(bootstrap, registry_url, f"s{uuid.uuid4().hex[:10]}", columns, ["id"])


def _read(
    spark: SparkSession, feed: TableFeed, bootstrap: str, registry_url: str, mode: Mode = "FAILFAST"
) -> DataFrame:
    return read_changes(
        spark,
        [feed.topic],
        kafka_options={"kafka.bootstrap.servers": bootstrap},
        registry_url=registry_url,
        mode=mode,
    )


def _rows(table: DataFrame) -> dict[int, dict[str, Any]]:
    rows = table.collect()
    return {
        r["id"]: {k: v for k, v in r.asDict().items() if k[0] != "_" and k != "id"} for r in rows
    }


def test_added_dropped_and_widened_columns_reach_the_table(
    spark: SparkSession, lake: Lake, kafka_bootstrap: str, registry_url: str
) -> None:
    columns = [
        ("id", "int4", -1),
        ("n", "int4", -1),
        ("f", "float4", -1),
        ("amount", "numeric", numeric_typmod(10, 2)),
        ("gone", "text", -1),
    ]
    feed = _feed(kafka_bootstrap, registry_url, columns)
    feed.commit(
        feed.insert({"id": "1", "n": "1", "f": "1.5", "amount": "1.25", "gone": "g1"}),
        feed.insert({"id": "2", "n": "2", "f": "2.5", "amount": "2.50", "gone": "g2"}),
    )
    path = lake.target("evolving")
    first = _read(spark, feed, kafka_bootstrap, registry_url)
    last = first.agg(sf.max("_offset")).first()
    assert last is not None
    apply_batch(first, path, ["id"])

    feed.retype_column("n", "int8")
    feed.retype_column("f", "float8")
    feed.retype_column("amount", "numeric", numeric_typmod(14, 2))
    feed.drop_column("gone")
    feed.add_column("extra", "text")
    feed.commit(
        feed.update({"id": "1", "n": "5000000000", "f": "0.1", "amount": "123456789012.34"}),
        feed.insert({"id": "3", "n": "3", "f": "3.5", "amount": "3", "extra": "x"}),
    )
    later = _read(spark, feed, kafka_bootstrap, registry_url)
    apply_batch(later.where(sf.col("_offset") > last[0]), path, ["id"])  # new records only
    types = dict(lake.rows(path).dtypes)
    assert {c: types[c] for c in ("n", "f", "amount", "gone", "extra")} == {
        "n": "bigint",
        "f": "double",
        "amount": "decimal(14,2)",
        "gone": "string",  # dropped in PostgreSQL: kept, null in rows written since
        "extra": "string",
    }
    assert _rows(lake.rows(path)) == {
        1: {
            "n": 5_000_000_000,
            "f": 0.1,
            "amount": Decimal("123456789012.34"),
            "gone": "g1",
            "extra": None,
        },
        2: {"n": 2, "f": 2.5, "amount": Decimal("2.50"), "gone": "g2", "extra": None},
        3: {"n": 3, "f": 3.5, "amount": Decimal("3.00"), "gone": None, "extra": "x"},
    }

    # A change no column can follow stops the apply, naming table and column (the registry
    # refuses it for one subject: the table's topic under a new prefix brings it).
    other = _feed(kafka_bootstrap, registry_url, [("id", "int4", -1), ("n", "text", -1)])
    other.commit(other.insert({"id": "2", "n": "two"}))
    error = rf"table {re.escape(path)} column n: type bigint cannot change"
    with pytest.raises(SchemaError, match=error):
        apply_batch(_read(spark, other, kafka_bootstrap, registry_url), path, ["id"])


def test_a_retype_the_registry_refused_reaches_the_table(
    spark: SparkSession, lake: Lake, kafka_bootstrap: str, registry_url: str
) -> None:
    """int -> text, refused under BACKWARD: the bridge's default registers it under
    `<topic>-value-v2`. The reader reads each record with its generation's latest schema,
    the older generation's values as the newest type, and the apply rewrites the table's
    column to it, as PostgreSQL rewrote the table."""
    if lake.format == "iceberg":
        pytest.skip("Iceberg's rewrite (createOrReplace of the table from itself) not run yet")
    feed = _feed(kafka_bootstrap, registry_url, [("id", "int4", -1), ("n", "int4", -1)])
    feed.commit(
        feed.insert({"id": "1", "n": "1"}),
        feed.insert({"id": "2", "n": "2"}),
        feed.insert({"id": "4", "n": "4"}),
    )
    path = lake.target("retyped")
    apply_batch(_read(spark, feed, kafka_bootstrap, registry_url), path, ["id"])
    assert dict(lake.rows(path).dtypes)["n"] == "int"

    feed.retype_column("n", "text")
    feed.commit(
        feed.update({"id": "1", "n": "one"}),
        feed.insert({"id": "3", "n": "three"}),
        feed.delete({"id": "4"}),
    )
    client = SchemaRegistryClient({"url": registry_url})
    assert client.get_versions(f"{feed.topic}-value") == [1]
    assert client.get_versions(f"{feed.topic}-value-v2") == [1]
    # every record again: both generations in one batch (the apply is idempotent)
    apply_batch(_read(spark, feed, kafka_bootstrap, registry_url), path, ["id"])
    table = lake.rows(path)
    assert dict(table.dtypes)["n"] == "string"
    live = _rows(table.where(~sf.col("_deleted")))
    assert live == {1: {"n": "one"}, 2: {"n": "2"}, 3: {"n": "three"}}


def test_options_sequence_and_quarantine(
    spark: SparkSession, lake: Lake, kafka_bootstrap: str, registry_url: str
) -> None:
    """except_column_list, ignore_null_updates and `_seq` in one apply; a record that is not
    framed, one with an unknown schema id and one with a broken body go to the quarantine
    table once, however often the topic is applied, and the good records still apply."""
    columns = [("id", "int4", -1), ("a", "int4", -1), ("b", "int4", -1), ("c", "text", -1)]
    feed = _feed(kafka_bootstrap, registry_url, columns)
    feed.commit(
        feed.insert({"id": "1", "a": "1", "b": "1", "c": "secret"}),
        feed.update({"id": "1", "a": None, "b": "2", "c": "secret"}),
    )
    good_value = feed.produced[-1].value
    assert good_value is not None
    broken = [b"not avro", b"\x00\x7f\xff\xff\xf0" + good_value[5:], good_value[:5] + b"\xff"]
    feed.send([KafkaRecord(feed.topic, b"k", value) for value in broken])
    feed.flush()
    feed.commit(feed.insert({"id": "2", "a": "5", "b": None, "c": "x"}))

    path, quarantine = lake.target("options"), lake.target("quarantine")
    for _ in range(2):
        changes = _read(spark, feed, kafka_bootstrap, registry_url, "PERMISSIVE")
        apply_batch(
            changes,
            path,
            ["id"],
            except_column_list=["c"],
            ignore_null_updates=True,
            quarantine=quarantine,
        )
    table = lake.rows(path)
    assert "c" not in table.columns
    assert _rows(table) == {1: {"a": 1, "b": 2}, 2: {"a": 5, "b": None}}
    seq = {r["id"]: r["_seq"] for r in table.select("id", "_seq", "_lsn").collect()}
    assert seq[2] > seq[1] and seq[1]["commit_lsn"] < seq[2]["commit_lsn"]
    assert all(s["lsn"] is not None for s in seq.values())

    raw = (
        spark.read.format("kafka")
        .options(**{"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": feed.topic})
        .load()
    )
    expected = {
        (r["partition"], r["offset"]) for r in raw.where(sf.col("value").isin(*broken)).collect()
    }
    found = lake.rows(quarantine).collect()
    assert {(r["_partition"], r["_offset"]) for r in found} == expected
    errors = sorted((r["_schema_id"] is None, r["_error"]) for r in found)
    assert [e[0] for e in errors] == [False, False, True]
    assert any("not in the registry" in e[1] for e in errors)
    assert any("from_avro could not read" in e[1] for e in errors)
    assert any("Confluent-framed" in e[1] for e in errors)
