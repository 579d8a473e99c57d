"""Flink SQL's `debezium-avro-confluent` format materialises a bridge topic equal to the table.

The real bridge streams inserts, updates, deletes and a primary-key change of one
table into Kafka; a PyFlink job (tests/consumers/flink_job.py) reads the topic as a
changelog with Flink's own Debezium Avro format against our registry and applies
what Flink emits. The result must equal the table (values compared as PyFlink and
psycopg return them: int, str, Decimal, datetime.date, bool).

REPLICA IDENTITY FULL: Flink's Debezium formats need the before-image of updates, as
their docs say for Debezium's own PostgreSQL topics (a PostgreSQL setting, not ours).
TRUNCATE is left out: Flink's Debezium formats know no "t" (Debezium skips truncates by
default, `skipped.operations=t`; the bridge's equivalent is filters.skipped_operations).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from running import running
from schema.live import bridge_config, records_in, topics_named, unique, wait_delivered
from waiting import checked, wait_for

from consumers.flink import FlinkSQL

pytestmark = pytest.mark.consumers

DDL = (
    "CREATE TABLE flk (id int4 PRIMARY KEY, name text, amount numeric(10,2), d date, flag bool)",
    "ALTER TABLE flk REPLICA IDENTITY FULL",
)
FLINK_COLUMNS = "`id` INT, `name` STRING, `amount` DECIMAL(10, 2), `d` DATE, `flag` BOOLEAN"
WORKLOAD = (
    "INSERT INTO flk SELECT g, 'n' || g || ' ü', g * 1.25, date '2020-01-01' + g, g % 2 = 0 "
    "FROM generate_series(1, 30) g",
    "INSERT INTO flk (id) VALUES (99)",
    "UPDATE flk SET name = 'changed', amount = -amount, flag = NULL WHERE id % 4 = 0",
    "DELETE FROM flk WHERE id % 5 = 0",
    "UPDATE flk SET id = id + 100 WHERE id IN (1, 2)",
    "UPDATE flk SET name = 'after key change' WHERE id = 101",
)


def test_flink_debezium_avro_confluent_materialises_the_table(
    stack: Any, pg_db: str, pg_conn: psycopg.Connection[Any], flink_sql: FlinkSQL
) -> None:
    for ddl in DDL:
        pg_conn.execute(ddl)
    cfg = bridge_config(stack, pg_db, prefix=unique("flk"))
    topic = f"{cfg.kafka.topic_prefix}.public.flk"
    with running(cfg) as bridge:
        for statement in WORKLOAD:
            pg_conn.execute(statement)
        wait_delivered(bridge, pg_conn, cfg)
        # What Flink will read must be in the topic: the 31 inserts at least. Checked on
        # its own so a missing topic fails here, saying which topics the prefix has.
        wait_for(
            checked(bridge.check, lambda: records_in(cfg, topic) >= 31),
            60,
            f"the 31 inserts in topic {topic}",
            every=0.2,
            detail=lambda: topics_named(cfg, cfg.kafka.topic_prefix),
        )
    result = flink_sql.run(
        {
            "bootstrap": stack.kafka_bootstrap,
            "registry": stack.registry_url,
            "topic": topic,
            "group": unique("flink"),
            "columns": FLINK_COLUMNS,
            "key": ["id"],
        }
    )
    rows = pg_conn.execute("SELECT id, name, amount, d, flag FROM flk").fetchall()
    assert sorted(result["rows"]) == sorted(list(r) for r in rows)
    assert result["kinds"].get("UPDATE_AFTER", 0) > 0 and result["kinds"].get("DELETE", 0) > 0
