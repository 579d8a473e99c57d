"""The Spark apply carries unchanged TOASTed values across primary-key changes.

The real bridge's records (tests/toast_keys.py: moves, a chain inside one transaction and
one across transactions, under REPLICA IDENTITY DEFAULT and FULL, topics of 3 partitions)
are applied to Delta, and the table must equal PostgreSQL's, full values included: in one
batch (the old key's row is in the batch, chains need one pass per link), in batches split
between transactions (the old key's row is in the target table, soft-deleted, and a replay
of the whole topic changes nothing), as a stream, and with hard deletes in one batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from toast_keys import TABLES, Scenario, run_scenario

from bridge.spark.apply import apply_batch, apply_changes
from bridge.spark.reader import ChangeStream, read_changes

MOVED_AWAY = {1, 2, 10, 11}  # every old key: soft-deleted rows


@pytest.fixture(scope="module")
def produced(stack: Any) -> Scenario:
    return run_scenario(stack)


def _read(spark: SparkSession, run: Scenario, table: str) -> DataFrame:
    return read_changes(
        spark,
        [run.topics[table]],
        kafka_options={"kafka.bootstrap.servers": run.cfg.kafka.bootstrap_servers},
        registry_url=run.cfg.registry.url,
    )


def _state(spark: SparkSession, path: str) -> tuple[dict[int, tuple[int, str]], set[int]]:
    rows = spark.read.format("delta").load(path).collect()
    live = {r["id"]: (r["flag"], r["body"]) for r in rows if not r["_deleted"]}
    return live, {r["id"] for r in rows if r["_deleted"]}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_one_batch_equals_postgres(
    spark: SparkSession, produced: Scenario, spark_dir: Path, table: str
) -> None:
    changes = _read(spark, produced, table)
    assert changes.where(sf.col("_oldkey").isNotNull()).count() == 4  # every move's create
    path = str(spark_dir / f"one-{table}")
    apply_batch(changes, path, ["id"])
    assert _state(spark, path) == (produced.rows[table], MOVED_AWAY)


def test_batches_split_between_transactions_equal_postgres(
    spark: SparkSession, produced: Scenario, spark_dir: Path
) -> None:
    """Under REPLICA IDENTITY DEFAULT (FULL's creates are complete by themselves), batches
    of steps [1], [2, 3], [4, 5, 6]: 1 -> 2, 10 -> 11 and 2 -> 3 find the old key in the
    target table (2 itself filled from it), 11 -> 12 in its batch after a first pass."""
    table = "keys_default"
    changes = _read(spark, produced, table).persist()
    lsns = sorted({r["_lsn"] for r in changes.select("_lsn").distinct().collect()})
    assert len(lsns) == 6  # one per step
    path = str(spark_dir / f"split-{table}")
    for low, high in [(lsns[0], lsns[0]), (lsns[1], lsns[2]), (lsns[3], lsns[5])]:
        apply_batch(changes.where(sf.col("_lsn").between(low, high)), path, ["id"])
    changes.unpersist()
    assert _state(spark, path) == (produced.rows[table], MOVED_AWAY)
    apply_batch(_read(spark, produced, table), path, ["id"])  # a replay changes nothing
    assert _state(spark, path) == (produced.rows[table], MOVED_AWAY)


def test_hard_delete_in_one_batch_equals_postgres(
    spark: SparkSession, produced: Scenario, spark_dir: Path
) -> None:
    path = str(spark_dir / "hard")
    apply_batch(_read(spark, produced, "keys_default"), path, ["id"], hard_delete=True)
    assert _state(spark, path) == (produced.rows["keys_default"], set())


def test_streaming_apply_equals_postgres(
    spark: SparkSession, produced: Scenario, spark_dir: Path
) -> None:
    """The headers come through the Kafka stream source too (includeHeaders)."""
    stream = read_changes(
        spark,
        [produced.topics["keys_default"]],
        kafka_options={"kafka.bootstrap.servers": produced.cfg.kafka.bootstrap_servers},
        registry_url=produced.cfg.registry.url,
        tombstones="keep",
        streaming=True,
    )
    assert isinstance(stream, ChangeStream)
    path, checkpoint = str(spark_dir / "stream"), str(spark_dir / "stream-checkpoint")
    query = apply_changes(
        stream, path, ["id"], checkpoint=checkpoint, trigger={"availableNow": True}
    )
    assert query is not None
    assert query.awaitTermination(180)
    assert query.exception() is None
    assert _state(spark, path) == (produced.rows["keys_default"], MOVED_AWAY)
