"""`bridge verify --spark` (`bridge.verify.distributed`, issue 25): the comparison as a
Spark job, with the real bridge, PostgreSQL, Kafka, registry and Spark.

The workload of `test_verify` (many types, unchanged TOASTed values, a primary-key change
over one, a TRUNCATE) must be equal in Spark too, with a change committed after the point
left out of the topic's state. Then the faults of `test_verify` (a record produced by hand:
a ghost; an update, an insert and a delete made while the table was out of the
publication: different, missing, and a missing delete: a ghost) must be found by the Spark
variant exactly as the single-machine verify finds them, key by key. PostgreSQL is read in
small key ranges (snapshot.chunk_size 7), so most tables take several Spark tasks.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession
from running import running
from schema.live import unique
from toast_keys import big_text

from bridge.config import Config
from bridge.verify.repair import repair
from bridge.verify.report import as_json, as_table
from bridge.verify.run import Verification, verify
from verify.live import bridge_config
from verify.test_lake import _delivered
from verify.test_verify import SCHEMA, TABLES, WORKLOAD, _by_table, _counts, _inject_faults


@pytest.fixture
def setup(stack: Any, pg_conn: psycopg.Connection[Any], pg_db: str) -> Config:
    pg_conn.execute(SCHEMA)
    publication = unique("pub")
    pg_conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE {', '.join(TABLES)}, signals")
    cfg = bridge_config(stack, pg_db, publication)
    # kinds' 40 rows in 6 key ranges: 6 Spark tasks, each in the point's snapshot
    return cfg.model_copy(update={"snapshot": cfg.snapshot.model_copy(update={"chunk_size": 7})})


def _seen(result: Verification) -> dict[str, Any]:
    """What each table's verdict says beyond the four counts: rows and keys on each side,
    records read and left out, the differing columns and the sample keys (sorted: the
    single-machine verify lists ghosts in the topic's order, Spark every kind in key order)."""
    return {
        name: (
            t.rows,
            t.live_keys,
            t.records,
            t.after_point,
            dict(t.columns),
            {kind: sorted(keys) for kind, keys in t.samples.items()},
        )
        for name, t in _by_table(result).items()
    }


def test_spark_variant_finds_what_verify_finds(
    setup: Config, pg_conn: psycopg.Connection[Any], spark: SparkSession
) -> None:
    cfg = setup

    def change_after_the_point(message: str) -> None:
        """Once the point is taken: a change the topic holds and the point must not."""
        if message.startswith("verification point"):
            pg_conn.execute("UPDATE kinds SET amount = 5 WHERE id = 1")
            _delivered(cfg, pg_conn)

    pg_conn.execute("INSERT INTO kinds (id, amount, body) VALUES (100, 1, 'before the slot')")
    with running(cfg) as bridge:
        for statement in WORKLOAD:
            pg_conn.execute(statement, {"big": big_text(7)})
        clean = verify(
            cfg, timeout=120, spark=spark, distributed=True, progress=change_after_the_point
        )
        bridge.check()

        _inject_faults(cfg, pg_conn, _by_table(clean)["kinds"].topic)

        in_spark = verify(cfg, timeout=120, spark=spark, distributed=True)
        alone = verify(cfg, timeout=120)
        bridge.check()

    assert clean.ok, as_json(clean)
    assert _counts(clean) == {
        "kinds": (40, 0, 0, 0),  # 39 streamed + 1 from the initial snapshot
        "moved": (2, 0, 0, 0),
        "trunc": (1, 0, 0, 0),
    }
    assert {t.skipped for t in clean.tables} == {None}
    assert _by_table(clean)["kinds"].after_point == 1  # the update after the point
    # every key bucket equal on both sides: no row compared key by key
    assert {t.decoded for t in clean.tables} == {0}
    assert "all tables match" in as_table(clean)

    assert not in_spark.ok
    assert (
        _counts(in_spark)
        == _counts(alone)
        == {
            "kinds": (38, 1, 2, 1),
            "moved": (2, 0, 0, 0),
            "trunc": (1, 0, 0, 0),
        }
    )
    assert _seen(in_spark) == _seen(alone)
    # only the buckets of the four faulty keys are compared key by key
    decoded = {n: t.decoded for n, t in _by_table(in_spark).items()}
    assert 0 < decoded.pop("kinds") < 40
    assert set(decoded.values()) == {0}
    kinds = _by_table(in_spark)["kinds"]
    assert dict(kinds.columns) == {"amount": 1}
    assert kinds.samples == {
        "different": ['{"id": 2}'],
        "missing": ['{"id": 200}'],
        "ghost": ['{"id": 3}', '{"id": 300}'],
    }
    assert "public.kinds: columns that differ: amount (1)" in as_table(in_spark)


def _kinds(result: Verification) -> tuple[int, int, int, int]:
    """(equal, missing, ghosts, different) of kinds, the one table verified."""
    (t,) = result.tables
    return t.equal, t.missing, t.ghosts, t.different


def _to_fix(result: Verification) -> tuple[list[tuple[str, ...]], dict[bytes, tuple[int, bytes]]]:
    """What --repair acts on for kinds: the keys to re-read (sorted: Spark collects them in
    key order, the single-machine verify in PostgreSQL's) and each ghost's partition and
    framed key."""
    kinds = _by_table(result)["kinds"]
    ghosts = {name: (k.partition, k.raw_key) for name, k in kinds.ghost_keys.items()}
    return sorted(kinds.reread_keys), ghosts


def test_spark_repair_converges(
    setup: Config, pg_conn: psycopg.Connection[Any], spark: SparkSession
) -> None:
    """`verify --spark --repair`: the Spark comparison brings back the keys the
    single-machine one finds (a ghost produced by hand, a changed row, a missing row, a
    missing delete), the one repair fixes them, and a second Spark verification is equal."""
    cfg = setup
    kinds = ["public.kinds"]
    with running(cfg) as bridge:
        pg_conn.execute(WORKLOAD[0], {"big": "small"})  # kinds 1-40
        _inject_faults(cfg, pg_conn, f"{cfg.kafka.topic_prefix}.public.kinds")

        found = verify(cfg, kinds, timeout=120, spark=spark, distributed=True, keys_for_repair=True)
        alone = verify(cfg, kinds, timeout=120)
        done = repair(cfg, found, timeout=120)
        again = verify(cfg, kinds, timeout=120, spark=spark, distributed=True)
        bridge.check()

    assert _kinds(found) == _kinds(alone) == (38, 1, 2, 1)
    assert _to_fix(found) == _to_fix(alone)
    reread, ghosts = _to_fix(found)
    assert reread == [("2",), ("200",)]
    assert {_by_table(found)["kinds"].decoder.show_key(k) for k in ghosts} == {
        '{"id": 3}',
        '{"id": 300}',
    }
    assert (done.reread, done.deleted, done.skipped) == (2, 2, 0)
    assert again.ok, as_json(again)  # the CLI's exit code 0
    assert _kinds(again) == (40, 0, 0, 0)
