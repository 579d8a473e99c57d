"""`filters.exclude_columns` and `kafka.topic_template` through a running Pipeline.

An excluded column is absent from what Kafka holds (the records) and from what the
registry holds (the row schema), not merely null.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from running import running
from schema.live import Decoders, bridge_config, read_topic, unique


def _row_fields(envelope: dict[str, Any]) -> list[str]:
    before = next(f for f in envelope["fields"] if f["name"] == "before")
    return [f["name"] for f in before["type"][1]["fields"]]


def test_excluded_column_is_absent_from_records_and_registered_schema(stack: Any) -> None:
    dbname, prefix = unique("colfilter"), unique("cf")
    stack.create_database(dbname)
    try:
        with psycopg.connect(stack.dsn(dbname), autocommit=True) as conn:
            conn.execute("CREATE TABLE people (id int PRIMARY KEY, name text, ssn text, n int)")
            base = bridge_config(stack, dbname, prefix=prefix)
            cfg = base.model_copy(
                update={
                    "filters": base.filters.model_copy(
                        update={"exclude_columns": (r"public\.people\.ssn",)}
                    ),
                    "kafka": base.kafka.model_copy(
                        update={"topic_template": "{prefix}-{schema}-{table}"}
                    ),
                }
            )
            with running(cfg) as bridge:
                conn.execute("INSERT INTO people VALUES (1, 'Ada', '123-45', 1), (2, 'Bo', 'x', 2)")
                conn.execute("UPDATE people SET ssn = 'changed', n = 3 WHERE id = 1")
                topic = f"{prefix}-public-people"
                received = read_topic(cfg, topic, 3, alive=bridge.alive)
        decoders = Decoders(cfg)
        assert len(received) == 3
        values = [decoders.value(topic, r.value) for r in received]
        assert [(v["op"], v["after"]) for v in values] == [
            ("c", {"id": 1, "name": "Ada", "n": 1}),
            ("c", {"id": 2, "name": "Bo", "n": 2}),
            ("u", {"id": 1, "name": "Ada", "n": 3}),
        ]
        assert [decoders.key(topic, r.key) for r in received] == [{"id": 1}, {"id": 2}, {"id": 1}]
        assert received[0].value is not None
        assert _row_fields(decoders.writer_schema(received[0].value)) == ["id", "name", "n"]
        latest = decoders.client.get_latest_version(f"{topic}-value").schema.schema_str
        assert latest is not None and _row_fields(json.loads(latest)) == ["id", "name", "n"]
    finally:
        stack.drop_database(dbname)
